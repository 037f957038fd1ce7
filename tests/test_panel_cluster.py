"""The Cluster tab in Debian's Chromium, against a real JupyterLab and the busy dev cluster, at 1400×900 and
1024×700: the partitions with their CPUs and GPUs by use, the queue, and the person's running jobs' share; a
partition named with HTML stays text."""

from __future__ import annotations

from typing import Any

import pytest
from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    assert_nothing_hidden_sideways,
    assert_tabs_legible,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Page, expect
from test_cluster_overview import HOSTILE_PARTITION, busy  # noqa: F401 (fixtures)

pytestmark = pytest.mark.cluster
WINDOWS = [pytest.param((1400, 900), id="1400x900"), pytest.param((1024, 700), id="1024x700")]


@pytest.mark.parametrize("page", WINDOWS, indirect=True)
def test_the_cluster_tab_shows_the_partitions_and_your_share(
        busy: dict[str, Any], lab: JupyterServer, page: Page) -> None:  # noqa: F811
    width = page.viewport_size["width"] if page.viewport_size else 0
    shot = f"cluster-{width}"
    with screenshot_on_failure(page, "failure", shot):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-cluster").click()
        view = panel.get_by_test_id("betty-cluster")
        partitions = view.get_by_test_id("betty-cluster-partition")
        expect(partitions).to_have_count(3)
        expect(view.get_by_test_id("betty-cluster-share")).to_have_text(
            "Yours (root): 2 running (3 CPUs, 1 GPUs), 4 pending")
        gpu = view.locator('[data-testid="betty-cluster-partition"][data-partition="gpu"]')
        expect(gpu.get_by_test_id("betty-cluster-queue")).to_contain_text("2 running, 4 pending · next start ~")
        expect(gpu.get_by_test_id("betty-cluster-mine")).to_have_text(
            " · yours: 1 running (2 CPUs, 1 GPUs), 4 pending")
        bars = gpu.get_by_test_id("betty-cluster-gpus")
        expect(bars).to_have_count(2)
        expect(bars.nth(1)).to_have_attribute("data-used", "2")
        expect(bars.nth(1)).to_contain_text("2/2 used")
        cpus = gpu.get_by_test_id("betty-cluster-cpus")
        expect(cpus).to_have_attribute("data-used", "5")
        hostile = partitions.nth(2)
        expect(hostile).to_have_attribute("data-partition", HOSTILE_PARTITION)
        expect(hostile.locator("strong").first).to_have_text(HOSTILE_PARTITION)
        assert panel.locator('img[src="x"]').count() == 0, "a partition's name became markup"
        assert_tabs_legible(panel)
        assert_nothing_hidden_sideways(panel)
        screenshot(page, "tab", shot)
        panel.get_by_test_id("betty-tab-jobs").click()
        expect(view).to_be_hidden()
