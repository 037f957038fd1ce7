"""The site's policy: what the research-computing center that runs Betty decides, and a person cannot loosen.

One JSON file, read once per process before the person's configuration (by
:func:`betty_jupyter.config.load_config`, which hands it to :class:`~betty_jupyter.config.BettyConfig`):

- ``/etc/betty/policy.json``, or the file a system-wide Jupyter configuration names with
  ``{"Betty": {"site_policy": "/path"}}`` (only a configuration file that is itself the site's:
  owned by root and not writable by the person);
- ``$BETTY_SITE_POLICY`` where the site has neither (a test, a personal install). Where the site
  has one, the variable may only name that same file: anything else is an error.

Without any of them there is no site policy and nothing is limited beyond Betty's own rules. A
file that is named but missing, unreadable, not JSON, holding an unknown field or a wrong value, or
that the person could have written (not owned by root or another account, or writable by them, or in
a folder they can write) is a :class:`~betty_jupyter.errors.ConfigError` naming the file: every face
then refuses to start, so a broken policy is never silently ignored.

The fields (every one optional; docs/deploy.md shows a whole file):

``modes``           the agent's modes a person may choose (of off, propose, confirm, auto)
``default_mode``    the mode a session starts in when the person chose none allowed (one of ``modes``)
``tools``           ``deny`` and ``ask`` lists of rules, as the person's own (``cluster_cancel``,
                    ``cluster_run(command=cat*)``): checked before the person's, in every mode, for
                    every face (a person's own clicks included)
``llm``             ``endpoints``: the model servers' URLs a session may talk to (a URL, or a prefix
                    ending at a ``/``); ``default``: a model setting like ``BettyConfig.llm``, under the
                    person's own
``readable_roots``  the only directories on a cluster Betty's file reads may be under: a profile's
                    roots are narrowed to them (a profile without roots gets the site's)
``limits``          ``gpu_hours``, ``nodes`` and ``wall_time`` a job Betty submits may ask for;
                    ``above``: what happens to a job above them (``refuse``, or ``second``: it runs once the
                    person and one of ``approvers`` approve it, the approver through ``approval_spool``,
                    :mod:`~betty_jupyter.agent.second_approver`)
``budgets``         each account's GPU-hours and/or CPU-hours a month (``{"lab": {"gpu_hours": 500}}``): a job's
                    card shows what it may cost against what the account used this month
``mail``            ``end_mail``: whether a submission may ask Slurm to mail the person when the job ends
``audit``           where every action-log record goes as well: ``directory`` (one append-only file
                    per person) and/or ``syslog`` (a syslog socket, ``/dev/log`` for journald)
``mcp``             false turns Betty's MCP face off (``/betty/mcp``, ``betty mcp``)

:class:`SitePolicy` is the one object every face consults: the approval policy holds it
(:class:`~betty_jupyter.agent.policy.ApprovalPolicy`), the gate asks it about each job and writes
its audit, the configuration narrows each profile with it, the MCP face asks whether it is on.
"""

from __future__ import annotations

import os
import posixpath
import re
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from ..errors import ConfigError, ScriptError, SiteRefusal
from ..json_text import parse_json
from .rules import Rules
from .vocabulary import MODES

DEFAULT_PATH = Path("/etc/betty/policy.json")
"""Where a site keeps its policy unless its Jupyter configuration names another file."""
ENV = "BETTY_SITE_POLICY"
"""The variable naming a policy file where the site has none of its own."""
MAX_BYTES = 256 * 1024
FIELDS = ("modes", "default_mode", "tools", "llm", "readable_roots", "limits", "audit", "mcp", "budgets", "mail")
ABOVE = ("refuse", "second")
"""What may happen to a job above a limit: refused, or run once a second, named approver approves it too."""
OPENAI_URL = "https://api.openai.com/v1"
MAX_AUDIT_LINE = 64 * 1024
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
"""A unix user's or a Slurm account's name."""
UNCOUNTED_GPU_OPTIONS = frozenset({"gpus-per-task", "gpus-per-socket", "tres-per-task", "tres-per-node",
                                   "tres-per-job", "tres-per-socket"})
