"""The allowlist reads options as the programs do: optional values, abbreviations, clusters, ``=`` forms.

Every hostile argv here is one the real program would read as a forbidden option (iterate,
follow, an accounting file, a symlink-following flag). The tests at the end run the real
programs (squeue -v says how squeue read its argv; tail on a real file must end) to show the
model and the programs agree.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from betty_jupyter.cluster.program_options import GRAMMARS, Arg, read_argv
from betty_jupyter.cluster.allowlist import FILE_READERS, SLURM_LISTINGS, CommandPolicy
from betty_jupyter.errors import PolicyError

ROOT = "/scratch/u"


@pytest.fixture
def policy() -> CommandPolicy:
    return CommandPolicy([ROOT])


HOSTILE = [
    ("squeue --jobs --iterate=2", "'squeue --iterate' would repeat forever"),
    ("squeue --jobs --iterate 2", "would repeat forever"),
    ("squeue -j -i2", "'squeue -i' would repeat forever"),
    ("squeue -j -i 2", "would repeat forever"),
    ("squeue --jobs -hi2", "would repeat forever"),
    ("squeue -s -i5", "would repeat forever"),
    ("squeue --steps --iterate=5", "would repeat forever"),
    ("squeue --iter=2", "'squeue --iter (--iterate)' would repeat forever"),
    ("squeue --it 2", "(--iterate)' would repeat forever"),
    ("squeue --i=1", "would repeat forever"),
    ("squeue -hli1", "would repeat forever"),
    ("squeue --jobs=1 -i1", "would repeat forever"),
    ("squeue -j 1 -i 2", "comes after '1'"),
    ("squeue 1 2", "takes no plain arguments"),
    ("squeue -j 1 2", "takes no plain arguments"),
    ("sinfo --iter=1", "would repeat forever"),
    ("sinfo -li1", "would repeat forever"),
    ("sinfo --Node --ite 1", "would repeat forever"),
    ("tail --fol /scratch/u/x", "(--follow)' would follow the file forever"),
    ("tail --f=name /scratch/u/x", "would follow the file forever"),
    ("tail --follow=descriptor /scratch/u/x", "would follow the file forever"),
    ("tail --ret /scratch/u/x", "(--retry)' would follow"),
    ("tail --pid=1 /scratch/u/x", "would follow"),
    ("tail -qf /scratch/u/x", "'tail -f' would follow"),
    ("tail -n5 -F /scratch/u/x", "'tail -F' would follow"),
    ("tail -vn 5 -s 1 /scratch/u/x", "would follow"),
    ("tail --s=1 /scratch/u/x", "ambiguous (it could be --silent, --sleep-interval)"),
    ("sacct --fil=/etc/passwd", "(--file)' reads an arbitrary accounting file"),
    ("sacct --fi=/etc/passwd", "ambiguous"),
    ("sacct -Pf /etc/passwd", "'sacct -f' reads an arbitrary accounting file"),
    ("sacctmgr --imm show user", "(--immediate)' commits changes"),
    ("sacctmgr -ni show user", "'sacctmgr -i' commits changes"),
    ("du --dereference-a /scratch/u", "(--dereference-args)' follows symlinks"),
    ("du --deref /scratch/u", "ambiguous"),
    ("du -sL /scratch/u", "'du -L' follows symlinks"),
    ("du --files0 /scratch/u/list", "(--files0-from)' reads a list of names from a file"),
    ("du --exclude-f=/scratch/u/x /scratch/u", "(--exclude-from)'"),
    ("ls --dereference-command-line-s /scratch/u", "follows symlinks"),
    ("ls -lH /scratch/u", "'ls -H' follows symlinks"),
    ("wc --files0-f=/scratch/u/list", "(--files0-from)' reads a list"),
    ("squeue --no", "ambiguous"),
    ("squeue --us alice", "ambiguous (it could be --usage, --user, --users)"),
    ("squeue --me=1", "'--me' takes no value"),
    ("squeue --format", "needs a value"),
    ("squeue -:", "not an allowed option"),
    ("squeue -- x", "takes no plain arguments"),
    ("head --li=many /scratch/u/x", "takes a number"),
    ("head -nmany /scratch/u/x", "takes a number"),
    ("squeue --autocomplete=x", "not an allowed option"),
    ("squeue --=x", "not an allowed option"),
    ("scontrol --uid=0 show job 1", "'scontrol --uid' is not an allowed option"),
]


@pytest.mark.parametrize(("command", "reason"), HOSTILE)
def test_hostile_option_grammar_is_refused_with_its_reason(policy: CommandPolicy, command: str, reason: str) -> None:
    with pytest.raises(PolicyError) as refused:
        policy.check(command)
    assert reason in str(refused.value) and str(refused.value).startswith("refused: ")


ACCEPTED = [
    ("squeue --noh", {"-h"}),
    ("squeue --use alice", {"-u"}),
    ("squeue -u -i", {"-u"}),  # getopt gives -u its value, whatever it looks like
    ("squeue -j 123", {"-j"}),  # -j's optional value as the one operand, as squeue reads it
    ("squeue -ji2", {"-j"}),  # an attached optional value: jobs 'i2', not -i
    ("squeue --jobs=1,2 --states=all", {"-j", "-t"}),
    ("squeue -s 5.0", {"-s"}),
    ("squeue --nodel=node1", {"-w"}),
    ("sprio -j 7", {"-j"}),
    ("sacct --starttime now-1days -X", {"-S", "-X"}),
    ("sinfo --Node --long", {"-N", "-l"}),
    ("head --li 5 /scratch/u/x", {"-n"}),
    ("tail -100 /scratch/u/x", {"-n"}),
    ("ls --col=never -la /scratch/u", {"--color", "-l", "-a"}),
    ("ls --classify /scratch/u", {"-F"}),
]


@pytest.mark.parametrize(("command", "keys"), ACCEPTED)
def test_everyday_spellings_are_read_as_the_program_reads_them(policy: CommandPolicy, command: str,
                                                              keys: set[str]) -> None:
    allowed = policy.check(command)
    program = allowed.argv[0]
    given, _ = read_argv(GRAMMARS[program], allowed.argv[1:], program in ("head", "tail"))
    assert {option.key for option in given} == keys


def test_the_tables_know_the_forbidden_options_too() -> None:
    assert GRAMMARS["squeue"].long_option("iter") == ("iterate", GRAMMARS["squeue"].long["iterate"])
    assert GRAMMARS["squeue"].short["j"] is Arg.OPTIONAL and GRAMMARS["squeue"].short["i"] is Arg.REQUIRED
    assert GRAMMARS["tail"].long["follow"].arg is Arg.OPTIONAL
    assert "-j/--jobs" in SLURM_LISTINGS["squeue"].describe() and "--iterate" not in CommandPolicy().describe()


# -- properties: whatever the spelling, a forbidden option never passes ----------------------------

def _tokens(program: str) -> st.SearchStrategy[str]:
    """Words a hostile argv is made of: any option of the program, abbreviated or clustered, values, paths."""
    grammar = GRAMMARS[program]
    longs = sorted(grammar.long)
    letters = "".join(sorted(grammar.short))
    rules = {**SLURM_LISTINGS, **FILE_READERS}[program]
    allowed = sorted(alias for key in rules.allowed for alias in grammar.aliases(key))
    long_words = st.builds(lambda name, cut, value: f"--{name[:max(1, cut)]}{value}", st.sampled_from(longs),
                           st.integers(1, 12), st.sampled_from(["", "", "=2", "=1", "=x"]))
    clusters = st.builds(lambda chars, value: "-" + "".join(chars) + value,
                         st.lists(st.sampled_from(letters), min_size=1, max_size=3), st.sampled_from(["", "", "2"]))
    plain = st.sampled_from(["2", "1", "alice", "-", "--", "-i", "--iterate=2", "-f", "-n", "5"])
    return st.one_of(long_words, clusters, plain, st.sampled_from(allowed), st.sampled_from(allowed))


def _argv(program: str) -> st.SearchStrategy[list[str]]:
    operands = st.just([f"{ROOT}/x"]) if program in FILE_READERS else st.sampled_from([[], [], ["1"]])
    return st.builds(lambda words, tail: [program, *words, *tail], st.lists(_tokens(program), max_size=5), operands)


FORBIDDEN = {"squeue": {"-i"}, "sinfo": {"-i"}, "tail": {"-f", "-F", "--retry", "--pid", "-s"},
             "sacct": {"-f"}, "du": {"-L", "-H", "-D", "--files0-from", "-X"}, "ls": {"-L", "-H"}}


@settings(max_examples=1500, deadline=None)
@given(data=st.data(), program=st.sampled_from(sorted(FORBIDDEN)))
def test_an_accepted_argv_never_holds_a_forbidden_option(data: st.DataObject, program: str) -> None:
    argv = data.draw(_argv(program))
    try:
        allowed = CommandPolicy([ROOT]).check(argv)
    except PolicyError:
        return
    given, _ = read_argv(GRAMMARS[program], allowed.argv[1:], program in ("head", "tail"))
    assert not {option.key for option in given} & FORBIDDEN[program], argv


# -- the real programs agree ------------------------------------------------------------------------

def _run_briefly(argv: list[str], env: dict[str, str], seconds: float) -> subprocess.CompletedProcess[str] | None:
    """Run ``argv``; None when it is still running after ``seconds`` (then it is killed)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None
    return subprocess.CompletedProcess(argv, process.returncode, out, "")


