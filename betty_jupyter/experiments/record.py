"""Recording a submission: the ledger entry first, then the wiki page, the notebook, one log line.

If ``sbatch`` fails nothing is written. If a file cannot be written after ``sbatch``
succeeded, the error names the job, the ledger still holds everything, the watcher still
tracks the job, and :func:`repair` writes what is missing.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import BettyError, ExperimentError, WikiError
from ..safe_text import markdown_text
from ..wiki import WikiStore
from ..wiki.regions import check_no_markers
from . import content
from .ledger import Experiment, Ledger
from .notebook_file import write_notebook
from .workspace import Workspace

if TYPE_CHECKING:
    from ..cluster.sbatch import SbatchScript
    from ..cluster.slurm import SlurmClient

_MAX_SLUG = 48


def slugify(text: str) -> str:
    """``Fine-tune Llama 3 (LoRA)`` → ``fine-tune-llama-3-lora``; ASCII letters, digits and dashes only."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    return slug[:_MAX_SLUG].rstrip("-") or "job"


def new_slug(workspace: Workspace, ledger: Ledger, name: str, day: date | None = None) -> str:
    """``YYYY-MM-DD-<slug>``, with ``-2``, ``-3``… when that day already has one of that name."""
    base = f"{(day or date.today()):%Y-%m-%d}-{slugify(name)}"
    taken = ledger.slugs_from(base)
    for number in range(1, 10_000):
        slug = base if number == 1 else f"{base}-{number}"
        if slug not in taken and not (workspace.wiki / workspace.page_name(slug)).exists() \
                and not workspace.notebook_path(slug).exists():
            return slug
    raise ExperimentError(f"too many experiments called {base!r}; pick another --slug")


def check_recordable(script: str, goal: str = "", name: str | None = None) -> None:
    """Refuse, before anything is submitted, a submission whose record could not be written.

    Marker text (``<!-- betty:auto-…``) in the script, the goal or the name could open or close
    Betty's region of the page; a NUL byte cannot be written into a page at all.
    """
    for text, what in ((script, "the script"), (goal, "the goal"), (name or "", "the experiment's name")):
        try:
            check_no_markers(text, what)
        except WikiError as error:
            raise ExperimentError(f"{error}; nothing was submitted: reword it and submit again") from None
        if "\0" in text:
            raise ExperimentError(f"{what} contains a NUL byte; nothing was submitted: remove it and submit again")


async def submit_experiment(slurm: "SlurmClient", workspace: Workspace, cluster: str, script: "str | SbatchScript", *,
                            goal: str = "", name: str | None = None, extra_args: Sequence[str] = (),
                            gpu_estimate: dict[str, Any] | None = None,
                            replaces: dict[str, str] | None = None, sweep: dict[str, Any] | None = None,
                            gpu_peak: dict[str, Any] | None = None) -> Experiment:
    """Submit ``script`` exactly once and record it; nothing is written (or submitted) when it could not be recorded.

    ``script`` is the script as the submission checked it: the record and ``sbatch`` take that one
    object (its text is what runs and what is recorded), so it is not read again here. A text is read once.
    """
    check_recordable(script if isinstance(script, str) else script.text, goal, name)
    if isinstance(script, str):
        # lazy: the batch-script parser; the server's start loads this module without it
        from ..cluster.sbatch import SbatchScript

        script = SbatchScript.parse(script)
    ledger = Ledger(workspace.ledger_path)
    slug = new_slug(workspace, ledger, name or script.get("job-name") or "job")
    job_id = await slurm.submit(script, extra_args, script_name=f"{slug}.sbatch")
    experiment = Experiment(
        slug=slug, job_id=job_id, cluster=cluster, submitted=datetime.now().strftime("%Y-%m-%dT%H:%M:%S"),
        goal=goal, script=script.text, script_path=f"{slurm.work_dir}/scripts/{slug}.sbatch",
        partition=script.get("partition"), resources=resources_asked(script), gpu_estimate=gpu_estimate,
        replaces=replaces, sweep=sweep, gpu_peak=gpu_peak,
    )
    return record_submission(workspace, experiment, ledger)


def resources_asked(script: "SbatchScript") -> dict[str, Any]:
    """What the script asks for, as the record keeps it: time, memory, GPUs, nodes, tasks, CPUs per task."""
    asked: dict[str, Any] = {"time_minutes": script.time_minutes(), "memory_bytes": script.memory_bytes()}
    gpus = script.gpu_request()
    if gpus:
        asked["gpus"] = f"{gpus[1]} × {gpus[0] or 'gpu'}"
    for option in ("nodes", "ntasks", "cpus-per-task"):
        if script.get(option):
            asked[option.replace("-", "_")] = script.get(option)
    return {name: value for name, value in asked.items() if value is not None}


def record_submission(workspace: Workspace, experiment: Experiment, ledger: Ledger | None = None) -> Experiment:
    """Put ``experiment`` in the ledger, then write its page, notebook, log and index lines."""
    (ledger or Ledger(workspace.ledger_path)).add(experiment)
    try:
        write_record(workspace, experiment)
    except (BettyError, OSError, ValueError) as exc:
        raise ExperimentError(
            f"job {experiment.job_id} was submitted, but its record could not be written ({exc}); "
            "the watcher still tracks it: run `betty experiments repair`"
        ) from exc
    return experiment


def write_record(workspace: Workspace, experiment: Experiment) -> list[str]:
    """Write whichever of the page and the notebook is missing; returns what was written."""
    store = WikiStore(workspace.wiki)
    written = []
    if not store.exists(experiment.page):
        auto = content.auto_region(experiment, None, "PENDING")
        store.create(experiment.page, content.page_frontmatter(experiment), content.page_body(experiment, auto))
        store.log(f"submitted job {experiment.job_id} on {experiment.cluster}: {experiment.page}")
        _index(store, experiment)
        written.append(experiment.page)
    notebook = workspace.root / experiment.notebook
    if not notebook.exists():
        write_notebook(notebook, content.notebook(experiment))
        written.append(experiment.notebook)
    return written


def _index(store: "WikiStore", experiment: Experiment) -> None:
    listed = store.exists("index.md") and f"({experiment.page})" in store.read("index.md").text
    if not listed:
        summary = markdown_text(content.first_line(experiment.goal) or f"job {experiment.job_id}")
        store.add_to_index("Experiments", f"- [{experiment.slug}]({experiment.page}) — {summary}")


def repair(workspace: Workspace) -> dict[str, list[str]]:
    """Rebuild every missing page and notebook from the ledger; returns job id → files written."""
    ledger = Ledger(workspace.ledger_path)
    repaired = {}
    for tracked in ledger.all():
        written = write_record(workspace, tracked.experiment)
        if written:
            repaired[tracked.experiment.job_id] = written
            ledger.reopen(tracked.experiment.slug)  # the rebuilt files say PENDING until the watcher looks
    return repaired
