"""Why a job failed and what to change, decided in code from its accounting, its log and its script.

:func:`diagnose` names one of four causes — host memory (``out_of_memory``), GPU memory
(``cuda_out_of_memory``), the time limit (``timeout``) or something else (``failed_other``) —
with the evidence it rests on (accounting fields, log lines), and, when a safe correction
exists, the corrected script: the original with only the lines that must change changed
(``#SBATCH`` lines through :meth:`SbatchScript.with_options`; for GPU memory, one training
argument of a kind Betty recognises). When no safe correction exists it says why and leaves
``corrected_script`` empty: nothing is proposed.

Pure: no cluster calls, no Jupyter. The caller brings the job, the log, the script and the
partitions (:func:`partition_limits` builds them from ``sinfo``).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

from ..cluster.commands import partition_offers
from ..cluster.jobs import Job, JobState
from ..cluster.parsing import size_bytes
from ..cluster.sbatch import SbatchScript, format_minutes
from ..cluster.tables import size_text
from ..errors import BettyError
from ..gpu import gpu_type
from ..safe_text import fenced, markdown_text
from ..wiki.regions import without_markers
from .progress import Progress, last_progress

if TYPE_CHECKING:
    import pandas as pd

    from ..cluster.sbatch import Directive
    from ..gpu import GpuType

Cause = Literal["out_of_memory", "cuda_out_of_memory", "timeout", "failed_other"]
TITLES: dict[str, str] = {"out_of_memory": "Out of memory", "cuda_out_of_memory": "Out of GPU memory",
                          "timeout": "Out of time", "failed_other": "Failed"}
MIB, GIB = 2**20, 2**30
QUOTED_LINES = 3
_CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory|"
                       r"CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation", re.I)
_HOST_OOM = re.compile(r"oom[-_ ]kill|Exceeded (?:job )?memory limit|out-of-memory handler|\bMemoryError\b|"
                       r"std::bad_alloc|Cannot allocate memory", re.I)
_TIME_LIMIT = re.compile(r"DUE TO TIME LIMIT", re.I)
_ERROR = re.compile(r"error|Traceback|Exception|No such file|command not found|Segmentation fault|Killed|Abort", re.I)
CHECKPOINTING = ("gradient_checkpointing", "enable_activation_checkpointing", "activation_checkpointing")
MICRO_BATCH = ("per_device_train_batch_size", "micro_batch_size", "train.micro_batch_size")
ACCUMULATION = ("gradient_accumulation_steps", "train.gradient_accumulation_steps")
_OFF, _ON = ("false", "0", "no", "none"), {"false": "true", "False": "True", "FALSE": "TRUE", "0": "1", "no": "yes"}


@dataclass(frozen=True)
class EarlierRun:
    """An earlier run of the same job (the same ``--job-name``), as accounting recorded it: what a memory request
    can rest on when the failed run left no peak."""

    job_id: str
    state: str
    memory_requested_bytes: int | None
    memory_peak_bytes: int | None


@dataclass(frozen=True)
class PartitionLimits:
    """What one partition lets a job have, as plain data: a node's memory, the time limit, GPUs per node."""

    name: str
    memory_bytes: int | None = None
    max_time_minutes: int | None = None
    gpus: Mapping[str, int] = field(default_factory=dict)
    default: bool = False


def partition_limits(partitions: "pd.DataFrame") -> list[PartitionLimits]:
    """Each partition's limits, from :meth:`SlurmClient.partitions` (memory: its smallest node)."""
    import pandas as pd  # lazy: pandas is heavy; opening a session reads no table

    rows = partitions.to_dict("records")
    return [PartitionLimits(offer.name, None if pd.isna(row["memory_bytes"]) else int(row["memory_bytes"]),
                            offer.max_time_minutes, dict(offer.gpus), bool(row["default"]))
            for offer, row in zip(partition_offers(partitions), rows)]


