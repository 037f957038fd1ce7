"""The GPU calculator: pick a model and a job shape, see the memory breakdown and the advice change live.

Estimates are computed here, in the kernel (nothing runs on the cluster), with the same
functions as ``betty gpu estimate`` and the agent's ``gpu_estimate`` tool. The calculator's
output keeps the estimate it first showed as static text too; an estimate alone is static
from the start (its breakdown and its chart), as it never changes. Charts are inline SVG
drawn by :mod:`betty_jupyter.gpu.chart`: showing an estimate imports no plotting library.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Sequence

import ipywidgets as widgets

from ...errors import BettyError
from ...gpu import GPU_TYPES, advise, catalog, estimate, targets_from
from ...gpu.chart import breakdown_svg, timeline_svg
from ...gpu.report import render_estimate, render_traced
from ...gpu.request import CHECKPOINTING, METHODS, PRECISIONS, SHARDING, EstimateRequest
from ...safe_text import html_text, visible
from .html import pre_html
from .record import Record, Recorded
from .rows import wrapping_row

if TYPE_CHECKING:
    from ...gpu import Estimate, GpuType, Partition
    from ...gpu.trace import TracedEstimate

SEQ_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_GPUS = ("A100-40GB", "A100-80GB", "H100-80GB", "L40S", "RTX4090")
FRAMEWORK_DEFAULT = ""
"""The precision dropdown's value for "the framework's default" (a dropdown shows nothing for None)."""


def chart_html(svg: str, title: str) -> str:
    """The chart as an inline image for a saved record (it loads nothing from anywhere).

    An image rather than inline SVG: in a notebook opened untrusted, JupyterLab's sanitizer keeps
    the image and would strip the SVG's shapes.
    """
    return (f'<img src="data:image/svg+xml;base64,{html_text(base64.b64encode(svg.encode()).decode())}" '
            f'alt="{html_text(title)}">')


class GpuCalculator(Recorded, widgets.VBox):
    """Controls for one job's shape; ``estimate`` and ``advice`` hold the current results."""

    def __init__(self, model: str = "Llama-3.1-8B", method: str = "lora", partitions: "Sequence[Partition]" = (),
                 **shape: Any) -> None:
        self.partitions = list(partitions)
        self.estimate: Estimate | None = None
        self.advice: Any = None
        style = {"description_width": "110px"}  # the longest label ("checkpointing") whole
        models = [entry.name for entry in catalog()]
        self.model = widgets.Dropdown(options=models if model in models else [model, *models], value=model,
                                      description="model", style=style)
        self.method = widgets.Dropdown(options=list(METHODS), value=method, description="method", style=style)
        self.precision = widgets.Dropdown(options=[("framework default", FRAMEWORK_DEFAULT), *[(p, p) for p in PRECISIONS]],
                                          value=shape.get("precision") or FRAMEWORK_DEFAULT, description="precision",
                                          style=style)
        self.batch = widgets.SelectionSlider(options=list(BATCHES), value=shape.get("batch_size", 1),
                                             description="batch", style=style)
        self.seq_len = widgets.SelectionSlider(options=list(SEQ_LENGTHS), value=shape.get("seq_len", 2048),
                                               description="sequence", style=style)
        self.gpus = widgets.IntSlider(value=shape.get("gpus", 1), min=1, max=16, description="GPUs", style=style)
        self.sharding = widgets.Dropdown(options=list(SHARDING), value=shape.get("sharding", "none"),
                                         description="sharding", style=style)
        self.grad_ckpt = widgets.Dropdown(options=list(CHECKPOINTING),
                                          value=shape.get("grad_ckpt", "none"), description="checkpointing",
                                          style=style)
        self.ckpt_every = widgets.IntSlider(value=shape.get("ckpt_every", 2), min=1, max=16, description="ckpt every",
                                            tooltip="with layer checkpointing: every Nth layer is checkpointed",
                                            disabled=self.grad_ckpt.value != "layer", style=style)
        self.chart = widgets.HTML("", layout=widgets.Layout(max_width="640px"))
        self.chart.add_class("betty-gpu-chart")
        self.summary = widgets.HTML("")
        self.summary.add_class("betty-gpu-summary")
        self.advice_box = widgets.HTML("")
        self.advice_box.add_class("betty-gpu-advice")
        self.controls = [self.model, self.method, self.precision, self.batch, self.seq_len, self.gpus, self.sharding,
                         self.grad_ckpt, self.ckpt_every]
        controls = self.controls
        for control in controls:
            control.observe(lambda _: self.update(), "value")
        super().__init__([wrapping_row([widgets.VBox(controls[:5]), widgets.VBox(controls[5:])]),
                          self.summary, self.chart, self.advice_box])
        self.add_class("betty-gpu-calculator")
        self.update()

    def __repr__(self) -> str:
        peak = f"{self.estimate.peak_gib:.1f} GiB per GPU" if self.estimate else "no estimate"
        return f"<Betty GPU calculator: {self.model.value} {self.method.value}, {peak}>"

    def record(self) -> Record:
        """The estimate and the advice for the job shape the controls describe now."""
        shape = ", ".join(f"{control.description} {control.label if isinstance(control, widgets.Dropdown) else control.value}"
                          for control in self.controls)
        text = f"GPU calculator: {shape}"
        if self.estimate is not None:
            text += "\n" + render_estimate(self.estimate)
        if self.advice is not None:
            text += "\n" + self.advice.summary()
        head = f"<b>{html_text(f'GPU calculator: {shape}')}</b><br>"
        return Record(head + str(self.summary.value) + str(self.advice_box.value), visible(text))

    def request(self) -> "EstimateRequest":
        """The job shape the controls describe."""
        return EstimateRequest(method=self.method.value, precision=self.precision.value or None,
                               batch_size=int(self.batch.value), seq_len=int(self.seq_len.value),
                               gpus=int(self.gpus.value), grad_ckpt=self.grad_ckpt.value,
                               ckpt_every=int(self.ckpt_every.value) if self.grad_ckpt.value == "layer" else 2,
                               sharding=self.sharding.value).checked()

    def update(self) -> None:
        """Estimate again and redraw the chart and the advice."""
        self.ckpt_every.disabled = self.grad_ckpt.value != "layer"  # it says how often only layer checkpointing acts
        try:
            request = self.request()
            self.estimate = estimate(self.model.value, request)
            types = [gpu for gpu in GPU_TYPES if gpu.name in DEFAULT_GPUS]
            self.advice = advise(self.model.value, request, targets_from(self.partitions, [] if self.partitions
                                                                         else types))
        except (BettyError, ValueError) as error:
            self.summary.value = f"<span style='color:var(--jp-error-color1)'>{html_text(str(error))}</span>"
            return
        result = self.estimate
        self.summary.value = (f"<b>{result.peak_gib:.1f} GiB per GPU</b> at peak — "
                              + ", ".join(f"{html_text(k)} {v:.1f}" for k, v in result.breakdown.items() if v)
                              + "".join(f"<br><small>note: {html_text(n)}</small>" for n in result.notes))
        self.chart.value = breakdown_svg(result, [t for t in GPU_TYPES if t.name in ("A100-40GB", "H100-80GB")])
        self.advice_box.value = pre_html(self.advice.summary(), "betty-advice")


