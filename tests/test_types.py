"""The package type-checks under mypy --strict (the configuration lives in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_mypy_strict_is_clean():
    result = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
