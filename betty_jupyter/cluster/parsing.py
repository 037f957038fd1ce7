"""Pure parsers: the text Slurm prints (fields split by ``\\x1f``) into typed DataFrames.

Formats are pinned by the command builders in ``slurm.py``; each ``*_FIELDS`` tuple here is
the one source of the field order for both sides. Conversions are vectorised, so 100k rows
of ``sacct`` parse at about the speed of a plain ``pandas.read_csv``.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import SlurmError
from ..gres import gpu_counts
from .jobs import JobState, array_task_count

if TYPE_CHECKING:
    import pandas as pd

SEPARATOR = "\x1f"

# squeue --format codes, in column order: (code, column name)
SQUEUE_FIELDS: tuple[tuple[str, str], ...] = (
    ("%i", "job_id"), ("%F", "array_job_id"), ("%K", "array_task_id"), ("%j", "name"), ("%u", "user"),
    ("%a", "account"), ("%P", "partition"), ("%T", "state"), ("%r", "reason"), ("%M", "elapsed"),
    ("%l", "time_limit"), ("%D", "nodes"), ("%C", "cpus"), ("%m", "memory"), ("%b", "tres_per_node"),
    ("%N", "nodelist"), ("%V", "submitted"), ("%S", "started"), ("%k", "comment"),
)

# sacct --format fields, in column order: (field, column name)
SACCT_FIELDS: tuple[tuple[str, str], ...] = (
    ("JobID", "job_id"), ("JobIDRaw", "job_id_raw"), ("JobName", "name"), ("User", "user"),
    ("Account", "account"), ("Partition", "partition"), ("State", "state"), ("ExitCode", "exit_code"),
    ("Submit", "submitted"), ("Start", "started"), ("End", "ended"), ("Elapsed", "elapsed"),
    ("Timelimit", "time_limit"), ("NNodes", "nodes"), ("NCPUS", "cpus"), ("ReqMem", "memory"),
    ("MaxRSS", "max_rss"), ("AllocTRES", "alloc_tres"), ("NodeList", "nodelist"), ("Comment", "comment"),
    ("WorkDir", "work_dir"),
)

# sinfo --format codes: one row per partition and node configuration (with --exact, each its own memory)
SINFO_FIELDS: tuple[tuple[str, str], ...] = (
    ("%P", "partition"), ("%a", "availability"), ("%F", "nodes_by_state"), ("%C", "cpus_by_state"),
    ("%m", "memory"), ("%G", "gres"), ("%l", "time_limit"), ("%D", "nodes"),
)

_NO_TIME = ("", "None", "Unknown", "N/A", "NONE", "INVALID", "UNLIMITED", "infinite", "Partition_Limit", "NOT_SET")
_UNITS = {"": 1024**2, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_STATE_CATEGORIES = [state.value for state in JobState]


def joined_fields(*formats: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """One ``sacct --format`` that holds the fields of several, so one call answers them all: each field once, in
    the order first given, its column named after the field itself (``read_table``/``rows`` take each format's
    own columns back out of it with ``keep=``)."""
    return tuple((field, field) for field in dict.fromkeys(field for fields in formats for field, _ in fields))


def format_string(fields: Sequence[tuple[str, str]]) -> str:
    """The ``--format``/``--Format`` argument for ``fields``, joined by the unit separator."""
    return SEPARATOR.join(code for code, _ in fields)


def read_table(text: str, fields: Sequence[tuple[str, str]],
               keep: Sequence[tuple[str, str]] | None = None) -> "pd.DataFrame":
    """Split ``text`` into string columns named after ``fields`` (no type conversion); with ``keep``, ``text`` is
    in the :func:`joined_fields` format ``fields`` and the table has only ``keep``'s columns, named as ``keep`` names
    them: the table ``keep``'s own format would give.

    Any user names their jobs: a name with a line break spans two lines (they are joined
    back), and a row with a separator too many cannot be split exactly and is left out.
    """
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    names = [name for _, name in fields]
    if not text.strip():
        table = pd.DataFrame({name: pd.Series(dtype=str) for name in names})
    elif text.count(SEPARATOR) == (len(names) - 1) * len(text.splitlines()):
        try:
            table = pd.read_csv(
                io.StringIO(text), sep=SEPARATOR, header=None, names=names, dtype=str, keep_default_na=False,
                quoting=csv.QUOTE_NONE, engine="c", index_col=False,
                usecols=None if keep is None else [field for field, _ in keep],
            )
        except pd.errors.ParserError:  # rows of uneven width: read them one by one
            table = pd.DataFrame(_whole_rows(text, len(names)), columns=names, dtype=str)
    else:
        table = pd.DataFrame(_whole_rows(text, len(names)), columns=names, dtype=str)
    if keep is None:
        return table
    return table[[field for field, _ in keep]].set_axis([name for _, name in keep], axis=1)


def split_rows(text: str, width: int) -> list[list[str]]:
    """The rows of ``text`` that have exactly ``width`` fields split by :data:`SEPARATOR`, as lists of text (no pandas).

    A field with a line break (a job's name) joins its lines back; a row with a separator too many is left out.
    """
    return _whole_rows(text, width)


def _whole_rows(text: str, width: int) -> list[list[str]]:
    """Rows of exactly ``width`` fields, physical lines joined while a row still lacks separators."""
    rows: list[list[str]] = []
    pending: str | None = None
    for line in text.split("\n"):
        current = line if pending is None else f"{pending}\n{line}"
        count = current.count(SEPARATOR)
        if count < width - 1:
            pending = current
            continue
        pending = None
        if count == width - 1:
            rows.append(current.split(SEPARATOR))
    return rows


def rows(text: str, fields: Sequence[tuple[str, str]],
         keep: Sequence[tuple[str, str]] | None = None) -> list[dict[str, str]]:
    """Split ``text`` into one dict per whole row, keyed by the column names of ``fields`` (no pandas); with
    ``keep``, as :func:`read_table` takes it: ``keep``'s columns of the :func:`joined_fields` format ``fields``.

    The rows :func:`read_table` would give: a name with a line break is joined back, and a row with a
    separator too many is left out.
    """
    names = [name for _, name in fields]
    if keep is None:
        return [dict(zip(names, cells)) for cells in _whole_rows(text, len(names))]
    where = {field: index for index, (field, _) in enumerate(fields)}
    taken = [(name, where[field]) for field, name in keep]
    return [{name: cells[index] for name, index in taken} for cells in _whole_rows(text, len(names))]


def tres_items(text: str) -> dict[str, str]:
    """A TRES list (``cpu=4,mem=16G,gres/gpu:a100=1``) as ``{name: value}``; an item without ``=`` is left out."""
    items: dict[str, str] = {}
    for item in text.split(","):
        name, equals, value = item.partition("=")
        if equals and name:
            items[name] = value
    return items


def _by_unique(values: "pd.Series", convert: Callable[[str], Any], dtype: str) -> "pd.Series":
    """Apply ``convert`` once per distinct value: Slurm columns repeat a lot, and plain Python
    on the distinct values beats regular expressions over every row."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    codes, uniques = pd.factorize(values)
    converted = pd.Series([convert(item) for item in uniques], dtype=dtype)
    return pd.Series(converted.array.take(codes, allow_fill=True), index=values.index)


def duration_seconds(text: str) -> float | None:
    """``[D-][HH:]MM:SS[.mmm]`` or ``D-HH`` → seconds; ``UNLIMITED``, ``INVALID``, blanks → None."""
    days, _, clock = text.rpartition("-")
    if days and not days.isdigit():
        return None
    parts = clock.split(":")
    try:
        numbers = [float(part) for part in parts]
    except ValueError:
        return None
    if days and len(parts) == 1:  # "1-02" is days-hours
        numbers = [numbers[0], 0.0, 0.0]
    if not 2 <= len(numbers) <= 3:
        return None
    hours, minutes, seconds = ([0.0] * (3 - len(numbers)) + numbers)
    return (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + seconds


def durations(values: "pd.Series") -> "pd.Series":
    """Slurm durations → Timedelta; ``UNLIMITED``, ``INVALID`` and blanks → NaT."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    return pd.to_timedelta(_by_unique(values, duration_seconds, "Float64").astype("float64"), unit="s")


def timestamps(values: "pd.Series") -> "pd.Series":
    """``2026-11-22T00:55:14`` → Timestamp; ``Unknown``/``None``/``N/A`` → NaT."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    return pd.to_datetime(values.where(~values.isin(_NO_TIME)), format="%Y-%m-%dT%H:%M:%S", errors="coerce")


def size_bytes(text: str) -> int | None:
    """``4000M``, ``12.5G``, ``1234K``, ``4000Mn``/``4000Mc`` (old per-node/per-CPU suffix) → bytes.

    A bare number is MB, as Slurm reads ``--mem``.
    """
    text = text.rstrip("nc")
    unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
    try:
        return round(float(text[: len(text) - len(unit)]) * _UNITS[unit])
    except ValueError:
        return None


def memory_bytes(values: "pd.Series") -> "pd.Series":
    """Memory sizes as Slurm prints them → bytes (nullable integers)."""
    return _by_unique(values, size_bytes, "Int64")


def integers(values: "pd.Series") -> "pd.Series":
    """Digits → nullable integers; anything else → <NA>."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    return pd.to_numeric(values, errors="coerce").astype("Int64")


def state_name(text: str) -> str:
    """``CANCELLED by 1000`` → ``CANCELLED``; anything unknown → ``UNKNOWN``."""
    return JobState.parse(text).value


def states(values: "pd.Series") -> "pd.Categorical":
    """Job states as a categorical of :class:`JobState` values."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    return pd.Categorical(_by_unique(values, state_name, "object"), categories=_STATE_CATEGORIES)


def tres_gpus(tres: str) -> tuple[int, str | None]:
    """GPU count and type from a TRES string (``gres/gpu:h100=1,gres/gpu=1``, ``gres/gpu:a100:2``…)."""
    count, kind = 0, None
    for item in tres.replace("gres:", "gres/").split(","):
        if not item.startswith("gres/gpu"):
            continue
        name, _, number = item.replace("=", ":").rpartition(":")
        if not number.isdigit():
            continue
        if name == "gres/gpu":
            count = int(number)
        elif name.startswith("gres/gpu:"):
            kind = name.split(":", 1)[1]
            count = count or int(number)
    return count, kind


def gpus_from_tres(values: "pd.Series") -> tuple["pd.Series", "pd.Series"]:
    """GPU counts (0 when none) and types (None when untyped) for a column of TRES strings."""
    pairs = _by_unique(values, tres_gpus, "object")
    return pairs.map(lambda pair: pair[0]).astype("Int64"), pairs.map(lambda pair: pair[1])


def parse_queue(text: str) -> "pd.DataFrame":
    """``squeue`` output (format :data:`SQUEUE_FIELDS`) → typed DataFrame."""
    frame = read_table(text, SQUEUE_FIELDS)
    frame["state"] = states(frame["state"])
    frame["elapsed"] = durations(frame["elapsed"])
    frame["time_limit"] = durations(frame["time_limit"])
    frame["nodes"] = integers(frame["nodes"])
    frame["cpus"] = integers(frame["cpus"])
    frame["memory_bytes"] = memory_bytes(frame.pop("memory"))
    frame["gpus"], frame["gpu_type"] = gpus_from_tres(frame["tres_per_node"])
    frame["submitted"] = timestamps(frame["submitted"])
    frame["started"] = timestamps(frame["started"])
    for column in ("array_job_id", "array_task_id", "reason", "comment", "nodelist"):
        frame[column] = frame[column].replace(_NO_TEXT)
    frame["tasks"] = _by_unique(frame["array_task_id"], array_task_count, "int64").astype("int64")
    return frame


_NO_TEXT = {"N/A": "", "(null)": "", "None": ""}


def queue_rows(text: str, fields: Sequence[tuple[str, str]] = SQUEUE_FIELDS) -> list[dict[str, Any]]:
    """``squeue`` output → one dict per row with the columns the text table shows, no pandas.

    The same values :func:`parse_queue` gives (None where it has a missing value), for a read that
    prints a table and needs nothing else: ``betty jobs`` starts without importing pandas. ``fields``
    (a part of :data:`SQUEUE_FIELDS`, in its order) reads a narrower format; the rows have those columns.
    """
    names = [name for _, name in fields]
    # each distinct value is read once (a queue repeats its states, limits and GPU requests thousands of times)
    read_state, read_time, read_gpus, read_tasks = (_once(state_name), _once(_duration), _once(tres_gpus),
                                                    _once(array_task_count))
    texts = [column for column in ("array_job_id", "array_task_id", "reason", "comment", "nodelist") if column in names]
    rows: list[dict[str, Any]] = []
    for cells in _whole_rows(text, len(names)):
        row: dict[str, Any] = dict(zip(names, cells))
        if "state" in row:
            row["state"] = read_state(row["state"])
        for column in ("elapsed", "time_limit"):
            if column in row:
                row[column] = read_time(row[column])
        if "tres_per_node" in row:
            row["gpus"], row["gpu_type"] = read_gpus(row["tres_per_node"])
        for column in texts:
            row[column] = _NO_TEXT.get(row[column], row[column])
        row["tasks"] = read_tasks(row.get("array_task_id", ""))
        rows.append(row)
    return rows


def _once(read: Callable[[str], Any]) -> Callable[[str], Any]:
    """``read``, each distinct text read once (for one table)."""
    seen: dict[str, Any] = {}

    def cached(value: str) -> Any:
        try:
            return seen[value]
        except KeyError:
            seen[value] = answer = read(value)
            return answer

    return cached


def _duration(text: str) -> timedelta | None:
    return _timedelta(duration_seconds(text))


def _timedelta(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


def job_count(frame: "pd.DataFrame") -> int:
    """How many jobs a queue table holds, each task of a pending array counted (one row may be 1000 jobs)."""
    return int(frame["tasks"].sum()) if "tasks" in frame.columns else len(frame)


def jobs_by(frame: "pd.DataFrame", column: str) -> "pd.Series":
    """Jobs per value of ``column`` (as text), most first, each array task counted."""
    keys = frame[column].astype(str)
    if "tasks" not in frame.columns:
        return keys.value_counts()
    return frame["tasks"].groupby(keys).sum().sort_values(ascending=False, kind="stable")


def parse_history(text: str, fields: Sequence[tuple[str, str]] = SACCT_FIELDS) -> "pd.DataFrame":
    """``sacct`` output (format :data:`SACCT_FIELDS`, or a :func:`joined_fields` format that holds them; steps
    included) → one typed row per job.

    Steps (``123.batch``, ``123.0``) are folded into their job: the job keeps its own row and
    takes the largest MaxRSS any of its steps reached (``max_rss_bytes``), with the name of
    that step (``max_rss_step``: ``batch``, ``0``…).
    """
    frame = read_table(text, fields, keep=None if fields is SACCT_FIELDS else SACCT_FIELDS)
    step = frame["job_id"].str.contains(".", regex=False)
    # sacct prints each job's steps right after it: number the jobs, and steps take their number.
    owner = (~step).cumsum()
    sizes = memory_bytes(frame.loc[step & (frame["max_rss"] != ""), "max_rss"]).dropna().astype("int64")
    largest = sizes.groupby(owner.loc[sizes.index]).idxmax()  # job number → row of its largest step
    peak = sizes.loc[largest.to_numpy()].set_axis(largest.index)
    names = frame.loc[largest.to_numpy(), "job_id"].str.rsplit(".", n=1).str[-1].set_axis(largest.index)
    jobs = frame[~step].copy()
    jobs["max_rss_bytes"] = owner[~step].map(peak).astype("Int64")
    jobs["max_rss_step"] = owner[~step].map(names)
    jobs["state"] = states(jobs["state"])
    jobs["elapsed"] = durations(jobs["elapsed"])
    jobs["time_limit"] = durations(jobs["time_limit"])
    for column in ("submitted", "started", "ended"):
        jobs[column] = timestamps(jobs[column])
    jobs["nodes"] = integers(jobs["nodes"])
    jobs["cpus"] = integers(jobs["cpus"])
    jobs["memory_bytes"] = memory_bytes(jobs.pop("memory"))
    jobs["gpus"], jobs["gpu_type"] = gpus_from_tres(jobs["alloc_tres"])
    jobs = jobs.drop(columns=["max_rss"])
    return jobs.reset_index(drop=True)


def parse_partitions(text: str) -> "pd.DataFrame":
    """``sinfo`` output (format :data:`SINFO_FIELDS`) → one row per partition.

    Columns: partition, default, availability, nodes, nodes_idle, cpus, cpus_idle,
    memory_bytes (smallest node), memory_bytes_max (largest node), gpus (total),
    gpu_types ({type: GPUs per node}), time_limit.
    """
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    frame = pd.DataFrame(partition_rows(text))
    if frame.empty:
        return pd.DataFrame(columns=["partition", "default", "availability", "nodes", "nodes_idle", "cpus",
                                     "cpus_idle", "memory_bytes", "memory_bytes_max", "gpus", "gpu_types",
                                     "time_limit"])
    frame["time_limit"] = durations(frame["time_limit"].astype(str))
    frame["memory_bytes"] = frame["memory_bytes"].astype("Int64")
    frame["memory_bytes_max"] = frame["memory_bytes_max"].astype("Int64")
    return frame


def partition_rows(text: str) -> list[dict[str, object]]:
    """``sinfo`` output → one dict per partition, its time limit still as Slurm wrote it (no pandas)."""
    names = [name for _, name in SINFO_FIELDS]
    partitions: dict[str, dict[str, object]] = {}
    for cells in _whole_rows(text, len(names)):
        _merge_partition_row(partitions, dict(zip(names, cells)))
    return list(partitions.values())


def plain_partitions(text: str) -> list[dict[str, object]]:
    """:func:`parse_partitions` as plain dicts without pandas: the time limit a timedelta, None for none."""
    rows = partition_rows(text)
    for row in rows:
        row["time_limit"] = _timedelta(duration_seconds(str(row["time_limit"])))
    return rows


def _merge_partition_row(partitions: dict[str, dict[str, object]], row: dict[str, str]) -> None:
    name = row["partition"]
    default = name.endswith("*")
    name = name.rstrip("*")
    _, idle, _, total = (int(n) for n in row["nodes_by_state"].split("/"))
    _, cpus_idle, _, cpus = (int(n) for n in row["cpus_by_state"].split("/"))
    memory = int(row["memory"].rstrip("+")) * 1024**2
    gpu_types = gres_gpus(row["gres"])
    entry = partitions.setdefault(name, {
        "partition": name, "default": default, "availability": row["availability"], "nodes": 0,
        "nodes_idle": 0, "cpus": 0, "cpus_idle": 0, "memory_bytes": memory, "memory_bytes_max": memory,
        "gpus": 0, "gpu_types": {},
        "time_limit": row["time_limit"],
    })
    entry["nodes"] = int(entry["nodes"]) + total  # type: ignore[call-overload]
    entry["nodes_idle"] = int(entry["nodes_idle"]) + idle  # type: ignore[call-overload]
    entry["cpus"] = int(entry["cpus"]) + cpus  # type: ignore[call-overload]
    entry["cpus_idle"] = int(entry["cpus_idle"]) + cpus_idle  # type: ignore[call-overload]
    entry["memory_bytes"] = min(int(entry["memory_bytes"]), memory)  # type: ignore[call-overload]
    entry["memory_bytes_max"] = max(int(entry["memory_bytes_max"]), memory)  # type: ignore[call-overload]
    entry["gpus"] = int(entry["gpus"]) + total * sum(gpu_types.values())  # type: ignore[call-overload]
    types: dict[str, int] = entry["gpu_types"]  # type: ignore[assignment]
    for kind, count in gpu_types.items():
        types[kind] = max(types.get(kind, 0), count)


def gres_gpus(gres: str) -> dict[str, int]:
    """``gpu:a100:4,gpu:h100:2(S:0)`` → ``{"a100": 4, "h100": 2}``; an untyped ``gpu:2`` → ``{"gpu": 2}``."""
    try:
        return gpu_counts(gres)
    except ValueError as error:
        raise SlurmError(f"sinfo printed GRES this version of Betty cannot read: {error}") from error
