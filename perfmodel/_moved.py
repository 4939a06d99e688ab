"""Deprecated module paths of perfmodel, each an alias of a module in the folders: importing one gives the
module at its place (the same module object; pickles naming the deprecated path load). Public ones warn once
(``FutureWarning``), at the user's line however the path is reached (``import``, ``importlib.import_module``, or
an attribute of the package: ``perfmodel.trace``).

One path is also a public name: ``perfmodel.calibrate`` is the function :func:`perfmodel.calibration.calibrate`,
and ``import perfmodel.calibrate as x`` (as ``perfmodel.calibrate`` after ``import perfmodel.calibrate``) gives
that function, since Python binds the package's attribute; ``from perfmodel.calibrate import name`` gives the
names of the module, :mod:`perfmodel.calibration` (``import perfmodel.calibration as x`` gives the module).

The table: deprecated path, the module's path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from typing import Any

from .errors import warn

#: old dotted path -> new dotted path
MOVED = {
    "perfmodel._args": "perfmodel.inputs.args",
    "perfmodel._cluster_kernel": "perfmodel.kernels.cluster",
    "perfmodel._cluster_presets": "perfmodel.network.presets",
    "perfmodel._cluster_records": "perfmodel.kernels.cluster_records",
    "perfmodel._cluster_replay": "perfmodel.replay.on_cluster",
    "perfmodel._cluster_specs": "perfmodel.network.specs",
    "perfmodel._codes": "perfmodel.inputs.codes",
    "perfmodel._coerce": "perfmodel.inputs.coerce",
    "perfmodel._data": "perfmodel.ground.data",
    "perfmodel._engine_checks": "perfmodel.inputs.engine_checks",
    "perfmodel._fitting": "perfmodel.network.fits",
    "perfmodel._fs": "perfmodel.ground.files",
    "perfmodel._inputs": "perfmodel.inputs.table",
    "perfmodel._kernels": "perfmodel.kernels.handoff",
    "perfmodel._layers": "perfmodel.model.layers",
    "perfmodel._model_presets": "perfmodel.model.presets",
    "perfmodel._onto_cluster": "perfmodel.network.placement",
    "perfmodel._prepared": "perfmodel.replay.prepared",
    "perfmodel._presets": "perfmodel.inputs.user_presets",
    "perfmodel._progress": "perfmodel.ground.progress",
    "perfmodel._questions": "perfmodel.replay.summaries",
    "perfmodel._replay": "perfmodel.kernels.replay",
    "perfmodel._resolve": "perfmodel.inputs.resolve",
    "perfmodel._shares": "perfmodel.kernels.threads",
    "perfmodel._sharing": "perfmodel.kernels.sharing",
    "perfmodel._words": "perfmodel.inputs.words",
    "perfmodel.calibrate": "perfmodel.calibration",
    "perfmodel.cluster_replay": "perfmodel.replay.cluster",
    "perfmodel.clusters": "perfmodel.network.clusters",
    "perfmodel.links": "perfmodel.network.links",
    "perfmodel.models": "perfmodel.model.models",
    "perfmodel.sizing": "perfmodel.replay.sizing",
    "perfmodel.trace": "perfmodel.replay.traces",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        if not spec.name.rsplit(".", 1)[-1].startswith("_"):
            warn(f"{spec.name} moved to {self.new}; the old path goes away in a future release", FutureWarning)
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self.spec  # (the import system gave it the old path's spec: its own back)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
