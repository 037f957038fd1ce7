"""The one table of reads: each command has the same options on ``betty`` and in ``%betty``, derived from its tool."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Literal

import pytest
from pydantic import Field

from betty_jupyter import read_commands
from betty_jupyter.agent.models import ADVANCED_FIELD, ToolArgs
from betty_jupyter.agent.registry import default_registry
from betty_jupyter.cli import build_parser
from betty_jupyter.errors import UsageError
from betty_jupyter.cli import reads as cli_reads
from betty_jupyter.notebook.magics import BettyMagics
from betty_jupyter.notebook.magics import jobs as magic_jobs
from betty_jupyter.read_commands import MODEL_ONLY, READS, ReadCommand, add_tool_options, option_names
from conftest import REPO

FACE_ONLY = {"cli": {"--cluster", "--json", "--dir"}, "magic": set()}
"""What only one face has on every read; per read, :data:`FACE_ONLY_PER_READ` adds to it."""
FACE_ONLY_PER_READ = {("cli", "efficiency"): {"--plot"}, ("cli", "why"): {"--resubmit"},
                      ("magic", "logs"): {"--follow"}}

OLD_NAMES = {
    ("cli", "jobs"): {"--me", "--user", "--state", "--partition", "--cluster", "--json"},
    ("cli", "history"): {"job_ids", "--since", "--all-users", "--cluster", "--json"},
    ("cli", "logs"): {"job_id", "--err", "-n", "--lines", "--cluster"},
    ("cli", "efficiency"): {"job_ids", "--since", "--plot", "--cluster", "--json"},
    ("cli", "why"): {"job_id", "--cluster", "--json"},
    ("magic", "squeue"): {"--me", "--partition", "--state"},
    ("magic", "sacct"): {"job_ids", "--since", "--all-users"},
    ("magic", "efficiency"): {"job_ids", "--since", "--experiment"},
    ("magic", "logs"): {"job_id", "--err", "--lines", "--follow"},
    ("magic", "status"): {"job_id"},
    ("magic", "why"): {"job_id"},
}
"""Every option each face had before the table: each still works."""


def cli_parser(name: str) -> argparse.ArgumentParser:
    parser = build_parser([name])
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    made = commands.choices[name]
    made.format_help()  # the options come when the parser is first used
    return made


def magic_parser(name: str) -> argparse.ArgumentParser:
    build, _ = BettyMagics(shell=None)._commands()[name]
    return build()


def face_options(face: str, command: ReadCommand) -> set[str]:
    """What the face itself adds to ``command``, read from the face's own declaration."""
    parser = argparse.ArgumentParser()
    (cli_reads if face == "cli" else magic_jobs).add_face_options(parser, command)
    return option_names(parser)


def tool_options(command: ReadCommand) -> set[str]:
    parser = argparse.ArgumentParser()
    add_tool_options(parser, command)
    return option_names(parser)


@pytest.mark.parametrize("command", READS, ids=lambda command: command.name)
def test_both_faces_offer_the_options_the_tool_has(command: ReadCommand) -> None:
    derived = tool_options(command)
    model = default_registry().get(command.tool).Args
    shown = {name for name, info in model.model_fields.items()
             if not (info.json_schema_extra or {}).get("x-betty-advanced") and name not in MODEL_ONLY}
    assert {option.lstrip("-").replace("-", "_") for option in derived} >= shown
    for face, names in (("cli", command.cli), ("magic", command.magic)):
        declared = face_options(face, command)
        assert declared == FACE_ONLY[face] | FACE_ONLY_PER_READ.get((face, command.name), set()), (face, declared)
        assert not declared & derived, f"{face} declares a tool option by hand: {declared & derived}"
        for name in names:
            offered = option_names(cli_parser(name) if face == "cli" else magic_parser(name))
            assert offered == derived | declared, (face, name, offered ^ (derived | declared))


