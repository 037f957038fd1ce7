"""Word when jobs end on the real dev cluster: through the server's own watcher (the Assistant), once per ended job,
also for a job that ended while no server ran, in one process and across real Jupyter server processes; a hostile
job name never reaches a message."""

from __future__ import annotations

import asyncio
import json
import os
import time

from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.notify.targets import TargetBook, target
from betty_jupyter.experiments.record import submit_experiment
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty
from jupyter_server_proc import JupyterServer
from notify_sinks import HttpSink, SmtpSink

CLUSTER = "betty-dev"
HOSTILE = "<img src=x onerror=alert(1)>@channel$(touch /tmp/pwned)`id`"


def test_each_ended_job_reaches_mail_and_webhook_once_across_a_server_restart(ssh_profile, tmp_path):
    made = run_betty("init", str(tmp_path / "project"))
    assert made.returncode == 0, made.stderr
    workspace = Workspace.at(tmp_path / "project")
    http, smtp = HttpSink(), SmtpSink()
    book = TargetBook()
    book.add(target("hook", "webhook", f"{http.url}/hook-secret"))
    book.add(target("me", "email", "person@example.org"))
    config = BettyConfig(clusters=[ssh_profile.to_dict()], default_cluster=ssh_profile.name,
                         notify={"smtp": f"127.0.0.1:{smtp.port}", "from": "betty@example.org"})
    transport = ssh_profile.open_transport()
    slurm = SlurmClient(transport, work_dir=ssh_profile.work_dir)

    def script(body: str) -> str:
        return f"#!/bin/bash\n#SBATCH --job-name='{HOSTILE}'\n#SBATCH --chdir={workspace.root}\n{body}\n"

    async def served(until: int) -> None:
        """A server's life: its watcher runs until ``until`` notifications of each kind have arrived."""
        assistant = Assistant(workspace, config)
        assistant.watch(min_interval=0.5, max_interval=2)
        try:
            await asyncio.to_thread(http.wait_for, until, 300)
            await asyncio.to_thread(smtp.wait_for, until, 60)
        finally:
            await assistant.close()

    async def scenario() -> list[str]:
        first = await submit_experiment(slurm, workspace, ssh_profile.name, script("echo done"), goal=HOSTILE)
        failed = await submit_experiment(slurm, workspace, ssh_profile.name, script("exit 3"), goal=HOSTILE)
        await served(until=2)
        # The server is down: this job ends meanwhile, and the next server tells of it once.
        later = await submit_experiment(slurm, workspace, ssh_profile.name, script("echo later"), goal=HOSTILE)
        deadline = time.monotonic() + 300
        while not (await slurm.snapshot([later.job_id])).jobs.get(later.job_id, None) or \
                not (await slurm.snapshot([later.job_id])).jobs[later.job_id].state.finished:
            assert time.monotonic() < deadline, "the job never ended"
            await asyncio.sleep(0.5)
        assert len(http.items) == 2
        await served(until=3)
        # A third start: a new job's word arrives, and nothing told before is told again.
        fourth = await submit_experiment(slurm, workspace, ssh_profile.name, script("echo fourth"), goal=HOSTILE)
        await served(until=4)
        return [first.job_id, failed.job_id, later.job_id, fourth.job_id]

    try:
        jobs = asyncio.run(scenario())
    finally:
        asyncio.run(transport.close())
        http.close()
        smtp.close()
    bodies = [json.loads(item["body"]) for item in http.items]
    assert sorted(body["job_id"] for body in bodies) == sorted(jobs)  # each once, none twice
    by_job = {body["job_id"]: body for body in bodies}
    assert by_job[jobs[0]]["state"] == "COMPLETED" and by_job[jobs[1]]["state"] == "FAILED"
    assert by_job[jobs[1]]["diagnosis"] == "Failed" and by_job[jobs[2]]["state"] == "COMPLETED"
    assert by_job[jobs[1]]["text"].startswith(f"Job {jobs[1]} on {CLUSTER} ended FAILED after 0:00:")
    assert sorted(message["Subject"] for message in smtp.messages()) == sorted(
        f"Betty: Job {job} {by_job[job]['state']}" for job in jobs)
    for text in [item["body"] for item in http.items] + [message.as_string() for message in smtp.messages()]:
        for piece in ("img", "onerror", "@channel", "$(", "pwned", "`"):
            assert piece not in text, text


def test_a_job_that_ends_while_the_jupyter_server_is_down_is_told_once_by_the_next_server(
        ssh_profile, dev_cluster, tmp_path):
    """The same across real ``jupyter server`` processes: the first is stopped, a job ends meanwhile, and the next
    one started on the same project tells of it exactly once, and of nothing told before."""
    assert run_betty("init", str(tmp_path / "project")).returncode == 0
    workspace = Workspace.at(tmp_path / "project")
    http = HttpSink()
    jupyter_config = tmp_path / "jupyter-config"
    TargetBook(jupyter_config / "betty_notify").add(target("hook", "webhook", f"{http.url}/hook-secret"))
    env = {**os.environ, **dev_cluster, "JUPYTER_CONFIG_DIR": str(jupyter_config)}
    transport = ssh_profile.open_transport()
    slurm = SlurmClient(transport, work_dir=ssh_profile.work_dir)

    def server(name: str) -> JupyterServer:
        runtime = tmp_path / f"runtime-{name}"
        runtime.mkdir()
        return JupyterServer(workspace.root, env, runtime)

    async def submitted(body: str) -> str:
        script = f"#!/bin/bash\n#SBATCH --job-name=restart\n#SBATCH --chdir={workspace.root}\n{body}\n"
        return (await submit_experiment(slurm, workspace, ssh_profile.name, script, goal="restart")).job_id

    async def ended(job_id: str) -> None:
        deadline = time.monotonic() + 300
        while True:
            job = (await slurm.snapshot([job_id])).jobs.get(job_id)
            if job is not None and job.state.finished:
                return
            assert time.monotonic() < deadline, f"job {job_id} never ended"
            await asyncio.sleep(0.5)

    async def scenario() -> list[str]:
        first = await asyncio.to_thread(server, "first")
        try:
            before = await submitted("echo before")
            await asyncio.to_thread(http.wait_for, 1, 300)
        finally:
            await asyncio.to_thread(first.stop)
        later = await submitted("echo later")  # ends while no server runs
        await ended(later)
        assert len(http.items) == 1, http.items
        second = await asyncio.to_thread(server, "second")
        try:
            await asyncio.to_thread(http.wait_for, 2, 300)
            # A new job's word arrives after the late one's: had anything been told twice, it would be here too.
            last = await submitted("echo last")
            await asyncio.to_thread(http.wait_for, 3, 300)
        finally:
            await asyncio.to_thread(second.stop)
        return [before, later, last]

    try:
        jobs = asyncio.run(scenario())
    finally:
        asyncio.run(transport.close())
        http.close()
    told = [json.loads(item["body"])["job_id"] for item in http.items]
    assert sorted(told) == sorted(jobs), told  # each once, none twice
    assert told[:2] == jobs[:2], "the late job is told by the next server, before any new one"
