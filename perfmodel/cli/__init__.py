"""The ``perfmodel`` command.

    perfmodel sweep --out results          the main job: a what-if over models x links x prompt lengths
    perfmodel delay requests.csv --out delays.parquet --model llama-3.1-70b --link ib-ndr
    perfmodel trace trace.jsonl --model llama-3.1-70b --link ib-ndr --out replay
    perfmodel calibrate measurements.csv --name our-rdma --save --out calibration
    perfmodel models | perfmodel links     the presets (and perfmodel clusters, perfmodel connectors)
    perfmodel presets list                 your presets (show NAME, remove NAME)
    perfmodel cache [--clear | --prune]    the compiled kernels' cache

One module per command (``sweep``, ``delay``, ``trace``, ``calibrate``, ``models``, ``links``, ``clusters``,
``connectors``, ``presets``, ``ttft``, ``measured``, ``cache``), each
registering its own subcommand; :mod:`._parsing` reads values and builds the model's flags from the
input table; :mod:`._draw` draws figures beside the computation; :mod:`._main` holds the parser and
the entry point. Heavy modules (numba, matplotlib, pyarrow) are imported inside the commands, so
``perfmodel --help`` answers at once. Bad input ends with one line on stderr and exit code 2
(``--debug`` shows the traceback); outputs are written to a temporary file beside the target and
renamed into place only when complete.
"""

from ._main import build_parser, console, main  # noqa: F401 (build_parser: for the tests and the docs)
from ._parsing import UsageError, parse_tokens  # noqa: F401 (for the tests)

__all__ = ["console", "main"]
