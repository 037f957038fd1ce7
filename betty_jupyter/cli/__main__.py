"""``python -m betty_jupyter.cli``: the same as the ``betty`` command."""

import sys

from . import main

sys.exit(main())
