"""``python -m perfmodel``: the same as the ``perfmodel`` command."""

from .cli import console

console()
