"""Automations over the server, with a scripted model on real HTTP and the dev cluster: definitions, webhooks,
breakers, pause and kill, tier 2 waiting for a person, suspension, the job trigger and the daily digest."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

import pytest
from llm_server import call as model_calls
from llm_server import fail, respond, say, stall
from test_server_support import call, llm, refusal, server_config, submit_and_approve, until  # noqa: F401
from tornado.httpclient import HTTPResponse

pytestmark = pytest.mark.cluster

ENDED = ("done", "failed", "breaker", "killed")
SEARCH = {"query": "cluster"}
NOTE = {"page": "notes/from-an-automation.md", "mode": "create", "body": "Written by an automation.\n",
        "frontmatter": {"name": "From an automation", "description": "made by a test", "type": "note"}}


@pytest.fixture
def jp_server_config(llm, ssh_profile, jp_root_dir):  # noqa: F811
    config = server_config(llm, ssh_profile, jp_root_dir)
    config["BettyApp"]["automation_lease_seconds"] = 30.0
    return config


async def define(jp_fetch, **spec: Any) -> dict[str, Any]:
    """POST automations; the Automation (with its secret, for a webhook)."""
    return await call(jp_fetch, "POST", "automations", body={"name": "Test automation", "prompt": "Do it.", **spec})


async def run_now(jp_fetch, automation_id: str) -> str:
    """POST automations/{id}/run; the run id."""
    return (await call(jp_fetch, "POST", "automations", automation_id, "run"))["run_id"]


async def run_of(jp_fetch, automation_id: str, run_id: str) -> dict[str, Any]:
    """The run with its transcript."""
    return await call(jp_fetch, "GET", "automations", automation_id, "runs", run_id)


async def ended(jp_fetch, automation_id: str, run_id: str) -> dict[str, Any]:
    """The run once it ended."""
    async def check() -> dict[str, Any] | None:
        run = await run_of(jp_fetch, automation_id, run_id)
        return run if run["status"] in ENDED else None

    return await until(f"run {run_id} ending", check)


async def hook(http_server_client, jp_base_url, automation_id: str, secret: str | None, body: Any = None,
               delivery: str | None = None, token: str | None = None) -> HTTPResponse:
    """A webhook delivery as a sender makes it: no Jupyter token unless given, the secret in its header."""
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Betty-Secret"] = secret
    if delivery is not None:
        headers["X-Betty-Delivery"] = delivery
    if token is not None:
        headers["Authorization"] = f"token {token}"
    return await http_server_client.fetch(f"{jp_base_url.rstrip('/')}/betty/api/hooks/{automation_id}",
                                          method="POST", body=json.dumps(body or {}), headers=headers,
                                          raise_error=False)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events if e["type"] not in ("budget",)]


def asked(request: dict[str, Any]) -> str:
    """The first user message a model request carries (the run's first message)."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


# ----- definitions -----------------------------------------------------------------------------------
async def test_define_read_change_and_delete(jp_fetch):
    listed = (await call(jp_fetch, "GET", "automations"))["automations"]
    assert [(a["id"], a["status"], a["trigger"]["cron"]) for a in listed] == [("daily-digest", "paused", "0 8 * * *"),
                                                                              ("job-babysitter", "paused", None)]
    made = await define(jp_fetch, name="Nightly notes", persona="betty", tools=["wiki_search"],
                        limits={"iterations": 3})
    assert made["id"].startswith("nightly-notes-") and "secret" not in made and not made["webhook"]
    assert (made["status"], made["mode"], made["limits"]["iterations"]) == ("idle", "auto", 3)
    assert await call(jp_fetch, "GET", "automations", made["id"]) == made
    changed = await call(jp_fetch, "PUT", "automations", made["id"],
                         body={"name": "Nightly notes", "prompt": "Do it twice.", "trigger": {"kind": "webhook"}})
    assert changed["prompt"] == "Do it twice." and changed["webhook"] and changed["secret"]
    assert (await call(jp_fetch, "GET", "automations", made["id"]))["webhook"]
    assert await call(jp_fetch, "DELETE", "automations", made["id"]) == {"deleted": True}
    assert (await refusal(jp_fetch, "GET", "automations", made["id"]))[0] == 404
    assert (await refusal(jp_fetch, "POST", "automations", made["id"], "run"))[0] == 404


@pytest.mark.parametrize(("body", "says"), [
    ({"persona": "nobody"}, "no page personas/nobody.md"),
    ({"tools": ["wiki_search", "rm_rf"]}, "no tool rm_rf"),
    ({"cluster": "elsewhere"}, "no cluster 'elsewhere'"),
    ({"trigger": {"kind": "schedule", "cron": "every morning"}}, "needs five fields"),
    ({"prompt": "{{ payload.x }}"}, "this trigger's fields start with run, automation"),
])
async def test_a_bad_definition_is_a_400_naming_the_problem(jp_fetch, body, says):
    code, error = await refusal(jp_fetch, "POST", "automations",
                                body={"name": "Bad", "prompt": "Do it.", **body})
    assert code == 400 and says in error


# ----- webhooks ----------------------------------------------------------------------------------------
async def test_a_webhook_is_accepted_while_its_run_goes_on_and_a_replay_is_the_same_run(
        jp_fetch, http_server_client, jp_base_url, llm):
    llm.add(stall(3.0, say("Build 812 failed in the test step.")))
    made = await define(jp_fetch, name="CI watcher", prompt="A build of {{ payload.repo }} failed; say why.",
                        trigger={"kind": "webhook", "template": "Build {{ payload.build.id }}: {{ payload.build.log }}"
                                 " (branch {{ payload.branch }})"})
    delivery = {"repo": "lab/model", "build": {"id": 812, "log": "FAILED test_loss"}}
    answer = await hook(http_server_client, jp_base_url, made["id"], made["secret"], delivery, "delivery-1")
    accepted = json.loads(answer.body)
    run = await run_of(jp_fetch, made["id"], accepted["run_id"])
    assert answer.code == 202 and accepted["replayed"] is False
    assert run["status"] in ("queued", "running"), "the 202 came while the run was still active"

    replay = await hook(http_server_client, jp_base_url, made["id"], made["secret"], {"repo": "other"}, "delivery-1")
    assert replay.code == 200 and json.loads(replay.body) == {**accepted, "replayed": True,
                                                             "status": json.loads(replay.body)["status"]}
    done = await ended(jp_fetch, made["id"], accepted["run_id"])
    assert (done["status"], done["result"], done["trigger"]) == ("done", "Build 812 failed in the test step.",
                                                                 "webhook")
    assert done["payload"] == delivery and done["delivery_id"] == "webhook:delivery-1"
    first = asked(llm.requests[0])
    assert "A build of lab/model failed" in first and "Build 812: FAILED test_loss (branch )" in first
    assert "payload.branch was not in what fired this run" in first
    again = await hook(http_server_client, jp_base_url, made["id"], made["secret"], {}, "delivery-1")
    assert again.code == 200 and json.loads(again.body)["status"] == "done"
    runs = (await call(jp_fetch, "GET", "automations", made["id"], "runs"))["runs"]
    assert [r["id"] for r in runs] == [accepted["run_id"]] and len(llm.requests) == 1
    assert kinds(done["events"]) == ["message", "message", "done"]
    assert done["events"][-1]["payload"] == {"reason": "finished"}


async def test_a_webhook_without_its_secret_is_refused_and_runs_nothing(jp_fetch, http_server_client, jp_base_url,
                                                                        jp_auth_header, jp_root_dir):
    made = await define(jp_fetch, trigger={"kind": "webhook"})
    other = await define(jp_fetch, name="Other", trigger={"kind": "webhook"})
    token = jp_auth_header["Authorization"].split()[-1]
    tries = [("wrong", made["id"]), (made["secret"][:-1], made["id"]), (None, made["id"]),
             (other["secret"], made["id"]), (made["secret"], "no-such-automation"), ("", made["id"])]
    for secret, target in tries:
        answer = await hook(http_server_client, jp_base_url, target, secret, {"x": 1})
        assert answer.code == 403, (secret, target)
        assert json.loads(answer.body) == {"error": "this webhook needs its automation's secret in the "
                                                    "X-Betty-Secret header"}
    code, _ = await refusal(jp_fetch, "POST", "hooks", made["id"], body={"x": 1})
    assert code == 403, "a Jupyter token is not the webhook's secret"
    assert (await hook(http_server_client, jp_base_url, made["id"], None, token=token)).code == 403
    assert (await hook(http_server_client, jp_base_url, made["id"], "wrong", token=token)).code == 403
    for automation in (made, other):
        assert (await call(jp_fetch, "GET", "automations", automation["id"], "runs"))["runs"] == []
    assert not (jp_root_dir / ".betty" / "automations" / "runs").exists()


# ----- breakers -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("limits", "steps", "code", "says"), [
    ({"iterations": 2}, [model_calls("wiki_search", SEARCH)] * 3, "iteration_limit", "after 2 model turns"),
    ({"tokens": 100}, [model_calls("wiki_search", SEARCH), say("never")], "token_limit", "used its 100 tokens"),
    ({"seconds": 1.5}, [stall(30, say("too late"))], "time_limit", "wall-time limit"),
])
async def test_each_breaker_trips_at_its_limit_with_its_code(jp_fetch, llm, limits, steps, code, says):
    llm.add(*steps)
    made = await define(jp_fetch, limits=limits)
    done = await ended(jp_fetch, made["id"], await run_now(jp_fetch, made["id"]))
    assert (done["status"], done["code"]) == ("breaker", code)
    assert says in done["result"]
    assert done["events"][-1]["payload"] == {"reason": "breaker"}
    assert (await call(jp_fetch, "GET", "automations", made["id"]))["failures"] == 1
    if code == "iteration_limit":
        assert done["iterations"] == 2 and len(llm.requests) == 2
    if code == "token_limit":
        assert done["tokens"] >= 100 and len(llm.requests) == 1


