"""One cluster object per configured cluster, shared by the process, with no cluster at all: the link made again
after it broke, the facts read once, every session and the watcher on the one object. The same over the real dev
cluster, counting real connections, is ``test_shared_cluster_cluster.py``."""

from __future__ import annotations

import asyncio

import pytest

from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.cluster import shared
from betty_jupyter.transport.link import Link
from betty_jupyter.cluster.parsing import SEPARATOR
from betty_jupyter.cluster.profiles import ClusterProfile
from betty_jupyter.transport.remote_shell import ShellClosed
from betty_jupyter.cluster.shared import Cluster, close_clusters, shared_cluster
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.errors import CommandTimeout, HostKeyError, LinkProblem, TransportError
from betty_jupyter.experiments.watcher import ClusterClients
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import init_workspace

PARTITION = SEPARATOR.join(["debug*", "up", "0/1/0/1", "0/4/0/4", "4000", "(null)", "1:00:00", "1"])
SECRET = "s3cret-value"


def dropped(idempotent: bool = True) -> TransportError:
    """What a transport raises when its link dropped under a command it had retried (a read) or sent (a write)."""
    closed = ShellClosed("the shell on hpc closed")
    if idempotent:
        return closed
    unknown = TransportError("the link to hpc dropped while `sbatch` ran; its outcome is unknown")
    unknown.__cause__ = closed
    return unknown


class BreakingTransport(ScriptedTransport):
    """A scripted cluster that fails the next ``breaks`` commands with ``error`` (default: its link dropped)."""

    def __init__(self, breaks: int = 0, error: TransportError | None = None) -> None:
        super().__init__()
        self.breaks = breaks
        self.error = error or dropped()
        self.on("sinfo", stdout=PARTITION + "\n").on("id", "-un", stdout="alice\n").on("sbatch", stdout="42\n")

    async def run(self, argv, timeout=60.0, *, idempotent=True):
        if self.breaks:
            self.breaks -= 1
            self.calls.append(tuple(argv))
            raise self.error
        return await super().run(argv, timeout, idempotent=idempotent)


def opener(*made: BreakingTransport):
    """A transport maker handing out ``made`` in order, the last one again and again."""
    given: list[BreakingTransport] = []

    def open_transport() -> BreakingTransport:
        transport = made[min(len(given), len(made) - 1)]
        given.append(transport)
        return transport
    return open_transport, given


def test_a_read_after_a_broken_link_runs_once_more_over_a_fresh_transport_and_the_broken_one_is_closed() -> None:
    first, second = BreakingTransport(breaks=1), BreakingTransport()
    open_transport, given = opener(first, second)
    link = Link(open_transport)
    assert link.opened == 0 and given == [], "nothing is opened before the first command"
    result = asyncio.run(link.run(["sinfo", "--noheader"]))
    assert result.ok and result.stdout.startswith("debug*")
    assert given == [first, second] and link.opened == 2 and first.closed and not second.closed
    assert len(first.calls) == 1 and len(second.calls) == 1
    asyncio.run(link.run(["id", "-un"]))
    assert link.opened == 2 and len(second.calls) == 2, "a working link is kept"


def test_a_write_after_a_broken_link_is_never_sent_again_but_the_next_command_gets_a_fresh_transport() -> None:
    first, second = BreakingTransport(breaks=1, error=dropped(idempotent=False)), BreakingTransport()
    open_transport, given = opener(first, second)
    cluster = Cluster(ClusterProfile(name="hpc", transport="local"), Link(open_transport))
    argv = ["env", f"TOKEN={SECRET}", "sbatch", "--parsable", "job.sh"]
    with pytest.raises(TransportError) as raised:
        asyncio.run(cluster.link.run(argv, idempotent=False))
    assert SECRET not in str(raised.value), "the error is the transport's own and names no argument"
    assert given == [first] and first.closed and second.calls == [], "the outcome is unknown: it is not sent again"
    assert asyncio.run(cluster.slurm.partitions())["partition"].tolist() == ["debug"]
    assert given == [first, second] and second.ran("sinfo")


@pytest.mark.parametrize("error", [
    TransportError("hpc:22 refused to log in alice", LinkProblem.LOGIN),
    HostKeyError("hpc", "ssh-ed25519", "SHA256:abc", "/dev/null"),
    CommandTimeout("`sinfo` did not finish within 1 s on hpc; it was stopped"),
    TransportError("hpc:22 refused the connection", LinkProblem.REFUSED),
    TransportError("the login to hpc was cancelled in Betty's panel"),
    TransportError("cannot reach hpc:22 (Connection reset by peer); is sshd running and the host reachable?"),
], ids=["login", "host-key", "timeout", "refused", "cancelled-login", "cannot-reach"])
def test_failing_to_connect_or_log_in_or_a_slow_command_is_no_dropped_link(error: TransportError) -> None:
    first = BreakingTransport(breaks=1, error=error)
    open_transport, given = opener(first, BreakingTransport())
    link = Link(open_transport)
    with pytest.raises(type(error)):
        asyncio.run(link.run(["sinfo"]))
    assert given == [first] and not first.closed, "asking again would only ask the person again"


