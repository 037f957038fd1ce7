"""``bash scripts/demo.sh`` as a newcomer runs it: once JupyterLab answers, a banner gives the link that opens the
tour with Betty's panel (checked over HTTP and in Debian's Chromium), where the offline demo model answers the chat
and the tour starts blank; installing again with nothing changed skips pip."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO
from jupyter_server_proc import free_port
from panel_support import WAIT_MS, page, screenshot  # noqa: F401 (page is a fixture)
from playwright.sync_api import Page, expect
from test_panel_demo_model import chat_with_the_demo_model

pytestmark = pytest.mark.cluster

TOUR = "notebooks/01-tour.ipynb"


def demo_env(tmp_path: Path) -> dict[str, str]:
    """The demo in a directory of this test's, with Jupyter's config and runtime files of its own."""
    for name in ("runtime", "config"):
        (tmp_path / name).mkdir()
    return {**os.environ, "BETTY_DEMO_DIR": str(tmp_path / "demo"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
            "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}


def banner_link(demo: subprocess.Popen[str]) -> tuple[list[str], str]:
    """The lines the demo printed up to its link, and the link (the demo gives up by itself when JupyterLab
    does not answer, which ends its output)."""
    assert demo.stdout is not None
    lines: list[str] = []
    for line in demo.stdout:
        lines.append(line.rstrip("\n"))
        if "/lab/tree/" in line:
            return lines, line.strip()
    raise AssertionError(f"scripts/demo.sh printed no link: {lines}")


def test_demo_prints_the_tour_link_once_jupyterlab_answers(dev_cluster, tmp_path: Path,
                                                          page: Page) -> None:  # noqa: F811
    env = demo_env(tmp_path)
    log = (tmp_path / "jupyter.log").open("w")
    demo = subprocess.Popen(["bash", "scripts/demo.sh", f"--port={free_port()}"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    try:
        lines, link = banner_link(demo)
        assert "  Betty's demo is ready. Open the tour (Betty's panel opens beside it):" in lines
        parsed = urllib.parse.urlsplit(link)
        assert parsed.path == f"/lab/tree/{TOUR}"
        query = urllib.parse.parse_qs(parsed.query)
        assert query["betty"] == ["open"] and len(query["token"][0]) >= 32
        # The banner comes once the server answers: the link works at once (JupyterLab trades the token for a
        # cookie and lands on the tour), and a wrong token lands on the login page instead.
        for token, lands_on in ((query["token"][0], f"/lab/tree/{TOUR}"), ("wrong", "/login")):
            browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
            with browser.open(link.replace(query["token"][0], token), timeout=60) as answer:
                assert answer.status == 200 and urllib.parse.urlsplit(answer.url).path == lands_on, answer.url

        page.goto(link)
        expect(page.locator(".jp-mod-current .lm-TabBar-tabLabel, .lm-TabBar-tab.jp-mod-current")
               .filter(has_text="01-tour.ipynb").first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_test_id("betty-panel")).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open", timeout=WAIT_MS)
        screenshot(page, "tour", "demo")
        # The tour opens blank (no outputs stored for the tests: an old port, old dates), and clean.
        tour = json.loads((tmp_path / "demo" / TOUR).read_text())
        assert all(cell.get("outputs") == [] for cell in tour["cells"] if cell["cell_type"] == "code")
        expect(page.locator(".jp-OutputArea-output")).to_have_count(0)
        # No model configured: Betty's offline demo model answers the tour's requests, with real cards and jobs.
        chat_with_the_demo_model(page, page.get_by_test_id("betty-panel"), dev_cluster)
        # By now JupyterLab has long been restored: its news question never came over Betty's prompt.
        expect(page.locator(".jp-toast-message", has_text="Jupyter news")).to_have_count(0)
        screenshot(page, "chat", "demo")
    finally:
        demo.send_signal(signal.SIGTERM)  # as Ctrl+C would: the script stops JupyterLab, once
        try:
            stopped = demo.wait(120)
        finally:
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.wait(60)
            log.close()
            if demo.stdout is not None:
                demo.stdout.close()
    assert stopped == 130
    assert "the dev cluster keeps running for the next start; `.venv/bin/betty dev-cluster down` stops it" in (
        tmp_path / "jupyter.log").read_text()

    again = subprocess.run(["bash", "scripts/install.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    assert "betty: .venv already has this checkout installed; skipping pip install" in again.stderr
    assert "Installing Betty" not in again.stderr
