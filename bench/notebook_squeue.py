"""`%betty squeue` in a real kernel with 1k, 5k and 20k own pending (held) jobs, and its first call.

Run by hand (not a test), with the dev cluster up (BETTY_DEV_CLUSTER_DIR and
BETTY_DEV_CLUSTER_PORT_BASE set as for the tests):
    .venv/bin/python bench/notebook_squeue.py [--sizes 1000,5000,20000] [--repeat 3] [--fresh 5]
        [--transport ssh|local] [--server] [--first-only]

For each size it holds that many of the person's own jobs (submitted in one remote loop),
then, in one kernel, times the cell `%betty squeue --me` against the cell that runs the same
`squeue` with `subprocess.run` over the same transport and builds the DataFrame from its
output (the baseline, in the same kernel, paired and interleaved: best of --repeat), and
reads the kernel's memory above what it held before the first of them. The first call is
timed in --fresh new kernels: `%load_ext betty_jupyter` + `%betty squeue --me` against
`!squeue` (and `!ssh … squeue`, the transport Betty uses). At the end it cancels exactly
the jobs it submitted. `--transport local` has Betty run Slurm's commands itself, as on
Open OnDemand; `--server` has the kernels talk to a Jupyter server's Betty extension, as in
JupyterLab, instead of running Betty in each kernel.

For a whole-process comparison (farm-bench), `--make-project DIR` makes the project once and
`--project DIR --one-cell CODE` starts a new kernel there and runs one cell:
    farm-bench -n 5 --vs "python bench/notebook_squeue.py --project DIR --one-cell '!squeue'" \
        -- python bench/notebook_squeue.py --project DIR --one-cell '%load_ext betty_jupyter
    %betty squeue --me'
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from betty_jupyter.cluster import parsing  # noqa: E402
from jupyter_server_proc import JupyterServer  # noqa: E402
from kernel_driver import Kernel  # noqa: E402
from timing import timed_cell  # noqa: E402

NAME = "betty-bench-notebook"
BASELINE = """\
import subprocess, pandas as pd
_out = subprocess.run({command!r}, capture_output=True, text=True, check=True).stdout
_rows = [line.split({separator!r}) for line in _out.splitlines() if line]
_frame = pd.DataFrame(_rows, columns={names!r})
len(_frame)
"""


def betty(*args: str, env: dict[str, str]) -> str:
    """A ``betty`` command's stdout."""
    done = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", *args], capture_output=True, text=True,
                          env=env, check=True)
    return done.stdout


def ssh_command(cluster: dict[str, str], command: str) -> list[str]:
    """``command`` run on the dev cluster through its SSH alias (the transport Betty's profile uses)."""
    return ["ssh", "-F", cluster["BETTY_DEV_SSH_CONFIG"], cluster["BETTY_DEV_SSH_HOST"], command]


def rss_mib(kernel: Kernel) -> float:
    """The kernel process's resident memory, in MiB."""
    pid = kernel.manager.provisioner.process.pid  # type: ignore[union-attr]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def project(cluster: dict[str, str], root: Path, transport: str = "ssh") -> dict[str, str]:
    """A Betty project on the dev cluster, a chat model configured (never asked); its environment.

    ``transport="local"`` reaches the dev cluster with local commands, as Jupyter on the cluster does (Open
    OnDemand): the transport ``!squeue`` itself uses."""
    env = {**os.environ, **cluster}
    betty("init", str(root), env=env)
    config = json.loads(Path(cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]
    if transport == "local":
        config["clusters"] = [{"name": "betty-dev", "transport": "local", "env": {"SLURM_CONF": cluster["SLURM_CONF"]}}]
    config["llm"] = {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}
    (root / "betty.json").write_text(json.dumps({"BettyConfig": config}))
    return {**env, "BETTY_CONFIG": str(root / "betty.json")}


def first_calls(root: Path, env: dict[str, str], cluster: dict[str, str], fresh: int) -> None:
    """The first `%betty squeue` in new kernels against `!squeue` in new kernels (medians)."""
    cases = {"!squeue": "!squeue --noheader | wc -l",
             "!ssh … squeue": "!" + " ".join(ssh_command(cluster, "squeue --me --noheader | wc -l")),
             "%betty squeue": "%load_ext betty_jupyter\n_q = %betty squeue --me\nlen(_q)"}
    times: dict[str, list[float]] = {name: [] for name in cases}
    modules = ""
    for _ in range(fresh):
        for name, code in cases.items():
            kernel = Kernel(root, env)
            try:
                times[name].append(timed_cell(kernel, code))
                if name == "%betty squeue":
                    modules = kernel.run("import sys; sorted(m for m in ('openai', 'matplotlib', 'pandas', "
                                         "'jsonschema', 'rfc3987_syntax') if m in sys.modules)").text
            finally:
                kernel.close()
    base = statistics.median(times["!squeue"])
    print(f"\nfirst call in a new kernel (median of {fresh}):")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<15} {median * 1000:8.0f} ms  {median / base:6.1f}x !squeue")
    print(f"  imported by the first %betty squeue: {modules}")


