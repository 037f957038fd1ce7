"""When and where a drafted job would start: one ``sbatch --test-only`` per candidate placement, ranked.

A *candidate* is a partition, and for a GPU job one GPU type it offers (``sinfo``'s GRES), with an
optional node count, or one of the GPU estimate's placements with its headroom. For each, the
scheduler is asked once, through the read policy, with the script's request and the candidate's
partition, GPU type and nodes put in place of the script's own: ``sbatch --test-only … --wrap=true``
submits nothing. The questions go out in parallel (at most :attr:`PlacementAdvisor.parallel` at a
time) within one time budget, and each answer is kept for :data:`CACHE_SECONDS` (the same question
within a minute asks the scheduler nothing), so nothing here ever loops on the controller.

Slurm answers in prose on stderr; every version from 22.05 to 24.11 prints one of
:data:`START_FORMS` (``sbatch: Job 12 to start at 2026-11-25T04:12:00 using 2 processors on nodes
n1 in partition gpu``), which is read with a strict pattern; anything else is said to be unreadable,
never guessed at. A refusal (an unknown partition, a request over a limit) becomes one line.

Candidates are ranked by expected start (to the minute), then by fit (the GPU estimate's headroom,
more is better), then by cost where the site sets ``TRESBillingWeights`` on its partitions.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ...errors import BettyError, SlurmError
from ...gres import gpu_counts
from ...safe_text import terminal_line
from ..parsing import SEPARATOR
from ..policy import TEST_ONLY_OPTIONS, TEST_ONLY_SCRIPT, CommandPolicy
from ..sbatch import SbatchScript
from ..text_tables import aligned
from ..transport import CommandResult, Transport

CACHE_SECONDS = 60.0
"""How long one answer of the scheduler is kept: a second advice within a minute asks nothing."""

START_BUDGET = 20.0
"""Seconds an approval card's start estimate may take; the card is shown before it and never waits for it."""

TABLE_COLUMNS = ("rank", "place", "starts", "wait", "fit", "cost", "nodes", "why not")
"""The columns of :meth:`Advice.rows`, in the order every table shows them."""

NOW_SECONDS = 90
"""A start this close to the question is "now"."""

GPU_OPTIONS = ("gres", "gpus", "gpus-per-node", "gpus-per-task")
"""The script's GPU options; a GPU candidate replaces them with its own ``--gres=gpu:TYPE:N``."""

START_FORMS = (
    re.compile(r"^(?:sbatch: )?Job (?P<job>\d+) to start at (?P<start>\S+) using (?P<cpus>\d+) processors "
               r"on nodes (?P<nodes>\S+) in partition (?P<partition>\S+)$"),
    re.compile(r"^(?:sbatch: )?Job (?P<job>\d+) to start at (?P<start>\S+) on cluster (?P<cluster>\S+) using "
               r"(?P<cpus>\d+) processors on nodes (?P<nodes>\S+) in partition (?P<partition>\S+)$"),
)
"""The sentences ``sbatch --test-only`` prints when the job could run (Slurm 22.05 to 24.11; the second one where
the answer names a cluster of a federation or ``--clusters``)."""

_START_TIME = "%Y-%m-%dT%H:%M:%S"
_REFUSAL = re.compile(r"^(?:sbatch: error: |allocation failure: |sbatch: )(?P<reason>.+)$")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
_STARTS = ("%i", "%P", "%T", "%r", "%S", "%D", "%C")
_PER_GB = {"K": 1024.0**2, "M": 1024.0, "G": 1.0, "T": 1 / 1024}


@dataclass(frozen=True)
class Candidate:
    """One place a job could run: a partition, a GPU type it offers, a node count; the GPU estimate's headroom."""

    partition: str
    gpu_type: str | None = None
    nodes: int | None = None
    headroom_gib: float | None = None
    """GiB left per GPU by the GPU estimate (negative: the job does not fit); None when no estimate was given."""

    def __post_init__(self) -> None:
        for what, name in (("partition", self.partition), ("GPU type", self.gpu_type)):
            if name is not None and not _PLAIN_NAME.fullmatch(name):
                raise SlurmError(f"{what} {name[:40]!r} has characters Slurm names never use; "
                                 "use letters, digits and . _ + -")
        if self.nodes is not None and not 1 <= self.nodes <= 100_000:
            raise SlurmError(f"a node count must be between 1 and 100000, not {self.nodes}")

    @property
    def label(self) -> str:
        """``gpu (a100)``, ``gpu (a100, 2 nodes)``, ``cpu``: how a person names the place."""
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}" if self.nodes else None
        inside = [part for part in (self.gpu_type, nodes) if part]
        return f"{self.partition} ({', '.join(inside)})" if inside else self.partition


