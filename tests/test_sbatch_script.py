"""Batch scripts read as sbatch reads them, edited byte for byte, and checked against the partitions offered."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betty_jupyter.cluster import parsing
from betty_jupyter.cluster.commands import cant_submit, checked_script
from betty_jupyter.cluster.sbatch import LONG_OPTIONS, Directive, PartitionOffer, SbatchScript, one_of
from betty_jupyter.errors import ScriptError

SCRIPT = """#!/bin/bash
# a training run
#SBATCH --job-name=train   # what squeue shows
#SBATCH -p gpu
#SBATCH --time 02:00:00
#SBATCH --mem=32G --cpus-per-task=8

#SBATCH --gres=gpu:a100:2
module load cuda
srun python train.py --lr 3e-4
"""

OFFERS = [
    PartitionOffer("cpu", {}, max_time_minutes=7 * 24 * 60),
    PartitionOffer("gpu", {"a100": 4, "h100": 2}, max_time_minutes=24 * 60),
    PartitionOffer("debug", {"a100": 1}, max_time_minutes=30),
]


def script(*directives: str, body: str = "srun hostname\n") -> SbatchScript:
    return SbatchScript.parse("#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in directives) + body)


def problems(text: str, offers: list[PartitionOffer] = OFFERS, default: str | None = None) -> str:
    with pytest.raises(ScriptError) as raised:
        SbatchScript.parse(text).validate(offers, default)
    return str(raised.value)


# -- reading -------------------------------------------------------------------------------------


def test_reads_directives_with_lines_and_long_names() -> None:
    parsed = SbatchScript.parse(SCRIPT)
    assert parsed.directives == (
        Directive(3, "job-name", "train"),
        Directive(4, "partition", "gpu"),
        Directive(5, "time", "02:00:00"),
        Directive(6, "mem", "32G"),
        Directive(6, "cpus-per-task", "8"),
        Directive(8, "gres", "gpu:a100:2"),
    )
    assert parsed.body == "module load cuda\nsrun python train.py --lr 3e-4\n"
    assert parsed.get("job_name") == "train" and parsed.get("cpus-per-task") == "8"
    assert parsed.get("qos") is None
    parsed.validate(OFFERS)


OPTION_FORMS = [
    ("--partition=gpu", "partition", "gpu"),
    ("--partition gpu", "partition", "gpu"),
    ("-p gpu", "partition", "gpu"),
    ("-pgpu", "partition", "gpu"),
    ("--part=gpu", "partition", "gpu"),  # getopt takes unique abbreviations
    ("-t 10", "time", "10"),
    ("-J name", "job-name", "name"),
    ("-N 2", "nodes", "2"),
    ("-n 4", "ntasks", "4"),
    ("-c 8", "cpus-per-task", "8"),
    ("-o out-%j.log", "output", "out-%j.log"),
    ("-e err-%j.log", "error", "err-%j.log"),
    ("-a 1-10%2", "array", "1-10%2"),
    ("-A proj", "account", "proj"),
    ("-q high", "qos", "high"),
    ("-G a100:2", "gpus", "a100:2"),
    ("--gpus-per-node=2", "gpus-per-node", "2"),
    ("--mem-per-cpu=4G", "mem-per-cpu", "4G"),
    ("--comment=betty:abc123", "comment", "betty:abc123"),
    ("--exclusive", "exclusive", None),
    ("--job-name -dash", "job-name", "-dash"),
    ("--my-new-option value", "my-new-option", "value"),
    ("--my-new-flag", "my-new-flag", None),
    ('--job-name="two words"', "job-name", "two words"),
    ("--job-name='it''s'", "job-name", "its"),
    ('--job-name=a\\"b', "job-name", 'a"b'),
    ("--job-name=a\\ b", "job-name", "a b"),
    ("-p gpu # the big one", "partition", "gpu"),
    ("-p gpu#comment", "partition", "gpu"),
    ('--job-name="a # b"', "job-name", "a # b"),
]


@pytest.mark.parametrize(("words", "option", "value"), OPTION_FORMS)
def test_option_forms(words: str, option: str, value: str | None) -> None:
    assert script(words).directives == (Directive(2, option, value),)


def test_several_options_on_one_line_and_short_flags_together() -> None:
    parsed = script("-p gpu -t 10 -Hk")
    assert [(d.option, d.value) for d in parsed.directives] == [
        ("partition", "gpu"),
        ("time", "10"),
        ("hold", None),
        ("no-kill", None),
    ]


def test_last_directive_wins() -> None:
    parsed = script("--time=10", "-t 20")
    assert parsed.get("time") == "20"
    assert parsed.time_minutes() == 20


def test_sbatch_reads_directives_only_until_the_first_command() -> None:
    parsed = SbatchScript.parse("#!/bin/bash\n\n# note\n#SBATCH -p gpu\necho hi\n#SBATCH -t 10\n  #SBATCH -q x\n")
    assert parsed.directives == (Directive(4, "partition", "gpu"),)
    assert parsed.get("time") is None
    assert parsed.body == "echo hi\n#SBATCH -t 10\n  #SBATCH -q x\n"
    assert problems(parsed.text) == "line 6: #SBATCH after the first command is ignored by sbatch; move it up"


def test_an_indented_directive_is_reported() -> None:
    assert problems("#!/bin/bash\n  #SBATCH -p gpu\nhostname\n") == (
        "line 2: an indented #SBATCH is ignored by sbatch; start the line with #SBATCH"
    )


@pytest.mark.parametrize("text", ["", "#SBATCH -p gpu\nhostname\n", "bash run.sh"])
def test_a_script_needs_a_shebang(text: str) -> None:
    with pytest.raises(ScriptError, match="^line 1: a batch script must start with a shebang such as #!/bin/bash$"):
        SbatchScript.parse(text)


@pytest.mark.parametrize("text", ["\n#!/bin/bash\n", " #!/bin/bash\n", "    #!/bin/bash\n    #SBATCH -p gpu\n"])
def test_a_shebang_after_a_blank_or_an_indent_is_named_as_such(text: str) -> None:
    with pytest.raises(ScriptError, match=r"^line 1: the shebang must be the very first characters of the script, "
                                          r"with nothing before it \(no blank line, no indent\): #!/bin/bash$"):
        SbatchScript.parse(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#!/bin/bash\n#SBATCH --time\n", "line 2: --time needs a value on the same line"),
        ("#!/bin/bash\n#SBATCH -p\n", "line 2: -p needs a value on the same line"),
        ("#!/bin/bash\n\n#SBATCH --job-name='open\n", "line 3: unmatched ' quote"),
        ("#!/bin/bash\n#SBATCH gpu\n", "line 2: 'gpu' is not an option"),
        ("#!/bin/bash\n#SBATCHED by hand\n", "line 2: 'ED' is not an option"),
        ("#!/bin/bash\n#SBATCH -Z\n", "line 2: sbatch has no option -Z"),
        ("#!/bin/bash\n#SBATCH -J :x\n", "line 2: a word starts with ':'"),
        ("#!/bin/bash\n#SBATCH --hold=yes\n", "line 2: --hold takes no value"),
        ("#!/bin/bash\n#SBATCH --mem-per=4G\n", "line 2: --mem-per is ambiguous (mem-per-cpu, mem-per-gpu)"),
        ("#!/bin/bash\n#SBATCH -p gpu\n#SBATCH hetjob\n", "line 3: heterogeneous jobs"),
        ("#!/bin/bash\r\n#SBATCH -p gpu\r\n", "line 1: the script has DOS line breaks"),
        ("#!/bin/bash\n#SBATCH -p gpu\nx\0\n", "line 3: the script holds a NUL character"),
    ],
)
def test_malformed_scripts_are_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(ScriptError) as raised:
        SbatchScript.parse(text)
    assert str(raised.value).startswith(message)


def test_malformed_lines_after_the_first_command_are_not_read() -> None:
    parsed = SbatchScript.parse("#!/bin/bash\nhostname\n#SBATCH --time\n")
    assert parsed.directives == ()


# -- round trips and edits -----------------------------------------------------------------------


def test_an_unchanged_script_renders_byte_for_byte() -> None:
    for text in (SCRIPT, SCRIPT.rstrip("\n"), "#!/bin/sh", "#!/bin/bash\n\n\n", "#!/bin/bash\n#SBATCH  -p\tgpu  \n\x0bx\n"):
        parsed = SbatchScript.parse(text)
        assert parsed.render() == text
        assert SbatchScript.parse(parsed.render()) == parsed


def test_with_options_replaces_in_place_and_keeps_everything_else() -> None:
    edited = SbatchScript.parse(SCRIPT).with_options(time="1-00:00:00", partition="debug", cpus_per_task="4")
    assert edited.render() == SCRIPT.replace("--time 02:00:00", "--time=1-00:00:00").replace(
        "-p gpu", "--partition=debug"
    ).replace("--cpus-per-task=8", "--cpus-per-task=4")
    assert edited.get("time") == "1-00:00:00" and edited.get("partition") == "debug"


def test_with_options_adds_after_the_last_directive() -> None:
    edited = SbatchScript.parse(SCRIPT).with_options(comment="betty:abc123", job_name=None)
    lines = SCRIPT.split("\n")
    lines.insert(8, "#SBATCH --comment=betty:abc123")
    del lines[2]
    assert edited.render() == "\n".join(lines)
    assert edited.get("comment") == "betty:abc123" and edited.get("job-name") is None


def test_with_options_adds_after_the_shebang_when_there_are_no_directives() -> None:
    edited = SbatchScript.parse("#!/bin/bash\necho hi\n").with_options(time="10", exclusive="")
    assert edited.render() == "#!/bin/bash\n#SBATCH --time=10\n#SBATCH --exclusive\necho hi\n"
    assert edited.directives == (Directive(2, "time", "10"), Directive(3, "exclusive", None))


def test_removing_one_option_keeps_its_neighbours_on_the_line() -> None:
    parsed = SbatchScript.parse(SCRIPT)
    assert parsed.with_options(mem=None).render() == SCRIPT.replace("--mem=32G ", "")
    assert parsed.with_options(cpus_per_task=None).render() == SCRIPT.replace(" --cpus-per-task=8", "")


def test_removing_every_occurrence_and_an_absent_option() -> None:
    parsed = script("-t 10", "-p gpu -t 20")
    assert parsed.with_options(time=None).render() == "#!/bin/bash\n#SBATCH -p gpu\nsrun hostname\n"
    assert parsed.with_options(qos=None) is parsed


def test_editing_one_of_two_short_flags_keeps_the_other() -> None:
    parsed = script("-Hk")
    assert parsed.with_options(hold=None).render() == "#!/bin/bash\n#SBATCH --no-kill\nsrun hostname\n"


def test_directives_after_the_first_command_are_left_alone() -> None:
    text = "#!/bin/bash\n#SBATCH -t 10\nhostname\n#SBATCH -t 20\n"
    assert SbatchScript.parse(text).with_options(time="30").render() == text.replace("-t 10", "--time=30")


HOSTILE_VALUES = [
    "a|b",
    "two words",
    "it's",
    'say "hi"',
    "tab\there",
    "back\\slash",
    "trailing\\",
    "# not a comment",
    "ünïcödé 🚀",
    "--looks-like-an-option",
    "x=y",
    "",
    " leading space",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_values_survive_render_and_parse(value: str) -> None:
    edited = SbatchScript.parse(SCRIPT).with_options(job_name=value)
    again = SbatchScript.parse(edited.render())
    assert again.get("job-name") == value
    assert again.body == SbatchScript.parse(SCRIPT).body


@pytest.mark.parametrize("value", ["line\nbreak", "cr\rhere", "nul\0"])
def test_values_that_would_break_the_line_are_refused(value: str) -> None:
    with pytest.raises(ScriptError, match="line break or NUL"):
        SbatchScript.parse(SCRIPT).with_options(job_name=value)


def test_option_names_must_be_plain() -> None:
    with pytest.raises(ScriptError, match="not an sbatch option name"):
        SbatchScript.parse(SCRIPT).with_options(**{"time x": "10"})


@settings(max_examples=400, deadline=None)
@given(
    value=st.text(alphabet=st.characters(blacklist_characters="\n\r\x00", blacklist_categories=["Cs"]), max_size=20),
    option=st.sampled_from(["job_name", "comment", "output", "time"]),
)
def test_any_value_on_one_line_round_trips(value: str, option: str) -> None:
    parsed = SbatchScript.parse(SCRIPT)
    edited = parsed.with_options(**{option: value})
    assert SbatchScript.parse(edited.render()).get(option) == value
    assert edited.body == parsed.body
    assert [d for d in edited.directives if d.option != option.replace("_", "-")] == [
        d for d in parsed.directives if d.option != option.replace("_", "-")
    ]


# -- values --------------------------------------------------------------------------------------


TIMES = [
    ("30", 30),
    ("30:00", 30),
    ("30:01", 31),
    ("0:59", 1),
    ("02:00:00", 120),
    ("1:30:30", 91),
    ("1-0", 1440),
    ("2-12", 3600),
    ("1-02:30", 1590),
    ("1-02:30:01", 1591),
    ("UNLIMITED", None),
    ("infinite", None),
    ("0", None),
    ("-1", None),
]
TIMES_VALID = [value for value, _ in TIMES]
TIMES_INVALID = ["1h", "90m", "1:2:3:4", "1-2-3", "-5", "1:", ":30", "1-", "1.5", "one", "1 day", "1-2:3:4:5"]


@pytest.mark.parametrize(("value", "minutes"), TIMES)
def test_valid_times(value: str, minutes: int | None) -> None:
    parsed = script(f"--time={value}")
    assert parsed.time_minutes() == minutes
    parsed.validate([])


@pytest.mark.parametrize("value", TIMES_INVALID)
def test_invalid_times(value: str) -> None:
    parsed = script(f"--time='{value}'")
    message = f"line 2: time '{value}' is not a Slurm time; use e.g. 01:00:00 or 1-00:00:00"
    with pytest.raises(ScriptError) as raised:
        parsed.validate([])
    assert str(raised.value) == message
    with pytest.raises(ScriptError, match="^line 2: time"):
        parsed.time_minutes()


MEMORY = [
    ("100", 100 * 2**20),
    ("512K", 2**20),  # Slurm rounds kilobytes up to whole megabytes
    ("2049k", 3 * 2**20),
    ("16M", 16 * 2**20),
    ("32G", 32 * 2**30),
    ("32GB", 32 * 2**30),
    ("2T", 2 * 2**40),
    ("0", 0),
]
MEMORY_VALID = [value for value, _ in MEMORY]
MEMORY_INVALID = ["16 G", "16GiB", "1.5G", "-1", "G", "16P", "lots"]


@pytest.mark.parametrize(("value", "size"), MEMORY)
def test_memory_units(value: str, size: int) -> None:
    parsed = script(f"--mem={value}", f"--mem-per-cpu={value}")
    assert parsed.memory_bytes() == size
    parsed.validate([])


@pytest.mark.parametrize("value", MEMORY_INVALID)
def test_invalid_memory(value: str) -> None:
    with pytest.raises(ScriptError, match=f"^line 2: memory '{value}' is not a Slurm size"):
        script(f"--mem='{value}'").validate([])
    with pytest.raises(ScriptError, match=f"^line 2: memory '{value}' is not a Slurm size"):
        script(f"--mem-per-cpu='{value}'").validate([])


def test_unset_values_are_none() -> None:
    parsed = script()
    assert (parsed.time_minutes(), parsed.memory_bytes(), parsed.gpu_request()) == (None, None, None)


@pytest.mark.parametrize(
    ("directives", "expected"),
    [
        (["--gres=gpu:a100:2"], ("a100", 2)),
        (["--gres=gpu:2"], (None, 2)),
        (["--gres=gpu"], (None, 1)),
        (["--gres=gpu:h100"], ("h100", 1)),
        (["--gres=shard:1,gpu:a100:1"], ("a100", 1)),
        (["--gres=shard:1"], None),
        (["--gres=none"], None),
        (["--gres=gpu:0"], None),
        (["--gpus=3"], (None, 3)),
        (["-G a100:8", "-N 2"], ("a100", 4)),
        (["--gpus=5", "--nodes=2-4"], (None, 3)),
        (["--gpus-per-node=h100:2"], ("h100", 2)),
        (["--gpus-per-node=2", "--gres=gpu:a100:1"], (None, 2)),
    ],
)
def test_gpu_requests(directives: list[str], expected: tuple[str | None, int] | None) -> None:
    assert script(*directives).gpu_request() == expected


@pytest.mark.parametrize("value", ["--gres=gpu:a100:x", "--gres=gpu:a:b:c", "--gres=gpu::2", "--gpus=a100:two"])
def test_malformed_gpu_requests(value: str) -> None:
    with pytest.raises(ScriptError, match="^line 2: GPU request .* is not "):
        script(value).gpu_request()
    with pytest.raises(ScriptError, match="^line 2: GPU request .* is not "):
        script(value).validate(OFFERS)


# -- against the partitions ----------------------------------------------------------------------


def test_unknown_partition() -> None:
    assert problems("#!/bin/bash\n#SBATCH -p gpux\nhostname\n", [OFFERS[0], OFFERS[1]]) == (
        "line 2: partition 'gpux' does not exist; choose cpu or gpu"
    )


def test_every_partition_in_a_list_must_exist() -> None:
    assert problems("#!/bin/bash\n#SBATCH -p gpu,nope\nhostname\n").startswith("line 2: partition 'nope' does not exist")
    script("-p gpu,cpu").validate(OFFERS)


@pytest.mark.parametrize(
    ("directives", "message"),
    [
        (["-p cpu", "--gres=gpu:1"], "line 3: partition 'cpu' has no GPUs; choose a partition with GPUs (gpu or debug)"),
        (["-p gpu", "--gres=gpu:v100:1"], "line 3: partition 'gpu' has no 'v100' GPUs; it offers 4 a100, 2 h100 per node"),
        (["-p gpu", "--gres=gpu:h100:4"], "line 3: 4 GPUs per node is more than partition 'gpu' has"),
        (["-p gpu", "--gpus-per-node=5"], "line 3: 5 GPUs per node is more than partition 'gpu' has"),
        (["-p gpu", "--gpus=16", "-N 2"], "line 3: 8 GPUs per node is more than partition 'gpu' has"),
        (["-p debug", "-t 31"], "line 3: time 31 is over partition 'debug''s limit of 00:30:00"),
        (["-p gpu", "-t 1-00:00:01"], "line 3: time 1-00:00:01 is over partition 'gpu''s limit of 1-00:00:00"),
        (["-p gpu", "-t UNLIMITED"], "line 3: time UNLIMITED is over partition 'gpu''s limit of 1-00:00:00"),
    ],
)
def test_requests_beyond_the_partition(directives: list[str], message: str) -> None:
    with pytest.raises(ScriptError) as raised:
        script(*directives).validate(OFFERS)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    "directives",
    [
        ["-p gpu", "--gres=gpu:a100:4", "-t 1-00:00:00"],
        ["-p gpu", "--gpus=8", "-N 2"],
        ["-p debug", "--gres=gpu:1", "-t 30"],
        ["-p cpu", "-t 7-00:00:00", "--gres=shard:1"],
        ["-p debug,gpu", "--gres=gpu:h100:2", "-t 10:00:00"],  # fits gpu, which is enough
    ],
)
def test_requests_that_fit(directives: list[str]) -> None:
    script(*directives).validate(OFFERS)


def test_the_default_partition_is_checked_when_none_is_asked_for() -> None:
    parsed = script("--gres=gpu:1")
    parsed.validate(OFFERS)  # no partition known: nothing to check against
    parsed.validate(OFFERS, default_partition="gpu")
    with pytest.raises(ScriptError, match="^line 2: partition 'cpu' has no GPUs"):
        parsed.validate(OFFERS, default_partition="cpu")


def test_no_offers_skips_partition_checks() -> None:
    script("-p anything", "--gres=gpu:h100:64", "-t 99-00:00:00").validate([])


def test_several_problems_are_reported_together_in_line_order() -> None:
    text = (
        "#!/bin/bash\n"
        "#SBATCH --time=1h\n"
        "#SBATCH --mem=lots\n"
        "#SBATCH -p cpu\n"
        "#SBATCH --gres=gpu:a100:1\n"
        "python run.py\n"
        "#SBATCH --qos=high\n"
    )
    assert problems(text) == "; ".join(
        [
            "line 2: time '1h' is not a Slurm time; use e.g. 01:00:00 or 1-00:00:00",
            "line 3: memory 'lots' is not a Slurm size; write a whole number with an optional unit K, M, G or T "
            "(megabytes by default), e.g. 16G",
            "line 5: partition 'cpu' has no GPUs; choose a partition with GPUs (gpu or debug) or drop the GPU request",
            "line 7: #SBATCH after the first command is ignored by sbatch; move it up",
        ]
    )


# -- against Slurm's own sbatch --------------------------------------------------------------------

SBATCH = shutil.which("sbatch")
UNREACHABLE_CLUSTER = "ClusterName=nowhere\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n"
REFUSED = "(sbatch refused)"  # not an option name, so it cannot clash with --error
SHOWN_AS_GIVEN = ("account", "comment", "cpus-per-task", "gpus", "job-name", "nodes", "ntasks", "partition", "qos")
Sbatch = Callable[[str], dict[str, str]]


@pytest.fixture(scope="module")
def sbatch(tmp_path_factory: pytest.TempPathFactory) -> Sbatch:
    """Slurm's own sbatch as an oracle: what it reads from a script, without ever reaching a controller."""
    # The dev cluster the suite runs on installs slurm-client: a missing sbatch is a broken install.
    assert SBATCH is not None, "Slurm's sbatch is missing: `betty dev-cluster up` installs slurm-client"
    folder = tmp_path_factory.mktemp("sbatch")
    if sbatch_reads(str(SBATCH), "#!/bin/bash\n#SBATCH -J probe\nhostname\n", folder).get("job-name") != "probe":
        pytest.skip("this sbatch does not list the options it read before looking for its controller")
    return lambda text: sbatch_reads(str(SBATCH), text, folder)


