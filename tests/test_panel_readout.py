"""The read-out of job ends in Debian's Chromium: with the setting on, a real job ending on the dev cluster is
spoken as one line of Betty's own words (recorded by a stub speech synthesis installed before the page loads);
the job's hostile name is never part of it."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import (  # noqa: F401 (fixtures)
    WAIT_MS,
    lab,
    open_the_panel,
    page,
    screenshot,
    screenshot_on_failure,
)
from playwright.sync_api import Page, expect
from test_server_support import job_state, scancel

from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty

HOSTILE_NAME = "<img>rm-rf"

# Records every utterance instead of speaking it; `speaking` stays on until the test ends the utterance.
STUB_SPEECH = """(() => {
  const spoken = [];
  window.__bettySpoken = spoken;
  class Utterance { constructor(text) { this.text = text; this.onend = null; this.onerror = null; } }
  const speech = {
    speak: utterance => { spoken.push(utterance.text); window.__bettyUtterance = utterance; },
    cancel: () => { spoken.push('<cancel>'); }
  };
  Object.defineProperty(window, 'speechSynthesis', { value: speech, configurable: true });
  Object.defineProperty(window, 'SpeechSynthesisUtterance', { value: Utterance, configurable: true });
})();"""


def until(condition, what: str, timeout: float = WAIT_MS / 1000):  # type: ignore[no-untyped-def]
    """Wait for ``condition()`` to be truthy (its value), failing with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what}"
        time.sleep(0.2)
    return value


def turn_the_read_out_on(lab: JupyterServer) -> None:
    """Set the panel's ``readOut`` setting through JupyterLab's settings API, as the Settings Editor does."""
    request = urllib.request.Request(
        f"{lab.url}lab/api/settings/betty-jupyter:plugin", method="PUT",
        data=json.dumps({"raw": json.dumps({"readOut": True})}).encode(),
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status in (200, 204)
    except urllib.error.HTTPError as refused:
        raise AssertionError(f"the settings API refused readOut: {refused.read()!r}") from None


def test_a_job_ending_on_the_dev_cluster_is_read_out_in_betty_s_own_words(
        lab: JupyterServer, dev_cluster: dict[str, str], page: Page,  # noqa: F811
        project: dict) -> None:  # type: ignore[type-arg]  # noqa: F811
    turn_the_read_out_on(lab)
    page.add_init_script(STUB_SPEECH)
    release = project["root"] / "release-the-read-out-job"
    script = project["root"] / "read-out.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name={HOSTILE_NAME}\n#SBATCH --time=00:05:00\n#SBATCH --mem=50M\n"
                      f"while [ ! -e {release} ]; do sleep 0.2; done; echo read-out\n")
    job_id = None
    with screenshot_on_failure(page, "failure", prefix="readout"):
        panel = open_the_panel(page, lab)  # the panel's chat session hears the watcher from here on
        bar = panel.get_by_test_id("betty-readout")
        expect(bar).to_contain_text("Read-out on")
        submitted = run_betty("submit", str(script), "--yes", "--dir", str(project["root"]), env=project["env"])
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        ledger = Ledger(Workspace.at(project["root"]).ledger_path)
        [tracked] = [t for t in ledger.all() if str(release) in t.experiment.script]
        job_id = tracked.experiment.job_id
        try:
            until(lambda: Ledger(ledger.path).get(job_id).state == "RUNNING",  # type: ignore[union-attr]
                  "the server's watcher to see the job running")
            release.touch()
            line = panel.get_by_test_id("betty-readout-line")
            expect(line).to_have_text(re.compile(rf"^job {job_id} finished"))
            spoken = page.evaluate("window.__bettySpoken.filter(text => text !== '<cancel>')")
            assert len(spoken) == 1, spoken
            # the panel was open before the job started, so it saw it start running and says for how long
            assert re.fullmatch(rf"job {job_id} finished after (less than a minute|\d+ minutes?|\d+ hours)",
                                spoken[0]), spoken
            assert HOSTILE_NAME not in spoken[0] and "rm-rf" not in spoken[0]
            expect(panel.get_by_test_id("betty-readout-speaking")).to_be_visible()
            screenshot(page, "1-speaking", prefix="readout")
            panel.get_by_test_id("betty-readout-stop").click()
            expect(panel.get_by_test_id("betty-readout-speaking")).to_have_count(0)
            assert page.evaluate("window.__bettySpoken[window.__bettySpoken.length - 1]") == "<cancel>"
            panel.get_by_test_id("betty-readout-play").click()
            expect(panel.get_by_test_id("betty-readout-speaking")).to_be_visible()
            assert page.evaluate("window.__bettySpoken.filter(text => text !== '<cancel>')") == [spoken[0]] * 2
        finally:
            release.touch()
            if job_state(dev_cluster, job_id):
                scancel(dev_cluster, job_id)
