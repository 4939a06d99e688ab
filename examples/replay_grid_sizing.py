"""Sizing the handoff links for real traffic: which NICs and how many keep the p99 under 100 ms?

    python examples/replay_grid_sizing.py --out results

A replay grid over the Mooncake sample trace (3,993 requests; when the workspace's
../shared/data is not beside the repository, a synthetic trace of the same shape instead):
Llama-3.1-70B, 8 decode workers with prefix caches, destination_missing charging, fair
sharing of the links, over NIC bandwidth (1 to 8 400G ports) x the number of such links.
"""

from pathlib import Path

import matplotlib.pyplot as plt
from _common import output_dir

import perfmodel
import perfmodel.plotting as pp

out = output_dir(__doc__.splitlines()[0])
sample = Path(__file__).resolve().parents[2] / "shared" / "data" / "mooncake_synthetic_trace.jsonl"
trace = perfmodel.read_trace(sample) if sample.is_file() else perfmodel.synthetic_trace(4000, rate_per_s=4, seed=7)
budget_ms = 100.0
grid = perfmodel.replay_grid(trace, model="llama-3.1-70b", link=["ib-ndr", "2x ib-ndr", "4x ib-ndr", "8x ib-ndr"],
                             links=[1, 2, 4], decode_workers=8, mode="destination_missing", contention="fair")
fig = pp.replay_grid_figure(grid, budget_ms=budget_ms)
fig.suptitle(f"{'Mooncake sample' if sample.is_file() else 'synthetic'} trace, llama-3.1-70b, 8 decode workers, "
             "fair sharing", fontsize="medium")
fig.savefig(out / "replay_grid_sizing.png", dpi=130)
plt.close(fig)
grid.to_csv(out / "replay_grid_sizing.csv", index=False)
meeting = grid[grid["p99_ms"] <= budget_ms].sort_values(["links", "p99_ms"])
print(grid[["link", "links", "p50_ms", "p99_ms", "link_utilisation"]].to_string(index=False))
print(f"\nconfigurations with p99 <= {budget_ms:g} ms (fewest links first):")
print(meeting[["link", "links", "p99_ms"]].to_string(index=False))
