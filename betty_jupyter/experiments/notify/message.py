"""What a notification says: the job's id, its cluster, its end state, its run time and Betty's diagnosis.

Nothing else goes in: not the job's name, comment or log, not the experiment's name (made from the
job's name), nothing another person or the job itself could have written. Each value is checked
against a narrow alphabet as it comes in, so a notification carries no markup, mention or newline of
anyone else's whatever the target does with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

_JOB_ID = re.compile(r"[0-9]{1,20}(?:[_+][0-9]{1,10})?")
_STATE = re.compile(r"[A-Z_]{1,30}")
_WORDS = re.compile(r"[A-Za-z0-9 ,.;:()%/_-]{1,200}")
"""Betty's own diagnosis wording: letters, digits, a little punctuation; nothing that is markup or a mention."""
_CLUSTER = re.compile(r"[A-Za-z0-9._-]{1,64}")
_FAILURE_TITLES = {"TIMEOUT": "timeout", "OUT_OF_MEMORY": "out_of_memory"}
_NOT_FAILURES = frozenset({"COMPLETED", "CANCELLED", "PREEMPTED", "REQUEUED"})
"""End states the state itself says all of: nothing of the job failed (a preempted job was stopped by Slurm for
another's, and may run again)."""


@dataclass(frozen=True)
class Notice:
    """One ended job, as a notification tells it."""

    job_id: str
    cluster: str
    state: str
    runtime: float | None = None
    """Seconds the job ran (None: accounting did not say)."""
    diagnosis: str = ""
    """Betty's diagnosis in one line (empty for a job that completed)."""

    @property
    def title(self) -> str:
        """``Job 4242 COMPLETED``."""
        return f"Job {self.job_id} {self.state}"

    def text(self) -> str:
        """The message: ``Job 4242 on hpc ended COMPLETED after 1:02:03.`` and the diagnosis, if any."""
        ran = f" after {clock(self.runtime)}" if self.runtime is not None else ""
        line = f"Job {self.job_id} on {self.cluster} ended {self.state}{ran}."
        return line + (f"\nBetty's diagnosis: {self.diagnosis}." if self.diagnosis else "")

    def record(self) -> dict[str, Any]:
        """The notice as data (the generic webhook's body)."""
        return {"job_id": self.job_id, "cluster": self.cluster, "state": self.state,
                "runtime_seconds": self.runtime, "diagnosis": self.diagnosis or None, "text": self.text()}


def notice(job_id: str, cluster: str, state: str, runtime: float | None,
           diagnosis: Mapping[str, Any] | None) -> Notice:
    """The notice of an ended job from what the ledger recorded; anything outside its alphabet is left out."""
    state = state if _STATE.fullmatch(state) else "ENDED"
    return Notice(job_id if _JOB_ID.fullmatch(job_id) else "?", cluster if _CLUSTER.fullmatch(cluster) else "?",
                  state, runtime if runtime is not None and 0 <= runtime < 1e9 else None,
                  diagnosis_line(state, diagnosis))


def diagnosis_line(state: str, diagnosis: Mapping[str, Any] | None) -> str:
    """Betty's diagnosis (``diagnosis.py``) in one line: the recorded one when the babysitter made it, else the
    cause the end state alone names; empty for a job that completed, was cancelled or was preempted."""
    # lazy: the diagnosis module and the Slurm parsers behind it; most notices are of jobs that completed
    from ..diagnosis import TITLES

    if diagnosis:
        title = str(diagnosis.get("title") or "")
        summary = " ".join(str(diagnosis.get("summary") or "").split())
        title = title if title in TITLES.values() else ""
        summary = summary if _WORDS.fullmatch(summary) else ""
        if title:
            return f"{title}: {summary}" if summary else title
    if state in _NOT_FAILURES or state.startswith("CANCELLED"):
        return ""
    return TITLES[_FAILURE_TITLES.get(state, "failed_other")]


def clock(seconds: float) -> str:
    """``1:02:03``; a day or more as ``2-03:04:05``."""
    whole = int(round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{days}-{hours:02d}" if days else f"{hours}") + f":{minutes:02d}:{secs:02d}"