"""GPU requests Betty does not count into GPU-hours: refused while a GPU-hours limit is set."""


@dataclass(frozen=True)
class JobLimits:
    """What one job Betty submits may ask for; None: no limit."""

    gpu_hours: float | None = None
    nodes: int | None = None
    wall_minutes: int | None = None
    wall_time: str | None = None
    """``wall_minutes`` as the site wrote it."""
    above: str = "refuse"
    approvers: tuple[str, ...] = ()
    """The unix users one of whom approves a job above the limits as well (``above: second``)."""
    approval_spool: Path | None = None
    """The shared folder where such a job's request waits for its approver's answer."""

    @property
    def any(self) -> bool:
        """Whether any limit is set."""
        return (self.gpu_hours, self.nodes, self.wall_minutes) != (None, None, None)

    def refusal(self, script_text: str) -> str | None:
        """Why a batch script asks for more than the site allows (one line naming the limit), or None.

        A script whose time Slurm would take from the partition (no ``--time``, or UNLIMITED) is
        refused while a wall-time or GPU-hours limit is set: the limit could not be checked.
        """
        # lazy: the script reader is the cluster layer's; only a job's card needs it
        from ..cluster.account_usage import max_nodes
        from ..cluster.jobs import array_task_count
        from ..cluster.sbatch import SbatchScript

        if not self.any or not script_text.startswith("#!"):
            return None
        try:
            script = SbatchScript.parse(script_text)
            minutes = script.time_minutes()
            gpus = script.gpu_request()
        except ScriptError as error:
            return f"the script cannot be checked against your site's limits: {str(error).splitlines()[0]}"
        nodes = max_nodes(script.get("nodes"))
        tasks = array_task_count(script.get("array") or "")
        if self.nodes is not None and nodes > self.nodes:
            return f"your site allows at most {self.nodes} node(s) per job (limits.nodes); this job asks for {nodes}"
        if minutes is None and (self.wall_minutes is not None or self.gpu_hours is not None):
            return ("your site limits each job's wall time (limits.wall_time, limits.gpu_hours); "
                    "give the script an #SBATCH --time")
        if self.wall_minutes is not None and minutes is not None and minutes > self.wall_minutes:
            return (f"your site allows at most {self.wall_time} of wall time per job (limits.wall_time); "
                    f"this job asks for {_clock(minutes)}")
        uncounted = sorted({d.option for d in script.directives} & UNCOUNTED_GPU_OPTIONS)
        if self.gpu_hours is not None and uncounted:
            return (f"your site limits each job's GPU-hours (limits.gpu_hours), counted from --gres, --gpus or "
                    f"--gpus-per-node; ask for the GPUs that way instead of --{uncounted[0]}")
        if self.gpu_hours is not None and gpus is not None and minutes is not None:
            hours = gpus[1] * nodes * tasks * minutes / 60
            if hours > self.gpu_hours:
                return (f"your site allows at most {self.gpu_hours:g} GPU-hours per job (limits.gpu_hours); this job "
                        f"asks for {hours:g} ({gpus[1]} GPU(s) × {nodes} node(s) × {tasks} task(s) × {_clock(minutes)})")
        return None


