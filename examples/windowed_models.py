"""Full attention or a sliding window? Bytes per request and handoff delay against prompt length.
==============================================================================================

Run ``python examples/windowed_models.py --out results``.

A full-attention model (Llama-3.1-8B) against models that keep only part of a long prompt:
gpt-oss-120b (every other layer a 128-token window), Gemma 3 27B (5 of 6 layers a 1024-token
window), Llama 4 Scout (3 of 4 layers only the current 8192-token chunk: its bytes drop at
each chunk boundary) and Qwen3-Next (3 of 4 layers a fixed Gated DeltaNet state). The dashed
lines are what counting every layer as full attention would say (upstream's and every peer
simulator's constant bytes per token).
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
models = ["llama-3.1-8b", "gpt-oss-120b", "gemma-3-27b", "llama-4-scout", "qwen3-next-80b-a3b"]
chunk_ends = np.arange(1, 17) * 8192  # Llama 4 Scout's bytes drop right after each of them
tokens = np.unique(
    np.concatenate([np.geomspace(256, 131_072, 300).astype(int), [1024, 32_768], chunk_ends, chunk_ends + 1])
)
df = perfmodel.sweep(model=models, link="ib-ndr", num_input_tokens=tokens)

fig, (bytes_ax, delay_ax) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
for (model, part), color in zip(df.groupby("model", observed=True), plt.cm.tab10.colors):
    bytes_ax.plot(part["num_input_tokens"], part["transfer_bytes"] / 1e9, color=color, label=model)
    delay_ax.plot(part["num_input_tokens"], part["handoff_delay_ms"], color=color, label=model)
    terms = perfmodel.kv_terms(model)
    layers = terms.full_layers + terms.window_layers + terms.chunk_layers + terms.state_layers
    if not terms.proportional and terms.full_layers:  # every layer counted as full attention
        per_token = terms.full_bytes_per_token / terms.full_layers * layers
        bytes_ax.plot(tokens, tokens * per_token / 1e9, color=color, linestyle="--", linewidth=1)
for ax, label in ((bytes_ax, "KV bytes per request (GB)"), (delay_ax, "handoff delay over ib-ndr (ms)")):
    ax.set(xscale="log", yscale="log", xlabel="prompt tokens", ylabel=label)
    ax.grid(True, which="major", alpha=0.3)
bytes_ax.set_title("bytes moved (dashed: every layer full attention)")
delay_ax.set_title("handoff delay, one 400G NIC")
delay_ax.axhline(50, color="0.4", linewidth=0.8)
delay_ax.legend(fontsize="small")
fig.savefig(out / "windowed_models.png", dpi=130)

at = df[df["num_input_tokens"].isin([1024, 8192, 8193, 32768, 131072])]
table = at.pivot_table(index="model", columns="num_input_tokens", values="transfer_bytes", observed=True) / 1e6
print("KV bytes per request (MB) at a few prompt lengths:")
print(table.round(1).to_string())
longest = {m: perfmodel.max_tokens_within("ib-ndr", m, budget_ms=50) for m in models}
print("\nlongest prompt whose handoff fits in 50 ms on one 400G NIC (every shorter one fits too):")
for model, n in longest.items():
    print(f"  {model:20s} {'any' if np.isinf(n) else f'{int(n):,}'} tokens")
