"""The chat in Debian's Chromium with no model at all (what to set, in which file, the restart, the docs link; Send
off) and with Betty's offline demo model (a streamed answer to the tour's first question, labelled as the demo
model; "submit a test job" makes a real card whose approval runs a real job on the dev cluster)."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import ssh
from jupyter_server_proc import JupyterServer
from panel_support import WAIT_MS, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (page)
from playwright.sync_api import Locator, Page, expect

from betty_jupyter.agent.demo_model import SHOWN_NAME
from conftest import REPO, run_betty

pytestmark = pytest.mark.cluster

# Whether the notebook in front holds unsaved changes once its kernel's info and spec are in (JupyterLab writes
# the kernel's language_info and kernelspec into the notebook then).
KERNEL_WROTE_ITS_METADATA = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  const kernel = panel.sessionContext.session.kernel;
  await kernel.info;
  await kernel.spec;
  await new Promise(resolve => setTimeout(resolve, 0));
  return panel.context.model.dirty;
}"""


DEMO_CONFIG = REPO / "scripts" / "demo-config" / "jupyter_server_config.d" / "betty_demo_model.json"
"""What the demo (``scripts/demo.sh``, Binder) configures of Betty: the demo model, and its reads run without a card."""


def demo_settings() -> dict[str, Any]:
    """The demo's own Betty settings, as ``scripts/demo.sh`` and Binder read them."""
    settings: dict[str, Any] = json.loads(DEMO_CONFIG.read_text())["BettyConfig"]
    return settings


@contextmanager
def lab_with(betty: dict[str, Any], dev_cluster: dict[str, str], base: Path) -> Iterator[tuple[JupyterServer, Path]]:
    """JupyterLab on a fresh project whose only Betty settings besides the dev cluster are ``betty`` (``llm``,
    ``rules``), with a Jupyter config directory of its own (no news question); the server and that directory."""
    root, config = base / "project", base / "jupyter-config"
    assert run_betty("init", str(root)).returncode == 0
    notifications = config / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    notifications.mkdir(parents=True)
    (notifications / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # window.jupyterapp, for a test that asks a notebook's own model whether it holds unsaved changes.
    (config / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {"expose_app_in_browser": True}}))
    cluster = json.loads(Path(dev_cluster["BETTY_CONFIG"]).read_text())["BettyConfig"]
    (root / "betty.json").write_text(json.dumps({"BettyConfig": {**cluster, **betty}}))
    env = {**dev_cluster, "BETTY_CONFIG": str(root / "betty.json"), "JUPYTER_CONFIG_DIR": str(config)}
    (base / "runtime").mkdir()
    running = JupyterServer(root, {**os.environ, **env}, base / "runtime", app="jupyterlab")
    try:
        yield running, config
    finally:
        running.stop()


def test_without_a_model_the_chat_says_what_to_set_where_and_send_is_off(dev_cluster, tmp_path,
                                                                       page: Page) -> None:  # noqa: F811
    with lab_with({"llm": {}}, dev_cluster, tmp_path) as (lab, config), screenshot_on_failure(page, "no-model", "chat"):
        panel = open_the_panel(page, lab)
        help_box = panel.get_by_test_id("betty-no-model")
        expect(help_box).to_contain_text("No chat model is configured on this server")
        expect(help_box.get_by_test_id("betty-no-model-file")).to_have_text(
            str(config / "jupyter_server_config.d" / "betty_llm.json"))
        expect(help_box.get_by_test_id("betty-no-model-setting")).to_contain_text('"model": "qwen2.5:14b"')
        expect(help_box).to_contain_text("then restart JupyterLab")
        docs = help_box.get_by_test_id("betty-no-model-docs")
        expect(docs).to_have_text("docs/llm.md")
        page_text = page.request.get(docs.get_attribute("href") or "")
        assert page_text.status == 200 and page_text.text().startswith("# Choosing Betty's model")
        prompt = panel.get_by_test_id("betty-prompt")
        expect(prompt).to_be_disabled()
        expect(panel.get_by_test_id("betty-send")).to_be_disabled()
        screenshot(page, "no-model", "chat")


