"""What the cluster is doing: the overview's figures against what ``sinfo`` and ``squeue`` report in the same moment,
one ``sinfo`` and one ``squeue`` per refresh (none while the kept answer is fresh), hostile names kept as text, in the
CLI, the agent's tool, the server route and a real kernel's figure."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from datetime import datetime, timedelta
from typing import Any, Iterator

import pytest

from betty_jupyter.advisor.overview import (
    OverviewReader,
    add_queue,
    node_state,
    overview_table,
    parse_nodes,
    sinfo_argv,
    wait_text,
)
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.transport.interface import CommandResult, program_name
from conftest import run_betty
from test_server_support import call, jp_server_config, llm, refusal  # noqa: F401  (fixtures)

HOSTILE_PARTITION = "<img/src=x/onerror=alert(1)>$\\alpha$"
"""A partition name an admin (or an attacker with scontrol) could give: HTML, and mathtext for matplotlib."""
HOSTILE_JOB = "own\x1fjob\n<b>two</b>"
"""A job name with Betty's own separator and a line break in it."""
S = SEPARATOR


# ----- fast: the parsers and the counting ----------------------------------------------------------------------------
def node_line(partition: str, state: str, cpus: str, gres: str = "(null)", used: str = "(null)",
              memory: str = "1000", allocated: str = "0") -> str:
    return S.join([partition, "n1", state, cpus, gres, used, memory, allocated]) + S + "\n"


def test_nodes_are_counted_by_state_and_gpus_by_type() -> None:
    text = (node_line("gpu*", "mixed", "2/6/0/8", "gpu:a100:4,gpu:h100:2(S:0)", "gpu:a100:1(IDX:0),gpu:h100:0",
                      allocated="200")
            + node_line("gpu*", "drained", "0/0/8/8", "gpu:a100:4", "gpu:a100:0")
            + node_line(HOSTILE_PARTITION, "down*", "0/0/4/4")
            + node_line("cpu", "idle~", "0/4/0/4"))
    partitions = parse_nodes(text)
    assert list(partitions) == ["gpu", HOSTILE_PARTITION, "cpu"]
    gpu = partitions["gpu"]
    assert gpu["default"] and gpu["nodes"] == {"idle": 0, "mixed": 1, "allocated": 0, "down": 1, "other": 0}
    assert gpu["cpus"] == {"allocated": 2, "idle": 6, "down": 8}
    assert gpu["gpus"] == {"a100": {"allocated": 1, "idle": 3, "down": 4},
                           "h100": {"allocated": 0, "idle": 2, "down": 0}}
    assert gpu["memory_bytes"] == 2000 * 1024**2 and gpu["memory_allocated_bytes"] == 200 * 1024**2
    assert partitions[HOSTILE_PARTITION]["cpus"]["down"] == 4 and partitions["cpu"]["nodes"]["idle"] == 1


@pytest.mark.parametrize(("text", "state"), [
    ("idle", "idle"), ("mixed-", "mixed"), ("allocated+", "allocated"), ("drained", "down"), ("draining", "down"),
    ("down*", "down"), ("fail", "down"), ("completing", "other"), ("reserved", "other"), ("planned", "other"),
    ("idle#", "idle"), ("<b>x</b>", "other"),
])
def test_node_states_in_every_spelling(text: str, state: str) -> None:
    assert node_state(text) == state


def test_unreadable_cpus_are_one_clear_error() -> None:
    from betty_jupyter.errors import SlurmError

    with pytest.raises(SlurmError, match="CPUs allocated/idle/other/total"):
        parse_nodes(node_line("gpu", "idle", "<b>"))


