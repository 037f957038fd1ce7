"""Agent tools against the real dev cluster over SSH: previews change nothing, runs do exactly what was shown."""

from __future__ import annotations

import re
import shlex
import time
import uuid
from pathlib import Path

import pytest

from betty_jupyter.agent.tools import ToolContext, ToolError
from betty_jupyter.agent.tools.catalog import (ClusterCancel, ClusterHistory, ClusterPartitions, ClusterQueue,
                                               ClusterRun, ClusterStatus, ClusterSubmit, ClusterWhy, GpuAdvise, JobLogs)
from betty_jupyter.cluster.job_env import JOB_NAMES
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.experiments.ledger import Ledger
from betty_jupyter.experiments.workspace import Workspace
from betty_jupyter.wiki import AUTO_END, AUTO_START, WikiStore, init_workspace

pytestmark = pytest.mark.cluster

# How every read starts on the cluster: bash reading no start-up files, Betty's script, then its arguments.
READER = ("env", "BASH_ENV=", "bash", "--norc", "--noprofile", "-c")


@pytest.fixture
def ctx(ssh_profile, tmp_path: Path):
    init_workspace(tmp_path / "project")
    context = ToolContext.open(ssh_profile, Workspace.at(tmp_path / "project"), "test-session")
    context.slurm.lookup_interval = 0.5
    yield context
    run_sync(context.close())


@pytest.fixture
def calls(ctx, monkeypatch) -> list[list[str]]:
    """Every argv and upload the session's real transport is asked for."""
    transport, seen = ctx.slurm.transport, []
    run, put = transport.run, transport.put

    async def recording_run(argv, *args, **kwargs):
        seen.append(list(argv))
        return await run(argv, *args, **kwargs)

    async def recording_put(data, remote_path):
        seen.append(["<put>", remote_path])
        return await put(data, remote_path)

    monkeypatch.setattr(transport, "run", recording_run)
    monkeypatch.setattr(transport, "put", recording_put)
    return seen


def dry_run(tool, ctx, args):
    return run_sync(tool.dry_run(ctx, args))


def execute(tool, ctx, args):
    return run_sync(tool.execute(ctx, args))


def files_under(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots if root.exists() for p in root.rglob("*"))


def script(ctx, name: str, body: str, extra: str = "") -> str:
    return f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --chdir={ctx.workspace.root}\n{extra}{body}\n"


def jobs_named(ctx, name: str) -> list[str]:
    queue = run_sync(ctx.slurm.queue())
    history = run_sync(ctx.slurm.history(since="now-1hours"))
    return sorted({str(i) for i in queue.loc[queue["name"] == name, "job_id"]}
                  | {str(i) for i in history.loc[history["name"] == name, "job_id"]})


