"""Two hosts, one core: a notebook under a Jupyter server with Betty's extension uses the server's Betty.

The kernel finds the extension, and from then on its sessions, approvals and action log
are the server's: an approval asked in the notebook can be answered in the side panel (here
a person answering over REST), and the other way round.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from betty_jupyter.notebook.backend import find_server
from jupyter_server_proc import JupyterServer, PanelPerson
from kernel_driver import Kernel
from llm_server import call, say
from notebook_support import SCRIPT, llm, one_error_line, project, server  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def remote(project: dict[str, Any], server: JupyterServer) -> Iterator[Kernel]:
    """A kernel told where the server is, as a kernel started elsewhere (JupyterHub, a terminal) is."""
    driver = Kernel(project["root"], {**project["env"], "BETTY_SERVER_URL": server.url,
                                      "BETTY_SERVER_TOKEN": server.token})
    try:
        assert driver.run("%load_ext betty_jupyter").status == "ok"
        yield driver
    finally:
        driver.close()


def test_a_kernel_finds_the_server_that_started_it(server: JupyterServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BETTY_SERVER_URL", raising=False)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(server.runtime_dir))
    assert find_server(parent_pid=server.pid) == (server.url, server.token)
    assert find_server(parent_pid=1) is None, "another process's kernel finds no server"


def test_the_magics_say_they_use_the_server(remote: Kernel, server: JupyterServer) -> None:
    assert remote.run("%betty where").text == repr(f"Betty runs in the Jupyter server's Betty extension at {server.url}")


def test_frames_come_back_with_their_types(remote: Kernel) -> None:
    remote.run("%betty sinfo")
    types = remote.run("dict(_.dtypes.astype(str))['time_limit'], _['partition'].tolist()")
    assert re.fullmatch(r"\('timedelta64\[\w+\]', \['cpu', 'gpu'\]\)", types.text), types.text
    remote.run("%betty sacct --since now-1hours")
    assert remote.run("str(_['elapsed'].dtype)").text.startswith("'timedelta64")


def test_the_action_log_names_a_persons_own_call_from_the_notebook(remote: Kernel, server: JupyterServer) -> None:
    remote.run("%betty sinfo")
    actions = server.request("GET", "actions?limit=50")["actions"]
    own = [a for a in actions if a["tool"] == "cluster_partitions" and a["session_id"].startswith("nb-")]
    assert own and own[-1]["approver"] == f"{getpass.getuser()} (notebook)", own


def test_an_approval_asked_in_the_notebook_is_answered_in_the_panel(remote: Kernel, server: JupyterServer) -> None:
    person = PanelPerson(server, lambda approval: approval["tool"] == "cluster_submit")
    person.start()
    try:
        cell = remote.run(f"%%betty submit --slug paneled --goal 'two hosts'\n{SCRIPT.format(name='paneled', seconds=1)}")
        card = cell.widgets[0]
        job = remote.run("submission = _\nsubmission.wait(timeout=60).job_id").text.strip("'")
        assert job.isdigit(), job
        remote.wait_for(lambda: "approved by" in remote.texts(card), what="the card to show the panel's answer")
        assert f"{getpass.getuser()} (server API)" in remote.texts(card), "the card names who answered, elsewhere"
        assert [a["tool"] for a in person.answered] == ["cluster_submit"]
    finally:
        person.stop()
    actions = server.request("GET", "actions?limit=50")["actions"]
    submitted = [a for a in actions if a["tool"] == "cluster_submit" and job in a["summary"]]
    assert len(submitted) == 1 and submitted[0]["session_id"].startswith("nb-"), submitted


def test_a_card_clicked_in_the_notebook_answers_the_server(remote: Kernel, server: JupyterServer) -> None:
    person = PanelPerson(server, lambda approval: approval["tool"] == "cluster_submit")
    person.start()
    try:
        remote.run(f"%%betty submit --slug target --goal 'to cancel'\n{SCRIPT.format(name='target', seconds=300)}")
        job = remote.run("_.wait(timeout=60).job_id").text.strip("'")
    finally:
        person.stop()
    cell = remote.run(f"%betty cancel {job}")
    card = cell.widgets[0]
    pending = server.request("GET", "approvals")["approvals"]
    assert [p["tool"] for p in pending] == ["cluster_cancel"], "the panel sees the notebook's card"
    remote.click(remote.wait_for(lambda: remote.find(card, "betty-approve"), what="the card")[0])
    remote.wait_for(lambda: f"cancelled job {job}" in remote.texts(card), what="the cancellation")
    assert server.request("GET", "approvals")["approvals"] == []
    cancelled = [a for a in server.request("GET", "actions?limit=50")["actions"] if a["tool"] == "cluster_cancel"]
    assert [a["approver"] for a in cancelled] == [f"{getpass.getuser()} (notebook)"], "named by the face clicked"
    refused = remote.run("%betty status 999999")
    assert re.search(r"job 999999 is not known", one_error_line(refused))


def test_an_automations_card_is_answered_from_the_notebook(remote: Kernel, server: JupyterServer, llm) -> None:
    page = {"page": "howto/overnight.md", "mode": "create", "body": "what ran overnight",
            "frontmatter": {"name": "overnight", "description": "notes from the night shift", "type": "howto"}}
    llm.add(call("wiki_write", page), say("Written."))
    made = server.request("POST", "automations", {"name": "Night shift", "prompt": "Write the overnight page."})
    run = server.request("POST", f"automations/{made['id']}/run")["run_id"]
    remote.wait_for(lambda: server.request("GET", "approvals")["approvals"], what="the automation's card")
    cell = remote.run("%betty approvals")
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    root = cell.widgets[0]
    assert "for Night shift" in remote.texts(root) and "howto/overnight.md" in remote.texts(root)
    remote.click(remote.find(root, "betty-approve")[0])
    remote.wait_for(lambda: "approved by" in remote.texts(root), what="the card's record")
    remote.wait_for(lambda: server.request("GET", f"automations/{made['id']}/runs/{run}")["status"] == "done",
                    timeout=120, what="the run to finish")
    assert (Path(remote.run("import os; os.getcwd()").text.strip("'")) / "wiki" / "howto" / "overnight.md").exists()
    assert remote.run("%betty approvals").stdout == "Nothing waits for your approval.\n"
