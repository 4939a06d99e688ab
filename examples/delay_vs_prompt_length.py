"""Handoff delay against prompt length: NVLink, InfiniBand, PCIe and Ethernet, two models.
=======================================================================================

Run ``python examples/delay_vs_prompt_length.py --out results``.
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
links = ["nvlink4", "ib-ndr", "pcie5", "eth-100g"]
models = ["llama-3.1-70b", "deepseek-v3"]
df = perfmodel.sweep(model=models, link=links, num_input_tokens=2 ** np.arange(7, 18))

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True, layout="constrained")
for ax, model in zip(axes, models):
    pp.delay_vs_tokens(df[df["model"] == model], hue="link", budgets_ms=[50], ax=ax)
    ax.set_title(f"{model} ({perfmodel.kv_bytes_per_token(model):,} B/token, bf16)")
fig.suptitle("KV-cache handoff delay: bytes / line rate")
fig.savefig(out / "delay_vs_prompt_length.png", dpi=130)
at_32k = df[df["num_input_tokens"] == 32768].pivot_table(
    index="link", columns="model", values="handoff_delay_ms", observed=True
)
print("handoff delay at 32k tokens (ms):")
print(at_32k.round(2).to_string())
