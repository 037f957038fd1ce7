"""The pictures render headless, and what they draw is the estimate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from betty_jupyter.gpu import EstimateRequest, estimate, gpu_type
from betty_jupyter.gpu.chart import step_timeline
from betty_jupyter.gpu.estimate import GIB
from betty_jupyter.gpu.plots import breakdown_chart, memory_curve, trace_timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _bars_by_part(figure) -> dict[str, list[float]]:
    axes = figure.axes[0]
    heights: dict[str, list[float]] = {}
    for container in axes.containers:
        heights[container.get_label()] = [patch.get_height() for patch in container.patches]
    return heights


def test_breakdown_chart_bars_are_the_breakdown(tmp_path: Path) -> None:
    result = estimate("Llama-3-8B", method="lora", batch_size=2, seq_len=2048)
    figure = breakdown_chart(result, gpus=[gpu_type("a100-40gb")])
    path = tmp_path / "breakdown.png"
    figure.savefig(path)
    assert path.read_bytes().startswith(PNG_MAGIC)
    bars = _bars_by_part(figure)
    labels = {"kv_cache": "KV cache", "runtime": "runtime/CUDA"}
    for part, value in result.breakdown.items():
        if value:
            assert bars[labels.get(part, part)] == [pytest.approx(value)]
    tops = [patch.get_y() + patch.get_height() for container in figure.axes[0].containers
            for patch in container.patches]
    assert max(tops) == pytest.approx(result.peak_gib)


def test_breakdown_chart_marks_each_gpu_capacity() -> None:
    results = [estimate("Llama-3-8B", method=m, seq_len=1024) for m in ("inference", "qlora")]
    gpus = [gpu_type("l40s"), gpu_type("h100")]
    figure = breakdown_chart(results, gpus=gpus)
    lines = [line.get_ydata()[0] for line in figure.axes[0].get_lines()]
    assert sorted(lines) == pytest.approx(sorted(gpu.memory_gib for gpu in gpus))
    assert len(figure.axes[0].containers[0].patches) == 2


def test_memory_curve_follows_the_estimates(tmp_path: Path) -> None:
    request = EstimateRequest(method="inference", batch_size=4)
    lengths = [1024, 4096, 16384, 65536]
    figure = memory_curve("Llama-3-8B", request, lengths, gpus=[gpu_type("a100-80gb")])
    figure.savefig(tmp_path / "curve.png")
    curve = next(line for line in figure.axes[0].get_lines() if line.get_gid() == "peak")
    expected = [estimate("Llama-3-8B", request.changed(seq_len=n)).peak_gib for n in lengths]
    assert list(curve.get_xdata()) == lengths
    assert list(curve.get_ydata()) == pytest.approx(expected)
    limits = [line.get_ydata()[0] for line in figure.axes[0].get_lines() if line.get_gid() != "peak"]
    assert limits == [pytest.approx(80.0)]


def test_memory_curve_over_batch_uses_the_card_share_of_vllm() -> None:
    request = EstimateRequest(method="inference", framework="vllm", seq_len=8192)
    figure = memory_curve("Llama-3-8B", request, [1, 2, 4, 8], vary="batch_size", gpus=[gpu_type("h100")])
    limits = [line.get_ydata()[0] for line in figure.axes[0].get_lines() if line.get_gid() != "peak"]
    assert limits == [pytest.approx(0.9 * gpu_type("h100").memory_gib)]
    assert figure.axes[0].get_xlabel() == "micro-batch size"


def test_the_core_imports_no_jupyter_and_plots_never_use_pyplot() -> None:
    code = (
        "import sys\n"
        "import betty_jupyter.gpu as gpu\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported before a picture was asked for'\n"
        "from betty_jupyter.gpu.plots import breakdown_chart\n"
        "breakdown_chart(gpu.estimate('Llama-3.2-1B', method='inference', seq_len=64))\n"
        "banned = ('tornado', 'IPython', 'ipywidgets', 'jupyter_server', 'matplotlib.pyplot',\n"
        "          'betty_jupyter.cluster', 'betty_jupyter.wiki', 'betty_jupyter.cli')\n"
        "print(sorted(m for m in sys.modules if m.startswith(banned)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_trace_timeline_stacks_the_traced_step(tmp_path: Path) -> None:
    from test_gpu_chart import traced_by_hand

    traced = traced_by_hand()
    figure = trace_timeline(traced)
    figure.savefig(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").read_bytes().startswith(PNG_MAGIC)
    axes = figure.axes[0]
    shown = step_timeline(traced)
    assert [label.get_text() for label in axes.get_legend().get_texts()] == [
        "weights", "gradients", "activations", "logits"]
    peak = next(line for line in axes.get_lines() if line.get_gid() == "peak")
    assert list(peak.get_xdata()) == [30]
    assert list(peak.get_ydata()) == [pytest.approx(sum(shown[2].live.values()) / GIB)]
    phases = [line.get_xdata()[0] for line in axes.get_lines() if str(line.get_gid()).startswith("phase-")]
    assert phases == [30, 50]
    top = axes.collections[-1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(sum(shown[2].live.values()) / GIB)