@dataclass(frozen=True)
class Audit:
    """Where every action-log record goes besides the workspace's own log."""

    directory: Path | None = None
    """One file per person, ``<login>.jsonl``, only ever appended to."""
    syslog: str | None = None
    """A syslog socket (``/dev/log``: syslog, and journald where it listens there)."""

    @property
    def kept(self) -> bool:
        """Whether the site keeps an audit at all."""
        return self.directory is not None or self.syslog is not None

    def write(self, line: str, login: str) -> None:
        """Append one record (a JSON line, already redacted) for ``login``; OSError when it cannot be written."""
        line = line.rstrip("\n")[:MAX_AUDIT_LINE]
        if self.directory is not None:
            handle = self._open(login)
            try:
                os.write(handle, (line + "\n").encode())
            finally:
                os.close(handle)
        if self.syslog is not None:
            message = f"<14>{time.strftime('%b %d %H:%M:%S')} betty[{os.getpid()}]: {line}".encode()
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self.syslog)
                sock.send(message)

    def unreachable(self, login: str) -> str | None:
        """Why a record for ``login`` could not be written now (its file cannot be opened for appending, the
        syslog socket refuses), or None; nothing is written."""
        try:
            if self.directory is not None:
                os.close(self._open(login))
            if self.syslog is not None:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                    sock.connect(self.syslog)
        except OSError as error:
            return (f"the site's audit ({self.describe()}) cannot be written: "
                    f"{error.strerror or type(error).__name__}; nothing ran")
        return None

    def _open(self, login: str) -> int:
        name = "".join(char if char.isalnum() or char in "._-" else "_" for char in login)[:64] or "unknown"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        return os.open(self.directory / f"{name}.jsonl", flags, 0o600)  # type: ignore[operator]

    def describe(self) -> str:
        """Where records go, in words."""
        places = [f"{self.directory}/<login>.jsonl (append-only)"] if self.directory else []
        places += [f"syslog at {self.syslog}"] if self.syslog else []
        return ", ".join(places) or "the workspace's action log only"


@dataclass(frozen=True)
class Budget:
    """What one account may use in a month; None: not limited."""

    gpu_hours: float | None = None
    cpu_hours: float | None = None

    def describe(self) -> str:
        """``500 GPU-hours, 20000 CPU-hours a month``."""
        given = [f"{hours:g} {unit}" for hours, unit in ((self.gpu_hours, "GPU-hours"), (self.cpu_hours, "CPU-hours"))
                 if hours is not None]
        return ", ".join(given) + " a month"


