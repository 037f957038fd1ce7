"""A pipeline in the side panel, in Debian's Chromium against a real JupyterLab on the dev cluster.

split (a two-task array) → train (a two-task array after split task by task) → report (which fails) runs to its end
on one approval. The Experiments tab draws it as a graph from ``GET experiments/{slug}/pipeline``: each step a box
with its state, each edge labelled with its kind. Screenshot: ``test-artifacts/screenshots/pipeline-graph.png``.
"""

from __future__ import annotations

from typing import Any, Callable

import polling
from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page, expect

GUARD = 300.0  # a guard against a hang on a busy machine, not a measurement


def step(name: str, body: str, array: bool = False) -> str:
    return (f"#!/bin/bash\n#SBATCH --job-name=panel-pipeline-{name}\n#SBATCH --time=2\n"
            + ("#SBATCH --array=0-1\n" if array else "") + f"{body}\n")


def until(what: str, check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something true; that value."""
    return polling.until(what, check, GUARD, every=0.5)


def run_pipeline(lab: JupyterServer) -> str:
    """The person submits the three steps and approves the one card (through the API); the experiment's slug."""
    session = lab.request("POST", "sessions", {})["session_id"]
    args = {"goal": "split, train, report", "name": "panel-pipeline", "steps": [
        {"name": "split", "script": step("split", "echo split", array=True)},
        {"name": "train", "aftercorr": ["split"], "script": step("train", "echo train", array=True)},
        {"name": "report", "after": ["train"], "script": step("report", "exit 3")}]}
    started = lab.request("POST", f"sessions/{session}/tools/cluster_pipeline", {"args": args, "wait": False})
    card = until("the pipeline's card", lambda: [c for c in lab.request("GET", "approvals")["approvals"]
                                                 if c["call_id"] == started["call_id"]])[0]
    lab.request("POST", f"approvals/{card['approval_id']}", {"decision": "approved"})
    return str(until("the pipeline's record", lambda: [e for e in lab.request("GET", "experiments")["experiments"]
                                                       if e.get("segments")])[0]["slug"])


def test_a_pipeline_is_drawn_as_a_graph_of_its_steps_states_and_edge_kinds(
        page: Page, lab: JupyterServer, dev_cluster: dict[str, str]) -> None:
    slug = run_pipeline(lab)
    graph = until("the pipeline to end", lambda: (read := lab.request("GET", f"experiments/{slug}/pipeline"))["ended"]
                  and read)
    assert [(s["name"], s["state"]) for s in graph["steps"]] == [
        ("split", "COMPLETED"), ("train", "COMPLETED"), ("report", "FAILED")], graph
    assert graph["steps"][1]["edges"] == [{"step": "split", "kind": "aftercorr"}]
    with screenshot_on_failure(page, "failure", "pipeline"):
        panel = open_the_panel(page, lab)
        panel.get_by_test_id("betty-tab-experiments").click()
        row = panel.locator(f'[data-testid="betty-experiment-row"][data-slug="{slug}"]')
        drawn = row.get_by_test_id("betty-pipeline-graph")
        expect(drawn).to_have_attribute("data-ended", "failed")
        boxes = drawn.get_by_test_id("betty-pipeline-step")
        expect(boxes).to_have_count(3)
        for index, (name, state) in enumerate([("split", "COMPLETED"), ("train", "COMPLETED"), ("report", "FAILED")]):
            expect(boxes.nth(index)).to_have_attribute("data-step", name)
            expect(boxes.nth(index)).to_have_attribute("data-state", state)
        expect(boxes.nth(2)).to_contain_text("FAILED · failed")
        edges = drawn.get_by_test_id("betty-pipeline-edge")
        expect(edges).to_have_text(["aftercorr", "afterok"])
        first, last = boxes.nth(0).bounding_box(), boxes.nth(2).bounding_box()
        assert first and last and first["y"] < last["y"], (first, last)  # dependency order, top to bottom
        drawn.scroll_into_view_if_needed()
        screenshot(page, "graph", prefix="pipeline")