@pytest.mark.parametrize(("face", "name"), sorted(OLD_NAMES))
def test_every_name_each_face_had_still_works(face: str, name: str) -> None:
    offered = option_names(cli_parser(name) if face == "cli" else magic_parser(name))
    assert OLD_NAMES[face, name] <= offered, OLD_NAMES[face, name] - offered


class Sample(ToolArgs):
    """Every kind of field a tool's arguments have."""

    job_ids: list[str] | None = Field(None, description="these jobs only")
    states: list[str] | None = Field(None, description="only these states")
    stream: Literal["out", "err"] = Field("out", description="which stream")
    lines: int = Field(50, description="how many lines")
    all_users: bool = Field(False, description="everyone's")
    double_quant: bool = Field(True, description="nf4 quantised twice")
    secret_knob: int = Field(3, json_schema_extra=ADVANCED_FIELD)


def test_options_are_derived_from_the_fields_and_a_call_keeps_the_tools_defaults(monkeypatch) -> None:
    monkeypatch.setattr(read_commands, "tool_args_model", lambda tool: Sample)
    command = ReadCommand("sample", "sample_tool", ("sample",), ("sample",), "a sample", positional="job_ids",
                          aliases={"states": ("--state",)})
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_tool_options(parser, command)
    assert option_names(parser) == {"job_ids", "--states", "--state", "--stream", "--lines", "--all-users",
                                    "--double-quant", "--no-double-quant"}
    parsed = parser.parse_args(["7", "8", "--state", "PENDING", "--states", "RUNNING", "--lines", "5", "--all-users",
                                "--no-double-quant"])
    assert read_commands.tool_args(command, parsed) == {"job_ids": ["7", "8"], "states": ["PENDING", "RUNNING"],
                                                        "lines": 5, "all_users": True, "double_quant": False}
    assert read_commands.tool_args(command, parser.parse_args([])) == {}
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--stream", "both"])
    assert "how many lines (default 50)" in " ".join(parser.format_help().split())
    with pytest.raises(UsageError, match="lines: Input should be a valid integer"):
        read_commands.check(command, {"lines": "many"})


def test_betty_help_loads_no_tool_and_a_reads_own_help_loads_its_tool() -> None:
    code = ("import sys\nfrom betty_jupyter.cli import build_parser\nbuild_parser([]).format_help()\n"
            "print(sorted(m for m in ('pydantic', 'betty_jupyter.agent.tools', 'betty_jupyter.agent.registry') "
            "if m in sys.modules))\n"
            "build_parser(['jobs']).parse_args(['jobs', '--state', 'PENDING'])\n"
            "print('pydantic' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


def test_loading_the_magics_loads_no_tool_and_no_agent() -> None:
    code = ("import sys\nimport betty_jupyter\nfrom betty_jupyter.notebook.magics import BettyMagics\n"
            "BettyMagics(shell=None)._commands()\n"
            "print(sorted(m for m in ('pydantic', 'betty_jupyter.agent.tools', 'betty_jupyter.agent.loop', "
            "'betty_jupyter.gpu.estimate_options') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_load_ext_loads_no_agent_table_or_gpu_estimate_and_still_shows_them_the_betty_way() -> None:
    code = ("import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\nshell.run_line_magic('load_ext', 'betty_jupyter')\n"
            "print(sorted(m for m in ('pydantic', 'pandas', 'ipywidgets', 'betty_jupyter.agent.models', "
            "'betty_jupyter.gpu', 'betty_jupyter.gpu.estimate', 'betty_jupyter.gpu.trace') if m in sys.modules))\n"
            "from betty_jupyter.cluster.jobs import Job\nfrom betty_jupyter.gpu import Estimate\n"
            "from betty_jupyter.gpu.trace import TracedEstimate\nfrom betty_jupyter.notebook import display\n"
            "shown = shell.display_formatter.ipython_display_formatter\n"
            "print([shown.lookup_by_type(kind).__name__ for kind in (Job, Estimate, TracedEstimate)])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "['_show_job', '_show_estimate', '_show_traced']"]