def test_closing_a_link_closes_its_transport_and_a_later_command_opens_a_fresh_one() -> None:
    first, second = BreakingTransport(), BreakingTransport()
    open_transport, given = opener(first, second)
    link = Link(open_transport)
    asyncio.run(link.run(["id", "-un"]))
    asyncio.run(link.close())
    asyncio.run(link.close())
    assert first.closed and link.transport is None
    asyncio.run(link.run(["id", "-un"]))
    assert given == [first, second]


def test_the_facts_are_read_once_for_every_reader_and_the_partitions_again_after_their_time(monkeypatch) -> None:
    transport = BreakingTransport()
    cluster = Cluster(ClusterProfile(name="hpc", transport="local"), transport)

    async def ten_readers() -> list[shared.ClusterFacts]:
        return list(await asyncio.gather(*(cluster.facts() for _ in range(10))))

    facts = asyncio.run(ten_readers())
    assert {(f.user, tuple(f.partitions["partition"])) for f in facts} == {("alice", ("debug",))}
    assert asyncio.run(cluster.user()) == "alice"
    assert asyncio.run(cluster.facts()).partitions is facts[0].partitions
    assert cluster.fact_reads == 1 and len(transport.ran("sinfo")) == 1 and len(transport.ran("id")) == 1
    monkeypatch.setattr(shared, "FACTS_SECONDS", 0.0)
    asyncio.run(cluster.facts())
    assert cluster.fact_reads == 2 and len(transport.ran("sinfo")) == 2
    assert len(transport.ran("id")) == 1, "the login name cannot change while the profile does not"


def test_facts_the_cluster_did_not_answer_are_asked_again() -> None:
    transport = BreakingTransport(breaks=2)
    cluster = Cluster(ClusterProfile(name="hpc", transport="local"), transport)
    first = asyncio.run(cluster.facts())
    assert first.user is None and first.partitions is None
    second = asyncio.run(cluster.facts())
    assert second.user == "alice" and second.partitions is not None and cluster.fact_reads == 2


def test_the_process_hands_out_one_cluster_per_profile_and_a_new_one_when_the_profile_changed() -> None:
    profile = ClusterProfile(name="hpc", transport="local", work_dir="/scratch/betty")
    one = shared_cluster(profile)
    assert shared_cluster(ClusterProfile.from_dict(profile.to_dict())) is one and one.shared
    changed = shared_cluster(ClusterProfile(name="hpc", transport="local", work_dir="/scratch/other"))
    assert changed is not one and changed.slurm.work_dir == "/scratch/other"
    asyncio.run(close_clusters())
    assert shared.shared_clusters() == [] and shared_cluster(profile) is not one


def test_the_slurm_client_is_configured_from_the_whole_profile() -> None:
    profile = ClusterProfile(name="hpc", transport="local", work_dir="/scratch/betty/", job_env=("PROJECT",),
                             readable_roots=("/scratch",))
    slurm = shared_cluster(profile).slurm
    assert (slurm.work_dir, slurm.job_env, slurm.readable_roots) == ("/scratch/betty", ("PROJECT",), ("/scratch",))


def test_ten_sessions_and_the_watcher_share_one_cluster_one_link_and_one_read_of_the_facts(tmp_path, monkeypatch):
    made: list[BreakingTransport] = []

    def open_transport(profile: ClusterProfile) -> BreakingTransport:
        made.append(BreakingTransport())
        return made[-1]

    monkeypatch.setattr(ClusterProfile, "open_transport", open_transport)
    init_workspace(tmp_path / "project")
    workspace = Workspace.at(tmp_path / "project")
    config = BettyConfig(clusters=[{"name": "hpc", "transport": "local", "job_env": ["PROJECT"]}])

    async def sessions_then_close() -> tuple[list, bool]:
        opened = [await open_session(workspace, config, SessionSpec(require_model=False)) for _ in range(10)]
        for session in opened:
            await session.context.close()
        return opened, bool(made) and made[0].closed

    opened, closed_by_a_session = asyncio.run(sessions_then_close())
    watched = ClusterClients(config)("hpc")
    assert len({id(s.context.cluster) for s in opened}) == 1 and watched is opened[0].context.slurm
    assert watched.job_env == ("PROJECT",), "the watcher's client has the whole profile"
    assert len(made) == 1 and not closed_by_a_session, "a session never closes the process's link"
    assert len(made[0].ran("id")) == 1 and len(made[0].ran("sinfo")) == 1
    assert all(s.user == "alice" and "debug" in s.messages[0]["content"] for s in opened)
    asyncio.run(close_clusters())
    assert made[0].closed, "the process closes it"


def test_a_session_given_its_own_transport_keeps_it_to_itself_and_closes_it(tmp_path) -> None:
    init_workspace(tmp_path / "project")
    config = BettyConfig(clusters=[{"name": "hpc", "transport": "local"}])
    own = BreakingTransport()

    async def session_then_close():
        session = await open_session(Workspace.at(tmp_path / "project"), config,
                                     SessionSpec(require_model=False, transport=own))
        await session.context.close()
        return session

    session = asyncio.run(session_then_close())
    assert session.context.slurm.transport is own and not session.context.cluster.shared and own.closed
    assert shared.shared_clusters() == []
