"""The built-in clusters' fields by name, as plain data: :mod:`perfmodel.network.presets` builds each
:class:`perfmodel.Cluster` (and holds each field's source); :mod:`perfmodel.network.links`, below the clusters, reads
the names (a user link may not take a cluster's name: a link and a cluster go where one another go).
"""

from __future__ import annotations

from typing import Any

_NODE_OF_8 = dict(gpus_per_node=8, nvlink_domain=8, nvlink="nvlink4")

#: Each built-in cluster's fields but its name (ideal transport).
SPECS: dict[str, dict[str, Any]] = {
    "hgx-h100-8x400g": dict(nic="ib-ndr", nics_per_node=8, **_NODE_OF_8, fabric="rail"),
    "hgx-h200-8x400g": dict(nic="ib-ndr", nics_per_node=8, **_NODE_OF_8, fabric="rail"),
    "gcp-a3-ultra": dict(nic="roce-400g", nics_per_node=8, **_NODE_OF_8),
    "aws-p5": dict(nic="efa-100g", nics_per_node=32, **_NODE_OF_8),
    "aws-p5en": dict(nic="efa-200g", nics_per_node=16, **_NODE_OF_8),
    "gb200-nvl72": dict(nic="ib-ndr", nics_per_node=4, gpus_per_node=4, nvlink_domain=72, nvlink="nvlink5"),
}
