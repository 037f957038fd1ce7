"""The Timeline tab in Debian's Chromium, on a real JupyterLab and the dev cluster, the model the scripted one.

A session delegates a task to a helper (which reads the queue) and a person denies a submission whose script
holds a secret; then, in the panel, the person sees the session's lane and the helper's, linked to the
``delegate_tasks`` call that started it; moves the scrubber back and sees only the calls made by then; selects
the denied call and reads its decision and approver; replays (previews only: the cluster gets no new job, the
action log no new line); and exports the session's bug bundle, which holds none of the secrets planted in the
configuration, the server's environment and the tool's arguments. Screenshots go to
``test-artifacts/screenshots/timeline-*.png``.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import pytest
import polling
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, new_project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    assert_nothing_hidden_sideways,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Page, expect
from test_server_timeline import ARG_SECRET, CONFIG_KEY, ENV_NAME, ENV_TOKEN, SCRIPT, every_job

pytestmark = pytest.mark.cluster

SESSION = "s-timeline-panel"
TASK = {"title": "look at the queue", "instructions": "Read the queue and say how many jobs wait.",
        "tools": ["cluster_queue"], "resources": []}
GUARD = 120.0  # a guard against a hang on a shared machine, not a measurement


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM,  # noqa: F811
            ) -> dict[str, Any]:
    """The project of the panel tests, with a key pasted into its configuration and a token in the server's
    environment."""
    made = new_project(tmp_path_factory.mktemp("timeline-project"), dev_cluster, llm)
    config_file = Path(made["env"]["BETTY_CONFIG"])
    config = json.loads(config_file.read_text())
    config["BettyConfig"]["llm"]["api_key"] = CONFIG_KEY
    config_file.write_text(json.dumps(config))
    return {**made, "env": {**made["env"], ENV_NAME: ENV_TOKEN}}


def until(what: str, check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something true; that value."""
    return polling.until(what, check, GUARD, every=0.2)


def work_to_show(lab: JupyterServer, llm: ScriptedLLM) -> None:
    """The session's calls: a delegation (its helper reads the queue), a denied submission, a queue read."""
    lab.request("POST", "sessions", {"session_id": SESSION})
    llm.add(call("delegate_tasks", {"tasks": [TASK]}), call("cluster_queue", {}), say("No job waits."),
            say("The helper says no job waits."))
    after = lab.request("POST", f"sessions/{SESSION}/ask", {"prompt": "Have a helper look at the queue."})["after"]

    seen: list[dict[str, Any]] = []

    def done() -> bool:  # the helper's queue read asks once (tier 1): the person approves it
        nonlocal after
        answer = lab.request("GET", f"sessions/{SESSION}/events?after={after}&wait=10", timeout=40)
        seen.extend(answer["events"])
        after = answer["last_seq"]
        for event in answer["events"]:
            if event["type"] == "approval_request":
                lab.request("POST", f"approvals/{event['payload']['approval_id']}", {"decision": "approved"})
        return any(event["type"] == "done" for event in answer["events"])

    deadline = time.monotonic() + GUARD
    while not done():
        assert time.monotonic() < deadline, f"the delegated turn did not end: {[e['type'] for e in seen]}"
    ended = [event["payload"] for event in seen if event["type"] == "done"]
    assert ended == [{"reason": "finished"}], [(e["type"], e["payload"]) for e in seen if e["type"] != "message_delta"]
    started = lab.request("POST", f"sessions/{SESSION}/tools/cluster_submit",
                          {"args": {"script": SCRIPT, "goal": "check the timeline"}, "wait": False})

    def card() -> dict[str, Any] | None:
        waiting = lab.request("GET", f"approvals?session={SESSION}")["approvals"]
        return waiting[0] if waiting else None

    waiting = until("the submit card", card)
    assert waiting["call_id"] == started["call_id"]
    lab.request("POST", f"approvals/{waiting['approval_id']}", {"decision": "denied"})
    until("the denied submit in the action log",
          lambda: any(c["tool"] == "cluster_submit" for c in lab.request("GET", f"timeline?session={SESSION}")["calls"]))
    assert lab.request("POST", f"sessions/{SESSION}/tools/cluster_queue", {"args": {}, "wait": True})["ok"]


