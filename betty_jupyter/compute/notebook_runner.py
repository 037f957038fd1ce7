"""The program a ``betty submit-notebook`` job runs on the compute node: execute one notebook with nbclient.

Started by the job's script in the run's directory with the environment's ``python3``:
``notebook_runner.py SOURCE TARGET``. It executes ``SOURCE`` in a ``python3`` kernel (ipykernel)
with ``allow_errors=False``, so a failing cell stops the run, and always writes the notebook as
far as it ran to ``TARGET`` (the failing cell with its error). What each cell printed is echoed
to the job's stdout, so ``name=value`` lines count as metrics like any job's. The exit status is
0 when every cell ran, 1 otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def main(source: str, target: str) -> int:
    """Execute ``source``, write it to ``target``; 0 when every cell ran."""
    import nbformat  # lazy: only on the node, in the job's environment
    from nbclient import NotebookClient  # lazy: as nbformat, the job environment's own

    book = nbformat.read(source, as_version=4)
    client = NotebookClient(book, timeout=None, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": os.getcwd()}})
    status = 0
    try:
        client.execute()
    except Exception as error:  # a cell that raised (CellExecutionError) or a kernel that died: the run's result
        status = 1
        print(f"betty submit-notebook: the notebook stopped: {type(error).__name__}: {str(error)[-2000:]}",
              file=sys.stderr)
    finally:
        nbformat.write(book, target + ".part")
        os.replace(target + ".part", target)
    _echo(book.cells)
    return status


def _echo(cells: Any) -> None:
    """What each cell printed, on the job's stdout."""
    for cell in cells:
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if output.get("output_type") == "stream":
                stream = sys.stdout if output.get("name") == "stdout" else sys.stderr
                stream.write(output.get("text", ""))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