def test_the_queue_counts_array_tasks_waits_and_the_persons_share() -> None:
    partitions = parse_nodes(node_line("gpu", "mixed", "4/4/0/8", "gpu:a100:4", "gpu:a100:2")
                             + node_line("cpu", "mixed", "4/4/0/8"))
    jobs = [
        {"state": "RUNNING", "user": "ada", "partition": "gpu", "cpus": "4", "nodes": "2", "gpus": 1, "tasks": 1,
         "started": "2026-01-01T10:00:00", "elapsed": timedelta(minutes=30)},
        {"state": "PENDING", "user": "ada", "partition": "gpu,cpu", "cpus": "1", "nodes": "1", "gpus": 0,
         "tasks": 10, "started": "2026-01-01T10:42:00"},
        {"state": "PENDING", "user": "<b>eve</b>", "partition": "gpu", "cpus": "1", "nodes": "1", "gpus": 0,
         "tasks": 1, "started": "N/A"},
        {"state": "COMPLETED", "user": "ada", "partition": "gpu", "cpus": "1", "nodes": "1", "gpus": 0, "tasks": 1,
         "started": "N/A"},
    ]
    mine = add_queue(partitions, jobs, "ada")
    assert mine == {"running": 1, "pending": 10, "cpus": 4, "gpus": 2}
    gpu, cpu = partitions["gpu"], partitions["cpu"]
    assert (gpu["running"], gpu["pending"], gpu["pending_with_estimate"]) == (1, 11, 10)
    assert gpu["next_start_seconds"] == 12 * 60  # 10:42 on the cluster's clock, which is 10:30 (10:00 + 30 min)
    assert (cpu["pending"], cpu["mine"]["pending"], cpu["running"]) == (10, 10, 0)
    table = overview_table({"user": "ada", "read_at": "x", "partitions": list(partitions.values()), "mine": mine})
    assert "~12 min" in table and "yours (ada): 1 running (4 CPUs, 2 GPUs), 10 pending" in table
    assert wait_text(None) == "unknown" and wait_text(3 * 3600) == "~3 h"


def test_a_hostile_partition_stays_one_line_of_text_in_the_table() -> None:
    partitions = parse_nodes(node_line("a\x1b[31mred\nx", "idle", "0/4/0/4"))
    table = overview_table({"user": "a\rb", "read_at": "x", "partitions": list(partitions.values()),
                            "mine": {"running": 0, "pending": 0, "cpus": 0, "gpus": 0}})
    assert "\x1b" not in table and "\r" not in table and "\\x1b[31mred\\nx" in table


def test_one_sinfo_and_one_squeue_per_refresh_none_while_fresh() -> None:
    cluster = (ScriptedTransport().on("id", stdout="ada\n").on("sinfo", stdout=node_line("gpu", "idle", "0/8/0/8"))
               .on("squeue", stdout=""))
    reader = OverviewReader(SlurmClient(cluster), kept=3600)

    async def three_at_once() -> list[Any]:
        return list(await asyncio.gather(reader.read(), reader.read(), reader.read()))

    first, second, third = asyncio.run(three_at_once())
    assert first == second == third and first["user"] == "ada"
    assert sorted(program_name(argv) for argv in cluster.calls) == ["id", "sinfo", "squeue"]
    asyncio.run(reader.read())
    assert len(cluster.calls) == 3, "a fresh answer is kept: nothing more is asked"
    reader.kept = 0
    asyncio.run(reader.read())
    assert sorted(program_name(argv) for argv in cluster.calls[3:]) == ["sinfo", "squeue"]


def test_a_failed_sinfo_is_one_line_and_is_asked_again() -> None:
    from betty_jupyter.errors import SlurmError

    cluster = ScriptedTransport().on("id", stdout="ada\n").on("squeue", stdout="")
    cluster.on("sinfo", stderr="sinfo: error: <b>down</b>\n", exit_code=1)
    reader = OverviewReader(SlurmClient(cluster), kept=3600)
    for _ in range(2):
        with pytest.raises(SlurmError, match=r"^sinfo failed: sinfo: error: <b>down</b>$"):
            asyncio.run(reader.read())
    assert [program_name(argv) for argv in cluster.calls].count("sinfo") == 2


def test_the_tool_takes_no_arguments() -> None:
    from pydantic import ValidationError

    from betty_jupyter.agent.tools.overview import ClusterOverview

    ClusterOverview.Args.model_validate({})
    with pytest.raises(ValidationError):
        ClusterOverview.Args.model_validate({"command": "sinfo; rm -rf ~"})