@dataclass(frozen=True)
class SitePolicy:
    """The site's decisions; ``SitePolicy()`` is no site policy at all (a personal install)."""

    source: Path | None = None
    """The file it was read from (None: there is none)."""
    modes: tuple[str, ...] = MODES
    default_mode: str | None = None
    rules: Rules = field(default_factory=Rules)
    llm_endpoints: tuple[str, ...] | None = None
    llm_default: Mapping[str, Any] = field(default_factory=dict)
    readable_roots: tuple[str, ...] | None = None
    limits: JobLimits = field(default_factory=JobLimits)
    audit: Audit = field(default_factory=Audit)
    mcp: bool = True
    budgets: Mapping[str, Budget] = field(default_factory=dict)
    """Each account's monthly budget."""
    end_mail: bool = False
    """Whether a submission may ask Slurm to mail the person when the job ends (``mail.end_mail``)."""
    given: frozenset[str] = frozenset()
    """The fields the file sets (the others are Betty's defaults)."""

    @property
    def where(self) -> str:
        """``your site's policy (/etc/betty/policy.json)``, for a refusal's line."""
        return f"your site's policy ({self.source})" if self.source else "Betty's defaults"

    # ----- modes --------------------------------------------------------------------------------
    def mode_refusal(self, mode: str) -> str | None:
        """Why a person may not choose ``mode`` here, or None."""
        if mode in self.modes:
            return None
        return (f"your site does not allow {mode} mode; it allows {', '.join(self.modes)} "
                f"(modes in {self.source})")

    def check_mode(self, mode: str) -> None:
        """SiteRefusal when the site does not allow ``mode``."""
        refusal = self.mode_refusal(mode)
        if refusal:
            raise SiteRefusal(refusal)

    def starting_mode(self, mode: str) -> str:
        """The mode a host starts sessions in: ``mode`` when the site allows it, else the site's default (a mode
        Betty does not know stays as it is, to be refused as such)."""
        if mode in self.modes or mode not in MODES:
            return mode
        return self.default_mode or self.modes[0]

    # ----- the chat model -----------------------------------------------------------------------
    def endpoint_refusal(self, llm: Mapping[str, Any], offline: bool = False) -> str | None:
        """Why the model setting ``llm`` (and its planner) may not be used here, or None. ``offline``: it is Betty's
        offline demo model, which talks to no server but Betty's own."""
        if self.llm_endpoints is None or not llm or offline:
            return None
        for setting in (llm, llm.get("planner") if isinstance(llm.get("planner"), Mapping) else None):
            if setting is None:
                continue
            url = str(setting.get("base_url") or OPENAI_URL)
            if not any(_url_under(url, allowed) for allowed in self.llm_endpoints):
                return (f"your site does not allow the model server {url[:120]}; it allows "
                        f"{', '.join(self.llm_endpoints) or 'none'} (llm.endpoints in {self.source})")
        return None

    def check_model(self, llm: Mapping[str, Any], offline: bool = False) -> None:
        """SiteRefusal when ``llm`` names a model server the site does not allow (:meth:`endpoint_refusal`)."""
        refusal = self.endpoint_refusal(llm, offline)
        if refusal:
            raise SiteRefusal(refusal)

    # ----- reads, jobs, the MCP face, the audit --------------------------------------------------
    def narrow_roots(self, roots: Sequence[str]) -> tuple[str, ...]:
        """A profile's readable roots within the site's: each root under a site root is kept, a site root
        under one of them replaces it, anything else is dropped; no roots at all get the site's."""
        if self.readable_roots is None:
            return tuple(roots)
        if not roots:
            return self.readable_roots
        kept: list[str] = []
        for root in (posixpath.normpath(r) for r in roots):
            for allowed in self.readable_roots:
                if _path_under(root, allowed):
                    kept.append(root)
                elif _path_under(allowed, root):
                    kept.append(allowed)
        return tuple(dict.fromkeys(kept))

    def job_refusal(self, script_text: str) -> str | None:
        """Why a job's batch script asks for more than the site allows, or None (:meth:`JobLimits.refusal`)."""
        return self.limits.refusal(script_text)

    def check_mcp(self) -> None:
        """SiteRefusal when the site turned Betty's MCP face off."""
        if not self.mcp:
            raise SiteRefusal(f"your site does not allow Betty's MCP face (mcp is false in {self.source})")

    def explain(self) -> list[tuple[str, str, str]]:
        """Each field of the policy in effect: (field, value in words, where it came from)."""
        def origin(name: str) -> str:
            return f"site file {self.source}" if name in self.given else "default"

        limits = self.limits
        rows = [
            ("modes", ", ".join(self.modes), origin("modes")),
            ("default_mode", self.default_mode or "-", origin("default_mode")),
            ("tools.deny", ", ".join(map(str, self.rules.deny)) or "-", origin("tools")),
            ("tools.ask", ", ".join(map(str, self.rules.ask)) or "-", origin("tools")),
            ("llm.endpoints", "any" if self.llm_endpoints is None else ", ".join(self.llm_endpoints) or "none",
             origin("llm")),
            ("readable_roots", "the profiles' own" if self.readable_roots is None else ", ".join(self.readable_roots),
             origin("readable_roots")),
            ("limits.gpu_hours", "none" if limits.gpu_hours is None else f"{limits.gpu_hours:g}", origin("limits")),
            ("limits.nodes", "none" if limits.nodes is None else str(limits.nodes), origin("limits")),
            ("limits.wall_time", limits.wall_time or "none", origin("limits")),
            ("limits.above", limits.above, origin("limits")),
            ("limits.approvers", ", ".join(limits.approvers) or "-", origin("limits")),
            ("limits.approval_spool", str(limits.approval_spool or "-"), origin("limits")),
            ("budgets", "; ".join(f"{account}: {budget.describe()}" for account, budget in self.budgets.items())
             or "none", origin("budgets")),
            ("mail.end_mail", "allowed" if self.end_mail else "not offered", origin("mail")),
            ("audit", self.audit.describe(), origin("audit")),
            ("mcp", "on" if self.mcp else "off", origin("mcp")),
        ]
        return rows

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the file, and each field's value and origin."""
        return {"source": str(self.source) if self.source else None,
                "fields": [{"field": name, "value": value, "origin": where} for name, value, where in self.explain()],
                "modes": list(self.modes), "mcp": self.mcp}


