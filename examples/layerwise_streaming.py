"""Does layer-wise streaming hide the handoff for a trace's prompts? Exposed delay against prompt length.
======================================================================================================

Run ``python examples/layerwise_streaming.py --out results``.

Llama-3.1-70B over one 400G NIC: the transfer sent after prefill (upstream's model) against
layer-wise streaming (each layer sent as soon as it is computed) at three prefill rates.
Streaming exposes only what cannot hide behind compute: the last layer's share while the
prefill is slower than the link, and the rest of the transfer once it is faster.
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
tokens = 2 ** np.arange(9, 18)
rates = [10_000, 100_000, 400_000]  # prefill tokens/s: one GPU's long-prompt rate, a fast group, a very fast one
df = perfmodel.sweep(
    model="llama-3.1-70b",
    link="ib-ndr",
    overlap=["none", "layerwise"],
    prefill_tokens_per_s=rates,
    num_input_tokens=tokens,
)
after_prefill = df[(df["overlap"] == "none") & (df["prefill_tokens_per_s"] == rates[0])]
fig, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
ax.plot(
    after_prefill["num_input_tokens"],
    after_prefill["handoff_delay_ms"],
    color="0.1",
    linewidth=2.2,
    label="after prefill (upstream)",
)
streamed = df[df["overlap"] == "layerwise"].assign(
    setting=lambda d: d["prefill_tokens_per_s"].map(lambda r: f"layer-wise, prefill at {r / 1000:g}k tokens/s")
)
pp.delay_vs_tokens(streamed, hue="setting", budgets_ms=[10, 50], ax=ax)
ax.legend(fontsize="small", title=None)
ax.set_title("llama-3.1-70b over ib-ndr: the handoff delay the client sees")
fig.savefig(out / "layerwise_streaming.png", dpi=130)
at_32k = df[df["num_input_tokens"] == 32768].pivot_table(
    index="prefill_tokens_per_s", columns="overlap", values="handoff_delay_ms", observed=True
)
print("exposed handoff delay at 32k tokens (ms):")
print(at_32k.round(2).to_string())
