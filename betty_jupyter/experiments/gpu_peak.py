"""An ended job's measured GPU peak, read from its sampler's file and its PyTorch hook's (``gpu/measured.py``) for its
record and page."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BettyError
from ..gpu.measured import (MAX_FILE_BYTES, MAX_TORCH_FILE_BYTES, measured_line, parse_peak_file, parse_torch_file,
                            peak_file, torch_oom_file, torch_peak_file)
from .chain_page import is_pipeline
from .ledger import Experiment, Ledger, Tracked
from .workspace import Workspace

if TYPE_CHECKING:
    from ..cluster.jobs import Job
    from ..cluster.slurm import SlurmClient


def measures_peak(experiment: Experiment) -> bool:
    """Whether the experiment's job was submitted with the GPU peak sampler."""
    return bool((experiment.gpu_peak or {}).get("sampled"))


async def read_peak(slurm: "SlurmClient", job: "Job") -> dict[str, Any]:
    """What the ended ``job``'s sampler file says: ``peak_mib`` and ``samples``, or a ``note`` saying why none; and
    ``torch``, what its PyTorch hook's file says, when the job used CUDA through torch."""
    torch = await read_torch_peak(slurm, job)
    found: dict[str, Any] = {"sampled": True, **({"torch": torch} if torch else {})}
    name = peak_file(job.job_id)
    try:
        text = await slurm.read_work_file(job, name, MAX_FILE_BYTES)
    except BettyError as error:
        first = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        return {**found, "note": f"no peak file {name} ({first}): nvidia-smi did not run in the job, or it ended "
                                 "before the first sample"}
    peak = parse_peak_file(text)
    if peak is None:
        return {**found, "note": f"{name} holds no peak_mib=N samples=S line"}
    return {**found, **peak.as_dict()}


async def read_torch_peak(slurm: "SlurmClient", job: "Job") -> dict[str, Any] | None:
    """What the ended ``job``'s PyTorch hook wrote (``parse_torch_file``), with the name of its out-of-memory summary
    when it ran out; None when it wrote nothing (no Python of the job used CUDA through torch)."""
    try:
        text = await slurm.read_work_file(job, torch_peak_file(job.job_id), MAX_TORCH_FILE_BYTES)
    except BettyError:
        return None
    torch = parse_torch_file(text)
    if torch is not None and torch.get("out_of_memory"):
        torch["summary"] = torch_oom_file(job.job_id)
    return torch


async def with_peaks(slurm: "SlurmClient", changed: list[tuple[Tracked, "Job"]]
                     ) -> tuple[list[tuple[Tracked, "Job"]], dict[str, dict[str, Any]]]:
    """The ended jobs among ``changed`` that measured their peak, with it read now, and those peaks by slug; a
    measured chain's segments that ended since it was last read (:func:`read_segment_peaks`)."""
    peaks: dict[str, dict[str, Any]] = {}
    read = []
    for tracked, job in changed:
        experiment = tracked.experiment
        peak = None
        if measures_peak(experiment) and experiment.chain and not is_pipeline(experiment):
            peak = await read_segment_peaks(slurm, experiment, job)
        elif job.state.finished and measures_peak(experiment) and not experiment.chain:
            peak = await read_peak(slurm, job)
        if peak is not None:
            peaks[experiment.slug] = peak
            tracked = replace(tracked, experiment=replace(experiment, gpu_peak=peak))
        read.append((tracked, job))
    return read, peaks


async def read_segment_peaks(slurm: "SlurmClient", experiment: Experiment, job: "Job") -> dict[str, Any] | None:
    """The chain's ``gpu_peak`` with the peak of each segment that ran and ended since it was last read (each
    measured its own, in the working directory they share with ``job``), the highest at its top (``segment``: whose);
    None when no segment ended since."""
    before = experiment.gpu_peak or {}
    segments = dict(before.get("segments") or {})
    ended = [str(segment.get("job_id")) for segment in (experiment.chain or {}).get("segments") or []
             if segment.get("why") not in ("waiting", "running", "not needed", None)]
    fresh = [ident for ident in ended if ident not in segments]
    if not fresh:
        return None
    for ident in fresh:
        peak = await read_peak(slurm, replace(job, job_id=ident))
        segments[ident] = {key: value for key, value in peak.items() if key != "sampled"}
    return {"sampled": True, **highest(segments), "segments": segments}


def highest(segments: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The highest of the segments' peaks (``peak_mib``, ``samples``, ``segment``) and the PyTorch figures of the
    segment that reserved most; a ``note`` when none measured a peak."""
    measured = {ident: peak for ident, peak in segments.items() if isinstance(peak.get("peak_mib"), int)}
    found: dict[str, Any] = {}
    if measured:
        ident = max(measured, key=lambda key: measured[key]["peak_mib"])
        found.update(peak_mib=measured[ident]["peak_mib"], samples=measured[ident].get("samples"), segment=ident)
    else:
        notes = [str(peak.get("note")) for peak in segments.values() if peak.get("note")]
        found["note"] = f"no segment measured a peak ({notes[0]})" if notes else "no segment measured a peak"
    torch = [peak["torch"] for peak in segments.values() if isinstance(peak.get("torch"), dict)]
    if torch:
        found["torch"] = max(torch, key=lambda item: max((device.get("reserved_mib", 0)
                                                         for device in item.get("devices") or []), default=0))
    return found


def peak_words(experiment: Experiment) -> str:
    """``measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)`` once measured; "" before the job ended. A chain's:
    its highest and whose, then each segment's (``· per segment: job 41 31.2 GiB, job 42 30.9 GiB``)."""
    peak = experiment.gpu_peak or {}
    if "peak_mib" not in peak and "note" not in peak:
        return ""
    line = measured_line(peak, experiment.gpu_estimate)
    segments = peak.get("segments")
    if not isinstance(segments, dict) or not segments:
        return line
    if "segment" in peak:
        line += f" · the highest of {len(segments)} segment{'s' * (len(segments) != 1)}, in job {peak['segment']}"
    return line + " · per segment: " + ", ".join(f"job {ident} {segment_words(value)}"
                                                 for ident, value in segments.items())


def segment_words(peak: Any) -> str:
    """One segment's peak: ``31.2 GiB`` (with PyTorch's reserved beside it when it said), or ``not measured``."""
    if not isinstance(peak, dict) or not isinstance(peak.get("peak_mib"), int):
        return "not measured"
    words = f"{peak['peak_mib'] / 1024:.1f} GiB"
    devices = (peak.get("torch") or {}).get("devices") if isinstance(peak.get("torch"), dict) else None
    reserved = [device.get("reserved_mib") for device in devices or [] if isinstance(device.get("reserved_mib"), int)]
    return words + (f" (PyTorch reserved {max(reserved) / 1024:.1f} GiB)" if reserved else "")


def measured_records(root: Path) -> list[dict[str, Any]]:
    """Every experiment's record in the project at ``root``, as the ledger keeps them: where measured peaks and their
    estimates are read from (none when nothing is recorded there)."""
    path = Workspace.at(root).ledger_path
    if not path.is_file():
        return []
    return [asdict(tracked.experiment) for tracked in Ledger(path).all()]
