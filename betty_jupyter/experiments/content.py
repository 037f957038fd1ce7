"""What an experiment's page and notebook say: pure functions from the record and the job."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..cluster.jobs import task_summary
from ..cluster.sbatch import format_minutes
from ..cluster.tables import memory_text, size_text
from ..safe_text import fenced, markdown_text, table_cell
from ..wiki import AUTO_END, AUTO_START
from ..wiki.regions import without_markers
from .ledger import Experiment
from .notebook_file import Notebook, code_cell, markdown_cell, new_notebook, python_metadata

if TYPE_CHECKING:
    from ..cluster.jobs import Job

STATUS_TAG = "betty-status"
_SLUG = re.compile(r"[0-9a-z][0-9a-z-]*")
FAILED_STATES = {"FAILED", "OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def page_frontmatter(experiment: Experiment) -> dict[str, Any]:
    """The page's YAML frontmatter.

    Markdown viewers show frontmatter as markdown too, so the goal's first line goes in as plain text.
    """
    return {
        "name": experiment.slug,
        "description": markdown_text(first_line(experiment.goal)[:200]) or f"Slurm job {experiment.job_id}",
        "type": "experiment",
        "job_id": experiment.job_id,
        "cluster": experiment.cluster,
        "partition": experiment.partition,
        "submitted": experiment.submitted,
        "script": experiment.script_path,
        "notebook": experiment.notebook,
        "status": "PENDING",
    }


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, stripped ("" when none)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def page_body(experiment: Experiment, auto: str) -> str:
    """The page: the person's Goal and Lessons around Betty's marked Status and Runtime.

    The goal is shown as written (it may come from the model: nothing in it renders as HTML,
    an image or a link) and the script sits in a fence that no line of it can close.
    """
    goal = markdown_text(experiment.goal) if experiment.goal else \
        "_What is this run for? Betty never changes this section._"
    goal += _resubmits(experiment, "") + _sweep_section(experiment)
    return (
        f"# {experiment.slug}\n\n## Goal\n\n{goal}\n\n{AUTO_START}\n{auto}\n{AUTO_END}\n\n"
        f"## Script\n\nSubmitted as {markdown_text(experiment.script_path)}:\n\n"
        f"{fenced(experiment.script, 'bash')}\n\n"
        f"Notebook: [{experiment.slug}.ipynb](../../{experiment.notebook})\n\n"
        "## Lessons\n\n_What did this run teach you? Betty never changes this section._\n"
    )


def _resubmits(experiment: Experiment, pages: str) -> str:
    """The line linking the page of the experiment this one corrects ("" when it corrects none)."""
    original = experiment.replaces or {}
    slug, job = str(original.get("slug", "")), str(original.get("job_id", ""))
    if not _SLUG.fullmatch(slug):
        return ""
    return f"\n\nResubmits [{slug}]({pages}{slug}.md) (job {markdown_text(job)})."


def _sweep_section(experiment: Experiment) -> str:
    """A sweep's tasks and the point each runs ("" for a single job)."""
    if not experiment.sweep:
        return ""
    # lazy: the sweep's grid; a page of a single job never needs it
    from .sweep import grid_table, recorded_grid

    grid = recorded_grid(experiment.sweep)
    at_once = experiment.sweep.get("at_once")
    limit = f", at most {at_once} at once" if at_once else ""
    return (f"\n\n### Sweep\n\nOne job array of {len(grid)} tasks{limit}; task N runs with row N "
            f"(each parameter is a shell variable in the script):\n\n{grid_table(grid)}")