# ----- pause and kill ---------------------------------------------------------------------------------------
async def test_pause_holds_the_next_tool_call_until_resume(jp_fetch, llm):
    llm.add(stall(4.0, model_calls("wiki_search", SEARCH)), say("Found the cluster page."))
    made = await define(jp_fetch)
    run_id = await run_now(jp_fetch, made["id"])

    async def model_asked() -> bool:
        return len(llm.requests) == 1

    await until("the model being asked", model_asked)
    paused = await call(jp_fetch, "POST", "automations", made["id"], "pause")
    assert paused["status"] == "paused"

    async def held() -> dict[str, Any] | None:
        run = await run_of(jp_fetch, made["id"], run_id)
        return run if run["paused_before"] == "wiki_search" else None

    waiting = await held_run(held)
    assert waiting["status"] == "running"
    assert "tool_call" not in kinds(waiting["events"]), "the call did not start while paused"
    resumed = await call(jp_fetch, "POST", "automations", made["id"], "resume")
    assert resumed["status"] in ("active", "idle")
    done = await ended(jp_fetch, made["id"], run_id)
    assert done["status"] == "done" and done["paused_before"] is None
    assert kinds(done["events"]) == ["message", "tool_call", "tool_result", "message", "done"]


async def held_run(check: Callable[[], Any]) -> dict[str, Any]:
    return await until("the run holding before its tool call", check)


