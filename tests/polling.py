"""Waiting for something the system does on its own time: poll a check until it holds, with a guard against a hang."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest


def until(what: str, check: Callable[[], Any], guard: float, every: float = 0.2) -> Any:
    """Poll ``check`` every ``every`` seconds until it returns something true, and return that value; fail the test
    naming ``what`` after ``guard`` seconds (a guard against a hang on a busy machine, not a measurement)."""
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"{what} did not happen")
