"""A tool's outcome as JSON and back, so a notebook talking to the server gets the same objects.

``ToolOutcome.data`` holds a DataFrame (queue, history, partitions), a
:class:`~betty_jupyter.experiments.ledger.Experiment` (submit), a
:class:`~betty_jupyter.cluster.jobs.Job` (status) or plain JSON (GPU estimates). On the wire
it is ``{"kind": "frame" | "experiment" | "job" | "json", "value": …}``; frames keep their
column types through pandas' ``orient="table"`` JSON.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from io import StringIO
from typing import Any, Mapping, cast

from .models import ToolOutcome


def outcome_to_json(outcome: ToolOutcome) -> dict[str, Any]:
    """``outcome`` as JSON-ready data (``full`` left out: the action log has it)."""
    return {"ok": outcome.ok, "summary": outcome.summary, "artifacts": list(outcome.artifacts),
            "data": data_to_json(outcome.data)}


def outcome_from_json(data: Mapping[str, Any]) -> ToolOutcome:
    """The :class:`ToolOutcome` that :func:`outcome_to_json` wrote."""
    return ToolOutcome(ok=bool(data["ok"]), summary=str(data["summary"]), artifacts=list(data.get("artifacts", [])),
                       data=data_from_json(data.get("data")))


def data_to_json(value: Any) -> dict[str, Any] | None:
    """One outcome's ``data`` tagged with its kind."""
    import pandas as pd

    from ..cluster.jobs import Job
    from ..experiments.ledger import Experiment

    if value is None:
        return None
    if isinstance(value, pd.DataFrame):
        # pandas' table JSON cannot read durations back: they travel as seconds, named in "durations".
        durations = [str(c) for c in value.columns if str(value[c].dtype).startswith("timedelta")]
        frame = value.assign(**{c: value[c].dt.total_seconds() for c in durations})
        return {"kind": "frame", "value": frame.to_json(orient="table", date_format="iso", index=False),
                "durations": durations}
    if isinstance(value, Experiment):
        return {"kind": "experiment", "value": dataclasses.asdict(value)}
    if isinstance(value, Job):
        fields = dataclasses.asdict(value)
        fields["state"] = value.state.value
        for name, item in fields.items():
            if isinstance(item, datetime):
                fields[name] = item.isoformat()
            elif isinstance(item, timedelta):
                fields[name] = item.total_seconds()
        return {"kind": "job", "value": fields}
    return {"kind": "json", "value": value}


def data_from_json(data: Mapping[str, Any] | None) -> Any:
    """The object :func:`data_to_json` tagged."""
    if data is None:
        return None
    kind, value = data.get("kind"), data.get("value")
    if kind in ("experiment", "job") and not isinstance(value, dict):
        raise ValueError(f"a {kind} is sent as a JSON object, not {type(value).__name__}")
    if kind == "frame":
        import pandas as pd

        frame = pd.read_json(StringIO(str(value)), orient="table")
        for column in data.get("durations") or []:
            frame[column] = pd.to_timedelta(frame[column], unit="s")
        return frame
    if kind == "experiment":
        from ..experiments.ledger import Experiment

        return Experiment(**cast(dict[str, Any], value))
    if kind == "job":
        from ..cluster.jobs import Job, JobState

        fields = dict(cast(dict[str, Any], value))
        fields["state"] = JobState.parse(fields["state"])
        for field in dataclasses.fields(Job):
            item = fields.get(field.name)
            if item is None:
                continue
            if "datetime" in str(field.type):
                fields[field.name] = datetime.fromisoformat(item)
            elif "timedelta" in str(field.type):
                fields[field.name] = timedelta(seconds=float(item))
        return Job(**fields)
    return value