@dataclass(frozen=True)
class StartEstimate:
    """The scheduler's answer for one candidate: when and where it would start, or why it would not run."""

    candidate: Candidate
    argv: tuple[str, ...]
    start: datetime | None = None
    nodes: str | None = None
    processors: int | None = None
    reason: str | None = None
    """One line saying why there is no start time (Slurm's refusal, an answer Betty cannot read, no answer in time)."""
    cost: float | None = None
    """Billing units per hour from the partition's ``TRESBillingWeights`` (None where the site sets none)."""
    cached: bool = False

    @property
    def ok(self) -> bool:
        """Whether the scheduler gave a start time."""
        return self.start is not None

    def wait_minutes(self, now: datetime) -> int | None:
        """Whole minutes from ``now`` to the start, None without a start; 0 when it could start now (within
        :data:`NOW_SECONDS`: candidates asked together are answered a second or two apart)."""
        if self.start is None:
            return None
        seconds = (self.start - now).total_seconds()
        return 0 if seconds <= NOW_SECONDS else math.ceil(seconds / 60)

    def as_dict(self, now: datetime) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "label": self.candidate.label, "partition": self.candidate.partition, "gpu_type": self.candidate.gpu_type,
            "nodes_asked": self.candidate.nodes, "headroom_gib": self.candidate.headroom_gib,
            "start": self.start.strftime(_START_TIME) if self.start else None, "wait_minutes": self.wait_minutes(now),
            "nodes": self.nodes, "processors": self.processors, "reason": self.reason, "cost": self.cost,
            "cached": self.cached, "command": " ".join(self.argv),
        }


@dataclass(frozen=True)
class PendingStart:
    """One of the person's pending jobs and when Slurm expects it to start (``squeue --start``)."""

    job_id: str
    partition: str
    state: str
    reason: str
    start: datetime | None
    nodes: str
    cpus: str


@dataclass
class Advice:
    """Every candidate's estimate, best first, and how many questions reached the scheduler."""

    estimates: list[StartEstimate]
    asked_at: datetime
    scheduler_calls: int

    @property
    def best(self) -> StartEstimate | None:
        """The first candidate with a start time, or None."""
        return next((estimate for estimate in self.estimates if estimate.ok), None)

    def summary(self, limit: int = 3) -> str:
        """``starts ~in 12 min on gpu (a100); ~3 h on gpu (h100), cpu (h100)``: places that start alike share their
        wait, the first ``limit`` waits shown; why not, when no candidate can start."""
        waits: dict[str, list[str]] = {}
        for estimate in self.estimates:
            if estimate.ok:
                waits.setdefault(wait_text(estimate.wait_minutes(self.asked_at)), []).append(estimate.candidate.label)
        if not waits:
            first = self.estimates[0].reason if self.estimates else "no candidate placements"
            return f"no start estimate: {first}"
        return "starts " + "; ".join(f"{wait} on {', '.join(labels)}" for wait, labels in list(waits.items())[:limit])

    def rows(self) -> list[dict[str, str]]:
        """One row of text per candidate, best first, as every table shows them (cells are not yet escaped)."""
        return [estimate_row(number, estimate.as_dict(self.asked_at)) for number, estimate in enumerate(self.estimates, 1)]

    def table(self) -> str:
        """:meth:`rows` as aligned text, each cell on one line with its control characters written out."""
        rows = self.rows()
        return aligned(list(TABLE_COLUMNS), [[terminal_line(row[column]) for column in TABLE_COLUMNS] for row in rows])

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {"asked_at": self.asked_at.strftime(_START_TIME), "scheduler_calls": self.scheduler_calls,
                "summary": self.summary(), "estimates": [estimate.as_dict(self.asked_at) for estimate in self.estimates]}


