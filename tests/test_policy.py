"""The read-only allowlist: hostile commands refused, everyday reads accepted, paths kept under the roots."""

from __future__ import annotations

import posixpath
import re
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betty_jupyter.cluster.allowlist import FILE_READERS, SHELL_METACHARACTERS, CommandPolicy
from betty_jupyter.errors import ConfigError, PolicyError

ROOTS = ("/home/u/project", "/scratch/u")
HOME = "/home/u/project"


@pytest.fixture
def policy() -> CommandPolicy:
    return CommandPolicy(ROOTS, home=HOME, extra_commands={"myquota": [], "lfs": ["quota"]})


def under_roots(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in ROOTS)


HOSTILE = [
    "squeue; rm -rf ~",
    "squeue && rm x",
    "squeue || true",
    "squeue | sh",
    "squeue & sleep 100",
    "squeue `id`",
    "squeue $(id)",
    "squeue -u ${USER}",
    "cat${IFS}/etc/passwd",
    "squeue -u $USER",
    "squeue > /home/u/project/out",
    "squeue >> /home/u/project/out",
    "cat < /etc/passwd",
    "cat <<EOF",
    "squeue\nrm -rf /",
    "squeue\rrm",
    "squeue\x00rm",
    "squeue\tx",
    "squeue\x1b[2J",
    "squeue -u 'me;rm'",
    'squeue -u "$(id)"',
    "squeue\\;rm",
    "squeue (x)",
    "squeue {a,b}",
    "squeue !!",
    "cat /scratch/u/*.log",
    "cat /scratch/u/a?.log",
    "squeue # comment",
    "squeue\uff1b rm",  # fullwidth semicolon
    "\u0455queue",  # Cyrillic dze looks like s
    "squ\u0435ue",  # Cyrillic e
    "sinfo\u00a0-N",  # no-break space
    "/usr/bin/squeue",
    "./squeue",
    "bin/squeue --me",
    "cat -- ../../etc/passwd",
    "cat /home/u/project/../../../etc/passwd",
    "cat ../other/secret",
    "cat /scratch/u/../v/secret",
    "cat /scratch/uv/file",
    "cat //etc/passwd",
    "cat ~root/.ssh/id_rsa",
    "ls ~otheruser",
    "cat /etc/passwd",
    "cat",
    "tail -f /scratch/u/log",
    "tail -F /scratch/u/log",
    "tail --follow=name /scratch/u/log",
    "tail -nf /scratch/u/log",
    "tail -100f /scratch/u/log",
    "head -n many /scratch/u/log",
    "du -L /scratch/u",
    "du --files0-from=/etc/passwd",
    "wc --files0-from=/scratch/u/list",
    "ls /scratch/u -la",
    "cat ''",
    "scontrol update JobId=1 TimeLimit=10",
    "scontrol requeue 123",
    "scontrol hold 123",
    "scontrol release 123",
    "scontrol delete reservation=r1",
    "scontrol create reservation",
    "scontrol reconfigure",
    "scontrol shutdown",
    "scontrol",
    "scontrol show",
    "scontrol show job 123 extra",
    "scontrol show job 12x3",
    "scontrol show job 123 -d",
    "scontrol show topology",
    "scontrol -d update job 1",
    "sacctmgr delete user name=bob",
    "sacctmgr -i add user bob account=a",
    "sacctmgr add user bob",
    "sacctmgr modify user bob set maxjobs=1",
    "sacctmgr show user bob set maxjobs=1",
    "sacctmgr show runawayjobs",
    "sacctmgr dump cluster file=/tmp/x",
    "sacctmgr",
    "squeue -i 5",
    "squeue --iterate=5",
    "squeue --bogus",
    "squeue -u",
    "squeue extra-word",
    "squeue --me=yes",
    "sacct -f /var/log/slurm/acct",
    "sacct --file=/etc/passwd",
    "seff",
    "seff 1 2",
    "seff abc",
    "rm -rf /",
    "bash -c squeue",
    "sh -c 'squeue'",
    "env squeue",
    "sudo squeue",
    "python -c 'print(1)'",
    "srun hostname",
    "sbatch job.sh",
    "scancel 123",
    "lfs setstripe -c 4 /scratch/u",
    "lfs",
    "myquota --user=other",
    "squeue -u 'unbalanced",
    'squeue -u "unbalanced',
    "",
    "   ",
    "''",
]