def wait_until_finished(ctx, job_id: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    job = run_sync(ctx.slurm.job(job_id))
    while not job.state.finished:
        assert time.monotonic() < deadline, f"job {job_id} still {job.state.value}"
        time.sleep(0.5)
        job = run_sync(ctx.slurm.job(job_id))
    return job


def test_cluster_run_shows_and_runs_exactly_the_allowed_command(ctx, calls) -> None:
    shown = dry_run(ClusterRun(), ctx, {"command": "sinfo --noheader -o %P"})
    assert shown.kind == "command" and shown.text == "sinfo --noheader -o %P" and calls == []
    outcome = execute(ClusterRun(), ctx, {"command": "sinfo --noheader -o %P"})
    assert outcome.ok and "gpu" in outcome.summary
    from betty_jupyter.cluster.file_reads import READ_SCRIPT

    # One step on the cluster: Betty's fixed script runs sinfo with the argv as positional arguments, capped.
    assert calls == [[*READER, READ_SCRIPT, "betty-read", str(1 << 20), "head", "0", "0",
                      "sinfo", "--noheader", "-o", "%P"]]


@pytest.mark.parametrize("command", ["squeue; rm -rf ~", "rm -rf ~", "squeue $(id)", "cat /etc/shadow",
                                     "scancel 1", "sbatch x.sh", "squeue\nrm -rf ~", "squeue --jobs --iterate=2",
                                     "squeue -j -i2", "squeue --iter 1", "sinfo --ite=1", "tail --fol /etc/hostname",
                                     "sacct --fil=/etc/passwd", "squeue --us alice"])
def test_cluster_run_refuses_before_the_transport_is_called(ctx, calls, command) -> None:
    shown = dry_run(ClusterRun(), ctx, {"command": command})
    assert shown.details["refused"] is True and shown.text.startswith("refused: ")
    outcome = execute(ClusterRun(), ctx, {"command": command})
    assert not outcome.ok and "refused" in outcome.summary and "\n" not in outcome.summary
    assert calls == []


def test_cluster_run_reads_files_only_under_the_roots_after_resolving_links(ctx, calls, tmp_path) -> None:
    from betty_jupyter.cluster.file_reads import READ_SCRIPT

    (tmp_path / "train.log").write_text("step=1 loss=0.5\n")
    (tmp_path / "escape").symlink_to("/etc")
    outcome = execute(ClusterRun(), ctx, {"command": f"cat {tmp_path}/train.log"})
    assert outcome.ok and outcome.summary == "step=1 loss=0.5" and outcome.data["argv"] == ["cat", f"{tmp_path}/train.log"]
    # One remote step: the path is a positional argument of Betty's fixed script, cat reads the file it opened.
    assert calls == [[*READER, READ_SCRIPT, "betty-read", str(1 << 20), "head", "1", str(tmp_path),
                      "1", f"{tmp_path}/train.log", "cat", "/dev/fd/10"]]
    calls.clear()
    refused = execute(ClusterRun(), ctx, {"command": f"cat {tmp_path}/escape/hostname"})
    assert not refused.ok and "leads to /etc/hostname, which is outside the readable roots" in refused.summary
    assert len(calls) == 1 and calls[0][-2:] == ["cat", "/dev/fd/10"]  # the same one step, refused before cat ran


def test_queue_partitions_and_history_return_dataframes(ctx) -> None:
    import pandas as pd

    partitions = execute(ClusterPartitions(), ctx, {})
    assert partitions.ok and isinstance(partitions.data, pd.DataFrame)
    assert set(partitions.data["partition"]) == {"cpu", "gpu"} and partitions.summary.startswith("2 partition(s): cpu (default), gpu\n")
    queue = execute(ClusterQueue(), ctx, {"states": ["RUNNING", "PENDING"]})
    assert queue.ok and isinstance(queue.data, pd.DataFrame) and "job" in queue.summary
    assert dry_run(ClusterQueue(), ctx, {"user": "alice", "states": ["PENDING"]}).text.startswith(
        "squeue --user alice --states PENDING")
    history = execute(ClusterHistory(), ctx, {"since": "now-1hours"})
    assert history.ok and isinstance(history.data, pd.DataFrame)
    bad = execute(ClusterQueue(), ctx, {"states": ["R", "SLEEPING"]})
    assert not bad.ok and "states: 'SLEEPING' is not a Slurm job state" in bad.summary


def test_submit_preview_shows_everything_and_changes_nothing(ctx, calls, ssh_profile) -> None:
    name = f"preview-{uuid.uuid4().hex[:6]}"
    text = script(ctx, name, "echo hi", "#SBATCH -p gpu\n#SBATCH --gres=gpu:a100:1\n#SBATCH --time=5\n")
    work = Path(ssh_profile.work_dir)
    before = files_under(ctx.workspace.root, work)
    shown = dry_run(ClusterSubmit(), ctx, {"script": text, "goal": "see the preview", "name": "LoRA run",
                                           "gpu_estimate": {"peak_gib": 21.34, "model": "Llama-3.1-8B"}})
    assert shown.kind == "script" and shown.text == text
    slug = f"{time.strftime('%Y-%m-%d')}-lora-run"
    assert shown.details["resources"] == "partition gpu, 1 GPU (a100), time 5 min"
    assert shown.details["script_path"] == f"{work}/scripts/{slug}.sbatch"
    export = "--export=" + ",".join((*JOB_NAMES, *ssh_profile.job_env))
    assert shown.details["command"] == shlex.join(["env", "SLURM_EXPORT_ENV=ALL", "sbatch", "--parsable",
                                                   "--comment=betty:<fresh token>", export,
                                                   f"{work}/scripts/{slug}.sbatch"])
    assert shown.details["environment"].startswith("HOME, USER, LOGNAME, SHELL, PATH, ")
    assert shown.details["gpu_memory"] == "GPU memory estimate: 21.3 GiB per GPU (Llama-3.1-8B)"
    assert shown.details["page"] == f"wiki/experiments/{slug}.md"
    assert files_under(ctx.workspace.root, work) == before and not ctx.workspace.ledger_path.exists()
    assert shown.details["checked on the cluster"][0] == f"found {ctx.workspace.root} (working directory, line 3)"
    assert re.fullmatch(rf"\d+\.\d [KMGT]iB free on the file system of {ctx.workspace.root}",
                        shown.details["checked on the cluster"][-2])
    assert shown.details["checked on the cluster"][-1] == (  # the dev cluster has no quotas, nor their commands
        f"quota not known: neither lfs quota nor quota answered for {ctx.workspace.root}")
    assert [argv[0] for argv in calls] == ["sinfo", "printenv", "stat", "df", "lfs", "quota"]  # reads only
    assert jobs_named(ctx, name) == []


def test_what_a_job_cannot_start_without_is_checked_before_the_card(ctx, calls, tmp_path) -> None:
    """A missing log directory, environment or script refuses in one line naming each, before any upload; an
    argument path that is missing is only reported, since the job may write it; a name full of shell stays a name."""
    home = run_sync(ctx.slurm.home())
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "activate").write_text("true\n")
    (tmp_path / "train.py").write_text("print('step=1 loss=1')\n")
    body = (f"source {tmp_path}/env/activate\n"
            f"python {tmp_path}/train.py --data {tmp_path}/not-yet --cfg ~/betty-no-such.yaml > out.txt\n")
    fine = script(ctx, "preflight", body, f"#SBATCH --output={tmp_path}/%j.out\n")
    shown = dry_run(ClusterSubmit(), ctx, {"script": fine, "goal": "check"})
    assert shown.details["checked on the cluster"][:5] == [
        f"found {ctx.workspace.root} (working directory, line 3)",
        f"found {tmp_path} (log directory, line 4)",
        f"found {tmp_path}/env/activate (environment, line 5)",
        f"found {tmp_path}/train.py (script, line 6)",
        f"not found yet: {tmp_path}/not-yet (input, line 6; fine if the job writes it)",
    ]
    assert f"not found yet: {home}/betty-no-such.yaml (input, line 6; fine if the job writes it)" in \
        shown.details["checked on the cluster"]

    missing = script(ctx, "preflight", f"source {tmp_path}/nope/activate\npython {tmp_path}/gone.py\n",
                     f"#SBATCH --output={tmp_path}/no-logs/%j.out\n")
    words = (f"can't submit: line 4: log directory {tmp_path}/no-logs is not on the cluster (or cannot be reached); "
             f"line 5: environment {tmp_path}/nope/activate is not on the cluster (or cannot be reached); "
             f"line 6: script {tmp_path}/gone.py is not on the cluster (or cannot be reached)")
    with pytest.raises(ToolError) as refused:
        dry_run(ClusterSubmit(), ctx, {"script": missing, "goal": "check"})
    assert str(refused.value) == words
    in_a_cell = execute(ClusterSubmit(), ctx, {"script": missing, "goal": "check", "first_line": 2})
    assert not in_a_cell.ok and in_a_cell.summary.startswith(f"can't submit: line 5: log directory {tmp_path}/")
    assert not any(argv[0] in ("sbatch", "<put>") for argv in calls)

    hostile = tmp_path / "odd\tname'; touch pwned; #\""
    hostile.mkdir()
    quoted = shlex.quote(str(hostile))
    shown = dry_run(ClusterSubmit(), ctx, {"script": script(ctx, "preflight", f"cd {quoted}\nls\n"), "goal": "x"})
    assert f"found {hostile} (working directory, line 4)" in shown.details["checked on the cluster"]
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


