"""The environment a job gets: named variables only, never the secrets of the process that submits it.

Canaries (an OpenAI key, JupyterHub and Jupyter tokens, passwords, a harmless variable nobody
listed) are put in the submitting process's environment; real jobs on the dev cluster, through
both transports, print what they got.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import pytest

from betty_jupyter.cluster.job_env import JOB_NAMES, STEPS_EXPORT, job_environment
from betty_jupyter.cluster.profiles import ClusterProfile
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.cluster.slurm import SlurmClient, sbatch_argv
from betty_jupyter.cluster.sync import Blocking, run_sync
from betty_jupyter.errors import ConfigError, ScriptError, SlurmError, ToolError
from betty_jupyter.secret_names import is_secret_name
from conftest import wait_for_job

CANARIES = {
    "OPENAI_API_KEY": "sk-canary-openai-0123456789abcdef",
    "JUPYTERHUB_API_TOKEN": "canary-hub-token-5150",
    "JPY_API_TOKEN": "canary-jpy-token-7777",
    "JUPYTER_TOKEN": "canary-jupyter-token-4242",
    "MYLAB_DB_PASSWORD": "canary-db-password-1",
    "PGPASSWORD": "canary-pg-password-2",
    "GHTOKEN": "canary-gh-token-3",
}
HIDDEN = {"BETTY_TEST_HIDDEN": "canary-not-listed-anywhere"}  # not a secret, but nobody asked for it


def script(*directives: str, body: str = "env") -> SbatchScript:
    return SbatchScript.parse("\n".join(["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), body, ""]))


# ----- what Betty passes to sbatch, without a cluster ------------------------------------------------------------

def test_a_script_without_export_gets_betty_s_names_and_the_profile_s():
    environment = job_environment(script(), ["BETTY_TEST_VISIBLE", "HOME"])
    assert environment.names == (*JOB_NAMES, "BETTY_TEST_VISIBLE")
    assert environment.option == "--export=" + ",".join((*JOB_NAMES, "BETTY_TEST_VISIBLE"))
    assert environment.prefix == STEPS_EXPORT == ("env", "SLURM_EXPORT_ENV=ALL")
    assert not any(is_secret_name(name) for name in JOB_NAMES)


def test_all_in_the_script_stands_for_the_same_names_and_the_preview_says_so():
    environment = job_environment(script("--export=ALL,EXTRA_NAME,MODE=fast"), ["BETTY_TEST_VISIBLE"])
    assert environment.names == (*JOB_NAMES, "BETTY_TEST_VISIBLE", "EXTRA_NAME")
    assert environment.assignments == ("MODE=fast",)
    assert environment.narrowed_all
    described = environment.describe()
    assert "the script's --export=ALL stands for these names" in described and "set by the script: MODE" in described
    assert "fast" not in described, "previews show names, never values"


@pytest.mark.parametrize("value", ["NONE", "nil", "'NONE'"])
def test_none_and_nil_are_passed_as_the_script_wrote_them(value):
    environment = job_environment(script(f"--export={value}"))
    assert environment.option == f"--export={value.strip(chr(39)).upper()}" and environment.prefix == ()
    assert environment.describe().startswith("nothing from where sbatch runs, only Slurm's SLURM_*")


def test_quoted_values_keep_their_commas_as_slurm_reads_them():
    environment = job_environment(script("""--export='LIST="a,b",OTHER'"""))
    assert environment.assignments == ('LIST="a,b"',) and environment.names[-1] == "OTHER"


@pytest.mark.parametrize("directive", [
    "--export=OPENAI_API_KEY", "--export=ALL,JUPYTERHUB_API_TOKEN", "--export=JPY_API_TOKEN=copied",
    "--export=HOME,jupyter_token", "--export='\"HF_TOKEN=hf_abc\"'", "--export=PGPASSWORD", "--export=SLURM_JWT",
    "--export=ALL,AWS_SECRET_ACCESS_KEY", "--export=openaiApiKey",
])
def test_a_secret_name_in_the_script_is_refused_with_its_line(directive):
    with pytest.raises(ScriptError, match=r"^line 2: --export names .* looks like a secret; Betty never hands"):
        job_environment(script(directive))


@pytest.mark.parametrize("directive, says", [
    ("--export=HOME,$(id)", "'$(id)', which is not an environment variable name"),
    ("--export=A-B", "'A-B', which is not an environment variable name"),
    ("--export=NONE,HOME", "mixes NONE or NIL with names"),
    ("--export-file=/proc/1/environ", "--export-file would load a whole environment"),
])
def test_malformed_or_wholesale_exports_are_refused(directive, says):
    with pytest.raises(ScriptError, match="^line 2: ") as refused:
        job_environment(script(directive))
    assert says in str(refused.value)


@pytest.mark.parametrize("names, says", [
    (["OPENAI_API_KEY"], "looks like a secret"), (["MY SECRET"], "not an environment variable name"),
    ("HOME", "must be a list of variable names"), ([1], "must be a list of variable names"),
])
def test_the_profile_s_job_env_is_checked_like_its_other_fields(names, says):
    with pytest.raises(ConfigError, match=f"cluster profile 'x': `job_env` .*{says}"):
        ClusterProfile.from_dict({"name": "x", "transport": "local", "job_env": names})
    kept = ClusterProfile.from_dict({"name": "x", "transport": "local", "job_env": ["BETTY_TEST_VISIBLE"]})
    assert kept.job_env == ("BETTY_TEST_VISIBLE",) and ClusterProfile.from_dict(kept.to_dict()) == kept


@pytest.mark.parametrize("arg", ["--export=ALL", "--export-file=/proc/1/environ", "--expo=ALL"])
def test_extra_sbatch_arguments_cannot_change_the_environment(arg):
    with pytest.raises(SlurmError, match="would change the job's environment"):
        sbatch_argv(job_environment(script()), "betty:x", [arg], "/x.sbatch")


# ----- real jobs on the dev cluster --------------------------------------------------------------------------------

@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Secrets, a listed harmless variable and an unlisted one in the environment Betty submits from."""
    for name, value in {**CANARIES, **HIDDEN, "BETTY_TEST_VISIBLE": "1"}.items():
        monkeypatch.setenv(name, value)
    return CANARIES


