"""``python -m betty_jupyter.cli``: the same as the ``betty`` command."""

from . import run

run()