def estimate_row(number: int, estimate: Mapping[str, Any]) -> dict[str, str]:
    """One estimate in its JSON form (:meth:`StartEstimate.as_dict`) as the text cells of :data:`TABLE_COLUMNS`."""
    headroom, cost, start = estimate.get("headroom_gib"), estimate.get("cost"), estimate.get("start")
    return {
        "rank": str(number) if start else "-", "place": str(estimate.get("label", "")),
        "starts": str(start or "").replace("T", " ")[:16], "wait": wait_text(estimate.get("wait_minutes")) if start else "",
        "fit": f"{headroom:+.1f} GiB" if isinstance(headroom, (int, float)) else "",
        "cost": f"{cost:g}/h" if isinstance(cost, (int, float)) else "", "nodes": str(estimate.get("nodes") or ""),
        "why not": str(estimate.get("reason") or ""),
    }


def wait_text(minutes: int | None) -> str:
    """``now``, ``~in 12 min``, ``~3 h``, ``~2 days``: a wait as a person says it."""
    if minutes is None:
        return "unknown"
    if minutes <= 1:
        return "now"
    if minutes < 90:
        return f"~in {minutes} min"
    if minutes < 48 * 60:
        return f"~{round(minutes / 60)} h"
    return f"~{round(minutes / (24 * 60))} days"


# ----- reading what Slurm printed --------------------------------------------------------------------------------------

def read_start(candidate: Candidate, result: CommandResult) -> StartEstimate:
    """Slurm's answer to one ``sbatch --test-only`` as a :class:`StartEstimate` (a refusal as its one-line reason)."""
    argv = tuple(result.argv)
    lines = [line.strip() for line in (result.stderr + "\n" + result.stdout).splitlines() if line.strip()]
    matches = [found for line in lines for form in START_FORMS if (found := form.match(line))]
    if result.ok and len(matches) == 1:
        found = matches[0]
        try:
            start = datetime.strptime(found["start"], _START_TIME)
        except ValueError:
            return StartEstimate(candidate, argv, reason=f"Slurm gave the start time {found['start'][:40]!r} in a "
                                 f"form Betty does not read (expected {_START_TIME}; is SLURM_TIME_FORMAT set?)")
        return StartEstimate(candidate, argv, start=start, nodes=found["nodes"], processors=int(found["cpus"]))
    if result.ok:
        first = lines[0][:120] if lines else "nothing"
        return StartEstimate(candidate, argv, reason=f"Slurm's answer did not read as a start estimate: {first!r}")
    return StartEstimate(candidate, argv, reason=refusal_reason(lines, result.exit_code))


def refusal_reason(lines: Sequence[str], exit_code: int) -> str:
    """One line from a refused ``--test-only``: Slurm's most specific words (``sbatch: error:`` before
    ``allocation failure:``), without its prefixes."""
    specific = [line for line in lines if line.startswith("sbatch: error: ")]
    reasons = [found["reason"].strip() for line in specific + list(lines) if (found := _REFUSAL.match(line))]
    text = reasons[0] if reasons else (lines[0] if lines else f"sbatch exited {exit_code} without a word")
    return f"Slurm refused: {text[:200]}"


