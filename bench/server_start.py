"""What Betty's server extension adds to a Jupyter server's start-up (target: well under 0.3 s).

Run by hand (not a test):  .venv/bin/python bench/server_start.py [--rounds 7]

Each round is a fresh Python process that imports jupyter_server, then times
``ServerApp.initialize()`` — with Betty's extension enabled, and as the baseline without it
(every other extension off in both, so only Betty differs), measured in the same run. It
prints the medians, the difference and the ratio, and which heavy modules (pandas, openai,
paramiko, matplotlib) the start-up loaded. Betty's agent (its Assistant) is built later, once
the server's loop runs and the server already answers, or at the first Betty request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

PROBE = """
import json, sys, time, tempfile
import jupyter_server.serverapp as serverapp
root = tempfile.mkdtemp()
argv = ["--no-browser", "--port=0", "--ServerApp.root_dir=" + root, "--IdentityProvider.token=bench",
        "--ServerApp.jpserver_extensions=" + sys.argv[1]]
if __import__("os").geteuid() == 0:
    argv.append("--allow-root")
app = serverapp.ServerApp()
began = time.perf_counter()
app.initialize(argv=argv, find_extensions=False, new_httpserver=False)
seconds = time.perf_counter() - began
heavy = [m for m in ("pandas", "openai", "paramiko", "matplotlib") if m in sys.modules]
print(json.dumps({"seconds": seconds, "heavy": heavy}))
"""


def once(extensions: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as config_dir:
        env_run = subprocess.run([sys.executable, "-c", PROBE, extensions], capture_output=True, text=True,
                                 timeout=120, env={"JUPYTER_CONFIG_DIR": config_dir, "PATH": "/usr/bin:/bin"})
    if env_run.returncode != 0:
        raise SystemExit(f"the probe failed: {env_run.stderr.strip()[-2000:]}")
    result: dict[str, object] = json.loads(env_run.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with_betty: list[float] = []
    without: list[float] = []
    heavy: set[str] = set()
    for _ in range(args.rounds):  # interleaved, so a busy moment hurts both alike
        betty = once("{'betty_jupyter': True}")
        with_betty.append(float(betty["seconds"]))  # type: ignore[arg-type]
        heavy.update(betty["heavy"])  # type: ignore[arg-type]
        without.append(float(once("{}")["seconds"]))  # type: ignore[arg-type]
    on, off = statistics.median(with_betty), statistics.median(without)
    print(f"ServerApp.initialize(), median of {args.rounds}: with Betty {on * 1000:.0f} ms, "
          f"without {off * 1000:.0f} ms (baseline)")
    print(f"Betty adds {(on - off) * 1000:.0f} ms ({on / off:.2f}x the baseline); heavy modules loaded at start: "
          f"{', '.join(sorted(heavy)) or 'none'}")


if __name__ == "__main__":
    main()
