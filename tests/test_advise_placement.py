"""Start estimates without a cluster: Slurm's --test-only sentences of each version, refusals, ranking, the cache,
and the read policy's one sbatch form. The real scheduler's answers are checked in test_advise_cluster.py."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from betty_jupyter.advisor.estimates import (Advice, Candidate, StartEstimate, rank, read_billing_weights,
                                                     read_pending, read_start, wait_text)
from betty_jupyter.advisor.placement import (PlacementAdvisor, StartCache, billing_rate, candidates_from_gres,
                                                     candidates_from_placements, estimate_argv, placed_script)
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.cluster.allowlist import CommandPolicy
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.transport.interface import CommandResult
from betty_jupyter.errors import PolicyError, SlurmError

SCRIPT = SbatchScript.parse("#!/bin/bash\n#SBATCH --partition=gpu\n#SBATCH --gres=gpu:a100:2\n"
                            "#SBATCH --time=01:00:00\n#SBATCH --mem=8G\n#SBATCH --job-name=x\npython train.py\n")
GPU = Candidate("gpu", "h100")

# What sbatch --test-only prints on stderr (22.05.8 on the dev cluster; the cluster form from the same source
# in 23.02 to 24.11, where the answer names the cluster it came from).
STARTS = [
    "sbatch: Job 17 to start at 2026-11-25T04:12:00 using 2 processors on nodes betty-node in partition gpu\n",
    "sbatch: Job 17 to start at 2026-11-25T04:12:00 on cluster betty using 2 processors on nodes betty-node "
    "in partition gpu\n",
    "sbatch: site notice: be kind\nsbatch: Job 17 to start at 2026-11-25T04:12:00 using 2 processors on nodes "
    "betty-node in partition gpu\n  Preempts: 12\n",
]


def result(stderr: str, code: int = 0, stdout: str = "") -> CommandResult:
    return CommandResult(("sbatch", "--test-only"), stdout, stderr, code, 1.0)


@pytest.mark.parametrize("stderr", STARTS)
def test_each_form_of_the_start_sentence_is_read(stderr: str) -> None:
    estimate = read_start(GPU, result(stderr))
    assert (estimate.start, estimate.nodes, estimate.processors, estimate.reason) == (
        datetime(2026, 11, 25, 4, 12), "betty-node", 2, None)


@pytest.mark.parametrize(("stderr", "reason"), [
    ("sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition name specified\n",
     "Slurm refused: invalid partition specified: nope"),
    ("allocation failure: Requested node configuration is not available\n",
     "Slurm refused: Requested node configuration is not available"),
    ("", "Slurm refused: sbatch exited 1 without a word"),
])
def test_a_refusal_is_one_line(stderr: str, reason: str) -> None:
    estimate = read_start(GPU, result(stderr, 1))
    assert estimate.reason == reason and not estimate.ok and "\n" not in estimate.reason


@pytest.mark.parametrize("stderr", [
    "sbatch: Job 17 to start at Tomorrow 04:12 using 2 processors on nodes n1 in partition gpu\n",
    "sbatch: Job 17 to start at 2026-11-25T04:12:00 using 2 processors\n",
    "sbatch: Job 1 to start at 2026-11-25T04:12:00 using 2 processors on nodes n in partition a\n" * 2,
])
def test_an_answer_that_is_not_exactly_a_start_is_said_so(stderr: str) -> None:
    estimate = read_start(GPU, result(stderr))
    assert estimate.start is None and estimate.reason and "\n" not in estimate.reason


def test_the_argv_keeps_the_request_and_puts_the_candidate_in_place() -> None:
    argv = estimate_argv(SCRIPT, Candidate("gpu", "h100", 2))
    assert argv == ["sbatch", "--test-only", "--partition=gpu", "--time=01:00:00", "--mem=8G", "--nodes=2",
                    "--gres=gpu:h100:2", "--wrap=true"]
    assert CommandPolicy().check(argv).argv == tuple(argv)


def test_a_placed_script_changes_only_its_placement_lines_as_the_argv_asked() -> None:
    placed = placed_script(SCRIPT, Candidate("big", "h100"))
    assert placed.render() == SCRIPT.render().replace("--partition=gpu", "--partition=big").replace(
        "--gres=gpu:a100:2", "--gres=gpu:h100:2")
    untyped = SbatchScript.parse("#!/bin/bash\n#SBATCH --gpus=2\n#SBATCH --time=5\ntrue\n")
    moved = placed_script(untyped, Candidate("gpu", "h100"))
    assert moved.get("gpus") is None and moved.get("gres") == "gpu:h100:2" and moved.get("partition") == "gpu"
    argv = estimate_argv(untyped, Candidate("gpu", "h100"))
    assert sorted(argv[2:-1]) == sorted(f"--{d.option}={d.value}" for d in moved.directives)


@pytest.mark.parametrize("argv", [
    ["sbatch", "job.sh"],
    ["sbatch", "--wrap=true"],
    ["sbatch", "--parsable", "--test-only", "--wrap=true"],
    ["sbatch", "--test-only", "job.sh"],
    ["sbatch", "--test-only", "--wrap=true", "job.sh"],
    ["sbatch", "--test-only", "--wrap=rm -rf ~"],
    ["sbatch", "--test-only", "--wrap=true", "--wrap=true"],
    ["sbatch", "--test-only", "--hold", "--wrap=true"],
    ["sbatch", "--test-only", "--test-only", "--wrap=true"],
    ["sbatch", "--test-only", "--partition", "gpu", "--wrap=true"],
    ["sbatch", "--test-only", "-p", "gpu", "--wrap=true"],
    ["sbatch", "--test-only", "--part=gpu", "--wrap=true"],
    ["sbatch", "--test-only", "--export=ALL", "--wrap=true"],
    ["sbatch", "--test-only", "--output=/etc/passwd", "--wrap=true"],
    ["sbatch", "--test-only", "--partition=", "--wrap=true"],
    ["sbatch", "--test-only", "--partition=gpu;sbatch x", "--wrap=true"],
    ["sbatch", "--test-only", "--partition=gpu\nsbatch", "--wrap=true"],
    ["sbatch", "--test-only", "--job-name=$(id)", "--wrap=true"],
    ["sbatch", "--test-onl", "--wrap=true"],
    ["sbatch", "--test-only=1", "--wrap=true"],
    ["sbatch"],
])
def test_only_sbatch_test_only_with_its_options_passes_as_a_read(argv: list[str]) -> None:
    with pytest.raises(PolicyError, match="^refused: "):
        CommandPolicy().check(argv)


def test_sbatch_as_text_is_refused_unless_it_is_a_start_estimate() -> None:
    with pytest.raises(PolicyError, match="submits a job"):
        CommandPolicy().check("sbatch job.sh")
    assert CommandPolicy().check("sbatch --test-only --partition=gpu --wrap=true").argv[1] == "--test-only"
    assert "sbatch --test-only" in CommandPolicy().describe()


def test_a_hostile_script_value_stays_text_and_becomes_a_refusal_for_its_candidate() -> None:
    script = SbatchScript.parse('#!/bin/bash\n#SBATCH --constraint="a100|$(reboot)"\ntrue\n')
    cluster = ScriptedTransport()
    advice = asyncio.run(PlacementAdvisor(cluster, cache=StartCache()).advise(script, [Candidate("gpu")]))
    assert cluster.ran("sbatch") == []
    assert advice.estimates[0].reason and advice.estimates[0].reason.startswith("refused: ")


@pytest.mark.parametrize("name", ["gpu;reboot", "a b", "gpu\n", "$(id)", "../x", ""])
def test_a_hostile_partition_name_is_refused_before_anything_runs(name: str) -> None:
    with pytest.raises(SlurmError, match="characters Slurm names never use"):
        Candidate(name)


def answering(start: str = "2026-11-25T04:12:00") -> ScriptedTransport:
    def answer(argv: tuple[str, ...]):  # the partition is in the answer, as Slurm says it
        from betty_jupyter.cluster.scripted import Reply

        if argv[0] == "sbatch":
            partition = next(word.split("=", 1)[1] for word in argv if word.startswith("--partition="))
            return Reply(stderr=f"sbatch: Job 3 to start at {start} using 1 processors on nodes n1 in partition "
                                f"{partition}\n")
        return None
    return ScriptedTransport(answer).on("scontrol", stdout="PartitionName=gpu State=UP\n")


def test_a_second_advice_within_the_minute_asks_the_scheduler_nothing() -> None:
    cluster = answering()
    cache = StartCache()
    first = PlacementAdvisor(cluster, cache=cache)
    candidates = [Candidate("gpu", "a100"), Candidate("gpu", "h100"), Candidate("cpu")]
    advice = asyncio.run(first.advise(SCRIPT, candidates))
    assert advice.scheduler_calls == 3 and len(cluster.ran("sbatch")) == 3
    again = asyncio.run(PlacementAdvisor(cluster, cache=cache).advise(SCRIPT, candidates))
    assert again.scheduler_calls == 0 and len(cluster.ran("sbatch")) == 3
    assert all(estimate.cached for estimate in again.estimates)
    cache.seconds = 0  # an answer older than the cache's age is asked again
    assert asyncio.run(PlacementAdvisor(cluster, cache=cache).advise(SCRIPT, candidates)).scheduler_calls == 3


def test_no_more_than_parallel_questions_are_in_flight() -> None:
    in_flight, most = 0, 0

    class Slow(ScriptedTransport):
        async def run(self, argv, timeout=60.0, *, idempotent=True):
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            in_flight -= 1
            return await answering().run(argv, timeout)

    advisor = PlacementAdvisor(Slow(), parallel=2, cache=StartCache())
    advice = asyncio.run(advisor.advise(SCRIPT, [Candidate(f"p{index}") for index in range(6)]))
    assert most == 2 and advice.scheduler_calls == 6 and all(estimate.ok for estimate in advice.estimates)


def test_a_candidate_unanswered_within_the_budget_says_so() -> None:
    class Stuck(ScriptedTransport):
        async def run(self, argv, timeout=60.0, *, idempotent=True):
            if argv[0] == "sbatch":
                await asyncio.Event().wait()
            return await super().run(argv, timeout)

    advice = asyncio.run(PlacementAdvisor(Stuck(), budget=0.05, cache=StartCache()).advise(SCRIPT, [GPU]))
    assert advice.estimates[0].reason == "no answer within 0 s; ask again"


def test_ranking_is_start_then_fit_then_cost() -> None:
    now = datetime(2026, 11, 25, 4, 0)
    at = lambda minute: datetime(2026, 11, 25, 4, minute)  # noqa: E731
    estimates = [
        StartEstimate(Candidate("late"), (), start=at(50)),
        StartEstimate(Candidate("refused"), (), reason="Slurm refused: x"),
        StartEstimate(Candidate("gpu", "a100", headroom_gib=2.0), (), start=at(10), cost=4.0),
        StartEstimate(Candidate("gpu", "h100", headroom_gib=30.0), (), start=at(10), cost=9.0),
        StartEstimate(Candidate("cheap", headroom_gib=30.0), (), start=at(10), cost=1.0),
    ]
    labels = [estimate.candidate.label for estimate in rank(estimates, now)]
    assert labels == ["cheap", "gpu (h100)", "gpu (a100)", "late", "refused"]
    advice = Advice(rank(estimates, now), now, 0)
    assert advice.summary() == "starts ~in 10 min on cheap, gpu (h100), gpu (a100); ~in 50 min on late"
    assert advice.summary(limit=1) == "starts ~in 10 min on cheap, gpu (h100), gpu (a100)"


@pytest.mark.parametrize(("minutes", "text"), [(0, "now"), (12, "~in 12 min"), (180, "~3 h"), (4 * 1440, "~4 days"),
                                               (None, "unknown")])
def test_waits_read_as_a_person_says_them(minutes: int | None, text: str) -> None:
    assert wait_text(minutes) == text


def test_billing_weights_are_read_field_by_field_and_priced() -> None:
    text = ("PartitionName=gpu State=UP TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2,GRES/gpu:h100=6\n"
            "PartitionName=cpu State=UP\n")
    weights = read_billing_weights(text)
    assert weights == {"gpu": {"cpu": 1.0, "mem": 0.25, "gres/gpu": 2.0, "gres/gpu:h100": 6.0}}
    assert read_billing_weights("PartitionName=x TRESBillingWeights=Mem=1\n") == {"x": {"mem": 1024.0}}
    # 1 CPU, 8 GB at 0.25, 2 GPUs at 2, 2 h100s at 6 more
    assert billing_rate(SCRIPT, Candidate("gpu", "h100"), weights) == 1 + 2 + 4 + 12
    assert billing_rate(SCRIPT, Candidate("gpu", "a100"), weights) == 1 + 2 + 4
    assert billing_rate(SCRIPT, Candidate("cpu"), weights) is None


def test_candidates_come_from_gres_and_from_the_gpu_estimate() -> None:
    offers = {"cpu": {}, "gpu": {"a100": 4, "h100": 2}, "small": {"t4": 1}}
    found = candidates_from_gres(SCRIPT, offers, [None, 2])
    assert [c.label for c in found] == ["gpu (a100)", "gpu (a100, 2 nodes)", "gpu (h100)", "gpu (h100, 2 nodes)"]
    cpu_only = SbatchScript.parse("#!/bin/bash\ntrue\n")
    assert [c.label for c in candidates_from_gres(cpu_only, offers)] == ["cpu", "gpu", "small"]
    placements = [{"partition": "gpu", "gpu": "A100-40GB", "headroom_gib": 12.5},
                  {"partition": "gpu", "gpu": "h100", "headroom_gib": 40.0}, {"partition": None, "gpu": "l4"}]
    from_estimate = candidates_from_placements(placements, offers)
    assert [(c.label, c.headroom_gib) for c in from_estimate] == [("gpu (a100)", 12.5), ("gpu (h100)", 40.0)]


def test_pending_starts_are_read_from_betty_s_fixed_format() -> None:
    row = SEPARATOR.join(["42", "gpu", "PENDING", "Resources", "2026-11-25T05:00:00", "1", "2"])
    unknown = SEPARATOR.join(["43", "gpu", "PENDING", "Priority", "N/A", "1", "2"])
    rows = read_pending(f"{row}\n{unknown}\n")
    assert [(r.job_id, r.reason, r.start) for r in rows] == [("42", "Resources", datetime(2026, 11, 25, 5)),
                                                              ("43", "Priority", None)]
    with pytest.raises(SlurmError, match="fields"):
        read_pending("42 gpu PENDING\n")
