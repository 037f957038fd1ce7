"""What the site's policy adds to a job's card: what it may cost against its account's budget, and a second approver.

The gate (:mod:`.loop`) calls :func:`budget_fact` for every batch script it shows, and, for a job above the
site's limits where the site lets a second approver allow it (``limits.above: "second"``), opens a request
with :func:`open_second` before the card and waits for the approver with :func:`second_answer` once the person
approved it (:mod:`.second_approver`).
"""

from __future__ import annotations

import getpass
import logging
import os
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ApprovalError, BettyError, ScriptError
from .second_approver import SecondRequest, SecondState, check_spool, wait_for_answer, withdraw, write_request

if TYPE_CHECKING:
    from ..cluster.allowlist import CommandPolicy
    from ..cluster.profiles import ClusterProfile
    from ..cluster.account_usage import Cost
    from ..cluster.slurm import SlurmClient
    from .models import Preview
    from .site import SitePolicy
    from .tools.base import ToolContext

log = logging.getLogger(__name__)


async def budget_fact(site: "SitePolicy", ctx: "ToolContext", preview: "Preview") -> None:
    """Add ``budget`` to a batch script's card details: what the job may use against what its account used this
    month of the site's budget (nothing when the site sets no budget for it; a line saying why when it cannot be
    read or Slurm keeps it private)."""
    # lazy: the accounting reads; a session whose site sets no budget never loads them
    from ..cluster.account_usage import budget_line, job_cost, script_account
    from ..cluster.sbatch import SbatchScript

    if not site.budgets or preview.kind != "script" or not preview.text.startswith("#!"):
        return
    try:
        script = SbatchScript.parse(preview.text)
        cost = job_cost(script)
    except ScriptError:
        return
    account = script_account(script) or (next(iter(site.budgets)) if len(site.budgets) == 1 else None)
    if account is None or account not in site.budgets:
        preview.details["budget"] = ("give the script an #SBATCH --account to see its cost against your site's "
                                     f"budgets ({', '.join(site.budgets)})" if account is None else "")
        return
    budget = site.budgets[account]
    used, why = await account_used(ctx.slurm, ctx.policy(), account)
    if used is None:
        preview.details["budget"] = f"account {account}'s use this month is not known: {why}"
        return
    preview.details["budget"] = budget_line(cost, used, budget.gpu_hours, budget.cpu_hours, account)


async def account_used(slurm: "SlurmClient", policy: "CommandPolicy", account: str) -> "tuple[Cost | None, str]":
    """What ``account`` used this month, or None and why it is not known: accounting could not be read, or Slurm
    keeps other users' usage private from this login (``PrivateData``), where the read would give only the
    person's own share."""
    # lazy: the accounting reads; only a site with budgets needs them
    from ..cluster.account_usage import hidden_usage, month_start, parse_usage, usage_argv

    try:
        hidden = None if await slurm.login_uid() == 0 else hidden_usage(await slurm.config())
    except (BettyError, ValueError):
        hidden = None  # the setting cannot be read: the read's own answer stands
    if hidden is not None:
        return None, f"Slurm keeps other users' usage private here ({hidden}), so only your own share could be read"
    try:
        return parse_usage(await slurm.accounting(policy.check(usage_argv(account, month_start(
            datetime.now()))).argv)), ""
    except BettyError as error:
        return None, f"it could not be read: {error}"


async def account_use(site: "SitePolicy", slurm: "SlurmClient", policy: "CommandPolicy") -> list[dict[str, Any]]:
    """The cost meter: each budgeted account's use this month against its budget (the fields of
    :class:`~betty_jupyter.server.models.AccountUse`); an account whose use is not known says why (Slurm keeps it
    private, accounting could not be read)."""
    meter: list[dict[str, Any]] = []
    for account, budget in site.budgets.items():
        used, why = await account_used(slurm, policy, account)
        meter.append({"account": account, "known": used is not None, "why": why,
                      "gpu_hours_budget": budget.gpu_hours, "cpu_hours_budget": budget.cpu_hours,
                      "gpu_hours_used": None if used is None else round(used.gpu_hours, 2),
                      "cpu_hours_used": None if used is None else round(used.cpu_hours, 2)})
    return meter


def use_words(use: dict[str, Any]) -> str:
    """An account's row of the cost meter in words: ``41.0 of 500 GPU-hours this month``, or why it is not known."""
    if not use["known"]:
        return f"not known: {use['why']}"
    said = [f"{use['gpu_hours_used']:.1f} of {use['gpu_hours_budget']:g} GPU-hours"
            if use["gpu_hours_budget"] is not None else "",
            f"{use['cpu_hours_used']:.1f} of {use['cpu_hours_budget']:g} CPU-hours"
            if use["cpu_hours_budget"] is not None else ""]
    return ", ".join(s for s in said if s) + " this month"


async def policy_with_use(site: "SitePolicy", profile: "ClusterProfile", slurm: "SlurmClient") -> dict[str, Any]:
    """The policy's fields (:meth:`SitePolicy.as_dict`) followed by the cost meter read on ``profile``'s cluster,
    in words (``budgets.<account>.used``) and as figures (``usage``)."""
    view = site.as_dict()
    meter = await account_use(site, slurm, profile.policy())
    view["fields"] += [{"field": f"budgets.{use['account']}.used", "value": use_words(use),
                        "origin": f"sacct on {profile.name}"} for use in meter]
    view["usage"] = meter
    return view


def open_second(site: "SitePolicy", why: str, tool: str, args: dict[str, Any], preview: "Preview",
                digest: str) -> tuple[Path, SecondRequest]:
    """Write the request a second approver answers, and say on the card who may and how; SiteRefusal (naming why)
    when the site's spool is missing or could let anyone replace an answer."""
    limits = site.limits
    spool = check_spool(limits.approval_spool)
    request = SecondRequest(
        request_id=f"sec_{uuid.uuid4().hex[:16]}", requester=getpass.getuser(), requester_uid=os.geteuid(),
        why=why, title=preview.title, tool=tool, args=args, kind=preview.kind, text=preview.text,
        inputs=dict(preview.inputs), digest=digest, created=datetime.now().timestamp())
    path = write_request(spool, request)
    preview.details["second approver"] = (f"above your site's limits ({why}): it runs once you and one of "
                                          f"{', '.join(limits.approvers)} approve it; they answer with "
                                          f"`betty approve {path}`")
    return spool, request


async def second_answer(site: "SitePolicy", spool: Path, request: SecondRequest,
                        timeout: float) -> tuple[SecondState, str | None, str]:
    """How ``request`` ended, as ``(state, approver, why)``: ``approved`` (by ``approver``), ``denied`` (by
    ``approver``), or ``refused`` (an answer that did not count, or none in time), ``why`` in one line when it does
    not run; the request is withdrawn either way."""
    try:
        answer = await wait_for_answer(spool, request, site.limits.approvers, timeout)
    except ApprovalError as error:
        log.warning("a second approver's answer was refused: %s", error)
        return "refused", None, str(error)
    finally:
        withdraw(spool, request.request_id)
    if answer is None:
        return "refused", None, f"no second approver answered within {timeout:g} s"
    if answer.decision != "approved":
        return "denied", answer.approver, f"the second approver {answer.approver} denied it"
    return "approved", answer.approver, ""
