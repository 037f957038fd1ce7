"""The notebook's and the panel's charts of an estimate and of a traced step: SVG drawn by Betty, its shapes are the
numbers, its text stays text."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from betty_jupyter.gpu import EstimateRequest, estimate, gpu_type
from betty_jupyter.gpu.chart import TIMELINE_PLOT_HEIGHT, TOP, breakdown_svg, part_label, step_timeline, timeline_svg
from betty_jupyter.gpu.estimate import GIB
from betty_jupyter.gpu.trace.result import TracedEstimate, TracePoint

SVG = "{http://www.w3.org/2000/svg}"


def _parts(svg: ET.Element) -> list[ET.Element]:
    return [rect for rect in svg.iter(f"{SVG}rect") if rect.get("data-part")]


def _gib_per_pixel(svg: ET.Element, gpu_gib: float) -> float:
    """The chart's scale, read from the capacity line of a GPU of ``gpu_gib`` and the plot's floor."""
    line = next(line for line in svg.iter(f"{SVG}line") if float(line.get("data-gib", "nan")) == gpu_gib)
    floor = max(float(rect.get("y", 0)) + float(rect.get("height", 0)) for rect in _parts(svg))
    return gpu_gib / (floor - float(line.get("y1", 0)))


def test_each_bar_is_a_part_of_the_breakdown_in_order_and_to_scale() -> None:
    result = estimate("Llama-3-8B", method="lora", batch_size=2, seq_len=2048)
    gpu = gpu_type("a100-40gb")
    svg = ET.fromstring(breakdown_svg(result, [gpu]))
    scale = _gib_per_pixel(svg, gpu.memory_gib)
    parts = _parts(svg)
    expected = {part: gib for part, gib in result.breakdown.items() if gib}
    assert [rect.get("data-part") for rect in parts] == list(expected)
    for rect in parts:
        part = rect.get("data-part", "")
        assert float(rect.get("height", 0)) * scale == pytest.approx(expected[part], abs=0.01)
        assert rect.findtext(f"{SVG}title") == f"{part_label(part)} {expected[part]:.2f} GiB"
    top = min(float(rect.get("y", 0)) for rect in parts)
    floor = max(float(rect.get("y", 0)) + float(rect.get("height", 0)) for rect in parts)
    assert (floor - top) * scale == pytest.approx(sum(expected.values()), abs=0.01)
    texts = ["".join(node.itertext()) for node in svg.iter(f"{SVG}text")]
    assert "A100-40GB (40 GiB)" in texts and "GiB per GPU" in texts and "Peak GPU memory" in texts
    assert f"weights {expected['weights']:.1f}" in texts


def test_each_gpu_gets_a_capacity_line() -> None:
    gpus = [gpu_type("l40s"), gpu_type("h100")]
    svg = ET.fromstring(breakdown_svg(estimate("Llama-3-8B", method="qlora", seq_len=1024), gpus))
    lines = sorted(float(line.get("data-gib", 0)) for line in svg.iter(f"{SVG}line"))
    assert lines == sorted(gpu.memory_gib for gpu in gpus)


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "</svg><script>alert(1)</script>",
                                  "a\" onload=\"alert(1)", "evil\x1b[2J\u202e"])
def test_a_hostile_model_name_stays_text(name: str) -> None:
    result = dataclasses.replace(estimate("Llama-3.2-1B", method="inference", seq_len=64), model=name)
    markup = breakdown_svg(result, [gpu_type("h100")])
    svg = ET.fromstring(markup)  # still one well-formed SVG element: nothing closed it early
    assert svg.tag == f"{SVG}svg"
    assert not [node for node in svg.iter() if node.tag.endswith(("script", "img", "foreignObject"))]
    assert not [node for node in svg.iter() for key in node.attrib if key.startswith("on")]
    assert "<img" not in markup and "<script" not in markup
    shown = "".join(svg.itertext())
    assert name.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e") in shown


def test_drawing_the_chart_imports_no_plotting_library() -> None:
    code = ("import sys\n"
            "from betty_jupyter.gpu import estimate, gpu_type\n"
            "from betty_jupyter.gpu.chart import breakdown_svg\n"
            "breakdown_svg(estimate('Llama-3.2-1B', method='inference', seq_len=64), [gpu_type('h100')])\n"
            "print(sorted(m for m in ('matplotlib', 'PIL', 'numpy') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ----- a traced estimate: its bar and its timeline ------------------------------------------------------------------

def traced_by_hand(model: str = "Llama-3.2-1B") -> TracedEstimate:
    """A traced estimate written out by hand (no torch): a forward that builds activations, a backward that frees them."""
    request = EstimateRequest(method="lora", batch_size=2, seq_len=1024).checked()
    weights, grads = 2 * GIB, GIB // 8

    def live(activations: int, gradients: int = 0, logits: int = 0) -> dict[str, int]:
        return {"weights": weights, "gradients": gradients, "optimizer": 0, "activations": activations,
                "logits": logits, "kv_cache": 0}

    timeline = (TracePoint(0, "setup", live(0)), TracePoint(10, "forward", live(GIB)),
                TracePoint(20, "forward", live(2 * GIB, logits=GIB // 2)),
                TracePoint(30, "backward", live(3 * GIB, grads, GIB)), TracePoint(40, "backward", live(GIB, grads)),
                TracePoint(50, "optimizer_step", live(0, grads)), TracePoint(60, "optimizer_step", live(0)))
    return TracedEstimate(model=model, request=request, params=10**9, trainable_params=10**6,
                          peak=live(3 * GIB, grads, GIB), peak_phase="backward", peak_op="mm",
                          peak_module="model.layers.0.mlp", allocated_bytes=6 * GIB + GIB // 8,
                          reserved_bytes=6 * GIB + GIB // 4, runtime_bytes=GIB // 2,
                          phases={"setup": live(0), "forward": live(2 * GIB, logits=GIB // 2),
                                  "backward": live(GIB, grads), "optimizer_step": live(0, grads)},
                          timeline=timeline)


def test_a_traced_bar_is_the_traced_breakdown() -> None:
    traced = traced_by_hand()
    svg = ET.fromstring(breakdown_svg(traced, [gpu_type("a100-40gb")]))
    expected = {part: gib for part, gib in traced.breakdown_gib().items() if gib > 0}
    assert [rect.get("data-part") for rect in _parts(svg)] == list(expected)
    scale = _gib_per_pixel(svg, 40.0)
    for rect in _parts(svg):
        assert float(rect.get("height", 0)) * scale == pytest.approx(expected[rect.get("data-part", "")], abs=0.01)
    assert "(traced)" in (svg.findtext(f"{SVG}title") or "")


def _upper_edge(polygon: ET.Element) -> list[tuple[float, float]]:
    points = [tuple(float(v) for v in pair.split(",")) for pair in (polygon.get("points") or "").split()]
    return points[:len(points) // 2]


def test_the_timeline_stacks_the_live_parts_of_the_step_alone_and_marks_phases_and_peak() -> None:
    traced = traced_by_hand()
    svg = ET.fromstring(timeline_svg(traced))
    shown = step_timeline(traced)
    # The model being built (setup) and torn down after the last phase ended are not the step.
    assert [point.index for point in shown] == [10, 20, 30, 40, 50]
    polygons = [node for node in svg.iter(f"{SVG}polygon")]
    assert [p.get("data-part") for p in polygons] == ["weights", "gradients", "activations", "logits"]
    top = _upper_edge(polygons[-1])  # the last part's upper edge is the total
    floor, ceiling = TOP + TIMELINE_PLOT_HEIGHT, top[2][1]
    totals = [sum(point.live.values()) / GIB for point in shown]
    for (_, y), total in zip(top, totals, strict=True):
        assert (floor - y) / (floor - ceiling) * totals[2] == pytest.approx(total, abs=0.01)
    assert [line.get("data-phase") for line in svg.iter(f"{SVG}line")] == ["backward", "optimizer_step"]
    peak = next(svg.iter(f"{SVG}circle"))
    assert float(peak.get("data-peak", 0)) == pytest.approx(totals[2], abs=0.001)
    assert float(peak.get("cy", 0)) == pytest.approx(ceiling, abs=0.01)
    texts = ["".join(node.itertext()) for node in svg.iter(f"{SVG}text")]
    assert {"forward", "backward", "optimizer step", f"peak {totals[2]:.2f} GiB live"} <= set(texts)


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "</svg><script>alert(1)</script>",
                                  "a\" onload=\"alert(1)", "evil\x1b[2J\u202e"])
def test_a_hostile_model_name_stays_text_in_the_traced_pictures(name: str) -> None:
    traced = traced_by_hand(name)
    for markup in (timeline_svg(traced), breakdown_svg(traced)):
        svg = ET.fromstring(markup)
        assert not [node for node in svg.iter() if node.tag.endswith(("script", "img", "foreignObject"))]
        assert not [node for node in svg.iter() for key in node.attrib if key.startswith("on")]
        assert "<img" not in markup and "<script" not in markup
        assert name.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e") in "".join(svg.itertext())


def test_a_chart_draws_its_text_and_frame_in_the_themes_colour_on_no_background() -> None:
    result = estimate("Llama-3-8B", method="lora", batch_size=2, seq_len=2048)
    svg = ET.fromstring(breakdown_svg(result, [gpu_type("a100-40gb")]))
    assert svg.get("fill") == "currentColor" and "var(--jp-content-font-color1" in (svg.get("style") or "")
    for element in svg.iter():
        assert element.get("stroke") in (None, "currentColor"), ET.tostring(element)[:120]
        if element.tag in (f"{SVG}text", f"{SVG}tspan", f"{SVG}circle"):
            assert element.get("fill") in (None, "currentColor"), ET.tostring(element)[:120]
    assert not [rect for rect in svg.iter(f"{SVG}rect") if rect.get("fill") in ("white", "#fff", "#ffffff")]
