"""Many people on one JupyterHub, for real: PyPI's jupyterhub, npm's configurable-http-proxy, LocalProcessSpawner and
two Unix accounts made by the test (:mod:`hub_support`), each with Betty in their own JupyterLab reaching the dev
cluster with local commands, under one site policy (a second approver above ten minutes of wall time, an audit
folder).

Every check goes through what a person has: the hub's proxy, a user's own API token or browser cookie, Betty's
routes, ``betty approve`` run as the approver, the job's own output. The hub starts once for the module.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from hub_support import Hub, HubUser, call, hub_users, passage, wait_for
from llm_server import ScriptedLLM, say
from llm_server import call as model_calls
from panel_support import CHROMIUM, WAIT_MS
from playwright.sync_api import expect, sync_playwright

WALL_LIMIT = "00:10:00"
"""The site's limit on a job's wall time; above it a second approver must say yes too."""


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    """The chat model every person's Betty talks to; it keeps every request it got."""
    with ScriptedLLM() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def site(dev_cluster: dict[str, str], llm: ScriptedLLM) -> Iterator[dict[str, Any]]:
    """The site's folder (root's, readable by all): the users' homes (each made a project with ``betty init``, as a
    person does once), the site policy, the approval spool, the audit folder and Betty's configuration (the dev
    cluster with local commands); the two users, the second of whom is the site's approver. While it lasts the
    users may pass through root's closed folders to the dev cluster's files, this checkout and its Python."""
    folder = Path(tempfile.mkdtemp(prefix="betty-hub-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "homes").mkdir(mode=0o755)
    slurm_env = {**os.environ, **dev_cluster}
    try:
        with hub_users(folder / "homes", 2, slurm_env) as (users, group), \
                passage([Path(dev_cluster["SLURM_CONF"]), REPO, Path(sys.prefix)], [user.uid for user in users]):
            spool, audit = folder / "spool", folder / "audit"
            spool.mkdir()
            shutil.chown(spool, "root", group)
            spool.chmod(0o1770)
            audit.mkdir()
            audit.chmod(0o1733)
            policy = folder / "policy.json"
            policy.write_text(json.dumps({
                "limits": {"wall_time": WALL_LIMIT, "above": "second", "approvers": [users[1].name],
                           "approval_spool": str(spool)},
                "audit": {"directory": str(audit)}}))
            policy.chmod(0o644)
            config = folder / "betty.json"
            config.write_text(json.dumps({"BettyConfig": {
                "clusters": [{"name": "hpc", "transport": "local", "env": {"SLURM_CONF": dev_cluster["SLURM_CONF"]},
                              "readable_roots": [str(folder / "homes")]}],
                "default_cluster": "hpc",
                "llm": {"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01, "max_retries": 1}}}))
            config.chmod(0o644)
            for user in users:
                made = user.run([sys.executable, "-m", "betty_jupyter.cli", "init", str(user.home)], person_env())
                assert made.returncode == 0, made.stderr
                (user.home / "secret.txt").write_text(f"{user.name}'s own words\n")
                shutil.chown(user.home / "secret.txt", user.name, user.name)
                (user.home / "secret.txt").chmod(0o600)
            yield {"folder": folder, "users": users, "spool": spool, "audit": audit, "config": config,
                   "policy": policy, "slurm_conf": dev_cluster["SLURM_CONF"]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def hub(site: dict[str, Any]) -> Iterator[Hub]:
    """The hub with both users' servers started (at once), stopped with its proxy and servers afterwards."""
    users: list[HubUser] = site["users"]
    environment = {"BETTY_CONFIG": str(site["config"]), "BETTY_SITE_POLICY": str(site["policy"]),
                   "JUPYTER_PATH": os.environ.get("JUPYTER_PATH", "")}
    running = Hub(site["folder"], users, environment, os.environ.get("PYTHONPATH", ""))
    try:
        running.spawn(*users)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def tokens(hub: Hub, site: dict[str, Any]) -> dict[str, str]:
    """Each user's own API token, as the hub's token page makes one."""
    return {user.name: hub.token(user) for user in site["users"]}


def person_env(**more: str) -> dict[str, str]:
    """What a person's shell has for running ``betty``: this Python first on PATH, and this checkout."""
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "LANG": "C.UTF-8", **more}


def hub_token(hub: Hub, user: HubUser) -> str:
    """The hub's API token in ``user``'s single-user server's environment (JUPYTERHUB_API_TOKEN)."""
    pid = hub.server(user)["state"]["pid"]
    environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
    token = environ.get("JUPYTERHUB_API_TOKEN", "")
    assert len(token) >= 16, "the single-user server has no hub token to keep safe"
    return token


def open_card(hub: Hub, user: HubUser, token: str, session: str) -> dict[str, Any]:
    """The card open now in ``user``'s session, once there is one."""
    return wait_for(lambda: next(iter(call("GET", hub.betty(user, f"approvals?session={session}"), token)
                                        .body["approvals"]), None), f"a card in {user.name}'s session", timeout=120)


def new_session(hub: Hub, user: HubUser, token: str) -> str:
    """A new chat session in ``user``'s Betty; its id."""
    made = call("POST", hub.betty(user, "sessions"), token, {})
    assert made.status == 201, made.body
    return str(made.body["session_id"])


def record_of(hub: Hub, user: HubUser, token: str, session: str, tool: str) -> dict[str, Any]:
    """The action log's record of ``tool`` in ``session``, once it is written."""
    return wait_for(lambda: next((r for r in call("GET", hub.betty(user, f"actions?session={session}"), token)
                                    .body["actions"] if r["tool"] == tool), None),
                      f"{tool} in {user.name}'s action log", timeout=120)


def test_each_persons_betty_runs_as_them_and_answers_only_them(
        hub: Hub, site: dict[str, Any], tokens: dict[str, str], llm: ScriptedLLM) -> None:
    ada, bob = site["users"]
    mine, theirs = tokens[ada.name], tokens[bob.name]
    for user in (ada, bob):
        pid = hub.server(user)["state"]["pid"]
        uids = [line.split()[1:] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("Uid:")][0]
        assert uids == [str(user.uid)] * 4, f"{user.name}'s server runs as {uids}"
        health = call("GET", hub.betty(user, "health"), tokens[user.name])
        assert health.status == 200 and health.body["project"] == str(user.home)
    secret = hub_token(hub, ada)

    script = ("#!/bin/bash\n#SBATCH --job-name=hub-env\n#SBATCH --partition=cpu\n#SBATCH --time=00:05:00\n"
              f"#SBATCH --mem=100M\n#SBATCH --output={ada.home}/hub-env-%j.out\nenv\n")
    llm.add(model_calls("cluster_submit", {"script": script, "goal": "see what a job's environment holds"}),
            say("Submitted."))
    session = new_session(hub, ada, mine)
    assert call("POST", hub.betty(ada, f"sessions/{session}/ask"), mine, {"prompt": "submit my env job"}).status == 202
    card = open_card(hub, ada, mine, session)

    # Bob's token cannot see, answer or cancel Ada's card, nor read her Betty at all; his own Betty has no card.
    for method, route, body in [("GET", "approvals", None), ("GET", f"sessions/{session}", None),
                                ("POST", f"approvals/{card['approval_id']}", {"decision": "approved"}),
                                ("POST", f"approvals/{card['approval_id']}", {"decision": "denied"}),
                                ("POST", f"sessions/{session}/stop", {}), ("GET", "actions", None),
                                ("GET", "wiki", None), ("GET", "experiments", None),
                                ("GET", "wiki/page?name=index", None)]:
        refused = call(method, hub.betty(ada, route), theirs, body)
        assert refused.status in (403, 404), f"{method} {route} as {bob.name}: {refused.status} {refused.body}"
    assert call("GET", hub.betty(bob, "approvals"), theirs).body == {"approvals": []}
    assert call("GET", hub.betty(ada, f"sessions/{session}"), mine).body["busy"], "Bob's stop reached the session"

    answered = call("POST", hub.betty(ada, f"approvals/{card['approval_id']}"), mine, {"decision": "approved"})
    assert answered.status == 200 and answered.body["approver"] == f"{ada.name} (server API)", answered.body
    record = record_of(hub, ada, mine, session, "cluster_submit")
    assert record["ok"] and record["approver"] == f"{ada.name} (server API)", record["summary"]
    output = wait_for(lambda: next((path for path in ada.home.glob("hub-env-*.out")
                                      if "SLURM_JOB_ID=" in path.read_text()), None), "the job's output", timeout=180)
    job_env = output.read_text()
    assert output.stat().st_uid == ada.uid and f"\nUSER={ada.name}\n" in f"\n{job_env}"
    assert secret not in job_env and "JUPYTERHUB_API_TOKEN" not in job_env

    # What Betty keeps is each person's own: the action log, the experiment and its wiki page.
    assert not [r for r in call("GET", hub.betty(bob, "actions"), theirs).body["actions"]
                if r["tool"] == "cluster_submit"]
    experiments = call("GET", hub.betty(ada, "experiments"), mine).body["experiments"]
    assert [e for e in experiments if e["job_id"] in record["summary"]], (experiments, record["summary"])
    assert call("GET", hub.betty(bob, "experiments"), theirs).body["experiments"] == []
    ada_pages = {page["name"] for page in call("GET", hub.betty(ada, "wiki"), mine).body["pages"]}
    bob_pages = {page["name"] for page in call("GET", hub.betty(bob, "wiki"), theirs).body["pages"]}
    assert ada_pages - bob_pages, "Ada's experiment page is in her wiki only"

    # Bob's own Betty reads as Bob: Ada's file is hers alone, whatever path he names.
    own = new_session(hub, bob, theirs)
    read = call("POST", hub.betty(bob, f"sessions/{own}/tools/cluster_run"), theirs,
                {"args": {"command": f"cat {ada.home}/secret.txt"}, "wait": True})
    # Bob cannot even look into Ada's home, so Betty's reader finds no file there to open.
    assert read.status == 200 and not read.body["ok"], read.body
    assert read.body["summary"].endswith((f"{ada.home}/secret.txt: No such file or directory",
                                          f"{ada.home}/secret.txt: Permission denied")), read.body
    assert "own words" not in json.dumps(read.body)
    escaped = call("GET", hub.betty(bob, f"wiki/page?name=../../{ada.name}/secret.txt"), theirs)
    assert escaped.status in (400, 404) and "own words" not in json.dumps(escaped.body)

    # The hub's token reached neither the model, nor Betty's logs, the action log or the site's audit.
    assert llm.requests and all(secret not in json.dumps(request) for request in llm.requests)
    assert secret not in hub.log()
    kept = [path for path in [*(ada.home / ".betty").rglob("*"), *site["audit"].iterdir()] if path.is_file()]
    assert (site["audit"] / f"{ada.name}.jsonl") in kept
    assert not [path for path in kept if secret.encode() in path.read_bytes()]


def test_a_job_above_the_limits_waits_for_the_approver_in_their_own_login(
        hub: Hub, site: dict[str, Any], tokens: dict[str, str]) -> None:
    ada, bob = site["users"]
    mine = tokens[ada.name]
    script = ("#!/bin/bash\n#SBATCH --job-name=hub-big\n#SBATCH --partition=cpu\n#SBATCH --time=00:20:00\n"
              "#SBATCH --mem=100M\n#SBATCH --output=/dev/null\nsleep 1\n")
    session = new_session(hub, ada, mine)
    started = call("POST", hub.betty(ada, f"sessions/{session}/tools/cluster_submit"), mine,
                   {"args": {"script": script, "goal": "a long run", "record": False}, "wait": False})
    assert started.status == 202, started.body
    card = open_card(hub, ada, mine, session)
    facts = {fact["label"]: fact["text"] for fact in card["preview"]["facts"]}
    assert f"one of {bob.name} approve it" in facts["second approver"], facts
    (request,) = site["spool"].glob("*.request.json")
    assert request.stat().st_uid == ada.uid

    answered = call("POST", hub.betty(ada, f"approvals/{card['approval_id']}"), mine, {"decision": "approved"})
    assert answered.status == 200, answered.body
    approve = [sys.executable, "-m", "betty_jupyter.cli", "approve", str(request), "--yes"]
    env = person_env(BETTY_SITE_POLICY=str(site["policy"]))
    own = ada.run(approve, env)
    assert own.returncode != 0 and "your own job's request" in own.stderr, own
    assert not [r for r in call("GET", hub.betty(ada, f"actions?session={session}"), mine).body["actions"]
                if r["tool"] == "cluster_submit"], "the job ran with one approval"

    approved = bob.run(approve, env)
    assert approved.returncode == 0, approved.stderr
    assert f"{ada.name} asks: " in approved.stdout and "--time=00:20:00" in approved.stdout
    record = record_of(hub, ada, mine, session, "cluster_submit")
    assert record["ok"], record["summary"]
    assert record["approver"] == f"{ada.name} (server API), then {bob.name} (second approver)"
    assert record["digest"] == card["digest"]
    audited = [json.loads(line) for line in (site["audit"] / f"{ada.name}.jsonl").read_text().splitlines()]
    assert record["approver"] in [each.get("approver") for each in audited]


def test_each_person_logged_in_to_the_hub_opens_their_own_panel(hub: Hub, site: dict[str, Any]) -> None:
    """One Chromium, a context per person: each logs in with the hub's form and sees Betty's panel of their own
    server; their cookie opens nothing of the other's."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/install.sh test)")
    users: list[HubUser] = site["users"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            for user, other in (users, users[::-1]):
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                context.set_default_timeout(WAIT_MS)
                page = context.new_page()
                page.goto(f"{hub.url}/hub/login")
                page.fill("#username_input", user.name)
                page.fill("#password_input", hub.password)
                page.click("#login_submit")
                page.wait_for_url(f"**/user/{user.name}/lab**")
                page.goto(f"{hub.url}/user/{user.name}/lab?reset&betty=open")
                panel = page.get_by_test_id("betty-panel")
                expect(panel).to_be_visible()
                expect(panel.get_by_test_id("betty-connection")).to_have_attribute("data-status", "open")
                # As the panel asks: the browser's cookie, and the _xsrf cookie's value that JupyterHub's servers ask
                # of every request a cookie authenticates.
                seen = page.evaluate("""async ([own, other]) => {
                    const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || '';
                    const asked = {credentials: 'same-origin', redirect: 'manual', headers: {'X-XSRFToken': xsrf}};
                    const health = await fetch(own, asked);
                    const theirs = await fetch(other, asked);
                    return [health.status, (await health.json()).project, theirs.status, theirs.type];
                }""", [f"/user/{user.name}/betty/api/health", f"/user/{other.name}/betty/api/health"])
                assert seen[:2] == [200, str(user.home)], seen
                assert seen[2] in (0, 302, 403) and (seen[2] != 0 or seen[3] == "opaqueredirect"), seen
                context.close()
        finally:
            browser.close()


def test_the_passage_through_closed_folders_is_given_back(site: dict[str, Any]) -> None:
    """The hub's users pass through root's closed folders (to the dev cluster's files) only while it runs: the
    folders are given back exactly as they were."""
    user: HubUser = site["users"][0]
    probe = Path(tempfile.mkdtemp(prefix="betty-passage-", dir="/tmp"))
    try:
        inner = probe / "closed" / "file"
        inner.parent.mkdir(mode=0o700)
        inner.write_text("x")
        before = [(folder, folder.stat().st_mode) for folder in (probe, inner.parent)]
        with passage([inner], [user.uid]):
            assert user.run(["cat", str(inner)], {"PATH": "/usr/bin:/bin"}).stdout == "x"
        assert [(folder, folder.stat().st_mode) for folder in (probe, inner.parent)] == before
        refused = user.run(["cat", str(inner)], {"PATH": "/usr/bin:/bin"})
        assert refused.returncode != 0 and "Permission denied" in refused.stderr
    finally:
        shutil.rmtree(probe)
