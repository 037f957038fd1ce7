"""Why is it pending?, piece by piece, without a cluster: the commands against the read policy, the parsers on
Slurm's real output (copied from the dev cluster), the reasons table, and the advice from fixed figures."""

from __future__ import annotations

from datetime import datetime

import pytest

from betty_jupyter.advisor import slurm_reads as reads
from betty_jupyter.advisor.pending import why_pending
from betty_jupyter.advisor.reasons import explain
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.cluster.scripted import Reply, ScriptedTransport
from betty_jupyter.errors import PolicyError, SlurmError

NOW = datetime(2026, 11, 25, 3, 31, 0)
MINE = "11^PENDING^gpu^normal^betty^11562^N/A^10:00:00^1^1^gres:gpu:a100:1^(null)^(null)^Priority\n"
SPRIO = ("7^gpu^11562^0.00000036379788^0^1.0000000^10000^0.5625000^562^1.0000000^1000^0.0000000^0^0\n"
         "8^gpu^1562^0.00000036379788^0^0.0000000^0^0.5625000^562^1.0000000^1000^0.0000000^0^0\n"
         "10^gpu^11562^0.00000036379788^0^1.0000000^10000^0.5625000^562^1.0000000^1000^0.0000000^0^0\n"
         "11^gpu^11562^0.00000036379788^0^1.0000000^10000^0.5625000^562^1.0000000^1000^0.0000000^0^0\n")
QUEUE = "7^11562^2026-11-25T05:25:58\n8^1562^2026-11-25T06:25:00\n10^11562^N/A\n11^11562^N/A\n"
SSHARE = "betty|root|1|0.333333|0|0.000000|1.000000\n"
SINFO = ("cpu*^mix^1/7/0/8^gpu:a100:4,gpu:h100:2^gpu:a100:2(IDX:0-1),gpu:h100:0(IDX:N/A)\n"
         "gpu^mix^1/7/0/8^gpu:a100:4,gpu:h100:2^gpu:a100:2(IDX:0-1),gpu:h100:0(IDX:N/A)\n")
WEIGHTS = "1000^10000^1000^1000^1000\n"


def scripted(job: str = MINE, job_reply: Reply | None = None, qos: str = "") -> ScriptedTransport:
    """The dev cluster's answers, matched by the Slurm command inside Betty's read step."""
    def answer(words: tuple[str, ...]) -> Reply | None:
        if "sacctmgr" in words:
            return Reply(qos)
        if "--weights" in words:
            return Reply(WEIGHTS)
        for program, text in (("sprio", SPRIO), ("sshare", SSHARE), ("sinfo", SINFO)):
            if program in words:
                return Reply(text)
        if "--me" in words:
            return job_reply or Reply(job)
        return Reply(QUEUE) if "squeue" in words else None

    return ScriptedTransport(answer)


def explained(transport: ScriptedTransport, ident: str = "11"):
    return run_sync(why_pending(transport, CommandPolicy(), ident, now=NOW))


@pytest.mark.parametrize("argv", [reads.job_command("11"), reads.priority_command("gpu,cpu"),
                                  reads.queue_command("gpu"), reads.share_command(), reads.nodes_command(),
                                  reads.weights_command()])
def test_every_command_passes_the_read_policy_as_it_is(argv: list[str]) -> None:
    assert CommandPolicy().check(argv).argv == tuple(argv)


@pytest.mark.parametrize("partition", ["gpu;id", "gpu$(id)", "gpu|cat", "gpu\nx", "gpu`id`", "gpu>x", "ｇpu"])
def test_a_hostile_partition_name_is_refused_before_anything_runs(partition: str) -> None:
    with pytest.raises(PolicyError, match="^refused: "):
        CommandPolicy().check(reads.priority_command(partition))
    row = MINE.replace("^gpu^", f"^{partition}^", 1)
    transport = scripted(job=row)
    with pytest.raises((PolicyError, SlurmError)):  # a line break splits the row: it cannot be read exactly
        explained(transport)
    assert len(transport.calls) == 1 and "--me" in transport.calls[0]  # only the job itself was read


def test_the_explanation_carries_each_figure_and_counts_the_jobs_ahead() -> None:
    explanation = explained(scripted())
    lines = explanation.lines()
    assert lines[0] == ("Job 11 is pending in partition gpu because jobs with a higher priority are waiting for the "
                        "same resources and go first (Slurm: Priority).")
    assert lines[1] == ("Priority 11,562 in gpu (sprio, weights from sprio --weights): age 0.00 × 1,000 = 0; "
                        "fair-share 1.00 × 10,000 = 10,000; job size 0.56 × 1,000 = 562; partition 1.00 × 1,000 = "
                        "1,000; QOS 0.00 × 1,000 = 0.")
    # 7 and 10 have the same priority and were submitted earlier; 8 has a lower one.
    assert lines[2].startswith("2 pending job(s) in gpu go before it") and "priority 11,562; 1 wait behind" in lines[2]
    assert lines[3].startswith("Your fair-share in account betty is 1.00 (sshare: share 0.33")
    assert "squeue --start shows N/A" in lines[4]
    assert ("What would change it: a --time of at most 109 min (it asks for 600 min) fits the backfill window: the "
            "jobs ahead are expected to start at 05:25 (squeue --start), and 7 of 8 CPUs and 2 of 4 a100 GPUs are "
            "idle until then (sinfo).") in lines
    assert any(line.startswith("What would change it: partition cpu has 7 of 8 CPUs and 2 of 4 a100 GPUs idle now")
               for line in lines)
    data = explanation.as_dict()
    assert data["queue"] == {"partition": "gpu", "ahead": 2, "behind": 1, "lowest_priority_ahead": 11562,
                             "highest_priority_ahead": 11562}
    assert "7" not in str(data["queue"]) and "root" not in "\n".join(lines)  # other jobs counted, the user unshown