@dataclass(frozen=True)
class Diagnosis:
    """Why a job ended as it did, what shows it, and the corrected script when a safe one exists."""

    cause: Cause
    summary: str
    evidence: tuple[str, ...]
    changes: tuple[str, ...] = ()
    """What the corrected script changes, one line each."""
    suggestions: tuple[str, ...] = ()
    """What else might help, for a person to decide (not in the corrected script)."""
    corrected_script: str | None = None

    @property
    def unchanged(self) -> bool:
        """Whether no safe correction exists (then nothing is proposed)."""
        return self.corrected_script is None

    def as_record(self, original: str) -> dict[str, Any]:
        """JSON-ready, with the diff against ``original`` and the time it was made: what the ledger keeps."""
        corrected = self.corrected_script
        return {"cause": self.cause, "title": TITLES[self.cause], "summary": self.summary,
                "evidence": list(self.evidence), "changes": list(self.changes),
                "suggestions": list(self.suggestions), "corrected_script": corrected,
                "diff": script_diff(original, corrected) if corrected is not None else "",
                "diagnosed": datetime.now().strftime("%Y-%m-%d %H:%M:%S")}


def script_diff(original: str, corrected: str, before: str = "original", after: str = "resubmission",
                context: int = 3) -> str:
    """A unified diff of two scripts (``context`` lines around each change)."""
    return "\n".join(difflib.unified_diff(original.splitlines(), corrected.splitlines(), before, after, n=context,
                                          lineterm=""))


def page_section(record: Mapping[str, Any]) -> str:
    """The ``## Diagnosis`` section of the experiment's page (inside Betty's region), from the ledger's record.

    Evidence is quoted from the job's log, so every value is written as plain text and the diff
    sits in a fence it cannot close.
    """
    title, summary = markdown_text(record.get("title", "Diagnosis")), markdown_text(record.get("summary", ""))
    lines = ["## Diagnosis", "", f"**{title}**: {summary}.", ""]
    for heading, key in (("Evidence", "evidence"), ("The correction", "changes"), ("Also worth trying", "suggestions")):
        items = [markdown_text(" ".join(str(item).splitlines())) for item in record.get(key) or []]
        lines += [f"{heading}:", "", *(f"- {item}" for item in items), ""] if items else []
    diff = str(record.get("diff") or "")
    if diff:
        lines += [fenced(diff, "diff"), ""]
    lines += [_resubmission_line(record), "", f"_Diagnosed {record.get('diagnosed', '')} by Betty's job babysitter._"]
    return without_markers("\n".join(lines))


def _resubmission_line(record: Mapping[str, Any]) -> str:
    step = record.get("resubmission") or {}
    state = step.get("state")
    if step.get("tasks"):
        return _retry_line(step)
    if not record.get("corrected_script"):
        return "Nothing was resubmitted: Betty has no safe correction for this failure."
    if state == "submitted":
        return (f"Resubmitted as job {markdown_text(step.get('job_id'))}: [{step.get('slug')}]({step.get('slug')}.md)"
                + (f", approved by {markdown_text(step['approver'])}." if step.get("approver") else "."))
    if state == "not submitted":
        reason = markdown_text(step.get("reason") or "the proposal was not approved")
        return (f"Not resubmitted: {reason}. The corrected script is the diff above; submit it yourself if you "
                "still want it.")
    card = markdown_text(step.get("task") or "job babysitter")
    return (f"The resubmission waits for a person's approval: the card “{card}” in the side panel, a notebook's "
            "%betty cards or GET /betty/api/approvals.")


def _retry_line(step: Mapping[str, Any]) -> str:
    """What became of a sweep's failed tasks, resubmitted by index."""
    tasks = markdown_text(", ".join(str(task) for task in step.get("tasks") or []))
    if step.get("state") == "submitted":
        return (f"Tasks {tasks} resubmitted as job array {markdown_text(step.get('job_id'))}, the same script"
                + (f", approved by {markdown_text(step['approver'])}." if step.get("approver") else "."))
    if step.get("state") == "not submitted":
        reason = markdown_text(step.get("reason") or "the proposal was not approved")
        return f"Tasks {tasks} not resubmitted: {reason}. `betty sweeps retry` proposes them again."
    card = markdown_text(step.get("task") or "job babysitter")
    return (f"Resubmitting tasks {tasks} waits for a person's approval: the card “{card}” in the side panel, a "
            "notebook's %betty cards or GET /betty/api/approvals.")


@dataclass(frozen=True)
class _Case:
    """What one diagnosis looks at."""

    job: Job
    script: SbatchScript
    lines: list[str]
    partition: PartitionLimits | None
    partitions: Sequence[PartitionLimits]
    gpu_estimate: Mapping[str, Any] | None
    requested_memory: int | None
    earlier: Sequence[EarlierRun] = ()


