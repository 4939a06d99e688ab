"""Sizing the handoff links for real traffic: which NICs and how many keep the p99 under 100 ms?
=============================================================================================

Run ``python examples/replay_grid_sizing.py --out results``.

A replay grid over the Mooncake sample trace shipped with perfmodel (3,993 requests):
Llama-3.1-70B, 8 decode workers with prefix caches, destination_missing charging, fair
sharing of the links, over NIC bandwidth (1 to 8 400G ports) x the number of such links.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt

import perfmodel
import perfmodel.plotting as pp

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
trace = perfmodel.datasets.load("mooncake-synthetic")
budget_ms = 100.0
grid = perfmodel.replay_grid(
    trace,
    model="llama-3.1-70b",
    link=["ib-ndr", "2x ib-ndr", "4x ib-ndr", "8x ib-ndr"],
    links=[1, 2, 4],
    decode_workers=8,
    mode="destination_missing",
    contention="fair",
)
fig = pp.replay_grid_figure(grid, budget_ms=budget_ms)
fig.suptitle("Mooncake sample trace, llama-3.1-70b (bf16, TP 1), 8 decode workers, fair sharing", fontsize="medium")
fig.savefig(out / "replay_grid_sizing.png", dpi=130)
plt.close(fig)
grid.to_csv(out / "replay_grid_sizing.csv", index=False)
meeting = grid[grid["p99_ms"] <= budget_ms].sort_values(["links", "p99_ms"])
print(grid[["link", "links", "p50_ms", "p99_ms", "link_utilisation"]].to_string(index=False))
print(f"\nconfigurations with p99 <= {budget_ms:g} ms (fewest links first):")
print(meeting[["link", "links", "p99_ms"]].to_string(index=False))
