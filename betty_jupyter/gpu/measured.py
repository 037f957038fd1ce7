"""Measured GPU peaks: the sampler a job carries, the file it writes, and the correction drawn from them.

A submission marked to measure its GPU peak runs :data:`SAMPLER` before its first command:
``nvidia-smi`` reports every GPU's used memory every :data:`INTERVAL_MS` milliseconds in the
background (one query per sample: a looping ``nvidia-smi -lms`` writes into a pipe in blocks of
4 KiB, so minutes of samples wait unseen and the last ones are lost when the job ends; on an H200
it delivered none within ten seconds), and ``awk`` keeps the highest in ``betty-gpu-peak-<job id>.txt`` in the job's working
directory (one line, ``peak_mib=N samples=S``, rewritten as the peak grows). The watcher reads that
file when the job ends (:func:`parse_peak_file`: the job may have written anything there, so only
that one line of numbers is taken). With the estimate recorded at submission, the page says
``measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)`` (:func:`measured_line`), and
:func:`calibrations` fits, per method and GPU type, the median of measured over estimated peaks.

The sampler also puts Betty's PyTorch hook (``gpu/torch_hook.py``) first on the job's ``PYTHONPATH``, in a private
folder made for the job: every Python of the job that used CUDA through torch appends its own peaks (allocated and
reserved, per GPU) to ``betty-torch-peak-<job id>.txt``, read as :func:`parse_torch_file` says, and a CUDA
out-of-memory error leaves the GPUs' memory summary in ``betty-torch-oom-<job id>.txt``. The page then says
``measured GPU peak 31.2 GiB (…) · PyTorch allocated 27.0 GiB (reserved 29.5 GiB)``.

Standard library only: the watcher and the CLI load it without the estimator.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

INTERVAL_MS = 500
"""How often the sampler asks ``nvidia-smi`` (milliseconds)."""

MAX_FILE_BYTES = 4096
"""The most of a peak file the watcher reads: the file is one short line."""

MIN_PAIRS = 3
"""Measured jobs of one method on one GPU type needed before their correction is offered."""

MARKER = "# Betty: GPU peak sampler"
"""The sampler's first line: a script that has it already measures its peak."""

SAMPLER = f"""{MARKER} (nvidia-smi every {INTERVAL_MS} ms; the highest use of any GPU goes to
# betty-gpu-peak-$SLURM_JOB_ID.txt here, which Betty reads when the job ends)
betty_gpu_peak_file="$PWD/betty-gpu-peak-${{SLURM_JOB_ID:-local}}.txt"
while nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null; do sleep {INTERVAL_MS / 1000:g}; done |
  awk -v out="$betty_gpu_peak_file" '
  $1 ~ /^[0-9]+$/ {{ n++; if (n == 1 || $1 + 0 > peak || n % 20 == 0) {{ if ($1 + 0 > peak) peak = $1 + 0;
    printf "peak_mib=%d samples=%d\\n", peak, n > out; close(out) }} }}' &
"""

TORCH_HOOK_END = "BETTY_TORCH_HOOK"
"""The end of the PyTorch hook's text in a measured script (a quoted here-document: the shell expands nothing in it)."""

TORCH_HOOK = f"""# PyTorch's own peak: every Python of the job loads Betty's hook, which appends what torch allocated and reserved
# to betty-torch-peak-$SLURM_JOB_ID.txt here when it ends (nothing when it did not use CUDA through torch)
betty_torch_hook=$(mktemp -d "${{TMPDIR:-/tmp}}/betty-torch-hook.XXXXXX") && trap 'rm -rf "$betty_torch_hook"' EXIT && \\
cat > "$betty_torch_hook/sitecustomize.py" <<'{TORCH_HOOK_END}' && export PYTHONPATH="$betty_torch_hook${{PYTHONPATH:+:$PYTHONPATH}}" \\
  BETTY_TORCH_PEAK_FILE="$PWD/betty-torch-peak-${{SLURM_JOB_ID:-local}}.txt" BETTY_TORCH_OOM_FILE="$PWD/betty-torch-oom-${{SLURM_JOB_ID:-local}}.txt"
{Path(__file__).with_name("torch_hook.py").read_text().rstrip()}
{TORCH_HOOK_END}
"""
"""The lines that put the PyTorch hook on the job's ``PYTHONPATH`` (part of :data:`SAMPLER`)."""

SAMPLER += TORCH_HOOK
"""The lines a measured job runs first (the sampler in the background, so the job's own commands run as written)."""

