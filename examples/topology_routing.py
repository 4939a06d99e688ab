"""When does topology routing help? Round robin, least loaded and topology-aware decode routing, measured
=======================================================================================================

``routing="topology"`` sends a handoff to the decode worker its flows reach in the fewest fabric hops
(NVLink counting 0), ties by the longest cached prefix, then the least loaded, then round robin. This
replays synthetic traces on four clusters, every handoff's flows sharing NICs, leaf uplinks and NVLink
ports max-min fairly (``contention="fair"``), and compares the policies by the handoff delay (mean and
p99) and by the share of requests the busiest decode worker took.

- **GB200 NVL72**, 16 prefill workers at TP4 (nodes 0-15) and 4 decode workers at TP4: two on nodes 16
  and 17, inside the prefill workers' NVLink domain of 72 GPUs, two on nodes 18 and 19, in the next
  rack's. Topology routing keeps every handoff on NVLink (900 GB/s per GPU against a 400G NIC).
- **Rail-optimised HGX, 8:1 leaf uplinks**, 8 prefill workers at TP1 and 2 decode workers at TP4
  (gpt-oss-120b): a TP1 prefill GPU's four flows cross rails (leaf, spine, leaf) except the one to the
  decode rank on its own rail; the decode worker on the prefill GPU's half of the node has one flow on the
  prefill's rail, the other none, so topology routing saves one crossing of an oversubscribed uplink.
  With 1:1 uplinks the same choice saves nothing measurable.
- **HGX TP8 -> TP8**, 2 prefill and 2 decode workers, one NIC per GPU: every flow goes rank i -> rank i
  on rail i, so every decode worker is the same number of hops away, and topology routing is its
  tie-breaks: the longest cached prefix first. In ``mode="full_prompt"`` (the default) a cached prefix
  saves no bytes, so following it only piles requests onto one worker: topology routing does worse than
  round robin there. In ``mode="destination_missing"`` the cached prefix is not sent, and following it
  (as ``routing="prefix"`` does) moves fewer bytes: it does better.

Assumptions: an ideal transport (line rate, no per-message cost), Poisson arrivals, the synthetic traces'
prompt lengths and prefix reuse, handoffs ready at arrival. Run ``python examples/topology_routing.py
--out results``.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import perfmodel

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)

ROUTINGS = ("round_robin", "least_loaded", "topology")
rng = np.random.default_rng(0)
fixed = pd.DataFrame(
    {"arrival_ms": np.cumsum(rng.exponential(1000 / 45, 3000)), "num_input_tokens": np.full(3000, 5000, dtype=np.int64)}
)  # 45 QPS of 5,000 tokens


def rail(ratio: float) -> perfmodel.Cluster:
    return perfmodel.Cluster(
        nic="roce-400g",
        nics_per_node=8,
        gpus_per_node=8,
        fabric="rail",
        oversubscription=ratio,
        hop_latency_ms=0.0025,
        name=f"HGX rail {ratio:g}:1",
    )


CASES = {
    "NVL72, 2 of 4 decode workers in the prefill's NVLink domain": (
        perfmodel.synthetic_trace(3000, rate_per_s=200, seed=0),
        "gb200-nvl72",
        dict(model="llama-3.1-70b", tp=4, prefill_workers=16, decode_workers=4),
    ),
    "HGX rail 8:1 uplinks, TP1 x8 -> TP4 x2": (
        fixed,
        rail(8.0),
        dict(model="gpt-oss-120b", tp=1, decode_tp=4, prefill_workers=8, decode_workers=2),
    ),
    "HGX rail 1:1 uplinks, TP1 x8 -> TP4 x2": (
        fixed,
        rail(1.0),
        dict(model="gpt-oss-120b", tp=1, decode_tp=4, prefill_workers=8, decode_workers=2),
    ),
    "HGX TP8 -> TP8, full_prompt": (
        perfmodel.synthetic_trace(3000, rate_per_s=40, seed=0),
        "hgx-h100-8x400g",
        dict(model="llama-3.1-70b", tp=8, prefill_workers=2, decode_workers=2),
    ),
    "HGX TP8 -> TP8, destination_missing": (
        perfmodel.synthetic_trace(3000, rate_per_s=40, seed=0),
        "hgx-h100-8x400g",
        dict(model="llama-3.1-70b", tp=8, prefill_workers=2, decode_workers=2, mode="destination_missing"),
    ),
}

rows = []
for case, (trace, cluster, setup) in CASES.items():
    for routing in ROUTINGS:
        replay = perfmodel.replay_handoffs(trace, cluster, **setup, routing=routing, contention="fair")
        summary = perfmodel.summarize(replay)
        rows.append(
            {
                "case": case,
                "routing": routing,
                "mean_ms": summary["mean_ms"],
                "p99_ms": summary["p99_ms"],
                "busiest worker's share": replay["decode_worker"].value_counts(normalize=True).max(),
            }
        )
table = pd.DataFrame(rows)
wide = table.pivot(index="case", columns="routing", values="p99_ms").loc[list(CASES), list(ROUTINGS)]

fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
y = np.arange(len(wide))
for k, routing in enumerate(ROUTINGS):
    ax.barh(y + (k - 1) * 0.27, wide[routing], height=0.27, label=routing)
ax.set_yticks(y, wide.index, fontsize="small")
ax.invert_yaxis()
ax.set_xscale("log")
ax.set_xlabel("p99 handoff delay (ms, log scale)")
ax.legend(title="routing", fontsize="small")
ax.set_title("When topology routing helps: p99 handoff delay by decode routing")
fig.savefig(out / "topology_routing.png", dpi=130)
plt.close(fig)

print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
print("\np99 of topology over round robin (below 1: topology helps):")
print((wide["topology"] / wide["round_robin"]).to_string(float_format=lambda v: f"{v:.2f}"))
