"""The ``df.perfmodel`` accessor: a stateless shim over :mod:`perfmodel.frame`.

Registered on ``import perfmodel``; imports numba only when first used, so importing
the package (and the command line's ``--help``) stays quick.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any

import pandas as pd


@pd.api.extensions.register_dataframe_accessor("perfmodel")
class PerfmodelAccessor:
    """``df.perfmodel.handoff_delay(...)``, ``df.perfmodel.assign_handoff_delay(...)`` and, for a trace,
    ``df.perfmodel.replay_ttft(...)``.

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
        """The ``handoff_delay_ms`` Series (ms) of :func:`perfmodel.handoff_delays` for this frame.

        ``kv_transfer_bandwidth`` is a bandwidth (GB/s), a link, or a :class:`perfmodel.Cluster` or cluster
        preset name (a column may mix them), as for :func:`perfmodel.handoff_delays`.

        >>> import pandas as pd, perfmodel
        >>> df = pd.DataFrame({"num_input_tokens": [32768]})
        >>> df.perfmodel.handoff_delay(kv_transfer_bandwidth="hgx-h100-8x400g", kv_bytes_per_token="llama-3.1-70b",
        ...                            tp=8).round(6).tolist()
        [26.843546]
        """
        from .frame import handoff_delays

        return handoff_delays(self._df, **keywords)

    def assign_handoff_delay(self, **keywords: Any) -> pd.DataFrame:
        """A new frame with the ``handoff_delay_ms`` column added (for ``.pipe`` and method chains)."""
        from .frame import RESULT_NAME, handoff_delays

        return self._df.assign(**{RESULT_NAME: handoff_delays(self._df, **keywords)})

    def replay_ttft(self, *args: Any, **keywords: Any) -> pd.DataFrame:
        """This frame replayed as a trace under load: :func:`perfmodel.replay_ttft` (its arguments after
        the trace), one row per request with the TTFT (ms) and its parts.

        >>> import pandas as pd, perfmodel
        >>> trace = pd.DataFrame({"arrival_ms": [0.0, 0.0], "num_input_tokens": [500, 600]})
        >>> trace.perfmodel.replay_ttft(1.0, 1e6, prefill_tokens_per_s=10_000, contention="fifo")["ttft_ms"].tolist()
        [550.0, 1150.0]
        """
        from .replay.ttft import replay_ttft

        return replay_ttft(self._df, *args, **keywords)


class _FacadeSignature:
    """The facade's real signature (without ``df``) for the accessor's methods, built on first
    request (``help()``, IDEs, ``inspect.signature``), so registering the accessor imports nothing."""

    def __get__(self, function: Any, owner: Any = None) -> inspect.Signature:
        from .frame import handoff_delays

        facade = inspect.signature(handoff_delays)
        parameters = [p for name, p in facade.parameters.items() if name != "df"]
        self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        returns = pd.Series if function is _SIGNED["handoff_delay"] else pd.DataFrame
        return facade.replace(parameters=[self_parameter, *parameters], return_annotation=returns)


class _Signed:
    """A method whose ``__signature__`` is the facade's (functions cannot hold a lazy attribute)."""

    __signature__ = _FacadeSignature()

    def __init__(self, function: Any) -> None:
        self._function = function
        functools.update_wrapper(self, function)
        del self.__wrapped__  # type: ignore[attr-defined]  # (set by update_wrapper) inspect must read __signature__, not unwrap to the **keywords function

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        return self._function(*args, **keywords)


_SIGNED: dict[str, Any] = {}
for _name in ("handoff_delay", "assign_handoff_delay"):
    _SIGNED[_name] = _Signed(getattr(PerfmodelAccessor, _name))
    setattr(PerfmodelAccessor, _name, _SIGNED[_name])