def auto_region(experiment: Experiment, job: "Job | None", state: str, log_tail: str | None = None) -> str:
    """Status and Runtime, as Betty's watcher keeps them (the only text it rewrites), and the diagnosis of a failure.

    Slurm's fields and the log are other people's text: escaped, fenced, their marker text broken up.
    """
    now = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    lines = ["## Status", "", f"**{markdown_text(state)}**" + markdown_text(_status_details(job)), "",
             f"_Updated {now} by Betty's job watcher._", ""]
    lines += ["## Runtime", "", "| job | cluster | partition | submitted | started | ended | GPUs |",
              "|---|---|---|---|---|---|---|", _runtime_row(experiment, job)]
    billed = _billed(experiment, job)
    if billed:
        lines += ["", markdown_text(billed) + "."]
    measured = _peak_words(experiment)
    if measured:
        lines += ["", "## GPU memory", "", markdown_text(measured) + "."]
    if log_tail and state in FAILED_STATES:
        lines += ["", "### Last lines of the log", "", fenced(without_markers(log_tail.rstrip()), "text")]
    if experiment.chain:
        # lazy: the chain's timeline; a page of a single job never needs it
        from .chain_page import page_section as chain_section

        lines += ["", chain_section(experiment)]
    if (experiment.sweep or {}).get("tasks"):
        # lazy: the sweep's comparison; a page of a single job never needs it
        from .sweep_page import page_section as comparison_section

        lines += ["", comparison_section(experiment)]
    if experiment.node_cells is not None:
        # lazy: a node kernel's cells; a page of a batch job never needs them
        from .node_cells import page_section as cells_section

        lines += ["", cells_section(experiment, job)]
    if experiment.efficiency:
        # lazy: the advisor's figures and rules; the server's start loads this module without them
        from .efficiency import page_section as efficiency_section

        lines += ["", efficiency_section(experiment.efficiency)]
    if experiment.diagnosis:
        # lazy: the diagnosis and the Slurm commands behind it; the server's start loads this module without them
        from .diagnosis import page_section

        lines += ["", page_section(experiment.diagnosis)]
    return "\n".join(lines)


def status_text(experiment: Experiment, job: "Job | None", state: str) -> str:
    """One line for the notebook's status cell."""
    if experiment.chain:
        # lazy: as in auto_region
        from .chain_page import is_pipeline, status_words

        kind = "pipeline" if is_pipeline(experiment) else "chain"
        return f"{kind} {experiment.slug} on {experiment.cluster}: {state}{status_words(experiment)}"
    measured = _peak_words(experiment)
    return f"job {experiment.job_id} on {experiment.cluster}: {state}{_status_details(job)}" + \
        (f" · {measured}" if measured else "")


def _peak_words(experiment: Experiment) -> str:
    """``measured GPU peak 31.2 GiB (estimated 29.8 GiB, +4.7%)`` once a measured job ended; "" otherwise."""
    if not experiment.gpu_peak:
        return ""
    # lazy: the peak's words; a job that measures nothing never needs them
    from .gpu_peak import peak_words

    return peak_words(experiment)


def _status_details(job: "Job | None") -> str:
    if job is None:
        return ""
    parts = []
    if job.exit_code and job.state.finished:  # accounting writes 0:0 for a job still running
        parts.append(f"exit code {job.exit_code}")
    if job.elapsed is not None:
        parts.append(f"elapsed {_clock(job.elapsed.total_seconds())}")
    if job.nodelist:
        parts.append(f"node {job.nodelist}")
    if job.max_rss_bytes:
        parts.append(f"peak memory {memory_text(job.max_rss_bytes)}")
    if job.reason and job.state.value == "PENDING":
        parts.append(f"waiting: {job.reason}")
    if job.tasks:
        parts.append(task_summary(job.tasks))
    return (" · " + " · ".join(parts)) if parts else ""


def _billed(experiment: Experiment, job: "Job | None") -> str:
    """``billed: 0.033 GPU-hours (card said 0.067 at the limit)`` once a single GPU job ended; "" otherwise (a
    sweep, chain or node kernel says its own cost)."""
    if (job is None or not job.state.finished or job.elapsed is None or job.tasks or experiment.chain
            or experiment.sweep or experiment.node_cells is not None):
        return ""
    # lazy: the cost arithmetic; a page of a running job never needs it
    from ..cluster.account_usage import billed_line

    return billed_line(job.gpus, job.elapsed.total_seconds(), experiment.script)


def _runtime_row(experiment: Experiment, job: "Job | None") -> str:
    def when(value: datetime | None) -> str:
        return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"

    gpus = f"{job.gpus} × {job.gpu_type or 'gpu'}" if job and job.gpus else "—"
    partition = (job.partition if job else None) or experiment.partition or "—"
    cells = [experiment.job_id, experiment.cluster, partition, _submitted(experiment),
             when(job.started if job else None), when(job.ended if job else None), gpus]
    return "| " + " | ".join(table_cell(cell) for cell in cells) + " |"


def _clock(seconds: float) -> str:
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{hours:02d}:{minutes:02d}:{secs:02d}"


