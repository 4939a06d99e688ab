"""How many NICs per node for a p99 budget? The handoff's p99 against NICs per node, on an HGX-like node.
======================================================================================================

Each request of the Azure code trace (2023) hands off its prompt alone, Llama-3.1-70B from a TP8
prefill worker to a TP8 decode worker, on 8-GPU nodes of 1 to 16 400G NICs with the Mooncake
transfer engine's efficiency and per-message cost (engines merge a fresh request's blocks: one
message per layer and K/V). Fewer NICs than GPUs means GPUs sharing a NIC; the p99 shows where
adding NICs stops paying. Run ``python examples/nics_per_node.py --out results``.
"""

import argparse
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np

import perfmodel
from perfmodel import datasets

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
prompts = datasets.load("azure-code-2023")["num_input_tokens"].to_numpy()
budget_ms = 10.0
counts = [1, 2, 4, 8, 16]
rows = []
fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
for model, tp, marker in (("llama-3.1-70b", 8, "o"), ("llama-3.1-8b", 1, "s")):
    p99 = []
    for nics in counts:
        node = perfmodel.Cluster(
            nic="roce-400g", nics_per_node=nics, gpus_per_node=8, transport="mooncake-te-rdma", name=f"{nics} x 400G"
        )
        delays = perfmodel.handoff_delay_ms(prompts, node, model, tp=tp, block_size=16, blocks_per_message=math.inf)
        p99.append(float(np.percentile(delays, 99)))
        rows.append((model, tp, nics, float(np.percentile(delays, 50)), p99[-1]))
    ax.plot(counts, p99, marker=marker, label=f"{model}, TP{tp}")
ax.axhline(budget_ms, color="0.4", linestyle=":", linewidth=0.8)
ax.annotate(f"budget {budget_ms:g} ms", (counts[0], budget_ms), va="bottom", fontsize="small", color="0.3")
ax.set_xscale("log", base=2)
ax.set_xticks(counts, [str(c) for c in counts])
ax.set_xlabel("400G NICs per 8-GPU node")
ax.set_ylabel("p99 handoff delay (ms)")
ax.set_title("Azure code trace: p99 handoff against NICs per node (Mooncake TE efficiency)")
ax.grid(True, alpha=0.3)
ax.legend(fontsize="small")
fig.savefig(out / "nics_per_node.png", dpi=130)
print(f"{'model':15s} {'tp':>3s} {'NICs':>5s} {'p50 ms':>8s} {'p99 ms':>8s}")
for model, tp, nics, p50, p99 in rows:
    print(f"{model:15s} {tp:3d} {nics:5d} {p50:8.3f} {p99:8.3f}")
