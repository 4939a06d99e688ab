"""``python -m perfmodel``: the same as the ``perfmodel`` command."""

import sys

try:
    from .cli import console
except KeyboardInterrupt:  # Ctrl-C while the command's modules load: one line, the usual exit code
    print("perfmodel: interrupted during start-up; nothing was written", file=sys.stderr)
    raise SystemExit(130) from None

console()