@pytest.mark.parametrize("command", HOSTILE)
def test_hostile_commands_are_refused(policy: CommandPolicy, command: str) -> None:
    with pytest.raises(PolicyError, match="^refused: "):
        policy.check(command)


@pytest.mark.parametrize(
    "argv",
    [
        ["squeue", "--me; rm -rf ~"],
        ["squeue", "-u", "me\nrm"],
        ["cat", "/scratch/u/a\x00b"],
        ["\u0455queue"],
        ["squeue", "$(id)"],
        ["squeue", 5],
        [],
    ],
)
def test_hostile_argv_items_are_refused(policy: CommandPolicy, argv: list[object]) -> None:
    with pytest.raises(PolicyError, match="^refused: "):
        policy.check(argv)  # type: ignore[arg-type]


ALLOWED = [
    ("squeue --me", ["squeue", "--me"], ()),
    ("squeue -u alice -t PD,R -o '%.18i %.9P %j'", ["squeue", "-u", "alice", "-t", "PD,R", "-o", "%.18i %.9P %j"], ()),
    ("squeue --user=alice -h", ["squeue", "--user=alice", "-h"], ()),
    ("squeue -ualice -hl", ["squeue", "-ualice", "-hl"], ()),
    ("squeue -w node[01-04]", ["squeue", "-w", "node[01-04]"], ()),
    ("sinfo -N -p gpu -o %N", ["sinfo", "-N", "-p", "gpu", "-o", "%N"], ()),
    ("sacct -j 123 -P -o JobID,State", ["sacct", "-j", "123", "-P", "-o", "JobID,State"], ()),
    ("sacct --starttime=now-2days -X --parsable2 -n", ["sacct", "--starttime=now-2days", "-X", "--parsable2", "-n"], ()),
    ("sprio -l", ["sprio", "-l"], ()),
    ("sshare -U", ["sshare", "-U"], ()),
    ("seff 12345_7", ["seff", "12345_7"], ()),
    ("scontrol show job 123", ["scontrol", "show", "job", "123"], ()),
    ("scontrol -d show node", ["scontrol", "-d", "show", "node"], ()),
    ("scontrol show hostnames node[1-3]", ["scontrol", "show", "hostnames", "node[1-3]"], ()),
    ("sacctmgr -P show assoc format=User,Account", ["sacctmgr", "-P", "show", "assoc", "format=User,Account"], ()),
    ("sacctmgr list qos", ["sacctmgr", "list", "qos"], ()),
    ("cat /scratch/u/run/out.log", ["cat", "/scratch/u/run/out.log"], ("/scratch/u/run/out.log",)),
    ("head -n 20 /scratch/u/out.log", ["head", "-n", "20", "/scratch/u/out.log"], ("/scratch/u/out.log",)),
    ("tail -100 /scratch/u/out.log", ["tail", "-100", "/scratch/u/out.log"], ("/scratch/u/out.log",)),
    ("tail -n +5 /scratch/u/out.log", ["tail", "-n", "+5", "/scratch/u/out.log"], ("/scratch/u/out.log",)),
    ("ls -la /scratch/u", ["ls", "-la", "/scratch/u"], ("/scratch/u",)),
    ("ls -la /scratch/u/", ["ls", "-la", "/scratch/u"], ("/scratch/u",)),
    ("wc -l /scratch/u/a /scratch/u/a", ["wc", "-l", "/scratch/u/a", "/scratch/u/a"], ("/scratch/u/a",)),
    ("du -sh -d 1 /scratch/u", ["du", "-sh", "-d", "1", "/scratch/u"], ("/scratch/u",)),
    ("df -h", ["df", "-h"], ()),
    ("df -h /scratch/u", ["df", "-h", "/scratch/u"], ("/scratch/u",)),
    ("cat out.log", ["cat", "/home/u/project/out.log"], ("/home/u/project/out.log",)),
    ("cat ~/runs/out.log", ["cat", "/home/u/project/runs/out.log"], ("/home/u/project/runs/out.log",)),
    ("cat /scratch/u/a/../b", ["cat", "/scratch/u/b"], ("/scratch/u/b",)),
    ("cat -- -f", ["cat", "--", "/home/u/project/-f"], ("/home/u/project/-f",)),
    ("tail -- -f", ["tail", "--", "/home/u/project/-f"], ("/home/u/project/-f",)),
    ("cat '/scratch/u/my run/out.log'", ["cat", "/scratch/u/my run/out.log"], ("/scratch/u/my run/out.log",)),
    ("myquota", ["myquota"], ()),
    ("lfs quota -u me /scratch", ["lfs", "quota", "-u", "me", "/scratch"], ()),
]


