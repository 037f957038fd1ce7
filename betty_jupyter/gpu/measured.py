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

Standard library only: the watcher and the CLI load it without the estimator.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
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
"""The lines a measured job runs first (in the background, so the job's own commands run as written)."""

_LINE = re.compile(r"peak_mib=(\d{1,9}) samples=(\d{1,12})")


def peak_file(job_id: str) -> str:
    """The sampler's file name for ``job_id`` (in the job's working directory)."""
    return f"betty-gpu-peak-{job_id}.txt"


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


def measured_line(gpu_peak: Mapping[str, Any], gpu_estimate: Mapping[str, Any] | None) -> str:
    """``measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)``, per GPU; without an estimate, the measured peak alone; what
    became of the measurement when there is no peak (``note``)."""
    peak = _number(gpu_peak.get("peak_mib"))
    if peak is None:
        note = str(gpu_peak.get("note") or "not read yet")
        return f"GPU peak not measured: {note}"
    measured = peak / 1024
    line = f"measured GPU peak {measured:.1f} GiB"
    estimated = _number((gpu_estimate or {}).get("peak_gib"))
    if estimated:
        line += f" (estimated {estimated:.1f} GiB, {100 * (measured - estimated) / estimated:+.1f}%)"
    return line


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
