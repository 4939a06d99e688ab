"""The ``df.perfmodel`` accessor: a stateless shim over :mod:`perfmodel.frame`.

Registered on ``import perfmodel``; imports numba only when first used, so importing
the package (and the command line's ``--help``) stays quick.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


@pd.api.extensions.register_dataframe_accessor("perfmodel")
class PerfmodelAccessor:
    """``df.perfmodel.handoff_delay(...)`` and ``df.perfmodel.assign_handoff_delay(...)``.

    Keywords are those of :func:`perfmodel.handoff_delays`. pandas builds a new
    accessor on every access, so it keeps nothing but the frame.

    >>> import pandas as pd, perfmodel
    >>> df = pd.DataFrame({"num_input_tokens": [128, 256]})
    >>> df.perfmodel.assign_handoff_delay(kv_transfer_bandwidth=1.0, kv_bytes_per_token=1_000_000)
       num_input_tokens  handoff_delay_ms
    0               128             128.0
    1               256             256.0
    """

    def __init__(self, df: pd.DataFrame) -> None:
        self._df = df

    def handoff_delay(self, **keywords: Any) -> pd.Series:
        """The ``handoff_delay_ms`` Series of :func:`perfmodel.handoff_delays` for this frame."""
        from .frame import handoff_delays

        return handoff_delays(self._df, **keywords)

    def assign_handoff_delay(self, **keywords: Any) -> pd.DataFrame:
        """A new frame with the ``handoff_delay_ms`` column added (for ``.pipe`` and method chains)."""
        from .frame import RESULT_NAME, handoff_delays

        return self._df.assign(**{RESULT_NAME: handoff_delays(self._df, **keywords)})
