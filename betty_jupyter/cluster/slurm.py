"""``SlurmClient``: typed Slurm operations on top of any :class:`Transport`.

Command builders pin every output format (a person's ``SQUEUE_FORMAT`` cannot break them),
the parsers in ``parsing.py`` turn the text into DataFrames, and job ids are validated
before they reach a command line.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ..errors import SlurmError, SubmissionUnknownError, TransportError, UsageError
from . import parsing
from .jobs import Job, JobState, job_id, parse_sbatch_output
from .transport import CommandResult, Transport

if TYPE_CHECKING:
    import pandas as pd

    from .job_env import JobEnvironment

TOKEN_PREFIX = "betty:"
_ACCOUNTING_OFF = ("accounting storage is disabled", "Slurm accounting storage is disabled")


class SlurmClient:
    """Queue, partitions, history, submit, cancel and logs of one cluster."""

    def __init__(self, transport: Transport, work_dir: str = "~/.betty", timeout: float = 60.0,
                 job_env: Sequence[str] = ()) -> None:
        self.transport = transport
        self.work_dir = work_dir.rstrip("/")
        self.timeout = timeout
        self.job_env = tuple(job_env)
        """Variables jobs get beyond :data:`~betty_jupyter.cluster.job_env.JOB_NAMES` (the profile's ``job_env``)."""
        self.lookup_attempts = 6
        self.lookup_interval = 1.0

    async def _run(self, argv: Sequence[str], *, idempotent: bool = True, check: bool = True) -> CommandResult:
        result = await self.transport.run(argv, self.timeout, idempotent=idempotent)
        if check and not result.ok:
            raise SlurmError(_first_error(result))
        return result

    # ----- reading ------------------------------------------------------------------------
    async def queue(self, user: str | None = None, states: Iterable[str] | None = None,
                    partition: str | None = None) -> "pd.DataFrame":
        """Jobs in the queue (all users unless ``user``), one row per job or pending array."""
        argv = ["squeue", "--noheader", "--format", parsing.format_string(parsing.SQUEUE_FIELDS)]
        if user:
            argv += ["--user", _plain(user, "user")]
        if states:
            argv += ["--states", ",".join(JobState.parse(s).value for s in states)]
        if partition:
            argv += ["--partition", _plain(partition, "partition")]
        return parsing.parse_queue((await self._run(argv)).stdout)

    async def partitions(self) -> "pd.DataFrame":
        """Partitions with state, nodes and CPUs (total and idle), memory, GPU types and time limit."""
        argv = ["sinfo", "--noheader", "--format", parsing.format_string(parsing.SINFO_FIELDS)]
        return parsing.parse_partitions((await self._run(argv)).stdout)

    async def history(self, job_ids: Iterable[object] | None = None, since: str | datetime | None = None,
                      all_users: bool = False) -> "pd.DataFrame":
        """Finished and running jobs from accounting; from the queue when accounting is off."""
        argv = ["sacct", "--parsable2", "--noheader", f"--delimiter={parsing.SEPARATOR}",
                "--format", ",".join(field for field, _ in parsing.SACCT_FIELDS)]
        ids = [job_id(i) for i in job_ids] if job_ids is not None else None
        if ids:
            argv += ["--jobs", ",".join(ids)]
        if since is not None:
            argv += ["--starttime", since.strftime("%Y-%m-%dT%H:%M:%S") if isinstance(since, datetime) else _plain(str(since), "since")]
        if all_users:
            argv.append("--allusers")
        result = await self._run(argv, check=False)
        if not result.ok and any(text in result.stderr for text in _ACCOUNTING_OFF):
            return await self._history_from_queue(ids)
        if not result.ok:
            raise SlurmError(_first_error(result))
        return await self._complete_from_queue(parsing.parse_history(result.stdout))

    async def _complete_from_queue(self, history: "pd.DataFrame") -> "pd.DataFrame":
        """Fill rows accounting has not caught up with from the controller's record.

        slurmdbd learns of a job a moment after slurmctld; until then its row is a stub
        (no partition, name ``allocation``). While the controller still knows the job, its
        record is the right one to show.
        """
        stubs = history["partition"] == ""
        if not stubs.any():
            return history
        queued = await self._history_from_queue([str(i) for i in history.loc[stubs, "job_id"] if _is_job_id(i)])
        live = {str(row["job_id"]): row for row in queued.to_dict("records")}
        columns = [c for c in queued.columns if c in history.columns and c != "job_id"]
        for index in history.index[stubs]:
            row = live.get(str(history.at[index, "job_id"]))
            if row is not None:
                for column in columns:
                    history.loc[index, column] = row[column]
                # The stub's 0:0 means nothing, and the queue has no exit code: unknown until accounting has it.
                history.loc[index, "exit_code"] = ""
        return history

    async def _history_from_queue(self, ids: list[str] | None) -> "pd.DataFrame":
        """Accounting is disabled: the queue still knows recent jobs (for ``MinJobAge``)."""
        argv = ["squeue", "--noheader", "--states=all", "--format", parsing.format_string(parsing.SQUEUE_FIELDS)]
        if ids:
            argv += ["--jobs", ",".join(ids)]
        return parsing.parse_queue((await self._run(argv, check=False)).stdout)

    async def job(self, value: object) -> Job:
        """One job by id, from accounting, completed by the controller's record when it has one."""
        ident = job_id(value)
        queued = await self._history_from_queue([ident])
        live = queued[queued["job_id"] == ident]
        record: dict[str, Any] = {}
        if live.empty or JobState.parse(str(live.iloc[0]["state"])).finished:
            history = await self.history([ident])
            recorded = history[history["job_id"] == ident]
            record = {str(k): v for k, v in recorded.iloc[0].items()} if not recorded.empty else {}
        # While the controller keeps a job its record is complete and current; accounting
        # lags a little, so it only adds what the queue lacks (exit code, end, peak memory).
        if not live.empty:
            record.update({str(k): v for k, v in live.iloc[0].items() if not _missing(v)})
        if not record:
            raise SlurmError(f"job {ident} is not known to the cluster (not in the queue nor in accounting)")
        return _job_from_row(record, await self._output_paths(ident))

    async def snapshot(self, job_ids: Iterable[object]) -> dict[str, Job]:
        """Each job's record now, for many jobs at once: one ``sacct`` call for all of them.

        The queue is asked (once) only for jobs accounting does not know yet.
        """
        ids = [job_id(i) for i in job_ids]
        if not ids:
            return {}
        rows = {str(row["job_id"]): row for row in (await self.history(ids)).to_dict("records")}
        missing = [i for i in ids if i not in rows]
        if missing:
            queued = await self._history_from_queue(missing)
            rows.update({str(row["job_id"]): row for row in queued.to_dict("records")})
        return {i: _job_from_row({str(k): v for k, v in rows[i].items()}, {}) for i in ids if i in rows}

    async def _output_paths(self, ident: str) -> dict[str, str]:
        """StdOut/StdErr/WorkDir as the controller recorded them (known until MinJobAge passes)."""
        result = await self._run(["scontrol", "show", "job", ident], check=False)
        paths = {}
        for key in ("StdOut", "StdErr", "WorkDir"):
            match = re.search(rf"\b{key}=(.*?)(?=\s+\w+=|\s*$)", result.stdout, re.MULTILINE)
            if match:
                paths[key] = match.group(1).strip()
        return paths

    async def tail(self, value: object, stream: str = "out", lines: int = 50) -> str:
        """The last ``lines`` lines the job wrote to its stdout (``out``) or stderr (``err``)."""
        if stream not in ("out", "err"):
            raise SlurmError(f"stream must be 'out' or 'err', not {stream!r}")
        if not 1 <= lines <= 100_000:
            raise SlurmError(f"lines must be between 1 and 100000, not {lines}")
        job = await self.job(value)
        path = job.stdout_path if stream == "out" else job.stderr_path
        if not path:
            raise SlurmError(
                f"job {job.job_id}'s {stream} file is no longer recorded by the controller; "
                "look in its work directory " + (job.work_dir or "")
            )
        result = await self._run(["tail", "-n", str(lines), "--", path], check=False)
        if not result.ok:
            raise SlurmError(f"cannot read {path}: {_first_error(result)}")
        return result.stdout

    # ----- changing ------------------------------------------------------------------------
    def job_environment(self, script: str) -> "JobEnvironment":
        """The environment a job of ``script`` gets (names only); :class:`ScriptError` when it asks for a secret."""
        from .job_env import job_environment
        from .sbatch import SbatchScript

        return job_environment(SbatchScript.parse(script), self.job_env)

    async def submit(self, script: str, extra_args: Sequence[str] = (), script_name: str | None = None) -> str:
        """Submit ``script`` exactly once and return its job id.

        The script is uploaded under the work dir, and ``sbatch`` carries a fresh token in
        ``--comment`` and the job's environment in ``--export`` (:meth:`job_environment`, never
        the environment sbatch runs in). If the link drops while ``sbatch`` runs, the token is
        looked up in the queue and in accounting before anything is ever submitted again.
        """
        environment = self.job_environment(script)
        sbatch_argv(environment, "", extra_args, "")  # refuses before anything is uploaded
        token = uuid.uuid4().hex
        name = script_name or f"{token}.sbatch"
        remote_path = f"{self.work_dir}/scripts/{name}"
        uploaded = await self.transport.put(script.encode(), remote_path)
        argv = sbatch_argv(environment, f"{TOKEN_PREFIX}{token}", extra_args, uploaded)
        try:
            result = await self._run(argv, idempotent=False, check=False)
        except TransportError as dropped:
            return await self._recover_submission(token, dropped)
        if not result.ok:  # the error names sbatch, not the `env` that runs it
            raise SlurmError(_first_error(replace(result, argv=result.argv[len(environment.prefix):])))
        return parse_sbatch_output(result.stdout)

    async def _recover_submission(self, token: str, dropped: TransportError) -> str:
        for attempt in range(self.lookup_attempts):
            found = await self.find_submission(token)
            if found:
                return found
            await asyncio.sleep(self.lookup_interval)
        raise SubmissionUnknownError(
            f"the link dropped during sbatch and no job carries token {TOKEN_PREFIX}{token}, so it was most "
            "likely not submitted; check `betty jobs` and submit again"
        ) from dropped

    async def find_submission(self, token: str) -> str | None:
        """The job id whose comment carries ``token``, in the queue or in accounting."""
        comment = f"{TOKEN_PREFIX}{token}"
        queue = await self._run(["squeue", "--noheader", "--format", f"%A{parsing.SEPARATOR}%k"], check=False)
        for line in queue.stdout.splitlines():
            ident, _, text = line.partition(parsing.SEPARATOR)
            if text.strip() == comment:
                return ident.strip()
        history = await self._run(
            ["sacct", "--parsable2", "--noheader", "--allocations", f"--delimiter={parsing.SEPARATOR}",
             "--starttime", "now-2days", "--format", "JobIDRaw,Comment"], check=False)
        for line in history.stdout.splitlines():
            ident, _, text = line.partition(parsing.SEPARATOR)
            if text.strip() == comment:
                return ident.strip()
        return None

    async def cancel(self, value: object) -> None:
        """Cancel a job (or one array task)."""
        ident = job_id(value)
        result = await self._run(["scancel", ident], idempotent=False, check=False)
        if not result.ok or "error" in result.stderr.lower():
            raise SlurmError(_first_error(result))


def sbatch_argv(environment: "JobEnvironment", comment: str, extra_args: Sequence[str], path: str) -> list[str]:
    """The command :meth:`SlurmClient.submit` runs; previews show it (with a stand-in comment) too.

    ``extra_args`` may not change the job's environment: that is the script's and the profile's to say.
    """
    overriding = [arg for arg in extra_args if arg.startswith("--exp")]  # --export, --export-file, abbreviated
    if overriding:
        raise SlurmError(f"sbatch {overriding[0]!r} would change the job's environment; "
                         "name variables in the script's #SBATCH --export= or the profile's job_env")
    return [*environment.prefix, "sbatch", "--parsable", f"--comment={comment}", environment.option, *extra_args, path]


def _is_job_id(text: str) -> bool:
    try:
        job_id(text)
    except UsageError:
        return False
    return True


def _missing(item: Any) -> bool:
    import pandas as pd

    if isinstance(item, str):
        return item == ""
    return item is None or bool(pd.isna(item))


def _job_from_row(row: Mapping[str, Any], paths: dict[str, str]) -> Job:
    def value(name: str) -> Any:
        item = row.get(name)
        return None if _missing(item) else item

    return Job(
        job_id=str(row["job_id"]), name=str(row["name"]), user=str(row["user"]), partition=str(row["partition"]),
        state=JobState.parse(str(row["state"])), exit_code=value("exit_code"), reason=value("reason"),
        submitted=_py(value("submitted")), started=_py(value("started")), ended=_py(value("ended")),
        elapsed=_py(value("elapsed")), time_limit=_py(value("time_limit")),
        nodes=_int(value("nodes")), nodelist=value("nodelist"),
        gpus=_int(value("gpus")) or 0, gpu_type=value("gpu_type"),
        max_rss_bytes=_int(value("max_rss_bytes")),
        comment=value("comment"), work_dir=paths.get("WorkDir") or value("work_dir"),
        stdout_path=paths.get("StdOut"), stderr_path=paths.get("StdErr"),
    )


def _int(item: Any) -> int | None:
    return None if item is None else int(item)


def _py(item: Any) -> Any:
    """pandas scalars → datetime/timedelta."""
    to_py = getattr(item, "to_pytimedelta", None) or getattr(item, "to_pydatetime", None)
    return to_py() if to_py else item


def _plain(value: str, what: str) -> str:
    if not re.match(r"^[A-Za-z0-9_.,:+/@-]+$", value):
        raise SlurmError(f"{what} {value[:40]!r} has characters Slurm names never use")
    return value


def _first_error(result: CommandResult) -> str:
    lines = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
    message = lines[0] if lines else f"exit code {result.exit_code}"
    return f"{result.argv[0]}: {message.removeprefix(result.argv[0] + ': ')}"
