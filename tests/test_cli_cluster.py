"""The `betty` cluster commands, run as a person runs them, against the dev cluster over SSH."""

from __future__ import annotations

import getpass
import json
import os
import re
import time
from pathlib import Path

import pytest

from betty_jupyter.agent.actions import ActionLog
from conftest import run_betty
from second_factor import control_dir  # noqa: F401 (a fixture)

pytestmark = pytest.mark.cluster


@pytest.fixture
def betty_env(dev_cluster, tmp_path) -> dict[str, str]:
    """An environment whose only cluster is the dev cluster over SSH, readable under tmp_path."""
    config = tmp_path / "betty.json"
    profile = {"name": "devssh", "transport": "ssh", "host": dev_cluster["BETTY_DEV_SSH_HOST"],
               "ssh_config": dev_cluster["BETTY_DEV_SSH_CONFIG"], "readable_roots": [str(tmp_path / "data")],
               "work_dir": str(tmp_path / "work")}
    config.write_text(json.dumps({"BettyConfig": {"clusters": [profile]}}))
    (tmp_path / "data").mkdir()
    return {**os.environ, "BETTY_CONFIG": str(config), "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter")}


def betty(env, *args):
    return run_betty(*args, env=env)


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert lines[0].startswith("betty: error: ") or lines[0].startswith("betty")
    return lines[0]


def test_cluster_list_and_test(betty_env):
    listed = betty(betty_env, "cluster", "list")
    assert listed.stdout.split() == ["*", "devssh", "ssh", "betty-dev"]
    tested = betty(betty_env, "cluster", "test")
    assert tested.returncode == 0 and tested.stdout.startswith("devssh: OK — partitions cpu, gpu;")


def test_cluster_add_writes_the_users_config_and_refuses_half_profiles(betty_env, tmp_path):
    added = betty(betty_env, "cluster", "add", "ood", "--local", "--readable-root", "/scratch", "--default")
    assert added.returncode == 0, added.stderr
    saved = json.loads((tmp_path / "jupyter" / "jupyter_server_config.d" / "betty_clusters.json").read_text())
    assert saved["BettyConfig"]["clusters"] == [{"name": "ood", "transport": "local", "readable_roots": ["/scratch"]}]
    listed = betty(betty_env, "cluster", "list", "--json")
    assert {c["name"] for c in json.loads(listed.stdout)["clusters"]} == {"ood", "devssh"}
    assert "give either --host ALIAS" in one_error_line(betty(betty_env, "cluster", "add", "x"))
    assert "needs a `name`" in one_error_line(betty(betty_env, "cluster", "add", "bad name", "--local"))


def test_cluster_add_openssh_logs_in_with_the_persons_ssh_config(betty_env, dev_cluster, tmp_path, control_dir):
    config = control_dir / "config"  # the dev cluster's alias, with a ControlPath of this test's own
    config.write_text(Path(dev_cluster["BETTY_DEV_SSH_CONFIG"]).read_text() + f"    ControlPath {control_dir}/%C\n")
    added = betty(betty_env, "cluster", "add", "site", "--host", dev_cluster["BETTY_DEV_SSH_HOST"], "--openssh",
                  "--ssh-config", str(config), "--control-persist", "5m")
    assert added.returncode == 0, added.stderr
    saved = json.loads((tmp_path / "jupyter" / "jupyter_server_config.d" / "betty_clusters.json").read_text())
    assert saved["BettyConfig"]["clusters"] == [{"name": "site", "transport": "openssh", "host": "betty-dev",
                                                 "ssh_config": str(config), "control_persist": "5m"}]
    tested = betty(betty_env, "cluster", "test", "--cluster", "site")
    assert tested.returncode == 0 and tested.stdout.startswith("site: OK — partitions cpu, gpu;"), tested.stderr
    assert any(path.is_socket() for path in control_dir.iterdir()), "the master outlives the command"
    assert "site" in betty(betty_env, "cluster", "list").stdout.split()
    assert "--openssh logs in with your ssh config" in one_error_line(
        betty(betty_env, "cluster", "add", "x", "--local", "--openssh"))
    assert "`control_persist` is a time" in one_error_line(
        betty(betty_env, "cluster", "add", "x", "--host", "h", "--openssh", "--control-persist", "soon"))


def test_partitions_as_a_table_and_as_json(betty_env):
    table = betty(betty_env, "partitions")
    assert table.stdout.splitlines()[1].split()[:3] == ["cpu", "True", "up"]
    assert "a100:4,h100:2" in table.stdout
    rows = json.loads(betty(betty_env, "partitions", "--json").stdout)
    assert [row["partition"] for row in rows] == ["cpu", "gpu"] and rows[1]["gpu_types"] == {"a100": 4, "h100": 2}