@pytest.mark.parametrize(("command", "argv", "paths"), ALLOWED)
def test_everyday_reads_are_allowed(policy: CommandPolicy, command: str, argv: list[str], paths: tuple[str, ...]) -> None:
    allowed = policy.check(command)
    assert (allowed.argv, allowed.paths) == (tuple(argv), paths)
    assert sorted({allowed.argv[position] for position in allowed.operands}) == sorted(paths)
    assert shlex.split(allowed.command_line) == argv


def test_argv_input_is_checked_as_given(policy: CommandPolicy) -> None:
    allowed = policy.check(["squeue", "--name", "my job 'quoted'"])
    assert allowed.argv == ("squeue", "--name", "my job 'quoted'")
    assert shlex.split(allowed.command_line) == list(allowed.argv)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("squeue; rm", "refused: ';' is a shell metacharacter; Betty runs one plain command, no shell"),
        (
            "scontrol update job 1",
            "refused: 'scontrol update' changes the cluster; "
            "only 'scontrol show job|node|partition|reservation|config|hostnames' is allowed",
        ),
        ("cat /etc/passwd", "refused: /etc/passwd is outside the readable roots (/home/u/project, /scratch/u)"),
        ("sacctmgr delete user bob", "refused: 'sacctmgr delete' changes the accounting database"),
        ("tail -f /scratch/u/x", "refused: 'tail -f' would follow the file forever"),
        ("/usr/bin/squeue", "name the program alone (e.g. 'squeue')"),
        ("\u0455queue", "(U+0455) is not plain ASCII; type the command in ASCII"),
        ("rm x", "'rm' is not on the read-only allowlist; allowed programs: squeue, "),
        ("squeue --bogus", "'squeue --bogus' is not an allowed option; squeue takes flags "),
        ("cat ~root/x", "another user's home"),
        ("squeue 'x", "unbalanced quote"),
        ("ls /scratch/u -l", "put options before names and paths"),
    ],
)
def test_refusals_name_the_rule(policy: CommandPolicy, command: str, message: str) -> None:
    with pytest.raises(PolicyError) as refusal:
        policy.check(command)
    assert message in str(refusal.value)
    assert "\n" not in str(refusal.value)


def test_file_readers_need_roots() -> None:
    with pytest.raises(PolicyError, match="no readable roots are configured; add directories to the cluster profile's"):
        CommandPolicy().check("cat /scratch/u/x")
    assert CommandPolicy().check("squeue --me").argv == ("squeue", "--me")


def test_without_home_relative_paths_and_tilde_are_refused() -> None:
    policy = CommandPolicy(ROOTS)
    for command in ("cat out.log", "cat ~/out.log", "cat ~", "tail -- -f", "ls ."):
        with pytest.raises(PolicyError, match="relative and no home is known"):
            policy.check(command)
    assert policy.check("cat /scratch/u/out.log").paths == ("/scratch/u/out.log",)


def test_a_root_itself_is_readable_and_a_lookalike_prefix_is_not() -> None:
    policy = CommandPolicy(["/data/root"])
    assert policy.check("ls /data/root").paths == ("/data/root",)
    with pytest.raises(PolicyError, match="outside the readable roots"):
        policy.check("ls /data/rootx")
    with pytest.raises(PolicyError, match="outside the readable roots"):
        policy.check("ls /data")


