"""``python -m perfmodel``: the same as the ``perfmodel`` command."""

import sys

from .cli import main

sys.exit(main())
