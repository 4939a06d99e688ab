"""What a destination prefix-cache hit saves: full_prompt against destination_missing over hit ratios.
===================================================================================================

Run ``python examples/prefix_cache_savings.py --out results``.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np

import perfmodel

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
ratios = np.linspace(0, 1, 21)
df = perfmodel.sweep(
    model="llama-3.1-70b",
    link="ib-ndr",
    mode=["full_prompt", "destination_missing"],
    cache_hit_ratio=ratios,
    block_size=[16, 512],
    num_input_tokens=[8192, 32768],
)
fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
styles = iter([("-", "o"), ("--", "s"), ("-.", "^"), (":", "D")])
for (tokens, block), part in df[df["mode"] == "destination_missing"].groupby(["num_input_tokens", "block_size"]):
    linestyle, marker = next(styles)
    ax.plot(
        part["cache_hit_ratio"],
        part["handoff_delay_ms"],
        linestyle=linestyle,
        marker=marker,
        markersize=4,
        label=f"{tokens // 1024}k tokens, {block}-token blocks",
    )
for tokens in (8192, 32768):
    full = df[(df["mode"] == "full_prompt") & (df["num_input_tokens"] == tokens)]["handoff_delay_ms"].iloc[0]
    ax.axhline(full, color="0.4", linewidth=0.8, linestyle=":")
    ax.annotate(f"full prompt, {tokens // 1024}k", (0.5, full), color="0.3", fontsize="small", va="bottom")
ax.set_xlabel("fraction of the prompt cached at the decode worker")
ax.set_ylabel("handoff delay (ms)")
ax.set_title("llama-3.1-70b over 400G InfiniBand: destination_missing vs full_prompt")
ax.grid(True, alpha=0.3)
ax.legend(fontsize="small")
fig.savefig(out / "prefix_cache_savings.png", dpi=130)
half = df[(df["cache_hit_ratio"] == 0.5) & (df["num_input_tokens"] == 32768)]
print(half[["mode", "block_size", "handoff_delay_ms"]].to_string(index=False))