# ----- the real dev cluster ------------------------------------------------------------------------------------------
def slurm_command(dev_cluster: dict[str, str], *argv: str) -> str:
    """A Slurm command run by hand, as the admins or another user would."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, cwd="/tmp",
                          env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_until(check: Any, what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.3)
    return found


@pytest.fixture(scope="module")
def busy(dev_cluster: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The dev cluster made busy: own jobs holding CPUs and GPUs (one in a partition with a hostile name, one with a
    hostile job name), another user's job holding both H100s, and an own array waiting for them. All cancelled, and
    the partition deleted, afterwards."""
    run = lambda *argv: slurm_command(dev_cluster, *argv)  # noqa: E731
    run("scontrol", "create", f"PartitionName={HOSTILE_PARTITION}", "Nodes=betty-node", "State=UP", "MaxTime=60")
    jobs: list[str] = []

    def submit(*argv: str) -> str:
        jobs.append(run("sbatch", "--parsable", "--output=/dev/null", "--time=30", *argv).strip())
        return jobs[-1]

    try:
        own_gpu = submit("-p", "gpu", "--gres=gpu:a100:1", "-c", "2", f"--job-name={HOSTILE_JOB}", "--wrap",
                         "sleep 900")
        own_hostile = submit("-p", HOSTILE_PARTITION, "-c", "1", "--wrap", "sleep 900")
        stranger = submit("--uid=nobody", "-p", "gpu", "--gres=gpu:h100:2", "-c", "2", "--wrap", "sleep 900")
        running = [own_gpu, own_hostile, stranger]
        wait_until(lambda: set(run("squeue", "-h", "-t", "R", "-o", "%i").split()) >= set(running),
                   "the three long jobs running")
        waiting = submit("-p", "gpu", "--gres=gpu:h100:1", "-c", "1", "--time=5", "--array=0-3", "--wrap", "sleep 60")
        wait_until(lambda: run("squeue", "-h", "--start", "-j", waiting, "-o", "%S").split() not in ([], ["N/A"]),
                   "Slurm's expected start of the waiting array")
        yield {"own": [own_gpu, own_hostile], "stranger": stranger, "waiting": waiting}
    finally:
        if jobs:
            subprocess.run(["scancel", *jobs], env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"},
                           capture_output=True, timeout=60)
        wait_until(lambda: not set(run("squeue", "-h", "-o", "%F").split()) & set(jobs), "the jobs gone", 60)
        run("scontrol", "delete", f"PartitionName={HOSTILE_PARTITION}")


class CountingTransport:
    """The real transport, with every program it ran counted (the scheduler calls)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.programs: list[str] = []

    async def run(self, argv: Any, timeout: float, **options: Any) -> CommandResult:
        self.programs.append(program_name(tuple(argv)))
        result: CommandResult = await self.inner.run(argv, timeout, **options)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def slurm_says(dev_cluster: dict[str, str]) -> dict[str, Any]:
    """What Slurm itself reports now: CPUs (A/I/O/T) per partition, jobs per partition and state (each array task
    one line with -r), the expected start of the pending jobs per partition, the own running jobs' CPUs."""
    run = lambda *argv: slurm_command(dev_cluster, *argv)  # noqa: E731
    cpus = dict(line.rsplit("|", 1) for line in run("sinfo", "-h", "-o", "%R|%C").splitlines())
    queue = [line.split("|") for line in run("squeue", "-h", "-r", "-o", "%P|%T|%u|%C|%S|%b").splitlines()]
    return {"cpus": cpus, "queue": sorted(queue)}


def mine_in(queue: list[list[str]], user: str = "root") -> dict[str, int]:
    """The person's share as Slurm reports it (rows of :func:`slurm_says`): jobs running and pending (each array task
    one), the CPUs and GPUs the running ones hold. Jobs of earlier tests count too, as they do in the overview."""
    mine = [row for row in queue if row[2] == user]
    running = [row for row in mine if row[1] == "RUNNING"]
    gpus = sum(int(found.group(1)) for row in running if (found := re.search(r"gpu(?::[\w.+-]+)?:(\d+)", row[5])))
    return {"running": len(running), "pending": sum(row[1] == "PENDING" for row in mine),
            "cpus": sum(int(row[3]) for row in running), "gpus": gpus}


