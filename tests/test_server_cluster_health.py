"""A cluster added while the server runs, and each cluster's health, over the server against the real dev cluster
and its real sshd: the panel's picker and status dot read these routes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_server_support import call, jp_server_config, llm, refusal  # noqa: F401  (fixtures)

from betty_jupyter.config import user_clusters_file

pytestmark = pytest.mark.cluster


def betty_cluster_add(*args: str) -> str:
    """``betty cluster add …`` as a person types it, in this test's Jupyter config directory."""
    done = subprocess.run([sys.executable, "-m", "betty_jupyter.cli", "cluster", "add", *args],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return done.stdout


def resolver_says(host: str) -> str:
    """What this machine's resolver says of ``host`` (the words the cause must carry)."""
    with pytest.raises(socket.gaierror) as failed:
        socket.getaddrinfo(host, 22)
    return str(failed.value.strerror)


def alias_config(tmp_path: Path, dev_cluster: dict[str, str], alias: str, **changes: str) -> Path:
    """An ssh config with the dev cluster's entry under ``alias``, its settings replaced by ``changes``."""
    lines = []
    for line in Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text().splitlines():
        key = line.strip().split(" ", 1)[0]
        if key == "Host":
            line = f"Host {alias}"
        elif key in changes:
            line = f"    {key} {changes[key]}"
        lines.append(line)
    path = tmp_path / f"ssh_config_{alias}"
    path.write_text("\n".join(lines) + "\n")
    return path


def another_key_for(dev_cluster: dict[str, str], known: Path, tmp_path: Path) -> None:
    """A known_hosts that records a different key for the dev cluster's sshd (as after a host was replaced)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True)
    recorded = Path(dev_cluster["BETTY_DEV_CLUSTER_DIR"], "ssh", "known_hosts").read_text().split()[0]
    known.write_text(f"{recorded} {(tmp_path / 'impostor.pub').read_text().split()[0]} "
                     f"{(tmp_path / 'impostor.pub').read_text().split()[1]}\n")


async def test_a_cluster_added_while_the_server_runs_is_listed_and_checked(jp_fetch, dev_cluster, tmp_path):
    names = [c["name"] for c in (await call(jp_fetch, "GET", "clusters"))["clusters"]]
    assert names == ["betty-dev"]
    assert (await refusal(jp_fetch, "GET", "clusters", "nowhere", "health"))[0] == 404

    config = alias_config(tmp_path, dev_cluster, "nowhere", HostName="no-such-host.invalid")
    said = betty_cluster_add("nowhere", "--host", "nowhere", "--ssh-config", str(config))
    assert str(user_clusters_file()) in said
    clusters = (await call(jp_fetch, "GET", "clusters"))["clusters"]
    assert [(c["name"], c["transport"], c["host"]) for c in clusters if c["name"] == "nowhere"] == [
        ("nowhere", "ssh", "nowhere")]
    assert sorted((await call(jp_fetch, "GET", "health"))["clusters"]) == ["betty-dev", "nowhere"]

    healthy = await call(jp_fetch, "GET", "clusters", "betty-dev", "health")
    assert healthy["ok"] is True and healthy["problem"] is None
    assert healthy["message"].startswith("betty-dev: reachable, Slurm answers (2 partitions")
    again = await call(jp_fetch, "GET", "clusters", "betty-dev", "health")
    assert again == healthy  # kept a few seconds: the dot asking again costs the login node nothing

    lost = await call(jp_fetch, "GET", "clusters", "nowhere", "health")
    assert lost["ok"] is False and lost["problem"] == "host-unknown"
    assert lost["message"].startswith(f"no-such-host.invalid: {resolver_says('no-such-host.invalid')}")
    betty_cluster_add("far", "--host", "nowhere", "--ssh-config", str(config), "--openssh")
    far = await call(jp_fetch, "GET", "clusters", "far", "health")
    assert far["ok"] is False and far["problem"] == "host-unknown"
    assert "Could not resolve hostname no-such-host.invalid" in far["message"]
    code, error = await refusal(jp_fetch, "GET", "jobs", params={"cluster": "nowhere", "mine": "1"})
    assert code == 502 and error.startswith("no-such-host.invalid: ") and "who you are" not in error

    betty_cluster_add("nowhere", "--host", "nowhere", "--ssh-config", str(config), "--default")
    assert (await call(jp_fetch, "GET", "health"))["default_cluster"] == "nowhere"


async def test_health_names_a_host_key_problem_and_a_silent_slurm(jp_fetch, dev_cluster, tmp_path):
    unknown = alias_config(tmp_path, dev_cluster, "stranger", UserKnownHostsFile=str(tmp_path / "empty_known_hosts"))
    changed_known = tmp_path / "changed_known_hosts"
    another_key_for(dev_cluster, changed_known, tmp_path)
    changed = alias_config(tmp_path, dev_cluster, "impostor", UserKnownHostsFile=str(changed_known))
    betty_cluster_add("stranger", "--host", "stranger", "--ssh-config", str(unknown))
    betty_cluster_add("impostor", "--host", "impostor", "--ssh-config", str(changed))
    # A cluster reached on this machine whose Slurm is not there: its configuration names no controller.
    silent = tmp_path / "slurm.conf"
    silent.write_text("ClusterName=silent\nSlurmctldHost=localhost\nSlurmctldPort=9\n")
    extra = user_clusters_file().parent / "silent.json"
    extra.write_text(json.dumps({"BettyConfig": {"clusters": [
        {"name": "silent", "transport": "local", "env": {"SLURM_CONF": str(silent)}}]}}))

    stranger = await call(jp_fetch, "GET", "clusters", "stranger", "health")
    assert stranger["ok"] is False and stranger["problem"] == "host-key-unknown"
    assert stranger["fingerprint"].startswith("SHA256:") and stranger["fingerprint"] in stranger["message"]
    impostor = await call(jp_fetch, "GET", "clusters", "impostor", "health")
    assert impostor["ok"] is False and impostor["problem"] == "host-key-changed"
    assert "DIFFERENT host key" in impostor["message"]
    assert (await call(jp_fetch, "GET", "clusters", "betty-dev", "health"))["ok"] is True

    quiet = await call(jp_fetch, "GET", "clusters", "silent", "health")
    assert quiet["ok"] is False and quiet["problem"] == "slurm"
    assert quiet["message"].startswith("silent is reachable but Slurm does not answer: ")