LARGEST = r"\(largest: \d+\.\d GiB = \d+M\)"


@pytest.mark.parametrize("extra, words", [
    ("#SBATCH -p bigmem\n", "line 4: partition 'bigmem' does not exist; choose cpu or gpu"),
    ("#SBATCH -p gpu\n#SBATCH --gres=gpu:h100:9\n",
     r"line 5: 9 GPUs per node is more than partition 'gpu' has \(4 a100, 2 h100 per node\); ask for at most 2 per "
     "node or spread over more nodes"),
    ("#SBATCH --gres=gpu:v100:1\n", r"line 4: partition 'cpu' has no 'v100' GPUs; it offers 4 a100, 2 h100 per node"),
    ("#SBATCH --time=forever\n", r"line 4: time 'forever' is not a Slurm time; use e.g. 01:00:00 or 1-00:00:00"),
    ("#SBATCH -p cpu\n#SBATCH --mem=10T\n", rf"line 5: --mem=10T is more than any node in partition cpu has {LARGEST}"),
    ("#SBATCH -p gpu\n#SBATCH --gres=gpu:a100:2\n#SBATCH --mem-per-gpu=100G\n",
     rf"line 6: --mem-per-gpu=100G × 2 GPUs is more than any node in partition gpu has {LARGEST}"),
])
def test_a_script_that_cannot_run_is_refused_at_preview(ctx, calls, extra, words) -> None:
    """One line that starts "can't submit:", names the script's line and says what the cluster offers."""
    text = script(ctx, "never", "true", extra)
    with pytest.raises(ToolError, match=f"^can't submit: {words}$"):
        dry_run(ClusterSubmit(), ctx, {"script": text, "goal": "nope"})
    outcome = execute(ClusterSubmit(), ctx, {"script": text, "goal": "nope"})
    assert not outcome.ok and re.fullmatch(f"can't submit: {words}", outcome.summary)
    in_a_cell = execute(ClusterSubmit(), ctx, {"script": text, "goal": "nope", "first_line": 2})
    line = int(re.match(r"line (\d+)", words).group(1))
    assert in_a_cell.summary.startswith(f"can't submit: line {line + 1}: ")
    assert not any(argv[0] in ("sbatch", "<put>") for argv in calls)