async def test_kill_stops_a_run_within_the_step_it_is_in(jp_fetch, llm):
    llm.add(stall(60.0, model_calls("wiki_search", SEARCH)), say("never"))
    made = await define(jp_fetch)
    run_id = await run_now(jp_fetch, made["id"])

    async def model_asked() -> bool:
        return len(llm.requests) == 1

    await until("the model being asked", model_asked)
    killed = await call(jp_fetch, "POST", "automations", made["id"], "kill")
    assert killed == {"killed": [run_id]}
    done = await ended(jp_fetch, made["id"], run_id)
    assert (done["status"], done["result"]) == ("killed", "killed by a person")
    assert len(llm.requests) == 1 and "tool_call" not in kinds(done["events"])
    assert done["events"][-1]["payload"] == {"reason": "stopped"}
    automation = await call(jp_fetch, "GET", "automations", made["id"])
    assert (automation["status"], automation["failures"]) == ("idle", 0)


async def test_kill_while_paused_stops_before_the_call(jp_fetch, llm):
    llm.add(stall(4.0, model_calls("wiki_search", SEARCH)), say("never"))
    made = await define(jp_fetch)
    run_id = await run_now(jp_fetch, made["id"])

    async def model_asked() -> bool:
        return len(llm.requests) == 1

    await until("the model being asked", model_asked)
    await call(jp_fetch, "POST", "automations", made["id"], "pause")

    async def held() -> bool:
        return (await run_of(jp_fetch, made["id"], run_id))["paused_before"] == "wiki_search"

    await held_run(held)
    await call(jp_fetch, "POST", "automations", made["id"], "kill")
    done = await ended(jp_fetch, made["id"], run_id)
    assert done["status"] == "killed" and "tool_call" not in kinds(done["events"])
    queued = await run_now(jp_fetch, made["id"])  # paused: the next run waits to be resumed
    assert (await run_of(jp_fetch, made["id"], queued))["status"] == "queued"
    assert (await call(jp_fetch, "POST", "automations", made["id"], "kill"))["killed"] == [queued]