def yours(mine: dict[str, int], user: str = "root") -> str:
    """The overview's line for the person's share."""
    return (f"yours ({user}): {mine['running']} running ({mine['cpus']} CPUs, {mine['gpus']} GPUs), "
            f"{mine['pending']} pending")


def same_moment(dev_cluster: dict[str, str], read: Any, agrees: Any = None,
                timeout: float = 60) -> tuple[Any, dict[str, Any]]:
    """``read()`` and what Slurm says, in a moment when Slurm says the same before and after the read.

    A reader that keeps its answer a few seconds (the kernel's, the agent tool's) may answer a retry with the read
    of a moment that did not hold still: ``agrees(answer, said)`` tells such an answer apart, and the read is tried
    again until one agrees or ``timeout`` passes (then the last answer is shown)."""
    deadline = time.monotonic() + timeout
    while True:
        before = slurm_says(dev_cluster)
        answer = read()
        if slurm_says(dev_cluster) == before and (agrees is None or agrees(answer, before)):
            return answer, before
        assert time.monotonic() < deadline, f"no read of a moment that held still: {answer!r} against {before!r}"


def test_the_overview_is_what_sinfo_and_squeue_report(busy: dict[str, Any], local_profile: Any,
                                                     dev_cluster: dict[str, str]) -> None:
    transport = CountingTransport(local_profile.open_transport())
    reader = OverviewReader(SlurmClient(transport), kept=0)
    deadline = time.monotonic() + 60
    while True:  # the same moment: Slurm says the same before and after the overview's read
        before = slurm_says(dev_cluster)
        overview = asyncio.run(reader.read())
        if slurm_says(dev_cluster) == before:
            break
        assert time.monotonic() < deadline, "the cluster never held still for one read"
    partitions = {entry["partition"]: entry for entry in overview["partitions"]}
    assert set(partitions) == set(before["cpus"]) == {"cpu", "gpu", HOSTILE_PARTITION}
    for name, entry in partitions.items():
        allocated, idle, other, total = (int(n) for n in before["cpus"][name].split("/"))
        assert entry["cpus"] == {"allocated": allocated, "idle": idle, "down": other}, name
        jobs = [row for row in before["queue"] if row[0] == name]
        assert entry["running"] == sum(row[1] == "RUNNING" for row in jobs), name
        assert entry["pending"] == sum(row[1] == "PENDING" for row in jobs), name
        mine = [row for row in jobs if row[2] == "root"]
        assert entry["mine"]["running"] == sum(row[1] == "RUNNING" for row in mine), name
        assert entry["mine"]["cpus"] == sum(int(row[3]) for row in mine if row[1] == "RUNNING"), name
        starts = [datetime.strptime(row[4], "%Y-%m-%dT%H:%M:%S") for row in jobs
                  if row[1] == "PENDING" and row[4] not in ("N/A", "Unknown")]
        assert entry["pending_with_estimate"] == len(starts), name
        if starts:
            now = datetime.strptime(overview["read_at"], "%Y-%m-%dT%H:%M:%S")
            assert entry["next_start_seconds"] == max(0.0, (min(starts) - now).total_seconds()), name
        else:
            assert entry["next_start_seconds"] is None, name
    gpu = partitions["gpu"]
    assert gpu["gpus"]["h100"]["allocated"] == 2, "the other user's job holds both H100s"
    assert gpu["mine"] == mine_in([row for row in before["queue"] if row[0] == "gpu"])
    assert gpu["mine"]["pending"] >= 4 and gpu["mine"]["gpus"] >= 1, "the fixture's array waits; its A100 job runs"
    assert partitions[HOSTILE_PARTITION]["mine"] == {"running": 1, "pending": 0, "cpus": 1, "gpus": 0}
    assert overview["mine"] == mine_in(before["queue"]) and overview["user"] == "root"
    asyncio.run(transport.close())


