"""An MCP client's card answered in the side panel, in a real browser: Debian's Chromium on a real JupyterLab on the
dev cluster, the ``mcp`` package's client on the server's ``/betty/mcp`` with the MCP credential the person made for it.

The client asks to submit a job; its tier-2 card is in no chat, yet the panel shows it by itself under "Waiting
for you", named after the client, with the exact script; the person approves it there, and the client's call
returns the job id of a job really queued in Slurm. Screenshots: ``test-artifacts/screenshots/mcp-*.png``.
"""

from __future__ import annotations

import getpass
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor

import anyio
import httpx2
from jupyter_server_proc import JupyterServer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import CLIENT, CREDENTIAL, TASK, text
from notebook_support import SCRIPT, llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    WAIT_MS,
    assert_in_viewport,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Page, Route, expect
from test_server_support import job_state, scancel

JOB = SCRIPT.format(name="mcp-panel", seconds=300)


async def submit_over_mcp(lab: JupyterServer, credential: str) -> str:
    """The client's ``cluster_submit`` call over streamable HTTP, with its MCP credential; its answer's text."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {credential}"},
                                  timeout=httpx2.Timeout(30, read=WAIT_MS / 1000)) as http:
        async with Client(streamable_http_client(f"{lab.url}betty/mcp?mode=auto", http_client=http),
                          client_info=CLIENT) as client:
            result = await client.call_tool("cluster_submit", {"script": JOB, "goal": "test the panel"})
    assert not result.is_error, text(result)
    return text(result)


@contextmanager
def answering_what_is_left(lab: JupyterServer) -> Iterator[None]:
    """On the way out, deny any card still open, so a failing test ends rather than leave the client waiting."""
    try:
        yield
    finally:
        for approval in lab.request("GET", "approvals")["approvals"]:
            lab.request("POST", f"approvals/{approval['approval_id']}", {"decision": "denied"})


def test_an_mcp_clients_card_waits_in_the_panel_and_is_approved_there(lab: JupyterServer, page: Page,
                                                                      dev_cluster: dict[str, str]) -> None:
    with screenshot_on_failure(page, "failure", "mcp"), ThreadPoolExecutor(1) as outside, \
            answering_what_is_left(lab):
        # The card's start estimate is held back until the card is shown, as on a busy cluster where the scheduler
        # answers late: the line it adds grows the card, and its buttons must stay in view all the same.
        held: list[Route] = []
        page.route(re.compile(r"/betty/api/approvals/[^/?]+/start(\?|$)"), lambda route: held.append(route))
        panel = open_the_panel(page, lab)
        credential = lab.request("POST", "mcp/credentials", {"name": CREDENTIAL})["token"]
        calling = outside.submit(anyio.run, submit_over_mcp, lab, credential)
        waiting = panel.get_by_test_id("betty-waiting")
        item = waiting.get_by_test_id("betty-waiting-item")
        expect(item).to_have_count(1, timeout=WAIT_MS)  # read every 2 s; the client connects meanwhile
        expect(item.get_by_test_id("betty-waiting-for")).to_have_text(f"for {TASK}")
        expect(waiting.get_by_test_id("betty-waiting-count")).to_have_text("1")
        card = item.get_by_test_id("betty-approval-card")
        expect(card).to_have_attribute("data-tool", "cluster_submit")
        expect(card.get_by_test_id("betty-approval-tier")).to_have_text("tier 2 · always asks")
        preview = card.get_by_test_id("betty-preview")
        for line in JOB.strip().splitlines():
            expect(preview.locator(".betty-Preview-line", has_text=line)).to_have_count(1)
        assert_in_viewport(page, card.get_by_test_id("betty-approve"))
        expect(card.get_by_test_id("betty-approval-start")).to_have_count(0)
        asked_by = time.monotonic() + WAIT_MS / 1000
        while not held:  # the card asked as it was shown; Playwright hands the request over as it serves a call
            assert time.monotonic() < asked_by, "the card never asked when its job would start"
            page.wait_for_timeout(50)
        held.pop().continue_()
        expect(card.get_by_test_id("betty-approval-start")).to_have_text(re.compile(r"\S"), timeout=WAIT_MS)
        # Its Approve button is still in view in the list, below the new line; it comes unasked, so it takes no focus.
        assert_in_viewport(page, card.get_by_test_id("betty-approve"))
        expect(card.get_by_test_id("betty-approve")).not_to_be_focused()
        # The Chat tab counts every card waiting for the person, this one too.
        expect(panel.get_by_test_id("betty-tab-chat").get_by_test_id("betty-pending-count")).to_have_text("1")
        screenshot(page, "waiting", "mcp")
        assert not calling.done()  # the client still waits for the person

        card.get_by_test_id("betty-approve").click()
        expect(waiting).to_have_count(0, timeout=WAIT_MS)
        expect(panel.get_by_test_id("betty-pending-count")).to_have_count(0)
        answer = calling.result(timeout=WAIT_MS / 1000)
    job_id = re.search(r"submitted job (\d+)", answer).group(1)
    try:
        assert job_state(dev_cluster, job_id) in ("PENDING", "RUNNING")
        line = next(r for r in lab.request("GET", "actions?limit=1000")["actions"]
                    if r["tool"] == "cluster_submit" and r["task"] == TASK)
        assert (line["decision"], line["ok"]) == ("approved", True) and line["approver"] == f"{getpass.getuser()} (side panel)"
    finally:
        scancel(dev_cluster, job_id)
