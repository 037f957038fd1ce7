"""Reads on the cluster, attacked the way a co-user would: every file Betty reads is the one it checked.

Each test runs through both transports (``profile``: local and SSH) against the real dev
cluster. Another cluster user is played by jobs submitted with plain ``sbatch`` (as root,
``--uid=nobody`` makes them another user's), with hostile names and output paths.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from betty_jupyter.cluster.commands import run_allowed
from betty_jupyter.cluster.file_reads import READ_LIMIT
from betty_jupyter.cluster.slurm import LogFile, SlurmClient
from betty_jupyter.cluster.sync import Blocking, run_sync
from betty_jupyter.errors import PolicyError, SlurmError

pytestmark = pytest.mark.cluster


def sbatch(dev_cluster: dict[str, str], *args: str) -> str:
    """Submit with plain sbatch, as any user of the cluster could; the job id."""
    result = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, timeout=60,
                            env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def scancel(dev_cluster: dict[str, str], *ids: str) -> None:
    subprocess.run(["scancel", *ids], capture_output=True, timeout=60,
                   env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the readable root (``tmp_path``) whose content must never come back."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    path = outside / "secret.txt"
    path.write_text(f"SECRET-{uuid.uuid4().hex}\n")
    return path


@pytest.fixture
def jobs(dev_cluster):
    """Job ids to cancel when the test ends."""
    submitted: list[str] = []
    yield submitted
    if submitted:
        scancel(dev_cluster, *submitted)


@pytest.fixture
def other_user() -> str:
    pwd.getpwnam("nobody")  # fails (never skips) where the image lacks it
    return "nobody"


def test_a_job_name_never_chooses_the_file_read(slurm, dev_cluster, tmp_path, secret, jobs):
    ident = sbatch(dev_cluster, f"--job-name=x StdOut={secret}", f"--chdir={tmp_path}",
                   f"--output={tmp_path}/real-%j.out", "--wrap", "echo real-output; sleep 60")
    jobs.append(ident)
    deadline = time.monotonic() + 60
    while "real-output" not in (text := _tail_or_empty(slurm, ident)):
        assert time.monotonic() < deadline, text
        time.sleep(0.3)
    assert secret.read_text() not in text


@pytest.mark.parametrize("forged", ["\n   StdOut={secret}", "\n   UserId=root(0) GroupId=root(0) MCS_label=N/A\n"
                                    "   WorkDir=/\n   StdOut={secret}", "\n\nJobId=1 JobName=y\n   StdOut={secret}"])
def test_a_name_with_line_breaks_cannot_forge_the_record(slurm, dev_cluster, tmp_path, secret, jobs, forged):
    ident = sbatch(dev_cluster, "--hold", f"--job-name=x{forged.format(secret=secret)}", f"--chdir={tmp_path}",
                   "--wrap", "true")
    jobs.append(ident)
    if scontrol_has_json(dev_cluster, ident):
        # Slurm 23.02 and later: the name is one JSON string, and the file is the job's own.
        assert slurm.log_file(ident).path == f"{tmp_path}/slurm-{ident}.out"
    else:
        # Slurm 22.05's multi-line text: the forged line appears twice, and no file is read.
        with pytest.raises(SlurmError, match="cannot be read unambiguously|lists 2 jobs") as refused:
            slurm.tail(ident)
        assert "\n" not in str(refused.value)
    assert slurm.job(ident).state.value == "PENDING"  # the job's state still shows either way


def scontrol_has_json(dev_cluster: dict[str, str], ident: str) -> bool:
    """Whether this Slurm's scontrol shows a job as JSON (23.02 and later)."""
    result = subprocess.run(["scontrol", "--json", "show", "job", ident], capture_output=True, timeout=60,
                            env={"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"})
    return result.returncode == 0


def test_another_users_job_cannot_point_a_tail_anywhere(slurm, dev_cluster, tmp_path, secret, jobs, other_user):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (tmp_path / "innocent.log").symlink_to(secret)
    cases = [(secret, "outside the readable roots"), (tmp_path / ".ssh" / "id_rsa", "may hold secrets"),
             (tmp_path / "innocent.log", f"leads to {secret}, which is outside the readable roots")]
    for output, refusal in cases:
        ident = sbatch(dev_cluster, "--hold", f"--uid={other_user}", f"--chdir={tmp_path}", f"--output={output}",
                       "--job-name=x StdOut=/etc/shadow", "--wrap", "true")
        jobs.append(ident)
        with pytest.raises(PolicyError, match=refusal) as refused:
            slurm.tail(ident)
        assert "SECRET" not in str(refused.value) and "\n" not in str(refused.value)


