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
from .second_approver import SecondRequest, check_spool, wait_for_answer, withdraw, write_request

if TYPE_CHECKING:
    from ..cluster.allowlist import CommandPolicy
    from ..cluster.profiles import ClusterProfile
    from ..cluster.slurm import SlurmClient
    from .models import Preview
    from .site import SitePolicy
    from .tools.base import ToolContext

log = logging.getLogger(__name__)


async def budget_fact(site: "SitePolicy", ctx: "ToolContext", preview: "Preview") -> None:
    """Add ``budget`` to a batch script's card details: what the job may use against what its account used this
    month of the site's budget (nothing when the site sets no budget for it; a line saying why when it cannot be
    read)."""
    # lazy: the accounting reads; a session whose site sets no budget never loads them
    from ..cluster.account_usage import budget_line, job_cost, month_start, parse_usage, script_account, usage_argv
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
    try:
        argv = usage_argv(account, month_start(datetime.now()))
        used = parse_usage(await ctx.slurm.accounting(ctx.policy().check(argv).argv))
    except BettyError as error:
        preview.details["budget"] = f"account {account}'s use this month could not be read: {error}"
        return
    preview.details["budget"] = budget_line(cost, used, budget.gpu_hours, budget.cpu_hours, account)


async def account_use(site: "SitePolicy", slurm: "SlurmClient", policy: "CommandPolicy") -> list[tuple[str, str]]:
    """The cost meter: each budgeted account's use this month against its budget, as (field, words), such as
    ``("budgets.lab.used", "41 of 500 GPU-hours this month")``; a row says why where it cannot be read."""
    # lazy: the accounting reads; only a site with budgets needs them
    from ..cluster.account_usage import month_start, parse_usage, usage_argv

    rows = []
    for account, budget in site.budgets.items():
        try:
            used = parse_usage(await slurm.accounting(policy.check(usage_argv(account, month_start(
                datetime.now()))).argv))
        except BettyError as error:
            rows.append((f"budgets.{account}.used", f"could not be read: {error}"))
            continue
        said = [f"{used.gpu_hours:.1f} of {budget.gpu_hours:g} GPU-hours" if budget.gpu_hours is not None else "",
                f"{used.cpu_hours:.1f} of {budget.cpu_hours:g} CPU-hours" if budget.cpu_hours is not None else ""]
        rows.append((f"budgets.{account}.used", ", ".join(s for s in said if s) + " this month"))
    return rows


async def policy_with_use(site: "SitePolicy", profile: "ClusterProfile", slurm: "SlurmClient") -> dict[str, Any]:
    """The policy's fields (:meth:`SitePolicy.as_dict`) followed by the cost meter read on ``profile``'s cluster."""
    view = site.as_dict()
    view["fields"] += [{"field": name, "value": value, "origin": f"sacct on {profile.name}"}
                       for name, value in await account_use(site, slurm, profile.policy())]
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


async def second_answer(site: "SitePolicy", spool: Path, request: SecondRequest, timeout: float) -> tuple[str | None, str]:
    """The approver who approved ``request`` (None when nobody did) and, when nobody did, why; the request is
    withdrawn either way."""
    try:
        answer = await wait_for_answer(spool, request, site.limits.approvers, timeout)
    except ApprovalError as error:
        log.warning("a second approver's answer was refused: %s", error)
        return None, str(error)
    finally:
        withdraw(spool, request.request_id)
    if answer is None:
        return None, f"no second approver answered within {timeout:g} s"
    if answer.decision != "approved":
        return None, f"the second approver {answer.approver} denied it"
    return answer.approver, ""
