"""``POST gpu/estimate`` with ``trace``, as the side panel's GPU tab calls it: the traced numbers and Betty's charts,
counted off the event loop (the server answers other requests meanwhile), and one clear line when the trace extra is
missing."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import xml.etree.ElementTree as ET

import pytest
from test_agent_gpu_trace import trace_waiting_in_another_thread
from test_server_support import call, jp_server_config, llm, until  # noqa: F401  (fixtures)

from betty_jupyter.agent.tools.gpu import ONE_TRACE_AT_A_TIME
from betty_jupyter.gpu import EstimateRequest
from betty_jupyter.gpu.trace import EXTRA

pytestmark = pytest.mark.cluster
HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
SHAPE = {"model": "Llama-3.2-1B", "method": "lora", "batch_size": 2, "seq_len": 512, "trace": True}
SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.skipif(not HAS_EXTRA, reason="the trace extra (torch, transformers, peft) is not installed")
async def test_a_traced_estimate_is_counted_off_the_event_loop_and_carries_its_charts(jp_fetch):
    from betty_jupyter.gpu.trace import trace_estimate  # lazy: the expected numbers, traced here too

    ONE_TRACE_AT_A_TIME.acquire()
    guard = threading.Timer(120, ONE_TRACE_AT_A_TIME.release)  # a blocked loop fails the test, never hangs it
    guard.start()
    try:
        traced = asyncio.create_task(call(jp_fetch, "POST", "gpu", "estimate", body=SHAPE))

        async def waiting() -> bool:
            return trace_waiting_in_another_thread()

        await until("the trace waiting for its turn in a worker thread", waiting)
        models = await call(jp_fetch, "GET", "gpu", "models")
        assert "Llama-3.2-1B" in [model["name"] for model in models["models"]] and not traced.done()
    finally:
        guard.cancel()
        ONE_TRACE_AT_A_TIME.release()
    outcome = await traced
    assert outcome["ok"], outcome["summary"]
    value = outcome["data"]["value"]
    expected = trace_estimate("Llama-3.2-1B", EstimateRequest(method="lora", batch_size=2, seq_len=512))
    assert value["peak_gib"] == round(expected.peak_gib, 3)
    assert value["peak_phase"] == expected.peak_phase and value["formula"]["peak_gib"] > 0
    timeline = ET.fromstring(value["charts"]["timeline"])
    assert {p.get("data-part") for p in timeline.iter(f"{SVG}polygon")} >= {"weights", "activations"}
    assert ET.fromstring(value["charts"]["breakdown"]).tag == f"{SVG}svg"


async def test_without_the_extra_the_answer_says_how_to_install_it(jp_fetch, monkeypatch: pytest.MonkeyPatch):
    # torch as if it were not installed: importing it fails as a missing package does, and the trace's module that
    # imports it is imported afresh. Both come back after the test.
    monkeypatch.delitem(sys.modules, "betty_jupyter.gpu.trace.run", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)
    outcome = await call(jp_fetch, "POST", "gpu", "estimate", body=SHAPE)
    assert outcome["ok"] is False and outcome["summary"] == EXTRA
    formula = await call(jp_fetch, "POST", "gpu", "estimate", body={**SHAPE, "trace": False})
    assert formula["ok"] and formula["data"]["value"]["peak_gib"] > 0
