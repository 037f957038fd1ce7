"""Every picture a notebook shows (``%betty overview``, ``%betty efficiency``, ``%betty sweep``) is drawn on a
transparent background in a grey that reads on JupyterLab's light and dark themes: no white box in the dark theme,
no black text lost on it, and the same PNG saved in the notebook."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.image import imread

from betty_jupyter.advisor.efficiency_plot import efficiency_figure
from betty_jupyter.advisor.overview_figure import overview_figure
from betty_jupyter.cluster.job_efficiency import JobEfficiency
from betty_jupyter.experiments.comparison import Comparison
from betty_jupyter.notebook.charts import chart_png
from betty_jupyter.notebook.sweep import SweepView
from test_sweep_charts import comparison

USES = {"allocated": 3, "idle": 5, "down": 1}
SHARE = {"running": 2, "pending": 1, "cpus": 4, "gpus": 1}


def overview() -> dict:
    partition = {"partition": "gpu", "default": True, "nodes": {"idle": 1, "mixed": 0, "allocated": 0, "down": 0},
                 "cpus": USES, "gpus": {"a100": USES},
                 "memory_bytes": 1 << 30, "memory_allocated_bytes": 0, "running": 4, "pending": 2,
                 "pending_with_estimate": 0, "next_start_seconds": None, "last_start_seconds": None, "mine": SHARE}
    return {"user": "ada", "read_at": "12:00", "partitions": [partition], "mine": SHARE}


def jobs() -> list[JobEfficiency]:
    return [JobEfficiency(job_id=str(n), name="train", partition="gpu", state="COMPLETED", ended="2026-11-25T03:22:00",
                          elapsed_seconds=600, time_limit_seconds=3600, cpus=4, cpu_seconds=1200.0,
                          memory_requested_bytes=4 << 30, memory_peak_bytes=1 << 30, memory_peak_step="batch",
                          gpus=0, gpu_type=None, gpu_utilization=None, gpu_memory_bytes=None) for n in range(3)]


def sweep() -> Comparison:
    return comparison(["a", "b"])


DRAWINGS = {
    "overview": lambda: overview_figure(overview()),  # type: ignore[arg-type]
    "efficiency": lambda: efficiency_figure(jobs()),
    "sweep curves": lambda: SweepView(sweep().to_json()).drawings()[0](),
    "sweep final": lambda: SweepView(sweep().to_json()).drawings()[1](),
}


@pytest.mark.parametrize("name", DRAWINGS)
def test_a_notebook_picture_has_no_background_and_no_black_or_white_ink(name: str) -> None:
    pixels = imread(io.BytesIO(chart_png(DRAWINGS[name])))
    assert pixels.shape[2] == 4, "the PNG has an alpha channel"
    opaque = pixels[pixels[:, :, 3] > 0.9][:, :3]
    assert pixels[0, 0, 3] == 0 and pixels[-1, -1, 3] == 0, "the corners are transparent: no box behind the chart"
    assert (pixels[:, :, 3] == 0).mean() > 0.25, "the page shows behind the chart"
    assert len(opaque) > 0
    white = (opaque > 0.94).all(axis=1).mean()
    black = (opaque < 0.12).all(axis=1).mean()
    assert white < 0.001 and black < 0.001, (name, white, black)
    grey = (np.abs(opaque - 0x80 / 255) < 0.02).all(axis=1).sum()
    assert grey > 50, "text and axes are drawn in the neutral grey"


def test_the_settings_are_only_the_pictures_own() -> None:
    from matplotlib import rcParams

    before = dict(rcParams)
    chart_png(DRAWINGS["overview"])
    assert dict(rcParams) == before, "the kernel's own matplotlib settings are left as they were"


def test_each_face_shows_its_picture_as_the_theme_neutral_png(monkeypatch: pytest.MonkeyPatch) -> None:
    """``%betty efficiency``, ``%betty overview`` and ``%betty sweep`` display the picture :func:`chart_png` draws."""
    from IPython.display import Image

    from betty_jupyter.notebook import display as shown_module, overview as overview_module, sweep as sweep_module
    from betty_jupyter.notebook.display import efficiency_frame
    from betty_jupyter.notebook.overview import ShownOverview

    pictures: list[bytes] = []

    def kept(*items: object, **_: object) -> None:
        pictures.extend(item.data for item in items if isinstance(item, Image))

    for module in (shown_module, overview_module, sweep_module):
        monkeypatch.setattr(module, "display", kept)
    efficiency_frame({"jobs": [job.as_dict() for job in jobs()]})._ipython_display_()
    ShownOverview(overview())._ipython_display_()
    SweepView(sweep().to_json())._ipython_display_()
    assert len(pictures) == 1 + 1 + 2
    for picture in pictures:
        pixels = imread(io.BytesIO(picture))
        assert pixels.shape[2] == 4 and pixels[0, 0, 3] == 0, "a transparent PNG"


def test_an_empty_queue_is_drawn_as_counts_from_zero() -> None:
    empty = overview()
    empty["partitions"][0].update(running=0, pending=0, mine={"running": 0, "pending": 0, "cpus": 0, "gpus": 0})
    figure = overview_figure(empty)  # type: ignore[arg-type]
    queue = figure.axes[2]
    chart_png(lambda: figure)
    assert queue.get_ylim() == (0, 1)
    assert all(float(tick).is_integer() for tick in queue.get_yticks()), queue.get_yticks()