def test_submit_status_and_logs(ctx) -> None:
    import nbformat

    name = f"agent-{uuid.uuid4().hex[:6]}"
    text = script(ctx, name, "echo step=1 loss=0.5; echo oops >&2; echo step=2 loss=0.25")
    outcome = execute(ClusterSubmit(), ctx, {"script": text, "goal": "Check the agent's submit"})
    assert outcome.ok, outcome.summary
    experiment = outcome.data
    assert jobs_named(ctx, name) == [experiment.job_id]
    assert len(Ledger(ctx.workspace.ledger_path).all()) == 1
    page = ctx.workspace.wiki / experiment.page
    assert page.is_file() and (ctx.workspace.root / experiment.notebook).is_file()
    assert outcome.artifacts == [f"wiki/{experiment.page}", experiment.notebook]
    nbformat.validate(nbformat.read(ctx.workspace.root / experiment.notebook, as_version=4))

    wait_until_finished(ctx, experiment.job_id)
    shown = dry_run(ClusterStatus(), ctx, {"job_id": experiment.job_id})
    assert f"update wiki/{experiment.page}" in shown.text
    status = execute(ClusterStatus(), ctx, {"job_id": experiment.job_id})
    assert status.ok and "COMPLETED" in status.summary and "page" in status.summary
    region = page.read_text().split(AUTO_START, 1)[1].split(AUTO_END, 1)[0]
    assert "**COMPLETED**" in region and "Check the agent's submit" in page.read_text()
    assert WikiStore(ctx.workspace.wiki).read(experiment.page).frontmatter["status"] == "COMPLETED"

    logs = dry_run(JobLogs(), ctx, {"job_id": experiment.job_id, "lines": 1})
    assert logs.text.startswith("tail -n 1 -- ") and logs.text.endswith(f"slurm-{experiment.job_id}.out")
    assert re.fullmatch(rf"job {experiment.job_id} \({name}\), COMPLETED(, exit code 0:0)?; the end of its stdout:\n"
                        r"step=2 loss=0\.25", execute(JobLogs(), ctx, {"job_id": experiment.job_id, "lines": 1}).summary)
    assert execute(JobLogs(), ctx, {"job_id": experiment.job_id, "stream": "err"}).ok
    history = execute(ClusterHistory(), ctx, {"job_ids": [experiment.job_id]})
    assert list(history.data["job_id"]) == [experiment.job_id]


