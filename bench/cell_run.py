"""The round trip of a trivial `%%betty run` cell against `sbatch --wait` of the same code, on the dev cluster.

Run by hand (not a test), with the dev cluster up (BETTY_DEV_CLUSTER_DIR and BETTY_DEV_CLUSTER_PORT_BASE set as for
the tests):
    .venv/bin/python bench/cell_run.py [--repeat 5] [--transport ssh|local] [--in-mib 100]

Betty's round trip is timed from the click on the card's Approve (the person's part is not Betty's overhead) until
`_.result()` has returned the `--out` value in the kernel: the upload, `sbatch`, the job, the looks at it every
poll interval, and bringing `result.json` and `outputs.pkl` back. The baseline is what a person does by hand over
the same transport: `sbatch --wait` of a script running the same code with the same python, then `cat` of its
output. Both run interleaved, --repeat times each; the medians, their ratio, and whether Betty stays within the
target (1.2x the baseline plus one poll interval) are printed.

`--in-mib N` also sends an N MiB float64 array: the bytes `--in` puts on the wire (the cloudpickle payload Betty
uploads over SFTP) against the bytes of the same array saved with `numpy.save` (what `scp` would copy), and the time
of each upload over SSH (Betty's transport's `put` against `scp` of the .npy file), best of --repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from betty_jupyter.notebook.cell_run import POLL_SECONDS  # noqa: E402
from kernel_driver import Kernel  # noqa: E402

CODE = "y = 1 + 1\nprint(y)\n"


def betty(*args: str, env: dict[str, str]) -> str:
    """A ``betty`` command's stdout."""
    return subprocess.run([sys.executable, "-m", "betty_jupyter.cli", *args], capture_output=True, text=True,
                          env=env, check=True).stdout


