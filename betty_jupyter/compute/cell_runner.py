"""The program a ``%%betty run`` job runs on the compute node: the cell, its inputs, its figures, its outputs.

It is uploaded beside the cell (``cell.py``) into the run's directory and started there by the
job's script with the environment's ``python3``. It needs only the standard library; cloudpickle
only when the cell takes ``--in`` or gives ``--out`` values, matplotlib only when the cell uses it.

It is started with the run's token, and runs nothing unless ``run.json`` names the same token
(so a directory swapped for another run's runs nothing). It reads ``run.json`` (the ``--out``
names and the size cap), ``inputs.pkl`` when present, runs the cell as ``__main__`` with the
inputs as its globals, saves every open matplotlib figure as ``figure-N.png``, pickles the
``--out`` values into ``outputs.pkl`` and writes ``result.json`` last: its presence says the cell
has ended. Just before, it signs what comes back (:func:`signature`, with the run's own key from
``run.key``) into ``result.sig``; the kernel loads nothing whose signature does not match. What
the cell prints goes to the job's stdout and stderr as it would in the notebook. The exit status
is 0 when the cell ran, 1 when it raised (or the directory was not the run's).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import linecache
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Mapping

CELL_FILE = "<cell>"
SIGNED = ("result.json", "outputs.pkl")
"""The files a signature covers besides the figures ``result.json`` names."""


def signature(key: bytes, token: str, files: Mapping[str, bytes | None]) -> str:
    """HMAC-SHA256 with the run's key over its token and each file's name and digest (None: the file is absent)."""
    mac = hmac.new(key, b"betty cell run 1\0" + token.encode() + b"\0", hashlib.sha256)
    for name in sorted(files):
        data = files[name]
        digest = b"-" if data is None else hashlib.sha256(data).hexdigest().encode()
        mac.update(name.encode() + b"\0" + digest + b"\0")
    return mac.hexdigest()


def main(folder: Path, token: str) -> int:
    """Run the cell in ``folder``; 0 when it ran to its end, 1 when it raised (its traceback in the result)."""
    settings = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    if settings.get("token") != token:
        print("betty: this directory holds another run than the job's; the cell was not run", file=sys.stderr)
        return 1
    key = bytes.fromhex((folder / "run.key").read_text(encoding="utf-8").strip())
    code = (folder / "cell.py").read_text(encoding="utf-8")
    result: dict[str, Any] = {"ok": True, "error": None, "figures": [], "outs": {}, "problems": []}
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    if (folder / "inputs.pkl").exists():
        namespace.update(_unpickled((folder / "inputs.pkl").read_bytes()))
    linecache.cache[CELL_FILE] = (len(code), None, code.splitlines(keepends=True), CELL_FILE)
    try:
        exec(compile(code, CELL_FILE, "exec"), namespace)
    except BaseException as error:  # the cell's own failure, KeyboardInterrupt and SystemExit too: all are its result
        result["ok"] = False
        result["error"] = _cell_traceback(error)
    sys.stdout.flush()
    sys.stderr.flush()
    result["figures"] = _save_figures(folder)
    outs, problems = _outputs(namespace, settings.get("outs", []), int(settings.get("max_out_bytes", 0)), folder)
    result["outs"], result["problems"] = outs, problems
    _finish(folder, key, token, json.dumps(result).encode())
    return 0 if result["ok"] else 1


def _finish(folder: Path, key: bytes, token: str, result: bytes) -> None:
    """Sign what comes back into ``result.sig``, then put ``result.json`` in place: the cell has ended."""
    figures = [str(name) for name in json.loads(result)["figures"]]
    files = {name: (folder / name).read_bytes() if (folder / name).exists() else None for name in (*SIGNED, *figures)}
    files["result.json"] = result
    (folder / "result.sig").write_text(signature(key, token, files), encoding="utf-8")
    temp = folder / ".result.json"
    temp.write_bytes(result)
    os.replace(temp, folder / "result.json")


def _unpickled(data: bytes) -> dict[str, Any]:
    import cloudpickle  # lazy: only a cell that takes --in values needs it on the node

    values = cloudpickle.loads(data)
    return dict(values)


def _cell_traceback(error: BaseException) -> str:
    """The traceback from the cell's own frames on (the runner's frame left out)."""
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename != CELL_FILE:
        frames = frames.tb_next
    return "".join(traceback.format_exception(type(error), error, frames))


def _save_figures(folder: Path) -> list[str]:
    """Every figure the cell left open, as ``figure-N.png`` (none when it never imported matplotlib)."""
    if "matplotlib.pyplot" not in sys.modules:
        return []
    pyplot = sys.modules["matplotlib.pyplot"]
    names = []
    for number, figure_id in enumerate(pyplot.get_fignums(), start=1):
        name = f"figure-{number}.png"
        pyplot.figure(figure_id).savefig(folder / name, format="png", bbox_inches="tight")
        names.append(name)
    return names


def _outputs(namespace: dict[str, Any], names: list[str], cap: int,
             folder: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Pickle the ``--out`` values into ``outputs.pkl``; what was sent back, and why any was not."""
    if not names:
        return {}, []
    problems = [f"--out {name}: the cell did not set {name}" for name in names if name not in namespace]
    try:
        import cloudpickle  # lazy: only a cell that gives --out values needs it on the node
    except ImportError:
        return {}, [f"--out: cloudpickle is not installed in the job's environment, so {', '.join(names)} cannot "
                    "come back; install it there (pip install cloudpickle)"]
    pickled: dict[str, bytes] = {}
    shown: dict[str, dict[str, Any]] = {}
    for name in names:
        if name not in namespace:
            continue
        try:
            pickled[name] = cloudpickle.dumps(namespace[name])
        except Exception as error:  # whatever pickling raises, it is this value's problem, said in one line
            problems.append(f"--out {name}: a {_type_name(namespace[name])} cannot be pickled ({error})")
            continue
        shown[name] = {"type": _type_name(namespace[name]), "bytes": len(pickled[name])}
    total = sum(len(data) for data in pickled.values())
    if cap and total > cap:
        return {}, [f"--out: the values are {total} bytes pickled, more than the {cap} bytes that come back; "
                    "save large results to a file on the cluster and return its path"]
    (folder / "outputs.pkl").write_bytes(cloudpickle.dumps(pickled))
    return shown, problems


def _type_name(value: object) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


if __name__ == "__main__":
    # "." and never the directory's name: the job's script checked the directory it entered, and another user who
    # can rename what leads to it must not redirect a file the runner reads or writes
    sys.exit(main(Path("."), sys.argv[1] if len(sys.argv) > 1 else ""))