def test_submit_jobs_logs_history_cancel(betty_env, tmp_path):
    script = tmp_path / "train.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name=cli-run\n#SBATCH --chdir={tmp_path}\necho step 1 loss=0.5\nsleep 60\n")
    submitted = betty(betty_env, "submit", str(script), "--yes", "--json", "--dir", str(tmp_path))
    assert submitted.returncode == 0, submitted.stderr
    assert "not recorded" in submitted.stderr and json.loads(submitted.stdout)["page"] is None
    ident = json.loads(submitted.stdout)["job_id"]
    jobs = json.loads(betty(betty_env, "jobs", "--json").stdout)
    assert any(job["job_id"] == ident and job["name"] == "cli-run" for job in jobs)
    deadline = time.monotonic() + 60
    while "loss=0.5" not in (logs := betty(betty_env, "logs", ident)).stdout:
        assert time.monotonic() < deadline, logs.stderr
        time.sleep(0.5)
    cancelled = betty(betty_env, "cancel", ident, "--yes", "--dir", str(tmp_path))
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == f"cancelled job {ident}", cancelled.stderr
    assert f"cancel job {ident} (cli-run, RUNNING)" in cancelled.stderr and f"scancel {ident}" in cancelled.stderr
    # the same tools, cards and action log lines as the panel's and the agent's, with the person as approver
    submit, cancel = ActionLog(tmp_path).read()
    assert (submit.tool, submit.args["record"], submit.tier, submit.decision, submit.ok) == (
        "cluster_submit", False, 2, "approved", True)
    assert submit.approver == f"{getpass.getuser()} (betty submit)" and "not recorded" in submit.preview.title
    assert (cancel.tool, cancel.args, cancel.tier, cancel.decision, cancel.ok) == (
        "cluster_cancel", {"job_id": ident}, 2, "approved", True)
    assert cancel.approver == f"{getpass.getuser()} (betty cancel)" and cancel.preview is not None
    again = betty(betty_env, "cancel", ident, "--yes", "--dir", str(tmp_path))
    assert "already ended" in one_error_line(again) and len(ActionLog(tmp_path).read()) == 3
    history = json.loads(betty(betty_env, "history", ident, "--json").stdout)
    assert history[0]["job_id"] == ident and history[0]["name"] == "cli-run"


def test_submit_refuses_a_script_the_cluster_cannot_run_and_submits_nothing(betty_env, tmp_path):
    script = tmp_path / "bad.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --partition=gpux\n#SBATCH --time=1h\necho never\n")
    line = one_error_line(betty(betty_env, "submit", str(script), "--yes", "--dir", str(tmp_path)))
    assert line == ("betty: error: can't submit: line 2: partition 'gpux' does not exist; choose cpu or gpu; line 3: "
                    "time '1h' is not a Slurm time; use e.g. 01:00:00 or 1-00:00:00")
    assert not (tmp_path / "work").exists()
    assert [(r.tool, r.decision, r.ok) for r in ActionLog(tmp_path).read()] == [("cluster_submit", "refused", False)]
    project = tmp_path / "project"  # in a project, through the tool: refused before any card, and logged
    assert betty(betty_env, "init", str(project)).returncode == 0
    line = one_error_line(betty(betty_env, "submit", str(script), "--yes", "--dir", str(project)))
    assert "line 2: partition 'gpux' does not exist" in line and "line 3: time '1h'" in line
    assert [(r.tool, r.decision, r.ok) for r in ActionLog(project).read()] == [("cluster_submit", "refused", False)]
    assert [p.name for p in (project / "wiki" / "experiments").glob("*.md")] == ["TEMPLATE.md"]


def test_submit_without_a_terminal_asks_for_yes(betty_env, tmp_path):
    script = tmp_path / "ok.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH -p gpu --gres=gpu:h100:1\ntrue\n")
    line = one_error_line(betty(betty_env, "submit", str(script), "--dir", str(tmp_path)))
    assert line == f"betty: error: Submit {script} needs a confirmation; pass --yes when running without a terminal"
    assert not ActionLog(tmp_path).read(), "nothing was asked, so nothing was logged"