def one_cell(args: argparse.Namespace) -> None:
    """``--make-project`` or ``--one-cell``: one step of a whole-process comparison."""
    cluster = json.loads(betty("dev-cluster", "env", "--json", env=dict(os.environ)))
    if args.make_project:
        args.make_project.mkdir(parents=True, exist_ok=True)
        project(cluster, args.make_project, args.transport)
        return
    env = {**os.environ, **cluster, "BETTY_CONFIG": str(args.project / "betty.json")}
    kernel = Kernel(args.project, env)
    try:
        timed_cell(kernel, args.one_cell)
    finally:
        kernel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="%betty squeue with many own jobs, and its first call")
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fresh", type=int, default=5)
    parser.add_argument("--transport", choices=("ssh", "local"), default="ssh",
                        help="how Betty reaches the dev cluster: SSH (a laptop) or local commands (Open OnDemand)")
    parser.add_argument("--first-only", action="store_true", help="time the first call only, no held jobs")
    parser.add_argument("--server", action="store_true",
                        help="kernels talk to a Jupyter server's Betty extension, as in JupyterLab (else Betty runs "
                             "in each kernel)")
    parser.add_argument("--make-project", metavar="DIR", type=Path, help="make the project in DIR, then stop")
    parser.add_argument("--project", metavar="DIR", type=Path, help="with --one-cell: the project made before")
    parser.add_argument("--one-cell", metavar="CODE", help="run CODE in a new kernel in --project, then stop")
    args = parser.parse_args()
    if args.make_project or args.one_cell:
        one_cell(args)
        return
    sizes = sorted(int(size) for size in args.sizes.split(","))
    cluster = json.loads(betty("dev-cluster", "env", "--json", env=dict(os.environ)))
    root = Path(tempfile.mkdtemp(prefix="betty-bench-notebook-"))
    env = project(cluster, root, args.transport)
    server = JupyterServer(root, env, Path(tempfile.mkdtemp(prefix="betty-bench-runtime-"))) if args.server else None
    if server is not None:
        env = {**env, "BETTY_SERVER_URL": server.url, "BETTY_SERVER_TOKEN": server.token}
    fields = parsing.SQUEUE_FIELDS
    squeue = ssh_command(cluster, "squeue --me --noheader --format " + shlex.quote(parsing.format_string(fields)))
    baseline = BASELINE.format(command=squeue, separator=parsing.SEPARATOR, names=[name for _, name in fields])
    try:
        first_calls(root, env, cluster, args.fresh)
        if args.first_only:
            return
        held = 0
        results = []
        print(f"\n{'own jobs':>8} {'baseline':>10} {'%betty squeue':>14} {'ratio':>7} {'kernel +MiB':>12} "
              f"{'output KiB':>11}")
        for size in sizes:
            loop = (f"for i in $(seq {size - held}); do sbatch --hold --job-name={NAME} --output=/dev/null "
                    "--wrap true >/dev/null || exit 1; done")
            subprocess.run(ssh_command(cluster, loop), check=True, capture_output=True, timeout=3600)
            held = size
            kernel = Kernel(root, env)
            try:
                kernel.run("%load_ext betty_jupyter")
                timed_cell(kernel, baseline)  # the baseline's own imports and frame are in the kernel's baseline
                before = rss_mib(kernel)
                plain, magic = [], []
                for _ in range(args.repeat):
                    plain.append(timed_cell(kernel, baseline))
                    magic.append(timed_cell(kernel, "_q = %betty squeue --me\n_q"))
                grown = rss_mib(kernel) - before
                shown = kernel.cells[-1]
                size_out = sum(len(json.dumps(item)) for item in shown.result + shown.displays) / 1024
                rows = kernel.run("len(_q)").text
                if int(rows) < size:
                    raise SystemExit(f"%betty squeue --me gave {rows} rows, fewer than the {size} held")
            finally:
                kernel.close()
            results.append((size, min(plain), min(magic)))
            print(f"{size:8d} {min(plain):9.2f}s {min(magic):13.2f}s {min(magic) / min(plain):6.2f}x "
                  f"{grown:11.0f} {size_out:10.0f}")
        if len(results) > 1:
            (n0, _, t0), (n1, _, t1) = results[0], results[-1]
            print(f"growth exponent of %betty squeue, {n0}→{n1} jobs: {math.log(t1 / t0) / math.log(n1 / n0):.2f}")
    finally:
        subprocess.run(ssh_command(cluster, f"scancel --me --name={NAME}"), check=False, timeout=600)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
