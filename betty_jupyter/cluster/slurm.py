"""``SlurmClient``: typed Slurm operations on top of any :class:`Transport`.

Command builders pin every output format (a person's ``SQUEUE_FORMAT`` cannot break them),
the parsers in ``parsing.py`` turn the text into DataFrames, and job ids are validated
before they reach a command line.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ..errors import PolicyError, SlurmError, SubmissionUnknownError, TransportError, UsageError
from . import jobfiles, parsing, preflight
from .arrays import array_job, by_array, is_task_of
from .delimited import run_read
from .queue_table import QueueTable
from .job_env import job_environment
from .jobs import Job, JobState, job_id, parse_sbatch_output
from .allowlist import AllowedCommand, CommandPolicy
from .file_reads import run_checked
from .preflight import Preflight, Quota
from .sbatch import SbatchScript
from ..transport.interface import CommandResult, Transport

PARTITION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
"""A partition name Betty passes to Slurm: a letter or digit, then letters, digits and ``_.+-``."""

if TYPE_CHECKING:
    import pandas as pd

    from .job_efficiency import JobEfficiency
    from .job_env import JobEnvironment

TOKEN_PREFIX = "betty:"
_ACCOUNTING_OFF = ("accounting storage is disabled", "Slurm accounting storage is disabled")


@dataclass(frozen=True)
class LogFile:
    """A job's output file as Betty will read it: the path, and the directories it must really lie under.

    Resolved once (:meth:`SlurmClient.log_file`) and read as it is (:meth:`SlurmClient.read_log`),
    so what a person approved is what is read, even if the job's record changes in between.
    """

    job_id: str
    stream: str
    path: str
    area: tuple[str, ...]

    def command(self, lines: int) -> AllowedCommand:
        """``tail -n LINES -- PATH``, checked under the area and against the secret paths."""
        if not 1 <= lines <= 100_000:
            raise SlurmError(f"lines must be between 1 and 100000, not {lines}")
        return CommandPolicy(self.area).check(["tail", "-n", str(lines), "--", self.path])


@dataclass(frozen=True)
class Snapshot:
    """What one ``sacct`` call (:meth:`SlurmClient.snapshot`) says of many jobs: each one's record now, and, read
    from the same text when asked for, what the finished ones used of their request."""

    jobs: dict[str, Job]
    """By job id; a job neither accounting nor the queue knows is left out."""
    accounting: str
    """What that ``sacct`` printed ("" when accounting is off)."""
    fields: tuple[tuple[str, str], ...]
    """Its format (:func:`~betty_jupyter.cluster.parsing.joined_fields`)."""
    tasks: dict[str, list[Job]] = field(default_factory=dict)
    """The records of the arrays' tasks (``4242_3``, and ``4242_[5-8]`` for those still pending), by array id."""

    def efficiency(self) -> "dict[str, JobEfficiency]":
        """The finished jobs' figures (:mod:`.job_efficiency`), by job id; {} when accounting is off."""
        # lazy: the efficiency parser; a tick in which no job ended needs none of it
        from .job_efficiency import parse_efficiency

        return {job.job_id: job for job in parse_efficiency(self.accounting, self.fields)} if self.accounting else {}