def project(cluster: dict[str, str], root: Path, transport: str) -> dict[str, str]:
    """A Betty project on the dev cluster whose environment ``bench`` is this python's venv; its environment."""
    env = {**os.environ, **cluster}
    betty("init", str(root / "project"), env=env)
    config = json.loads(Path(cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]
    profile = config["clusters"][0]
    if transport == "local":
        profile = {"name": "betty-dev", "transport": "local", "env": {"SLURM_CONF": cluster["SLURM_CONF"]}}
    profile.update(work_dir=str(root / "work"), environments={"bench": {"venv": sys.prefix}})
    config["clusters"] = [profile]
    config["llm"] = {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}
    (root / "betty.json").write_text(json.dumps({"BettyConfig": config}))
    return {**env, "BETTY_CONFIG": str(root / "betty.json")}


def cluster_command(cluster: dict[str, str], transport: str, command: str) -> list[str]:
    """``command`` as the baseline runs it: over the profile's SSH alias, or here with the dev cluster's SLURM_CONF."""
    if transport == "local":
        return ["sh", "-c", f"SLURM_CONF={cluster['SLURM_CONF']} {command}"]
    return ["ssh", "-F", cluster["BETTY_DEV_SSH_CONFIG"], cluster["BETTY_DEV_SSH_HOST"], command]


def baseline(cluster: dict[str, str], transport: str, root: Path, index: int) -> float:
    """Seconds for ``sbatch --wait`` of a script running CODE with the same python, and reading its output."""
    folder = root / f"plain-{index}"
    folder.mkdir()
    (folder / "cell.py").write_text(CODE)
    (folder / "job.sbatch").write_text(f"#!/bin/bash\n#SBATCH --partition=cpu\n#SBATCH --time=5\n"
                                       f"#SBATCH --chdir={folder}\n#SBATCH --output={folder}/out\n"
                                       f"exec {sys.prefix}/bin/python3 -u cell.py\n")
    began = time.perf_counter()
    subprocess.run(cluster_command(cluster, transport, f"sbatch --wait --quiet {folder}/job.sbatch"), check=True,
                   capture_output=True)
    out = subprocess.run(cluster_command(cluster, transport, f"cat {folder}/out"), check=True, capture_output=True,
                         text=True).stdout
    took = time.perf_counter() - began
    if out.strip() != "2":
        raise SystemExit(f"the plain job printed {out!r}")
    return took


def betty_round_trip(kernel: Kernel) -> float:
    """Seconds from the card's Approve until the cell's --out value is in the kernel."""
    cell = kernel.run(f"%%betty run --partition cpu --time 5 --env bench --out y\n{CODE}")
    if cell.status != "ok" or cell.stderr:
        raise SystemExit(f"%%betty run failed: {cell.stderr}")
    approve = kernel.wait_for(lambda: kernel.find(cell.widgets[0], "betty-approve"), what="the card")[0]
    kernel.run("y = None\n_bench = _")
    began = time.perf_counter()
    kernel.click(approve)
    kernel.wait_for(lambda: not kernel.find(cell.widgets[0], "betty-approve"), what="the approval taking effect")
    done = kernel.run("_bench.result(timeout=300).values['y'], y", timeout=400)
    took = time.perf_counter() - began
    if done.text != "(2, 2)":
        raise SystemExit(f"the cell run gave {done.text!r} {done.errors}")
    return took


def input_transfer(cluster: dict[str, str], root: Path, mib: int, repeat: int) -> None:
    """``--in`` of an ``mib`` MiB array against scp of the same array saved as .npy: bytes and upload time."""
    import numpy as np

    from betty_jupyter.compute.cell_job import pack_inputs
    from betty_jupyter.cluster.profiles import ClusterProfile
    from betty_jupyter.cluster.sync import run_sync

    array = np.random.default_rng(0).random(mib * 2**20 // 8)
    payload, _ = pack_inputs({"array": array}, ["array"])
    np.save(root / "array.npy", array)
    on_disk = (root / "array.npy").stat().st_size
    profile = ClusterProfile(name="betty-dev", host=cluster["BETTY_DEV_SSH_HOST"], ssh_config=cluster["BETTY_DEV_SSH_CONFIG"])
    transport = profile.open_transport()
    target = root / "uploaded"
    put, copied = [], []
    try:
        run_sync(transport.run(["true"]))  # the link is open before anything is timed
        for _ in range(repeat):
            began = time.perf_counter()
            run_sync(transport.put(payload, str(target / "inputs.pkl")))
            put.append(time.perf_counter() - began)
            began = time.perf_counter()
            subprocess.run(["scp", "-q", "-F", cluster["BETTY_DEV_SSH_CONFIG"], str(root / "array.npy"),
                            f"{cluster['BETTY_DEV_SSH_HOST']}:{target}/array.npy"], check=True)
            copied.append(time.perf_counter() - began)
    finally:
        run_sync(transport.close())
    print(f"--in of a {mib} MiB array (best of {repeat}):")
    print(f"  %%betty run --in  {len(payload):>12,} bytes  {min(put):6.2f} s (SFTP put of the pickle)")
    print(f"  scp of the .npy   {on_disk:>12,} bytes  {min(copied):6.2f} s")
    print(f"  bytes ratio {len(payload) / on_disk:.4f}x, time ratio {min(put) / min(copied):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--transport", choices=["ssh", "local"], default="ssh")
    parser.add_argument("--in-mib", type=int, default=0, metavar="N", help="also time --in of an N MiB array vs scp")
    args = parser.parse_args()
    cluster = json.loads(betty("dev-cluster", "env", "--json", env=dict(os.environ)))
    with tempfile.TemporaryDirectory(prefix="betty-bench-cell-") as folder:
        root = Path(folder)
        env = project(cluster, root, args.transport)
        kernel = Kernel(root / "project", env)
        try:
            kernel.run("%load_ext betty_jupyter")
            betty_round_trip(kernel)  # the first run imports cloudpickle and opens the link: not what is measured
            times: dict[str, list[float]] = {"sbatch --wait": [], "%%betty run": []}
            for index in range(args.repeat):
                times["sbatch --wait"].append(baseline(cluster, args.transport, root, index))
                times["%%betty run"].append(betty_round_trip(kernel))
        finally:
            kernel.close()
        if args.in_mib:
            input_transfer(cluster, root, args.in_mib, args.repeat)
    plain, cell = (statistics.median(times[name]) for name in ("sbatch --wait", "%%betty run"))
    target = 1.2 * plain + POLL_SECONDS
    print(f"round trip of a trivial cell over {args.transport} (median of {args.repeat}):")
    for name, values in times.items():
        print(f"  {name:<14} {statistics.median(values):6.2f} s   (all: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"  ratio {cell / plain:.2f}x; target 1.2x + one poll interval ({POLL_SECONDS:g} s) = {target:.2f} s: "
          f"{'met' if cell <= target else 'missed'}")


if __name__ == "__main__":
    main()
