"""Word when jobs end on the real dev cluster: through the server's own watcher (the Assistant), once per ended job,
also for a job that ended while no server ran; a hostile job name never reaches a message."""

from __future__ import annotations

import asyncio
import json
import time

from betty_jupyter.agent.assistant import Assistant
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.config import BettyConfig
from betty_jupyter.experiments.notify.targets import TargetBook, target
from betty_jupyter.experiments.record import submit_experiment
from betty_jupyter.experiments.workspace import Workspace
from conftest import run_betty
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
