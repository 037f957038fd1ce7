"""The notebook's chart of an estimate: SVG drawn by Betty, its bars are the breakdown, its text stays text."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from betty_jupyter.gpu import estimate, gpu_type
from betty_jupyter.gpu.chart import breakdown_svg, part_label

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
