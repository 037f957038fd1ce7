"""One queue read with 20,000 jobs, as each face gets it: server CPU per call, what each face is handed, and the
memory a process keeps per displayed table. No cluster: Betty's scripted cluster answers ``squeue`` in Slurm's
format under the real session, policy and action log.

Run by hand (not a test), from the checkout to measure:
    PYTHONPATH=. .venv/bin/python bench/queue_answer.py [--jobs 20000] [--repeat 5] [--displays 5]

Per call (best of --repeat): the tool call as a person's (what ``betty jobs`` and ``%betty squeue`` do, its
action-log line included), then the model's page (``condense``), then the panel's JSON (``outcome_to_json``), then
an MCP client's answer (``BettyServices.agent_call``'s: text, no table). Then, after a first one, --displays job tables as
``%betty squeue`` shows them (the widget, the DataFrame it returns and the call's outcome, all kept alive, as a
notebook keeps its outputs), and the process's resident memory after each, above what it held before the first.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
from pathlib import Path

from betty_jupyter.agent.approvals import ApprovalBroker  # noqa: E402
from betty_jupyter.agent.condense import condense  # noqa: E402
from betty_jupyter.agent.session import SessionSpec, open_session  # noqa: E402
from betty_jupyter.agent.wire import outcome_to_json  # noqa: E402
from betty_jupyter.cluster.parsing import SEPARATOR  # noqa: E402
from betty_jupyter.cluster.scripted import ScriptedTransport  # noqa: E402
from betty_jupyter.config import BettyConfig  # noqa: E402
from betty_jupyter.experiments.workspace import Workspace  # noqa: E402


def queue_text(jobs: int) -> str:
    """``squeue`` output in Betty's pinned format: ``jobs`` jobs, every other one alice's."""
    states = ["PENDING", "RUNNING", "COMPLETING"]
    lines = []
    for number in range(jobs):
        user = "alice" if number % 2 == 0 else f"user{number % 300}"
        fields = [str(10_000 + number), "", "", f"train-{number}", user, "proj", ("gpu", "cpu", "debug")[number % 3],
                  states[number % 3], "Priority", "1:00:00", "2-00:00:00", "1", "8", "32G", "gres/gpu:a100:2",
                  "", "2026-11-20T09:00:00", "N/A", ""]
        lines.append(SEPARATOR.join(fields))
    return "\n".join(lines) + "\n"


def rss_mib() -> float:
    """This process's resident memory now, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description="one queue read with many jobs, per face")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--displays", type=int, default=5)
    args = parser.parse_args()
    text = queue_text(args.jobs)
    cluster = ScriptedTransport().on("squeue", stdout=text).on("id", "-un", stdout="alice\n")
    with tempfile.TemporaryDirectory() as home:
        workspace = Workspace.at(home)
        config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}])
        session = await open_session(workspace, config, SessionSpec(
            broker=ApprovalBroker(), transport=cluster, require_model=False, reads_cluster_facts=False,
            tools=("cluster_queue",)))
        best: dict[str, float] = {}
        sizes: dict[str, int] = {}
        for _ in range(args.repeat):
            began = time.process_time()
            outcome = await session.run_tool("cluster_queue", {}, "bench")
            marks = {"call (tool, action log)": time.process_time() - began}
            began = time.process_time()
            told = condense(outcome, session.user)
            marks["model's page"] = time.process_time() - began
            began = time.process_time()
            panel = json.dumps(outcome_to_json(outcome))
            marks["panel's JSON"] = time.process_time() - began
            began = time.process_time()
            try:  # what BettyServices.agent_call answers an MCP client: the text, a table's rows left out
                mcp = json.dumps(outcome_to_json(outcome, condense(outcome, session.user), with_data=False))
            except TypeError:  # a Betty that sends the whole table with the text
                mcp = json.dumps(outcome_to_json(outcome, condense(outcome, session.user)))
            marks["MCP answer"] = time.process_time() - began
            for name, took in marks.items():
                best[name] = min(best.get(name, took), took)
            sizes = {"model's page": len(told), "panel's JSON": len(panel), "MCP answer": len(mcp)}
        print(f"{args.jobs} jobs, best of {args.repeat} (CPU seconds):")
        for name, took in best.items():
            print(f"  {name:<24} {took * 1000:8.1f} ms" + (f"  {sizes[name]:>10,} bytes" if name in sizes else ""))
        from betty_jupyter.notebook.display import job_frame  # the notebook's own view of the same answer
        from betty_jupyter.notebook.widgets.jobs import JobTable
        from betty_jupyter.cluster.tables import QUEUE_COLUMNS

        kept = []
        before = 0.0
        for shown in range(0, args.displays + 1):
            outcome = await session.run_tool("cluster_queue", {}, "bench")
            frame = outcome.data
            table = JobTable("queue", frame, QUEUE_COLUMNS, lambda: frame, mine="alice")
            kept.append((outcome, job_frame(frame, table)))  # the outcome too, as a notebook's `_` may keep it
            del outcome, frame, table
            gc.collect()
            if shown == 0:  # the first loads the widgets' modules: the displays after it are measured
                before = rss_mib()
                continue
            print(f"  display {shown}: {rss_mib() - before:+6.1f} MiB resident above the first display")
        await session.context.close()


if __name__ == "__main__":
    asyncio.run(main())