def test_the_demo_model_answers_in_the_panel_and_its_test_job_runs(dev_cluster, tmp_path,
                                                                 page: Page) -> None:  # noqa: F811
    settings = demo_settings()
    with lab_with(settings, dev_cluster, tmp_path) as (lab, _), screenshot_on_failure(page, "failed", "demo-chat"):
        panel = open_the_panel(page, lab)
        chat_with_the_demo_model(page, panel, dev_cluster)
        screenshot(page, "answered", "demo-chat")
        # The experiment notebook Betty wrote for the job opens clean once its kernel runs, not marked unsaved.
        written = re.search(r"notebook (notebooks/experiments/[\w.-]+\.ipynb)",
                            panel.get_by_test_id("betty-message-assistant").last.inner_text())
        assert written is not None
        # Once the job has ended the watcher writes its state into the closed file; opened before, that write would
        # go into the open document and mark it changed, rightly. Open it when the file says the job ended.
        deadline = time.monotonic() + 300
        while "COMPLETED" not in (tmp_path / "project" / written.group(1)).read_text():
            assert time.monotonic() < deadline, "the watcher never recorded the test job's end in its notebook"
            time.sleep(0.5)
        page.goto(f"{lab.url}lab/tree/{written.group(1)}?token={lab.token}")
        expect(page.get_by_role("button", name=re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))).to_be_visible()
        expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current")).to_contain_text(
            Path(written.group(1)).name)
        assert page.evaluate(KERNEL_WROTE_ITS_METADATA) is False, "the notebook opened marked unsaved"
        expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)


def chat_with_the_demo_model(page: Page, panel: Locator, dev_cluster: dict[str, str]) -> str:
    """The tour's first two requests in the panel, with the demo's settings: the partitions answer streams from the
    demo model straight away (a read: no card), and "submit a test job" makes a real card whose approval submits a
    real job, which sacct then knows. The job's id."""
    expect(panel.get_by_test_id("betty-demo-model")).to_contain_text("offline demo model")
    panel.get_by_test_id("betty-prompt").fill("what partitions does this cluster have?")
    panel.get_by_test_id("betty-send").click()
    answer = panel.get_by_test_id("betty-message-assistant").last
    expect(answer).to_contain_text("This cluster has")
    expect(answer).to_have_attribute("data-streaming", "false")
    # The demo lets its reads run without asking (its rules allow them); the mode stays confirm, so tier 2 asks.
    expect(panel.get_by_test_id("betty-approval-card")).to_have_count(0)
    for name in ssh(dev_cluster, "sinfo -h -o %R").stdout.split():
        expect(answer).to_contain_text(name)
    expect(panel.get_by_test_id("betty-message-model").last).to_have_text(SHOWN_NAME)
    expect(panel.get_by_test_id("betty-working")).to_have_count(0)

    panel.get_by_test_id("betty-prompt").fill("submit a test job")
    panel.get_by_test_id("betty-send").click()
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_submit"]')
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.get_by_test_id("betty-preview")).to_contain_text("betty-test")
    screenshot(page, "card", "demo-chat")
    card.get_by_test_id("betty-approve").click()
    expect(card).to_have_attribute("data-status", "decided")
    submitted = panel.get_by_test_id("betty-message-assistant").last
    expect(submitted).to_contain_text(re.compile(r"^Submitted job \d+ on "))
    job_id = re.match(r"Submitted job (\d+) on ", submitted.inner_text())
    assert job_id is not None
    deadline = time.monotonic() + WAIT_MS / 1000
    while (names := ssh(dev_cluster, f"sacct -n -X -j {job_id.group(1)} -o JobName%20").stdout.split()) != [
            "betty-test"]:
        assert time.monotonic() < deadline, f"sacct does not know job {job_id.group(1)}: {names}"
        time.sleep(0.5)
    return job_id.group(1)
