"""Who decides whether a tool call runs: this code, from the mode, the tool's tier and the person's rules.

The model never decides. For each call :meth:`ApprovalPolicy.decide` returns one of
``run``, ``ask`` (a person approves the preview first), ``propose`` (the preview is returned
as a proposal, nothing runs) or ``deny``:

=========  ==================  ==============================  ==========
mode       tier 0              tier 1                          tier 2
=========  ==================  ==============================  ==========
off        deny                deny                            deny
propose    run                 propose                         propose
confirm    run                 ask, then run for the session   ask
auto       run                 run                             ask
=========  ==================  ==============================  ==========

The person's rules are three ordered lists of patterns, ``tool`` or ``tool(arg=glob)``
(``fnmatch`` on the argument's text; the tool name may be a glob too), checked deny → ask →
allow: a ``deny`` match always refuses; an ``ask`` match makes a tier 0 or 1 call ask every
time (in ``propose`` mode: propose); an ``allow`` match lets a tier 1 call run without asking.
No rule lowers tier 2: it always asks, whatever the mode or the rules.

The site's policy (:mod:`.site`) comes first and the person's rules cannot loosen it: a mode
the site does not allow is refused when the policy is made (a mode switch, a session's start),
the site's ``deny`` rules refuse before the person's, and the site's ``ask`` rules ask before
any ``allow`` of the person's is looked at, in every mode and for a person's own calls too.

Rules see a call's arguments in their canonical form (``Tool.rule_values``): for
``cluster_run`` the command as it will run, after the command policy's check (quotes gone,
paths absolute), so ``deny: cluster_run(command=cat*)`` holds however ``cat`` is spelt. The
reads a call makes for the person besides its own (a delegated task's resources, each as
the direct call that reads the same thing) are covered by the ``deny`` and ``ask`` rules too.

A call a person makes themselves (:meth:`ApprovalPolicy.decide_for_person`: a magic, a panel
button) ignores the mode: tier 0 and 1 run, tier 2 asks, the person's deny and ask rules apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel

from ..errors import ConfigError
from .rules import RULE_LISTS, Call, Rule, Rules
from .site import SitePolicy
from .vocabulary import APPROVING, MODES, Mode, Tier

__all__ = ["RULE_LISTS", "Action", "ApprovalPolicy", "Call", "Rule", "Rules", "Ruling", "SessionGrants"]

Action = Literal["run", "ask", "deny", "propose"]


@dataclass(frozen=True)
class Ruling:
    """What happens to one call, and why (one line a person reads in the action log)."""

    action: Action
    reason: str


@dataclass
class SessionGrants:
    """Tier 1 tools a person approved in this session: later calls of those tools run without asking."""

    tools: set[str] = field(default_factory=set)

    def granted(self, tool: str) -> bool:
        """Whether ``tool`` was approved in this session."""
        return tool in self.tools

    def grant(self, tool: str) -> None:
        """Let later tier 1 calls of ``tool`` run without asking (tier 2 ignores grants)."""
        self.tools.add(tool)

    def remember(self, tool: str, tier: Tier | int, decision: str) -> None:
        """Record a resolution: any approval of a tier 1 call grants its tool for the session; tier 2 never."""
        if tier == Tier.ONCE_PER_SESSION and decision in APPROVING:
            self.grant(tool)

    def revoke(self, tool: str | None = None) -> None:
        """Forget one tool's grant, or all of them."""
        if tool is None:
            self.tools.clear()
        else:
            self.tools.discard(tool)