@pytest.fixture
def listing(profile) -> Blocking:
    """A client of ``profile`` whose jobs also get BETTY_TEST_VISIBLE."""
    listed = dataclasses.replace(profile, job_env=("BETTY_TEST_VISIBLE",))
    transport = listed.open_transport()
    yield Blocking(SlurmClient(transport, work_dir=listed.work_dir, job_env=listed.job_env))
    run_sync(transport.close())


def environment_of_a_job(slurm: Blocking, tmp_path: Path, *directives: str) -> tuple[dict[str, str], dict[str, str]]:
    """Run a job that writes its environment, and its ``srun`` step's, under ``tmp_path``; both as dicts."""
    body = ("export STEP_VARIABLE=set-in-the-script\n"
            f"env -0 > {tmp_path}/job.env\n"
            f"srun --ntasks=1 env -0 > {tmp_path}/step.env")
    text = "\n".join(["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), body, ""])
    ident = slurm.submit(text, extra_args=["--chdir", str(tmp_path)])
    job = wait_for_job(slurm, ident)
    assert job.state.value == "COMPLETED", (job, (tmp_path / f"slurm-{ident}.out").read_text())
    return read_env(tmp_path / "job.env"), read_env(tmp_path / "step.env")


def read_env(path: Path) -> dict[str, str]:
    entries = [entry.partition("=") for entry in path.read_text().split("\0") if entry]
    return {name: value for name, _, value in entries}


def assert_no_canary(environment: dict[str, str]) -> None:
    text = "\n".join(f"{name}={value}" for name, value in environment.items())
    for secret in (*CANARIES, *CANARIES.values(), *HIDDEN, *HIDDEN.values()):
        assert secret not in text


@pytest.mark.cluster
@pytest.mark.parametrize("directives", [(), ("--export=ALL",), ("--export=ALL,BETTY_MODE=fast,BETTY_TEST_HIDDEN",)])
def test_a_job_gets_the_listed_names_and_no_secret(listing, profile, canaries, tmp_path, directives):
    job, step = environment_of_a_job(listing, tmp_path, *directives)
    if directives and "BETTY_MODE" in directives[0]:  # what the script names or sets itself, it gets
        assert job["BETTY_MODE"] == "fast"
        assert job.get("BETTY_TEST_HIDDEN") == (HIDDEN["BETTY_TEST_HIDDEN"] if profile.transport == "local" else None)
        job.pop("BETTY_TEST_HIDDEN", None)
        step.pop("BETTY_TEST_HIDDEN", None)
    for environment in (job, step):
        assert_no_canary(environment)
        assert environment["HOME"] and environment["PATH"] and environment["SLURM_JOB_ID"]
    if profile.transport == "local":  # over SSH, sbatch runs in the login's environment, which lacks it
        assert job["BETTY_TEST_VISIBLE"] == step["BETTY_TEST_VISIBLE"] == "1"
    # srun steps see what the script exported, not only the names sbatch was given
    assert step["STEP_VARIABLE"] == "set-in-the-script" and step["SLURM_EXPORT_ENV"] == "ALL"


@pytest.mark.cluster
def test_a_script_that_asks_for_a_secret_is_refused_before_anything_is_uploaded(listing, canaries, tmp_path, profile):
    work = Path(profile.work_dir)
    with pytest.raises(ScriptError, match="line 2: --export names OPENAI_API_KEY, which looks like a secret"):
        listing.submit("#!/bin/bash\n#SBATCH --export=HOME,OPENAI_API_KEY\nenv\n", extra_args=["--chdir", str(tmp_path)])
    assert not work.exists() or not any(work.rglob("*.sbatch"))


@pytest.mark.cluster
def test_nothing_the_local_transport_runs_inherits_a_secret_even_sbatch_export_all(local_profile, canaries, tmp_path):
    """The local transport's own environment drops secret-looking names: a plain ``sbatch --export=ALL`` leaks none."""
    transport = local_profile.open_transport()
    try:
        listed = run_sync(transport.run(["env"]))
        assert listed.ok and "BETTY_TEST_HIDDEN=" in listed.stdout and "SLURM_CONF=" in listed.stdout
        assert not any(secret in listed.stdout for secret in (*CANARIES, *CANARIES.values()))
        wrapped = run_sync(transport.run(["sbatch", "--parsable", "--wait", "--export=ALL", f"--chdir={tmp_path}",
                                          "--wrap", f"env -0 > {tmp_path}/all.env"], 180))
        assert wrapped.ok, wrapped.stderr
    finally:
        run_sync(transport.close())
    environment = read_env(tmp_path / "all.env")
    assert environment["BETTY_TEST_HIDDEN"] == HIDDEN["BETTY_TEST_HIDDEN"], "ALL passed the ordinary variables"
    assert not any(secret in str(environment) for secret in (*CANARIES, *CANARIES.values()))


@pytest.mark.cluster
def test_the_submit_card_shows_the_environment_by_name(local_profile, canaries, dev_cluster):
    """The approval card's command is the one that runs, and its environment lists names, never values."""
    from betty_jupyter.agent.tools import ToolContext
    from betty_jupyter.agent.tools.catalog import ClusterSubmit
    from betty_jupyter.experiments.workspace import Workspace
    from betty_jupyter.wiki import init_workspace

    root = Path(local_profile.work_dir).parent / "project"
    init_workspace(root)
    listed = dataclasses.replace(local_profile, job_env=("BETTY_TEST_VISIBLE",))
    context = ToolContext.open(listed, Workspace.at(root), "s-env")
    try:
        text = "#!/bin/bash\n#SBATCH --export=ALL,MODE=fast\n#SBATCH --time=1\nenv\n"
        shown = run_sync(ClusterSubmit().preview(context, ClusterSubmit.Args(script=text, goal="env")))
        refused = "#!/bin/bash\n#SBATCH --export=JUPYTERHUB_API_TOKEN\nenv\n"
        with pytest.raises(ToolError, match="^can't submit: line 2: --export names JUPYTERHUB_API_TOKEN, which looks "
                                            "like a secret"):
            run_sync(ClusterSubmit().preview(context, ClusterSubmit.Args(script=refused, goal="env")))
    finally:
        run_sync(context.close())
    export = "--export=" + ",".join((*JOB_NAMES, "BETTY_TEST_VISIBLE", "MODE=fast"))
    assert shown.details["command"].startswith(f"env SLURM_EXPORT_ENV=ALL sbatch --parsable '--comment=betty:<fresh "
                                               f"token>' {export} ")
    assert "BETTY_TEST_VISIBLE (where set)" in shown.details["environment"]
    assert "stands for these names" in shown.details["environment"]
    assert not any(value in str(shown) for value in CANARIES.values())


@pytest.mark.cluster
def test_plain_sbatch_as_another_user_would_run_it_is_unchanged(cluster_env, tmp_path, canaries):
    """Betty narrows only its own submissions: sbatch run by hand still behaves as Slurm documents."""
    done = subprocess.run(["sbatch", "--parsable", "--wait", f"--chdir={tmp_path}", "--wrap",
                           f"env -0 > {tmp_path}/plain.env"], env={**cluster_env, **os.environ, **CANARIES},
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert read_env(tmp_path / "plain.env")["OPENAI_API_KEY"] == CANARIES["OPENAI_API_KEY"]


# ProcessTable detaches its daemons on purpose: the Popen it lets go of is not a leak.
@pytest.mark.filterwarnings("ignore:subprocess .* is still running:ResourceWarning")
def test_a_dev_cluster_daemon_never_holds_the_secrets_of_the_shell_that_started_it(tmp_path, canaries):
    """Jobs of the same user could read a daemon's /proc/PID/environ: it is started without the secrets."""
    import shutil

    from betty_jupyter.devcluster.processes import Daemon, ProcessTable

    table = ProcessTable(tmp_path / "run", tmp_path / "log")
    pid = table.start(Daemon("stand-in", [shutil.which("sleep") or "/bin/sleep", "300"], ready=lambda: True,
                             env={"SLURM_CONF": "/etc/x"}), timeout=30)
    try:
        # execve sets up the new environment a moment after the start returns (the start only
        # knows exec began): /proc/PID/environ reads empty until then, so wait for it.
        deadline = time.monotonic() + 30
        while not (held := Path(f"/proc/{pid}/environ").read_bytes().decode()):
            assert time.monotonic() < deadline, "the stand-in daemon never showed an environment"
            time.sleep(0.01)
    finally:
        assert table.stop("stand-in")
    assert "BETTY_TEST_HIDDEN=" in held and "SLURM_CONF=/etc/x" in held
    assert not any(secret in held for secret in (*CANARIES, *CANARIES.values()))


def test_a_dev_cluster_daemon_works_in_its_log_directory_not_the_callers(tmp_path, monkeypatch):
    """A daemon outlives the directory `up` ran in (a checkout in /tmp, deleted later): it never works there."""
    import shutil

    from betty_jupyter.devcluster.processes import Daemon, ProcessTable

    caller = tmp_path / "checkout"
    caller.mkdir()
    monkeypatch.chdir(caller)
    table = ProcessTable(tmp_path / "run", tmp_path / "log")
    pid = table.start(Daemon("stand-in", [shutil.which("sleep") or "/bin/sleep", "300"], ready=lambda: True),
                      timeout=30)
    try:
        assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path / "log")
    finally:
        assert table.stop("stand-in")


@pytest.mark.cluster
def test_betty_submit_refuses_a_secret_s_name_in_one_line_before_asking(ssh_profile, tmp_path, canaries):
    import json

    from conftest import run_betty

    config = tmp_path / "betty.json"
    config.write_text(json.dumps({"BettyConfig": {"clusters": [ssh_profile.to_dict()]}}))
    script = tmp_path / "leaky.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --export=ALL,JUPYTER_TOKEN\nenv\n")
    # --yes answers a card: the refusal comes before any card, so it is refused all the same, and nothing uploaded
    refused = run_betty("submit", str(script), "--no-record", "--yes", "--dir", str(tmp_path),
                        env={**os.environ, "BETTY_CONFIG": str(config)})
    assert refused.returncode != 0 and refused.stderr.strip().splitlines() == [
        "betty: error: can't submit: line 2: --export names JUPYTER_TOKEN, which looks like a secret; Betty never "
        "hands secrets to jobs: have the job read it from a file only you can read on the cluster"]
    assert not Path(ssh_profile.work_dir).exists()


@pytest.mark.parametrize(("argv", "shown"), [
    (("env", "SLURM_EXPORT_ENV=ALL", "sbatch", "--parsable", "x.sbatch"), "sbatch"),
    (("env", "A=1", "B=2", "sbatch"), "sbatch"),
    (("sbatch", "--export=HOME"), "sbatch"),
    (("squeue",), "squeue"),
])
def test_messages_name_the_program_not_the_env_that_starts_it(argv, shown) -> None:
    from betty_jupyter.transport.interface import program_name

    assert program_name(argv) == shown
