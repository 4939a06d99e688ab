"""What perfmodel is measured against: the memory floor and the best plain-numpy version.

Kept apart from bench/run.py so the baselines are easy to read and to challenge.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def floor_serial(tokens, bandwidth, bytes_per_token, worker, completed, out):
    """Read every input once, write one float64 per row, no arithmetic worth the name."""
    for i in range(out.shape[0]):
        out[i] = tokens[i] + bandwidth[i] + bytes_per_token[i] + worker[i] + completed[i]


_THREADS = ThreadPoolExecutor(max_workers=max(numba.config.NUMBA_NUM_THREADS - 1, 1))


def floor_parallel(tokens, bandwidth, bytes_per_token, worker, completed, out):
    """:func:`floor_serial` on each thread's share of the rows (views), as perfmodel shares a large pass."""
    n, threads = out.shape[0], numba.config.NUMBA_NUM_THREADS

    def share(k):
        i, j = k * n // threads, (k + 1) * n // threads
        floor_serial(tokens[i:j], bandwidth[i:j], bytes_per_token[i:j], worker[i:j], completed[i:j], out[i:j])

    others = [_THREADS.submit(share, k) for k in range(1, threads)]
    share(0)
    for other in others:
        other.result()


def handoff_numpy(tokens, bandwidth, bytes_per_token, worker, completed, out):
    """The same semantics in plain numpy, as fast as we could make it.

    Exploits what the natural dtypes guarantee (int64 counts can be neither NaN, inf nor
    fractional), works in place to spare temporaries, and validates every row like the
    kernel (raising on invalid input).
    """
    invalid = bandwidth < 0
    invalid |= tokens < 0
    invalid |= bytes_per_token < 0
    invalid |= worker < 0
    invalid |= worker > 2
    if invalid.any():
        raise ValueError(f"{np.count_nonzero(invalid)} invalid rows")
    np.multiply(tokens, bytes_per_token, out=out, dtype=np.float64)
    scale = bandwidth * 1e9
    np.divide(out, scale, out=out)
    np.multiply(out, 1000.0, out=out)
    skip = np.isnan(bandwidth)
    skip |= bandwidth == 0
    skip |= worker != 1
    skip |= ~completed
    out[skip] = np.nan
    return out
