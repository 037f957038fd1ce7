"""A JupyterLab that served Betty's side panel to a browser ends by itself, promptly, on Ctrl-C and SIGTERM.

Its Python process ends only once every thread that is not a daemon has ended. Jupyter's contents API reads
the disk in AnyIO's worker threads, which end with the request that started them: one still being answered
when the server stops would leave its thread waiting forever (and ``jupyter lab`` in a terminal would never
give the prompt back). Here the panel is open in Debian's Chromium and listings of a project folder of many
files, as JupyterLab's file browser asks for them, are being answered when the signal comes.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import open_the_panel, page  # noqa: F401 (fixtures)
from playwright.sync_api import Page

ENDS_WITHIN = 60  # seconds: a guard against a hang on a slow, shared machine, not a measurement
FILES = 3000


class Listing(threading.Thread):
    """Asks the server for the listing of ``folder`` over and over until it stops answering; counts answers."""

    def __init__(self, lab: JupyterServer, folder: str) -> None:
        super().__init__(name=f"listing-{folder}", daemon=True)
        self.request = urllib.request.Request(f"{lab.url}api/contents/{folder}?content=1",
                                              headers={"Authorization": f"token {lab.token}"})
        self.answered = 0

    def run(self) -> None:
        try:
            while True:
                with urllib.request.urlopen(self.request, timeout=120) as answer:
                    answer.read()
                self.answered += 1
        except OSError:  # the server stopped
            return


@pytest.mark.cluster
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_jupyterlab_that_served_the_panel_ends_by_itself_on_a_stop_signal(stop, project, page: Page,
                                                                            tmp_path_factory):
    folder = Path(project["root"]) / f"many-files-{stop.name}"
    folder.mkdir()
    for number in range(FILES):
        (folder / f"run-{number:04d}.log").write_text("")
    lab = JupyterServer(project["root"], project["env"], tmp_path_factory.mktemp("runtime"), app="jupyterlab")
    try:
        open_the_panel(page, lab)
        listings = [Listing(lab, folder.name) for _ in range(2)]
        for listing in listings:
            listing.start()
        deadline = time.monotonic() + 180
        while not all(listing.answered for listing in listings):  # the server is answering them now
            assert time.monotonic() < deadline and all(listing.is_alive() for listing in listings)
            time.sleep(0.05)
        lab.process.send_signal(stop)
        try:
            lab.process.wait(ENDS_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"JupyterLab still runs {ENDS_WITHIN} s after {stop.name}; its log ends: "
                        f"{Path(lab.log.name).read_text()[-1500:]}")
        for listing in listings:
            listing.join(ENDS_WITHIN)
        # it stopped cleanly (extensions and kernels shut down), not by an interrupt landing mid-loop
        assert f"received signal {stop.value}, stopping" in Path(lab.log.name).read_text()
    finally:
        lab.stop()