def diagnose(job: Job, log_tail: str | None, script_text: str, partitions: Sequence[PartitionLimits],
             gpu_estimate: Mapping[str, Any] | None = None, *,
             requested_memory_bytes: int | None = None, earlier: Sequence[EarlierRun] = ()) -> Diagnosis:
    """Why ``job`` (which ran ``script_text``) failed, and the corrected script when a safe one exists.

    ``requested_memory_bytes`` is accounting's ReqMem, used when the script asks for no memory
    itself; ``earlier`` are the earlier runs of the same job, what a memory request rests on when
    this run left no peak. ScriptError when the script cannot be read.
    """
    script = SbatchScript.parse(script_text)
    case = _Case(job, script, (log_tail or "").splitlines(), _partition_of(job, script, partitions), partitions,
                 gpu_estimate, requested_memory_bytes, tuple(run for run in earlier if run.job_id != job.job_id))
    cause = cause_of(job, case.lines)
    handlers: dict[str, Callable[[_Case], Diagnosis]] = {
        "out_of_memory": _host_memory, "cuda_out_of_memory": _gpu_memory, "timeout": _time, "failed_other": _other}
    return handlers[cause](case)


def cause_of(job: Job, lines: Sequence[str]) -> Cause:
    """The cause, from the job's state first and then from what its log says."""
    if job.state is JobState.TIMEOUT or _quoted(lines, _TIME_LIMIT):
        return "timeout"
    if job.state is JobState.OUT_OF_MEMORY:
        return "out_of_memory"
    if _quoted(lines, _CUDA_OOM):
        return "cuda_out_of_memory"
    if _quoted(lines, _HOST_OOM):
        return "out_of_memory"
    return "failed_other"


# ----- host memory ---------------------------------------------------------------------------------
HEADROOM = 1.25
"""What a new request adds to a measured peak (memory) or an extrapolated run time: 25%."""


def _host_memory(case: _Case) -> Diagnosis:
    option, asked, count = _memory_request(case)
    job = case.job
    peak = job.max_rss_bytes
    evidence = [_state_line(job)]
    if peak:
        evidence.append(f"peak memory ({_peak_source(job)}) {size_text(peak)}"
                        + (f" of the {size_text(asked)} asked" if asked else ""))
    elif asked:
        evidence.append(f"it asked for {size_text(asked)} (--{option}); accounting recorded no peak before it was killed")
    evidence += _quoted(case.lines, _HOST_OOM)
    evidence += [_earlier_line(run) for run in case.earlier[-3:]]
    summary = "the job needed more memory than it asked for" + (f" ({size_text(asked)})" if asked else "")
    cap = case.partition.memory_bytes if case.partition else None
    more = _more_memory(asked, job, cap, _name(case.partition), case.earlier)
    if more is None:
        if asked and (cap is None or asked < cap) and not _peak_passed(job, asked):
            return Diagnosis("out_of_memory", f"{summary}; how much it needs is not known",
                             tuple(evidence), suggestions=_unknown_need(asked, option, job, cap))
        return Diagnosis("out_of_memory", summary, tuple(evidence), suggestions=_no_more_memory(case, asked, cap))
    new, why = more
    value = _size_text(math.ceil(new / count))
    before = f"{_size_text(math.ceil(asked / count))} → " if asked else "added: "
    corrected = case.script.with_options(**{option: value}).text
    return Diagnosis("out_of_memory", summary, tuple(evidence), (f"--{option} {before}{value}: {why}",),
                     corrected_script=corrected)


def _more_memory(asked: int | None, job: Job, cap: int | None, partition: str,
                 earlier: Sequence[EarlierRun] = ()) -> tuple[int, str] | None:
    """The whole request to ask for next and why, within a node; None when nothing known says how much.

    From the measured peak (the largest MaxRSS of the job's steps) plus :data:`HEADROOM`, when
    it passed the request; otherwise from the job's earlier runs (:func:`_from_earlier_runs`),
    saying why this run's peak could not be used. Never a blind multiple of the request.
    """
    if asked == 0:
        return None  # --mem=0 already means all of a node's memory
    peak = job.max_rss_bytes
    if peak and (asked is None or peak > asked):
        new = _with_headroom(peak)
        why = f"it peaked at {size_text(peak)} ({_peak_source(job)}); asking {size_text(new)} = peak + 25%, rounded up"
    elif asked:
        known = _from_earlier_runs(asked, earlier)
        if known is None:
            return None
        new, because = known
        unusable = (f"its measured peak, {size_text(peak)} ({_peak_source(job)}), did not pass the {size_text(asked)} "
                    "it asked for: the limit stopped it before it showed what it needs" if peak
                    else "accounting measured no peak (MaxRSS) before it was killed")
        why = f"{unusable}; {because}"
    else:
        return None
    if cap and new > cap:
        new, why = cap, f"{why} — capped at the {size_text(cap)} of a node in partition {partition}"
    return None if asked and new <= asked else (new, why)