def test_a_smaller_request_is_offered_when_fewer_gpus_are_idle() -> None:
    three = MINE.replace("gres:gpu:a100:1", "gres:gpu:a100:3").replace("Priority", "Resources")
    explanation = explained(scripted(job=three))
    assert ("What would change it: ask for 2 a100 GPU(s) instead of 3: 2 of 4 a100 GPUs in gpu are idle now "
            "(sinfo).") in explanation.lines()


def test_someone_elses_job_and_a_job_not_in_the_queue_are_one_line_errors() -> None:
    with pytest.raises(SlurmError, match=r"^job 11 is not one of your jobs in the queue; Betty explains only"):
        explained(scripted(job=""))
    gone = Reply(stderr="slurm_load_jobs error: Invalid job id specified\n", exit_code=1)
    with pytest.raises(SlurmError, match=r"^job 11 is not in the queue \(it may have ended\)"):
        explained(scripted(job_reply=gone))


def test_a_line_with_a_field_too_many_is_refused_not_guessed() -> None:
    with pytest.raises(SlurmError, match=r"^sprio printed a line Betty cannot read exactly \(15 fields, not 14\)$"):
        reads.parse_priorities("7^gpu^x^" + SPRIO.split("^", 2)[2])
    # The reason comes last and keeps the rest of its line, whatever it holds.
    job = reads.parse_job(MINE.replace("Priority", "ReqNodeNotAvail, UnavailableNodes:n^1"), "11")
    assert job is not None and job.reason == "ReqNodeNotAvail, UnavailableNodes:n^1"


@pytest.mark.parametrize("code, words", [
    ("QOSMaxGRESPerUser", "the QOS gpu1 lets one person use only so many GPUs and other generic resources (GRES)"),
    ("AssocGrpGRES", "everyone under your account lab together has reached its limit on GPUs"),
    ("QOSMaxWallDurationPerJobLimit", "it asks for more time than the QOS gpu1 allows one job"),
    ("AssocGrpCpuLimit", "everyone under your account lab together has reached its limit on CPUs"),
    ("QOSMaxJobsPerUserLimit", "the QOS gpu1 lets one person use only so many running jobs"),
    ("ReqNodeNotAvail, UnavailableNodes:node[1-3]", "a node it needs is unavailable"),
    ("Dependency", "it waits for the jobs it depends on"),
])
def test_reasons_read_in_words(code: str, words: str) -> None:
    reason = explain(code, qos="gpu1", account="lab")
    assert reason.known and reason.meaning.startswith(words)
    assert reason.code == code.split(",")[0]


def test_an_unknown_reason_keeps_slurms_word() -> None:
    reason = explain("SomethingNew")
    assert not reason.known and reason.meaning == "Slurm's reason is SomethingNew" and reason.change == ""


def test_idle_gpus_leave_out_drained_nodes_and_read_untyped_gres() -> None:
    idle = reads.parse_idle("gpu^drain^0/8/0/8^gpu:a100:4^gpu:a100:0(IDX:N/A)\n"
                            "gpu^idle^0/16/0/16^gpu:2^gpu:0\n")
    assert idle["gpu"].cpus_idle == 16 and idle["gpu"].gpus_idle == {"gpu": 2}


def test_betty_why_has_help_and_refuses_a_bad_id_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    from betty_jupyter.cli import main

    with pytest.raises(SystemExit):
        main(["why", "--help"])
    assert "Explain why one of your pending jobs waits" in capsys.readouterr().out
    assert main(["why", "12;ls"]) == 1
    assert capsys.readouterr().err == ("betty: error: '12;ls' is not a Slurm job id; use digits, or 123_4 for an "
                                       "array task\n")


def test_a_qos_reason_reads_the_qos_limits_through_the_policy() -> None:
    limited = MINE.replace("^normal^", "^one-gpu^").replace("Priority", "QOSMaxGRESPerUser")
    lines = explained(scripted(job=limited, qos="one-gpu|gres/gpu=1|||||2-00:00:00||\n")).lines()
    assert ("Details: its QOS is one-gpu and its account betty (squeue); QOS one-gpu limits (sacctmgr show qos): "
            "per person gres/gpu=1; longest job 2-00:00:00.") in lines
    with pytest.raises(PolicyError, match="changes the accounting database|asks sacctmgr to change"):
        CommandPolicy().check(reads.qos_command("set"))