def read_pending(text: str) -> list[PendingStart]:
    """``squeue --start`` rows in Betty's fixed format (fields split at Betty's own separator)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(SEPARATOR)
        if len(fields) != len(_STARTS):
            raise SlurmError(f"squeue --start printed a row of {len(fields)} fields, not {len(_STARTS)}; "
                             "Betty reads nothing it cannot read exactly")
        job, partition, state, reason, start, nodes, cpus = (field.strip() for field in fields)
        rows.append(PendingStart(job, partition, state, reason, _start_time(start), nodes, cpus))
    return rows


def _start_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, _START_TIME)
    except ValueError:
        return None  # N/A, Unknown: Slurm has no estimate yet


def read_billing_weights(text: str) -> dict[str, dict[str, float]]:
    """Each partition's ``TRESBillingWeights`` from ``scontrol -o show partition`` (one record a line, read field by
    field); a partition without weights is absent."""
    weights: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        fields = dict(word.partition("=")[::2] for word in line.split() if "=" in word)
        name, value = fields.get("PartitionName"), fields.get("TRESBillingWeights")
        if name and value:
            weights[name] = _weights(value)
    return weights


def _weights(text: str) -> dict[str, float]:
    """``CPU=1.0,Mem=0.25G,GRES/gpu:a100=4`` as {tres: weight per unit}, memory per GB (Slurm reads a memory weight
    without a unit as per MB)."""
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        number = re.fullmatch(r"(\d*\.?\d+)([KMGT]?)", value.strip())
        if name.strip() and number:
            tres = name.strip().lower()
            per_gb = _PER_GB[number[2] or "M"] if tres == "mem" else 1.0
            weights[tres] = float(number[1]) * per_gb
    return weights


# ----- asking Slurm -----------------------------------------------------------------------------------------------------

def estimate_argv(script: SbatchScript, candidate: Candidate) -> list[str]:
    """``sbatch --test-only`` with the script's request and the candidate's partition, GPU type and nodes in its place.

    Only the options that shape where and when a job runs are passed (:data:`TEST_ONLY_OPTIONS`), each as
    ``--NAME=VALUE``, and the script itself never leaves this machine: ``--wrap=true`` stands for it.
    """
    options: dict[str, str | None] = {}
    for directive in script.directives:
        if directive.option in TEST_ONLY_OPTIONS or directive.option == "exclusive":
            options[directive.option] = directive.value
    options["partition"] = candidate.partition
    if candidate.nodes is not None:
        options["nodes"] = str(candidate.nodes)
    request = script.gpu_request()
    if candidate.gpu_type is not None:
        for option in GPU_OPTIONS:
            options.pop(option, None)
        options["gres"] = f"gpu:{candidate.gpu_type}:{request[1] if request else 1}"
    words = ["--exclusive" if name == "exclusive" else f"--{name}={value}" for name, value in options.items()
             if name == "exclusive" or value]
    return ["sbatch", "--test-only", *words, TEST_ONLY_SCRIPT]


@dataclass
class _Answer:
    result: CommandResult
    at: float


@dataclass
class StartCache:
    """Answers of the scheduler by the exact question asked, each kept for :data:`CACHE_SECONDS`."""

    seconds: float = CACHE_SECONDS
    answers: dict[tuple[str, ...], _Answer] = field(default_factory=dict)

    def get(self, argv: Sequence[str], now: float) -> CommandResult | None:
        """The answer to ``argv`` if it is younger than :attr:`seconds`."""
        answer = self.answers.get(tuple(argv))
        if answer is None or now - answer.at >= self.seconds:
            return None
        return answer.result

    def put(self, argv: Sequence[str], result: CommandResult, now: float) -> None:
        """Keep ``result``; answers older than :attr:`seconds` are dropped."""
        self.answers = {key: kept for key, kept in self.answers.items() if now - kept.at < self.seconds}
        self.answers[tuple(argv)] = _Answer(result, now)


_CACHES: "weakref.WeakKeyDictionary[Transport, StartCache]" = weakref.WeakKeyDictionary()


def cache_for(transport: Transport) -> StartCache:
    """The one cache of a cluster connection: every advisor on ``transport`` shares what the scheduler said."""
    cache = _CACHES.get(transport)
    if cache is None:
        cache = _CACHES[transport] = StartCache()
    return cache


class PlacementAdvisor:
    """Start estimates for a drafted script over candidate placements, through ``transport`` and the read policy.

    ``parallel`` questions at a time, all within ``budget`` seconds (a candidate left unanswered says so);
    :attr:`scheduler_calls` counts the questions that reached the scheduler (cached answers are not asked again).
    """

    def __init__(self, transport: Transport, *, parallel: int = 4, budget: float = 30.0,
                 cache: StartCache | None = None, policy: CommandPolicy | None = None) -> None:
        self.transport = transport
        self.policy = policy or CommandPolicy()
        self.parallel = max(1, parallel)
        self.budget = budget
        self.cache = cache if cache is not None else cache_for(transport)
        self.scheduler_calls = 0

    async def advise(self, script: SbatchScript, candidates: Sequence[Candidate]) -> Advice:
        """Every candidate's start estimate, ranked (see the module's docstring), with billing costs where set."""
        asked_at = datetime.now().replace(microsecond=0)
        calls = self.scheduler_calls
        estimates = await self.estimates(script, candidates)
        weights = await self.billing_weights() if estimates else {}
        if weights:
            estimates = [replace(estimate, cost=billing_rate(script, estimate.candidate, weights)) for estimate in estimates]
        return Advice(rank(estimates, asked_at), asked_at, self.scheduler_calls - calls)

    async def estimates(self, script: SbatchScript, candidates: Sequence[Candidate]) -> list[StartEstimate]:
        """One :class:`StartEstimate` per candidate, in the order given (unranked)."""
        gate = asyncio.Semaphore(self.parallel)
        deadline = time.monotonic() + self.budget
        unique = list(dict.fromkeys(candidates))
        return list(await asyncio.gather(*(self._estimate(script, candidate, gate, deadline) for candidate in unique)))

    async def _estimate(self, script: SbatchScript, candidate: Candidate, gate: asyncio.Semaphore,
                        deadline: float) -> StartEstimate:
        argv = estimate_argv(script, candidate)
        try:
            allowed = self.policy.check(argv)
        except BettyError as refusal:
            return StartEstimate(candidate, tuple(argv), reason=str(refusal))
        cached = self.cache.get(allowed.argv, time.monotonic())
        if cached is not None:
            return replace(read_start(candidate, cached), cached=True)
        async with gate:
            left = deadline - time.monotonic()
            if left <= 0:
                return StartEstimate(candidate, allowed.argv, reason=f"no answer within {self.budget:.0f} s; ask again")
            try:
                self.scheduler_calls += 1
                result = await asyncio.wait_for(self.transport.run(allowed.argv, left), left)
            except asyncio.TimeoutError:
                return StartEstimate(candidate, allowed.argv, reason=f"no answer within {self.budget:.0f} s; ask again")
            except BettyError as failure:
                return StartEstimate(candidate, allowed.argv, reason=str(failure))
        self.cache.put(allowed.argv, result, time.monotonic())
        return read_start(candidate, result)

    async def billing_weights(self) -> dict[str, dict[str, float]]:
        """Each partition's ``TRESBillingWeights`` (``scontrol -o show partition``); empty where the site sets none."""
        allowed = self.policy.check(["scontrol", "-o", "show", "partition"])
        result = await self.transport.run(allowed.argv, self.budget)
        return read_billing_weights(result.stdout) if result.ok else {}

    async def pending_starts(self) -> list[PendingStart]:
        """The person's pending jobs and when Slurm expects each to start (``squeue --me --start``)."""
        argv = ["squeue", "--me", "--start", "--noheader", "--states=PENDING", "--format", SEPARATOR.join(_STARTS)]
        result = await self.transport.run(argv, self.budget)
        if not result.ok:
            first = next((line for line in result.stderr.splitlines() if line.strip()), f"exit {result.exit_code}")
            raise SlurmError(f"squeue --start: {first.strip()[:200]}")
        return read_pending(result.stdout)

    async def candidates(self, script: SbatchScript, nodes: Iterable[int | None] = (None,)) -> list[Candidate]:
        """Every partition ``sinfo`` shows, and for a GPU job each GPU type it offers; times each node count."""
        return candidates_from_gres(script, await self._gres(), nodes)

    async def placement_candidates(self, placements: Iterable[Mapping[str, object]]) -> list[Candidate]:
        """The GPU estimate's placements (its ``placements`` as plain data) as candidates, with their headroom."""
        return candidates_from_placements(placements, await self._gres())

    async def _gres(self) -> dict[str, dict[str, int]]:
        argv = ["sinfo", "--noheader", "--format", f"%P{SEPARATOR}%G"]
        result = await self.transport.run(argv, self.budget)
        if not result.ok:
            raise SlurmError(f"sinfo: {result.stderr.strip()[:200] or f'exit {result.exit_code}'}")
        offers: dict[str, dict[str, int]] = {}
        for line in result.stdout.splitlines():
            name, _, gres = line.strip().partition(SEPARATOR)
            name = name.rstrip("*")
            if _PLAIN_NAME.fullmatch(name):
                found = offers.setdefault(name, {})
                for kind, count in gpu_counts(gres).items():
                    found[kind] = max(found.get(kind, 0), count)
        return offers