def _plain_sbatch(dev_cluster, *args: str) -> str:
    """Submit as any cluster user could, with plain sbatch (root's --uid makes it another user's job)."""
    import subprocess

    result = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, timeout=60,
                            env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_job_logs_reads_the_file_its_preview_showed(ctx, dev_cluster, tmp_path) -> None:
    (tmp_path / "approved.out").write_text("the log you approved\n")
    (tmp_path / "swapped.out").write_text("a file swapped in after the card\n")
    ident = _plain_sbatch(dev_cluster, "--hold", f"--chdir={tmp_path}", f"--output={tmp_path}/approved.out",
                          "--wrap", "true")
    try:
        shown = dry_run(JobLogs(), ctx, {"job_id": ident, "lines": 5})
        assert shown.text == f"tail -n 5 -- {tmp_path}/approved.out"
        _scontrol(dev_cluster, "update", f"JobId={ident}", f"StdOut={tmp_path}/swapped.out")
        assert execute(JobLogs(), ctx, {"job_id": ident, "lines": 5}).summary.endswith(":\nthe log you approved")
        # A call that showed no card (approved for the session) reads what the job records now.
        assert execute(JobLogs(), ctx, {"job_id": ident, "lines": 5}).summary.endswith(
            ":\na file swapped in after the card")
    finally:
        _scontrol(dev_cluster, "cancel", ident)


def test_logs_and_why_that_name_no_job_read_the_person_s_newest(ctx, dev_cluster, tmp_path) -> None:
    """"Why did my last job fail?", "why is my job pending?": the tools answer for the newest job, and the card
    shows which; the run reads that job even when a newer one comes after the card."""
    failed = _plain_sbatch(dev_cluster, f"--chdir={tmp_path}", f"--output={tmp_path}/%j.out", "--job-name=prep",
                           "--wrap", "echo loading data/train.csv; exit 3")
    wait_until_finished(ctx, failed)
    shown = dry_run(JobLogs(), ctx, {})
    assert shown.details["job_id"] == failed and shown.text == f"tail -n 50 -- {tmp_path}/{failed}.out"
    logs = execute(JobLogs(), ctx, JobLogs().bound(JobLogs().parse({}), shown))
    # the exit code comes from accounting, which may not have the job yet a moment after it ended
    read_the_failed_job = (rf"job {failed} \(prep\), FAILED(, exit code 3:0)?; the end of its stdout:\n"
                           r"loading data/train\.csv")
    assert re.fullmatch(read_the_failed_job, logs.summary), logs.summary
    held = _plain_sbatch(dev_cluster, "--hold", f"--chdir={tmp_path}", "--job-name=waits", "--wrap", "true")
    try:
        why = dry_run(ClusterWhy(), ctx, {})
        assert why.details["job_id"] == held and f"explain why job {held} waits" in why.title
        newer = _plain_sbatch(dev_cluster, f"--chdir={tmp_path}", f"--output={tmp_path}/%j.out", "--wrap", "true")
        wait_until_finished(ctx, newer)
        again = execute(JobLogs(), ctx, JobLogs().bound(JobLogs().parse({}), shown)).summary
        assert re.fullmatch(read_the_failed_job, again), again  # the job the card showed, not the newer one
        explained = execute(ClusterWhy(), ctx, ClusterWhy().bound(ClusterWhy().parse({}), why))
        assert explained.ok and held in explained.summary, explained.summary
    finally:
        _scontrol(dev_cluster, "cancel", held)