@pytest.mark.cluster
@pytest.mark.parametrize("command", ["squeue --jobs --iterate=1", "squeue -j -i1", "squeue --iter=1",
                                     "sinfo --ite=1"])
def test_what_is_refused_would_really_repeat_forever(dev_cluster, command: str) -> None:
    with pytest.raises(PolicyError, match="would repeat forever"):
        CommandPolicy().check(command)
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    assert _run_briefly(command.split(), env, 3) is None, f"{command} ended: the refusal would be needless"


@pytest.mark.cluster
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_squeue_argv_accepted_is_read_by_squeue_without_iterating(dev_cluster, data: st.DataObject) -> None:
    argv = data.draw(_argv("squeue"))
    try:
        allowed = CommandPolicy().check(argv)
    except PolicyError:
        return
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    ran = _run_briefly(["squeue", "-v", *allowed.argv[1:]], env, 20)
    assert ran is not None, f"{argv} kept running"
    assert ran.returncode != 0 or "iterate     = 0" in ran.stdout, ran.stdout[-2000:]


@pytest.mark.cluster
def test_squeue_reads_the_accepted_spellings_as_betty_does(dev_cluster) -> None:
    env = {"SLURM_CONF": dev_cluster["SLURM_CONF"], "PATH": "/usr/bin:/bin"}
    for argv, shown in [(["squeue", "-v", "-ji2"], "Invalid job id: i2"), (["squeue", "-v", "-j", "123"], "jobs        = 123"),
                        (["squeue", "-v", "-u", "-i"], "Invalid user: -i"), (["squeue", "-v", "-s", "5.0"], "steps       = 5.0")]:
        CommandPolicy().check(argv)
        ran = _run_briefly(argv, env, 20)
        assert ran is not None and shown in ran.stdout, (argv, ran and ran.stdout[-1500:])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_tail_argv_accepted_ends_on_a_real_file(tmp_path_factory, data: st.DataObject) -> None:
    argv = data.draw(_argv("tail"))
    try:
        allowed = CommandPolicy([ROOT]).check(argv)
    except PolicyError:
        return
    log = tmp_path_factory.mktemp("tail") / "x"
    log.write_text("line\n" * 50)
    real = [str(log) if word == f"{ROOT}/x" else word for word in allowed.argv]
    assert _run_briefly(real, {"PATH": "/usr/bin:/bin"}, 10) is not None, f"{argv} kept following"


