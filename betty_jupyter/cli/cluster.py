"""``betty cluster|run|submit|sweep|cancel``: a cluster from the terminal (its reads are in :mod:`.reads`)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..agent.vocabulary import Decision
from ..errors import UsageError
from ..experiments.search_options import add_search_options, search_fields
from ..experiments.submit_options import add_run_options, run_fields
from ..json_text import parse_json
from ..safe_text import terminal_line
from .parser import Parser

if TYPE_CHECKING:
    from ..cluster.profiles import ClusterProfile
    from ..config import BettyConfig



def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the cluster commands."""
    which = Parser(add_help=False)
    which.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    as_json = Parser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON for scripts")
    _add_cluster_admin(commands, which, as_json)

    run = commands.add_parser("run", parents=[which], help="run one allowlisted read-only command on a cluster",
                              description="Run a read-only command from the allowlist, e.g. `betty run -- squeue --me`.")
    run.add_argument("words", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments")
    run.set_defaults(run=_run_command)

    submit = commands.add_parser("submit", parents=[which, as_json], help="submit a batch script (after checking it)")
    submit.add_argument("script", type=Path, metavar="FILE")
    submit.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    submit.add_argument("--goal", default="", help="what the run is for (goes into the experiment's page)")
    submit.add_argument("--slug", help="the experiment's name (default: the script's --job-name)")
    submit.add_argument("--dir", type=Path, default=Path("."), help="the project whose wiki records it (default: here)")
    submit.add_argument("--no-record", action="store_true", help="submit without writing an experiment record")
    add_run_options(submit)
    submit.add_argument("--gpu-estimate", type=Path, metavar="FILE",
                        help="the job's GPU memory estimate (`betty gpu estimate … --json > FILE`), shown and recorded")
    submit.set_defaults(run=_submit)

    sweep = commands.add_parser("sweep", parents=[which, as_json],
                                help="run a batch script at every point of a grid, as one job array (one approval)")
    sweep.add_argument("script", type=Path, metavar="FILE", help="the batch script; it reads each parameter as a "
                                                                 "shell variable ($lr, ${seed})")
    sweep.add_argument("--grid", nargs="+", required=True, metavar="NAME=V1,V2",
                       help="each parameter and its values, e.g. --grid lr=1e-4,3e-4,1e-3 seed=0,1,2")
    sweep.add_argument("--at-once", type=int, metavar="N", help="at most N tasks running at a time")
    sweep.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    sweep.add_argument("--goal", default="", help="what the sweep is for (goes into the experiment's page)")
    sweep.add_argument("--slug", help="the experiment's name (default: the script's --job-name)")
    sweep.add_argument("--dir", type=Path, default=Path("."), help="the project whose wiki records it (default: here)")
    add_search_options(sweep)
    sweep.set_defaults(run=_sweep)

    pipeline = commands.add_parser(
        "pipeline", parents=[which, as_json], help="submit batch scripts as one pipeline, each step after the one "
                                                  "before (or as --after says), one approval")
    pipeline.add_argument("scripts", type=Path, nargs="+", metavar="FILE",
                          help="each step's batch script, in order; a step is named after its file (train.sbatch: "
                               "train)")
    pipeline.add_argument("--after", nargs="+", default=[], metavar="STEP=A,B",
                          help="which earlier steps a step runs after (default: the one before; STEP= starts it "
                               "at once)")
    pipeline.add_argument("--aftercorr", nargs="+", default=[], metavar="STEP=A",
                          help="an array step that runs after an earlier array of its size task by task "
                               "(--dependency=aftercorr)")
    pipeline.add_argument("--singleton", nargs="+", default=[], metavar="STEP",
                          help="steps that wait until no other job of yours with their job name runs")
    pipeline.add_argument("--outputs", nargs="+", default=[], metavar="STEP=PATH,PATH",
                          help="files a step leaves for the steps after it, checked on the cluster when it ends: "
                               "a missing one stops the steps after it")
    pipeline.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    pipeline.add_argument("--goal", default="", help="what the pipeline is for (goes into the experiment's page)")
    pipeline.add_argument("--slug", help="the experiment's name (default: the first script's --job-name)")
    pipeline.add_argument("--dir", type=Path, default=Path("."), help="the project whose wiki records it "
                                                                       "(default: here)")
    pipeline.set_defaults(run=_pipeline)

    cancel = commands.add_parser("cancel", parents=[which], help="cancel a job")
    cancel.add_argument("job_id", metavar="JOBID")
    cancel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cancel.add_argument("--dir", type=Path, default=Path("."),
                        help="the project whose action log records it (default: here)")
    cancel.set_defaults(run=_cancel)

    extend = commands.add_parser("extend", parents=[which],
                                 help="give a running job Betty recorded more time: continuations queued behind it")
    extend.add_argument("job_id", metavar="JOBID")
    extend.add_argument("--segments", type=int, default=1, metavar="N",
                        help="how many continuation jobs to queue behind it (default 1)")
    extend.add_argument("--checkpoint-seconds", type=int, metavar="S",
                        help="tell the program to checkpoint S seconds before each continuation's limit")
    extend.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    extend.add_argument("--dir", type=Path, default=Path("."), help="the project that recorded it (default: here)")
    extend.set_defaults(run=_extend)


def _add_cluster_admin(commands: argparse._SubParsersAction, which: argparse.ArgumentParser,  # type: ignore[type-arg]
                       as_json: argparse.ArgumentParser) -> None:
    cluster = commands.add_parser("cluster", help="configured clusters: list, add, test, trust")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    actions.add_parser("list", parents=[as_json], help="the configured clusters").set_defaults(run=_cluster_list)
    add = actions.add_parser("add", help="add (or replace) a cluster profile in your Jupyter config")
    add.add_argument("name")
    add.add_argument("--host", help="ssh host alias (from your ssh config)")
    add.add_argument("--local", action="store_true", help="Jupyter runs on the cluster: no SSH")
    add.add_argument("--ssh-config", help="ssh config file (default ~/.ssh/config)")
    add.add_argument("--user", help="login name, when the ssh config does not say")
    add.add_argument("--readable-root", action="append", default=[], help="a directory `betty run` may read (repeatable)")
    add.add_argument("--work-dir", default="~/.betty", help="where Betty keeps scripts on the cluster")
    add.add_argument("--gss-auth", action="store_true", help="log in with Kerberos (GSSAPI)")
    add.add_argument("--openssh", action="store_true",
                     help="log in with the system ssh and your ssh config (second factor, security keys, "
                          "certificates, an open ControlMaster)")
    add.add_argument("--control-persist", default="30m",
                     help="with --openssh: how long a master connection Betty opened stays after its last use")
    add.add_argument("--default", action="store_true", help="make it the default cluster")
    add.set_defaults(run=_cluster_add)
    test = actions.add_parser("test", parents=[which], help="connect, run Slurm's commands, report latency")
    test.set_defaults(run=_cluster_test)
    trust = actions.add_parser("trust", parents=[which], help="record a cluster's SSH host key after you check it")
    trust.add_argument("--fingerprint", help="the SHA256:… fingerprint you confirmed with your admins")
    trust.set_defaults(run=_cluster_trust)


# ----- helpers -------------------------------------------------------------------------------
def _config() -> "BettyConfig":
    from ..config import load_config  # lazy: traitlets; `betty --help` never loads the configuration

    return load_config()


def _with_client(args: argparse.Namespace, work: Callable[[Any, "ClusterProfile"], int]) -> int:
    """Open the profile's transport, hand a blocking SlurmClient to ``work``, always close."""
    # lazy: the Slurm client; `betty --help` never loads it
    from ..cluster.slurm import SlurmClient
    from ..cluster.sync import Blocking, run_sync

    profile = _config().profile(args.cluster)
    transport = profile.open_transport()
    try:
        return work(Blocking(SlurmClient(transport, work_dir=profile.work_dir, job_env=profile.job_env,
                                             readable_roots=profile.readable_roots)), profile)
    finally:
        run_sync(transport.close())


def _confirm(question: str, assume_yes: bool, shown: str = "") -> None:
    """Ask ``question`` at the terminal (after printing ``shown``) unless ``assume_yes``; UsageError for no."""
    if assume_yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question.rstrip('?')} needs a confirmation; pass --yes when running without a terminal")
    if shown:
        print(shown, flush=True)
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("nothing was done")


