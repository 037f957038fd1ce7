"""Chats are kept per cluster and can be reopened, in Debian's Chromium against a real JupyterLab and the dev
cluster: switching the cluster picker away and back reopens the chat left there with its transcript, an earlier
chat is reopened from the chat list after "New chat", and the list survives a reload of the page."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, say
from notebook_support import llm, new_project  # noqa: F401 (llm is a fixture)
from panel_support import WAIT_MS, lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Locator, Page, expect

pytestmark = pytest.mark.cluster

QUESTION = "what partitions does this cluster have? <img src=x onerror=\"window.__pwned=1\">"
ANSWER = "Two partitions: debug and gpu."


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory,
            llm: ScriptedLLM) -> dict[str, Any]:  # noqa: F811
    """A project with the dev cluster and a second profile of it, ``second``."""
    first = json.loads(Path(dev_cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]["clusters"][0]
    return new_project(tmp_path_factory.mktemp("chats-project"), dev_cluster, llm,
                       more_clusters=({**first, "name": "second"},))


def test_a_chat_is_kept_per_cluster_and_reopened_with_its_transcript(
        lab: JupyterServer, page: Page, llm: ScriptedLLM, project: dict[str, Any]) -> None:  # noqa: F811
    with screenshot_on_failure(page, "failure", "chats"):
        panel = open_the_panel(page, lab)
        picker = panel.get_by_test_id("betty-cluster-picker")
        expect(picker).to_have_value(project_default(project))
        llm.add(say(ANSWER))
        panel.get_by_test_id("betty-prompt").fill(QUESTION)
        panel.get_by_test_id("betty-send").click()
        expect(panel.get_by_test_id("betty-message-assistant")).to_contain_text(ANSWER)

        picker.select_option("second")
        connected(panel)
        expect(panel.get_by_test_id("betty-message-user")).to_have_count(0)
        picker.select_option(project_default(project))
        connected(panel)
        expect(panel.get_by_test_id("betty-message-user")).to_contain_text(QUESTION)  # the same chat, replayed
        expect(panel.get_by_test_id("betty-message-assistant")).to_contain_text(ANSWER)
        assert page.evaluate("window.__pwned") is None

        panel.get_by_test_id("betty-new-chat").click()
        connected(panel)
        expect(panel.get_by_test_id("betty-message-user")).to_have_count(0)
        reopen(panel)
        expect(panel.get_by_test_id("betty-message-assistant")).to_contain_text(ANSWER)
        screenshot(page, "reopened", "chats")

        # A reload of the page: the list is still there, and the chat comes back from it.
        panel.get_by_test_id("betty-new-chat").click()
        connected(panel)
        kept_by_jupyterlab(page, lab, chats=4, cluster=project_default(project))
        page.goto(f"{lab.url}lab?betty=open&token={lab.token}")  # no ?reset: JupyterLab keeps its state
        expect(panel).to_be_visible()
        connected(panel)
        reopen(panel)
        expect(panel.get_by_test_id("betty-message-user")).to_contain_text(QUESTION)
        expect(panel.get_by_test_id("betty-message-assistant")).to_contain_text(ANSWER)
        assert panel.locator("img").count() == 0 and page.evaluate("window.__pwned") is None


def project_default(project: dict[str, Any]) -> str:
    """The project's default cluster: the dev cluster's profile."""
    return str(json.loads(Path(project["env"]["BETTY_CONFIG"]).read_text())["BettyConfig"]["clusters"][0]["name"])


def kept_by_jupyterlab(page: Page, lab: JupyterServer, chats: int, cluster: str) -> None:
    """Wait until JupyterLab's workspace on the server holds the panel's ``chats`` chats and, as the open one,
    the newest of them on ``cluster`` (JupyterLab saves its state a moment after it changes; a reload before
    that would restore an older one)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        answer = page.request.get(f"{lab.url}lab/api/workspaces/default?token={lab.token}")
        data = answer.json().get("data", {}) if answer.ok else {}
        kept = (data.get("betty-jupyter:plugin:chats") or {}).get("chats") or []
        session = data.get("betty-jupyter:plugin:session") or {}
        if len(kept) == chats and session.get("cluster") == cluster \
                and session.get("session_id") == kept[0].get("session_id"):
            return
        assert time.monotonic() < deadline, f"JupyterLab did not keep the panel's chats: {kept}, {session}"
        page.wait_for_timeout(200)


def connected(panel: Locator) -> None:
    """Wait until the panel's chat is connected."""
    expect(panel.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open")


def reopen(panel: Locator) -> None:
    """Reopen the chat that asked :data:`QUESTION` from the chat list."""
    chats = panel.get_by_test_id("betty-chats")
    option = chats.locator("option", has_text="what partitions does this cluster have?")
    expect(option).to_have_count(1)
    chats.select_option(option.get_attribute("value"))
    connected(panel)
    expect(panel.get_by_test_id("betty-message-user")).to_contain_text(QUESTION)