def test_run_allows_reads_and_refuses_everything_else(betty_env, tmp_path):
    (tmp_path / "data" / "notes.txt").write_text("hello\n")
    assert betty(betty_env, "run", "--", "cat", str(tmp_path / "data" / "notes.txt")).stdout == "hello\n"
    assert betty(betty_env, "run", "--", "squeue", "--me").returncode == 0
    (tmp_path / "data" / "escape").symlink_to("/etc/passwd")
    for words, reason in [
        (["squeue; rm -rf ~"], "';' is a shell metacharacter"),
        (["cat", "/etc/passwd"], "outside the readable roots"),
        (["cat", str(tmp_path / "data" / "escape")], "outside the readable roots"),
        (["scontrol", "update", "JobId=1", "Priority=1"], "scontrol update"),
        (["rm", "-rf", str(tmp_path / "data")], "rm"),
    ]:
        assert reason in one_error_line(betty(betty_env, "run", "--", *words))
    assert (tmp_path / "data" / "notes.txt").exists()


def test_run_reads_under_a_root_that_is_itself_a_link(dev_cluster, tmp_path):
    real = tmp_path / "gpfs" / "home"
    real.mkdir(parents=True)
    (real / "results.csv").write_text("loss\n0.5\n")
    (tmp_path / "home").symlink_to(real)
    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [{
        "name": "linked", "transport": "local", "env": {"SLURM_CONF": dev_cluster["SLURM_CONF"]},
        "readable_roots": [str(tmp_path / "home")]}]}}))
    env = {**os.environ, "BETTY_CONFIG": str(config)}
    assert betty(env, "run", "--", "head", "-n", "1", str(tmp_path / "home" / "results.csv")).stdout == "loss\n"
    assert "outside the readable roots" in one_error_line(betty(env, "run", "--", "cat", str(tmp_path / "gpfs" / "x")))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["cancel", "1;reboot", "--yes"], "'1;reboot' is not a Slurm job id"),
        (["logs", "999999"], "job 999999 is not known to the cluster"),
        (["jobs", "--cluster", "nope"], "no cluster called 'nope'; configured: devssh"),
        (["submit", "/no/such/file.sbatch", "--yes"], "cannot read /no/such/file.sbatch"),
        (["run"], "give the command after --"),
    ],
)
def test_bad_input_is_one_line(betty_env, args, expected):
    assert expected in one_error_line(betty(betty_env, *args))


def test_no_cluster_configured_says_how_to_add_one(tmp_path):
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path)}
    env.pop("BETTY_CONFIG", None)
    line = one_error_line(run_betty("jobs", env=env))
    assert "no cluster is configured; add one with `betty cluster add NAME --host ALIAS`" in line


def test_an_unreadable_config_file_is_one_line(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    line = one_error_line(run_betty("cluster", "list", env={**os.environ, "BETTY_CONFIG": str(broken)}))
    assert f"cannot read Betty's configuration from {broken}" in line


def test_gpu_advice_reads_the_clusters_partitions(betty_env):
    result = betty(betty_env, "gpu", "advise", "--model", "llama-3.2-1b", "--method", "lora", "--batch-size", "1",
                   "--seq-len", "1024", "--cluster", "--json")
    assert result.returncode == 0, result.stderr
    advice = json.loads(result.stdout)
    targets = {placement["target"] for placement in advice["placements"]}
    assert {"gpu/A100-40GB", "gpu/H100-80GB"} <= targets and advice["fits_somewhere"]


def test_submit_in_a_project_records_the_experiment_and_watch_keeps_it_current(betty_env, tmp_path):
    project = tmp_path / "project"
    assert betty(betty_env, "init", str(project)).returncode == 0
    (project / "wiki" / "index.md").unlink()  # a person removed the index: recording brings it back
    script = tmp_path / "short.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name=recorded\n#SBATCH --chdir={tmp_path}\necho loss=0.1\n")
    submitted = betty(betty_env, "submit", str(script), "--yes", "--json", "--dir", str(project),
                      "--goal", "\nCheck the record")
    assert submitted.returncode == 0, submitted.stderr
    answer = json.loads(submitted.stdout)
    assert (project / "wiki" / answer["page"]).exists() and "recorded" in answer["page"]
    [record] = ActionLog(project).read()
    assert (record.tool, record.decision, record.approver, record.ok) == (
        "cluster_submit", "approved", f"{getpass.getuser()} (betty submit)", True)
    assert record.args["goal"] == "Check the record" and "echo loss=0.1" in record.preview.text
    listed = json.loads(betty(betty_env, "experiments", "list", "--dir", str(project), "--json").stdout)
    assert [(e["job_id"], e["state"]) for e in listed] == [(answer["job_id"], "PENDING")]
    deadline = time.monotonic() + 60
    while "COMPLETED" not in (watched := betty(betty_env, "watch", "--once", "--dir", str(project))).stdout:
        assert time.monotonic() < deadline, watched.stdout + watched.stderr
        time.sleep(1)
    slug = answer["page"].removeprefix("experiments/").removesuffix(".md")
    assert re.fullmatch(rf"(job {answer['job_id']} \({slug}\): (PENDING|RUNNING) → [A-Z]+; page and notebook updated\n)+",
                        watched.stdout), watched.stdout
    assert watched.stdout.endswith("→ COMPLETED; page and notebook updated\n")
    again = betty(betty_env, "watch", "--once", "--dir", str(project))
    assert again.returncode == 0 and again.stdout == "nothing changed\n"
    assert json.loads(betty(betty_env, "watch", "--once", "--json", "--dir", str(project)).stdout) == []
    shown = betty(betty_env, "experiments", "show", answer["job_id"], "--dir", str(project))
    assert "state        COMPLETED" in shown.stdout and "goal         Check the record" in shown.stdout
    assert "experiments list" in one_error_line(betty(betty_env, "experiments", "show", "nope", "--dir", str(project)))


