"""``betty llm serve``: run your own chat model on your allocation and point Betty at it;
``betty llm check``: probe the configured model server and say what will and will not work.

The command shows the batch script, asks, submits it once, waits until the server answers,
writes Betty's ``llm`` setting and stays in the foreground: over SSH it carries the port
forward. Ctrl-C (or the terminal closing) cancels the job and puts the previous setting back.
The server has a key of its own, made for this job: it is in no text the command prints.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import BettyError, SiteRefusal, SlurmError
from .cluster import _confirm
from .parser import Parser

if TYPE_CHECKING:
    from ..cluster.profiles import ClusterProfile
    from ..llmserve import LLMSetting, Served, ServerJob

WATCH_SECONDS = 30.0


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty llm serve`` and ``betty llm check``."""
    llm = commands.add_parser("llm", help="the chat model: run your own on the cluster (`betty llm serve`), "
                              "check a server (`betty llm check`)")
    actions = llm.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    serve = actions.add_parser(
        "serve", help="run an OpenAI-compatible model server (vLLM) as a Slurm job and point Betty at it",
        description="Submit a vLLM server as a Slurm job (after you approve its script), wait until it answers, "
        "and point Betty's chat at it. Stays in the foreground (over SSH it carries the port forward); "
        "Ctrl-C cancels the job and puts your previous LLM setting back.")
    serve.add_argument("--model", required=True, metavar="PATH",
                       help="the model on the cluster: a directory, or a Hugging Face name the server can fetch")
    serve.add_argument("--partition", required=True, help="the partition to run in (e.g. gpu)")
    serve.add_argument("--gpus", type=int, default=1, help="GPUs for the server (default 1; 0 for none)")
    serve.add_argument("--time", default="02:00:00", help="how long it may run, HH:MM:SS (default 02:00:00)")
    serve.add_argument("--port", type=int, help="the server's port on its node (default: a free one)")
    serve.add_argument("--local-port", type=int, default=0,
                       help="over SSH: the port on this machine Betty uses (default: a free one)")
    serve.add_argument("--command", help="run this instead of vLLM; it runs in bash with $MODEL, $HOST, $PORT and "
                       "$VLLM_API_KEY set and must serve the OpenAI API on $HOST:$PORT, asking for that key")
    serve.add_argument("--tool-parser", default="hermes", metavar="NAME",
                       help="vLLM's tool-call parser for the model family: hermes (Qwen2.5, Hermes; the default), "
                       "llama3_json (Llama 3.1+), mistral (Mistral)")
    serve.add_argument("--name", default="betty-llm", help="the job's name (default betty-llm)")
    serve.add_argument("--timeout", type=float, default=1800.0,
                       help="seconds to wait for the job to start and the server to answer (default 1800)")
    serve.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    serve.add_argument("--yes", action="store_true", help="do not ask for approval")
    serve.set_defaults(run=_serve)
    check = actions.add_parser(
        "check", help="probe the configured model server and say what will and will not work with Betty",
        description="Ask the configured model server (or --base-url/--model) for its models, serving stack and "
        "context, send Betty's first request, and check tool calls and streaming: one line each, ok, "
        "warning or failure. Exits 0 when nothing failed, 1 when something did.")
    check.add_argument("--base-url", metavar="URL", help="check this server instead of llm.base_url "
                       "(the configured key goes to llm.base_url only: name this one's with --api-key-env)")
    check.add_argument("--model", metavar="NAME", help="check this model instead of llm.model")
    check.add_argument("--api-key-env", metavar="VAR", help="the variable holding this server's key")
    check.add_argument("--timeout", type=float, default=120.0, metavar="S",
                       help="seconds each probe may take (default 120; a server on CPUs may need more)")
    check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    # lazy: traitlets and the openai client; only `betty llm check` needs them
    from ..agent.llm import LLMSettings
    from ..config import load_config
    from ..llm_check import check_endpoint, key_source, summary
    from .parser import EXIT_USAGE

    config = load_config()
    llm = _checked_setting(dict(config.llm), args)
    problem = _usage_problem(llm, args)
    if problem:
        print(f"betty llm check: error: {problem} (see `betty llm check --help`)", file=sys.stderr)
        return EXIT_USAGE
    config.site.check_model(llm)  # never a probe of a server the site does not allow
    settings = LLMSettings.from_config(llm)
    context = llm.get("context_tokens")
    findings = asyncio.run(check_endpoint(
        settings, key_from=key_source(llm, os.environ),
        context_tokens=context if isinstance(context, int) and not isinstance(context, bool) else None,
        offer_all=llm.get("offer_tools") == "all", cluster=config.active_cluster or "cluster",
        timeout=args.timeout, on_progress=_progress))
    marks = _marks()
    for finding in findings:
        print(f"{marks[finding.status]} {finding.about}: {finding.line}")
    print(summary(findings), flush=True)
    return 1 if any(finding.status == "fail" for finding in findings) else 0