# ----- reading the file ------------------------------------------------------------------------------
def find_policy(named_by_site: str | None, environ: Mapping[str, str] | None = None,
                default: Path = DEFAULT_PATH) -> Path | None:
    """Which file is the site's policy: ``named_by_site`` (its Jupyter configuration), else ``default`` when it
    exists, else ``$BETTY_SITE_POLICY``; None when there is none. ConfigError when the variable names
    another file than the site's own."""
    env = os.environ if environ is None else environ
    site = Path(named_by_site) if named_by_site else (default if os.path.lexists(default) else None)
    wanted = env.get(ENV)
    if not wanted:
        return site
    if site is not None and os.path.realpath(wanted) != os.path.realpath(site):
        raise ConfigError(f"${ENV} names {wanted[:200]}, but this site's policy is {site}; unset {ENV}")
    return Path(wanted)


def load_policy(path: Path | None, uid: int | None = None, groups: Sequence[int] | None = None) -> SitePolicy:
    """The policy in ``path`` (no policy when None), checked to be the site's and read whole; ConfigError naming
    the file and what is wrong, whatever is wrong with it."""
    if path is None:
        return SitePolicy()
    text = read_trusted(path, uid, groups)
    try:
        data = parse_json(text)
    except ValueError as error:
        raise ConfigError(f"the site policy {path} is not JSON: {error}") from None
    return parse_policy(data, path)


def read_trusted(path: Path, uid: int | None = None, groups: Sequence[int] | None = None) -> str:
    """A site file's text, when it is the site's alone: a regular file owned by root or another account than
    the person's, that the person cannot write, in a folder they cannot write; ConfigError otherwise."""
    uid, member_of = _person(uid, groups)
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise ConfigError(f"cannot read the site policy {path}: {error.strerror or error}") from None
    try:
        found = os.fstat(handle)
        if not stat.S_ISREG(found.st_mode):
            raise ConfigError(f"the site policy {path} is not a regular file")
        real = Path(os.path.realpath(path))
        for what, place in (("file", found), ("folder", os.stat(real.parent))):
            problem = _writable_by(place, uid, member_of)
            if problem:
                raise ConfigError(f"the site policy {path} is not the site's alone: its {what} {problem}; "
                                  "it must be owned by root (or the site's admin) and not writable by you")
        if found.st_size > MAX_BYTES:
            raise ConfigError(f"the site policy {path} is larger than {MAX_BYTES // 1024} KiB")
        data = os.read(handle, MAX_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"cannot read the site policy {path}: {error.strerror or error}") from None
    finally:
        os.close(handle)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"the site policy {path} is not UTF-8 text") from None


def trusted_file(path: Path, uid: int | None = None, groups: Sequence[int] | None = None) -> bool:
    """Whether a configuration file is the site's alone (as :func:`read_trusted` checks), without reading it."""
    uid, member_of = _person(uid, groups)
    try:
        real = Path(os.path.realpath(path))
        return not any(_writable_by(os.stat(place), uid, member_of) for place in (real, real.parent))
    except OSError:
        return False


def _person(uid: int | None, groups: Sequence[int] | None) -> tuple[int, set[int]]:
    """Whose writes count: ``uid`` and ``groups``, by default this process's own."""
    return (os.geteuid() if uid is None else uid,
            set(os.getgroups()) | {os.getegid()} if groups is None else set(groups))


def _writable_by(found: os.stat_result, uid: int, groups: set[int]) -> str | None:
    """What lets the person ``uid`` change a file or folder, or None. Root owns everything it runs."""
    if uid == 0:
        return None
    sticky = stat.S_ISDIR(found.st_mode) and found.st_mode & stat.S_ISVTX
    if found.st_uid == uid:
        return "is owned by you"
    if found.st_mode & stat.S_IWGRP and found.st_gid in groups and not sticky:
        return "is writable by your group"
    if found.st_mode & stat.S_IWOTH and not sticky:
        return "is writable by everyone"
    return None