def sbatch_reads(program: str, text: str, folder: Path) -> dict[str, str]:
    """The options sbatch reads from ``text`` (its -vvv option table), or {REFUSED: why}.

    sbatch reads the script before it looks for a controller; it is stopped as soon as it has
    listed the options, and its configuration names a port where no controller listens.
    """
    (folder / "job.sh").write_text(text, encoding="utf-8")
    (folder / "slurm.conf").write_text(UNREACHABLE_CLUSTER)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(folder / "slurm.conf")}
    with subprocess.Popen(
        [program, "-vvv", str(folder / "job.sh")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=folder,
        encoding="utf-8",
        errors="replace",
    ) as process:
        assert process.stderr is not None
        watchdog = threading.Timer(30, process.kill)
        watchdog.start()
        try:
            return _option_table(process.stderr)
        finally:
            watchdog.cancel()
            process.kill()


def _option_table(lines: Iterable[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    listing = False
    for line in lines:
        line = line.rstrip("\n")
        if line.endswith("end of defined options"):
            return options
        listing = listing or line.endswith("defined options")
        if not listing and not line.startswith("sbatch: debug"):
            return {REFUSED: line}  # an error, or getopt's "unrecognized option"
        match = re.match(r"sbatch: (\S+)\s+: (.*)$", line)
        if listing and match:
            options[match[1]] = match[2]
    return {REFUSED: "sbatch ended without listing its options"}


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_sbatch_itself_reads_back_the_values_betty_writes(value: str, sbatch: Sbatch) -> None:
    edited = SbatchScript.parse(SCRIPT).with_options(job_name=value, comment=value)
    read = sbatch(edited.render())
    assert (read.get("job-name"), read.get("comment")) == (value, value), read


@pytest.mark.parametrize(("words", "option", "value"), [case for case in OPTION_FORMS if "\\ " not in case[0]])
def test_sbatch_itself_reads_the_option_forms_alike(words: str, option: str, value: str | None, sbatch: Sbatch) -> None:
    text = f"#!/bin/bash\n#SBATCH {words}\nhostname\n"
    read = sbatch(text)
    if option.startswith("my-new"):
        assert "unrecognized option" in read[REFUSED]
    elif option in SHOWN_AS_GIVEN:
        assert read.get(option) == value == SbatchScript.parse(text).get(option), read
    else:
        assert REFUSED not in read and option in read, read


BETTY_IS_STRICTER = {"-5", "1-"}  # sbatch takes these (as nonsense: -5 wraps to 2982611 days)


@pytest.mark.parametrize("value", [*TIMES_VALID, *TIMES_INVALID])
def test_sbatch_itself_agrees_on_time_formats(value: str, sbatch: Sbatch) -> None:
    read = sbatch(f"#!/bin/bash\n#SBATCH --time='{value}'\nhostname\n")
    sbatch_refuses = "Invalid --time specification" in read.get(REFUSED, "")
    assert sbatch_refuses == (value in TIMES_INVALID and value not in BETTY_IS_STRICTER), read


@pytest.mark.parametrize("value", [*MEMORY_VALID, *MEMORY_INVALID])
def test_sbatch_itself_agrees_on_memory_sizes(value: str, sbatch: Sbatch) -> None:
    read = sbatch(f"#!/bin/bash\n#SBATCH --mem='{value}'\nhostname\n")
    assert ("Invalid --mem specification" in read.get(REFUSED, "")) == (value in MEMORY_INVALID), read
    if value in MEMORY_VALID:
        assert script(f"--mem='{value}'").memory_bytes() == _slurm_megabytes(read["mem"]) * 2**20


def _slurm_megabytes(shown: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([GT]?)\??", shown).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "G": 1024, "T": 1024**2}[unit]


def test_sbatch_itself_ignores_what_betty_says_it_ignores(sbatch: Sbatch) -> None:
    text = "#!/bin/bash\n  #SBATCH --qos=indented\n#SBATCH -J real\necho hi\n#SBATCH --comment=late\n"
    read = sbatch(text)
    parsed = SbatchScript.parse(text)
    assert (read.get("job-name"), read.get("qos"), read.get("comment")) == ("real", None, None)
    assert (parsed.get("job-name"), parsed.get("qos"), parsed.get("comment")) == ("real", None, None)


DIRECTIVE_WORDS = st.lists(
    st.one_of(
        st.sampled_from(["-J", "--job-name", "--job", "--comment", "--comment=", "-p", "-pq", "-q", "--q", "--qos="]),
        st.sampled_from([" ", "  ", "\t"]),
        st.text(alphabet="zj #\"'\\=-:\t", min_size=1, max_size=5),  # no letter that is an option sbatch checks
    ),
    min_size=1,
    max_size=8,
).map("".join).filter(lambda words: "\\ " not in words)  # '\ ' reads differently before Slurm 24.05


@settings(max_examples=300, deadline=None)
@given(words=DIRECTIVE_WORDS)
def test_sbatch_itself_reads_any_directive_line_alike(words: str, sbatch: Sbatch) -> None:
    text = f"#!/bin/bash\n#SBATCH {words}\nhostname\n"
    read = sbatch(text)
    try:
        parsed = SbatchScript.parse(text)
    except ScriptError as error:
        # Betty refuses a stray '--' even where sbatch would ignore it (at the very end of the directives)
        assert REFUSED in read or "'--' ends sbatch's options" in str(error), (words, read)
        return
    if any(directive.option not in LONG_OPTIONS for directive in parsed.directives):
        assert "unrecognized option" in read[REFUSED], (words, read)  # Betty keeps options it does not know
        return
    assert REFUSED not in read, (words, read)
    for option in ("job-name", "comment", "partition", "qos"):
        assert parsed.get(option) == read.get(option), (words, option, read)


# -- memory against the partitions' nodes, from sinfo's own lines --------------------------------

S = parsing.SEPARATOR
# cpu: nodes of 8000 MB and 15872 MB (15.5 GiB); big: one node of 1 TiB.
SINFO_LINES = (f"cpu*{S}up{S}0/2/0/2{S}0/16/0/16{S}8000{S}(null){S}1-00:00:00{S}2\n"
               f"cpu*{S}up{S}0/1/0/1{S}0/8/0/8{S}15872{S}(null){S}1-00:00:00{S}1\n"
               f"big{S}up{S}0/1/0/1{S}0/64/0/64{S}1048576{S}(null){S}1-00:00:00{S}1\n")


def memory_problem(*directives: str) -> str | None:
    try:
        checked_script(script(*directives).render(), parsing.parse_partitions(SINFO_LINES))
    except ScriptError as error:
        return str(error)
    return None


@pytest.mark.parametrize(("directives", "problem"), [
    (["--partition=cpu", "--mem=10T"],
     "line 3: --mem=10T is more than any node in partition cpu has (largest: 15.5 GiB = 15872M)"),
    (["--mem=15873"], "line 2: --mem=15873 is more than any node in partition cpu has (largest: 15.5 GiB = 15872M)"),
    (["-p cpu", "-c 4", "--mem-per-cpu=4G"],
     "line 4: --mem-per-cpu=4G × 4 CPUs is more than any node in partition cpu has (largest: 15.5 GiB = 15872M)"),
    (["--ntasks-per-node=2", "--cpus-per-task=2", "--mem-per-cpu=3969M"],
     "line 4: --mem-per-cpu=3969M × 4 CPUs is more than any node in partition cpu has (largest: 15.5 GiB = 15872M)"),
    (["--mem=15872M"], None),  # exactly the largest node: it fits there
    (["--mem=16252928K"], None),  # the same in kilobytes
    (["--mem=15.5G"], "line 2: memory '15.5G' is not a Slurm size"),
    (["--mem=0"], None),  # all of a node's memory
    (["--partition=cpu,big", "--mem=1T"], None),  # one of the partitions has such a node
    (["--partition=big", "--mem=2T"],
     "line 3: --mem=2T is more than any node in partition big has (largest: 1024.0 GiB = 1048576M)"),
    (["-c 4", "--mem-per-cpu=3968M"], None),
])
def test_memory_no_node_of_the_partition_has_is_refused_in_one_line(directives, problem):
    found = memory_problem(*directives)
    assert (found is None) == (problem is None) and (problem is None or found.startswith(problem)), found


@pytest.mark.parametrize(("directives", "problem"), [
    (["--gres=gpu:2", "--mem-per-gpu=8G"],
     "line 3: --mem-per-gpu=8G × 2 GPUs is more than any node in partition cpu has (largest: 15.5 GiB = 15872M)"),
    (["--gpus-per-node=1", "--mem-per-gpu=16G"],
     "line 3: --mem-per-gpu=16G is more than any node in partition cpu has (largest: 15.5 GiB = 15872M)"),
    (["--gres=gpu:2", "--mem-per-gpu=7936M"], None),  # 2 × 7936M is exactly the largest node
])
def test_memory_per_gpu_counts_the_gpus_per_node(directives, problem):
    offers = parsing.parse_partitions(SINFO_LINES.replace("(null)", "gpu:a100:4"))
    try:
        checked_script(script(*directives).render(), offers)
        found = None
    except ScriptError as error:
        found = str(error)
    assert found == problem


def test_a_refusal_names_lines_as_the_person_sees_them_and_the_choices_in_words():
    """One wording for every face: ``can't submit: line N: …``, N counted from where the script starts."""
    text = "#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH --partition=gpu-large\n#SBATCH --time=soon\necho\n"
    with pytest.raises(ScriptError) as refused:
        checked_script(text, parsing.parse_partitions(SINFO_LINES))
    assert cant_submit(refused.value) == ("can't submit: line 3: partition 'gpu-large' does not exist; choose cpu or "
                                          "big; line 4: time 'soon' is not a Slurm time; use e.g. 01:00:00 or "
                                          "1-00:00:00")
    in_a_cell = cant_submit(refused.value, first_line=2)  # under a %%betty submit line
    assert in_a_cell.startswith("can't submit: line 4: partition 'gpu-large' does not exist; choose cpu or big; "
                                "line 5: time 'soon'")
    assert [one_of(names) for names in ([], ["cpu"], ["cpu", "gpu"], ["a", "b", "c"])] == ["", "cpu", "cpu or gpu",
                                                                                           "a, b or c"]
