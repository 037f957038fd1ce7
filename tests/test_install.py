"""The installed package registers both extensions with Jupyter, prebuilt."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from betty_jupyter import __version__

JUPYTER = str(Path(sys.executable).with_name("jupyter"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def jupyter(*args: str) -> str:
    result = subprocess.run([JUPYTER, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return ANSI.sub("", result.stdout + result.stderr)


def test_labextension_is_enabled_and_ok():
    listing = jupyter("labextension", "list")
    assert re.search(rf"betty-jupyter v{re.escape(__version__)} enabled OK \(python, betty-jupyter\)", listing), listing


def test_server_extension_is_enabled_and_ok():
    listing = jupyter("server", "extension", "list")
    assert re.search(r"betty_jupyter enabled", listing), listing
    assert re.search(rf"betty_jupyter {re.escape(__version__)} OK", listing), listing


def test_prebuilt_labextension_ships_its_entry_point():
    import betty_jupyter

    static = Path(betty_jupyter.__file__).parent / "labextension" / "static"
    assert any(path.name.startswith("remoteEntry.") for path in static.iterdir())