@pytest.mark.parametrize(
    ("roots", "home", "extras"),
    [
        (["relative/root"], None, None),
        (["/ok"], "relative-home", None),
        (["/ok"], None, {"bad name": []}),
        (["/ok"], None, {"scontrol": ["update"]}),
        (["/ok"], None, {"lfs": "quota"}),
        (["/ok"], None, {"lfs": ["quota;rm"]}),
    ],
)
def test_bad_configuration_is_a_config_error(roots: list[str], home: str | None, extras: dict[str, object] | None) -> None:
    with pytest.raises(ConfigError):
        CommandPolicy(roots, home=home, extra_commands=extras)  # type: ignore[arg-type]


def test_describe_names_every_program_and_the_roots(policy: CommandPolicy) -> None:
    text = policy.describe()
    for program in policy.programs:
        assert re.search(rf"^- {program}\b", text, re.MULTILINE), program
    assert "scontrol show job|node|partition|reservation|config|hostnames" in text
    for root in ROOTS:
        assert root in text
    assert "myquota" in text and "lfs quota" in text


def test_describe_says_when_file_readers_are_off() -> None:
    assert "File readers are off" in CommandPolicy().describe()


# -- properties ------------------------------------------------------------------------------

PROGRAMS = ["squeue", "sinfo", "sacct", "scontrol show job", "cat", "ls -l", "head -n 3", "myquota", "lfs quota"]
NOISY = st.text(
    alphabet=st.sampled_from(list(";&|`$<>(){}!\\*?#~\"' \t\n\r\x00-=/._,:[]%+@abcsu123\u0455\uff1b\u00e9")),
    max_size=24,
)
FORBIDDEN = SHELL_METACHARACTERS | {chr(code) for code in range(32)} | {"\x7f"}


@settings(max_examples=1500, deadline=None)
@given(program=st.sampled_from(PROGRAMS), tail=NOISY)
def test_nothing_with_a_metacharacter_control_or_non_ascii_character_is_accepted(program: str, tail: str) -> None:
    command = f"{program} {tail}"
    policy = CommandPolicy(["/", "/scratch/u"], home="/scratch/u", extra_commands={"myquota": [], "lfs": ["quota"]})
    try:
        allowed = policy.check(command)
    except PolicyError:
        return
    assert not any(char in FORBIDDEN or ord(char) > 127 for char in command), command
    assert shlex.split(allowed.command_line) == list(allowed.argv)
    assert all(not any(char in FORBIDDEN or ord(char) > 127 for char in item) for item in allowed.argv)


SEGMENT = st.sampled_from(
    ["..", ".", "", "u", "scratch", "home", "project", "etc", "passwd", "-f", "~", "~root", "a b", "x.."]
)
PATH = st.builds(
    lambda start, parts: start + "/".join(parts),
    st.sampled_from(["", "/", "/scratch/u/", "/home/u/project/"]),
    st.lists(SEGMENT, min_size=1, max_size=6),
)


@settings(max_examples=1500, deadline=None)
@given(
    program=st.sampled_from(sorted(FILE_READERS)),
    options=st.lists(st.sampled_from(["-n", "5", "-l", "-h", "-s", "--", "-a", "-f", "-d", "1"]), max_size=3),
    paths=st.lists(PATH, min_size=1, max_size=3),
    home=st.sampled_from([None, HOME, "/scratch"]),
)
def test_every_accepted_path_is_under_a_root(program: str, options: list[str], paths: list[str], home: str | None) -> None:
    policy = CommandPolicy(ROOTS, home=home)
    try:
        allowed = policy.check([program, *options, *paths])
    except PolicyError:
        return
    assert all(under_roots(path) and path == posixpath.normpath(path) for path in allowed.paths), allowed
    operands = [item for item in allowed.argv[1:] if item.startswith("/")]
    assert set(operands) == set(allowed.paths)
    assert shlex.split(allowed.command_line) == list(allowed.argv)
