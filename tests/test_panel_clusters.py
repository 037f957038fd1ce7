"""The side panel's cluster picker and status dot in Debian's Chromium, against a real JupyterLab, the dev
cluster and its sshd: a cluster added with ``betty cluster add`` while JupyterLab runs appears in the picker,
and the dot says the selected cluster's health with its cause."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM
from notebook_support import llm, new_project  # noqa: F401 (llm is a fixture)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect
from test_server_cluster_health import alias_config, another_key_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def project(dev_cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory,
            llm: ScriptedLLM) -> dict[str, Any]:  # noqa: F811
    """A project with the dev cluster, and the Jupyter config directory JupyterLab and ``betty cluster add`` share."""
    made = new_project(tmp_path_factory.mktemp("clusters-project"), dev_cluster, llm)
    made["jupyter_config_dir"] = str(tmp_path_factory.mktemp("clusters-lab-config"))
    return made


def betty_cluster_add(project: dict[str, Any], *args: str) -> None:
    """``betty cluster add …`` in a terminal beside the running JupyterLab."""
    env = {**project["env"], "JUPYTER_CONFIG_DIR": project["jupyter_config_dir"]}
    done = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "cluster", "add", *args],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr


def test_a_cluster_added_while_jupyterlab_runs_is_picked_and_its_cause_shown(
        lab: JupyterServer, page: Page, project: dict[str, Any], dev_cluster: dict[str, str],  # noqa: F811
        tmp_path: Path) -> None:
    with screenshot_on_failure(page, "failure", "clusters"):
        panel = open_the_panel(page, lab)
        dot = panel.get_by_test_id("betty-cluster-health")
        expect(dot).to_have_attribute("data-health", "ok")
        expect(dot).to_have_attribute("title", _starting("betty-dev: reachable, Slurm answers (2 partitions"))
        screenshot(page, "healthy", "clusters")

        picker = panel.get_by_test_id("betty-cluster-picker")
        expect(picker.locator("option")).to_have_count(1)
        nowhere = alias_config(tmp_path, dev_cluster, "nowhere", HostName="no-such-host.invalid")
        betty_cluster_add(project, "nowhere", "--host", "nowhere", "--ssh-config", str(nowhere))
        known = tmp_path / "impostor_known_hosts"
        another_key_for(dev_cluster, known, tmp_path)
        impostor = alias_config(tmp_path, dev_cluster, "impostor", UserKnownHostsFile=str(known))
        betty_cluster_add(project, "impostor", "--host", "impostor", "--ssh-config", str(impostor))

        picker.focus()
        expect(picker.locator("option")).to_have_text(["nowhere", "impostor", "betty-dev"])  # files in the order Betty reads them
        picker.select_option("nowhere")
        expect(dot).to_have_attribute("data-problem", "host-unknown")
        cause = panel.get_by_test_id("betty-cluster-problem")
        expect(cause).to_have_text(_starting("host not found: no-such-host.invalid: "))
        expect(dot).to_have_attribute("title", cause.text_content() or "")
        assert "who you are" not in (cause.text_content() or "")
        screenshot(page, "no-such-host", "clusters")

        picker.select_option("impostor")
        expect(dot).to_have_attribute("data-problem", "host-key-changed")
        expect(cause).to_have_text(_starting("host key changed: [127.0.0.1]:"))
        screenshot(page, "host-key-changed", "clusters")

        picker.select_option("betty-dev")
        expect(dot).to_have_attribute("data-health", "ok")
        expect(cause).to_have_count(0)


def _starting(text: str) -> re.Pattern[str]:
    """A pattern for an attribute that starts with ``text``."""
    return re.compile("^" + re.escape(text))
