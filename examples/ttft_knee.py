"""
TTFT under load: the knee
=========================

A handoff costs milliseconds; near saturation the queues in front of it cost seconds. This example
replays one synthetic trace at rising request rates on two links (a 400G NIC and a TCP-like 5 GB/s path)
with :func:`perfmodel.ttft_grid`, draws the TTFT percentiles against the rate, and then breaks down the
TTFT of one replay near the knee, with bounded prefill memory, into its parts.

Run ``python examples/ttft_knee.py --out results``.
"""

# %%
# The knee: TTFT percentiles against request rate
# -----------------------------------------------
# Four prefill workers at 40,000 tokens/s each (a mean prompt of about 4,400 tokens: 110 ms), so they
# saturate near 36 requests/s; four decode workers; Llama-3.1-8B's KV cache over four fifo links.
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows
import matplotlib.pyplot as plt

import perfmodel
import perfmodel.plotting as pp

parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n", 1)[0])
parser.add_argument("--out", type=Path, default=Path("perfmodel-examples"), help="folder for the PNGs")
out = parser.parse_args().out
out.mkdir(parents=True, exist_ok=True)

trace = perfmodel.synthetic_trace(4000, rate_per_s=20, seed=0)
trace["num_output_tokens"] = 250
serving = dict(
    model="llama-3.1-8b",
    prefill_workers=4,
    prefill_tokens_per_s=40_000,
    decode_workers=4,
    decode_step_ms=20.0,
    contention="fifo",
    links=4,
)
grid = perfmodel.ttft_grid(trace, link=["ib-ndr", 5.0], request_rate_per_s=[10, 20, 25, 30, 33, 36], **serving)
print(
    grid[["link", "request_rate_per_s", "p50_ms", "p99_ms", "handoff_delay_p99_ms", "dominant_p99_stage"]]
    .round(1)
    .to_string(index=False)
)

fig, ax = plt.subplots(figsize=(6.4, 4.2))
pp.ttft_vs_rate(grid, by="link", ax=ax)
ax.set_title("TTFT against request rate: the handoff's ms and the queue's seconds")
fig.savefig(out / "ttft_knee.png", dpi=130)
plt.close(fig)

# %%
# Where the p99's time goes, near the knee
# ----------------------------------------
# At 30 requests/s, each prefill worker holding at most 64,000 tokens until its handoffs end: on the slow
# link a request's memory stays held while it hands off, and the next prefill waits for it.
scaled = trace.assign(arrival_ms=trace["arrival_ms"] * 20 / 30)
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, link in zip(axes, ["ib-ndr", 5.0]):
    ttft = perfmodel.replay_ttft(scaled, link=link, prefill_kv_tokens=64_000, **serving)
    summary = perfmodel.summarize_ttft(ttft)
    print(
        f"{link}: p99 {summary['p99_ms']:,.0f} ms, dominated by {summary['dominant_p99_stage']}, "
        f"prefill memory peak {summary['prefill_memory_peak']:.0%}"
    )
    pp.ttft_breakdown(ttft, ax=ax)
    ax.set_title(f"link {link}: p50 and p99 requests")
fig.savefig(out / "ttft_breakdown.png", dpi=130)
plt.close(fig)

# %%
# KV memory held on the prefill side
# ----------------------------------
ttft = perfmodel.replay_ttft(scaled, link=5.0, prefill_kv_tokens=64_000, **serving)
fig, ax = plt.subplots(figsize=(6.4, 4.2))
pp.memory_held(ttft.head(400), side="prefill", ax=ax)
ax.set_title("prefill memory held while the handoffs run (5 GB/s, first 400 requests)")
fig.savefig(out / "ttft_memory_held.png", dpi=130)
plt.close(fig)
