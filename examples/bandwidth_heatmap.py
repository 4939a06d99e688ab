"""Where a handoff fits in a budget: delay over bandwidth x prompt length, with 10/50/100 ms contours.
===================================================================================================

Run ``python examples/bandwidth_heatmap.py --out results``.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np

import perfmodel
import perfmodel.plotting as pp

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
model = "llama-3.1-70b"
df = perfmodel.sweep(
    model=model,
    kv_transfer_bandwidth=np.geomspace(5, 1000, 60),
    num_input_tokens=np.unique(np.geomspace(128, 131072, 60).astype(int)),
)
fig, ax = plt.subplots(figsize=(7.5, 5), layout="constrained")
pp.heatmap(df, budgets_ms=(10, 50, 100), links=["ib-ndr", "nvlink4", "pcie5", "8x ib-ndr"], ax=ax)
ax.set_title(f"{model}: handoff delay (bf16 KV, TP1, one GPU's bytes)", fontsize="medium")
fig.savefig(out / "bandwidth_heatmap.png", dpi=130)
needed = perfmodel.required_bandwidth([8192, 32768, 131072], model, budget_ms=50.0)
print("GB/s needed for a 50 ms handoff at 8k / 32k / 128k tokens:", np.round(needed, 1))