async def advise_script(transport: Transport, text: str, *, partitions: Sequence[str] = (),
                        nodes: Sequence[int] = (), placements: Iterable[Mapping[str, object]] | None = None,
                        advisor: PlacementAdvisor | None = None) -> Advice:
    """Advice for a drafted script: the GPU estimate's ``placements`` when given, else every partition (only
    ``partitions`` when named) and GPU type ``sinfo`` shows, times each node count in ``nodes``."""
    script = SbatchScript.parse(text)
    advisor = advisor or PlacementAdvisor(transport)
    if placements is not None:
        candidates = await advisor.placement_candidates(placements)
    else:
        candidates = await advisor.candidates(script, list(nodes) or [None])
    if partitions:
        known = {candidate.partition for candidate in candidates}
        candidates = [c for c in candidates if c.partition in partitions]
        candidates += [Candidate(name) for name in partitions if name not in known]
    return await advisor.advise(script, candidates)


def candidates_from_gres(script: SbatchScript, offers: Mapping[str, Mapping[str, int]],
                         nodes: Iterable[int | None] = (None,)) -> list[Candidate]:
    """Candidates for ``script``: each partition, and for a GPU job each GPU type of each partition with enough per node."""
    request = script.gpu_request()
    counts = list(nodes) or [None]
    found: list[Candidate] = []
    for partition, gpus in offers.items():
        if request is None:
            found += [Candidate(partition, nodes=count) for count in counts]
        else:
            found += [Candidate(partition, kind, count) for kind, have in gpus.items() if have >= request[1]
                      for count in counts]
    return found


