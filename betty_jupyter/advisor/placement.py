"""When and where a drafted job would start: one ``sbatch --test-only`` per candidate placement, ranked.

A *candidate* is a partition, and for a GPU job one GPU type it offers (``sinfo``'s GRES), with an
optional node count, or one of the GPU estimate's placements with its headroom. For each, the
scheduler is asked once, through the read policy, with the script's request and the candidate's
partition, GPU type and nodes put in place of the script's own: ``sbatch --test-only … --wrap=true``
submits nothing. The questions go out in parallel (at most :attr:`PlacementAdvisor.parallel` at a
time) within one time budget, and each answer is kept for :data:`CACHE_SECONDS` (the same question
within a minute asks the scheduler nothing), so nothing here ever loops on the controller.

Slurm's answers are read strictly in :mod:`.estimates`, which also holds the data and the ranking.

Candidates are ranked by expected start (to the minute), then by fit (the GPU estimate's headroom,
more is better), then by cost where the site sets ``TRESBillingWeights`` on its partitions.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..errors import BettyError, SlurmError
from ..gres import gpu_counts
from ..cluster.delimited import run_read
from ..cluster.parsing import SEPARATOR
from ..cluster.allowlist import TEST_ONLY_OPTIONS, TEST_ONLY_SCRIPT, CommandPolicy
from ..cluster.sbatch import SbatchScript
from ..transport.interface import CommandResult, Transport
from .estimates import (PENDING_FIELDS, PLAIN_NAME, Advice, Candidate, PendingStart, StartEstimate, rank,
                        read_billing_weights, read_pending, read_start)

CACHE_SECONDS = 60.0
"""How long one answer of the scheduler is kept: a second advice within a minute asks nothing."""

START_BUDGET = 20.0
"""Seconds an approval card's start estimate may take; the card is shown before it and never waits for it."""

GPU_OPTIONS = ("gres", "gpus", "gpus-per-node", "gpus-per-task")
"""The script's GPU options; a GPU candidate replaces them with its own ``--gres=gpu:TYPE:N``."""

# ----- asking Slurm -----------------------------------------------------------------------------------------------------

def placement_changes(script: SbatchScript, candidate: Candidate) -> dict[str, str | None]:
    """The directives that put ``script`` on ``candidate``: its partition, node count and GPU type (``None``: the
    option goes); every other option of the script stays as it is."""
    changes: dict[str, str | None] = {"partition": candidate.partition}
    if candidate.nodes is not None:
        changes["nodes"] = str(candidate.nodes)
    request = script.gpu_request()
    if candidate.gpu_type is not None:
        changes.update({option: None for option in GPU_OPTIONS})
        changes["gres"] = f"gpu:{candidate.gpu_type}:{request[1] if request else 1}"
    return changes


def placed_script(script: SbatchScript, candidate: Candidate) -> SbatchScript:
    """``script`` with :func:`placement_changes` written into its ``#SBATCH`` lines, the rest byte for byte."""
    changes = placement_changes(script, candidate)
    present = {directive.option for directive in script.directives}
    return script.with_options(**{name.replace("-", "_"): value for name, value in changes.items()
                                  if value is not None or name in present})


def estimate_argv(script: SbatchScript, candidate: Candidate) -> list[str]:
    """``sbatch --test-only`` with the script's request and the candidate's partition, GPU type and nodes in its place.

    Only the options that shape where and when a job runs are passed (:data:`TEST_ONLY_OPTIONS`), each as
    ``--NAME=VALUE``, and the script itself never leaves this machine: ``--wrap=true`` stands for it.
    """
    options: dict[str, str | None] = {}
    for directive in script.directives:
        if directive.option in TEST_ONLY_OPTIONS or directive.option == "exclusive":
            options[directive.option] = directive.value
    for name, value in placement_changes(script, candidate).items():
        if value is None or name in GPU_OPTIONS:  # the GPU request is replaced whole, not edited in place
            options.pop(name, None)
        if value is not None:
            options[name] = value
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
        argv = ["squeue", "--me", "--start", "--noheader", "--states=PENDING", "--format", SEPARATOR.join(PENDING_FIELDS)]
        result = await run_read(self.transport, argv, self.budget)
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
        result = await run_read(self.transport, argv, self.budget)
        if not result.ok:
            raise SlurmError(f"sinfo: {result.stderr.strip()[:200] or f'exit {result.exit_code}'}")
        offers: dict[str, dict[str, int]] = {}
        for line in result.stdout.splitlines():
            name, _, gres = line.strip().partition(SEPARATOR)
            name = name.rstrip("*")
            if PLAIN_NAME.fullmatch(name):
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
    from ..gpu.hardware import gpu_type  # lazy: the GPU package and its catalog; only the estimate's placements need it

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