def _checked_setting(llm: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Betty's ``llm`` setting with the command's overrides; the configured key stays with the configured server."""
    if args.base_url and args.base_url.rstrip("/") != str(llm.get("base_url") or "").rstrip("/"):
        llm = {name: value for name, value in llm.items() if name not in ("api_key_env", "api_key_file")}
        llm["base_url"] = args.base_url
    if args.api_key_env:
        llm = {name: value for name, value in llm.items() if name != "api_key_file"}
        llm["api_key_env"] = args.api_key_env
    if args.model:
        llm["model"] = args.model
    return llm


def _usage_problem(llm: dict[str, Any], args: argparse.Namespace) -> str | None:
    """What makes the check impossible as asked, or None."""
    if not llm.get("model"):
        return "no model to check: set llm.model in Betty's configuration, or give --model"
    base_url = str(llm.get("base_url") or "https://api.openai.com/v1")
    if not base_url.startswith(("http://", "https://")):
        return f"{base_url[:80]!r} is not an http(s) address"
    if not 0 < args.timeout <= 3600:
        return "--timeout is seconds, more than 0 and at most 3600"
    return None


def _marks() -> dict[str, str]:
    """✓ ! ✗, or ASCII when the terminal's encoding cannot print them."""
    try:
        "✓✗".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return {"ok": "+", "warn": "!", "fail": "x"}
    return {"ok": "✓", "warn": "!", "fail": "✗"}


def _serve(args: argparse.Namespace) -> int:
    # lazy: the Slurm client, traitlets, paramiko; only `betty llm serve` needs them
    from ..cluster.slurm import SlurmClient
    from ..cluster.sync import Blocking, run_sync
    from ..config import load_config
    from ..llmserve import ServeRequest, forget_key, prepare

    # Until the server listens, each probe through the forward is a refused channel that paramiko
    # would log to the terminal; the wait itself reports progress.
    logging.getLogger("paramiko").addHandler(logging.NullHandler())
    request = ServeRequest(model=args.model, partition=args.partition, gpus=args.gpus, time=args.time,
                           port=args.port, command=args.command, name=args.name, tool_parser=args.tool_parser)
    config = load_config()
    if config.site.llm_endpoints is not None:
        raise SiteRefusal(f"your site allows only the model servers {', '.join(config.site.llm_endpoints) or 'none'} "
                          f"(llm.endpoints in {config.site.source}); betty llm serve would point Betty at another")
    profile = config.profile(args.cluster)
    transport = profile.open_transport()
    client = SlurmClient(transport, work_dir=profile.work_dir, job_env=profile.job_env)
    try:
        job = run_sync(prepare(client, request))
        refusal = config.site.job_refusal(job.script)
        if refusal is not None:
            raise SiteRefusal(refusal)
        print(job.script, flush=True)
        _confirm(f"Submit this model server to {profile.name} ({job.summary})?", args.yes,
                 f"the job's environment: {client.job_environment(job.script).describe()}")
        try:
            with _stopped_by_signals():
                job_id = _submit(Blocking(client), job)
                return _serve_job(args, Blocking(client), profile, job, job_id)
        finally:
            run_sync(forget_key(transport, job))
    finally:
        run_sync(transport.close())


def _submit(client: Any, job: "ServerJob") -> str:
    """Submit once; interrupted meanwhile, the submission still finishes so its job can be cancelled."""
    # lazy: paramiko; only `betty llm serve` needs it
    from ..cluster.sync import submit, wait
    from ..llmserve import submit_server

    submitting = submit(submit_server(client.target, job))
    try:
        return str(wait(submitting))
    except KeyboardInterrupt:
        job_id = str(wait(submitting))
        _progress(_stop(client, job_id) or f"job {job_id} had ended")
        raise


def _serve_job(args: argparse.Namespace, client: Any, profile: "ClusterProfile", job: "ServerJob",
               job_id: str) -> int:
    """Everything after ``sbatch``: wait, point Betty at the server, hold it until Ctrl-C or the job's end.

    One handler covers every moment from the job's id on, so an interruption at any point
    cancels the job and, once Betty's LLM setting was changed, puts the previous one back.
    """
    from ..llmserve import save_user_llm  # lazy: paramiko; only `betty llm serve` needs it

    served: Served | None = None
    setting: LLMSetting | None = None
    try:
        print(f"submitted job {job_id} to {profile.name}", flush=True)
        served = _wait(args, client, job, job_id)
        setting = save_user_llm(served.base_url, served.model, job.key)
        print(f"serving {served.model} at {served.base_url} (job {served.job_id} on {served.node}, "
              f"listening on {served.address}:{served.port})")
        print(f"Betty's LLM is now {served.model} at {served.base_url}: wrote {setting.path} "
              "(`betty ask` and Jupyter servers started from now on use it)")
        print(f"press Ctrl-C to stop: job {served.job_id} is cancelled and your previous LLM setting put back",
              flush=True)
        state = _until_the_job_ends(client, job_id)
        _progress(f"job {job_id} on {profile.name} ended {state}; {setting.restore()}")
        return 1
    except KeyboardInterrupt:
        stopped = _stop(client, job_id) or f"job {job_id} had ended"
        if setting is None:
            _progress(stopped)
            raise
        print(f"{stopped}; {setting.restore()}", flush=True)
        return 0
    finally:
        if served is not None:
            served.close()


def _wait(args: argparse.Namespace, client: Any, job: "ServerJob", job_id: str) -> "Served":
    """Wait until the server answers; a failure cancels the job (an interruption is the caller's to handle)."""
    # lazy: paramiko; only `betty llm serve` needs it
    from ..cluster.sync import submit, wait
    from ..llmserve import wait_until_serving

    waiting = submit(wait_until_serving(client.target, job, job_id, args.model, timeout=args.timeout,
                                        on_progress=_progress, local_port=args.local_port))
    try:
        return wait(waiting)
    except KeyboardInterrupt:
        waiting.cancel()
        raise
    except BaseException as error:
        waiting.cancel()
        stopped = _stop(client, job_id)
        if isinstance(error, BettyError) and stopped:
            raise SlurmError(f"{error}; {stopped}") from error
        if stopped:
            _progress(stopped)
        raise


def _until_the_job_ends(client: Any, job_id: str) -> str:
    """Watch the job until it ends; its final state."""
    from ..cluster.sync import sleep  # lazy: the background event loop; only `betty llm serve` needs it

    while True:
        sleep(WATCH_SECONDS)
        state = client.job(job_id).state
        if state.finished:
            return str(state.value)


def _stop(client: Any, job_id: str) -> str | None:
    """Cancel the job unless it has ended; says what it did (None when there was nothing to stop)."""
    try:
        if client.job(job_id).state.finished:
            return None
        client.cancel(job_id)
    except BettyError as error:
        return f"could not cancel job {job_id} ({error}); cancel it with `betty cancel {job_id}`"
    return f"cancelled job {job_id}"


def _progress(line: str) -> None:
    print(f"betty: {line}", file=sys.stderr, flush=True)


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (the terminal closing) stop the command as Ctrl-C does, so the job is cancelled."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