MAX_TORCH_FILE_BYTES = 16384
"""The most of a PyTorch peak file the watcher reads: a line per GPU per Python process of the job."""

_TORCH_LINE = re.compile(r"torch_device=(\d{1,3}) allocated_mib=(\d{1,9}) reserved_mib=(\d{1,9})")

_LINE = re.compile(r"peak_mib=(\d{1,9}) samples=(\d{1,12})")


def peak_file(job_id: str) -> str:
    """The sampler's file name for ``job_id`` (in the job's working directory)."""
    return f"betty-gpu-peak-{job_id}.txt"


def torch_peak_file(job_id: str) -> str:
    """The PyTorch hook's file name for ``job_id`` (in the job's working directory)."""
    return f"betty-torch-peak-{job_id}.txt"


def torch_oom_file(job_id: str) -> str:
    """Where the PyTorch hook leaves the memory summary of a CUDA out-of-memory error (the job's working directory)."""
    return f"betty-torch-oom-{job_id}.txt"


def with_sampler(script: str) -> str:
    """``script`` with :data:`SAMPLER` after its ``#SBATCH`` lines, before its first command (unchanged when it
    already has it). sbatch reads ``#SBATCH`` lines only before the first command, so none is moved."""
    if MARKER in script:
        return script
    lines = script.splitlines()
    start = 1 if lines and lines[0].startswith("#!") else 0
    end = start
    while end < len(lines) and (not lines[end].strip() or lines[end].lstrip().startswith("#")):
        end += 1
    last_option = max((i for i in range(start, end) if lines[i].startswith("#SBATCH")), default=start - 1)
    body = lines[:last_option + 1] + SAMPLER.rstrip("\n").splitlines() + lines[last_option + 1:]
    return "\n".join(body) + "\n"


@dataclass(frozen=True)
class MeasuredPeak:
    """The highest GPU memory one GPU of a job used, as its sampler saw it."""

    peak_mib: int
    samples: int

    @property
    def peak_gib(self) -> float:
        """The peak in GiB (as ``nvidia-smi`` counts: MiB / 1024)."""
        return self.peak_mib / 1024

    def as_dict(self) -> dict[str, Any]:
        """What the ledger records."""
        return {"peak_mib": self.peak_mib, "samples": self.samples}


def parse_peak_file(text: str) -> MeasuredPeak | None:
    """The peak in a sampler's file, or None when it holds no ``peak_mib=N samples=S`` line.

    Only the first :data:`MAX_FILE_BYTES` characters are looked at; the last such line wins (the
    sampler rewrites the file, so it has one). Anything else in the file is ignored.
    """
    found = None
    for line in text[:MAX_FILE_BYTES].splitlines():
        match = _LINE.fullmatch(line.strip())
        if match:
            found = MeasuredPeak(int(match.group(1)), int(match.group(2)))
    return found


def parse_torch_file(text: str) -> dict[str, Any] | None:
    """What the PyTorch hook's file says: per GPU the highest ``allocated_mib`` and ``reserved_mib`` any of the
    job's processes reported (``devices``, by GPU number), and ``out_of_memory`` when one ran out; None when it holds
    no such line. Only the first :data:`MAX_TORCH_FILE_BYTES` characters are looked at, every other line ignored."""
    devices: dict[int, tuple[int, int]] = {}
    out_of_memory = False
    for line in text[:MAX_TORCH_FILE_BYTES].splitlines():
        line = line.strip()
        if line == "torch_out_of_memory=1":
            out_of_memory = True
        match = _TORCH_LINE.fullmatch(line)
        if match:
            index, allocated, reserved = (int(group) for group in match.groups())
            before = devices.get(index, (0, 0))
            devices[index] = (max(before[0], allocated), max(before[1], reserved))
    if not devices and not out_of_memory:
        return None
    found: dict[str, Any] = {"devices": [{"device": index, "allocated_mib": allocated, "reserved_mib": reserved}
                                         for index, (allocated, reserved) in sorted(devices.items())]}
    if out_of_memory:
        found["out_of_memory"] = True
    return found


