"""Pre-flight: what a batch script names that must exist, read from the script and checked with one ``stat``."""

from __future__ import annotations

import shutil

import pytest

from betty_jupyter.cluster.preflight import (MAX_PATHS, NamedPath, Preflight, named_paths, quota_argvs,
                                             read_free_space, read_quota, read_stat, stat_argv)
from betty_jupyter.cluster.sbatch import SbatchScript
from betty_jupyter.cluster.scripted import ScriptedTransport
from betty_jupyter.cluster.slurm import SlurmClient
from betty_jupyter.cluster.sync import run_sync
from betty_jupyter.transport.local import LocalTransport

HOME = "/home/me"


def named(text: str) -> list[tuple[str, str, int]]:
    return [(item.path, item.role, item.line) for item in named_paths(SbatchScript.parse(text), HOME)]


def test_each_thing_a_job_needs_is_named_with_its_role_and_line() -> None:
    text = ("#!/bin/bash\n#SBATCH --output=logs/%j.out\n#SBATCH --chdir=/proj\n#SBATCH --time=5\n"
            "module load cuda\n"
            "source ~/venvs/torch/bin/activate\n"
            "cd data\n"
            "srun python train.py --data /scratch/set \\\n   --cfg=$HOME/cfg.yaml > /proj/out.txt 2>&1\n"
            "apptainer exec --nv /images/pt.sif python -m tool\n"
            "/opt/bin/tool --x=$SCRATCH/y\n"
            "echo /not/a/path  # /a/comment\n")
    assert named(text) == [
        ("/proj/logs", "log directory", 2),
        ("/proj", "working directory", 3),
        ("/home/me/venvs/torch/bin/activate", "environment", 6),
        ("/proj/data", "working directory", 7),
        ("/proj/data/train.py", "script", 8),  # relative to where `cd` went
        ("/scratch/set", "input", 8),
        ("/home/me/cfg.yaml", "input", 8),  # $HOME is known; $SCRATCH is the job's own to say
        ("/images/pt.sif", "container image", 10),
        ("/opt/bin/tool", "program", 11),
    ]


def test_what_the_script_creates_or_writes_is_not_asked_for() -> None:
    text = ("#!/bin/bash\n#SBATCH --chdir=/proj\n"
            "mkdir -p /proj/run/ckpt out\n"
            "cd out\n"
            "python /proj/run/ckpt/resume.py > /proj/result.txt\n"
            "touch /proj/flag\ncat /proj/flag\n")
    assert named(text) == [("/proj", "working directory", 2)]


def test_what_only_the_job_s_shell_can_know_is_left_alone() -> None:
    """Other variables, globs and command substitutions; relative paths with no --chdir; python -m; /proc."""
    text = ("#!/bin/bash\n"
            "source $VENV/bin/activate\npython train.py\npython -m pkg.train\n"
            "cat /data/*.csv /proc/cpuinfo\nbash `which run.sh`\nconda activate myenv\n")
    assert named(text) == []
    assert named("#!/bin/bash\n#SBATCH --output=/logs/%x/%j.out\ntrue\n") == []  # the folder depends on the job


def test_a_line_a_shell_cannot_read_is_skipped_and_paths_are_capped() -> None:
    assert named("#!/bin/bash\npython '/unclosed\n") == []
    many = "#!/bin/bash\n" + "".join(f"cat /data/{i}\n" for i in range(MAX_PATHS + 10))
    assert len(named(many)) == MAX_PATHS


def test_stat_output_is_read_by_name_whatever_the_name_holds() -> None:
    items = [NamedPath("/a b/x", "script", 3), NamedPath("/gone", "environment", 4), NamedPath("/d", "input", 5)]
    checked = read_stat("regular file\0/a b/x\0directory\0/d\0", items)
    assert [item.kind for item in checked] == ["file", None, "directory"]
    assert stat_argv(["/-rf"])[:4] == ["stat", "-L", "--printf=%F\\0%n\\0", "--"]
    result = Preflight(checked)
    assert result.lines() == ["found /a b/x (script, line 3)", "not found: /gone (environment, line 4)",
                              "found /d (input, line 5)"]
    assert result.refusal(first_line=2) == ("can't submit: line 5: environment /gone is not on the cluster "
                                            "(or cannot be reached)")
    assert Preflight(checked[:1]).refusal() is None
    assert read_free_space("     Avail\n1234567\n") == 1234567 and read_free_space("df: nope") is None