# ----- commands ------------------------------------------------------------------------------
def _cluster_list(args: argparse.Namespace) -> int:
    config = _config()
    if args.json:
        print(json.dumps({"default": config.active_cluster, "clusters": config.clusters}, indent=2))
        return 0
    if not config.clusters:
        print("no cluster is configured; add one with `betty cluster add NAME --host ALIAS`")
        return 0
    for data in config.clusters:
        marker = "*" if data["name"] == config.active_cluster else " "
        where = data.get("host") or "this machine"
        print(f"{marker} {data['name']:<16} {data['transport']:<7} {where}")
    return 0


def _cluster_add(args: argparse.Namespace) -> int:
    # lazy: the profiles and traitlets; only `betty cluster add` needs them
    from ..cluster.profiles import ClusterProfile
    from ..config import save_user_cluster

    if args.local == bool(args.host):
        raise UsageError("give either --host ALIAS (over SSH) or --local (Jupyter runs on the cluster)")
    if args.openssh and (args.local or args.gss_auth):
        raise UsageError("--openssh logs in with your ssh config: it goes with --host, and Kerberos is set there")
    transport = "local" if args.local else "openssh" if args.openssh else "ssh"
    profile = ClusterProfile.from_dict({
        "name": args.name, "transport": transport, "host": args.host, "user": args.user,
        "ssh_config": args.ssh_config, "readable_roots": args.readable_root, "work_dir": args.work_dir,
        "gss_auth": args.gss_auth, "control_persist": args.control_persist,
    })
    path = save_user_cluster(profile, make_default=args.default)
    print(f"added cluster {profile.name!r} to {path}; check it with `betty cluster test --cluster {profile.name}`")
    return 0


