"""The dev cluster is a real Slurm: jobs run over SSH, accounting records them, GPUs are scheduled."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor_support import busy  # noqa: F401 (a fixture)
from conftest import free_port_base, run_betty, ssh

pytestmark = pytest.mark.cluster


def wait_for_accounting(cluster_env: dict[str, str], job_id: str, timeout: float = 120) -> dict[str, str]:
    """Poll ``sacct`` until accounting holds the whole record of the ended job.

    slurmctld reports to slurmdbd asynchronously, so a job's row can show its end state a
    moment before its other fields (partition, TRES) are filled in.
    """
    fields = ["JobID", "State", "Partition", "AllocTRES", "ExitCode"]
    deadline = time.monotonic() + timeout
    row: dict[str, str] = {}
    while time.monotonic() < deadline:
        result = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", ",".join(fields)],
            capture_output=True, text=True, env=cluster_env, timeout=30,
        )
        assert result.returncode == 0, result.stderr
        lines = result.stdout.strip().splitlines()
        if lines:
            row = dict(zip(fields, lines[0].split("|")))
            ended = row["State"] not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")
            if ended and row["Partition"]:
                return row
        time.sleep(0.5)
    pytest.fail(f"job {job_id} did not finish within {timeout} s (last seen: {row})")


def submit_over_ssh(dev_cluster: dict[str, str], options: str) -> str:
    result = ssh(dev_cluster, f"sbatch --parsable {options}")
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().split(";")[0]
    assert job_id.isdigit(), result.stdout
    return job_id


def test_a_job_submitted_over_ssh_completes_in_accounting(dev_cluster, cluster_env):
    job_id = submit_over_ssh(dev_cluster, "-J 'betty smoke' --wrap 'echo hello; sleep 1'")
    row = wait_for_accounting(cluster_env, job_id)
    assert row["State"] == "COMPLETED"
    assert row["Partition"] == "cpu"
    assert row["ExitCode"] == "0:0"


def test_a_failing_job_is_recorded_as_failed(dev_cluster, cluster_env):
    job_id = submit_over_ssh(dev_cluster, "--wrap 'exit 3'")
    row = wait_for_accounting(cluster_env, job_id)
    assert row["State"] == "FAILED"
    assert row["ExitCode"] == "3:0"


def test_a_gpu_job_lands_on_the_gpu_partition_with_its_gpu_type(dev_cluster, cluster_env):
    job_id = submit_over_ssh(dev_cluster, "-p gpu --gres=gpu:h100:1 --wrap 'sleep 1'")
    row = wait_for_accounting(cluster_env, job_id)
    assert row["State"] == "COMPLETED"
    assert row["Partition"] == "gpu", row
    assert "gres/gpu:h100=1" in row["AllocTRES"].split(",")


def test_more_gpus_than_the_node_has_are_refused(dev_cluster):
    result = ssh(dev_cluster, "sbatch -p gpu --gres=gpu:h100:3 --wrap true")
    assert result.returncode != 0
    assert "Requested node configuration is not available" in result.stderr


def test_partitions_offer_both_gpu_types(dev_cluster, cluster_env):
    result = subprocess.run(
        ["sinfo", "-h", "-o", "%P|%G|%a"], capture_output=True, text=True, env=cluster_env, timeout=30
    )
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[0]: line.split("|") for line in result.stdout.split()}
    assert set(rows) == {"cpu*", "gpu"}
    assert rows["gpu"][1] == "gpu:a100:4,gpu:h100:2"
    assert rows["gpu"][2] == "up"


def test_up_twice_is_harmless(dev_cluster):
    before = json.loads(run_betty("dev-cluster", "status", "--json").stdout)
    again = run_betty("dev-cluster", "up")
    assert again.returncode == 0
    assert "already up" in again.stderr
    after = json.loads(run_betty("dev-cluster", "status", "--json").stdout)
    assert after["up"] is True
    assert after["services"] == before["services"]


def test_a_running_cluster_preempts_by_qos_and_up_applies_nothing_twice(dev_cluster, cluster_env):
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env=cluster_env,
                            timeout=30)
    settings = {line.split("=")[0].strip(): line.split("=", 1)[1].strip() for line in config.stdout.splitlines()
                if "=" in line}
    assert (settings["PreemptType"], settings["PreemptMode"]) == ("preempt/qos", "REQUEUE")
    again = run_betty("dev-cluster", "up")
    assert again.returncode == 0 and "slurm.conf changed" not in again.stderr


def test_status_reports_every_service_running(dev_cluster):
    status = run_betty("dev-cluster", "status")
    assert status.returncode == 0
    for service in ("munge", "mariadb", "slurmdbd", "slurmctld", "slurmd", "sshd"):
        assert f"{service:<10} running (pid" in status.stdout
    assert "node       idle" in status.stdout or "node       mixed" in status.stdout
    # The enforcement in force is the one this machine and its Slurm allow.
    from betty_jupyter.devcluster.memory_limits import on_this_machine
    from betty_jupyter.devcluster.packages import installed_slurm_version

    expected = on_this_machine(installed_slurm_version())
    memory = [line for line in status.stdout.splitlines() if line.startswith("memory ")]
    assert len(memory) == 1 and memory[0].startswith(f"memory     {expected.mode.value}"), status.stdout
    reported = json.loads(run_betty("dev-cluster", "status", "--json").stdout)
    assert reported["memory_enforcement"] == expected.mode.value


def test_env_prints_what_a_shell_needs(dev_cluster):
    env = run_betty("dev-cluster", "env")
    assert env.returncode == 0
    assert f"export SLURM_CONF={dev_cluster['SLURM_CONF']}" in env.stdout.splitlines()
    assert "export BETTY_DEV_SSH_HOST=betty-dev" in env.stdout.splitlines()


INSTALL_SH = Path(__file__).parent.parent / "scripts" / "install.sh"
BETTY_CLI = f"{shlex.quote(sys.executable)} -m betty_jupyter.cli"


def install_sh_env_line() -> str:
    """The line of scripts/install.sh that sets a shell's variables, running this checkout's betty."""
    [line] = [line for line in INSTALL_SH.read_text().splitlines() if "dev-cluster env" in line]
    return line.replace(".venv/bin/betty", BETTY_CLI)


@pytest.mark.parametrize("shell", [shell for shell in ("bash", "dash") if shutil.which(shell)])
@pytest.mark.parametrize("own", ["/home/ada/my betty.json", "/tmp/a'; echo x `id` $HOME.json"])
def test_the_dev_cluster_env_keeps_a_betty_config_the_person_exported(dev_cluster, shell, own):
    script = f"{install_sh_env_line()}; printenv BETTY_CONFIG; printenv SLURM_CONF"
    kept = subprocess.run([shell, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "BETTY_CONFIG": own}, cwd=INSTALL_SH.parent.parent)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.splitlines() == [own, dev_cluster["SLURM_CONF"]]
    assert kept.stderr.splitlines() == [f"betty: keeping your BETTY_CONFIG={own} (betty dev-cluster env "
                                        "--replace-config sets the dev cluster's)"]
    replaced = subprocess.run(
        [shell, "-c", f'eval "$({BETTY_CLI} dev-cluster env --replace-config)"; printenv BETTY_CONFIG'],
        capture_output=True, text=True, timeout=60, env={**os.environ, "BETTY_CONFIG": own})
    assert (replaced.stdout, replaced.stderr) == (dev_cluster["BETTY_CONFIG"] + "\n", "")


def test_the_dev_cluster_env_sets_betty_config_where_none_is_set_or_it_is_already_the_dev_clusters(dev_cluster):
    environ = {k: v for k, v in os.environ.items() if k != "BETTY_CONFIG"}
    for already in (None, dev_cluster["BETTY_CONFIG"]):
        env = environ if already is None else {**environ, "BETTY_CONFIG": already}
        shown = subprocess.run(["bash", "-c", f"{install_sh_env_line()}; printenv BETTY_CONFIG"],
                               capture_output=True, text=True, timeout=60, env=env, cwd=INSTALL_SH.parent.parent)
        assert (shown.stdout, shown.stderr) == (dev_cluster["BETTY_CONFIG"] + "\n", "")


def ssh_with_config_changed(dev_cluster, tmp_path, old: str, new: str) -> subprocess.CompletedProcess[str]:
    """Run `true` over SSH with a copy of the generated ssh config in which ``old`` became ``new``."""
    config_text = Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text()
    assert old in config_text
    config = tmp_path / "config"
    config.write_text(config_text.replace(old, new))
    return subprocess.run(
        ["ssh", "-F", str(config), "betty-dev", "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )


def test_sshd_refuses_a_key_it_was_not_given(dev_cluster, tmp_path):
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    real_key = f"{dev_cluster['BETTY_DEV_CLUSTER_DIR']}/ssh/id_ed25519"
    refused = ssh_with_config_changed(dev_cluster, tmp_path, real_key, str(stranger))
    assert refused.returncode == 255
    assert "Permission denied (publickey)" in refused.stderr


def test_ssh_refuses_a_host_whose_key_is_not_known(dev_cluster, tmp_path):
    known_hosts = f"{dev_cluster['BETTY_DEV_CLUSTER_DIR']}/ssh/known_hosts"
    (tmp_path / "empty_known_hosts").write_text("")
    refused = ssh_with_config_changed(dev_cluster, tmp_path, known_hosts, str(tmp_path / "empty_known_hosts"))
    assert refused.returncode == 255
    assert "Host key verification failed" in refused.stderr


def test_a_port_already_taken_is_refused_before_anything_starts(dev_cluster, tmp_path):
    # Five ports found free (any program may hold a port next to an ephemeral one), the last then held.
    port = free_port_base() + 4
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        state_dir = tmp_path / "second"
        # The taken port is the sshd port (base + 4) of a second cluster.
        result = run_betty("dev-cluster", "up", "--state-dir", str(state_dir), "--port-base", str(port - 4))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"betty: error: port {port} (for sshd) is already in use by another program; "
        "stop that program or pick other ports with `betty dev-cluster up --port-base N`"
    ]
    assert not state_dir.exists()


def test_the_port_base_variable_does_not_move_a_state_directory_that_has_ports(dev_cluster, cluster_env):
    before = json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"]
    again = run_betty("dev-cluster", "up", env={**cluster_env, "BETTY_DEV_CLUSTER_PORT_BASE": str(free_port_base())})
    assert again.returncode == 0, again.stderr
    assert "dev cluster is already up" in again.stderr
    assert json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"] == before


def test_the_port_base_variable_sets_the_ports_of_a_new_state_directory(tmp_path):
    from betty_jupyter.devcluster import DevClusterLayout

    fresh = DevClusterLayout.load(tmp_path / "new", new_port_base=23000)
    assert fresh.port_base == 23000
    fresh.save()
    assert DevClusterLayout.load(tmp_path / "new", new_port_base=24000).port_base == 23000
    assert DevClusterLayout.load(tmp_path / "new", port_base=24000).port_base == 24000


def test_changing_ports_of_a_running_cluster_is_refused(dev_cluster):
    result = run_betty("dev-cluster", "up", "--port-base", str(free_port_base()))
    assert result.returncode == 1
    assert "run `betty dev-cluster down` before changing --port-base" in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["dev-cluster", "restart"], "invalid choice: 'restart'"),
        (["dev-cluster"], "the following arguments are required: ACTION"),
        (["dev-cluster", "up", "--port-base", "twelve"], "invalid int value: 'twelve'"),
        (["launch-rockets"], "invalid choice: 'launch-rockets'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, expected):
    result = run_betty(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0]


def test_a_port_base_out_of_range_is_refused(tmp_path):
    result = run_betty("dev-cluster", "up", "--state-dir", str(tmp_path / "x"), "--port-base", "80")
    assert result.returncode == 1
    assert result.stderr.strip() == "betty: error: --port-base 80 is out of range; pick a number from 1024 to 65530"


def test_down_stops_exactly_what_up_started(dev_cluster, cluster_env, tmp_path):
    session_before = json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"]
    state_dir = tmp_path / "second"
    base = free_port_base()
    try:
        up = run_betty("dev-cluster", "up", "--state-dir", str(state_dir), "--port-base", str(base))
        assert up.returncode == 0, up.stderr
        second = json.loads(run_betty("dev-cluster", "status", "--state-dir", str(state_dir), "--json").stdout)
        assert second["up"] is True
        pids = [service["pid"] for service in second["services"].values()]
        job = subprocess.run(
            ["sbatch", "--parsable", "--wrap", "true"], capture_output=True, text=True, timeout=30,
            env={**cluster_env, "SLURM_CONF": str(state_dir / "etc" / "slurm.conf")}, cwd=tmp_path,
        )
        assert job.returncode == 0, job.stderr
    finally:
        down = run_betty("dev-cluster", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0
    assert down.stderr.strip() == "stopped: sshd, slurmd, slurmctld, slurmdbd, mariadb, munge"
    for pid in pids:
        assert not Path(f"/proc/{pid}/exe").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes()
    for port in range(base, base + 5):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still open"
    after = run_betty("dev-cluster", "status", "--state-dir", str(state_dir))
    assert after.returncode == 1 and "stopped" in after.stdout
    # The session's cluster was not touched.
    session_after = json.loads(run_betty("dev-cluster", "status", "--json").stdout)["services"]
    assert session_after == session_before


def test_a_cluster_whose_daemons_were_killed_comes_back_up(dev_cluster, cluster_env, tmp_path):
    import os
    import signal

    state_dir = tmp_path / "killed"
    args = ("--state-dir", str(state_dir))
    try:
        assert run_betty("dev-cluster", "up", *args, "--port-base", str(free_port_base())).returncode == 0
        before = json.loads(run_betty("dev-cluster", "status", *args, "--json").stdout)["services"]
        for service in before.values():
            os.kill(service["pid"], signal.SIGKILL)  # a reboot, or the session that started them ended
        time.sleep(0.5)
        assert run_betty("dev-cluster", "status", *args).returncode == 1
        again = run_betty("dev-cluster", "up", *args)
        assert again.returncode == 0, again.stderr
        after = json.loads(run_betty("dev-cluster", "status", *args, "--json").stdout)
        assert after["up"] and all(after["services"][n]["pid"] != before[n]["pid"] for n in before)
        job = subprocess.run(["sbatch", "--parsable", "--wrap", "true", f"--chdir={tmp_path}"], capture_output=True,
                             text=True, env={**cluster_env, "SLURM_CONF": str(state_dir / "etc" / "slurm.conf")})
        assert job.returncode == 0, job.stderr
    finally:
        run_betty("dev-cluster", "down", *args)


def test_down_when_nothing_runs_says_so(tmp_path):
    result = run_betty("dev-cluster", "down", "--state-dir", str(tmp_path / "never"))
    assert result.returncode == 0
    assert result.stderr.strip() == "dev cluster was not running"


def test_another_users_job_runs_wherever_the_state_directory_lies(busy):
    """slurmd runs a job's script as its user, from its spool: the second user's jobs must reach it even when the
    state directory is under a private folder (root's home, as in a fresh checkout's default)."""
    theirs = busy.submit("--wrap", "true", other=True)
    deadline = time.monotonic() + 120
    while (state := busy.run("sacct", "-n", "-X", "-P", "-j", theirs, "-o", "State").strip()) not in (
            "COMPLETED", "FAILED"):
        assert time.monotonic() < deadline, f"job {theirs} did not end (last seen {state!r})"
        time.sleep(0.3)
    assert state == "COMPLETED", busy.run("sacct", "-n", "-X", "-P", "-j", theirs, "-o", "State,ExitCode")