def torch_words(torch: Mapping[str, Any] | None) -> str:
    """``PyTorch allocated 27.0 GiB (reserved 29.5 GiB)`` (the busiest GPU's, and how many GPUs it used), with
    ``ran out of GPU memory`` when it did; "" when the record has none."""
    if not isinstance(torch, Mapping):
        return ""
    devices = [device for device in torch.get("devices") or [] if isinstance(device, Mapping)
               and _number(device.get("allocated_mib")) is not None and _number(device.get("reserved_mib")) is not None]
    parts = []
    if devices:
        busiest = max(devices, key=lambda device: (device["reserved_mib"], device["allocated_mib"]))
        words = (f"PyTorch allocated {busiest['allocated_mib'] / 1024:.1f} GiB "
                 f"(reserved {busiest['reserved_mib'] / 1024:.1f} GiB)")
        if len(devices) > 1:
            words += f" on the busiest of {len(devices)} GPUs"
        parts.append(words)
    if torch.get("out_of_memory") is True:
        summary = torch.get("summary")
        parts.append("PyTorch ran out of GPU memory" + (f" (its memory summary: {summary})"
                                                          if isinstance(summary, str) and summary else ""))
    return " · ".join(parts)


def measured_line(gpu_peak: Mapping[str, Any], gpu_estimate: Mapping[str, Any] | None) -> str:
    """``measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)``, per GPU; without an estimate, the measured peak alone; what
    became of the measurement when there is no peak (``note``)."""
    peak = _number(gpu_peak.get("peak_mib"))
    torch = torch_words(gpu_peak.get("torch"))
    if peak is None:
        note = str(gpu_peak.get("note") or "not read yet")
        return " · ".join(filter(None, [f"GPU peak not measured: {note}", torch]))
    measured = peak / 1024
    line = f"measured GPU peak {measured:.1f} GiB"
    estimated = _number((gpu_estimate or {}).get("peak_gib"))
    if estimated:
        line += f" (estimated {estimated:.1f} GiB, {100 * (measured - estimated) / estimated:+.1f}%)"
    return " · ".join(filter(None, [line, torch]))


def gpu_key(name: str) -> str:
    """One name for a GPU type however it is spelled (``a100`` in GRES, ``A100-40GB`` in the table)."""
    # lazy: the GPU table; the watcher reads a peak without it
    from .hardware import gpu_type
    from ..errors import GpuEstimateError

    try:
        return gpu_type(name).name
    except GpuEstimateError:
        return name.strip().lower()


