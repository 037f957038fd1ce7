"""One link per cluster for the whole process, over the real dev cluster and its real sshd: chat, desk and automation
sessions and the job watcher hold one connection, counted as this process's TCP connections to the sshd, and read
the login name and the partitions once. The logic with no cluster is ``test_shared_cluster.py``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from conftest import run_betty

from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.agent.session import SessionSpec, open_session
from betty_jupyter.cluster.shared import close_clusters
from betty_jupyter.transport.ssh import SSHTransport
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.workspace import Workspace


def connections_to(port: int) -> int:
    """How many established TCP connections this process holds to ``port`` (its sockets, from /proc)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            established = fields[3] == "01"
            if established and int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in ours:
                count += 1
    return count


def test_ten_sessions_and_the_watcher_hold_one_connection_to_the_sshd(ssh_profile, tmp_path) -> None:
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    config = BettyConfig(clusters=[{**ssh_profile.to_dict(), "name": "betty-dev"}])
    port = ssh_profile.ssh_target().port
    before = connections_to(port)

    async def ten_sessions_and_the_watcher() -> dict[str, object]:
        assistant = Assistant(workspace, config)
        chats = [await assistant.session() for _ in range(8)]
        desk = await assistant.desk()
        automation = await open_session(workspace, config, SessionSpec(task="nightly check", require_model=False))
        sessions = [*chats, desk, automation]
        outcomes = [await session.run_tool("cluster_queue", {}, "tester") for session in sessions]
        watched = assistant.watch(min_interval=3600).client_for("betty-dev")
        await watched.queue()
        cluster = desk.context.cluster
        seen = {"connections": connections_to(port) - before, "clusters": {id(s.context.cluster) for s in sessions},
                "transports": cluster.link.opened, "logins": cluster.link.transport.connections_opened,
                "fact_reads": cluster.fact_reads, "users": {s.user for s in sessions},
                "ok": all(o.ok for o in outcomes), "watcher_shares": watched is cluster.slurm}
        await automation.context.close()
        await assistant.close()
        seen["after_closing_sessions"] = connections_to(port) - before
        await close_clusters()
        return seen

    seen = asyncio.run(ten_sessions_and_the_watcher())
    assert seen["ok"] and len(seen["clusters"]) == 1 and seen["watcher_shares"]
    assert seen["connections"] == 1, f"ten sessions and the watcher hold {seen['connections']} connections"
    assert (seen["transports"], seen["logins"], seen["fact_reads"]) == (1, 1, 1)
    assert len(seen["users"]) == 1 and None not in seen["users"], "every session knows the login name"
    assert seen["after_closing_sessions"] == 1, "closing the sessions leaves the process's link open"
    assert connections_to(port) == before, "the process closed it"


def test_a_dropped_connection_is_made_again_for_the_next_read(ssh_profile) -> None:
    from betty_jupyter.cluster.shared import shared_cluster

    cluster = shared_cluster(ssh_profile)

    async def read_drop_read() -> tuple[bool, int]:
        await cluster.slurm.queue()
        transport = cluster.link.transport
        assert isinstance(transport, SSHTransport)
        transport._client.get_transport().close()  # the network drops the link under Betty
        frame = await cluster.slurm.partitions()
        return not frame.empty, cluster.link.transport.connections_opened + cluster.link.opened - 1

    read, logins = asyncio.run(read_drop_read())
    assert read and logins == 2, "one more login, and the read answered"
