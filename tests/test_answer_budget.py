"""Every answer a model is handed of a 20,000-job queue holds to the one budget (``agent/budget.py``): Betty's scripted
cluster answers ``squeue`` in Slurm's own format under the real loop, policy and action log, and the scripted model
over real HTTP sees counts, a page of the person's newest jobs, and how to ask for the next page; it asks, and gets it.
The MCP faces are handed the same text (``tests/test_mcp*.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import run_betty
from llm_server import ScriptedLLM, call, say
from test_agent_loop_fast import turn
from test_condense import queue_text

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.budget import ANSWER_CHARS
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.experiments.workspace import Workspace

JOBS = 20_000
MINE = set(range(0, JOBS, 2))


def test_a_20000_job_queue_reaches_the_model_as_pages_within_the_budget(tmp_path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    cluster = ScriptedTransport().on("squeue", stdout=queue_text(JOBS, MINE)).on("id", "-un", stdout="alice\n")
    with ScriptedLLM() as llm:
        llm.add(call("cluster_queue", {}), call("cluster_queue", {"offset": 40}), say("You have 10000 jobs."))
        reasons, _, session_id = asyncio.run(turn(workspace, llm, cluster, {"cluster_queue": "approved"},
                                                  "how many jobs do I have?"))
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert reasons == ["finished"] and len(told) == 2
    first, second = told
    newest = 10_000 + max(MINE)
    for page in told:
        assert len(page) <= ANSWER_CHARS and f"{JOBS} job(s): " in page and "all 10000 jobs of alice:" in page
        assert page.count("| alice |") == 40
    assert f"\n{newest} | " in first and first.endswith(
        "[rows 1–40 of 20000 shown; call again with offset=40 for the next ones, or narrow with states, partition "
        "or user]")
    assert f"\n{newest - 80} | " in second and f"\n{newest - 78} | " not in second  # the next 40 of alice's
    assert "[rows 41–80 of 20000 shown; call again with offset=80" in second
    # the action log keeps the page the model was told, not the whole queue
    log = ActionLog(workspace.root)
    outputs = [log.output(record) for record in log.read(session_id=session_id)]
    assert outputs == told


READ_WITHOUT_PANDAS = """
import asyncio, sys
sys.path.insert(0, "tests")
from test_condense import queue_text
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.cluster.tables import QUEUE_COLUMNS
from betty_jupyter.cluster.text_tables import rows_table
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace

async def main():
    cluster = ScriptedTransport().on("squeue", stdout=queue_text(2_000, {1, 5})).on("id", "-un", stdout="alice\\n")
    config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}])
    session = await open_session(Workspace.at(sys.argv[1]), config, SessionSpec(
        broker=ApprovalBroker(), transport=cluster, require_model=False, reads_cluster_facts=False,
        tools=("cluster_queue",)))
    outcome = await session.run_tool("cluster_queue", {}, "tester")
    table = rows_table(outcome.table.rows, QUEUE_COLUMNS)
    print(outcome.summary.splitlines()[0], "pandas" in sys.modules, len(table.splitlines()), sep="\\n")

asyncio.run(main())
"""


def test_a_queue_read_for_a_text_table_is_logged_without_loading_pandas(tmp_path) -> None:
    """What ``betty jobs`` does: the tool runs as the person, the action log keeps the bounded page, and the text
    table is printed from plain rows; pandas is never imported (the panel and the model parse the same text)."""
    import subprocess
    import sys

    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    done = subprocess.run([sys.executable, "-c", READ_WITHOUT_PANDAS, str(tmp_path / "project")], capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    summary, pandas_loaded, lines = done.stdout.splitlines()
    assert summary.startswith("2000 job(s): ") and pandas_loaded == "False" and lines == "2001"
    (record,) = ActionLog(tmp_path / "project").read()
    page = ActionLog(tmp_path / "project").output(record) or ""
    assert "2000 rows." in page and "[rows 1–40 of 2000 shown; call again with offset=40" in page