@pytest.mark.parametrize("stat_exit, expected", [
    (1, ["not found: /proj (working directory, line 2)"]),
    (127, ["not checked: stat could not check the paths: stat: bash: stat: command not found"]),
])
def test_the_cluster_is_asked_once_and_a_missing_stat_refuses_nothing(stat_exit, expected) -> None:
    transport = ScriptedTransport().on("printenv", "HOME", stdout=f"{HOME}\n")
    transport.on("stat", stderr="bash: stat: command not found" if stat_exit == 127 else "", exit_code=stat_exit)
    result = run_sync(SlurmClient(transport).preflight(SbatchScript.parse("#!/bin/bash\n#SBATCH --chdir=/proj\ntrue\n")))
    assert result.lines() == expected
    assert (result.refusal() is not None) == (stat_exit == 1)
    assert [argv[0] for argv in transport.calls] == ["printenv", "stat"]


QUOTA = """Disk quotas for user me (uid 1000):
     Filesystem   space   quota   limit   grace   files   quota   limit   grace
      /dev/sda1 {root} {used}{over} 900000 1000000  6days    1200       0       0
"""


def quota_preflight(tmp_path, program: str | None) -> Preflight:
    """The pre-flight of a script writing under ``tmp_path``, run here, with ``program`` as the only ``quota`` on
    PATH (a stand-in; None: no quota command at all)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for needed in ("stat", "df", "printenv", "cat"):
        (bin_dir / needed).symlink_to(shutil.which(needed))
    if program is not None:
        (bin_dir / "quota").write_text(program)
        (bin_dir / "quota").chmod(0o755)
    (tmp_path / "run").mkdir()
    script = SbatchScript.parse(f"#!/bin/bash\n#SBATCH --chdir={tmp_path}/run\ntrue\n")
    return run_sync(SlurmClient(LocalTransport(env={"PATH": str(bin_dir)})).preflight(script))


def test_the_card_shows_the_quota_headroom_where_quota_answers(tmp_path) -> None:
    listing = QUOTA.format(root=tmp_path, used=250000, over="")
    result = quota_preflight(tmp_path, f"#!/bin/sh\ncat <<'END'\n{listing}END\n")
    assert result.lines()[-1] == f"quota: 732.4 MiB of 976.6 MiB left on the file system of {tmp_path}/run (quota)"
    assert result.refusal() is None


def test_an_exhausted_quota_refuses_the_script(tmp_path) -> None:
    listing = QUOTA.format(root=tmp_path, used=1000000, over="*")
    result = quota_preflight(tmp_path, f"#!/bin/sh\ncat <<'END'\n{listing}END\nexit 1\n")
    assert result.refusal() == (f"can't submit: the quota of the file system of {tmp_path}/run is exhausted "
                                "(976.6 MiB used of 976.6 MiB, quota): the job could not write its output")
    assert result.lines()[-1].startswith("quota exhausted: the quota of the file system of")


def test_without_a_quota_command_the_card_says_quota_not_known_in_one_line(tmp_path) -> None:
    result = quota_preflight(tmp_path, None)
    assert result.lines()[-1] == f"quota not known: neither lfs quota nor quota answered for {tmp_path}/run"
    assert result.refusal() is None


@pytest.mark.parametrize("printed", [
    "<b>**Disk quota**</b> \x1b[31m$(rm -rf /)\x1b[0m\n" + "x" * 100_000,
    "/ 99999999999999999999999 1 1 - 1 1 1 -\n",  # a number longer than any quota: not a row
    "\n".join(f"/{i} {i} 0 0 0 0 0" for i in range(5000)),  # many rows: only the first ones are read
])
def test_what_a_hostile_quota_prints_never_reaches_the_card(tmp_path, printed) -> None:
    (tmp_path / "printed").write_text(printed)
    result = quota_preflight(tmp_path, f"#!/bin/sh\ncat {tmp_path}/printed\n")
    shown = "\n".join(result.lines())
    assert "<b>" not in shown and "\x1b" not in shown and "rm -rf" not in shown and "9999" not in shown
    assert result.refusal() is None
    assert result.lines()[-1] in (f"quota not known: neither lfs quota nor quota answered for {tmp_path}/run",
                                  f"quota: no limit on the file system of {tmp_path}/run (quota)")


def test_lfs_quota_is_read_for_the_path_and_its_tightest_row_counts() -> None:
    lines = ("/lustre 500 1000 2000 - 10 0 0 -\n"  # the person's row: 1500 KiB left
             "/lustre 1900 0 2000 - 10 0 0 -\n"  # the group's: 100 KiB left, the tightest
             "/elsewhere 0 0 1 - 0 0 0 -\n")
    quota = read_quota(lines, "/lustre/me/run", "lfs quota")
    assert quota is not None and (quota.used_kib, quota.limit_kib) == (1900, 2000) and quota.exhausted is None
    assert quota.line() == "quota: 100.0 KiB of 2.0 MiB left on the file system of /lustre/me/run (lfs quota)"
    assert read_quota("no such listing", "/lustre", "quota") is None
    assert quota_argvs("/lustre/me")[0] == ("lfs quota", ["lfs", "quota", "-q", "/lustre/me"])