def test_without_readable_roots_only_your_own_jobs_directory_is_read(profile, dev_cluster, tmp_path, secret, jobs,
                                                                     other_user):
    rootless = dataclasses.replace(profile, readable_roots=())
    transport = rootless.open_transport()
    slurm = Blocking(SlurmClient(transport, work_dir=rootless.work_dir, readable_roots=rootless.readable_roots))
    try:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        mine = sbatch(dev_cluster, f"--chdir={run_dir}", "--wrap", "echo my-log")
        elsewhere = sbatch(dev_cluster, "--hold", f"--chdir={run_dir}", f"--output={secret}", "--wrap", "true")
        theirs = sbatch(dev_cluster, "--hold", f"--uid={other_user}", f"--chdir={run_dir}", "--wrap", "true")
        from_root = sbatch(dev_cluster, "--hold", "--chdir=/", "--wrap", "true")
        jobs.extend([mine, elsewhere, theirs, from_root])
        deadline = time.monotonic() + 60
        while "my-log" not in (text := _tail_or_empty(slurm, mine)):
            assert time.monotonic() < deadline, text
            time.sleep(0.3)
        with pytest.raises(PolicyError, match="outside the readable roots"):
            slurm.tail(elsewhere)
        with pytest.raises(PolicyError, match=f"job {theirs} belongs to {other_user}, and this cluster has no readable"):
            slurm.tail(theirs)
        with pytest.raises(PolicyError, match="runs in '/', which Betty will not read as a whole"):
            slurm.tail(from_root)
    finally:
        run_sync(transport.close())


def _tail_or_empty(slurm, ident: str) -> str:
    try:
        return slurm.tail(ident)
    except SlurmError:
        return ""  # the file appears when the job starts


def test_a_symlink_flipped_while_betty_reads_never_leaks(profile, tmp_path, secret):
    target = tmp_path / "results.txt"
    target.write_text("legit\n")
    stop, flips = threading.Event(), []

    def flip() -> None:
        for count in range(200_000):
            if stop.is_set():
                break
            spare = tmp_path / f".spare-{count % 2}"
            if count % 2:
                spare.symlink_to(secret)
            else:
                spare.write_text("legit\n")
            os.replace(spare, target)
            flips.append(count)

    flipper = threading.Thread(target=flip)
    flipper.start()
    transport, policy = profile.open_transport(), profile.policy()
    outputs, refusals = [], []
    try:
        for _ in range(150):
            try:
                result = run_sync(run_allowed(transport, policy, ["cat", str(target)]))
                outputs.append(result.stdout + result.stderr)
            except PolicyError as refused:
                refusals.append(str(refused))
    finally:
        stop.set()
        flipper.join()
        run_sync(transport.close())
    secret_text = secret.read_text().strip()
    assert not any(secret_text in text for text in outputs + refusals)
    assert "legit\n" in outputs and refusals and len(flips) > 150
    assert all("outside the readable roots" in line for line in refusals), set(refusals)


def test_a_60_mb_file_comes_back_cut_with_a_note(profile, tmp_path):
    big = tmp_path / "big.log"
    with big.open("w") as out:
        for block in range(600):
            out.write("".join(f"line {block * 10_000 + n:09d} of a long training log\n" for n in range(2_700)))
    assert big.stat().st_size > 60 * 10**6
    transport, policy = profile.open_transport(), profile.policy()
    try:
        head = run_sync(run_allowed(transport, policy, ["cat", str(big)]))
        end = run_sync(SlurmClient(transport, readable_roots=(str(tmp_path),)).read_log(
            LogFile("1", "out", str(big), (str(tmp_path),)), lines=100_000))
    finally:
        run_sync(transport.close())
    assert head.ok and len(head.stdout.encode()) <= READ_LIMIT + 200
    body, note = head.stdout.rsplit("\n[", 1)
    assert note == f"… truncated at {READ_LIMIT} bytes: the output is longer; read a part with head, tail or a " \
                   "narrower command]\n"
    assert body.startswith("line 000000000 of") and body.endswith("of a long training log")
    assert end.startswith(f"[… truncated at {READ_LIMIT} bytes: only the end is shown]\nline ")
    assert end.endswith("line 005992699 of a long training log\n") and len(end.encode()) <= READ_LIMIT + 100


