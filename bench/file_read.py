"""A checked file read over SSH: `cluster_run`'s `cat`, as the allowlist runs it, to the dev cluster's sshd.

Run by hand (not a test), with the dev cluster up:
    .venv/bin/python bench/file_read.py [--calls 100]

Each call is :func:`run_allowed` with ``cat`` of a small file under a readable root: the policy
check, then the read on the cluster. Prints the median per call in ms. To compare two versions
of Betty in one run, time this script under each with `PYTHONPATH` pointing at the other checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from betty_jupyter.cluster.commands import run_allowed  # noqa: E402
from betty_jupyter.cluster.allowlist import CommandPolicy  # noqa: E402
from betty_jupyter.cluster.profiles import ClusterProfile  # noqa: E402
from betty_jupyter.devcluster import DevCluster  # noqa: E402


async def main(calls: int) -> None:
    env = DevCluster().layout.env()
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "train.log"
        path.write_text("".join(f"step={i} loss={1 / (i + 1):.4f}\n" for i in range(200)))
        profile = ClusterProfile(name="bench", transport="ssh", host=env["BETTY_DEV_SSH_HOST"],
                                 ssh_config=env["BETTY_DEV_SSH_CONFIG"], readable_roots=(os.path.realpath(root),))
        transport = profile.open_transport()
        policy = CommandPolicy(readable_roots=profile.readable_roots)
        command = ["cat", os.path.realpath(path)]
        try:
            await run_allowed(transport, policy, command)  # connect and warm up
            samples = []
            for _ in range(calls):
                began = time.perf_counter()
                result = await run_allowed(transport, policy, command)
                samples.append(time.perf_counter() - began)
                assert result.stdout.startswith("step=0"), result.stderr
        finally:
            await transport.close()
    print(f"checked cat over ssh: median {statistics.median(samples) * 1000:.2f} ms per call ({calls} calls)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    asyncio.run(main(parser.parse_args().calls))