class SlurmClient:
    """Queue, partitions, history, submit, cancel and logs of one cluster.

    ``readable_roots`` (the profile's) are where job logs may be read, and, for the connected
    user's own jobs, the job's working directory too (another user's job chooses its own paths).
    """

    def __init__(self, transport: Transport, work_dir: str = "~/.betty", timeout: float = 60.0,
                 job_env: Sequence[str] = (), readable_roots: Sequence[str] = ()) -> None:
        self.transport = transport
        self.work_dir = work_dir.rstrip("/")
        self.timeout = timeout
        self.readable_roots = tuple(readable_roots)
        self._json_show: bool | None = None  # whether this cluster's scontrol has --json
        self._uid: int | None = None
        self._home: str | None = None
        self.job_env = tuple(job_env)
        """Variables jobs get beyond :data:`~betty_jupyter.cluster.job_env.JOB_NAMES` (the profile's ``job_env``)."""
        self.lookup_attempts = 6
        self.lookup_interval = 1.0

    async def _run(self, argv: Sequence[str], *, idempotent: bool = True, check: bool = True) -> CommandResult:
        result = await run_read(self.transport, argv, self.timeout, idempotent=idempotent)
        if check and not result.ok:
            raise SlurmError(_first_error(result))
        return result

    # ----- reading ------------------------------------------------------------------------
    async def queue(self, user: str | None = None, states: Iterable[str] | None = None,
                    partition: str | None = None) -> "pd.DataFrame":
        """Jobs in the queue (all users unless ``user``), one row per job or pending array (its ``tasks``
        say how many jobs the row stands for)."""
        return parsing.parse_queue(await self._queue_text(user, states, partition))

    async def queue_table(self, user: str | None = None, states: Iterable[str] | None = None,
                          partition: str | None = None) -> QueueTable:
        """:meth:`queue` read once and parsed lazily: plain rows or a DataFrame, whichever a face asks for."""
        return QueueTable(await self._queue_text(user, states, partition))

    async def queue_rows(self, user: str | None = None, states: Iterable[str] | None = None,
                         partition: str | None = None,
                         fields: Sequence[tuple[str, str]] = parsing.SQUEUE_FIELDS) -> list[dict[str, Any]]:
        """:meth:`queue` as plain dicts, without pandas (what ``betty jobs`` prints); only ``fields`` when given
        (a read that needs no job names leaves them out, and with them the text any user writes)."""
        return parsing.queue_rows(await self._queue_text(user, states, partition, fields), fields)

    async def _queue_text(self, user: str | None, states: Iterable[str] | None, partition: str | None,
                          fields: Sequence[tuple[str, str]] = parsing.SQUEUE_FIELDS) -> str:
        argv = ["squeue", "--noheader", "--format", parsing.format_string(fields)]
        if user:
            argv += ["--user", _plain(user, "user")]
        if states:
            argv += ["--states", ",".join(JobState.parse(s).value for s in states)]
        if partition:
            argv += ["--partition", _plain(partition, "partition")]
        return (await self._run(argv)).stdout

    async def partitions(self) -> "pd.DataFrame":
        """Partitions with state, nodes and CPUs (total and idle), memory, GPU types and time limit."""
        return parsing.parse_partitions(await self._partitions_text())

    async def partition_rows(self) -> list[dict[str, object]]:
        """:meth:`partitions` as plain dicts, without pandas (what ``betty partitions`` prints)."""
        return parsing.plain_partitions(await self._partitions_text())

    async def _partitions_text(self) -> str:
        # --exact: nodes of different memory on separate rows, or sinfo prints the smallest as "250+"
        argv = ["sinfo", "--noheader", "--exact", "--format", parsing.format_string(parsing.SINFO_FIELDS)]
        return (await self._run(argv)).stdout

    async def history(self, job_ids: Iterable[object] | None = None, since: str | datetime | None = None,
                      all_users: bool = False) -> "pd.DataFrame":
        """Finished and running jobs from accounting; from the queue when accounting is off."""
        ids = [job_id(i) for i in job_ids] if job_ids is not None else None
        text = await self._history_text(parsing.SACCT_FIELDS, ids, since, all_users)
        if text is None:
            return await self._history_from_queue(ids)
        return await self._complete_from_queue(parsing.parse_history(text))

    async def _history_text(self, fields: Sequence[tuple[str, str]], ids: list[str] | None,
                            since: str | datetime | None = None, all_users: bool = False) -> str | None:
        """What ``sacct`` prints of the jobs (steps included) in the format ``fields``; None when accounting is off."""
        argv = ["sacct", "--parsable2", "--noheader", f"--delimiter={parsing.SEPARATOR}",
                "--format", ",".join(field for field, _ in fields)]
        if ids:
            argv += ["--jobs", ",".join(ids)]
        if since is not None:
            argv += ["--starttime", since.strftime("%Y-%m-%dT%H:%M:%S") if isinstance(since, datetime) else _plain(str(since), "since")]
        if all_users:
            argv.append("--allusers")
        elif not ids:
            # sacct shows root (and the cluster's admin user) everyone's jobs unless told whose
            argv.append(f"--user={await self.login_uid()}")
        result = await self._run(argv, check=False)
        if not result.ok and any(text in result.stderr for text in _ACCOUNTING_OFF):
            return None
        if not result.ok:
            raise SlurmError(_first_error(result))
        return result.stdout

    async def efficiency(self, job_ids: Iterable[object] | None = None,
                         since: str | datetime | None = None) -> "list[JobEfficiency]":
        """What the connected person's finished jobs (``job_ids``, or those started since ``since``) used of what they
        asked for: one ``sacct`` call for all of them (:mod:`.job_efficiency`)."""
        # lazy: the efficiency parser; a session that never asks about efficiency does not load it
        from .job_efficiency import parse_efficiency, sacct_argv

        return parse_efficiency(await self.accounting(sacct_argv(job_ids, since)))

    async def accounting(self, argv: Sequence[str]) -> str:
        """What one ``sacct`` call (``argv``, its format pinned by the caller) prints; a one-line SlurmError when
        accounting refuses or is off."""
        if not argv or argv[0] != "sacct":
            raise SlurmError("accounting reads only with sacct")
        result = await self._run(argv, check=False)
        if not result.ok and any(text in result.stderr for text in _ACCOUNTING_OFF):
            raise SlurmError("this cluster keeps no accounting (AccountingStorageType is off), so there is no "
                             "record of what finished jobs used")
        if not result.ok:
            raise SlurmError(_first_error(result))
        return result.stdout

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
            array = _array_of(ident, history, queued)
            if array is not None:  # a job array: its tasks together, before any stub of its own id
                return array
            recorded = history[history["job_id"] == ident]
            record = {str(k): v for k, v in recorded.iloc[0].items()} if not recorded.empty else {}
        # While the controller keeps a job its record is complete and current; accounting
        # lags a little, so it only adds what the queue lacks (exit code, end, peak memory).
        if not live.empty:
            record.update({str(k): v for k, v in live.iloc[0].items() if not _missing(v)})
        if not record:
            raise SlurmError(f"job {ident} is not known to the cluster (not in the queue nor in accounting)")
        try:
            files = await self.job_files(ident)
        except SlurmError:
            files = None  # a record Betty cannot read exactly names no files; the job's state still shows
        return _job_from_row(record, _paths(files))

    async def snapshot(self, job_ids: Iterable[object]) -> "Snapshot":
        """Each job's record now, and what each finished one used of its request, for many jobs at once: one
        ``sacct`` call for all of them, its format the history's fields and the efficiency's together.

        The queue is asked (once) only for jobs accounting does not know yet. A job array is one job, its tasks
        together (:func:`~.arrays.array_job`).
        """
        # lazy: the efficiency fields and parser, for the efficiency columns of the same call
        from .job_efficiency import EFFICIENCY_FIELDS

        ids = [job_id(i) for i in job_ids]
        if not ids:
            return Snapshot({}, "", ())
        fields = parsing.joined_fields(parsing.SACCT_FIELDS, EFFICIENCY_FIELDS)
        text = await self._history_text(fields, ids)
        if text is None:
            history, text = await self._history_from_queue(ids), ""
        else:
            history = await self._complete_from_queue(parsing.parse_history(text, fields))
        rows = {str(row["job_id"]): row for row in history.to_dict("records")}
        arrays = {task.partition("_")[0] for task in rows if "_" in task}
        # The queue is asked for jobs accounting does not have, for rows still without a partition (accounting's
        # stub of a job the queue did not know by that id: an array whose tasks slurmdbd has not recorded yet, the
        # stub standing for one of them), and for arrays: slurmdbd records their tasks one by one, so while the
        # queue still knows an array (minutes after its end) its tasks there are the whole, current list.
        missing = [i for i in ids if i not in rows or i in arrays or not rows[i]["partition"]]
        if missing:
            queued = {str(row["job_id"]): row for row in (await self._history_from_queue(missing)).to_dict("records")}
            rows = _merged(rows, queued)
        read = {ident: _job_from_row({str(k): v for k, v in row.items()}, {}) for ident, row in rows.items()}
        tasks = by_array(read.values())  # an array's tasks answer for it, before any stub row of its own id
        jobs = {i: job for i in ids if (job := array_job(i, tasks.get(i, ())) or read.get(i)) is not None}
        return Snapshot(jobs, text, fields, {i: tasks[i] for i in ids if i in tasks})

    async def job_files(self, value: object) -> jobfiles.JobFiles | None:
        """The job's owner, working directory and output files from the controller (None once it forgot the job).

        ``scontrol --json`` where this Slurm has it, else the multi-line text, both read field by
        field (``jobfiles.py``); a record that cannot be read exactly raises :class:`SlurmError`.
        """
        ident = job_id(value)
        if self._json_show is not False:
            result = await self._run(["scontrol", "--json", "show", "job", ident], check=False)
            if result.ok:
                self._json_show = True
                return jobfiles.parse_scontrol_json(result.stdout, ident)
            if "--json" not in result.stderr:
                return _not_known(result)
            self._json_show = False
        result = await self._run(["scontrol", "show", "job", ident], check=False)
        if not result.ok:
            return _not_known(result)
        try:
            return jobfiles.parse_scontrol_text(result.stdout, ident)
        except jobfiles.SeveralRecords as several:
            if several.task is None:
                raise
            return await self.job_files(several.task)  # an array task, asked for alone: one record or a refusal

    async def log_file(self, value: object, stream: str = "out") -> LogFile:
        """Where the job writes ``stream`` (``out``/``err``) and where Betty may read it; refused early if not there.

        The area is the readable roots, plus the job's working directory when the job is the
        connected user's (another user's job chooses its own paths). Either way :meth:`read_log`
        checks the file it opens, on the cluster, before reading it.
        """
        if stream not in ("out", "err"):
            raise SlurmError(f"stream must be 'out' or 'err', not {stream!r}")
        ident = job_id(value)
        files = await self.job_files(ident)
        if files is None:
            job = await self.job(ident)  # says when the cluster does not know the job at all
            raise SlurmError(f"job {ident}'s {stream} file is no longer recorded by the controller; "
                             f"look in its work directory {job.work_dir or ''}")
        path = files.stream(stream)
        if not path:
            raise SlurmError(f"job {ident} has no {stream} file (it is not a batch job)")
        log = LogFile(ident, stream, path, await self._log_area(files))
        log.command(1)
        return log

    async def read_log(self, log: LogFile, lines: int = 50) -> str:
        """The last ``lines`` lines of ``log``: opened, checked and read in one step on the cluster."""
        allowed = log.command(lines)
        result = await run_checked(self.transport, allowed, log.area, keep="tail", timeout=self.timeout)
        if not result.ok:
            raise SlurmError(f"cannot read {log.path}: {_first_error(result)}")
        return result.stdout

    async def tail(self, value: object, stream: str = "out", lines: int = 50) -> str:
        """The last ``lines`` lines the job wrote to its stdout (``out``) or stderr (``err``)."""
        return await self.read_log(await self.log_file(value, stream), lines)

    async def read_work_file(self, job: Job, name: str, limit: int = 4096) -> str:
        """The first ``limit`` bytes of the file ``name`` in the working directory of ``job`` (one Betty submitted),
        opened and checked on the cluster as logs are; SlurmError when it cannot be read (missing, say)."""
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name.startswith("."):
            raise UsageError(f"{name!r} is not a plain file name")
        work_dir = job.work_dir or ""
        if work_dir.startswith("/") and work_dir.rstrip("/"):
            area = self.readable_roots + (work_dir,)
        else:  # accounting did not say: the controller does, while it remembers the job
            files = await self.job_files(job.job_id)
            if files is None:
                raise SlurmError(f"job {job.job_id}'s working directory is no longer recorded")
            work_dir, area = files.work_dir, await self._log_area(files)
        path = f"{work_dir.rstrip('/')}/{name}"
        allowed = CommandPolicy(area).check(["head", "-c", str(limit), "--", path])
        result = await run_checked(self.transport, allowed, area, limit=limit, timeout=self.timeout)
        if not result.ok:
            raise SlurmError(f"cannot read {path}: {_first_error(result)}")
        return result.stdout

    async def config(self) -> str:
        """What ``scontrol show config`` prints: the controller's settings; a one-line SlurmError when it fails."""
        return (await self._run(["scontrol", "show", "config"])).stdout

    async def login_uid(self) -> int:
        """The connected user's numeric id on the cluster (``id -u``, asked once)."""
        if self._uid is None:
            self._uid = int((await self._run(["id", "-u"])).stdout.strip())
        return self._uid

    async def _log_area(self, files: jobfiles.JobFiles) -> tuple[str, ...]:
        """The readable roots, and the job's working directory when the job is the connected user's."""
        own = files.user_id == await self.login_uid()
        whole = not files.work_dir.startswith("/") or files.work_dir.rstrip("/") == ""
        area = self.readable_roots + ((files.work_dir,) if own and not whole else ())
        if area:
            return area
        if not own:
            raise PolicyError(f"refused: job {files.job_id} belongs to {files.user or files.user_id}, and this "
                              "cluster has no readable roots; add its directory to the profile's readable_roots")
        raise PolicyError(f"refused: job {files.job_id} runs in {files.work_dir!r}, which Betty will not read "
                          "as a whole; add the log's directory to the profile's readable_roots")

    async def home(self) -> str:
        """The connected user's home directory on the cluster (``printenv HOME``, asked once)."""
        if self._home is None:
            home = (await self._run(["printenv", "HOME"])).stdout.strip()
            if not home.startswith("/") or "\n" in home:
                raise SlurmError("the cluster gave no usable home directory (printenv HOME)")
            self._home = home
        return self._home

    async def preflight(self, script: SbatchScript) -> Preflight:
        """What ``script`` names that must exist, checked on the cluster with one ``stat`` (and ``df`` for the
        free space where it writes); :attr:`Preflight.unchecked` says why when the cluster could not be asked."""
        try:
            named = preflight.named_paths(script, await self.home())
        except SlurmError as error:
            return Preflight((), unchecked=str(error))
        if not named:
            return Preflight(())
        result = await self._run(preflight.stat_argv([item.path for item in named]), check=False)
        if result.exit_code not in (0, 1):
            return Preflight((), unchecked=f"stat could not check the paths: {_first_error(result)}")
        checked = preflight.read_stat(result.stdout, named)
        target = preflight.writes_to(item.named for item in checked if item.kind == "directory")
        if target is None:
            return Preflight(checked)
        space = await self._run(preflight.free_space_argv(target), check=False)
        free = preflight.read_free_space(space.stdout) if space.ok else None
        quota = await self._quota(target)
        return Preflight(checked, free_bytes=free, free_at=target if free is not None else None, quota=quota,
                         quota_unknown_at=target if quota is None else None)

    async def _quota(self, path: str) -> Quota | None:
        """The quota of the file system holding ``path``, from the first of ``lfs quota`` and ``quota`` that
        answers; None when neither does (not installed, or an answer that is not a quota listing)."""
        for source, argv in preflight.quota_argvs(path):
            try:
                result = await self._run(argv, check=False)
            except TransportError:  # not installed where the commands run, or no answer in time
                continue
            if result.exit_code == 0 or (result.exit_code == 1 and result.stdout.strip()):  # 1: over a quota
                found = preflight.read_quota(result.stdout, path, source)
                if found is not None:
                    return found
        return None

    # ----- changing ------------------------------------------------------------------------
    def job_environment(self, script: str | SbatchScript) -> "JobEnvironment":
        """The environment a job of ``script`` gets (names only); :class:`ScriptError` when it asks for a secret."""
        parsed = script if isinstance(script, SbatchScript) else SbatchScript.parse(script)
        return job_environment(parsed, self.job_env)

    async def submit(self, script: str | SbatchScript, extra_args: Sequence[str] = (),
                     script_name: str | None = None) -> str:
        """Submit ``script`` exactly once and return its job id.

        The script is uploaded under the work dir, and ``sbatch`` carries a fresh token in
        ``--comment`` and the job's environment in ``--export`` (:meth:`job_environment`, never
        the environment sbatch runs in). If the link drops while ``sbatch`` runs, the token is
        looked up in the queue and in accounting before anything is ever submitted again. A script
        already read (:class:`SbatchScript`, checked) is not read again; its text is what is uploaded.
        """
        if not isinstance(script, SbatchScript):
            script = SbatchScript.parse(script)
        environment = self.job_environment(script)
        sbatch_argv(environment, "", extra_args, "")  # refuses before anything is uploaded
        token = uuid.uuid4().hex
        name = script_name or f"{token}.sbatch"
        remote_path = f"{self.work_dir}/scripts/{name}"
        uploaded = await self.transport.put(script.text.encode(), remote_path)
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

    async def move(self, value: object, partition: str) -> None:
        """Put a waiting job on another partition (``scontrol update JobId=… Partition=…``); Slurm lets a person move
        only a job that has not started, and says why not in one line otherwise."""
        ident = job_id(value)
        if not PARTITION_NAME.fullmatch(partition):
            raise UsageError(f"partition {partition[:64]!r} is not a partition name")
        result = await self._run(["scontrol", "update", f"JobId={ident}", f"Partition={partition}"],
                                 idempotent=False, check=False)
        if not result.ok or "error" in result.stderr.lower():
            raise SlurmError(_first_error(result))

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


