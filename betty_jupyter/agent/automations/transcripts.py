"""A run's transcript: its session's events, one JSON line each, in ``.betty/automations/runs/<run id>.jsonl``.

Kept on disk so a run can be read after the server that ran it stopped, and across its
attempts (each line carries ``attempt``; ``seq`` starts again at 1 with each attempt).
Streamed pieces of replies (``message_delta``) are left out: the whole ``message`` follows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .. import events as ev

SKIPPED = ("message_delta",)


def transcript_path(state: Path, run_id: str) -> Path:
    """Where the run's transcript lives under the workspace's ``.betty/``."""
    return state / "automations" / "runs" / f"{run_id}.jsonl"


class TranscriptWriter:
    """A session stream subscriber appending each event of one attempt of a run."""

    def __init__(self, path: Path, attempt: int) -> None:
        self.path, self.attempt = path, attempt
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, event: "ev.AnyEvent") -> None:
        """Append ``event`` (called in order, one at a time, by the stream)."""
        if event.type in SKIPPED:
            return
        line = json.dumps({"attempt": self.attempt, **event.model_dump(mode="json")}, default=str)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(line + "\n")


def read_transcript(path: Path, after: int = 0) -> list[dict[str, Any]]:
    """The transcript's events after the first ``after`` (a line cut short by a crash is skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines[after:]:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events
