"""``python -m betty_jupyter.schemas [--check] [DIR]``: write the contract's JSON Schemas (default: beside the module).

``--check`` writes nothing and exits 1 naming each file that differs from the models.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import DIRECTORY, stale, write


def main(argv: list[str] | None = None) -> int:
    """Write (or check) the schemas; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m betty_jupyter.schemas", description=__doc__)
    parser.add_argument("directory", nargs="?", type=Path, default=DIRECTORY, help="where the files are")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    options = parser.parse_args(argv)
    if options.check:
        out_of_date = stale(options.directory)
        for name in out_of_date:
            print(f"{options.directory / name} differs from the models: run python -m betty_jupyter.schemas",
                  file=sys.stderr)
        return 1 if out_of_date else 0
    for path in write(options.directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