# ----- tier 2 waits for a person ------------------------------------------------------------------------------
async def test_a_tier_2_call_of_an_automation_waits_for_a_person_even_in_auto_mode(jp_fetch, llm, jp_root_dir):
    llm.add(model_calls("wiki_write", NOTE), say("Wrote the note."))
    made = await define(jp_fetch, name="Note writer", mode="auto")
    run_id = await run_now(jp_fetch, made["id"])

    async def card() -> dict[str, Any] | None:
        pending = (await call(jp_fetch, "GET", "approvals"))["approvals"]
        return pending[0] if pending else None

    waiting = await until("the approval card", card)
    assert (waiting["tool"], waiting["tier"], waiting["task"]) == ("wiki_write", 2, "Note writer")
    assert waiting["preview"]["title"] == "create wiki/notes/from-an-automation.md"
    run = await run_of(jp_fetch, made["id"], run_id)
    assert run["status"] == "running" and not (jp_root_dir / "wiki" / "notes" / "from-an-automation.md").exists()
    assert kinds(run["events"])[-1] == "approval_request"
    await call(jp_fetch, "POST", "approvals", waiting["approval_id"], body={"decision": "approved"})
    done = await ended(jp_fetch, made["id"], run_id)
    assert done["status"] == "done" and (jp_root_dir / "wiki" / "notes" / "from-an-automation.md").exists()
    actions = (await call(jp_fetch, "GET", "actions", params={"session": run["session_id"]}))["actions"]
    assert [(a["tool"], a["decision"], a["approver"].endswith("(server API)")) for a in actions] == [
        ("wiki_write", "approved", True)]


# ----- suspension -------------------------------------------------------------------------------------------------
async def test_runs_failing_in_a_row_suspend_the_automation_until_a_person_resumes_it(
        jp_fetch, llm, http_server_client, jp_base_url):
    llm.add(fail(400, times=3, body={"error": {"message": "the model refuses", "type": "invalid_request_error"}}),
            say("Working again."))
    made = await define(jp_fetch, trigger={"kind": "webhook"})
    runs = [await run_now(jp_fetch, made["id"]) for _ in range(3)]
    for run_id in runs:
        done = await ended(jp_fetch, made["id"], run_id)
        assert (done["status"], done["code"]) == ("failed", "model")
    suspended = await call(jp_fetch, "GET", "automations", made["id"])
    assert (suspended["status"], suspended["failures"]) == ("error-suspended", 3)
    code, error = await refusal(jp_fetch, "POST", "automations", made["id"], "run")
    assert code == 409 and "suspended after 3 failed runs; resume it first" in error
    assert (await hook(http_server_client, jp_base_url, made["id"], made["secret"], {})).code == 409
    assert (await call(jp_fetch, "POST", "automations", made["id"], "resume"))["status"] == "idle"
    done = await ended(jp_fetch, made["id"], await run_now(jp_fetch, made["id"]))
    assert done["status"] == "done"
    assert (await call(jp_fetch, "GET", "automations", made["id"]))["failures"] == 0


