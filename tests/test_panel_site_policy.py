"""The side panel under a site's policy, in Chromium: the modes the site does not allow are greyed out with the
site's line as their tooltip, a click on one changes nothing, and an allowed one is taken. No cluster: a local
cluster profile; the site's file named by ``$BETTY_SITE_POLICY``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from jupyter_server_proc import JupyterServer
from panel_support import open_the_panel, page, running_lab, screenshot_on_failure  # noqa: F401  (fixtures)
from playwright.sync_api import Page, expect


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("site-project")
    assert run_betty("init", str(root)).returncode == 0
    site = tmp_path_factory.mktemp("site")
    policy = site / "policy.json"
    policy.write_text(json.dumps({"modes": ["off", "propose", "confirm"]}))
    policy.chmod(0o644)
    config = root / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [{"name": "here", "transport": "local"}]}}))
    env = {**os.environ, "BETTY_CONFIG": str(config), "BETTY_SITE_POLICY": str(policy)}
    return {"root": root, "env": env, "policy": policy}


@pytest.fixture(scope="module")
def lab(project: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    with running_lab(project, tmp_path_factory) as running:
        yield running


def test_the_mode_switch_greys_out_what_the_site_does_not_allow(page: Page, lab: JupyterServer,
                                                               project: dict[str, Any]) -> None:
    with screenshot_on_failure(page, "site-policy-modes"):
        panel = open_the_panel(page, lab)
        switch = panel.get_by_test_id("betty-mode-switch")
        auto = panel.get_by_test_id("betty-mode-auto")
        expect(auto).to_be_disabled()
        expect(auto).to_have_attribute("data-site-refused", "true")
        expect(auto).to_have_attribute(
            "title", f"Your site does not allow auto mode; it allows off, propose, confirm ({project['policy']}).")
        auto.click(force=True)
        expect(switch).to_have_attribute("data-mode", "confirm")
        panel.get_by_test_id("betty-mode-propose").click()
        expect(switch).to_have_attribute("data-mode", "propose")
        expect(panel.get_by_test_id("betty-mode-confirm")).to_be_enabled()
