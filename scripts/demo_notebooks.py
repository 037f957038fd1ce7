"""Copy the shipped notebooks into a demo project without their stored outputs.

    python scripts/demo_notebooks.py DEST NOTEBOOK...

The notebooks in ``notebooks/`` keep the outputs of a run for nbval to compare with
(``tests/test_notebooks.py``); those name a server's port and a day long past. The demo's copies
start blank instead: every code cell without outputs or execution count, so what a newcomer sees
is what their own run shows. Run it with the Python the notebooks' kernel runs on. A notebook already in DEST is left as it is (the person's own work).
Standard library only: Binder runs it before anything else is set up.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def without_outputs(notebook: dict) -> dict:
    """``notebook`` with every code cell's outputs and execution count cleared, and the Python version its kernel
    will report (this interpreter's), so it opens clean rather than marked unsaved."""
    language = notebook.get("metadata", {}).get("language_info")
    if isinstance(language, dict) and language.get("name") == "python":
        language["version"] = sys.version.split()[0]
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell.get("metadata", {}).pop("execution", None)
    return notebook


def main(argv: list[str]) -> int:
    """Copy each notebook into the folder ``argv[0]``, blank; one line on stderr and 1 for a notebook it cannot read."""
    if len(argv) < 2:
        print("usage: python scripts/demo_notebooks.py DEST NOTEBOOK...", file=sys.stderr)
        return 2
    dest = Path(argv[0])
    dest.mkdir(parents=True, exist_ok=True)
    for name in argv[1:]:
        source, target = Path(name), dest / Path(name).name
        if target.exists():
            continue
        try:
            notebook = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"betty: cannot read the notebook {source}: {exc}", file=sys.stderr)
            return 1
        target.write_text(json.dumps(without_outputs(notebook), indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                          encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
