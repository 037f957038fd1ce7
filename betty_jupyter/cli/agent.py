"""``betty ask``: Betty's agent in a terminal or a script.

On a terminal, approvals are asked interactively. With ``--json`` every event is one JSON
line on stdout and nothing is asked: ``--approve`` decides (never / tier1 / all).
A plan is printed step by step (each step's tier and preview) and answered once:
``--approve-plan`` grants every step exactly as previewed; without it the terminal asks.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..agent.vocabulary import MODES, Decision, DoneReason
from ..errors import UsageError
from .terminal import typed_answer

if TYPE_CHECKING:
    from ..agent.approvals import ApprovalBroker
    from ..agent.events import AnyEvent, ApprovalRequest, PlanStep


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty ask``."""
    ask = commands.add_parser("ask", help="ask Betty's agent (it acts through tools, with your approval)")
    ask.add_argument("prompt", metavar="PROMPT")
    ask.add_argument("--cluster", metavar="NAME", help="which configured cluster (default: the default one)")
    ask.add_argument("--mode", choices=MODES, default=None,
                     help="confirm: ask for tier 1 once and tier 2 always (default, or the site's default where its "
                     "policy does not allow confirm); auto: ask only for tier 2; propose: show previews, run nothing "
                     "above tier 0; off: no tools")
    ask.add_argument("--approve", choices=["ask", "never", "tier1", "all"], default=None,
                     help="how approvals are answered: ask on the terminal (default there), never, "
                     "tier1 (approve tier 1, deny tier 2), all (approve everything, tier 2 included)")
    ask.add_argument("--approve-plan", action="store_true",
                     help="grant every step of a plan exactly as previewed (other cards: as --approve says)")
    ask.add_argument("--session", metavar="ID", help="continue this session (its id is printed at the end)")
    ask.add_argument("--json", action="store_true", help="one JSON event per line on stdout; no prompts")
    ask.add_argument("--dir", type=Path, default=Path("."), help="the project directory (default: here)")
    ask.add_argument("--timeout", type=float, default=600.0, help="seconds an approval may wait (default 600)")
    ask.set_defaults(run=_ask)


def _ask(args: argparse.Namespace) -> int:
    approve = args.approve or ("never" if args.json or not sys.stdin.isatty() else "ask")
    if approve == "ask" and (args.json or not sys.stdin.isatty()):
        raise UsageError("--approve ask needs a terminal; use --approve never|tier1|all in scripts")
    return asyncio.run(_conversation(args, approve))


async def _conversation(args: argparse.Namespace, approve: str) -> int:
    # lazy: the agent (pydantic) and traitlets; only `betty agent` needs them
    from ..agent import events as ev
    from ..agent.approvals import ApprovalBroker
    from ..agent.plans import PLAN_TOOL
    from ..agent.session import SessionSpec, open_session, save
    from ..cluster.shared import close_clusters
    from ..config import load_config
    from ..experiments.workspace import Workspace

    workspace = Workspace.at(args.dir)
    broker = ApprovalBroker(timeout=args.timeout)
    pending: set[asyncio.Task[None]] = set()

    plans: dict[str, list[PlanStep]] = {}

    def on_event(event: "AnyEvent") -> None:
        _show(event, args.json)
        if isinstance(event, ev.PlanEvent):
            plans[event.payload.call_id] = event.payload.calls
        if isinstance(event, ev.ApprovalRequestEvent):
            steps = plans.get(event.payload.call_id, [])
            answer = _answer_plan(broker, event.payload, steps, approve, args.approve_plan) \
                if event.payload.tool == PLAN_TOOL else _answer(broker, event.payload, approve)
            task = asyncio.get_running_loop().create_task(answer)
            pending.add(task)
            task.add_done_callback(pending.discard)

    session = await open_session(workspace, load_config(), SessionSpec(
        session_id=args.session, cluster=args.cluster, mode=args.mode, broker=broker, listeners=(on_event,)))
    try:
        reason = await session.ask(args.prompt)
    finally:
        save(session, workspace)
        await close_clusters()
    if not args.json:
        print(f"\n(session {session.session_id}; continue it with --session {session.session_id})", file=sys.stderr)
    return 0 if reason == DoneReason.FINISHED else 1


