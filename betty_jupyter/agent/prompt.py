"""The system prompt: the persona page plus live facts, each taken from the part that owns it.

It is written once per session and is the same text, byte for byte, for the same persona,
tools, cluster, partitions, person and day, in every process: a model server's prompt cache
then serves every later request of the session, and every ``betty ask``, from the first one.
The tools are described only in their schemas (:mod:`~betty_jupyter.agent.offer`), never here too.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BettyError

if TYPE_CHECKING:
    import pandas as pd

    from ..cluster.allowlist import CommandPolicy
    from .offer import ToolOffer

SCRIPT_EXAMPLE = """\
```bash
#!/bin/bash
#SBATCH --job-name=train
#SBATCH --partition={partition}{gres}
#SBATCH --time=01:00:00
python train.py
```"""
"""The smallest whole batch script, shown to the model under the submit rule."""

_RULES: list[tuple[str, str | None]] = [
    ("- The person is {user} on the cluster: \"my jobs\" are {user}'s. cluster_queue shows their waiting and running\n"
     "  jobs; cluster_history the ones that ended, newest first (\"my last job\" is its first row).",
     "cluster_history"),
    ("- job_logs with no job_id reads their newest job (\"why did my last job fail?\"); cluster_why with no job_id\n"
     "  explains their newest pending job (\"why is my job waiting?\").", "job_logs"),
    ("- For any GPU-memory question (how much, will it fit, which GPU) call gpu_estimate; never guess a figure.",
     "gpu_estimate"),
    ("- To submit with cluster_submit: check the partitions, size GPU memory with gpu_estimate when the job uses\n"
     "  GPUs and pass its peak_gib, and write the whole batch script, every line from its start, for example:\n" + SCRIPT_EXAMPLE,
     "cluster_submit"),
    ("- A tool that asks waits for the person. A call they deny did not run and ends your turn; do not repeat\n"
     "  it unless they ask.", None),
    ("- Keep job ids, paths and numbers exact; write what you must remember with scratchpad.", "scratchpad"),
    ("- Keep job ids, paths and numbers exact.", "-scratchpad"),
    ("- more_tools lists and adds your other tools (sweeps, notebooks, the wiki, read-only commands, …).", "+more"),
]
"""How the agent works: each line, and when it is told (a tool the session offers; ``-tool``: one it lacks;
``+more``: while tools are left to add)."""


def system_prompt(persona: str, offer: "ToolOffer", policy: "CommandPolicy",
                  cluster: str, partitions: "pd.DataFrame | None" = None, user: str | None = None,
                  today: date | None = None) -> str:
    """Persona, rules, the person's login, the allowlist when ``cluster_run`` is offered, the partitions, the date.

    Only what the tools its model is offered (``offer``) make true is said: the model is never
    told of a tool it cannot call, nor a rule about a tool it is not shown.
    """
    partition, gpus = _example_partition(partitions)
    told = {"user": f"`{user}`" if user else "the login Betty uses", "partition": partition,
            "gres": "\n#SBATCH --gres=gpu:1" if gpus else ""}
    rules = [line.format(**told) for line, about in _RULES if _applies(about, offer)]
    sections = [
        persona.strip(),
        "How you work:\n" + "\n".join(rules),
        allowlist_text(policy) if offer.shown("cluster_run") else "",
        f"Cluster: {cluster}\n" + _partitions_text(partitions, offer.shown("cluster_partitions")),
        f"Today is {(today or date.today()).isoformat()}.",
    ]
    return "\n\n".join(section for section in sections if section)


def allowlist_text(policy: "CommandPolicy") -> str:
    """What ``cluster_run`` accepts, as the model is told it."""
    return "cluster_run runs only these read-only commands (it asks the person once per session):\n" + policy.describe()


def _applies(about: str | None, offer: "ToolOffer") -> bool:
    if about is None:
        return True
    if about == "+more":
        return bool(offer.hidden)
    if about.startswith("-"):
        return not offer.shown(about[1:])
    return offer.shown(about)


def _example_partition(partitions: "pd.DataFrame | None") -> tuple[str, bool]:
    """The partition the example script names (the first with GPUs, else the default) and whether it has GPUs."""
    if partitions is None or partitions.empty:
        return "NAME", True
    rows = partitions.to_dict("records")
    with_gpus = [row for row in rows if dict(row["gpu_types"])]
    chosen = (with_gpus or [row for row in rows if row["default"]] or rows)[0]
    return str(chosen["partition"]), bool(with_gpus)


def _partitions_text(partitions: "pd.DataFrame | None", can_ask: bool) -> str:
    if partitions is None or partitions.empty:
        return "Partitions: unknown (call cluster_partitions)." if can_ask else "Partitions: unknown."
    lines = ["Partitions:"]
    for row in partitions.to_dict("records"):
        gpus = ", ".join(f"{count} × {kind}" for kind, count in sorted(dict(row["gpu_types"]).items())) or "no GPUs"
        default = " (default)" if row["default"] else ""
        lines.append(f"- {row['partition']}{default}: {row['nodes']} nodes, {row['cpus']} CPUs, {gpus} per node")
    return "\n".join(lines)


def persona_text(wiki_root: object) -> str:
    """``personas/betty.md`` from the project's wiki, else the seed's, without its frontmatter."""
    from ..wiki import WikiStore, seed_dir  # lazy: PyYAML and the page store; a person's one call writes no prompt

    for root in (Path(str(wiki_root)), seed_dir()):
        try:
            return WikiStore(root).read("personas/betty.md").body
        except (BettyError, OSError):  # a missing or broken persona falls back to the seed's
            continue
    return "You are Betty, an assistant for researchers who run work on a Slurm cluster."
