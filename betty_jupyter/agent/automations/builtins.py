"""The automations Betty's own code runs instead of a model, by id: the table the runner reads.

The runner installs each of them paused (off until a person resumes it) and hands each of
their runs to its code (:data:`BUILT_INS`); it imports none of them by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from .babysitter import BABYSITTER, BABYSITTER_ID, babysit
from .definitions import AutomationSpec
from .host import BuiltInRun


@dataclass(frozen=True)
class BuiltIn:
    """A built-in automation: its definition, installed paused, and the code that runs its runs."""

    spec: AutomationSpec
    run: BuiltInRun


BUILT_INS: dict[str, BuiltIn] = {BABYSITTER_ID: BuiltIn(BABYSITTER, babysit)}
"""Every built-in automation by id."""
