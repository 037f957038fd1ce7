"""A tool's outcome as JSON and back, so the side panel and a notebook talking to the server get the same objects.

``ToolOutcome.data`` holds a DataFrame (queue, history, partitions), a
:class:`~betty_jupyter.experiments.ledger.Experiment` (submit), a
:class:`~betty_jupyter.cluster.jobs.Job` (status) or plain JSON (GPU estimates). On the wire
it is :data:`OutcomeData`, ``{"kind": "table" | "experiment" | "job" | "json", "value": …}``.
A DataFrame travels as a :class:`Table`: its columns, each named with a :class:`ColumnType`,
and its rows as lists of plain JSON cells (times in ISO 8601, durations in seconds, nothing
missing but ``null``), so a reader needs no pandas to understand it.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta
from enum import Enum
from typing import Annotated, Any, Callable, Literal, Mapping, Union, cast

import pandas as pd
from pandas.api import types
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..cluster.jobs import Job, JobState
from ..experiments.ledger import Experiment
from .models import ToolOutcome


class ColumnType(str, Enum):
    """How a table column's cells are written; every cell may also be ``null`` (missing)."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATETIME = "datetime"
    DURATION = "duration"
    JSON = "json"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Column(_Wire):
    """One column of a table: its name and how its cells are written."""

    name: str
    type: ColumnType = Field(description="string, integer, number, boolean, datetime (ISO 8601 text), duration "
                                         "(seconds), json (any JSON value)")


class Table(_Wire):
    """A table (a queue, partitions, history): its columns, and its rows as lists of cells in column order."""

    columns: list[Column]
    rows: list[list[Any]] = Field(description="one list per row, a cell per column (null where missing)")


class TableData(_Wire):
    """A table, such as the queue."""

    kind: Literal["table"]
    value: Table


class ExperimentData(_Wire):
    """The experiment a submission recorded."""

    kind: Literal["experiment"]
    value: dict[str, Any]


class JobData(_Wire):
    """One job: its fields, with times in ISO 8601 and durations in seconds."""

    kind: Literal["job"]
    value: dict[str, Any]


class JsonData(_Wire):
    """Any other JSON, such as a GPU memory estimate."""

    kind: Literal["json"]
    value: Any


OutcomeData = Annotated[Union[TableData, ExperimentData, JobData, JsonData], Field(discriminator="kind")]
"""An outcome's data, tagged by ``kind``."""


class Outcome(_Wire):
    """What a tool did, as the API answers it: ``ok``, a one-line ``summary``, the files it wrote, its data."""

    ok: bool
    summary: str
    artifacts: list[str]
    data: OutcomeData | None
    text: str | None = None
    """For another agent's call (an MCP client's): what a model is told of it, as Betty's own model would be."""


_DATA: TypeAdapter[OutcomeData] = TypeAdapter(OutcomeData)


def outcome_to_json(outcome: ToolOutcome, text: str | None = None, with_data: bool = True) -> dict[str, Any]:
    """``outcome`` as JSON-ready data (``full`` left out: the action log has it); ``text`` what a model is told;
    ``with_data`` False leaves the data out (null), for a caller that is handed the text alone."""
    data = data_to_json(outcome.data) if with_data else None
    answer = Outcome(ok=outcome.ok, summary=outcome.summary, artifacts=list(outcome.artifacts),
                     data=None if data is None else _DATA.validate_python(data), text=text)
    return answer.model_dump(mode="json")


def outcome_from_json(data: Mapping[str, Any]) -> ToolOutcome:
    """The :class:`ToolOutcome` that :func:`outcome_to_json` wrote."""
    return ToolOutcome(ok=bool(data["ok"]), summary=str(data["summary"]), artifacts=list(data.get("artifacts", [])),
                       data=data_from_json(data.get("data")))


