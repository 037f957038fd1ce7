"""Desktop notifications of job ends in Debian's Chromium (notifications permitted in the browser context): the
panel asks for the permission only when the person turns them on, then shows one notification per job that ends on
the dev cluster, in Betty's own words; the job's hostile name is never part of one."""

from __future__ import annotations

import json
import re
import time
import urllib.request

from jupyter_server_proc import JupyterServer
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import WAIT_MS, lab, open_the_panel, page, screenshot_on_failure  # noqa: F401 (fixtures)
from playwright.sync_api import Page

from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty

HOSTILE_NAME = "<img>rm-rf@channel"

# Counts the permission requests and records every notification the page makes, over the browser's own API (the
# permission reads "default" until the page asks, as in a browser where the person was never asked).
RECORD_NOTIFICATIONS = """(() => {
  const Real = window.Notification;
  const made = [];
  let asked = 0;
  window.__bettyNotifications = made;
  window.__bettyAsked = () => asked;
  window.Notification = new Proxy(Real, {
    construct(target, args) { made.push({ title: args[0], body: (args[1] || {}).body }); return new target(...args); },
    get(target, name) {
      if (name === 'permission') return asked ? Real.permission : 'default';
      if (name === 'requestPermission') return () => { asked += 1; return Real.requestPermission(); };
      const value = target[name];
      return typeof value === 'function' ? value.bind(target) : value;
    }
  });
})();"""


def setting(lab: JupyterServer) -> dict:  # type: ignore[type-arg]
    """The panel's settings as JupyterLab's settings API keeps them."""
    request = urllib.request.Request(f"{lab.url}lab/api/settings/betty-jupyter:plugin",
                                     headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def until(condition, what: str, timeout: float = WAIT_MS / 1000):  # type: ignore[no-untyped-def]
    """Wait for ``condition()`` to be truthy (its value), failing with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what}"
        time.sleep(0.2)
    return value


def test_each_job_that_ends_shows_one_desktop_notification_once_turned_on(
        lab: JupyterServer, dev_cluster: dict[str, str], page: Page,  # noqa: F811
        project: dict) -> None:  # type: ignore[type-arg]  # noqa: F811
    page.context.grant_permissions(["notifications"])
    page.add_init_script(RECORD_NOTIFICATIONS)
    with screenshot_on_failure(page, "failure", prefix="notify"):
        open_the_panel(page, lab)
        assert page.evaluate("window.__bettyAsked()") == 0  # off: nothing asked at load
        # The person turns them on from the command palette.
        palette = page.locator(".lm-CommandPalette-input").first

        def palette_opened() -> bool:  # a shortcut pressed while the lab still settles its focus can be lost
            if not palette.is_visible():
                page.locator("#jp-main-dock-panel").click(position={"x": 5, "y": 5})
                page.keyboard.press("Control+Shift+C")
            return palette.is_visible()

        until(palette_opened, "the command palette to open")
        palette.fill("Desktop notifications of job ends")
        page.locator(".lm-CommandPalette-item", has_text="Betty: Desktop notifications of job ends").first.click()
        until(lambda: page.evaluate("window.__bettyAsked()") == 1, "the permission to be asked for")
        until(lambda: setting(lab)["settings"].get("desktopNotices") is True, "the setting to be on")
        jobs = []
        for number in (1, 2):
            script = project["root"] / f"notify-{number}.sbatch"
            script.write_text(f"#!/bin/bash\n#SBATCH --job-name={HOSTILE_NAME}\n#SBATCH --time=00:05:00\n"
                              f"#SBATCH --mem=50M\n# notify-{number}\necho {number}\n" + ("exit 3\n" if number == 2 else ""))
            submitted = run_betty("submit", str(script), "--yes", "--dir", str(project["root"]), env=project["env"])
            assert submitted.returncode == 0, submitted.stdout + submitted.stderr
            ledger = Ledger(Workspace.at(project["root"]).ledger_path)
            [tracked] = [t for t in ledger.all() if f"# notify-{number}" in t.experiment.script]
            jobs.append(tracked.experiment.job_id)
        until(lambda: all(Ledger(ledger.path).get(job).finished for job in jobs),  # type: ignore[union-attr]
              "the server's watcher to see both jobs end")
        made = until(lambda: (found := page.evaluate("window.__bettyNotifications")) and len(found) >= 2 and found,
                     "two notifications")
    assert len(made) == 2 and {notice["title"] for notice in made} == {"Betty: a job ended"}, made
    by_job = {notice["body"].split()[1]: notice["body"] for notice in made}
    assert sorted(by_job) == sorted(jobs), made  # one per job
    # The panel may have seen the job start (then it says how long it ran) or only its end.
    assert re.fullmatch(rf"Job {jobs[0]} finished( after .+)?", by_job[jobs[0]]), made
    assert re.fullmatch(rf"Job {jobs[1]} failed( after .+)?", by_job[jobs[1]]), made
    for notice in made:
        assert "img" not in notice["body"] and "rm-rf" not in notice["body"] and "@" not in notice["body"]
    assert page.evaluate("window.__bettyAsked()") == 1