def parse_policy(data: Any, path: Path) -> SitePolicy:
    """A policy from the file's JSON, every field checked; ConfigError naming the file and the field."""
    def bad(name: str, what: str) -> ConfigError:
        return ConfigError(f"the site policy {path}: {name} {what}")

    if not isinstance(data, dict):
        raise ConfigError(f"the site policy {path} must be a JSON object of fields ({', '.join(FIELDS)})")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(f"the site policy {path} has unknown field(s) {', '.join(map(repr, unknown))[:200]}; "
                          f"the fields are {', '.join(FIELDS)}")
    found: dict[str, Any] = {"source": path, "given": frozenset(data)}
    if "modes" in data:
        modes = data["modes"]
        if not isinstance(modes, list) or not modes or not all(m in MODES for m in modes):
            raise bad("modes", f"is a non-empty list of {', '.join(MODES)}")
        found["modes"] = tuple(m for m in MODES if m in modes)
    if "default_mode" in data:
        if data["default_mode"] not in found.get("modes", MODES):
            raise bad("default_mode", "is one of the modes the policy allows")
        found["default_mode"] = data["default_mode"]
    if "tools" in data:
        tools = data["tools"]
        if not isinstance(tools, dict) or set(tools) - {"deny", "ask"}:
            raise bad("tools", "takes the lists deny and ask (a site's rules never allow more)")
        try:
            found["rules"] = Rules.from_config(tools)
        except ConfigError as error:
            raise bad("tools", f"has a bad rule: {error}") from None
    if "llm" in data:
        found.update(_llm(data["llm"], bad))
    if "readable_roots" in data:
        roots = data["readable_roots"]
        if not isinstance(roots, list) or not all(isinstance(r, str) and r.startswith("/") for r in roots):
            raise bad("readable_roots", "is a list of absolute directories")
        found["readable_roots"] = tuple(posixpath.normpath(r) for r in roots)
    if "limits" in data:
        found["limits"] = _limits(data["limits"], bad)
    if "audit" in data:
        found["audit"] = _audit(data["audit"], bad)
    if "mcp" in data:
        if not isinstance(data["mcp"], bool):
            raise bad("mcp", "is true or false")
        found["mcp"] = data["mcp"]
    if "budgets" in data:
        found["budgets"] = _budgets(data["budgets"], bad)
    if "mail" in data:
        mail = data["mail"]
        if not isinstance(mail, dict) or set(mail) - {"end_mail"} or not isinstance(mail.get("end_mail", False), bool):
            raise bad("mail", "takes end_mail (true or false)")
        found["end_mail"] = mail.get("end_mail", False)
    return SitePolicy(**found)


def _llm(llm: Any, bad: Any) -> dict[str, Any]:
    if not isinstance(llm, dict) or set(llm) - {"endpoints", "default"}:
        raise bad("llm", "takes endpoints (a list of URLs) and default (a model setting)")
    found: dict[str, Any] = {}
    if "endpoints" in llm:
        endpoints = llm["endpoints"]
        if not isinstance(endpoints, list) or not all(isinstance(u, str) and _is_url(u) for u in endpoints):
            raise bad("llm.endpoints", "is a list of http(s) URLs")
        found["llm_endpoints"] = tuple(u.rstrip("/") for u in endpoints)
    if "default" in llm:
        if not isinstance(llm["default"], dict):
            raise bad("llm.default", "is a model setting like BettyConfig.llm: {\"base_url\": …, \"model\": …}")
        found["llm_default"] = dict(llm["default"])
        default = SitePolicy(llm_endpoints=found.get("llm_endpoints"))
        refusal = default.endpoint_refusal(llm["default"])
        if refusal:
            raise bad("llm.default", "names a server llm.endpoints does not list")
    return found


