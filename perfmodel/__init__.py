"""perfmodel: the KV-cache handoff delay of disaggregated LLM serving, for millions of cases at once.

Heavy modules (numba kernels, matplotlib) load on first use, so ``import perfmodel``
and the ``perfmodel`` command start quickly.

>>> import perfmodel
>>> perfmodel.handoff_delay_ms(32_768, 50.0, 327_680)  # Llama-3.1-70B prompt over 400G IB
np.float64(214.7483648)
"""

from __future__ import annotations

import importlib
import os as _os
import sys as _sys
import types as _types
from typing import Any

from . import _moved  # noqa: F401  (the old module paths, moved)

try:
    from . import _accessor  # noqa: F401  (registers df.perfmodel; imports pandas, the slow part of start-up)
except KeyboardInterrupt:
    # Ctrl-C while the ``perfmodel`` command starts (console script, or ``python -m perfmodel`` being
    # located): one line and the usual exit code, not a traceback from deep inside numpy's import.
    if _os.path.basename(_sys.argv[0]) in ("perfmodel", "-m"):
        print("perfmodel: interrupted during start-up; nothing was written", file=_sys.stderr)
        raise SystemExit(130) from None
    raise
from .inputs.codes import TransferMode, WorkerType

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access, PEP 562)
_LAZY = {
    "set_options": "options",
    "get_options": "options",
    "handoff_delay_ms": "handoff",
    "destination_missing_tokens": "handoff",
    "InputError": "errors",
    "handoff_delays": "frame",
    "sweep": "sweeps",
    "required_bandwidth": "sweeps",
    "max_tokens_within": "sweeps",
    "read_trace": "replay.traces",
    "replay_handoffs": "replay",
    "replay_ttft": "replay.ttft",
    "summarize_ttft": "replay.ttft",
    "ttft_grid": "replay.ttft_grid",
    "max_rate_for_ttft": "replay.ttft_grid",
    "fewest_for_ttft": "replay.ttft_grid",
    "fit_prefill": "model.prefill",
    "PrefillProfile": "model.prefill",
    "save_prefill": "model.prefill",
    "get_prefill": "model.prefill",
    "user_prefills": "model.prefill",
    "summarize": "replay",
    "replay_grid": "replay",
    "synthetic_trace": "replay.traces",
    "MODELS": "model.models",
    "kv_bytes_per_token": "model.models",
    "kv_bytes": "model.models",
    "kv_terms": "model.models",
    "kv_messages": "model.models",
    "KVTerms": "model.models",
    "model_config": "model.models",
    "LINKS": "network.links",
    "Link": "network.links",
    "fit_link": "network.links",
    "get_link": "network.links",
    "Transport": "network.links",
    "Cluster": "network.clusters",
    "CLUSTERS": "network.presets",
    "get_cluster": "network.presets",
    "save_cluster": "network.presets",
    "remove_cluster": "network.presets",
    "user_clusters": "network.presets",
    "transports": "network.links",
    "Connector": "network.connector",
    "CONNECTORS": "network.connector",
    "fit_connector": "network.connector",
    "get_connector": "network.connector",
    "save_connector": "network.connector",
    "user_connectors": "network.connector",
    "handoff_flows": "flows",
    "required_nics_per_node": "flows",
    "required_nics": "replay.sizing",
    "resource_loads": "flows",
    "kv_heads": "network.clusters",
    "calibrate": "calibration",
    "read_engine_metrics": "engines",
    "read_benchmark": "engines",
    "compare_measured": "engines",
    "measured_fits": "engines",
}

__all__ = ["TransferMode", "WorkerType", "__version__", *_LAZY]  # noqa: PLE0604 (the lazy names, written once)


_SUBMODULES = {
    "inputs",
    "model",
    "network",
    "kernels",
    "ground",
    "calibration",
    "plotting",
    "frame",
    "handoff",
    "links",
    "models",
    "sweeps",
    "trace",
    "replay",
    "io",
    "errors",
    "dask",
    "datasets",
    "clusters",
    "flows",
    "engines",
    "sizing",
    "options",
}


class _Package(_types.ModuleType):
    """perfmodel's own module type: ``perfmodel.calibrate`` stays the function once the module of that name
    (:mod:`perfmodel.calibration`) is imported, which would otherwise bind the module in its place."""

    @property
    def calibrate(self) -> Any:
        return importlib.import_module(".calibration", __name__).calibrate

    @calibrate.setter
    def calibrate(self, module: Any) -> None:  # the import system binding the submodule: it stays in sys.modules
        pass


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # perfmodel.plotting etc. without an explicit import
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'perfmodel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
