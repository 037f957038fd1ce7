"""An ended job's measured GPU peak, read from its sampler's file and its PyTorch hook's (``gpu/measured.py``) for its
record and page."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BettyError
from ..gpu.measured import (MAX_FILE_BYTES, MAX_TORCH_FILE_BYTES, measured_line, parse_peak_file, parse_torch_file,
                            peak_file, torch_oom_file, torch_peak_file)
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
    """The ended jobs among ``changed`` that measured their peak, with it read now, and those peaks by slug."""
    peaks: dict[str, dict[str, Any]] = {}
    read = []
    for tracked, job in changed:
        if job.state.finished and measures_peak(tracked.experiment) and not tracked.experiment.chain:
            peaks[tracked.experiment.slug] = await read_peak(slurm, job)
            tracked = replace(tracked, experiment=replace(tracked.experiment, gpu_peak=peaks[tracked.experiment.slug]))
        read.append((tracked, job))
    return read, peaks


def peak_words(experiment: Experiment) -> str:
    """``measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)`` once measured; "" before the job ended."""
    peak = experiment.gpu_peak or {}
    if "peak_mib" not in peak and "note" not in peak:
        return ""
    return measured_line(peak, experiment.gpu_estimate)


def measured_records(root: Path) -> list[dict[str, Any]]:
    """Every experiment's record in the project at ``root``, as the ledger keeps them: where measured peaks and their
    estimates are read from (none when nothing is recorded there)."""
    path = Workspace.at(root).ledger_path
    if not path.is_file():
        return []
    return [asdict(tracked.experiment) for tracked in Ledger(path).all()]