# ----- the job trigger, on the dev cluster ---------------------------------------------------------------------------
SHORT_JOB = """#!/bin/bash
#SBATCH --job-name=automation-trigger
#SBATCH --chdir={root}
#SBATCH --time=00:02:00
#SBATCH --mem=100M
echo "done quickly"
"""


async def test_a_watched_job_ending_fires_the_job_trigger(jp_fetch, llm, jp_root_dir, dev_cluster):
    prompts: list[str] = []

    def remember(request: dict[str, Any]):
        prompts.append(asked(request))
        return say("Noted the job.")

    llm.add(respond(remember))
    made = await define(jp_fetch, name="Job ended", prompt="Job {{ job.id }} on {{ job.cluster }} is {{ job.state }} "
                        "(was {{ job.previous }}).", trigger={"kind": "job", "states": ["COMPLETED"]})
    job_id = await submit_and_approve(jp_fetch, SHORT_JOB.format(root=jp_root_dir), "fire an automation")

    async def fired() -> list[dict[str, Any]]:
        return (await call(jp_fetch, "GET", "automations", made["id"], "runs"))["runs"]

    run = (await until("the job trigger firing", fired))[0]
    assert (run["trigger"], run["delivery_id"]) == ("job", f"job:betty-dev:{job_id}:COMPLETED")
    done = await ended(jp_fetch, made["id"], run["id"])
    assert done["status"] == "done" and done["payload"]["id"] == job_id
    assert f"Job {job_id} on betty-dev is COMPLETED (was " in prompts[0]


# ----- the daily digest ----------------------------------------------------------------------------------------------
async def test_the_daily_digest_is_off_until_resumed_then_scheduled_and_runnable(jp_fetch, llm):
    digest = await call(jp_fetch, "GET", "automations", "daily-digest")
    assert (digest["status"], digest["persona"], digest["next_due"]) == ("paused", "digest", None)
    on = await call(jp_fetch, "POST", "automations", "daily-digest", "resume")
    assert on["status"] == "idle"

    async def scheduled() -> float | None:
        return (await call(jp_fetch, "GET", "automations", "daily-digest"))["next_due"]

    due = datetime.fromtimestamp(await until("the digest being scheduled", scheduled))
    assert (due.hour, due.minute) == (8, 0) and due > datetime.now()

    llm.add(model_calls("cluster_queue", {}), say("## Digest\nNothing failed; nothing waits."))
    done = await ended(jp_fetch, "daily-digest", await run_now(jp_fetch, "daily-digest"))
    assert (done["status"], done["result"]) == ("done", "## Digest\nNothing failed; nothing waits.")
    result = next(e["payload"] for e in done["events"] if e["type"] == "tool_result")
    assert (result["tool"], result["ok"]) == ("cluster_queue", True)
    first = llm.requests[0]
    assert {tool["function"]["name"] for tool in first["tools"]} == {
        "cluster_queue", "cluster_history", "cluster_status", "job_logs", "wiki_read", "wiki_search", "wiki_write",
        "scratchpad"}
    assert "morning digest" in asked(first) and "my jobs running and waiting now" in asked(first)
    runs = (await call(jp_fetch, "GET", "automations", "daily-digest", "runs"))["runs"]
    assert [(r["id"], r["tokens"] > 0, r["iterations"]) for r in runs] == [(done["id"], True, 2)]