def test_one_sinfo_and_one_squeue_per_refresh_on_the_real_cluster(busy: dict[str, Any], local_profile: Any) -> None:
    transport = CountingTransport(local_profile.open_transport())
    reader = OverviewReader(SlurmClient(transport), kept=3600)

    async def panels_at_once() -> None:
        await asyncio.gather(*(reader.read() for _ in range(5)))

    asyncio.run(panels_at_once())
    assert sorted(transport.programs) == ["id", "sinfo", "squeue"]
    asyncio.run(reader.read())
    assert sorted(transport.programs) == ["id", "sinfo", "squeue"], "nothing while the kept answer is fresh"
    reader.kept = 0
    asyncio.run(reader.read())
    assert sorted(transport.programs[3:]) == ["sinfo", "squeue"]
    assert sinfo_argv()[:4] == ["sinfo", "--Node", "--noheader", "--Format"]
    asyncio.run(transport.close())


def test_betty_overview_prints_the_table_and_json(busy: dict[str, Any], cluster_env: dict[str, str]) -> None:
    shown, said = same_moment(cluster_env, lambda: run_betty("overview", env=cluster_env))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1].split() == ["partition", "nodes", "idle/mixed/alloc/down", "CPUs", "used/total", "GPUs",
                                "running", "pending", "next", "start", "yours"]
    assert any(line.startswith(HOSTILE_PARTITION + " ") for line in lines)
    assert yours(mine_in(said["queue"])) in shown.stdout
    pending_in_gpu = sum(row[0] == "gpu" and row[1] == "PENDING" for row in said["queue"])
    assert "gpu: next start " in shown.stdout and f" of {pending_in_gpu} estimated)" in shown.stdout
    data = json.loads(run_betty("overview", "--json", env=cluster_env).stdout)
    assert data["cluster"] == "betty-dev" and HOSTILE_PARTITION in [p["partition"] for p in data["partitions"]]
    bad = run_betty("overview", "--cluster", "nowhere", env=cluster_env)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "nowhere" in bad.stderr


def test_the_agent_tool_reads_it_for_the_model(busy: dict[str, Any], ctx_on_dev: Any,
                                                dev_cluster: dict[str, str]) -> None:
    from betty_jupyter.agent.tools.overview import ClusterOverview

    outcome, said = same_moment(dev_cluster,
                                lambda: asyncio.run(ClusterOverview().run(ctx_on_dev, ClusterOverview.Args())),
                                lambda outcome, said: outcome.data["mine"] == mine_in(said["queue"]))
    assert outcome.ok and outcome.data["mine"] == mine_in(said["queue"])
    waits = outcome.summary.split("expected waits: ", 1)[1]  # partitions in order; a job left pending elsewhere first
    assert HOSTILE_PARTITION in outcome.summary and "gpu: next start" in waits
    assert "<b>two</b>" not in outcome.summary, "jobs are counted, never named"


@pytest.fixture
def ctx_on_dev(local_profile: Any, tmp_path: Any) -> Iterator[Any]:
    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.experiments.workspace import Workspace
    from betty_jupyter.wiki import init_workspace

    init_workspace(tmp_path / "project")
    context = ToolContext.open(local_profile, Workspace.at(tmp_path / "project"), "s-overview")
    yield context
    asyncio.run(context.close())


# ----- the server route: one read for every panel -------------------------------------------------------------------
async def test_the_server_route_reads_once_for_panels_asking_at_once(busy: dict[str, Any], jp_fetch: Any) -> None:
    answers = await asyncio.gather(*(call(jp_fetch, "GET", "clusters", "betty-dev", "overview") for _ in range(4)))
    again = await call(jp_fetch, "GET", "clusters", "betty-dev", "overview")
    assert all(answer == answers[0] for answer in [*answers, again]), "one read, kept, for every panel"
    first = answers[0]
    assert first["ok"] and first["cluster"] == "betty-dev"
    names = [entry["partition"] for entry in first["overview"]["partitions"]]
    assert HOSTILE_PARTITION in names and first["overview"]["mine"]["pending"] >= 4, "the fixture's array waits"
    actions = (await call(jp_fetch, "GET", "actions", params={"session": "desk-betty-dev"}))["actions"]
    assert [(a["tool"], a["decision"]) for a in actions] == [("cluster_overview", "approved")]
    code, error = await refusal(jp_fetch, "GET", "clusters", "nowhere", "overview")
    assert code == 404 and "nowhere" in error