def _cluster_test(args: argparse.Namespace) -> int:
    # lazy: the Slurm client; only `betty cluster test` needs it
    from ..cluster.commands import cluster_check
    from ..cluster.sync import run_sync

    print(run_sync(cluster_check(_config().profile(args.cluster))))
    return 0


def _cluster_trust(args: argparse.Namespace) -> int:
    # lazy: the SSH module; only `betty cluster trust` needs it
    from ..transport.ssh import presented_host_key, trust_host_key

    target = _config().profile(args.cluster).ssh_target()
    fingerprint = args.fingerprint
    if not fingerprint:
        key_type, presented, _ = presented_host_key(target)
        print(f"{target.known_hosts_name} presents {key_type} {presented}")
        _confirm("Is this the fingerprint your cluster's admins publish?", assume_yes=False)
        fingerprint = presented
    trust_host_key(target, fingerprint)
    print(f"trusted {target.known_hosts_name} ({fingerprint}) in {target.known_hosts}")
    return 0


def _run_command(args: argparse.Namespace) -> int:
    words = args.words[1:] if args.words[:1] == ["--"] else args.words
    if not words:
        raise UsageError("give the command after --, e.g. `betty run -- squeue --me`")

    def work(client: Any, profile: "ClusterProfile") -> int:
        from ..cluster.commands import run_allowed  # lazy: the Slurm commands; only `betty run` needs them

        from ..cluster.sync import run_sync  # lazy: the background event loop; only `betty run` needs it

        result = run_sync(run_allowed(client.target.transport, profile.policy(), words))
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.exit_code

    return _with_client(args, work)


