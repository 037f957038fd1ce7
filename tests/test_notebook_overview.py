"""``%betty overview`` in a real kernel on the busy dev cluster: a figure (an image in the output), an escaped table,
and ``_`` the plain data to compute with."""

from __future__ import annotations

import base64

from hostile import live_html
from kernel_driver import Cell, Kernel
from notebook_support import kernel, llm, one_error_line, project  # noqa: F401 (fixtures)
from test_cluster_overview import HOSTILE_PARTITION, busy, mine_in, same_moment, yours  # noqa: F401 (fixtures)


def html_of(cell: Cell) -> str:
    """The HTML the cell showed."""
    return "".join(item.get("text/html", "") for item in [*cell.displays, *cell.result])


def test_overview_draws_the_figure_and_an_escaped_table(busy, kernel: Kernel, dev_cluster) -> None:  # noqa: F811
    cell, said = same_moment(dev_cluster, lambda: kernel.run("%betty overview"),
                             lambda cell, said: yours(mine_in(said["queue"])) in html_of(cell))
    assert cell.status == "ok" and not cell.stderr, cell.stderr
    images = [item["image/png"] for item in [*cell.displays, *cell.result] if "image/png" in item]
    assert len(images) == 1 and base64.b64decode(images[0]).startswith(b"\x89PNG")
    [html] = [item["text/html"] for item in [*cell.displays, *cell.result] if "text/html" in item]
    assert html == html_of(cell)
    assert live_html(html) == [] and "&lt;img/src=x/onerror=alert(1)&gt;$\\alpha$" in html
    assert yours(mine_in(said["queue"])) in html
    data = kernel.run("overview = _\nsorted(p['partition'] for p in overview['partitions']), overview['mine']")
    assert repr(sorted(["cpu", "gpu", HOSTILE_PARTITION])) in data.text
    assert repr(mine_in(said["queue"])) in data.text
    labels = kernel.run("import io\nfrom betty_jupyter.advisor.overview_figure import overview_figure\n"
                        "figure = overview_figure(overview); figure.savefig(io.BytesIO())\n"
                        "[(t.get_text(), t.get_parse_math()) for a in figure.axes for t in a.get_xticklabels()]")
    assert repr((HOSTILE_PARTITION, False)) in labels.text, "the name is drawn as it is, not as mathtext"
    assert "True" not in labels.text
    assert one_error_line(kernel.run("%betty overview --partition x")).startswith("betty: ")