def _scontrol(dev_cluster, *args: str) -> None:
    import subprocess

    program = "scancel" if args[0] == "cancel" else "scontrol"
    words = list(args[1:]) if program == "scancel" else list(args)
    done = subprocess.run([program, *words], capture_output=True, text=True, timeout=60,
                          env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


def test_job_logs_of_another_users_job_refuse_in_one_line(ctx, dev_cluster, tmp_path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET-never-shown\n")
    (tmp_path / "innocent.log").symlink_to(outside / "secret.txt")
    named = _plain_sbatch(dev_cluster, "--hold", "--uid=nobody", f"--chdir={tmp_path}",
                          f"--output={outside}/secret.txt", "--job-name=x StdOut=/etc/shadow", "--wrap", "true")
    linked = _plain_sbatch(dev_cluster, "--hold", "--uid=nobody", f"--chdir={tmp_path}",
                           f"--output={tmp_path}/innocent.log", "--wrap", "true")
    try:
        with pytest.raises(ToolError, match="outside the readable roots"):
            dry_run(JobLogs(), ctx, {"job_id": named})
        refused = execute(JobLogs(), ctx, {"job_id": named})
        assert not refused.ok and "outside the readable roots" in refused.summary and "\n" not in refused.summary
        assert dry_run(JobLogs(), ctx, {"job_id": linked}).text.endswith("innocent.log")  # the card shows the path
        read = execute(JobLogs(), ctx, {"job_id": linked})  # the cluster sees where it leads and refuses
        assert not read.ok and f"leads to {outside}/secret.txt, which is outside" in read.summary
        assert "SECRET" not in refused.full + read.full
    finally:
        _scontrol(dev_cluster, "cancel", named, linked)


def test_status_of_a_job_betty_did_not_record_reads_only(ctx) -> None:
    job_id = run_sync(ctx.slurm.submit(script(ctx, "by-hand", "true")))
    outcome = execute(ClusterStatus(), ctx, {"job_id": job_id})
    assert outcome.ok and "page" not in outcome.summary and outcome.data.job_id == job_id
    assert not ctx.workspace.ledger_path.exists()
    unknown = execute(ClusterStatus(), ctx, {"job_id": "999999"})
    assert not unknown.ok and "not known" in unknown.summary


def test_cancel_shows_the_job_then_cancels_it(ctx, calls) -> None:
    name = f"cancel-{uuid.uuid4().hex[:6]}"
    submitted = execute(ClusterSubmit(), ctx, {"script": script(ctx, name, "sleep 120"), "goal": "to be cancelled"})
    job_id = submitted.data.job_id
    calls.clear()
    shown = dry_run(ClusterCancel(), ctx, {"job_id": job_id})
    assert shown.text == f"scancel {job_id}" and shown.details["name"] == name
    assert shown.details["state"] in ("PENDING", "RUNNING", "CONFIGURING")
    assert not any(argv[0] == "scancel" for argv in calls)
    assert execute(ClusterCancel(), ctx, {"job_id": job_id}).ok
    assert [argv for argv in calls if argv[0] == "scancel"] == [["scancel", job_id]]
    assert wait_until_finished(ctx, job_id).state.value == "CANCELLED"
    with pytest.raises(ToolError, match="already ended"):
        dry_run(ClusterCancel(), ctx, {"job_id": job_id})


def test_gpu_advise_reads_the_session_clusters_partitions(ctx) -> None:
    outcome = execute(GpuAdvise(), ctx, {"model": "Llama-3.1-8B", "method": "inference"})
    assert outcome.ok and "gpu/A100-40GB" in outcome.summary and "gpu/H100-80GB" in outcome.summary
    shown = dry_run(GpuAdvise(), ctx, {"model": "Llama-3.1-8B", "method": "inference"})
    assert "the partitions of betty-dev" in shown.text
