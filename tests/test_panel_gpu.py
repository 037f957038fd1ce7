"""The GPU tab in Debian's Chromium against a real JupyterLab: a job's shape, "Trace the real step", and the traced
breakdown, where its peak happens and Betty's timeline of the step, the same numbers ``betty gpu estimate --trace``
gives; a formula estimate with the person's measured peak of the same model and method under it."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import run_betty
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

pytestmark = pytest.mark.cluster
HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
JOB = ["--model", "Llama-3.2-1B", "--method", "lora", "--batch-size", "2", "--seq-len", "512", "--gpu", "a100-40gb"]


@pytest.mark.skipif(not HAS_EXTRA, reason="the trace extra (torch, transformers, peft) is not installed")
def test_the_gpu_tab_traces_the_real_step_and_draws_its_timeline(lab: JupyterServer, page: Page) -> None:
    expected = run_betty("gpu", "estimate", *JOB, "--trace", "--json")
    assert expected.returncode == 0, expected.stderr
    traced = json.loads(expected.stdout)
    with screenshot_on_failure(page, "failure", "gpu"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-gpu").click()
        view = panel.get_by_test_id("betty-gpu")
        expect(view.get_by_test_id("betty-gpu-model").locator("option", has_text="Llama-3.2-1B")).to_have_count(1)
        view.get_by_test_id("betty-gpu-model").select_option("Llama-3.2-1B")
        view.get_by_test_id("betty-gpu-batch").fill("2")
        view.get_by_test_id("betty-gpu-seq").fill("512")
        view.get_by_test_id("betty-gpu-type").select_option("A100-40GB")
        view.get_by_test_id("betty-gpu-trace").check()
        view.get_by_test_id("betty-gpu-run").click()
        result = view.get_by_test_id("betty-gpu-result")
        expect(result).to_have_attribute("data-traced", "true")
        expect(view.get_by_test_id("betty-gpu-peak")).to_have_text(
            f"{traced['peak_gib']:.1f} GiB per GPU traced for Llama-3.2-1B "
            f"(the formula estimate says {traced['formula']['peak_gib']:.1f})")
        expect(view.get_by_test_id("betty-gpu-where")).to_have_text(
            f"the peak: {traced['peak_phase']} in {traced['peak_module']}, at {traced['peak_op']}")
        expect(view.get_by_test_id("betty-gpu-fits")).to_contain_text("on A100-40GB: fits")
        activations = result.locator('tr[data-part="activations"] td')
        expect(activations.nth(1)).to_have_text(f"{traced['breakdown']['activations']:.2f}")
        for chart in ("betty-gpu-chart-breakdown", "betty-gpu-chart-timeline"):
            image = view.get_by_test_id(chart)
            expect(image).to_be_visible()
            # The browser decoded Betty's SVG: a broken image has no natural width.
            page.wait_for_function("image => image.complete && image.naturalWidth > 0", arg=image.element_handle())
        assert panel.locator("svg .betty-chart, script").count() == 0, "a chart entered the page as markup"
        assert_tabs_legible(panel)
        assert_nothing_hidden_sideways(panel)
        view.get_by_test_id("betty-gpu-chart-timeline").scroll_into_view_if_needed()
        screenshot(page, "traced", "gpu")


def test_the_gpu_tabs_recipe_select_reaches_the_formula_estimate(lab: JupyterServer, page: Page,
                                                                  project: dict) -> None:
    from betty_jupyter.experiments.ledger import Experiment
    from test_gpu_peak_notebook import add_ended

    add_ended(project["root"], Experiment(  # a measured full fine-tune that ended, shown beside the estimate
        slug="2026-11-29-fsdp", job_id="951", cluster="betty-dev", submitted="2026-11-29T10:00:00", goal="g",
        script="#!/bin/bash\n", script_path="/s", resources={"gpus": "8 × h100"},
        gpu_estimate={"peak_gib": 30.0, "method": "full", "model": "Llama-3.1-8B"},
        gpu_peak={"sampled": True, "peak_mib": 31744,
                  "torch": {"devices": [{"device": 0, "allocated_mib": 27648, "reserved_mib": 30208}]}}))
    argv = ["--model", "Llama-3.1-8B", "--method", "full", "--seq-len", "2048", "--gpus", "8", "--sharding", "fsdp",
            "--fsdp-mixed-precision"]
    expected = run_betty("gpu", "estimate", *argv, "--json")
    assert expected.returncode == 0, expected.stderr
    peak = json.loads(expected.stdout)["peak_gib"]
    plain = run_betty("gpu", "estimate", *argv[:-1], "--json")
    assert f"{json.loads(plain.stdout)['peak_gib']:.1f}" != f"{peak:.1f}", "the recipe must change the peak shown"
    with screenshot_on_failure(page, "failure", "gpu-recipe"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-gpu").click()
        view = panel.get_by_test_id("betty-gpu")
        expect(view.get_by_test_id("betty-gpu-model").locator("option", has_text="Llama-3.1-8B")).to_have_count(1)
        view.get_by_test_id("betty-gpu-method").select_option("full")
        view.get_by_test_id("betty-gpu-gpus").fill("8")
        view.get_by_test_id("betty-gpu-recipe").select_option(label="FSDP2 mixed precision")
        view.get_by_test_id("betty-gpu-run").click()
        expect(view.get_by_test_id("betty-gpu-peak")).to_have_text(f"{peak:.1f} GiB per GPU for Llama-3.1-8B")
        expect(view.get_by_test_id("betty-gpu-measured")).to_contain_text(
            "your measured Llama-3.1-8B full job 2026-11-29-fsdp (job 951, 8 × h100): measured GPU peak 31.0 GiB "
            "(estimated 30.0 GiB, +3.3%) · PyTorch allocated 27.0 GiB (reserved 29.5 GiB)")
        assert_tabs_legible(panel)
        assert_nothing_hidden_sideways(panel)
        screenshot(page, "recipe", "gpu")
