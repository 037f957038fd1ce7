"""``betty policy``: the site's policy in effect and where each value came from (the site's file, your
configuration, or Betty's default), with what it makes of your own settings (the chat model, each cluster's
readable roots)."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from .parser import Parser

if TYPE_CHECKING:
    from ..agent.rules import Rules
    from ..config import BettyConfig


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``betty policy``."""
    policy = commands.add_parser(
        "policy", help="the site's policy in effect, and where each value came from",
        description="Show what the site's policy (/etc/betty/policy.json) decides, what it makes of your own "
        "configuration, and where each value came from: the site's file, your configuration, or Betty's default. "
        "A broken policy file, or one you could write, is an error here as everywhere.")
    policy.add_argument("--json", action="store_true", help="print JSON")
    policy.set_defaults(run=_policy)
    approve = commands.add_parser(
        "approve", help="answer, as the site's second approver, a job above the site's limits",
        description="Read a request in the site's approval spool (limits.approval_spool), show what would run and "
        "why it needs you, and write your answer as a file of your own. Only the site's approvers may answer, "
        "never for a job of their own.")
    approve.add_argument("request", help="the request's file, <spool>/<id>.request.json, as the person's card names it")
    approve.add_argument("--deny", action="store_true", help="deny it instead")
    approve.add_argument("--yes", action="store_true", help="answer without asking to confirm")
    approve.set_defaults(run=_approve)


def rows(config: "BettyConfig", own: "BettyConfig") -> list[tuple[str, str, str]]:
    """The policy's fields, then the chat model's server and each cluster's readable roots as the site leaves them
    (``own``: the person's configuration without the site's policy)."""
    from ..agent.llm import uses_demo_model  # lazy: the model's settings; `betty --help` needs none of it

    site = config.site
    found = list(site.explain())
    url = str(config.llm.get("base_url") or ("" if not config.llm else "https://api.openai.com/v1"))
    if "base_url" in own.llm:
        origin = "your configuration"
    elif "base_url" in site.llm_default:
        origin = f"site file {site.source}"
    else:
        origin = "default"
    for kind in ("deny", "ask", "allow"):
        mine = getattr(own_rules(own), kind)
        if mine:
            found.append((f"rules.{kind}", ", ".join(map(str, mine)), "your configuration (under the site's tools)"))
    refusal = site.endpoint_refusal(config.llm, uses_demo_model(config.llm))
    found.append(("llm.base_url", (url or "none configured") + (f" (refused: {refusal})" if refusal else ""), origin))
    for name in config.cluster_names:
        mine, narrowed = own.profile(name).readable_roots, config.profile(name).readable_roots
        origin = "your configuration" if mine == narrowed else (
            f"site file {site.source}" if not mine else f"your configuration, narrowed by site file {site.source}")
        found.append((f"clusters.{name}.readable_roots", ", ".join(narrowed) or "none", origin))
    return found


def meter(config: "BettyConfig") -> list[tuple[str, str, str]]:
    """The cost meter: what each account the site budgets used this month, read from the default cluster's
    accounting (nothing without budgets or clusters)."""
    if not config.site.budgets or not config.cluster_names:
        return []
    # lazy: the Slurm client and the accounting reads; only a site with budgets needs them
    from ..agent.site_gate import account_use, use_words
    from ..cluster.slurm import SlurmClient
    from ..cluster.sync import run_sync

    profile = config.profile(None)
    transport = profile.open_transport()
    try:
        used = run_sync(account_use(config.site, SlurmClient(transport), profile.policy()))
    finally:
        run_sync(transport.close())
    return [(f"budgets.{use['account']}.used", use_words(use), f"sacct on {profile.name}") for use in used]


def own_rules(config: "BettyConfig") -> "Rules":
    """The person's own approval rules."""
    from ..agent.rules import Rules  # lazy: the rules' reader; `betty --help` needs none of it

    return Rules.from_config(config.rules)


def _approve(args: argparse.Namespace) -> int:
    """``betty approve REQUEST``: the approver's answer, after they saw what would run."""
    # lazy: the site policy and the spool's reader; `betty --help` needs neither
    from pathlib import Path
    from ..agent.second_approver import check_spool, read_request, write_answer
    from ..config import load_config
    from ..errors import UsageError
    from ..safe_text import terminal_line

    site = load_config().site
    if site.limits.above != "second":
        raise UsageError(f"{site.where} names no second approver (limits.above is {site.limits.above})")
    spool = check_spool(site.limits.approval_spool)
    path = Path(args.request)
    if os.path.realpath(path.parent) != os.path.realpath(spool):
        raise UsageError(f"{terminal_line(str(path))[:200]} is not in your site's approval spool {spool}")
    request = read_request(path)
    print(f"{terminal_line(request.requester)} asks: {terminal_line(request.title)}")
    print(f"it needs a second approver because {terminal_line(request.why)}")
    print(f"card digest {request.digest}; what would run:")
    for line in request.text.splitlines()[:400]:
        print("  " + terminal_line(line))
    decision = "denied" if args.deny else "approved"
    if not args.yes:
        try:
            said = input(f"{'deny' if args.deny else 'approve'} this job? [y/N] ")
        except EOFError:
            said = ""
        if said.strip().lower() not in ("y", "yes"):
            print("nothing answered")
            return 1
    answer = write_answer(spool, request, decision, site.limits.approvers)
    print(f"{decision}: {answer}")
    return 0


def _policy(args: argparse.Namespace) -> int:
    from ..agent.site import SitePolicy  # lazy: the site policy's reader; `betty --help` needs none of it
    from ..config import load_config  # lazy: traitlets and Jupyter's paths; `betty --help` needs neither

    config = load_config()
    own = load_config(site=SitePolicy())
    found = rows(config, own) + meter(config)
    if args.json:
        print(json.dumps({"source": str(config.site.source) if config.site.source else None,
                          "fields": [{"field": f, "value": v, "origin": o} for f, v, o in found]}, indent=2))
        return 0
    print(f"site policy: {config.site.source or 'none (no /etc/betty/policy.json): Betty defaults'}")
    width = max(len(field) for field, _, _ in found)
    for field, value, origin in found:
        print(f"  {field:<{width}}  {value}    [{origin}]")
    return 0