def candidates_from_placements(placements: Iterable[Mapping[str, object]],
                               offers: Mapping[str, Mapping[str, int]]) -> list[Candidate]:
    """The GPU estimate's placements (``{"partition", "gpu", "headroom_gib"}``) as candidates.

    The estimate names GPUs by its own catalog (``a100-80gb``); the candidate takes the partition's GRES type
    that is the same GPU. Placements without a partition, or whose GPU the partition does not offer, are left out.
    """
    from ...gpu.hardware import gpu_type  # lazy: the GPU package and its catalog; only the estimate's placements need it

    found = []
    for placement in placements:
        partition, name = str(placement.get("partition") or ""), str(placement.get("gpu") or "")
        headroom = placement.get("headroom_gib")
        for kind in offers.get(partition, {}):
            try:
                same = gpu_type(kind).name == gpu_type(name).name
            except BettyError:
                same = kind == name
            if same:
                found.append(Candidate(partition, kind, headroom_gib=float(headroom) if isinstance(headroom, (int, float)) else None))
    return found


def billing_rate(script: SbatchScript, candidate: Candidate, weights: Mapping[str, Mapping[str, float]]) -> float | None:
    """Billing units per hour the job would be charged on the candidate's partition (None: no weights there).

    Slurm's default billing is the sum of each allocated TRES times its weight: CPUs, memory in GB, GPUs
    (``GRES/gpu`` and the typed ``GRES/gpu:TYPE``).
    """
    weight = weights.get(candidate.partition)
    if not weight:
        return None
    nodes = candidate.nodes or _number(script.get("nodes"), 1)
    tasks = _number(script.get("ntasks-per-node"), 0) or max(1, _number(script.get("ntasks"), 1) // nodes)
    cpus = nodes * tasks * _number(script.get("cpus-per-task"), 1)
    memory_gb = (script.memory_bytes() or 0) / 1024**3 * nodes
    request = script.gpu_request()
    gpus = nodes * (request[1] if request else 0)
    kind = candidate.gpu_type or (request[0] if request else None)
    rate = cpus * weight.get("cpu", 0.0) + memory_gb * weight.get("mem", 0.0) + gpus * weight.get("gres/gpu", 0.0)
    if kind:
        rate += gpus * weight.get(f"gres/gpu:{kind}", 0.0)
    return round(rate, 3)


def _number(text: str | None, default: int) -> int:
    digits = re.match(r"\d+", text or "")
    return int(digits.group()) if digits else default


def rank(estimates: Iterable[StartEstimate], now: datetime) -> list[StartEstimate]:
    """Best first: those with a start time by the minute they start, then more headroom, then lower cost."""
    def key(estimate: StartEstimate) -> tuple[bool, int, float, float, str]:
        wait = estimate.wait_minutes(now)
        headroom = estimate.candidate.headroom_gib
        return (not estimate.ok, wait if wait is not None else 0, -(headroom if headroom is not None else 0.0),
                estimate.cost if estimate.cost is not None else 0.0, estimate.candidate.label)
    return sorted(estimates, key=key)
