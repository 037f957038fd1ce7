"""Model roles: a planner model that plans each turn, and the session's model that carries the plan out.

A site or a person may run a small local model for the tool calls (fast, private, cheap) and a
stronger one, remote or larger, for thinking the turn through (``llm.planner``). The planner sees
the conversation and the session's tools by name and purpose, never calls a tool, and answers with
a few numbered steps; its plan is shown in the chat under its own model's name and handed to the
session's model, which decides every call as always: the gate, the cards and the action log are
the same whichever model wrote the plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .registry import ToolRegistry

PLAN_NOTE = "A plan for this request (from Betty's planner). Carry it out with your tools, then answer the person:"
"""How the plan is handed to the session's model."""
PLANNER_RULES = """\
You plan for Betty, an assistant that acts on a Slurm cluster only through the tools below; another model carries
out your plan with them. Write at most five short numbered steps: for each, the tool and the arguments that matter,
then what to tell the person. Do not call tools, do not answer the question yourself, do not invent job ids or
figures: a step that needs one says which tool finds it. If no tool is needed, write one step: answer directly."""
_RECENT = 6
"""The conversation's last messages the planner sees (besides the system prompt's facts)."""


def planning_messages(messages: list[dict[str, Any]], registry: "ToolRegistry") -> list[dict[str, Any]]:
    """What the planner is asked: its rules, the session's facts and tools, and the conversation's recent turns."""
    tools = "\n".join(f"- {tool.name}: {tool.summary()}" for tool in registry)
    facts = str(messages[0].get("content") or "") if messages else ""
    system = f"{PLANNER_RULES}\n\nTools:\n{tools}\n\nWhat Betty knows of the cluster and the person:\n{facts}"
    recent = [{"role": m["role"], "content": str(m.get("content") or "")} for m in messages[1:]
              if m.get("role") in ("user", "assistant") and m.get("content")][-_RECENT:]
    return [{"role": "system", "content": system}, *recent]

