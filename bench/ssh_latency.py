"""Warm command latency to the dev cluster's sshd: Betty's two SSH transports vs plain OpenSSH.

Run by hand (not a test), with the dev cluster up:
    .venv/bin/python bench/ssh_latency.py [--calls 200]

Four ways to run the same command, all to the loopback sshd, in one run:
  paramiko      SSHTransport (``transport: ssh``): persistent remote shells on one paramiko connection
  openssh       OpenSSHTransport (``transport: openssh``): persistent remote shells, each an ``ssh``
                session multiplexed over one master connection
  controlmaster a new `ssh` process per call over an OpenSSH ControlMaster socket (ControlPersist)
  fresh         a new `ssh` process and connection per call
Reported: p50/p95 in ms for `squeue` and for `true` (pure overhead), and ratios to ControlMaster
and of openssh to paramiko.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from betty_jupyter.transport.openssh import OpenSSHTransport  # noqa: E402
from betty_jupyter.transport.ssh import SSHTarget, SSHTransport  # noqa: E402


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


def timed(call, calls: int) -> list[float]:
    call()  # warm up
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        call()
        samples.append(time.perf_counter() - began)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description="warm SSH command latency")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    env = json.loads(subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "dev-cluster", "env", "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    config, host = env["BETTY_DEV_SSH_CONFIG"], env["BETTY_DEV_SSH_HOST"]
    transport = SSHTransport(SSHTarget.from_ssh_config(host, config))
    with tempfile.TemporaryDirectory(prefix="bench-ssh-") as tmp:
        control = ["-o", "ControlMaster=auto", "-o", f"ControlPath={tmp}/cm-%C", "-o", "ControlPersist=60"]
        own_config = Path(tmp) / "config"
        own_config.write_text(Path(config).read_text() + f"    ControlPath {tmp}/betty-%C\n")
        openssh = OpenSSHTransport(host, str(own_config))
        rows = []
        for command in (["squeue"], ["true"]):
            betty = timed(lambda: transport.run_blocking(tuple(command)), args.calls)
            multiplexed = timed(lambda: openssh.run_blocking(tuple(command)), args.calls)
            master = timed(lambda: subprocess.run(["ssh", "-F", config, *control, host, *command],
                                                  capture_output=True, check=True), args.calls)
            fresh = timed(lambda: subprocess.run(["ssh", "-F", config, host, *command],
                                                 capture_output=True, check=True), max(20, args.calls // 10))
            rows.append((" ".join(command), percentiles(betty), percentiles(multiplexed), percentiles(master),
                         percentiles(fresh)))
        subprocess.run(["ssh", "-F", config, *control, "-O", "exit", host], capture_output=True)
        openssh.close_blocking()
        openssh.exit_master()
    transport.close_blocking()
    print(f"{args.calls} warm calls each ({max(20, args.calls // 10)} for fresh ssh); times in ms")
    print(f"{'command':<8} {'paramiko p50/p95':>17} {'openssh p50/p95':>16} {'ControlMaster p50/p95':>22} "
          f"{'fresh ssh p50/p95':>18} {'openssh/paramiko':>17} {'paramiko/CM':>12} {'openssh/CM':>11}")
    for name, (b50, b95), (o50, o95), (m50, m95), (f50, f95) in rows:
        print(f"{name:<8} {b50:8.2f}/{b95:7.2f} {o50:7.2f}/{o95:7.2f} {m50:12.2f}/{m95:8.2f} "
              f"{f50:9.2f}/{f95:7.2f} {o50 / b50:16.2f}x {b50 / m50:11.3f}x {o50 / m50:10.3f}x")


if __name__ == "__main__":
    main()