class ApprovalPolicy:
    """The decision for each call, from the mode, the tier, the rules and the session's grants."""

    def __init__(self, mode: str = Mode.CONFIRM, rules: Rules | Mapping[str, Sequence[str]] | None = None,
                 site: SitePolicy | None = None) -> None:
        if mode not in MODES:
            raise ConfigError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        self.site = site or SitePolicy()
        self.site.check_mode(mode)  # SiteRefusal: "your site does not allow auto mode; …"
        self.mode = Mode(mode)
        self.rules = rules if isinstance(rules, Rules) else Rules.from_config(rules)

    def decide(self, tool: str, args: Mapping[str, Any] | BaseModel | None, tier: Tier | int,
               session: SessionGrants, reads: Sequence[Call] = ()) -> Ruling:
        """Run, ask, propose or deny this call of ``tool`` (``tier`` from ``Tool.tier_for(args)``).

        ``args`` are the call's canonical arguments (``Tool.rule_values``); ``reads`` the reads it
        makes on the person's behalf (``Tool.reads_for``), which deny and ask rules cover too.
        """
        values = _values(args)
        calls = [(tool, values), *reads]
        tier = Tier(tier)
        if self.mode == Mode.OFF:
            return Ruling("deny", "Betty's agent is off; switch the mode to propose, confirm or auto")
        denied = self._denies(calls)
        if denied:
            return denied
        ask = self._asks(calls, tier, session)
        if self.mode == Mode.PROPOSE:
            if ask is None and tier == Tier.AUTO:
                return Ruling("run", "tier 0: runs without asking")
            return Ruling("propose", "propose mode: nothing above tier 0 runs; here is what would be done")
        if ask is not None:
            return Ruling("ask", ask)
        return Ruling("run", self._runs_because(tool, values, tier, session))

    def decide_for_person(self, tool: str, args: Mapping[str, Any] | BaseModel | None, tier: Tier | int,
                          reads: Sequence[Call] = ()) -> Ruling:
        """A call a person typed themselves (a magic, a panel button): the mode is the agent's, not theirs.

        Their ``deny`` rules still refuse and their ``ask`` rules still ask (on the canonical
        arguments and on ``reads``, as in :meth:`decide`); tier 2 always shows its preview for
        approval; anything else runs, the person being its approver.
        """
        calls = [(tool, _values(args)), *reads]
        denied = self._denies(calls)
        if denied:
            return denied
        asked = self._ask_rule(calls)
        if asked:
            return Ruling("ask", asked)
        if Tier(tier) == Tier.ALWAYS_ASK:
            return Ruling("ask", "a person answers every call of this tool, even one they typed")
        return Ruling("run", "you asked for it")

    def _asks(self, calls: Sequence[Call], tier: Tier, session: SessionGrants) -> str | None:
        """Why a person must approve this call (``calls[0]``, with its reads), or None when it may run."""
        tool, values = calls[0]
        asked = self._ask_rule(calls)
        if asked:
            return asked
        if tier == Tier.ALWAYS_ASK:
            return "a person answers every call of this tool, in every mode"
        if tier == Tier.AUTO or self.mode == Mode.AUTO or Rules.first(self.rules.allow, tool, values):
            return None
        if session.granted(tool):
            return None
        return f"tier 1: asks once per session ({tool} not approved yet in this session)"

    def _ask_rule(self, calls: Sequence[Call]) -> str | None:
        """The site's ask rules, then the person's: why the call asks every time, or None."""
        site_asks = Rules.covering(self.site.rules.ask, calls)
        if site_asks:
            return f"your site's rule ask {site_asks} asks every time"
        asked = Rules.covering(self.rules.ask, calls)
        return f"your rule ask {asked} asks every time" if asked else None

    def _denies(self, calls: Sequence[Call]) -> Ruling | None:
        """The site's deny rules, then the person's: the refusal, or None."""
        site_denies = Rules.covering(self.site.rules.deny, calls)
        if site_denies:
            return Ruling("deny", f"your site does not allow it (its rule deny {site_denies}, in {self.site.source})")
        denied = Rules.covering(self.rules.deny, calls)
        if denied:
            return Ruling("deny", f"refused by your rule deny {denied}")
        return None

    def _runs_because(self, tool: str, values: Mapping[str, Any], tier: Tier, session: SessionGrants) -> str:
        if tier == Tier.AUTO:
            return "tier 0: runs without asking"
        if self.mode == Mode.AUTO:
            return "auto mode: tier 1 runs without asking"
        allowed = Rules.first(self.rules.allow, tool, values)
        if allowed:
            return f"allowed by your rule allow {allowed}"
        return f"tier 1: {tool} was approved earlier in this session"


def _values(args: Mapping[str, Any] | BaseModel | None) -> Mapping[str, Any]:
    if args is None:
        return {}
    if isinstance(args, BaseModel):
        return args.model_dump()
    return args