def _from_earlier_runs(asked: int, earlier: Sequence[EarlierRun]) -> tuple[int, str] | None:
    """What the job's earlier runs say it needs, above ``asked``: the smallest request one of them completed with,
    else the largest peak one of them reached plus :data:`HEADROOM`; None when they say nothing more."""
    completed = [run for run in earlier if run.state.split(" ")[0] == "COMPLETED"
                 and run.memory_requested_bytes and run.memory_requested_bytes > asked]
    if completed:
        run = min(completed, key=lambda each: each.memory_requested_bytes or 0)
        size = run.memory_requested_bytes or 0
        return size, f"job {run.job_id}, an earlier run of it, completed with {size_text(size)}; asking that"
    peaks = [run for run in earlier if run.memory_peak_bytes and _with_headroom(run.memory_peak_bytes) > asked]
    if peaks:
        run = max(peaks, key=lambda each: each.memory_peak_bytes or 0)
        peak = run.memory_peak_bytes or 0
        new = _with_headroom(peak)
        return new, (f"job {run.job_id}, an earlier run of it, peaked at {size_text(peak)} (MaxRSS); asking "
                     f"{size_text(new)} = that peak + 25%, rounded up")
    return None


def _peak_passed(job: Job, asked: int) -> bool:
    return bool(job.max_rss_bytes and job.max_rss_bytes > asked)


def _earlier_line(run: EarlierRun) -> str:
    asked = size_text(run.memory_requested_bytes) if run.memory_requested_bytes else "unknown memory"
    peak = f", peak {size_text(run.memory_peak_bytes)} (MaxRSS)" if run.memory_peak_bytes else ", no peak recorded"
    return f"earlier run: job {run.job_id} asked for {asked}, {run.state.split(' ')[0]}{peak}"


def _unknown_need(asked: int, option: str, job: Job, cap: int | None) -> tuple[str, ...]:
    """What to do when neither this run nor an earlier one shows how much memory the job needs."""
    peak = (f"its measured peak, {size_text(job.max_rss_bytes)}, is only where the limit stopped it"
            if job.max_rss_bytes else "accounting recorded no peak (MaxRSS) before the limit killed it")
    room = f" (a node of its partition has {size_text(cap)})" if cap else ""
    return (f"Betty does not know how much memory it needs: {peak}, and no earlier run of it says more; so it "
            f"proposes no new --{option} rather than guess",
            f"set --{option} to what its data needs{room}, or run it once with more and read its peak with "
            "`betty efficiency JOBID`: a later failure is then sized from that run")


def _peak_source(job: Job) -> str:
    return f"MaxRSS of step {job.max_rss_step}" if job.max_rss_step else "MaxRSS"


def _with_headroom(peak: int) -> int:
    """The peak plus 25%, rounded up to 64 MiB below 1 GiB, to 256 MiB below 16 GiB, to whole GiB above."""
    size = math.ceil(HEADROOM * peak)
    step = 64 * MIB if size < GIB else 256 * MIB if size < 16 * GIB else GIB
    return math.ceil(size / step) * step


def _memory_request(case: _Case) -> tuple[str, int | None, int]:
    """(the option to change, the job's whole request in bytes, what a per-CPU or per-GPU value is multiplied by)."""
    script = case.script
    if script.get("mem") is not None:
        return "mem", script.memory_bytes(), 1
    for option, count in (("mem-per-cpu", _cpus(script)), ("mem-per-gpu", _gpus(script))):
        value = script.get(option)
        if value is not None:
            per = size_bytes(value)
            return option, None if per is None else per * count, count
    return "mem", case.requested_memory, 1


