"""A pandas pipeline: a CSV of requests in, the handoff delay column added, a group-by summary out.
================================================================================================

Run ``python examples/pandas_pipeline.py --out results``.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

import perfmodel  # noqa: F401  (registers df.perfmodel)

parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNG (and tables)")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)

# A request log as a serving fleet might export it (made up here, seeded): one row per request.
rng = np.random.default_rng(42)
n = 20_000
log = pd.DataFrame(
    {
        "request_id": [f"req-{i:05d}" for i in range(n)],
        "model": rng.choice(["llama-3.1-70b", "qwen3-32b", "deepseek-v3"], n, p=[0.5, 0.3, 0.2]),
        "prompt_tokens": np.minimum(rng.lognormal(8.0, 1.2, n).astype(int), 131_072),
        "worker": rng.choice(["prefill", "decode", "aggregated"], n, p=[0.7, 0.2, 0.1]),
    }
)
log.to_csv(out / "requests.csv", index=False)

requests = pd.read_csv(out / "requests.csv", dtype={"model": "category", "worker": "category"})
# The what-if: the SAME requests on every interconnect (a cross join), so the interconnects are compared
# on identical traffic and their differences are the interconnect's alone.
interconnects = pd.DataFrame({"interconnect": pd.Categorical(["nvlink4", "ib-ndr", "8x ib-ndr"])})
what_if = requests.merge(interconnects, how="cross").set_index(["request_id", "interconnect"], drop=False)
summary = (
    what_if.perfmodel.assign_handoff_delay(
        num_input_tokens="prompt_tokens",
        kv_bytes_per_token="model",
        kv_transfer_bandwidth="interconnect",
        worker_type="worker",
    )
    .dropna(subset=["handoff_delay_ms"])
    .reset_index(drop=True)
    .groupby(["model", "interconnect"], observed=True)["handoff_delay_ms"]
    .describe(percentiles=[0.5, 0.9, 0.99])[["count", "mean", "50%", "90%", "99%", "max"]]
)
summary.round(2).to_csv(out / "handoff_summary.csv")
print(summary.round(2).to_string())

fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
p99 = summary["99%"].unstack("interconnect")[["ib-ndr", "8x ib-ndr", "nvlink4"]]  # slowest to fastest link
for (link, column), (marker, color) in zip(p99.items(), [("o", "0.1"), ("s", "0.45"), ("^", "0.7")]):
    ax.plot(
        range(len(p99)),
        column.to_numpy(),
        linestyle="none",
        marker=marker,
        markersize=9,
        color=color,
        markeredgecolor="black",
        label=link,
    )  # points, not bars: a bar's length means nothing on a log axis
ax.set_xticks(range(len(p99)), p99.index)
ax.set_xlim(-0.5, len(p99) - 0.5)
ax.set_yscale("log")
ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / 1000:g}k" if value >= 1000 else f"{value:g}"))
ax.set_ylabel("p99 handoff delay (ms)")
ax.set_title(
    "p99 handoff delay by model and interconnect, the same prefill requests on each\n"
    "(KV in each model's dtype, one GPU's bytes: TP1)",
    fontsize="medium",
)
ax.legend(title="interconnect", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
ax.grid(True, axis="y", alpha=0.3)
fig.savefig(out / "pandas_pipeline.png", dpi=130)
