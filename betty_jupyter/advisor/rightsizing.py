"""Right-sizing: from the runs of one experiment so far, the request its next submission should make.

The rules, in code and nowhere else (``docs/advisor.md`` quotes them):

* At least :data:`MIN_RUNS` finished runs with a measured peak, or no proposal: one run is an anecdote.
* **Memory**: the largest peak (MaxRSS) of the runs × :data:`MEMORY_HEADROOM`, rounded up to the next size of
  :data:`MEMORY_STEPS` (then whole doublings). Proposed only when it is at most :data:`SHRINK_AT_MOST` of what
  was asked, and never after a run ran out of memory (its peak is the limit, not the need).
* **Time**: the longest run × :data:`TIME_HEADROOM`, rounded up to :data:`TIME_STEP_MINUTES` minutes; proposed
  under the same condition, and never after a run hit its time limit.

A proposal only ever becomes a change as an edit of a resubmission's approval card, which a person approves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import ScriptError
from ..cluster.sbatch import SbatchScript
from ..cluster.job_efficiency import JobEfficiency, clock, short_size

MIN_RUNS = 3
"""How many finished runs with a measured peak a proposal needs."""
MEMORY_HEADROOM = 1.25
"""The proposed memory is the largest peak × this, before rounding up."""
TIME_HEADROOM = 1.5
"""The proposed time limit is the longest run × this, before rounding up."""
SHRINK_AT_MOST = 0.75
"""A new request is proposed only when it is at most this share of the old one: smaller changes are noise."""
TIME_STEP_MINUTES = 15
MEMORY_STEPS = tuple(size * 2**20 for size in (256, 512, 1024, 2048, 4096, 8192, 12288, 16384, 24576, 32768,
                                                 49152, 65536, 98304, 131072))
"""The sizes a proposal rounds up to (256M … 128G; above, whole doublings of 128G)."""


@dataclass(frozen=True)
class RightSizing:
    """A proposal for the next submission of an experiment, and the figures it stands on."""

    runs: tuple[str, ...]
    """The job ids it was drawn from."""
    memory_asked_bytes: int | None
    memory_peak_bytes: int | None
    memory: str | None
    """The ``--mem`` to ask next (``16G``), None when the rules propose no change."""
    time_asked_seconds: int | None
    time_longest_seconds: int
    time: str | None
    """The ``--time`` to ask next (``01:30:00``), None when the rules propose no change."""
    reasons: tuple[str, ...]
    """Why each part is proposed or not, one short line each."""

    @property
    def changes(self) -> dict[str, str]:
        """The ``#SBATCH`` options the proposal sets: ``{"mem": "16G", "time": "01:30:00"}`` (empty: no change)."""
        return {key: value for key, value in (("mem", self.memory), ("time", self.time)) if value}

    def line(self) -> str:
        """``asked 64G, peak 11.2G over 5 runs: ask 16G``, or why nothing is proposed."""
        return "; ".join(self.reasons)

    def edited(self, script: str) -> str:
        """``script`` right-sized (:func:`right_sized`)."""
        return right_sized(script, self.changes)

    def edited_args(self, card_args: Mapping[str, Any]) -> dict[str, Any]:
        """A resubmission card's arguments with the right-sized script: what the person approves as their edit."""
        return {**card_args, "script": self.edited(str(card_args["script"]))}


def right_sized(script: str, changes: Mapping[str, str]) -> str:
    """``script`` with a proposal's ``changes`` written into its ``#SBATCH`` lines; every other byte as it was.

    A per-CPU or per-GPU memory request gives way to the whole-job ``--mem`` (sbatch refuses both at once).
    """
    options: dict[str, str | None] = {key: value for key, value in changes.items() if key in ("mem", "time")}
    if "mem" in options:
        options.update({"mem_per_cpu": None, "mem_per_gpu": None})
    return SbatchScript.parse(script).with_options(**options).render()


def propose(runs: Sequence[JobEfficiency]) -> RightSizing:
    """The right-sized request from ``runs`` (finished runs of one experiment, any order)."""
    measured = [run for run in runs if run.memory_peak_bytes is not None and run.elapsed_seconds > 0]
    asked = max((run.memory_requested_bytes or 0 for run in measured), default=0) or None
    peak = max((run.memory_peak_bytes or 0 for run in measured), default=0) or None
    limit = max((run.time_limit_seconds or 0 for run in measured), default=0) or None
    longest = max((run.elapsed_seconds for run in measured), default=0)
    if len(measured) < MIN_RUNS:
        reason = f"{len(measured)} finished run(s) with a measured peak; right-sizing needs {MIN_RUNS}"
        return RightSizing(tuple(run.job_id for run in measured), asked, peak, None, limit, longest, None, (reason,))
    memory, memory_reason = _memory(measured, asked, peak)
    time, time_reason = _time(measured, limit, longest)
    return RightSizing(tuple(run.job_id for run in measured), asked, peak, memory, limit, longest, time,
                       (memory_reason, time_reason))


def _memory(runs: Sequence[JobEfficiency], asked: int | None, peak: int | None) -> tuple[str | None, str]:
    over = f"over {len(runs)} runs"
    if asked is None or peak is None:
        return None, f"memory: no request or no peak recorded {over}"
    if any(run.state == "OUT_OF_MEMORY" for run in runs):
        return None, f"memory: a run ran out of memory, so its peak is the limit; keep {short_size(asked)}"
    size = _step_up(peak * MEMORY_HEADROOM)
    figures = f"asked {short_size(asked)}, peak {short_size(peak)} {over}"
    if size > asked * SHRINK_AT_MOST:
        return None, f"{figures}: keep {short_size(asked)}"
    return _sbatch_size(size), f"{figures}: ask {_sbatch_size(size)}"


def _time(runs: Sequence[JobEfficiency], limit: int | None, longest: int) -> tuple[str | None, str]:
    if limit is None:
        return None, "time: no limit asked"
    if any(run.state == "TIMEOUT" for run in runs):
        return None, f"time: a run hit its limit; keep {clock(limit)}"
    step = TIME_STEP_MINUTES * 60
    proposed = max(step, math.ceil(longest * TIME_HEADROOM / step) * step)
    figures = f"time limit {clock(limit)}, longest run {clock(longest)}"
    if proposed > limit * SHRINK_AT_MOST:
        return None, f"{figures}: keep {clock(limit)}"
    return clock(proposed), f"{figures}: ask {clock(proposed)}"


def _step_up(size: float) -> int:
    for step in MEMORY_STEPS:
        if size <= step:
            return step
    top = MEMORY_STEPS[-1]
    return int(top * 2 ** math.ceil(math.log2(size / top)))


def _sbatch_size(size: int) -> str:
    """Bytes as ``--mem`` reads them: ``16G`` when whole gibibytes, else ``512M``."""
    return f"{size // 2**30}G" if size % 2**30 == 0 else f"{math.ceil(size / 2**20)}M"


def job_name(script: str) -> str | None:
    """The ``--job-name`` a recorded script asks for: runs of the same name are one experiment's series."""
    try:
        return SbatchScript.parse(script).get("job-name")
    except ScriptError:
        return None