def test_the_timeline_scrubs_replays_previews_only_and_exports_no_secret(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page, tmp_path: Path) -> None:  # noqa: F811
    work_to_show(lab, llm)
    logged = lab.request("GET", f"timeline?session={SESSION}")
    # The helper's read is logged before the delegate_tasks call that waited for it.
    assert [(c["tool"], c["task"]) for c in logged["calls"]] == [
        ("cluster_queue", TASK["title"]), ("delegate_tasks", None), ("cluster_submit", None), ("cluster_queue", None)]
    with screenshot_on_failure(page, "failure", "timeline"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-timeline").click()
        view = panel.get_by_test_id("betty-timeline")
        view.get_by_test_id("betty-timeline-session").select_option(SESSION)
        calls = view.get_by_test_id("betty-timeline-call")
        expect(calls).to_have_count(4)
        lanes = view.get_by_test_id("betty-timeline-lane")
        expect(lanes).to_have_count(2)
        expect(lanes.nth(1)).to_have_attribute("data-kind", "helper")
        link = lanes.nth(1).get_by_test_id("betty-timeline-started-by")
        expect(link).to_have_text(f"← started by delegate_tasks {logged['calls'][1]['call_id']}")
        link.click()
        expect(view.get_by_test_id("betty-timeline-detail-tool")).to_have_text("delegate_tasks")
        assert_nothing_hidden_sideways(panel)
        screenshot(page, "1-lanes", "timeline")

        scrubber = view.get_by_test_id("betty-timeline-scrubber")
        scrub(scrubber, logged["calls"][0]["ts"])
        expect(calls).to_have_count(1)
        expect(view.get_by_test_id("betty-timeline-at")).to_contain_text("1 of 4 calls")
        expect(view.get_by_test_id("betty-timeline-dot")).to_have_count(1)
        screenshot(page, "2-scrubbed", "timeline")
        scrub(scrubber, logged["calls"][2]["ts"])
        expect(calls).to_have_count(3)
        calls.nth(2).click()
        details = view.get_by_test_id("betty-timeline-details")
        expect(details.get_by_test_id("betty-timeline-detail-decision")).to_have_text("denied")
        expect(details.get_by_test_id("betty-timeline-detail-approver")).to_contain_text("(server API)")
        expect(details.get_by_test_id("betty-preview")).to_contain_text("export WANDB_API_KEY=[redacted]")
        expect(details.get_by_test_id("betty-preview")).to_contain_text("python train.py --run [redacted]")
        assert ENV_TOKEN not in panel.inner_text()
        screenshot(page, "3-selected", "timeline")

        jobs = every_job(dev_cluster)
        view.get_by_test_id("betty-timeline-replay").click()
        summary = view.get_by_test_id("betty-timeline-replay-summary")
        expect(summary).to_contain_text("a dry run (previews only, nothing ran): 4 previews")
        expect(view.get_by_test_id("betty-timeline-replay-status")).to_have_count(3)  # the calls shown so far
        expect(view.get_by_test_id("betty-timeline-replay-detail")).to_contain_text("Replayed (nothing ran): same")
        assert every_job(dev_cluster) == jobs
        assert lab.request("GET", f"timeline?session={SESSION}")["calls"] == logged["calls"]
        screenshot(page, "4-replayed", "timeline")

        with page.expect_download() as downloading:
            view.get_by_test_id("betty-timeline-export").click()
        download = downloading.value
        assert download.suggested_filename == f"betty-bundle-{SESSION}.zip"
        saved = tmp_path / download.suggested_filename
        download.save_as(saved)
        data = saved.read_bytes()
        for secret in (CONFIG_KEY, ENV_TOKEN, ARG_SECRET):
            assert secret.encode() not in data, secret
        bundle = zipfile.ZipFile(io.BytesIO(data))
        lines = bundle.read("actions.jsonl").decode().splitlines()
        assert [json.loads(line)["tool"] for line in lines] == [c["tool"] for c in logged["calls"]]
        expect(view.get_by_test_id("betty-timeline-exported")).to_contain_text("every secret removed")


def scrub(scrubber: Any, ts: float) -> None:
    """Move the range input (whole milliseconds) to ``ts`` as a person dragging it would: its value, then an
    input event."""
    scrubber.evaluate("""(input, value) => {
      const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
      set.call(input, String(Math.floor(value * 1000)));
      input.dispatchEvent(new Event('input', { bubbles: true }));
    }""", ts)
