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

_RULES: list[tuple[str, str | None]] = [
    ("- You act only through the tools listed below; you cannot do anything they do not do.", None),
    ("- Every call of a tool above tier 0 may wait for the person's approval. A denied call did not run and\n"
     "  ends your turn; do not repeat it unless the person asks for it.", None),
    ("- Before you submit a job, read the partitions and size GPU memory with gpu_estimate when the job uses GPUs.",
     "cluster_submit"),
    ("- Keep job ids, paths and numbers exact; write what you must remember into the scratchpad.", None),
]
"""How the agent works: each line, and the tool it is about (told only to sessions that have that tool)."""


def system_prompt(persona: str, registry: "ToolRegistry", policy: "CommandPolicy", cluster: str,
                  partitions: "pd.DataFrame | None" = None, today: date | None = None) -> str:
    """Persona, rules, the session's tools with their tiers, the read-only allowlist, the partitions, today's date.

    Only the tools in ``registry`` are described (an automation's or a helper's subset), and the
    allowlist only when ``cluster_run`` is among them: the model is never told of a tool it cannot call.
    """
    sections = [
        persona.strip(),
        "How you work:\n" + "\n".join(line for line, tool in _RULES if tool is None or tool in registry),
        "Tools (tier 0 runs at once; tier 1 asks once per session; tier 2 always asks):\n" + registry.describe(),
        "Read-only commands cluster_run accepts:\n" + policy.describe() if "cluster_run" in registry else "",
        f"Cluster: {cluster}\n" + _partitions_text(partitions, "cluster_partitions" in registry),
        f"Today is {(today or date.today()).isoformat()}.",
    ]
    return "\n\n".join(section for section in sections if section)


def _partitions_text(partitions: "pd.DataFrame | None", can_ask: bool) -> str:
    if partitions is None or partitions.empty:
        return "Partitions: unknown (call cluster_partitions)." if can_ask else "Partitions: unknown."
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