@pytest.mark.parametrize("name", [".ssh/id_rsa", ".ssh", ".netrc", ".aws/credentials", "keys/id_ed25519",
                                  ".local/share/jupyter/runtime/jpserver-42.json", "run/kernel-abc.json",
                                  "certs/server.pem", ".config/gcloud/credentials.db", ".bash_history"])
def test_secret_files_under_a_root_are_refused_before_anything_runs(profile, tmp_path, name):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text("PRIVATE\n")
    transport, policy = profile.open_transport(), profile.policy()
    try:
        for command in (["cat", str(path)], ["ls", "-l", str(path)], ["head", "-n", "1", str(path)]):
            with pytest.raises(PolicyError, match="may hold secrets"):
                run_sync(run_allowed(transport, policy, command))
    finally:
        run_sync(transport.close())


def test_a_link_to_a_secret_under_the_root_is_refused_on_the_cluster(profile, tmp_path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (tmp_path / "notes.txt").symlink_to(tmp_path / ".ssh" / "id_rsa")
    (tmp_path / "pipe").mkdir()
    os.mkfifo(tmp_path / "pipe" / "fifo")
    transport, policy = profile.open_transport(), profile.policy()
    try:
        with pytest.raises(PolicyError, match=r"notes.txt leads to .*/\.ssh/id_rsa, which may hold secrets"):
            run_sync(run_allowed(transport, policy, ["cat", str(tmp_path / "notes.txt")]))
        began = time.monotonic()
        with pytest.raises(PolicyError, match="not a regular file or directory"):
            run_sync(run_allowed(transport, policy, ["cat", str(tmp_path / "pipe" / "fifo")]))
        assert time.monotonic() - began < 30  # refused, not waiting on a pipe nobody writes
    finally:
        run_sync(transport.close())


def test_readers_name_the_paths_asked_for_and_missing_files_fail_plainly(profile, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("beta\nbeta\n")
    transport, policy = profile.open_transport(), profile.policy()
    a, b = str(tmp_path / "a.txt"), str(tmp_path / "sub" / "b.txt")
    try:
        head = run_sync(run_allowed(transport, policy, ["head", "-v", a, b]))
        counted = run_sync(run_allowed(transport, policy, ["wc", "-l", a, b]))
        listed = run_sync(run_allowed(transport, policy, ["ls", "-R", str(tmp_path / "sub")]))
        used = run_sync(run_allowed(transport, policy, ["du", "-a", str(tmp_path / "sub")]))
        missing = run_sync(run_allowed(transport, policy, ["cat", str(tmp_path / "nope.txt")]))
    finally:
        run_sync(transport.close())
    assert head.stdout == f"==> {a} <==\nalpha\n\n==> {b} <==\nbeta\nbeta\n"
    assert [line.split() for line in counted.stdout.splitlines()] == [["1", a], ["2", b], ["3", "total"]]
    assert listed.stdout.startswith(f"{tmp_path / 'sub'}:\nb.txt") and "/dev/fd" not in used.stdout + listed.stdout
    assert used.stdout.splitlines()[-1].endswith(f"\t{tmp_path / 'sub'}")
    assert (missing.exit_code, missing.stderr) == (1, f"cat: {tmp_path / 'nope.txt'}: No such file or directory\n")


def test_a_read_runs_no_start_up_file_of_the_shell(tmp_path):
    """$BASH_ENV (Lmod sets it on many clusters) and ~/.bashrc may print or be slow: a read runs neither."""
    from betty_jupyter.transport.local import LocalTransport
    from betty_jupyter.cluster.allowlist import CommandPolicy

    start_up = tmp_path / "startup.sh"
    start_up.write_text("echo POLLUTED\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.log").write_text("step=1 loss=0.5\n")
    transport = LocalTransport(env={"BASH_ENV": str(start_up)})
    polluted = run_sync(transport.run(["bash", "-c", "true"]))
    assert polluted.stdout == "POLLUTED\n", "the start-up file is live: the read below is a real test"
    read = run_sync(run_allowed(transport, CommandPolicy(readable_roots=[str(data)]), ["cat", str(data / "train.log")]))
    assert (read.ok, read.stdout, read.stderr) == (True, "step=1 loss=0.5\n", "")