def _limits(limits: Any, bad: Any) -> JobLimits:
    # lazy: the script reader is the cluster layer's; only a policy with limits needs it
    from ..cluster.sbatch import SbatchScript

    if not isinstance(limits, dict) or set(limits) - {"gpu_hours", "nodes", "wall_time", "above", "approvers",
                                                       "approval_spool"}:
        raise bad("limits", "takes gpu_hours, nodes, wall_time, above, approvers and approval_spool")
    hours, nodes, wall, above = (limits.get(name) for name in ("gpu_hours", "nodes", "wall_time", "above"))
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours <= 0):
        raise bad("limits.gpu_hours", "is a number of GPU-hours above 0")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise bad("limits.nodes", "is a whole number of nodes, 1 or more")
    minutes = None
    if wall is not None:
        try:
            minutes = SbatchScript.parse(f"#!/bin/bash\n#SBATCH --time={wall}\n").time_minutes() \
                if isinstance(wall, str) and "\n" not in wall else None
        except ScriptError:
            minutes = None
        if minutes is None:
            raise bad("limits.wall_time", "is a Slurm time such as 24:00:00 or 2-00:00:00")
    if above is not None and above not in ABOVE:
        raise bad("limits.above", f"is {' or '.join(ABOVE)}")
    approvers, spool = limits.get("approvers"), limits.get("approval_spool")
    if above == "second":
        if not isinstance(approvers, list) or not approvers or not all(
                isinstance(a, str) and _USER.match(a) for a in approvers):
            raise bad("limits.approvers", "is a non-empty list of unix user names (above: second)")
        if not isinstance(spool, str) or not spool.startswith("/"):
            raise bad("limits.approval_spool", "is the approvers' shared folder, by its absolute path (above: second)")
    elif approvers is not None or spool is not None:
        raise bad("limits.approvers", "and approval_spool are only for above: second")
    return JobLimits(gpu_hours=None if hours is None else float(hours), nodes=nodes, wall_minutes=minutes,
                     wall_time=wall, above=above or "refuse", approvers=tuple(approvers or ()),
                     approval_spool=Path(posixpath.normpath(spool)) if spool else None)


def _budgets(budgets: Any, bad: Any) -> dict[str, Budget]:
    if not isinstance(budgets, dict):
        raise bad("budgets", "maps each account to its month's gpu_hours and/or cpu_hours")
    found = {}
    for account, budget in budgets.items():
        if not _USER.match(account) or not isinstance(budget, dict) or not budget \
                or set(budget) - {"gpu_hours", "cpu_hours"} or not all(
                    not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0 for v in budget.values()):
            raise bad(f"budgets.{account[:40]}", "takes gpu_hours and/or cpu_hours, numbers above 0 a month")
        found[account] = Budget(**{name: float(value) for name, value in budget.items()})
    return found


def _audit(audit: Any, bad: Any) -> Audit:
    if not isinstance(audit, dict) or not audit or set(audit) - {"directory", "syslog"}:
        raise bad("audit", "takes directory (a folder) and/or syslog (a socket such as /dev/log)")
    directory, syslog = audit.get("directory"), audit.get("syslog")
    if directory is not None:
        if not isinstance(directory, str) or not directory.startswith("/") or not os.path.isdir(directory):
            raise bad("audit.directory", "is an existing folder, by its absolute path")
    if syslog is not None and (not isinstance(syslog, str) or not syslog.startswith("/")):
        raise bad("audit.syslog", "is a syslog socket's absolute path, such as /dev/log")
    return Audit(Path(directory) if directory else None, syslog)


def _clock(minutes: int) -> str:
    days, rest = divmod(minutes, 24 * 60)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


def _is_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _url_under(url: str, allowed: str) -> bool:
    """Whether ``url`` is ``allowed`` or below it (at a ``/``), compared on the scheme, host and port as written."""
    url, allowed = url.rstrip("/"), allowed.rstrip("/")
    try:
        got, want = urlsplit(url), urlsplit(allowed)
    except ValueError:
        return False
    if (got.scheme.lower(), (got.netloc or "").lower()) != (want.scheme.lower(), (want.netloc or "").lower()):
        return False
    return got.path == want.path or got.path.startswith(want.path + "/")


def _path_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")