async def _answer(broker: "ApprovalBroker", request: "ApprovalRequest", approve: str) -> None:
    if approve == "ask":
        answer = await typed_answer("Approve? [y]es / [s]ession / [N]o: ")
        decision = {"y": Decision.APPROVED, "yes": Decision.APPROVED,
                    "s": Decision.APPROVED_FOR_SESSION}.get(answer.strip().lower(), Decision.DENIED)
    elif approve == "all" or (approve == "tier1" and request.tier <= 1):
        decision = Decision.APPROVED
    else:
        decision = Decision.DENIED
    broker.respond(request.approval_id, decision, approver=f"{getpass.getuser()} (betty ask --approve {approve})")


async def _answer_plan(broker: "ApprovalBroker", request: "ApprovalRequest", steps: "list[PlanStep]", approve: str,
                       approve_plan: bool) -> None:
    """A plan: granted whole with ``--approve-plan`` (or ``--approve all``), else asked on the terminal, per plan
    or per step; any other answer denies it."""
    answer: dict[str, object] | None = None
    if approve_plan or approve == "all":
        decision = Decision.APPROVED
    elif approve == "ask":
        typed = (await typed_answer("Approve the plan? [y]es / [e]ach step / [N]o: ")).strip().lower()
        decision = {"y": Decision.APPROVED, "yes": Decision.APPROVED, "e": Decision.EDITED}.get(typed, Decision.DENIED)
        if decision == Decision.EDITED:
            answer = {"steps": [{"decision": await _step_answer(step)} for step in steps]}
    else:
        decision = Decision.DENIED
    how = "--approve-plan" if approve_plan else f"--approve {approve}"
    broker.respond(request.approval_id, decision, approver=f"{getpass.getuser()} (betty ask {how})", args=answer)


async def _step_answer(step: "PlanStep") -> str:
    typed = await typed_answer(f"  step {step.index} {step.tool}? [y]es / [N]o: ")
    return Decision.APPROVED if typed.strip().lower() in ("y", "yes") else Decision.DENIED


def _show(event: "AnyEvent", as_json: bool) -> None:
    if as_json:
        print(event.model_dump_json(), flush=True)
        return
    from ..agent import events as ev  # lazy: pydantic models; `betty --help` loads this module, not them
    from ..agent.plans import PLAN_TOOL  # lazy: as above

    match event:
        case ev.MessageDeltaEvent(payload=delta):
            sys.stdout.write(delta.text)
            sys.stdout.flush()
        case ev.ToolCallEvent(payload=call):
            print(f"\n→ {call.tool} {call.args}", flush=True)
        case ev.ToolResultEvent(payload=result):
            print(f"  {'✓' if result.ok else '✗'} {result.summary.splitlines()[0] if result.summary else ''}",
                  flush=True)
        case ev.PlanEvent(payload=plan):
            print(f"\n── plan: {plan.goal} ({len(plan.calls)} steps)", flush=True)
            for step in plan.calls:
                print(_step_text(step), flush=True)
        case ev.PlanStepEvent(payload=step):
            print(f"  step {step.index} {step.tool}: {step.status}" + (f" ({step.summary})" if step.summary else ""),
                  flush=True)
        case ev.ApprovalRequestEvent(payload=request) if request.tool == PLAN_TOOL:
            print(f"── the plan above needs your approval ({request.reason})", flush=True)
        case ev.ApprovalRequestEvent(payload=request):
            print(f"\n── {request.tool} (tier {request.tier}) needs your approval: {request.reason}\n"
                  f"{request.preview.title}\n{request.preview.text}\n──", flush=True)
        case ev.ErrorEvent(payload=error):
            print(f"\n[error] {error.message}", file=sys.stderr, flush=True)
        case ev.ReplanningEvent(payload=replanning):
            print(f"\n[replanning] {replanning.reason}", file=sys.stderr, flush=True)


def _step_text(step: "PlanStep") -> str:
    """One step of a plan as the terminal shows it: number, tool, tier, what it needs, its preview."""
    after = f" after step {', '.join(map(str, step.depends_on))}" if step.depends_on else ""
    head = f"{step.index}. {step.tool} (tier {step.tier}){after}"
    if step.preview is None:
        return f"{head}: {step.status}: {step.reason}"
    body = "\n".join(f"     {line}" for line in step.preview.text.splitlines())
    refused = f" — {step.status}: {step.reason}" if step.reason else ""
    return f"{head}: {step.preview.title}{refused}\n{body}"