@dataclass(frozen=True)
class Calibration:
    """The person's correction for one method on one GPU type: the median of measured / estimated peaks."""

    method: str
    gpu: str
    ratios: tuple[float, ...]

    @property
    def usable(self) -> bool:
        """Whether there are enough pairs (:data:`MIN_PAIRS`) to offer it."""
        return len(self.ratios) >= MIN_PAIRS

    @property
    def factor(self) -> float:
        """The median ratio."""
        return statistics.median(self.ratios)

    def line(self) -> str:
        """``lora on A100-40GB: × 1.047, median of 4 jobs (ratios 0.981–1.120)``, or how many more it needs."""
        name = f"{self.method} on {self.gpu}"
        if not self.usable:
            return (f"{name}: not calibrated, {len(self.ratios)} measured job{'s' * (len(self.ratios) != 1)} "
                    f"with an estimate, {MIN_PAIRS} needed")
        return (f"{name}: × {self.factor:.3f}, median of {len(self.ratios)} jobs "
                f"(ratios {min(self.ratios):.3f}–{max(self.ratios):.3f})")

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: method, gpu, factor (None until usable), pairs, lowest and highest ratio."""
        return {"method": self.method, "gpu": self.gpu, "factor": round(self.factor, 4) if self.usable else None,
                "pairs": len(self.ratios), "lowest": round(min(self.ratios), 4),
                "highest": round(max(self.ratios), 4)}


def calibrations(records: Iterable[Mapping[str, Any]]) -> list[Calibration]:
    """Every (method, GPU type) among ``records`` (experiments' records as the ledger keeps them) that has a measured
    peak beside an estimate with its method, sorted by method and GPU; those with too few pairs are included, so
    that what is missing can be said."""
    pairs: dict[tuple[str, str], list[float]] = {}
    for record in records:
        pair = _pair(record)
        if pair is not None:
            key, ratio = pair
            pairs.setdefault(key, []).append(ratio)
    return [Calibration(method, gpu, tuple(ratios)) for (method, gpu), ratios in sorted(pairs.items())]


def _pair(record: Mapping[str, Any]) -> tuple[tuple[str, str], float] | None:
    """((method, GPU type), measured / estimated) of one experiment's record, or None when it has no such pair."""
    estimate, peak = record.get("gpu_estimate"), record.get("gpu_peak")
    if not isinstance(estimate, Mapping) or not isinstance(peak, Mapping):
        return None
    estimated, measured = _number(estimate.get("peak_gib")), _number(peak.get("peak_mib"))
    method = estimate.get("method")
    gpus = str((record.get("resources") or {}).get("gpus") or "")
    kind = gpus.rpartition("×")[2].strip()
    if not estimated or not measured or not isinstance(method, str) or not method or not kind:
        return None
    return (method, gpu_key(kind)), measured / 1024 / estimated


def _number(value: Any) -> float | None:
    """A finite, positive-or-zero number, or None (the record came from a file and a model)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e12:
        return None
    return float(value)


def calibration_for(found: Iterable[Calibration], method: str, gpu: str) -> Calibration | None:
    """The calibration of ``method`` on the GPU type ``gpu`` among ``found`` (None: no measured pair of them)."""
    key = gpu_key(gpu)
    return next((item for item in found if item.method == method and item.gpu == key), None)


def calibrated_line(peak_gib: float, calibration: Calibration | None, method: str, gpu: str) -> str:
    """What ``--calibrated`` adds to an estimate, in one line: the corrected peak and where the correction comes
    from, or why there is none (never a silent correction)."""
    if calibration is None:
        return f"not calibrated: none of your measured jobs ran {method} on {gpu_key(gpu)} with an estimate"
    if not calibration.usable:
        return calibration.line()
    return (f"calibrated {peak_gib * calibration.factor:.2f} GiB per GPU: your {calibration.line()}")


MAX_RUNS_SHOWN = 5
"""The most measured jobs an estimate shows beside itself (the newest)."""


def measured_beside(records: Iterable[Mapping[str, Any]], model: str, method: str,
                    gpu: str | None = None, peak_gib: float | None = None) -> dict[str, Any]:
    """What the person's own measured jobs say beside an estimate of ``model`` with ``method``: ``runs``, the newest
    :data:`MAX_RUNS_SHOWN` measured jobs that recorded an estimate of the same model and method (slug, job, GPUs,
    estimated and measured GiB, what PyTorch said, and ``line``), ``calibrations`` of ``method`` on every GPU type
    (on ``gpu`` only, when given, with ``calibrated`` corrected from ``peak_gib``) and ``lines``, all of it in words;
    empty lists when there are none."""
    records = list(records)
    runs = [run for run in (_measured_run(record, model, method) for record in records) if run is not None]
    runs = sorted(runs, key=lambda run: str(run["submitted"]), reverse=True)[:MAX_RUNS_SHOWN]
    found = [item for item in calibrations(records) if item.method == method]
    if gpu:
        found = [item for item in found if item.gpu == gpu_key(gpu)]
    shown = [{**item.as_dict(), "line": item.line()} for item in found]
    lines = [f"your measured {model} {method} job {run['slug']} (job {run['job_id']}, {run['gpus'] or 'GPUs not said'}): "
             f"{run['line']}" for run in runs]
    lines += [f"your calibration: {item['line']}" for item in shown]
    result: dict[str, Any] = {"runs": runs, "calibrations": shown}
    if gpu and peak_gib is not None and (runs or found):
        chosen = found[0] if found else None
        result["calibrated"] = calibrated_line(peak_gib, chosen, method, gpu)
        if chosen is not None and chosen.usable:
            lines.append(result["calibrated"])
    result["lines"] = lines
    return result


def _measured_run(record: Mapping[str, Any], model: str, method: str) -> dict[str, Any] | None:
    """One record as a measured run of ``model`` with ``method``, or None when it is not one (or has no peak)."""
    estimate, peak = record.get("gpu_estimate"), record.get("gpu_peak")
    if not isinstance(estimate, Mapping) or not isinstance(peak, Mapping):
        return None
    same = (str(estimate.get("model") or "").casefold() == model.casefold()
            and str(estimate.get("method") or "") == method)
    measured = _number(peak.get("peak_mib"))
    torch = peak.get("torch") if isinstance(peak.get("torch"), Mapping) else None
    if not same or (measured is None and not torch_words(torch)):
        return None
    estimated = _number(estimate.get("peak_gib"))
    resources = record.get("resources")
    return {"slug": _plain(record.get("slug")), "job_id": _plain(record.get("job_id")),
            "submitted": _plain(record.get("submitted")),
            "gpus": _plain(resources.get("gpus")) if isinstance(resources, Mapping) else "",
            "estimated_gib": estimated, "measured_gib": None if measured is None else round(measured / 1024, 3),
            "torch": dict(torch) if torch else None, "line": measured_line(peak, estimate)}


def _plain(value: Any) -> str:
    """A record's field as one short line of text, control characters blanked (the ledger holds what jobs named)."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", " ", str(value or ""))[:120]
