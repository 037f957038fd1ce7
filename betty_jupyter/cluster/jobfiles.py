"""Where a job writes: the controller's record of one job's owner, directory and output files.

Job names, comments and paths are chosen by whoever submitted the job, so nothing here searches
free text for ``StdOut=``. Two exact sources, pure parsers for both:

* ``scontrol --json show job ID`` (Slurm 23.02 and later): JSON fields, with the numbers Slurm
  24 wraps as ``{"set": true, "number": N}`` read either way;
* ``scontrol show job ID`` in its multi-line form (Slurm 22.05 has no ``--json`` there), where
  every field Betty needs starts its own line (``   WorkDir=…``, ``   StdOut=…``). A value can
  only fake such a line by carrying a newline, which makes the line appear twice; a record with
  a doubled line, or more than one record, is refused rather than guessed at.

The paths are the controller's own expansion of ``%j``, ``%x``… (what ``scontrol`` prints).
An array's id names all its tasks; the text names the one task whose own id it is
(:attr:`SeveralRecords.task`), which the caller then asks for alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import SlurmError

_TEXT_FIELDS = {"UserId": "user", "WorkDir": "work_dir", "StdOut": "stdout", "StdErr": "stderr"}
_USER = re.compile(r"^(?P<name>.*)\((?P<uid>\d+)\) GroupId=")


@dataclass(frozen=True)
class JobFiles:
    """One job's owner, working directory and output files, as the controller records them."""

    job_id: str
    user: str
    user_id: int | None
    work_dir: str
    stdout: str | None
    stderr: str | None

    def stream(self, stream: str) -> str | None:
        """The file of ``stream`` (``out`` or ``err``)."""
        return self.stdout if stream == "out" else self.stderr


class SeveralRecords(SlurmError):
    """The controller printed several records for one id (an array, a heterogeneous job, or a forged name)."""

    def __init__(self, ident: str, count: int, task: str | None = None) -> None:
        self.task = task
        """``A_T`` of the one array task whose own job id is ``ident``, to ask for alone; None if not exactly one."""
        super().__init__(f"job {ident}'s record lists {count} jobs (an array, a heterogeneous job, or a name with "
                         f"line breaks); name one array task, e.g. {ident.partition('_')[0]}_1")


def _unclear(ident: str, why: str) -> SlurmError:
    return SlurmError(f"the controller's record of job {ident} cannot be read unambiguously ({why}); "
                      "Betty reads no file for it")


def parse_scontrol_json(text: str, ident: str) -> JobFiles | None:
    """The files of job ``ident`` from ``scontrol --json show job``; None when the controller has no such job."""
    try:
        jobs = json.loads(text).get("jobs")
    except (ValueError, AttributeError) as exc:
        raise _unclear(ident, "the JSON does not parse") from exc
    if not isinstance(jobs, list):
        raise _unclear(ident, "the JSON has no job list")
    if not jobs:
        return None
    if not all(isinstance(job, dict) for job in jobs):
        raise _unclear(ident, "a job is not a JSON object")
    named = [job for job in jobs if _names_json(job, ident)]
    if len(named) != 1:
        raise SeveralRecords(ident, len(jobs)) if len(jobs) > 1 else _unclear(ident, "the record names another job")
    job = named[0]
    return JobFiles(
        job_id=ident, user=str(job.get("user_name") or ""), user_id=_number(job.get("user_id")),
        work_dir=_text(job.get("current_working_directory")),
        stdout=_text(job.get("standard_output")) or None, stderr=_text(job.get("standard_error")) or None,
    )


def _names_json(job: dict[str, Any], ident: str) -> bool:
    """Whether a JSON record is job ``ident`` (its own id, or array ``A`` task ``T`` for ``A_T``)."""
    array, _, task = ident.partition("_")
    if task:
        return str(_number(job.get("array_job_id"))) == array and str(_number(job.get("array_task_id"))) == task
    return str(_number(job.get("job_id"))) == array


def _number(value: Any) -> int | None:
    """An integer Slurm printed plainly (22.05, 23.02) or wrapped as ``{"set": …, "number": …}`` (23.11+)."""
    if isinstance(value, dict):
        return _number(value.get("number")) if value.get("set", True) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_scontrol_text(text: str, ident: str) -> JobFiles | None:
    """The files of job ``ident`` from the multi-line ``scontrol show job``; None when it is not known."""
    lines = text.splitlines()
    starts = [line for line in lines if line.startswith("JobId=")]
    if not starts:
        return None
    if len(starts) != 1:
        raise SeveralRecords(ident, len(starts), _task_of(starts, ident))
    if not _names(starts[0], ident):
        raise _unclear(ident, "the record names another job")
    found: dict[str, str] = {}
    for line in lines:
        key, equals, value = line.removeprefix("   ").partition("=")
        if line.startswith("   ") and equals and key in _TEXT_FIELDS:
            if key in found:
                raise _unclear(ident, f"{key} appears twice")
            found[key] = value
    user = _USER.match(found.get("UserId", ""))
    if user is None or "WorkDir" not in found:
        raise _unclear(ident, "its owner or working directory is missing")
    return JobFiles(job_id=ident, user=user["name"], user_id=int(user["uid"]), work_dir=found["WorkDir"],
                    stdout=found.get("StdOut") or None, stderr=found.get("StdErr") or None)


def _names(first_line: str, ident: str) -> bool:
    """Whether a record's first line (``JobId=N [ArrayJobId=A ArrayTaskId=T] JobName=…``) is job ``ident``."""
    head = first_line.split(" JobName=", 1)[0].split()
    fields = dict(word.partition("=")[::2] for word in head)
    array, _, task = ident.partition("_")
    if task:
        return fields.get("ArrayJobId") == array and fields.get("ArrayTaskId") == task
    return fields.get("JobId") == array


def _task_of(starts: list[str], ident: str) -> str | None:
    """``A_T`` when exactly one record's own id is ``ident`` and it is an array task (asked for alone next)."""
    own = [dict(word.partition("=")[::2] for word in line.split(" JobName=", 1)[0].split())
           for line in starts if _names(line, ident)]
    if "_" in ident or len(own) != 1:
        return None
    array, task = own[0].get("ArrayJobId", ""), own[0].get("ArrayTaskId", "")
    return f"{array}_{task}" if array.isdigit() and task.isdigit() else None