def _no_more_memory(case: _Case, asked: int | None, cap: int | None) -> tuple[str, ...]:
    if asked is None and not case.job.max_rss_bytes:
        return ("ask for memory explicitly (#SBATCH --mem=…): Betty cannot tell how much the job had",)
    bigger = [p.name for p in case.partitions if p.memory_bytes and cap and p.memory_bytes > cap]
    found = [f"it already asks for all the memory a node of partition {_name(case.partition)} has "
             f"({size_text(cap or 0)}); make the job use less (smaller chunks of data, fewer workers)"]
    if bigger:
        found.append(f"partitions with bigger nodes: {', '.join(bigger)}")
    return tuple(found)


def _cpus(script: SbatchScript) -> int:
    return _whole(script.get("cpus-per-task")) * _whole(script.get("ntasks"))


def _gpus(script: SbatchScript) -> int:
    request = script.gpu_request()
    return request[1] if request else 1


def _whole(value: str | None) -> int:
    digits = re.match(r"\d+", value or "")
    return max(int(digits.group()), 1) if digits else 1


# ----- time ------------------------------------------------------------------------------------------
def _time(case: _Case) -> Diagnosis:
    job, script = case.job, case.script
    limit = script.time_minutes()
    if limit is None and job.time_limit:
        limit = math.ceil(job.time_limit.total_seconds() / 60)
    progress = last_progress(case.lines)
    evidence = [_state_line(job)]
    if job.elapsed is not None and limit:
        evidence.append(f"it ran {_clock(job.elapsed.total_seconds())} of its {format_minutes(limit)} time limit")
    if progress is not None:
        evidence.append(f"the last progress it printed: {progress.shown}")
    evidence += _quoted(case.lines, _TIME_LIMIT)
    summary = "the job reached its time limit before it finished"
    cap = case.partition.max_time_minutes if case.partition else None
    longer = _longer_time(limit, job, progress)
    new, why = longer if longer else (None, "")
    if new is not None and cap and new > cap:
        new, why = cap, f"{why} — capped at partition {_name(case.partition)}'s limit"
    if not limit or new is None or new <= limit:
        longer_partitions = [p.name for p in case.partitions
                             if cap and (p.max_time_minutes is None or p.max_time_minutes > cap)]
        tips = ["save checkpoints as it runs and resume from the last one in a new job"]
        if limit and cap:
            tips.insert(0, f"it already asks for the whole time limit of partition {_name(case.partition)} "
                        f"({format_minutes(cap)})")
        if longer_partitions:
            tips.append(f"partitions with a longer limit: {', '.join(longer_partitions)}")
        return Diagnosis("timeout", summary, tuple(evidence), suggestions=tuple(tips))
    before = f"{script.get('time')} → " if script.get("time") is not None else "added: "
    change = f"--time {before}{format_minutes(new)}: {why}"
    return Diagnosis("timeout", summary, tuple(evidence), (change,),
                     corrected_script=script.with_options(time=format_minutes(new)).text)


def _longer_time(limit: int | None, job: Job, progress: "Progress | None") -> tuple[int, str] | None:
    """The time limit (minutes) to ask for next and why: from the progress it printed, else twice the limit."""
    if not limit:
        return None
    elapsed = job.elapsed.total_seconds() if job.elapsed is not None else None
    if progress is not None and elapsed and 0 < progress.done < 1:
        whole = elapsed / progress.done
        new = _round_minutes(HEADROOM * whole / 60)
        if new > limit:
            return new, (f"it printed {progress.shown} after {_clock(elapsed)}, so the whole run takes about "
                         f"{_clock(whole)}; asking {format_minutes(new)} = that + 25%, rounded up")
    if progress is None:
        reason = ("it printed no progress Betty can read (such as epoch 3/10, step 1200/5000 or 45%)")
    else:
        reason = f"its last progress, {progress.shown}, does not tell how long the rest takes"
    return 2 * limit, f"{reason}; asking twice the limit it reached"


def _round_minutes(minutes: float) -> int:
    """Whole minutes below an hour, quarter hours below a day, whole hours above."""
    step = 1 if minutes < 60 else 15 if minutes < 1440 else 60
    return math.ceil(minutes / step) * step


