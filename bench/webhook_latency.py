"""How fast an automation's webhook is answered (202) while its runs take seconds, against a baseline.

Run by hand (not a test):  .venv/bin/python bench/webhook_latency.py [--rounds 40] [--run-seconds 2]

It starts a real ``jupyter server`` with Betty on a fresh project and a scripted chat model
whose every answer takes ``--run-seconds`` (so each run lasts that long), defines a webhook
automation, then times, interleaved on one kept-alive connection each, ``POST
/betty/api/hooks/<id>`` (the secret, a fresh delivery id) and the baseline ``GET
/betty/api/health`` (a token): both go through the same server and Betty's handler base, so
the ratio says what queuing a run adds. It prints medians, 95th percentiles, the ratio, and how
many 202s came while their run had not started (every one should: nothing runs before the
answer). The runs left are killed at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from jupyter_server_proc import JupyterServer  # noqa: E402  (the test suite's helpers)
from llm_server import ScriptedLLM, say, stall  # noqa: E402


def timed(connection: http.client.HTTPConnection, method: str, path: str, headers: dict[str, str],
          body: bytes | None = None) -> tuple[float, int, Any]:
    """(seconds, status, decoded answer) of one request on a kept-alive connection."""
    began = time.perf_counter()
    connection.request(method, path, body=body, headers=headers)
    answer = connection.getresponse()
    data = answer.read()
    return time.perf_counter() - began, answer.status, json.loads(data) if data else None


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--run-seconds", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp, ScriptedLLM() as llm:
        llm.add(*[stall(args.run_seconds, say("looked at it")) for _ in range(args.rounds + 10)])
        server = start(Path(temp), llm)
        try:
            hooks, health, queued = measure(server, args.rounds)
        finally:
            server.stop()
    report(hooks, health, queued, args)


def start(temp: Path, llm: ScriptedLLM) -> JupyterServer:
    from betty_jupyter.wiki import init_workspace

    root, config_dir, runtime = temp / "project", temp / "jupyter-config", temp / "runtime"
    init_workspace(root)
    config_dir.mkdir()
    runtime.mkdir()
    settings = temp / "betty.json"
    settings.write_text(json.dumps({"BettyConfig": {
        "clusters": [{"name": "bench", "transport": "local"}],
        "llm": {"base_url": llm.base_url, "model": "scripted", "max_retries": 0}}}))
    env = {**os.environ, "BETTY_CONFIG": str(settings), "JUPYTER_CONFIG_DIR": str(config_dir)}
    env.pop("SLURM_CONF", None)
    return JupyterServer(root, env, runtime)


def measure(server: JupyterServer, rounds: int) -> tuple[list[float], list[float], int]:
    made = server.request("POST", "automations", {"name": "Bench hook", "prompt": "Look at the delivery.",
                                                  "trigger": {"kind": "webhook",
                                                              "template": "{{ payload.build.id }}"}})
    hook_path, secret = f"/betty/api/hooks/{made['id']}", made["secret"]
    token = {"Authorization": f"token {server.token}"}
    hooks_link = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    health_link = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    hooks, health, queued = [], [], 0
    try:
        for number in range(-3, rounds):  # three warm-up rounds of each, not counted
            body = json.dumps({"build": {"id": number}}).encode()
            seconds, status, answer = timed(hooks_link, "POST", hook_path, {
                "X-Betty-Secret": secret, "X-Betty-Delivery": f"bench-{number}",
                "Content-Type": "application/json"}, body)
            assert status == 202, (status, answer)
            baseline, status, _ = timed(health_link, "GET", "/betty/api/health", token)
            assert status == 200
            if number >= 0:
                hooks.append(seconds)
                health.append(baseline)
                queued += answer["status"] == "queued"
    finally:
        server.request("POST", f"automations/{made['id']}/kill")
        hooks_link.close()
        health_link.close()
    return hooks, health, queued


def report(hooks: list[float], health: list[float], queued: int, args: argparse.Namespace) -> None:
    hook_median, health_median = statistics.median(hooks), statistics.median(health)
    print(f"POST hooks/<id> → 202, {len(hooks)} deliveries while each run takes {args.run_seconds:g} s: "
          f"median {hook_median * 1000:.1f} ms, p95 {percentile(hooks, 0.95) * 1000:.1f} ms")
    print(f"GET health (baseline, same run):  median {health_median * 1000:.1f} ms, "
          f"p95 {percentile(health, 0.95) * 1000:.1f} ms")
    print(f"webhook / baseline: {hook_median / health_median:.2f}x the median; "
          f"answered before their run started: {queued}/{len(hooks)}")


if __name__ == "__main__":
    main()