def _submit(args: argparse.Namespace) -> int:
    """``betty submit``: the ``cluster_submit`` tool, its card answered on the terminal, recorded in a project."""
    from ..experiments.workspace import Workspace  # lazy: the workspace; only `betty submit` needs it

    text = _script_text(args.script)
    workspace = Workspace.at(args.dir)
    record = not args.no_record and workspace.wiki.is_dir()
    goal = args.goal.strip() or f"{args.script.name}, submitted with betty submit"
    asked: dict[str, object] = {"script": text, "goal": goal, "name": args.slug, "record": record}
    asked.update(run_fields(args))
    if args.gpu_estimate is not None:
        asked["gpu_estimate"] = _estimate_file(args.gpu_estimate)
    done = _as_person(args, workspace, "cluster_submit", asked, f"Submit {args.script}?")
    if record:
        _print_submitted(args, done.data.job_id, done.data.cluster, done.data.page)
        return 0
    if not args.no_record:
        print(f"note: not recorded — {args.dir.absolute()} has no wiki/ (run `betty init` there to keep "
              "records)", file=sys.stderr)
    _print_submitted(args, done.data["job_id"], done.data["cluster"], None)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    """``betty sweep``: the ``cluster_sweep`` tool, its one card answered on the terminal, recorded in a project."""
    from ..experiments.workspace import Workspace  # lazy: the workspace; only `betty submit`/`sweep` need it

    text = _script_text(args.script)
    workspace = Workspace.at(args.dir)
    if not workspace.wiki.is_dir():
        raise UsageError(f"{args.dir.absolute()} has no wiki/ to record the sweep in; run `betty init` there first")
    goal = args.goal.strip() or f"{args.script.name} over {' '.join(args.grid)}, run with betty sweep"
    done = _as_person(args, workspace, "cluster_sweep",
                      {"script": text, "grid": args.grid, "at_once": args.at_once, "goal": goal, "name": args.slug,
                       **search_fields(args)},
                      f"Run the sweep of {args.script}?")
    _print_submitted(args, done.data.job_id, done.data.cluster, done.data.page)
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    """``betty pipeline``: the ``cluster_pipeline`` tool, its one card (every step) answered on the terminal."""
    from ..experiments.workspace import Workspace  # lazy: the workspace; only `betty pipeline` needs it

    workspace = Workspace.at(args.dir)
    if not workspace.wiki.is_dir():
        raise UsageError(f"{args.dir.absolute()} has no wiki/ to record the pipeline in; run `betty init` there first")
    steps: list[dict[str, object]] = [{"name": path.stem, "script": _script_text(path)} for path in args.scripts]
    named = {str(step["name"]): step for step in steps}
    for option, key in (("--after", "after"), ("--aftercorr", "aftercorr"), ("--outputs", "outputs")):
        for given in getattr(args, key):
            step, equals, listed = given.partition("=")
            if not equals or step not in named:
                raise UsageError(f"{option} {given!r}: write STEP=A,B with STEP one of {', '.join(named)}")
            named[step][key] = [name for name in listed.split(",") if name]
    for step in args.singleton:
        if step not in named:
            raise UsageError(f"--singleton {step!r}: name one of the steps: {', '.join(named)}")
        named[step]["singleton"] = True
    goal = args.goal.strip() or " → ".join(named) + ", run with betty pipeline"
    done = _as_person(args, workspace, "cluster_pipeline", {"steps": steps, "goal": goal, "name": args.slug},
                      f"Submit the pipeline {' → '.join(named)}?")
    _print_submitted(args, done.data.job_id, done.data.cluster, done.data.page)
    if not args.json:
        for step in (done.data.chain or {}).get("steps") or []:
            print(f"step {terminal_line(str(step['name']))}: job {step['job_id']}")
    return 0