def data_to_json(value: Any) -> dict[str, Any] | None:
    """One outcome's ``data`` tagged with its kind."""
    if value is None:
        return None
    if isinstance(value, pd.DataFrame):
        return {"kind": "table", "value": table_of(value).model_dump(mode="json")}
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
    if kind == "table":
        return frame_of(Table.model_validate(value))
    if kind == "experiment":
        return Experiment(**cast(dict[str, Any], value))
    if kind == "job":
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


# ----- tables ------------------------------------------------------------------------------------
def table_of(frame: "pd.DataFrame") -> Table:
    """A DataFrame as a :class:`Table` (its index left out)."""
    types = [column_type(frame[name]) for name in frame.columns]
    cells = [[_CELL[kind](item) for item in frame[name].tolist()] for name, kind in zip(frame.columns, types)]
    return Table(columns=[Column(name=str(name), type=kind) for name, kind in zip(frame.columns, types)],
                 rows=[list(row) for row in zip(*cells)] if cells else [])


def frame_of(table: Table) -> "pd.DataFrame":
    """The DataFrame a :class:`Table` was made from, with the column types it had."""
    columns = {column.name: [row[i] for row in table.rows] for i, column in enumerate(table.columns)}
    frame = pd.DataFrame({name: pd.Series(cells, dtype=object) for name, cells in columns.items()},
                         columns=list(columns))
    for column in table.columns:
        frame[column.name] = _READ[column.type](frame[column.name])
    return frame


def column_type(series: "pd.Series") -> ColumnType:
    """How :func:`table_of` writes a column: by its dtype; an object column of text alone is ``string``."""
    if types.is_bool_dtype(series):
        return ColumnType.BOOLEAN
    if types.is_integer_dtype(series):
        return ColumnType.INTEGER
    if types.is_float_dtype(series):
        return ColumnType.NUMBER
    if types.is_datetime64_any_dtype(series):
        return ColumnType.DATETIME
    if types.is_timedelta64_dtype(series):
        return ColumnType.DURATION
    if types.is_string_dtype(series) and all(_missing(item) or isinstance(item, str) for item in series.tolist()):
        return ColumnType.STRING
    return ColumnType.JSON


def _missing(item: Any) -> bool:
    """Whether a cell is missing: None, NaN, NaT or pandas' NA (never a list or a dict)."""
    return item is None or (not isinstance(item, (str, list, tuple, dict)) and pd.isna(item) is True)


def _or_none(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda item: None if _missing(item) else convert(item)


def _number(item: Any) -> float | None:
    value = float(item)
    return value if math.isfinite(value) else None


_CELL: dict[ColumnType, Callable[[Any], Any]] = {
    ColumnType.STRING: _or_none(str),
    ColumnType.INTEGER: _or_none(int),
    ColumnType.NUMBER: _or_none(_number),
    ColumnType.BOOLEAN: _or_none(bool),
    ColumnType.DATETIME: _or_none(lambda item: item.isoformat()),
    ColumnType.DURATION: _or_none(lambda item: item.total_seconds()),
    ColumnType.JSON: lambda item: None if isinstance(item, float) and not math.isfinite(item) else item,
}


def _read_integers(series: "pd.Series") -> "pd.Series":
    return series.astype("Int64" if series.isna().any() else "int64")


def _read_booleans(series: "pd.Series") -> "pd.Series":
    return series.astype("boolean" if series.isna().any() else "bool")


def _read_datetimes(series: "pd.Series") -> "pd.Series":
    return pd.to_datetime(series, format="ISO8601")


def _read_durations(series: "pd.Series") -> "pd.Series":
    return pd.to_timedelta(series.astype("float64"), unit="s")


_READ: dict[ColumnType, Callable[["pd.Series"], "pd.Series"]] = {
    ColumnType.STRING: lambda series: series,
    ColumnType.INTEGER: _read_integers,
    ColumnType.NUMBER: lambda series: series.astype("float64"),
    ColumnType.BOOLEAN: _read_booleans,
    ColumnType.DATETIME: _read_datetimes,
    ColumnType.DURATION: _read_durations,
    ColumnType.JSON: lambda series: series,
}
