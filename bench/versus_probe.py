"""One side of ``bench/run.py --vs REV``: the measures users feel, taken in this process, printed as JSON.

Run with ``PYTHONPATH`` set to a checkout (this one, or another revision exported by ``run.py``), from a
folder outside both, so that ``import perfmodel`` finds that checkout's package. Only public names that
every revision compared has are used: :func:`perfmodel.handoff_delay_ms`, :func:`perfmodel.synthetic_trace`
and :func:`perfmodel.replay_handoffs`.

    PYTHONPATH=/path/to/checkout python bench/versus_probe.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import floor_parallel, floor_serial

import perfmodel


def median_seconds(call, repeats: int, warmups: int = 2) -> float:
    for _ in range(warmups):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def inputs(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """Token counts, bandwidths (GB/s), KV bytes per token, worker type codes and completion flags."""
    rng = np.random.default_rng(seed)
    return (
        rng.integers(1, 131_072, n),
        rng.uniform(1.0, 900.0, n),
        rng.choice(np.array([131_072.0, 327_680.0, 70_272.0]), n),
        rng.integers(0, 3, n).astype(np.int8),
        rng.random(n) < 0.05,
    )


def main() -> None:
    quick = "--quick" in sys.argv
    n = 1_000_000
    tokens, bandwidth, per_token, worker, completed = big = inputs(n, seed=1)
    out = np.empty(n)

    def kernel() -> object:
        return perfmodel.handoff_delay_ms(
            tokens, bandwidth, per_token, worker_type=worker, completed=completed, out=out
        )

    floor = min(
        median_seconds(lambda: floor_serial(*big, out), 5 if quick else 15),
        median_seconds(lambda: floor_parallel(*big, out), 5 if quick else 15),
    )
    small = inputs(10, seed=3)
    trace = perfmodel.synthetic_trace(200_000 if quick else 1_000_000, rate_per_s=100, seed=0)
    replay = dict(
        model="llama-3.1-8b",
        link="ib-ndr",
        decode_cache_blocks=50_000,
        links=4,
        decode_workers=4,
        mode="destination_missing",
        contention="fair",
    )
    perfmodel.replay_handoffs(trace.head(100), **replay)  # compile (or load) first
    print(
        json.dumps(
            {
                "perfmodel": str(Path(perfmodel.__file__).parent),
                "kernel_over_floor": median_seconds(kernel, 5 if quick else 15) / floor,
                "edge_us": median_seconds(
                    lambda: [
                        perfmodel.handoff_delay_ms(*small[:3], worker_type=small[3], completed=small[4])
                        for _ in range(100)
                    ],
                    5 if quick else 15,
                )
                / 100
                * 1e6,
                "replay_s": median_seconds(
                    lambda: perfmodel.replay_handoffs(trace, **replay), 1 if quick else 3, warmups=0
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
