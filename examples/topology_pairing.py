"""Topology-aware pairing and NIC mapping: how much of llm-d's TTFT gain can a handoff model explain?
======================================================================================================

llm-d's "Topology as an End-to-End Contract" measured 16 H200 serving gpt-oss-120b, 8 prefill workers at
TP1 and 2 decode workers at TP4, 45 QPS of 5,000-token prompts: mean TTFT 2.15 s, 1.16 s with channel
(NIC) mapping, 0.33 s with topology-aware pairing as well. This replays a synthetic trace of that setup
on two HGX H200 nodes (8 x 400G NICs, a rail-optimised fabric; prefill on node 0, decode on node 1)
with every handoff's flows sharing NICs and leaf links max-min fairly, and compares topology-blind
pairing (round robin) with topology-aware pairing (the fewest fabric hops), and GPUs sharing one
NIC per node against one NIC per GPU (1:1).

Assumptions: an ideal transport (line rate, no per-message cost), arrivals Poisson at 45 per second,
every prompt 5,000 tokens, 2.5 us per switch crossed, leaf uplinks not oversubscribed or 8:1 (the cluster is
the two nodes, so each leaf holds two NICs), handoffs ready at arrival (no prefill queueing or compute),
full-prompt transfers. The rest of TTFT (queueing for a prefill worker, prefill compute, the first decode
step) is outside this model. Run ``python examples/topology_pairing.py --out results``.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import perfmodel
from perfmodel.plotting import delay_cdf

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
n = 3000  # a bit over a minute at 45 QPS
trace = pd.DataFrame(
    {"arrival_ms": np.cumsum(rng.exponential(1000 / 45, n)), "num_input_tokens": np.full(n, 5000, dtype=np.int64)}
)
setup = dict(model="gpt-oss-120b", tp=1, decode_tp=4, prefill_workers=8, decode_workers=2, contention="fair")
runs, rows = {}, []
for (nics, mapping), ratio in [(m, r) for m in ((1, "shared NIC"), (8, "1:1 NIC")) for r in (1.0, 8.0)]:
    cluster = perfmodel.Cluster(
        nic="roce-400g",
        nics_per_node=nics,
        gpus_per_node=8,
        fabric="rail",
        oversubscription=ratio,
        hop_latency_ms=0.0025,
        name=f"{mapping}, {ratio:g}:1 leaves",
    )
    for routing, pairing in (("round_robin", "topology-blind"), ("topology", "topology-aware")):
        replay = perfmodel.replay_handoffs(trace, cluster, **setup, routing=routing)
        summary = perfmodel.summarize(replay)
        label = f"{mapping}, {ratio:g}:1 leaves, {pairing}"
        if nics == 8 and (ratio > 1 or routing == "round_robin"):
            runs[label] = replay
        elif nics == 1 and ratio == 1 and routing == "round_robin":
            runs[f"{mapping} (any leaves, any pairing)"] = replay  # its four replays are one curve
        rows.append(
            {
                "NIC mapping": mapping,
                "leaf uplinks": f"{ratio:g}:1",
                "pairing": pairing,
                "mean_ms": summary["mean_ms"],
                "p99_ms": summary["p99_ms"],
                "busiest resource": summary["busiest_resource"],
                "its utilisation": summary["busiest_utilisation"],
            }
        )
table = pd.DataFrame(rows)
fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
delay_cdf(runs, ax=ax)
ax.set_title("gpt-oss-120b, 8 x TP1 prefill -> 2 x TP4 decode, 45 QPS of 5,000-token prompts")
fig.savefig(out / "topology_pairing.png", dpi=130)
print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def figure(mapping: str, ratio: str, pairing: str, stat: str) -> float:
    """One replay's figure from the table."""
    row = table[(table["NIC mapping"] == mapping) & (table["leaf uplinks"] == ratio) & (table["pairing"] == pairing)]
    return float(row[stat].iloc[0])


shared = (
    figure("shared NIC", "1:1", "topology-blind", "mean_ms"),
    figure("shared NIC", "1:1", "topology-blind", "p99_ms"),
)
one_to_one = figure("1:1 NIC", "1:1", "topology-aware", "mean_ms"), figure("1:1 NIC", "1:1", "topology-aware", "p99_ms")
blind, aware = (figure("1:1 NIC", "8:1", p, "mean_ms") for p in ("topology-blind", "topology-aware"))
blind99, aware99 = (figure("1:1 NIC", "8:1", p, "p99_ms") for p in ("topology-blind", "topology-aware"))
uplink = 2 * perfmodel.get_link("roce-400g").bandwidth_gb_s / 8  # a leaf holds the two nodes' NICs of its rail
print(f"""
What a handoff model explains, from the table above:
- With leaf uplinks not oversubscribed, one NIC per GPU instead of one shared NIC per node shortens the
  handoff: mean {shared[0]:.1f} -> {one_to_one[0]:.1f} ms, p99 {shared[1]:.1f} -> {
    one_to_one[1]:.1f} ms (the eight prefill GPUs
  no longer queue on one port); pairing moves the mean by {
    abs(one_to_one[0] - figure("1:1 NIC", "1:1", "topology-blind", "mean_ms")):.3f} ms there.
- With 8:1 leaf uplinks ({uplink:g} GB/s each: the cluster is these two nodes, so a leaf holds two NICs), one NIC
  per GPU is slower than one shared NIC (mean {blind:.1f} or {aware:.1f} ms against {
    shared[0]:.1f} ms): with one NIC per
  node every flow stays on rail 0 (one leaf, no uplink), while a TP1 prefill GPU's four flows to a TP4
  decode worker cross rails, three of four when the decode worker sits on its rail's half of the node
  (topology-aware pairing always picks it) and all four otherwise (round robin, half the handoffs).
  Pairing is worth p99 {blind99:.1f} -> {aware99:.1f} ms there.
Every effect is milliseconds; llm-d's seconds of TTFT are queueing and compute, which this model leaves out.""")
print("\nmeasured by llm-d (mean TTFT): 2.15 s -> 1.16 s (NIC mapping) -> 0.33 s (and topology-aware pairing)")