class EstimateView(Recorded, widgets.VBox):
    """One estimate: its breakdown as text and as a stacked bar, with capacity lines for ``gpus``, and what the
    person's own measured jobs said (``measured``: lines, ``gpu.measured.measured_beside``) under it."""

    def __init__(self, result: "Estimate", gpus: Sequence[Any] = (), measured: Sequence[str] = ()) -> None:
        self.result = result
        self.text = render_estimate(result, gpus[0] if len(gpus) == 1 else None)
        if measured:
            self.text += "\n\nmeasured beside it:\n" + "\n".join(f"  {line}" for line in measured)
        self.chart = breakdown_svg(result, gpus)
        super().__init__([widgets.HTML(pre_html(self.text)), widgets.HTML(self.chart)])
        self.add_class("betty-estimate")

    @property
    def settled(self) -> bool:
        """Always: an estimate does not change."""
        return True

    def record(self) -> Record:
        """The breakdown and the chart."""
        title = f"GPU memory of {self.result.model}"
        return Record(f"<div class='betty-estimate'>{pre_html(self.text)}{chart_html(self.chart, title)}</div>",
                      visible(self.text))

    def __repr__(self) -> str:
        return f"<Betty estimate: {self.result.model} {self.result.request.method}, {self.result.peak_gib:.1f} GiB per GPU>"


class TracedView(Recorded, widgets.VBox):
    """A traced estimate: its breakdown beside the formula's as text, its bar, and its memory over the step."""

    def __init__(self, traced: "TracedEstimate", formula: "Estimate", gpus: "Sequence[GpuType]" = ()) -> None:
        self.traced = traced
        self.text = render_traced(traced, formula, gpus[0] if len(gpus) == 1 else None)
        self.charts = (breakdown_svg(traced, gpus), timeline_svg(traced))
        shown = wrapping_row([widgets.HTML(chart) for chart in self.charts])
        super().__init__([widgets.HTML(pre_html(self.text)), shown])
        self.add_class("betty-traced-estimate")

    @property
    def settled(self) -> bool:
        """Always: a trace does not change."""
        return True

    def record(self) -> Record:
        """The breakdown and both charts."""
        titles = (f"traced GPU memory of {self.traced.model}", f"live GPU memory of {self.traced.model} over the step")
        charts = "".join(chart_html(chart, title) for chart, title in zip(self.charts, titles, strict=True))
        return Record(f"<div class='betty-traced-estimate'>{pre_html(self.text)}{charts}</div>", visible(self.text))

    def __repr__(self) -> str:
        return (f"<Betty traced estimate: {self.traced.model} {self.traced.request.method}, "
                f"{self.traced.peak_gib:.1f} GiB per GPU>")