def test_logs_and_run_refuse_what_a_co_user_planted_in_one_line(betty_env, dev_cluster, tmp_path):
    import subprocess

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("SECRET\n")
    (tmp_path / "data" / ".ssh").mkdir()
    (tmp_path / "data" / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    slurm_env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    planted = []
    for output in (tmp_path / "outside" / "secret.txt", tmp_path / "data" / ".ssh" / "id_rsa"):
        submitted = subprocess.run(
            ["sbatch", "--parsable", "--hold", "--uid=nobody", f"--chdir={tmp_path}", f"--output={output}",
             "--job-name=x StdOut=/etc/shadow", "--wrap", "true"], capture_output=True, text=True, env=slurm_env)
        assert submitted.returncode == 0, submitted.stderr
        planted.append(submitted.stdout.strip())
    try:
        assert "outside the readable roots" in one_error_line(betty(betty_env, "logs", planted[0]))
        assert "may hold secrets" in one_error_line(betty(betty_env, "logs", planted[1]))
    finally:
        subprocess.run(["scancel", *planted], capture_output=True, env=slurm_env)
    for words, reason in [(["squeue", "--jobs", "--iterate=2"], "would repeat forever"),
                          (["squeue", "-j", "-i2"], "would repeat forever"),
                          (["tail", "--fol", str(tmp_path / "data" / "x")], "would follow the file forever"),
                          (["cat", str(tmp_path / "data" / ".ssh" / "id_rsa")], "may hold secrets")]:
        line = one_error_line(betty(betty_env, "run", "--", *words))
        assert reason in line and "SECRET" not in line and "PRIVATE" not in line


def test_a_job_name_cannot_steer_the_terminal(betty_env, dev_cluster, tmp_path):
    import subprocess

    name = "clear\x1b[2J\x1b]0;owned\x07\u202etxt.exe\nforged-row"
    made = subprocess.run(["sbatch", "--hold", "--parsable", "--job-name", name, "--wrap", "true"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={**os.environ, **dev_cluster})
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip().split(";")[0]
    try:
        shown = betty(betty_env, "jobs")
        assert shown.returncode == 0, shown.stderr
        row = [line for line in shown.stdout.splitlines() if line.split()[:1] == [job_id]]
        assert len(row) == 1 and "forged-row" in row[0], shown.stdout
        assert not any(char in shown.stdout for char in "\x1b\x07\u202e")
        assert "clear\\x1b[2J\\x1b]0;owned\\x07\\u202etxt.exe\\nforged-row" in row[0]
    finally:
        subprocess.run(["scancel", job_id], env={**os.environ, **dev_cluster}, capture_output=True, timeout=60)


def imported_modules(importtime: str) -> set[str]:
    """The modules ``python -X importtime`` says it imported (its lines on stderr)."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines() if line.startswith("import time:")}


def test_reads_load_no_model_client_and_count_each_array_task(betty_env, dev_cluster, ssh_profile, tmp_path):
    import subprocess
    import sys

    from betty_jupyter.agent.tools.cluster import counts_by_state
    from betty_jupyter.cluster.parsing import job_count
    from betty_jupyter.cluster.slurm import SlurmClient
    from betty_jupyter.cluster.sync import Blocking, run_sync
    from betty_jupyter.cluster.tables import QUEUE_COLUMNS, text_table
    from conftest import REPO

    slurm_env = {**os.environ, **dev_cluster}
    made = [subprocess.run(["sbatch", "--hold", "--parsable", *words, "--wrap", "true"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, env=slurm_env) for words in
            (["--array=0-999%10", "--job-name=sweep"], ["--job-name=single"])]
    assert all(result.returncode == 0 for result in made), [result.stderr for result in made]
    array, single = (result.stdout.strip().split(";")[0] for result in made)
    try:
        # Each read is its tool, called as the person (the tool's table is a DataFrame); no model client, no plots.
        for command, not_loaded in (("jobs", {"openai", "matplotlib"}), ("partitions", {"openai", "matplotlib"}),
                                    ("history", {"openai", "matplotlib"})):
            read = subprocess.run([sys.executable, "-X", "importtime", "-m", "betty_jupyter.cli", command],
                                  capture_output=True, text=True, timeout=180, env=betty_env, cwd=REPO,
                                  stdin=subprocess.DEVNULL)
            assert read.returncode == 0, read.stderr[-2000:]
            loaded = {name.split(".")[0] for name in imported_modules(read.stderr)}
            assert "paramiko" in loaded and not loaded & not_loaded, (command, loaded & not_loaded)
        client = Blocking(SlurmClient(ssh_profile.open_transport()))
        deadline = time.monotonic() + 60
        try:
            while True:  # the same moment: both reads see the same jobs (the columns' widths follow the names)
                shown = betty(betty_env, "jobs")
                frame = client.queue()
                rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines()[1:]}
                pandas_rows = {line.split()[0]: line.split()
                               for line in text_table(frame, QUEUE_COLUMNS).splitlines()[1:]}
                if set(rows) == set(pandas_rows):
                    break
                assert time.monotonic() < deadline, "the queue never held still for two reads"
        finally:
            run_sync(client.target.transport.close())
        assert f"{array}_[0-999%10]" in rows and single in rows, shown.stdout
        assert not any(name.startswith(f"{array}_") and name != f"{array}_[0-999%10]" for name in rows), \
            "a pending array is one row"
        assert shown.stdout.splitlines()[0] == text_table(frame, QUEUE_COLUMNS).splitlines()[0]
        for ident in (f"{array}_[0-999%10]", single):
            assert rows[ident] == pandas_rows[ident], "the same cells as the pandas table"
        listed = json.loads(betty(betty_env, "jobs", "--json").stdout)
        assert [job["tasks"] for job in listed if job["array_job_id"] == array] == [1000]
        mine = frame[frame["array_job_id"].isin([array, single])]
        assert job_count(mine) == 1001 and counts_by_state(mine) == "1001 job(s): 1001 PENDING"
    finally:
        subprocess.run(["scancel", array, single], env=slurm_env, capture_output=True, timeout=60)


def test_a_read_is_the_persons_own_call_in_the_action_log_under_their_rules(betty_env, tmp_path):
    import subprocess

    from conftest import BETTY

    project, elsewhere, state = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "state"
    (project / ".betty").mkdir(parents=True)
    (project / "notes").mkdir()
    elsewhere.mkdir()
    env = {**betty_env, "XDG_STATE_HOME": str(state)}

    def read(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*BETTY, *args], cwd=where, env=env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)

    shown = read(project / "notes", "partitions")  # inside a project: its action log
    assert shown.returncode == 0 and shown.stdout.split()[0] == "partition", shown.stderr
    [record] = ActionLog(project).read()
    assert (record.tool, record.tier, record.decision, record.ok, record.approver) == (
        "cluster_partitions", 1, "approved", True, f"{getpass.getuser()} (betty partitions)")
    shown = read(elsewhere, "history", "--since", "now-1hours", "--json")  # outside any: the person's own log
    assert shown.returncode == 0 and isinstance(json.loads(shown.stdout), list), shown.stderr
    [record] = ActionLog(state / "betty").read()
    assert (record.tool, record.args, record.ok) == ("cluster_history", {"since": "now-1hours", "job_ids": None,
                                                                         "all_users": False, "offset": 0}, True)
    assert not (elsewhere / ".betty").exists() and len(ActionLog(project).read()) == 1
    config = json.loads(Path(env["BETTY_CONFIG"]).read_text())
    config["BettyConfig"]["rules"] = {"deny": ["cluster_queue(partition=gpu)"], "ask": ["cluster_partitions"]}
    Path(env["BETTY_CONFIG"]).write_text(json.dumps(config))
    refused = read(project, "jobs", "--partition", "gpu")
    assert "refused by your rule deny cluster_queue(partition=gpu)" in one_error_line(refused)
    asked = read(project, "partitions")  # no terminal to answer the card the rule asks for: denied
    assert asked.returncode == 1 and "needs a confirmation" in asked.stderr, asked.stderr
    assert [(r.tool, r.decision, r.ok) for r in ActionLog(project).read()[1:]] == [
        ("cluster_queue", "refused", False), ("cluster_partitions", "denied", None)]
