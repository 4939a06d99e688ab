"""What do a block size and a KV layout cost, and how much does layer-wise streaming hide?
=======================================================================================

Run ``python examples/block_size_and_layout.py --out results``.

A 32k-token handoff over one 400G RDMA port with NIXL over UCX (the ``nixl-ucx-rdma``
transport profile: 15.6 GB/s and 0.73 us per message, fitted to LMCache's published
microbenchmark), for three models and block sizes from 16 to 256 tokens. Each message is a
contiguous region of the KV cache: one per block, layer and K or V in ``layer_kv`` (vLLM's
NIXL connector), one per block and layer in ``layer``, one per block in ``block`` (every
layer of a block contiguous). Dashed: the same handoffs streamed layer by layer while a
prefill of 20k tokens/s computes them, which hides all but the last layer's share.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

import perfmodel

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
models = ["llama-3.1-8b", "llama-3.1-70b", "deepseek-v3"]
blocks = [16, 32, 64, 128, 256]
link = "nixl-ucx-rdma"
df = perfmodel.sweep(
    model=models,
    link=link,
    kv_layout=["layer_kv", "layer", "block"],
    block_size=blocks,
    overlap=["none", "layerwise"],
    prefill_tokens_per_s=20_000,
    num_input_tokens=32_768,
)
bytes_only = perfmodel.sweep(
    model=models, kv_transfer_bandwidth=perfmodel.get_link(link).bandwidth_gb_s, num_input_tokens=32_768
)

fig, axes = plt.subplots(1, len(models), figsize=(12, 4.2), layout="constrained", sharey=True)
for ax, model in zip(axes, models):
    rows = df[df["model"] == model]
    for (layout, part), color in zip(rows.groupby("kv_layout", observed=True), plt.cm.tab10.colors):
        for overlap, style in (("none", "-"), ("layerwise", "--")):
            line = part[part["overlap"] == overlap]
            ax.plot(
                line["block_size"],
                line["handoff_delay_ms"],
                style,
                marker="o" if overlap == "none" else "s",
                color=color,
                label=f"{layout}" + (", streamed layer-wise" if overlap == "layerwise" else ""),
            )
    floor = float(bytes_only.loc[bytes_only["model"] == model, "handoff_delay_ms"].iloc[0])
    ax.axhline(floor, color="0.5", linewidth=1, linestyle=":", label="bytes alone")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(blocks, [str(b) for b in blocks])
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda value, _: f"{value / 1000:g}k" if value >= 1000 else f"{value:g}")
    )
    ax.set_xlabel("block size (tokens)")
    ax.set_title(f"{model}" + (" (MLA: layer_kv = layer)" if model == "deepseek-v3" else ""), fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
axes[0].set_ylabel("handoff delay (ms)")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=7, fontsize="small")
fig.suptitle(
    f"32k-token handoff over {link} (0.73 us per message), bf16, TP 1; streamed: prefill at 20k tokens/s",
    fontsize="medium",
)
fig.savefig(out / "block_size_and_layout.png", dpi=130)

at_16 = df[df["block_size"] == 16].pivot_table(
    index="model", columns=["kv_layout", "overlap"], values="handoff_delay_ms", observed=True
)
print(f"32k-token handoff over {link} at 16-token blocks (ms):")
print(at_16.round(1).to_string())
messages = {m: int(perfmodel.kv_messages(m, 32_768, 16)) for m in models}
print("\nmessages per handoff at 16-token blocks, layer_kv:", messages)