# ----- GPU memory ----------------------------------------------------------------------------------
def _gpu_memory(case: _Case) -> Diagnosis:
    current = _known_gpu(case.job.gpu_type or _requested_gpu_type(case.script))
    evidence = [_state_line(case.job), *_quoted(case.lines, _CUDA_OOM)]
    if current is not None:
        evidence.append(f"it ran on {current.name} cards ({current.memory_gib:.0f} GiB each)")
    evidence += _estimate_lines(case.gpu_estimate, current)
    summary = "the job ran out of GPU memory"
    corrected, changes = _training_change(case.script)
    if corrected is None:
        corrected, changes = _bigger_gpu(case, current)
    suggestions = [tip for tip, applied in (
        ("turn on gradient (activation) checkpointing (e.g. --gradient_checkpointing True)", "checkpointing"),
        ("halve the micro-batch and double gradient accumulation (the same effective batch)", "micro-batch"),
    ) if not any(applied in change for change in changes)]
    suggestions.append("`betty gpu advise` (or the gpu_advise tool) shows what fits on this cluster's GPUs")
    return Diagnosis("cuda_out_of_memory", summary, tuple(evidence), tuple(changes), tuple(suggestions),
                     corrected)


def _estimate_lines(estimate: Mapping[str, Any] | None, gpu: "GpuType | None") -> list[str]:
    peak = (estimate or {}).get("peak_gib")
    if not isinstance(peak, (int, float)) or isinstance(peak, bool):
        return []
    line = f"Betty's estimate before it was submitted: {peak:.1f} GiB per GPU"
    if gpu is not None:
        line += (f", over the {gpu.memory_gib:.0f} GiB of a {gpu.name}" if peak > gpu.memory_gib
                 else f", under the {gpu.memory_gib:.0f} GiB of a {gpu.name}: the job used more than estimated")
    return [line]