def _script_text(path: Path) -> str:
    """The batch script at ``path``; a one-line UsageError when it cannot be read."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc


def _estimate_file(path: Path) -> dict[str, Any]:
    """The JSON object ``betty gpu estimate --json`` wrote to ``path`` (at most 1 MB); a one-line UsageError when it
    is not one. Its fields are checked, and only the estimate's own kept, as any submission's estimate is."""
    try:
        with path.open("rb") as file:
            data = file.read(1_000_001)
        value = parse_json(data) if len(data) <= 1_000_000 else None
    except (OSError, ValueError) as exc:
        raise UsageError(f"--gpu-estimate: cannot read {path} as JSON: {str(exc).splitlines()[0][:200]}") from exc
    if not isinstance(value, dict) or "peak_gib" not in value:
        raise UsageError(f"--gpu-estimate: {path} is not `betty gpu estimate --json`'s output (no peak_gib in it)")
    return value


def _print_submitted(args: argparse.Namespace, ident: str, cluster: str, page: str | None) -> None:
    if args.json:
        print(json.dumps({"job_id": ident, "cluster": cluster, "page": page}))
    else:
        print(f"submitted job {ident} to {cluster}" + (f"; recorded in wiki/{page}" if page else ""))


def _as_person(args: argparse.Namespace, workspace: Any, tool: str, tool_args: dict[str, Any], question: str) -> Any:
    """A write run as the person at this terminal; without a terminal it needs ``--yes`` before anything runs."""
    if not args.yes and not sys.stdin.isatty():
        raise UsageError(f"{question.rstrip('?')} needs a confirmation; pass --yes when running without a terminal")
    return call_as_person_here(args, workspace, tool, tool_args, question, assume_yes=args.yes)


def call_as_person_here(args: argparse.Namespace, workspace: Any, tool: str, tool_args: dict[str, Any], question: str,
                        *, assume_yes: bool) -> Any:
    """Run ``tool`` as the person at this terminal: the same rules, card and action log line as in any face.

    A card (tier 2, or a rule of the person's that asks) shows its exact preview and is answered with
    y/N at the terminal, or approved by ``--yes``, which the person typed; without a terminal it is
    denied. A refusal or a denial is one line (UsageError).
    """
    # lazy: the agent (pydantic) and the terminal question; only a command that runs a tool needs them
    from ..agent.person import call_as_person
    from ..cluster.shared import closing_clusters
    from .terminal import typed_answer

    command = f"betty {args.command}"

    async def answer(request: Any) -> Decision:
        _show_card(request)
        if assume_yes:
            return Decision.APPROVED
        if not sys.stdin.isatty():
            print(f"betty: {question.rstrip('?')} needs a confirmation; run it at a terminal", file=sys.stderr)
            return Decision.DENIED
        reply = await typed_answer(f"{question} [y/N] ")
        return Decision.APPROVED if reply.strip().lower() in ("y", "yes") else Decision.DENIED

    outcome = asyncio.run(closing_clusters(call_as_person(workspace, _config(), tool, tool_args, cluster=args.cluster,
                                                          person=f"{getpass.getuser()} ({command})", answer=answer)))
    if not outcome.ok:
        # the person typed `betty why`, not the tool's name: its one line says what went wrong without it
        line = outcome.summary.splitlines()[0].removeprefix(f"{tool}: ") if outcome.summary else ""
        raise UsageError(line or f"{command}: nothing was done")
    return outcome


def _show_card(request: Any) -> None:
    """A card's preview on the terminal: its title, the exact text, and its facts (hostile text written out)."""
    preview = request.preview
    print(terminal_line(preview.title), file=sys.stderr)
    for line in preview.text.splitlines():
        print(f"  {terminal_line(line)}", file=sys.stderr)
    for key in ("environment", "command", "page", "injected"):
        if preview.details.get(key):
            print(f"{key}: {terminal_line(str(preview.details[key]))}", file=sys.stderr)
    for whole in ("chain", "pipeline", "commands"):  # a chain's or pipeline's card: the whole of it
        shown = preview.details.get(whole)
        if isinstance(shown, dict):
            for key, value in shown.items():
                print(f"{key}: {terminal_line(str(value))}", file=sys.stderr)
    if preview.details.get("the running job"):
        print(f"the running job: {terminal_line(str(preview.details['the running job']))}", file=sys.stderr)
    if preview.details.get("parameters"):  # a notebook run's cell of parameters, exactly as it is inserted
        print("parameters cell:", file=sys.stderr)
        for line in str(preview.details["parameters"]).splitlines():
            print(f"  {terminal_line(line)}", file=sys.stderr)
    sys.stderr.flush()


def _cancel(args: argparse.Namespace) -> int:
    """``betty cancel``: the ``cluster_cancel`` tool, its card (the job's name and state) answered on the terminal."""
    # lazy: the job parser and the workspace; only `betty cancel` needs them
    from ..cluster.jobs import job_id
    from ..experiments.workspace import Workspace

    ident = job_id(args.job_id)
    _as_person(args, Workspace.at(args.dir), "cluster_cancel", {"job_id": ident}, f"Cancel job {ident}?")
    print(f"cancelled job {ident}")
    return 0


def _extend(args: argparse.Namespace) -> int:
    """``betty extend``: the ``cluster_extend`` tool, its card (the whole chain) answered on the terminal."""
    # lazy: the job parser and the workspace; only `betty extend` needs them
    from ..cluster.jobs import job_id
    from ..experiments.workspace import Workspace

    ident = job_id(args.job_id)
    asked: dict[str, object] = {"job_id": ident, "segments": args.segments}
    if args.checkpoint_seconds is not None:
        asked["checkpoint_seconds"] = args.checkpoint_seconds
    done = _as_person(args, Workspace.at(args.dir), "cluster_extend", asked, f"Extend job {ident}?")
    print(terminal_line(done.summary))
    return 0
