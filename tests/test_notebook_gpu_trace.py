"""``%betty gpu --trace`` in a real kernel: the traced breakdown, where the peak happens and the step's timeline,
each phase shown while it runs; without the trace extra, the one line that says how to install it."""

from __future__ import annotations

import base64
import html
import importlib.util
import json
import re
import textwrap
import xml.etree.ElementTree as ET

import pytest

from kernel_driver import Kernel
from notebook_support import betty_kernel, kernel, llm, one_error_line, project  # noqa: F401 (fixtures)

from betty_jupyter.gpu.trace import EXTRA, LOADING

HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
needs_extra = pytest.mark.skipif(not HAS_EXTRA, reason="the trace extra (torch, transformers, peft) is not installed")
SVG = "{http://www.w3.org/2000/svg}"
TRACE = "%betty gpu --model Llama-3.2-1B --method lora --batch-size 2 --seq-len 512 --gpu a100-40gb --trace"


def _charts(record: str) -> list[ET.Element]:
    """The SVG charts a saved record holds as inline images."""
    return [ET.fromstring(base64.b64decode(data)) for data in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"',
                                                                         record)]


@needs_extra
def test_gpu_trace_shows_the_traced_breakdown_where_the_peak_is_and_the_timeline(kernel: Kernel) -> None:
    cell = kernel.run(TRACE)
    assert cell.status == "ok" and not cell.stderr and not cell.errors, cell.stderr
    # A trace does not change: its output is the record alone, as a saved notebook keeps it.
    record = next(d["text/html"] for d in [*cell.displays, *cell.result] if "betty-traced-estimate" in d.get("text/html", ""))
    traced = kernel.run("import json; print(json.dumps([_.peak_gib, _.where, _.breakdown_gib()['activations']]))")
    peak, where, activations = json.loads(traced.stdout)
    text = html.unescape(record)
    assert f"the peak: {where}" in text and "traced on meta tensors" in text
    assert f"{peak:.2f} GiB" in text and f"{activations:.2f} GiB" in text
    assert "on A100-40GB (40.0 GiB): fits" in text
    assert f"{peak:.2f} GiB" in cell.plain and "Betty traced estimate: Llama-3.2-1B lora" in cell.plain
    bar, timeline = _charts(record)
    assert "(traced)" in (bar.findtext(f"{SVG}title") or "")
    assert {p.get("data-part") for p in timeline.iter(f"{SVG}polygon")} >= {"weights", "activations"}
    assert [line.get("data-phase") for line in timeline.iter(f"{SVG}line")] == ["backward", "optimizer_step"]
    assert timeline.find(f"{SVG}circle") is not None
    # The progress line told the phases as they ran, then went away.
    told = [kernel.models[m].get("value", "") for m in kernel.closed if m in kernel.models]
    assert any("⏳ tracing one step of Llama-3.2-1B: " in str(value) for value in told), told
    assert "betty-progress" not in str([output.get("data") for output in cell.outputs])
    shown_again = kernel.run("_")
    assert shown_again.stdout.strip() == f"Llama-3.2-1B: {peak:.2f} GiB per GPU traced, the peak in {where}"


@needs_extra
def test_the_first_trace_in_a_kernel_tells_it_is_loading_pytorch(project: dict) -> None:
    with betty_kernel(project["root"], project["env"]) as fresh:
        loaded = fresh.run("import sys; sorted(name for name in ('torch', 'transformers', 'peft') if name in sys.modules)")
        assert loaded.text == "[]", "the fresh kernel has not imported the extra yet"
        cell = fresh.run(TRACE)
        assert cell.status == "ok" and not cell.errors, cell.stderr
        told = [str(state.get("value", "")) for _, state in fresh.updates if "betty-progress" in str(state.get("value"))]
        assert told and f"⏳ tracing one step of Llama-3.2-1B: {LOADING}" in told[0], told


BLOCK_THE_EXTRA = textwrap.dedent("""
    import sys

    class NoTraceExtra:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "peft"):
                raise ImportError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTraceExtra())
    [name for name in ("torch", "transformers", "peft") if sys.modules.get(name) is not None]
""")


def test_without_the_extra_gpu_trace_says_how_to_install_it_in_one_line(project: dict) -> None:
    with betty_kernel(project["root"], project["env"]) as fresh:
        blocked = fresh.run(BLOCK_THE_EXTRA)
        assert blocked.text == "[]", "the fresh kernel has not imported the extra yet"
        assert one_error_line(fresh.run(TRACE)) == f"betty: {EXTRA}"
        formula = fresh.run(TRACE.removesuffix(" --trace"))
        assert formula.status == "ok" and "GiB per GPU" in formula.plain, formula.stderr