def _not_known(result: CommandResult) -> jobfiles.JobFiles | None:
    """None when ``scontrol`` says the job is not known; any other failure is a :class:`SlurmError`."""
    if "Invalid job id" not in result.stderr + result.stdout:
        raise SlurmError(_first_error(result))
    return None


def _paths(files: jobfiles.JobFiles | None) -> dict[str, str]:
    if files is None:
        return {}
    found = {"WorkDir": files.work_dir, "StdOut": files.stdout or "", "StdErr": files.stderr or ""}
    return {key: value for key, value in found.items() if value}


def _is_job_id(text: str) -> bool:
    try:
        job_id(text)
    except UsageError:
        return False
    return True


def _missing(item: Any) -> bool:
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    if isinstance(item, str):
        return item == ""
    return item is None or bool(pd.isna(item))


def _merged(accounted: dict[str, Any], queued: dict[str, Any]) -> dict[str, Any]:
    """Accounting's rows and the queue's, by job id: accounting's record of an ended job (its exit code is only
    there), else the queue's, which is current. Of an array the queue knows, accounting's record of the pending
    tasks (``12_[3-8]``) is left out: it may still count tasks that have started since."""
    known = {key.partition("_")[0] for key in queued if "_" in key}
    merged = {key: row for key, row in accounted.items() if not ("[" in key and key.partition("_")[0] in known)}
    for key, row in queued.items():
        kept = merged.get(key)
        if kept is None or not kept["partition"] or not JobState.parse(str(kept["state"])).finished:
            merged[key] = row
    return merged


def _array_of(ident: str, history: "pd.DataFrame", queued: "pd.DataFrame") -> Job | None:
    """Job ``ident`` as an array (:func:`~.arrays.array_job`) from accounting's and the queue's rows of its tasks (the
    queue's, which are current, over accounting's); None when neither has a task of it."""
    rows = {str(row["job_id"]): row for frame in (history, queued) for row in frame.to_dict("records")}
    tasks = by_array(_job_from_row({str(k): v for k, v in row.items()}, {}) for key, row in rows.items()
                     if is_task_of(key, ident))
    return array_job(ident, tasks.get(ident, ()))


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
        max_rss_bytes=_int(value("max_rss_bytes")), max_rss_step=value("max_rss_step"),
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
