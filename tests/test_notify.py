"""Word when a job ends: every kind of target, once per ended job, across restarts, never a job's own text.

Real receivers on 127.0.0.1 (tests/notify_sinks.py), a real ledger, the real mail and HTTP clients; the ends are
recorded the way the watcher records them (``Ledger.record_states``)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys

import pytest

from betty_jupyter.cluster.allowlist import secret_pattern
from betty_jupyter.errors import ConfigError, UsageError
from betty_jupyter.experiments.ledger import Experiment, Ledger, StateChange
from betty_jupyter.experiments.notify import commands
from betty_jupyter.experiments.notify.message import notice
from betty_jupyter.experiments.notify.outbox import Notifier, Outbox, backoff
from betty_jupyter.experiments.notify.send import DeliveryError, send
from betty_jupyter.experiments.notify.targets import Target, TargetBook, target
from conftest import REPO, run_betty
from notify_sinks import HttpSink, SmtpSink

OWNER = "watcher-1"


@pytest.fixture
def http():
    sink = HttpSink()
    yield sink
    sink.close()


@pytest.fixture
def smtp():
    sink = SmtpSink()
    yield sink
    sink.close()


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite")


@pytest.fixture
def book(tmp_path) -> TargetBook:
    return TargetBook(tmp_path / "betty_notify")


def end(ledger: Ledger, job_id: str, state: str = "COMPLETED", runtime: float | None = 75.0,
        name: str = "train", diagnosis: dict | None = None) -> Experiment:
    """Record an experiment whose job ended, as the watcher records it."""
    experiment = Experiment(slug=f"run-{job_id}", job_id=job_id, cluster="hpc", submitted="2026-01-01",
                            goal=f"goal of {name}", script=f"#!/bin/bash\n#SBATCH --job-name={name}\necho {name}\n",
                            script_path="/tmp/x.sh", diagnosis=diagnosis)
    ledger.add(experiment)
    ledger.claim(OWNER, 60)
    assert ledger.record_states(OWNER, [StateChange(experiment.slug, state, True, "line", False, ended_job=job_id,
                                                    runtime=runtime)]) == {experiment.slug}
    return experiment


def deliver(ledger: Ledger, book: TargetBook, **options) -> list:
    return asyncio.run(Notifier(ledger.path, options.pop("settings", {}), book=book, **options).deliver())


def test_an_ended_job_reaches_each_kind_of_webhook_once_in_its_own_shape(ledger, book, http):
    for kind in ("ntfy", "slack", "mattermost", "webhook"):
        book.add(target(kind, kind, f"{http.url}/{kind}/secret-part"))
    book.add(target("room", "matrix", http.url, room="!abc:example.org", token="matrix-secret-token"))
    end(ledger, "4242", "TIMEOUT", runtime=3723)
    outcomes = deliver(ledger, book)
    assert [outcome.error for outcome in outcomes] == [""] * 5
    arrived = {item["path"].split("/")[1]: item for item in http.wait_for(5)}
    text = "Job 4242 on hpc ended TIMEOUT after 1:02:03.\nBetty's diagnosis: Out of time."
    assert arrived["ntfy"]["body"] == text and arrived["ntfy"]["headers"]["Title"] == "Betty: Job 4242 TIMEOUT"
    assert json.loads(arrived["slack"]["body"]) == {"text": f"Betty: {text}"}
    assert json.loads(arrived["mattermost"]["body"]) == {"text": f"Betty: {text}"}
    assert json.loads(arrived["webhook"]["body"]) == {
        "source": "betty", "job_id": "4242", "cluster": "hpc", "state": "TIMEOUT", "runtime_seconds": 3723,
        "diagnosis": "Out of time", "text": text}
    matrix = arrived["_matrix"]
    assert matrix["method"] == "PUT" and matrix["path"].startswith(
        "/_matrix/client/v3/rooms/%21abc%3Aexample.org/send/m.room.message/betty-")
    assert matrix["headers"]["Authorization"] == "Bearer matrix-secret-token"
    assert json.loads(matrix["body"]) == {"msgtype": "m.notice", "body": f"Betty: {text}"}
    # Once: another pass, and a restarted process (a new notifier on the same ledger), send nothing more.
    assert deliver(ledger, book) == [] and deliver(ledger, book) == []
    assert len(http.items) == 5


def test_an_ended_job_is_mailed_through_the_site_relay_once(ledger, book, smtp):
    book.add(target("me", "email", "person@example.org"))
    settings = {"smtp": f"127.0.0.1:{smtp.port}", "from": "betty@example.org"}
    end(ledger, "77", "COMPLETED", runtime=59)
    assert [outcome.error for outcome in deliver(ledger, book, settings=settings)] == [""]
    recipients, message = smtp.wait_for(1)[0]
    assert recipients == ["person@example.org"]
    assert message["Subject"] == "Betty: Job 77 COMPLETED" and message["From"] == "betty@example.org"
    assert message.get_content().strip() == "Job 77 on hpc ended COMPLETED after 0:00:59."
    assert deliver(ledger, book, settings=settings) == [] and len(smtp.items) == 1


def test_no_text_of_the_job_reaches_a_notification(ledger, book, http, smtp):
    """A job name, goal and a diagnosis full of HTML, newlines, mentions and shell text: none of it is sent."""
    book.add(target("hook", "webhook", http.url))
    book.add(target("me", "email", "person@example.org"))
    hostile = "<script>alert(1)</script><b>x</b>\n@channel @here <!channel> $(rm -rf ~) `id`"
    end(ledger, "31", "FAILED", runtime=None, name=hostile,
        diagnosis={"title": "<img src=x>", "summary": f"the job failed {hostile}"})
    end(ledger, "32", "OUT_OF_MEMORY", name=hostile,
        diagnosis={"title": "Out of memory", "summary": "the job needed more memory than it asked for (8G)"})
    deliver(ledger, book, settings={"smtp": f"127.0.0.1:{smtp.port}", "from": "betty@example.org"})
    bodies = [item["body"] for item in http.wait_for(2)] + [m.as_string() for m in (smtp.wait_for(2) and
                                                                                     smtp.messages())]
    for body in bodies:
        for piece in ("<", ">", "@channel", "@here", "$(", "`", "rm -rf", "train", "goal"):
            assert piece not in body.replace("<person@example.org>", "").replace("<betty@example.org>", ""), body
    texts = sorted(json.loads(item["body"])["text"] for item in http.items)
    assert texts == ["Job 31 on hpc ended FAILED.\nBetty's diagnosis: Failed.",
                     "Job 32 on hpc ended OUT_OF_MEMORY after 0:01:15.\nBetty's diagnosis: Out of memory: the job "
                     "needed more memory than it asked for (8G)."]


def test_an_end_recorded_again_after_a_rebuild_is_told_once(ledger, book, http):
    book.add(target("hook", "webhook", http.url))
    experiment = end(ledger, "8")
    deliver(ledger, book)
    ledger.reopen(experiment.slug)  # `betty experiments repair` rebuilt its files: the watcher looks again
    ledger.claim(OWNER, 60)
    assert ledger.record_states(OWNER, [StateChange(experiment.slug, "COMPLETED", True, "line", False,
                                                    ended_job="8", runtime=75.0)]) == {experiment.slug}
    assert deliver(ledger, book) == [] and len(http.wait_for(1)) == 1


def test_a_target_hears_only_of_jobs_that_ended_after_it_was_added(ledger, book, http):
    end(ledger, "1")
    book.add(target("hook", "webhook", http.url))
    end(ledger, "2")
    deliver(ledger, book)
    assert [json.loads(item["body"])["job_id"] for item in http.wait_for(1)] == ["2"]


def test_a_failed_delivery_is_retried_with_backoff_and_reported_in_one_line_without_its_url(ledger, book, http):
    book.add(target("hook", "slack", f"{http.url}/hooks/T000/B000/very-secret"))
    end(ledger, "5")
    http.status = 503
    lines: list[str] = []
    first = deliver(ledger, book, report=lines.append, retry_after=lambda attempts: 0)
    assert [outcome.error for outcome in first] == ["the slack server answered HTTP 503"]
    assert lines == ["could not notify job 5 COMPLETED to hook (slack at 127.0.0.1): the slack server answered "
                     "HTTP 503; trying again in 0 s"]
    deliver(ledger, book, retry_after=lambda attempts: 0)  # due at once: tried again, fails again
    http.status = 200
    again = deliver(ledger, book)
    assert [(outcome.error, outcome.delivery.attempts) for outcome in again] == [("", 3)]
    assert len(http.wait_for(1)) == 1 and deliver(ledger, book) == []
    # A failure waits its backoff: not tried again before it is due.
    end(ledger, "6")
    http.status = 503
    deliver(ledger, book, retry_after=lambda attempts: 3600)
    http.status = 200
    assert deliver(ledger, book) == [] and len(http.items) == 1
    assert Outbox(ledger.path).standing("hook") == {"sent": 1, "waiting": 1, "gave_up": 0,
                                                     "last_error": "the slack server answered HTTP 503"}
    assert backoff(1) == 30 and backoff(2) == 60 and backoff(20) == 3600


def test_a_receiver_that_never_answers_times_out(http):
    http.hold.set()
    with pytest.raises(DeliveryError, match=r"^no answer within 0.5 s$"):
        send(target("hook", "webhook", http.url), notice("1", "hpc", "COMPLETED", 1.0, None), None, timeout=0.5)


def test_a_refused_connection_and_a_missing_relay_are_one_line(book):
    with pytest.raises(DeliveryError, match=r"^connection refused$"):
        send(target("hook", "webhook", "http://127.0.0.1:9/x"), notice("1", "hpc", "COMPLETED", 1.0, None), None)
    with pytest.raises(DeliveryError, match="no mail relay is configured"):
        send(target("me", "email", "a@b.org"), notice("1", "hpc", "COMPLETED", 1.0, None), None)


def test_two_servers_on_one_workspace_send_each_end_once(ledger, book, http):
    book.add(target("hook", "webhook", http.url))
    for job in ("10", "11", "12"):
        end(ledger, job)

    async def both() -> None:
        await asyncio.gather(Notifier(ledger.path, book=book).deliver(), Notifier(ledger.path, book=book).deliver())

    asyncio.run(both())
    assert sorted(json.loads(item["body"])["job_id"] for item in http.wait_for(3)) == ["10", "11", "12"]
    assert deliver(ledger, book) == [] and len(http.items) == 3


def test_the_loop_survives_a_broken_target_and_a_broken_targets_file(ledger, book, tmp_path):
    book.add(target("hook", "webhook", "http://127.0.0.1:9/x"))
    end(ledger, "3")
    lines: list[str] = []

    async def run_until_reported() -> None:
        stop = asyncio.Event()
        notifier = Notifier(ledger.path, book=book, report=lambda line: (lines.append(line), stop.set()))
        await asyncio.wait_for(notifier.run(stop), 30)

    asyncio.run(run_until_reported())
    assert lines == ["could not notify job 3 COMPLETED to hook (webhook at 127.0.0.1): connection refused; "
                     "trying again in 30 s"]
    book.path.chmod(0o644)  # opened to others: nothing in it is trusted, and the loop says so and goes on
    lines.clear()
    asyncio.run(run_until_reported())
    assert len(lines) == 1 and lines[0].startswith("Betty sends no notifications: ") and "chmod 600" in lines[0]


def test_the_targets_file_is_the_persons_alone_and_shows_no_secret(book, tmp_path):
    book.add(target("hook", "slack", "https://hooks.slack.com/services/T0/B0/secret-xyz"))
    with pytest.raises(UsageError, match="already a target called 'hook'"):
        book.add(target("hook", "ntfy", "https://ntfy.sh/a"))
    assert stat.S_IMODE(book.path.stat().st_mode) == 0o600 and stat.S_IMODE(book.directory.stat().st_mode) == 0o700
    records = commands.listed(None, book)
    assert records == [{"name": "hook", "kind": "slack", "where": "slack at hooks.slack.com",
                        "added": records[0]["added"]}]
    assert "secret" not in commands.line(records[0])
    assert secret_pattern(str(book.path)) is not None and secret_pattern(str(book.directory)) is not None
    for bad in (("Hook", "ntfy", "https://x"), ("a", "sms", "1"), ("a", "email", "not an address"),
                ("a", "ntfy", "ftp://x"), ("a", "ntfy", "https://user:pw@x/"), ("a", "matrix", "https://m.org")):
        with pytest.raises(UsageError):
            target(*bad)
    assert commands.remove("hook", None, book).name == "hook" and book.listed() == []


def test_a_webhook_url_is_never_taken_from_the_command_line(book):
    with pytest.raises(UsageError, match="not on the command line"):
        commands.add("hook", "ntfy", lambda prompt: "https://ntfy.sh/x", address="https://ntfy.sh/x", book=book)
    made = commands.add("hook", "ntfy", lambda prompt: "https://ntfy.sh/topic\n", book=book)
    assert made.url == "https://ntfy.sh/topic" and book.get("hook").url == "https://ntfy.sh/topic"


def test_betty_notify_adds_lists_tests_and_removes_a_target(tmp_path, http):
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    added = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "notify", "add", "phone", "ntfy"],
                           input=f"{http.url}/topic-secret\n", capture_output=True, text=True, env=env, cwd=REPO,
                           timeout=120)
    assert added.returncode == 0, added.stderr
    assert added.stdout == "added phone: ntfy at 127.0.0.1; `betty notify test phone` sends a sample\n"
    listed = run_betty("notify", "list", "--dir", str(tmp_path), env=env)
    assert listed.returncode == 0 and listed.stdout == "phone  ntfy at 127.0.0.1\n"
    tested = run_betty("notify", "test", "phone", env=env)
    assert tested.returncode == 0, tested.stderr
    assert http.wait_for(1)[0]["path"] == "/topic-secret"
    assert "secret" not in tested.stdout + listed.stdout + added.stdout
    removed = run_betty("notify", "remove", "phone", "--dir", str(tmp_path), env=env)
    assert removed.returncode == 0 and removed.stdout == "removed phone (ntfy at 127.0.0.1)\n"
    missing = run_betty("notify", "test", "phone", env=env)
    assert missing.returncode == 1 and missing.stderr == "betty: error: no notification target called 'phone'; " \
                                                          "there are: none\n"


def test_a_malformed_relay_is_one_line():
    from betty_jupyter.experiments.notify.targets import relay_from

    assert relay_from({}) is None
    with pytest.raises(ConfigError, match="host:port"):
        relay_from({"smtp": "relay.example.org", "from": "b@x.org"})
    with pytest.raises(ConfigError, match="from must be"):
        relay_from({"smtp": "relay.example.org:25"})


def test_betty_notify_in_a_notebook_asks_for_the_url_and_never_shows_it(http, tmp_path):
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    shown: list[str] = []

    def run(code: str, answer: str | None = None) -> str:
        out: list[str] = []

        def collect(message: dict) -> None:  # type: ignore[type-arg]
            content = message["content"]
            if message["msg_type"] == "stream":
                out.append(content["text"])
            elif message["msg_type"] in ("execute_result", "error"):
                out.append(str(content.get("data", content.get("ename"))))

        reply = client.execute_interactive(code, timeout=120, output_hook=collect, allow_stdin=answer is not None,
                                           stdin_hook=lambda message: client.input(answer))
        assert reply["content"]["status"] == "ok", out
        shown.append("".join(out))
        return "".join(out)

    try:
        run("%load_ext betty_jupyter")
        assert run("%betty notify add hook webhook", answer=f"{http.url}/secret-path") == \
            "added hook: webhook at 127.0.0.1; `%betty notify test hook` sends a sample\n"
        assert run("%betty notify") == "hook  webhook at 127.0.0.1\n"
        assert run("%betty notify test hook") == "sent a test notification to hook (webhook at 127.0.0.1)\n"
        assert http.wait_for(1)[0]["path"] == "/secret-path"
        assert run("%betty notify add hook2 webhook https://x/y") == (
            "betty: give a webhook's URL when asked, not on the command line (it is a secret)\n")
        assert run("%betty notify remove hook") == "removed hook (webhook at 127.0.0.1)\n"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert not any("secret-path" in text for text in shown)


@pytest.mark.parametrize("state, diagnosis", [
    ("PREEMPTED", ""), ("REQUEUED", ""), ("CANCELLED", ""), ("COMPLETED", ""),
    ("TIMEOUT", "Out of time"), ("NODE_FAIL", "Failed"), ("FAILED", "Failed")])
def test_a_notice_names_a_failure_only_for_an_end_that_failed(state, diagnosis):
    told = notice("7", "hpc", state, 5.0, None)
    assert told.diagnosis == diagnosis and ("Betty's diagnosis" in told.text()) == bool(diagnosis)
