"""``%load_ext betty_jupyter`` in a real IPython kernel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from betty_jupyter import __version__


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def execute(client: Any, code: str) -> dict[str, list[str]]:
    """Run ``code`` and collect what the cell showed, by kind."""
    shown: dict[str, list[str]] = {"result": [], "stdout": [], "stderr": [], "error": []}

    def collect(message: dict[str, Any]) -> None:
        kind, content = message["msg_type"], message["content"]
        if kind == "execute_result":
            shown["result"].append(content["data"]["text/plain"])
        elif kind == "stream":
            shown[content["name"]].append(content["text"])
        elif kind == "error":
            shown["error"].append(content["ename"])

    reply = client.execute_interactive(code, timeout=60, output_hook=collect)
    assert reply["content"]["status"] in ("ok", "error")
    return shown


def test_betty_version_answers_in_a_kernel(kernel):
    shown = execute(kernel, "%load_ext betty_jupyter\n%betty version")
    assert shown["error"] == [] and shown["stderr"] == []
    assert shown["result"] == [repr(f"Betty {__version__}")]


def test_unknown_command_is_one_line_not_a_traceback(kernel):
    execute(kernel, "%load_ext betty_jupyter")
    shown = execute(kernel, "%betty frobnicate now")
    assert shown["error"] == [] and shown["result"] == []
    lines = "".join(shown["stderr"]).strip().splitlines()
    assert lines == ["betty: unknown %betty command 'frobnicate'; try `%betty help`"]


def test_unbalanced_quotes_are_one_line(kernel):
    execute(kernel, "%load_ext betty_jupyter")
    shown = execute(kernel, "%betty version 'oops")
    assert shown["error"] == []
    assert len("".join(shown["stderr"]).strip().splitlines()) == 1


def test_help_lists_the_commands(kernel):
    execute(kernel, "%load_ext betty_jupyter")
    shown = execute(kernel, "%betty help")
    assert "version" in "".join(shown["stdout"])
