"""The system prompt: the persona page plus live facts, each taken from the part that owns it."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BettyError
from ..wiki import WikiStore, seed_dir

if TYPE_CHECKING:
    import pandas as pd

    from ..cluster.policy import CommandPolicy
    from .registry import ToolRegistry

_RULES = """\
How you work:
- You act only through the tools listed below; you cannot do anything they do not do.
- Every call of a tool above tier 0 may wait for the person's approval; a denied call did not run.
  Do not repeat a denied call unless the person asks for it.
- Before you submit a job, read the partitions and size GPU memory with gpu_estimate when the job uses GPUs.
- Keep job ids, paths and numbers exact; write what you must remember into the scratchpad."""


def system_prompt(persona: str, registry: "ToolRegistry", policy: "CommandPolicy", cluster: str,
                  partitions: "pd.DataFrame | None" = None, today: date | None = None) -> str:
    """Persona, rules, tools with their tiers, the read-only allowlist, the cluster's partitions, today's date."""
    sections = [
        persona.strip(),
        _RULES,
        "Tools (tier 0 runs at once; tier 1 asks once per session; tier 2 always asks):\n" + registry.describe(),
        "Read-only commands cluster_run accepts:\n" + policy.describe(),
        f"Cluster: {cluster}\n" + _partitions_text(partitions),
        f"Today is {(today or date.today()).isoformat()}.",
    ]
    return "\n\n".join(section for section in sections if section)


def _partitions_text(partitions: "pd.DataFrame | None") -> str:
    if partitions is None or partitions.empty:
        return "Partitions: unknown (call cluster_partitions)."
    lines = ["Partitions:"]
    for row in partitions.to_dict("records"):
        gpus = ", ".join(f"{count} × {kind}" for kind, count in dict(row["gpu_types"]).items()) or "no GPUs"
        default = " (default)" if row["default"] else ""
        lines.append(f"- {row['partition']}{default}: {row['nodes']} nodes, {row['cpus']} CPUs, {gpus} per node")
    return "\n".join(lines)


def persona_text(wiki_root: object) -> str:
    """``personas/betty.md`` from the project's wiki, else the seed's, without its frontmatter."""
    for root in (Path(str(wiki_root)), seed_dir()):
        try:
            return WikiStore(root).read("personas/betty.md").body
        except (BettyError, OSError):  # a missing or broken persona falls back to the seed's
            continue
    return "You are Betty, an assistant for researchers who run work on a Slurm cluster."