def _training_change(script: SbatchScript) -> tuple[str | None, list[str]]:
    """Turn on checkpointing, or else halve the micro-batch with twice the accumulation, where the body says so."""
    body = script.body
    head = script.text[: len(script.text) - len(body)]
    flag = _only_argument(body, CHECKPOINTING)
    if flag is not None and flag.group("value").lower() in _OFF:
        value = _ON.get(flag.group("value"), "true")
        return (head + _spliced(body, flag, value),
                [f"gradient checkpointing {flag.group('value')} → {value} ({_argument_name(flag)})"])
    batch, steps = _only_argument(body, MICRO_BATCH), _only_argument(body, ACCUMULATION)
    if batch is None or steps is None or not batch.group("value").isdigit() or not steps.group("value").isdigit():
        return None, []
    size, accumulation = int(batch.group("value")), int(steps.group("value"))
    if size < 2:
        return None, []
    smaller = size // 2 if size % 2 == 0 else 1
    more = accumulation * (size // smaller)
    first, second = sorted(((batch, str(smaller)), (steps, str(more))), key=lambda pair: -pair[0].start("value"))
    edited = _spliced(_spliced(body, *first), *second)
    return head + edited, [f"micro-batch {size} → {smaller} and gradient accumulation {accumulation} → {more} "
                           f"({_argument_name(batch)}, {_argument_name(steps)}): the same effective batch"]


def _only_argument(body: str, names: Sequence[str]) -> "re.Match[str] | None":
    """The one place the body passes one of ``names`` (``--name value``, ``--name=value``, ``name=value``)."""
    spelt = "|".join(re.escape(name).replace("_", "[_-]") for name in names)
    pattern = re.compile(rf"(?<![\w.-])(?:--?(?P<dashed>{spelt})(?:=|[ \t]+)|(?P<bare>{spelt})=)"
                         rf"(?P<value>[A-Za-z0-9.]+)(?![\w.-])")
    found = list(pattern.finditer(body))
    return found[0] if len(found) == 1 else None


def _argument_name(match: "re.Match[str]") -> str:
    return match.group("dashed") or match.group("bare")


def _spliced(text: str, match: "re.Match[str]", value: str) -> str:
    return text[: match.start("value")] + value + text[match.end("value"):]


def _bigger_gpu(case: _Case, current: "GpuType | None") -> tuple[str | None, list[str]]:
    """The same job on the smallest larger GPU type a partition offers (in the job's partition first)."""
    found = _gpu_directive(case.script)
    request = case.script.gpu_request()
    if current is None or found is None or request is None or found.value is None:
        return None, []
    peak = (case.gpu_estimate or {}).get("peak_gib")
    floor = max(current.memory_gib, float(peak) if isinstance(peak, (int, float)) else 0.0)
    here = case.partition.name if case.partition else None
    offers = [(gpu.memory_mib, partition.name != here, partition.name, name, gpu)
              for partition in case.partitions for name, cards in partition.gpus.items()
              if cards >= request[1] and (gpu := _known_gpu(name)) is not None and gpu.memory_gib > floor]
    if not offers:
        return None, []
    _, _, partition, name, gpu = min(offers)
    options = {found.option: _retyped(found.value, found.option, name)}
    if partition != here:
        options["partition"] = partition
    moved = f" in partition {partition}" if partition != here else ""
    change = (f"GPU {current.name} ({current.memory_gib:.0f} GiB) → {gpu.name} ({gpu.memory_gib:.0f} GiB){moved}: "
              f"--{found.option} {found.value} → {options[found.option]}")
    return case.script.with_options(**options).text, [change]


def _retyped(value: str, option: str, kind: str) -> str:
    """A GPU request with its type replaced (``gpu:a100:2`` → ``gpu:h100:2``; ``2`` → ``h100:2``)."""
    items = []
    for item in value.split(","):
        parts = item.split(":")
        if option == "gres":
            if parts[0].removeprefix("gres/") == "gpu":
                count = parts[-1] if len(parts) > 1 and parts[-1].isdigit() else None
                parts = [parts[0], kind] + ([count] if count else [])
        else:
            parts = [kind] + ([parts[-1]] if parts[-1].isdigit() else [])
        items.append(":".join(parts))
    return ",".join(items)


def _gpu_directive(script: SbatchScript) -> "Directive | None":
    """The directive that asks for GPUs, chosen as :meth:`SbatchScript.gpu_request` chooses it."""
    for option in ("gpus-per-node", "gres", "gpus"):
        found = [directive for directive in script.directives if directive.option == option]
        if found:
            return found[-1]
    return None


def _requested_gpu_type(script: SbatchScript) -> str | None:
    request = script.gpu_request()
    return request[0] if request else None


def _known_gpu(name: str | None) -> "GpuType | None":
    if not name:
        return None
    try:
        return gpu_type(name)
    except BettyError:
        return None


# ----- anything else ---------------------------------------------------------------------------------
def _other(case: _Case) -> Diagnosis:
    errors = [line.strip()[:200] for line in case.lines if _ERROR.search(line) and line.strip()][-QUOTED_LINES:]
    return Diagnosis("failed_other", f"the job failed with exit code {case.job.exit_code or 'unknown'}; Betty "
                     "sees no memory or time limit behind it", (_state_line(case.job), *errors),
                     suggestions=("read the end of its log: Betty changes a script only for a cause it can name",))


# ----- shared ----------------------------------------------------------------------------------------
def _partition_of(job: Job, script: SbatchScript, partitions: Sequence[PartitionLimits]) -> PartitionLimits | None:
    by_name = {partition.name: partition for partition in partitions}
    named = job.partition or (script.get("partition") or "").split(",")[0]
    return by_name.get(named) or next((p for p in partitions if p.default), None)


def _name(partition: PartitionLimits | None) -> str:
    return partition.name if partition else "(unknown)"


def _state_line(job: Job) -> str:
    parts = [f"state {job.state.value}"]
    if job.exit_code:
        parts.append(f"exit code {job.exit_code}")
    if job.elapsed is not None:
        parts.append(f"elapsed {_clock(job.elapsed.total_seconds())}")
    return ", ".join(parts)


def _quoted(lines: Sequence[str], pattern: "re.Pattern[str]") -> list[str]:
    """The last few log lines ``pattern`` finds, trimmed, as ``log: …`` evidence."""
    return [f"log: {line.strip()[:200]}" for line in lines if pattern.search(line)][-QUOTED_LINES:]


def _size_text(size: int) -> str:
    """A size as sbatch takes it: ``8G``, ``200M``."""
    return f"{size // GIB}G" if size % GIB == 0 else f"{math.ceil(size / MIB)}M"


def _clock(seconds: float) -> str:
    minutes = math.ceil(seconds) // 60
    return format_minutes(minutes)[:-2] + f"{math.ceil(seconds) % 60:02d}"
