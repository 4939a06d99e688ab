"""Predict an end-to-end handoff from a transport profile and a model.
=====================================================================

Run ``python examples/predict_from_profile.py --out results``.

A transport profile (``perfmodel links`` lists them, each with its source) is a bandwidth and a
cost per message fitted to a published microbenchmark. With a model, its tensor parallelism on
both sides and the serving engine's KV layout, it predicts what a handoff costs. Here: Qwen3-8B
on one GPU and Qwen3-235B-A22B from a TP-4 prefill to a TP-8 decode group, over one 400G RDMA
port with three transfer engines, 1k to 128k tokens.

The assumptions, all explicit: one rank's link carries the busiest rank's bytes
(``scope="rank"``); each rank posts its own messages, one per 16-token block, layer and K or V
(``kv_layout="layer_kv"``, as vLLM's NIXL connector registers them); the engine reaches the
profile's bandwidth and per-message cost measured by its microbenchmark (one thread, no other
traffic); no queueing (``perfmodel trace`` replays contention).
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import perfmodel
import perfmodel.plotting as pp

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)
profiles = ["fastdeploy-rdma", "mooncake-te-rdma", "nixl-ucx-rdma"]
tokens = 2 ** np.arange(10, 18)
setups = {
    "qwen3-8b, TP 1": dict(model="qwen3-8b", tp=1, decode_tp=1),
    "qwen3-235b-a22b, TP 4 to 8": dict(model="qwen3-235b-a22b", tp=4, decode_tp=8),
}

fig, axes = plt.subplots(1, len(setups), figsize=(11, 4.3), layout="constrained", sharey=True)
tables = []
for ax, (title, setup) in zip(axes, setups.items()):
    df = perfmodel.sweep(**setup, link=[*profiles, "roce-400g"], block_size=16, num_input_tokens=tokens)
    pp.delay_vs_tokens(df, hue="link", legend=ax is axes[0], ax=ax)
    per_rank = perfmodel.kv_bytes_per_token(setup["model"], tp=setup["tp"], decode_tp=setup["decode_tp"])
    ax.set_title(f"{title}: {per_rank:,} B/token on the busiest rank", fontsize="medium")
    tables.append(df[df["link"] != "roce-400g"].assign(setup=title))
axes[0].set_ylabel("predicted handoff delay (ms)")
axes[1].set_ylabel("")
fig.suptitle(
    "Transport profiles against line rate (roce-400g): bf16, 16-token blocks, layer_kv messages, one "
    "400G RDMA port per rank",
    fontsize="medium",
)
fig.savefig(out / "predict_from_profile.png", dpi=130)

table = pd.concat(tables).pivot_table(
    index=["setup", "num_input_tokens"], columns="link", values="handoff_delay_ms", observed=True
)
print("predicted handoff delay (ms):")
print(table.round(2).to_string())
