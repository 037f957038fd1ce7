"""``%betty`` and ``%%betty``: Betty in a notebook. A user error prints one line, never a traceback.

Each command returns the object a researcher computes with — ``_`` holds the DataFrame,
the Job, the Estimate, the pending call — and shows it as a widget. Nothing waits for a
person inside a cell: a call that needs an approval returns at once with its card.

The reads (``squeue``, ``sinfo``, ``sacct``, ``overview``, ``efficiency``, ``status``, ``why``,
``logs``) are those of :mod:`betty_jupyter.read_commands`, with the options ``betty`` gives
them; each area's commands live in their own module (:mod:`.jobs`, :mod:`.submit`,
:mod:`.gpu`, :mod:`.agent`, :mod:`.wiki`) and this one reads the command line and
dispatches. Loading it loads neither the agent nor any tool.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Any, Callable

from IPython.core.magic import Magics, line_cell_magic, magics_class

from ..._version import __version__
from ...errors import BettyError, UsageError
from ...read_commands import READS, ReadCommand, check, names, tool_args
from ..login import cell_login
from .agent import AgentCommands
from .gpu import GpuCommands
from .jobs import SETTLE_SECONDS, add_face_options
from .notify import NotifyCommands
from .parsing import HelpShown, MagicParser, parser, read_parser
from .submit import SubmitCommands
from .wiki import WikiCommands

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BettyMagics", "SETTLE_SECONDS"]

_READ_NAMES = frozenset(names("magic"))

Command = tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, "str | None"], Any]]

_HELP = """\
%betty COMMAND [OPTIONS] — Betty, an assistant for your Slurm cluster. `%betty COMMAND --help` explains one.

  clusters                      the configured clusters (* marks the one in use)
  use NAME                      work on another cluster from now on
  squeue [--me] [--user U] [--partition P] [--state S]   the queue, as a live table
  sinfo                         the partitions: nodes, CPUs, GPUs, limits
  overview                      what the cluster is doing: a figure of partitions by state, the queue, your share
  sacct [JOBID…] [--since WHEN] [--all-users]  jobs from accounting
  efficiency [JOBID…] [--since 7d] [--experiment SLUG]  CPU, memory, time used vs asked; right-sizing
  status JOBID                  one job, kept current until it ends
  why [JOBID]                   why a pending job of yours waits, and what would start it sooner
  logs [JOBID] [--err] [--lines N] [--follow]   the end of a job's output
  wait JOBID [--timeout S]      wait (blocking the cell) until a job ends; its final record
  cancel JOBID                  cancel a job (after your approval)
  gpu [estimate] --model M --method X …      GPU memory per GPU (options of `betty gpu estimate`; --trace runs the step)
  gpu calculator                sliders for model, method, batch, sequence, GPUs
  %%betty submit [--slug S] [--goal "…"]     submit the cell as a batch script (after your approval)
  %%betty pipeline [--slug S] [--goal "…"]   steps under '# ==== step NAME (after A) ====' lines: one approval
  %%betty sweep --grid lr=1e-4,3e-4 seed=0,1 [--at-once N]   the cell at every point of a grid: one job array
  %%betty sweep --grid lr=1e-5..1e-2:log --search bayes --budget 20 --objective loss:min   a search, round by round
  sweep SLUG                    a sweep's tasks side by side: states, metrics, plots
  %%betty run --partition P --time MIN [--gpus N] [--env NAME] [--in x,y] [--out a,b]   the cell's Python as a job
  kernel --partition P --time MIN [--gpus N] [--env NAME] [--grace MIN] [--warn MIN]   the next cells run on a node
  kernel [--back | --here | --stop | --reattach]   back to this kernel, to the node again, end the allocation
  advise FILE  /  %%betty advise [--partition P] [--nodes N…]   when and where a script would start
  ask "PROMPT"  /  %%betty ask  ask Betty's agent (quote a question: IPython reads a trailing ? as help)
  wiki [search Q | show PAGE]   the project's wiki
  mode [off|propose|confirm|auto]   what Betty's agent may do without asking
  log [--limit N]               this notebook's actions (the action log)
  notify [list | add NAME KIND | test NAME | remove NAME]   word when your jobs end (e-mail, ntfy, Slack, …)
  approvals                     every approval waiting for you (automations' too, under a Betty server)
  where                         where Betty runs: the server's extension or this kernel
  version                       Betty's version
"""


@magics_class
class BettyMagics(SubmitCommands, GpuCommands, AgentCommands, WikiCommands, NotifyCommands, Magics):
    """``%betty …`` and ``%%betty …`` in a notebook: parse, call Betty, show the result."""

    @line_cell_magic
    def betty(self, line: str, cell: str | None = None) -> object:
        """Run one ``%betty`` command; returns its result so it flows into ``_``."""
        try:
            words = shlex.split(line)
            command, args = (words[0], words[1:]) if words else ("help", [])
            entry = self._commands().get(command)
            if entry is None:
                raise UsageError(f"unknown %betty command {command!r}; try `%betty help`")
            build, run = entry
            if command in _READ_NAMES and not {"-h", "--help"} & set(args):
                self._open_cluster_early()  # a first read logs in while its tool and Betty load
            parsed = build().parse_args(args)
            with cell_login.running():  # a cluster's login may ask under this cell
                return run(parsed, cell)
        except HelpShown:
            return None
        except (BettyError, ValueError) as error:
            print(f"betty: {error}", file=sys.stderr)
            return None

    def _commands(self) -> dict[str, Command]:
        commands: dict[str, Command] = {
            "help": (lambda: parser("help", "Betty's commands"), self._help),
            "version": (lambda: parser("version", "Betty's version"), self._version),
            "where": (lambda: parser("where", "where Betty runs for this notebook"), self._where_cmd),
            "clusters": (lambda: parser("clusters", "the configured clusters"), self._clusters),
            "use": (self._use_parser, self._use),
        }
        for read in READS:
            for name in read.magic:
                commands[name] = (self._read_parser(read, name), self._read_command(read))
        for more in (self.job_commands(), self.submit_commands(), self.gpu_commands(), self.agent_commands(),
                     self.wiki_commands(), self.notify_commands()):
            commands.update(more)
        return commands

    @staticmethod
    def _read_parser(read: ReadCommand, name: str) -> Callable[[], MagicParser]:
        """``%betty NAME``'s parser for a read of the table: its tool's options, then the notebook's own."""

        def face(made: argparse.ArgumentParser) -> None:
            add_face_options(made, read)

        return lambda: read_parser(read, name, face)

    def _read_command(self, read: ReadCommand) -> Callable[[argparse.Namespace, str | None], Any]:
        """A read of the table: the tool's arguments from the command line, checked, then shown."""
        show = self.shown(read)

        def run(args: argparse.Namespace, cell: str | None) -> Any:
            values = tool_args(read, args)
            check(read, values)  # a bad job id is one line, before anything runs on the cluster
            return show(values, args)

        return run

    @staticmethod
    def _help(args: argparse.Namespace, cell: str | None) -> None:
        print(_HELP, end="")

    @staticmethod
    def _version(args: argparse.Namespace, cell: str | None) -> str:
        return f"Betty {__version__}"

    def _where_cmd(self, args: argparse.Namespace, cell: str | None) -> str:
        return f"Betty runs in {self.connection.backend.where}"

    def _clusters(self, args: argparse.Namespace, cell: str | None) -> "pd.DataFrame":
        import pandas as pd  # lazy: pandas is heavy; `%load_ext` never needs it

        betty = self.connection
        rows = betty.backend.clusters()
        frame = pd.DataFrame(rows, columns=["name", "transport", "host", "default"])
        in_use = betty.cluster or next((r["name"] for r in rows if r.get("default")), None)
        frame["in_use"] = frame["name"] == in_use
        return frame

    @staticmethod
    def _use_parser() -> MagicParser:
        made = parser("use", "work on another configured cluster from now on (see `%betty clusters`)")
        made.add_argument("name", metavar="NAME")
        return made

    def _use(self, args: argparse.Namespace, cell: str | None) -> str:
        name = self.connection.use(args.name)
        print(f"Betty works on {name} now.")
        return name
