"""`SlurmClient.queue()` end to end with 5,000 real (held) jobs in the dev cluster's queue.

Run by hand (not a test), with the dev cluster up:
    .venv/bin/python bench/queue_5000.py [--jobs 5000] [--repeat 5]

Submits the held jobs in one remote loop, times queue() through both transports against
the plain `squeue` of the same format over the same transport (the baseline, measured in
the same run), then cancels exactly the jobs it submitted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from betty_jupyter.cluster import parsing  # noqa: E402
from timing import best_of  # noqa: E402
from betty_jupyter.transport.local import LocalTransport  # noqa: E402
from betty_jupyter.cluster.slurm import SlurmClient  # noqa: E402
from betty_jupyter.transport.ssh import SSHTarget, SSHTransport  # noqa: E402
from betty_jupyter.cluster.sync import run_sync  # noqa: E402

NAME = "betty-bench-held"


def main() -> None:
    parser = argparse.ArgumentParser(description="queue() with many jobs")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = json.loads(subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "dev-cluster", "env", "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    local = LocalTransport(env={"SLURM_CONF": env["SLURM_CONF"]})
    ssh = SSHTransport(SSHTarget.from_ssh_config(env["BETTY_DEV_SSH_HOST"], env["BETTY_DEV_SSH_CONFIG"]))
    began = time.perf_counter()
    loop = f"for i in $(seq {args.jobs}); do sbatch --hold --job-name={NAME} --output=/dev/null --wrap true >/dev/null || exit 1; done"
    submitted = run_sync(ssh.run(["sh", "-c", loop], timeout=1800))
    if not submitted.ok:
        raise SystemExit(f"submitting failed: {submitted.stderr.strip()}")
    print(f"submitted {args.jobs} held jobs in {time.perf_counter() - began:.1f} s")
    try:
        squeue = ["squeue", "--noheader", "--format", parsing.format_string(parsing.SQUEUE_FIELDS)]
        print(f"{'transport':<9} {'plain squeue':>13} {'queue()':>10} {'ratio':>7} {'rows':>6}")
        for name, transport in (("local", local), ("ssh", ssh)):
            client = SlurmClient(transport)
            rows = len(run_sync(client.queue()))
            plain = best_of(lambda: run_sync(transport.run(squeue)), args.repeat)
            typed = best_of(lambda: run_sync(client.queue()), args.repeat)
            print(f"{name:<9} {plain * 1000:10.1f} ms {typed * 1000:7.1f} ms {typed / plain:6.2f}x {rows:6d}")
    finally:
        run_sync(ssh.run(["scancel", f"--name={NAME}"]))
        ssh.close_blocking()


if __name__ == "__main__":
    main()