def test_every_slurm_command_betty_allows_is_timed_by_its_name_and_has_its_grammar():
    """One table names a read-only Slurm command: the grammar, the metrics and the prompt follow from it."""
    import asyncio

    from prometheus_client import REGISTRY

    from betty_jupyter.cluster.program_options import GRAMMARS
    from betty_jupyter.cluster.allowlist import SLURM_LISTINGS, SLURM_PROGRAMS, CommandPolicy
    from betty_jupyter.cluster.scripted import ScriptedTransport
    from betty_jupyter.server.prometheus import TimedTransport

    assert set(SLURM_LISTINGS) | {"scontrol", "sacctmgr"} <= SLURM_PROGRAMS
    assert set(SLURM_LISTINGS) <= set(GRAMMARS)
    described = CommandPolicy().describe()
    timed = TimedTransport(ScriptedTransport().on("sshare", stdout="").on("hostname", stdout="n1\n"))

    def count(command: str) -> float:
        return REGISTRY.get_sample_value("betty_slurm_command_seconds_count", {"command": command}) or 0.0

    before = {name: count(name) for name in ("sshare", "hostname")}
    asyncio.run(timed.run(["sshare", "-a"]))
    asyncio.run(timed.run(["hostname"]))
    assert count("sshare") == before["sshare"] + 1 and count("hostname") == before["hostname"]
    assert all(program in described for program in SLURM_LISTINGS)