def notebook(experiment: Experiment) -> Notebook:
    """The experiment notebook (nbformat v4): goal, script, record, live status, log, analysis."""
    job, cluster = json.dumps(experiment.job_id), json.dumps(experiment.cluster)
    goal = (markdown_text(experiment.goal) if experiment.goal else "_No goal written yet._") + \
        _resubmits(experiment, "../../wiki/experiments/") + _sweep_section(experiment)
    status = code_cell(f"from betty_jupyter.experiments.live import status\n\nstatus({job}, cluster={cluster})",
                       metadata={"tags": [STATUS_TAG]})
    cells = [
        markdown_cell(f"# {experiment.slug}\n\n{goal}\n\nWiki page: [{experiment.page}](../../wiki/{experiment.page})"),
        markdown_cell(f"## The script\n\n{fenced(experiment.script, 'bash')}"),
        markdown_cell(_record_table(experiment)),
        markdown_cell("## Live status\n\nRun the next cell for the job's state now; Betty's watcher "
                      "also writes the latest state into its output."),
        status,
        code_cell(f"from betty_jupyter.experiments.live import log_tail\n\n"
                  f"print(log_tail({job}, cluster={cluster}, lines=40))"),
        markdown_cell("## Analysis\n\nEvery `NAME=NUMBER` word the job printed (e.g. `step=10 loss=0.42`; "
                      "not `loss: 0.4`, `loss = 0.4` or `loss=nan`), one column per name, one row per line "
                      "that had any."),
        code_cell(
            f"from betty_jupyter.experiments.live import metrics\n\nnumbers = metrics({job}, cluster={cluster})\n"
            "if numbers.empty:\n    print('the job has printed no NAME=NUMBER words yet')\n"
            "else:\n    numbers.plot(subplots=True, figsize=(8, 2 * len(numbers.columns)))\nnumbers"
        ),
    ]
    if experiment.chain:
        # lazy: as in auto_region
        from .chain_page import is_pipeline

        slug = json.dumps(experiment.slug)
        cells += [
            markdown_cell("## Steps\n\nThe pipeline's steps now: each one's job, when it ended and why (`done`, "
                          "`failed`, `cancelled`, `not run: <step> failed`).") if is_pipeline(experiment) else
            markdown_cell("## Segments\n\nThe chain's segments now: each one's job, when it ended and why "
                          "(`time limit → continued`, `done`, `failed`, `cap reached`, `not needed`)."),
            code_cell(f"from betty_jupyter.experiments.live import segments\n\n"
                      f"segments({slug}, cluster={cluster})"),
        ]
    if experiment.sweep:
        slug = json.dumps(experiment.slug)
        cells += [
            markdown_cell("## Comparison\n\nEvery task of the sweep: its point, state, runtime, efficiency and the "
                          "last value of each `name=value` it printed; then each metric by step, a line per task, "
                          "and its final value by parameter."),
            code_cell(f"from betty_jupyter.experiments.live import compare\n"
                      f"from betty_jupyter.notebook.sweep import SweepView\n\n"
                      f"SweepView(compare({slug}, cluster={cluster}))"),
        ]
    return new_notebook(cells, {
        **python_metadata(),
        "betty": {"job_id": experiment.job_id, "cluster": experiment.cluster, "page": experiment.page},
    })


def _record_table(experiment: Experiment) -> str:
    rows = [("job id", experiment.job_id), ("cluster", experiment.cluster),
            ("partition", experiment.partition or "default"), ("submitted", _submitted(experiment)),
            ("script", experiment.script_path)]
    rows += [_resource_row(name, value) for name, value in experiment.resources.items()]
    table = "\n".join(f"| {table_cell(name)} | {table_cell(value)} |" for name, value in rows)
    text = f"## Submission\n\n| | |\n|---|---|\n{table}"
    if experiment.gpu_estimate:
        peak = experiment.gpu_estimate.get("peak_gib")
        text += f"\n\nGPU memory estimate: **{peak:.1f} GiB per GPU**" if isinstance(peak, (int, float)) else ""
    return text


def _submitted(experiment: Experiment) -> str:
    """When it was submitted, written as the Runtime table writes times (``2026-11-25 00:47:13``)."""
    return experiment.submitted.replace("T", " ")


def _resource_row(name: str, value: Any) -> tuple[str, str]:
    """One thing the script asked for, in a person's units: ``time limit 00:05:00``, ``memory 100 MiB``."""
    if name == "time_minutes" and isinstance(value, int):
        return "time limit", format_minutes(value)
    if name == "memory_bytes" and isinstance(value, int):
        return "memory", size_text(value)
    return name.replace("_", " "), str(value)
