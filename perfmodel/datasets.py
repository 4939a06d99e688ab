"""Sample data shipped with perfmodel: two real request traces and three published KV-transfer
microbenchmark tables, so that every example runs from an empty folder.

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
=============================  ===============================================================

The tables' rows cite their source URL and table; block sizes there are binary (KB = 1024 B),
bandwidths as each source states them (see their ``notes`` column).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import InputError
from .trace import read_trace

__all__ = ["load", "names", "path"]

_DATA = Path(__file__).resolve().parent / "data"

#: Each dataset's file in the package, and whether it is a request trace.
_FILES = {
    "mooncake-synthetic": ("mooncake_synthetic_trace.jsonl.gz", True),
    "azure-code-2023": ("azure_llm_2023_code.csv.gz", True),
    "fastdeploy-rdma-blocksize": ("fastdeploy_kvtransfer_vs_mooncake_blocksize.csv", False),
    "mooncake-te-efa": ("mooncake_te_efa_aws.csv", False),
    "lmcache-nixl-iov": ("lmcache_pr4161_nixl_ucx_uccl_iov.csv", False),
}

#: How the command line names a dataset where a file goes (``perfmodel trace dataset:mooncake-synthetic``).
PREFIX = "dataset:"


def names() -> list[str]:
    """The shipped datasets' names.

    >>> from perfmodel import datasets
    >>> datasets.names()[:2]
    ['mooncake-synthetic', 'azure-code-2023']
    """
    return list(_FILES)


def path(name: str) -> Path:
    """The file of a shipped dataset (read it with :func:`perfmodel.read_trace`, or pandas for a table).

    >>> from perfmodel import datasets
    >>> datasets.path("mooncake-synthetic").name
    'mooncake_synthetic_trace.jsonl.gz'
    """
    key = name.removeprefix(PREFIX).strip().lower() if isinstance(name, str) else name
    if key not in _FILES:
        raise InputError("dataset", f"{name!r} is not a shipped dataset", f"use one of {', '.join(_FILES)}")
    return _DATA / _FILES[key][0]


def load(name: str) -> pd.DataFrame:
    """A shipped dataset: a trace exactly as :func:`perfmodel.read_trace` reads the original file, or a
    microbenchmark table as a DataFrame.

    Examples
    --------
    >>> from perfmodel import datasets
    >>> trace = datasets.load("mooncake-synthetic")
    >>> len(trace), list(trace.columns)
    (3993, ['arrival_ms', 'num_input_tokens', 'num_output_tokens', 'hash_ids'])
    >>> len(datasets.load("azure-code-2023"))
    8819
    """
    file = path(name)
    if _FILES[name.removeprefix(PREFIX).strip().lower()][1]:
        trace = read_trace(file)
        trace.attrs["source"] = f"{PREFIX}{name.removeprefix(PREFIX).strip().lower()}"
        return trace
    return pd.read_csv(file)
