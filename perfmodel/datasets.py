"""Sample data shipped with perfmodel: two real request traces, three published KV-transfer
microbenchmark tables and a perftest run, so that every example runs from an empty folder.

=============================  ===============================================================
name                           what
=============================  ===============================================================
``mooncake-synthetic``         3,993 requests, Mooncake FAST'25 synthetic trace (JSON lines: ms
                               timestamps, prompt and output lengths, ``hash_ids`` of 512-token
                               blocks). kvcache-ai/Mooncake, ``FAST25-release/traces/``, Apache-2.0.
``azure-code-2023``            8,819 requests, Azure LLM inference trace 2023, code (CSV:
                               datetimes, context and generated tokens). Azure/AzurePublicDataset,
                               CC-BY 4.0: cite Patel et al., "Splitwise: Efficient Generative LLM
                               Inference Using Phase Splitting", ISCA 2024.
``fastdeploy-rdma-blocksize``  Single-thread RDMA throughput against block size (1 KB-256 KB,
                               batches of 1,538 blocks, one ConnectX-7 400G port), FastDeploy's
                               KVTransferManager and Mooncake's transfer engine side by side.
                               PaddlePaddle/FastDeploy, KVTransferManager README (Apache-2.0).
``mooncake-te-efa``            Mooncake transfer engine GPU-to-GPU over AWS EFA: throughput
                               against block size (64 KB-2 MB). kvcache-ai/Mooncake docs,
                               "EFA transport" (Apache-2.0).
``lmcache-nixl-iov``           NIXL/UCX, NIXL/UCCL and UCCL read bandwidth, 256 KiB-64 MiB in 256
                               descriptors, one and two rails. LMCache pull request 4161
                               (Apache-2.0).
``perftest-ib-hdr``            perftest ``ib_write_bw -a`` on one HDR InfiniBand port (2 B-8 MiB),
                               its text output as printed. microsoft/superbenchmark, its
                               InfiniBand loopback test (MIT).
=============================  ===============================================================

The tables' rows cite their source URL and table; block sizes there are binary (KB = 1024 B),
bandwidths as each source states them (see their ``notes`` column).
"""

from __future__ import annotations

import pandas as pd

from .ground.data import FILES, PREFIX, names, path
from .replay.traces import read_trace

__all__ = ["load", "names", "path"]


def load(name: str) -> pd.DataFrame:
    """A shipped dataset: a trace exactly as :func:`perfmodel.read_trace` reads the original file, a
    microbenchmark table as a DataFrame, or perftest's output as :func:`perfmodel.calibration.read_measurements`
    reads it (its table's columns, ``#bytes`` first, as numbers).

    Parameters
    ----------
    name : str
        A name of :func:`perfmodel.datasets.names` (``dataset:`` in front is allowed).

    Returns
    -------
    pandas.DataFrame
        A fresh copy: changing it changes nothing shipped; ``attrs["source"]`` is ``"dataset:NAME"``.

    Examples
    --------
    >>> from perfmodel import datasets
    >>> trace = datasets.load("mooncake-synthetic")
    >>> len(trace), list(trace.columns)
    (3993, ['arrival_ms', 'num_input_tokens', 'num_output_tokens', 'hash_ids'])
    >>> len(datasets.load("azure-code-2023"))
    8819
    >>> int(datasets.load("perftest-ib-hdr")["#bytes"].iloc[-1])   # perftest ib_write_bw -a: 2 bytes to 8 MiB
    8388608
    >>> datasets.load("perftest-ib-hdr").attrs["source"]
    'dataset:perftest-ib-hdr'
    """
    file = path(name)
    key = name.removeprefix(PREFIX).strip().lower()
    kind = FILES[key][1]
    if kind == "trace":
        frame = read_trace(file)
    elif kind == "perftest":
        from .calibration import read_measurements

        frame = read_measurements(file)[0].apply(pd.to_numeric)  # (every cell of the shipped run is a number)
    else:
        frame = pd.read_csv(file)
    frame.attrs["source"] = f"{PREFIX}{key}"
    return frame
