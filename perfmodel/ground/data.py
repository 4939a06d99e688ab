"""Where the shipped data lies (see :mod:`perfmodel.datasets`); a bottom module, imported by the
datasets and by the transport profiles of :mod:`perfmodel.network.links`."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError

_DATA = Path(__file__).resolve().parents[1] / "data"

#: Each dataset's file in the package, and what it is: a request trace, a table (CSV) or perftest's text output.
FILES = {
    "mooncake-synthetic": ("mooncake_synthetic_trace.jsonl.gz", "trace"),
    "azure-code-2023": ("azure_llm_2023_code.csv.gz", "trace"),
    "fastdeploy-rdma-blocksize": ("fastdeploy_kvtransfer_vs_mooncake_blocksize.csv", "table"),
    "mooncake-te-efa": ("mooncake_te_efa_aws.csv", "table"),
    "lmcache-nixl-iov": ("lmcache_pr4161_nixl_ucx_uccl_iov.csv", "table"),
    "perftest-ib-hdr": ("perftest_ib_write_bw_hdr.txt", "perftest"),
}

#: Prompt tokens per hash id in Mooncake's traces (kvcache-ai/Mooncake's trace format: one id per 512-token block),
#: the replays' default for a trace that does not say its own (``trace.attrs["hash_block_tokens"]``).
MOONCAKE_BLOCK_TOKENS = 512

#: How the command line names a dataset where a file goes (``perfmodel trace dataset:mooncake-synthetic``).
PREFIX = "dataset:"


def names() -> list[str]:
    """The shipped datasets' names.

    Returns
    -------
    list of str
        The names :func:`perfmodel.datasets.load` takes.

    Examples
    --------
    >>> from perfmodel import datasets
    >>> datasets.names()[:2]
    ['mooncake-synthetic', 'azure-code-2023']
    """
    return list(FILES)


def path(name: str) -> Path:
    """The file of a shipped dataset (read it with :func:`perfmodel.read_trace`, or pandas for a table).

    Parameters
    ----------
    name : str
        A name of :func:`perfmodel.datasets.names` (``dataset:`` in front is allowed).

    Returns
    -------
    pathlib.Path
        The installed file (read only: copy it to change it).

    Examples
    --------
    >>> from perfmodel import datasets
    >>> datasets.path("mooncake-synthetic").name
    'mooncake_synthetic_trace.jsonl.gz'
    """
    key = name.removeprefix(PREFIX).strip().lower() if isinstance(name, str) else name
    if key not in FILES:
        raise InputError("dataset", f"{name!r} is not a shipped dataset", f"use one of {', '.join(FILES)}")
    return _DATA / FILES[key][0]


def given_as(file: str | Path) -> str:
    """How to name ``file`` where a file goes: ``dataset:NAME`` for a shipped dataset's file, else the file.

    >>> from perfmodel.ground.data import given_as, path
    >>> given_as(path("perftest-ib-hdr")), given_as("runs/ours.csv")
    ('dataset:perftest-ib-hdr', 'runs/ours.csv')
    """
    resolved = Path(file).resolve()
    return next((PREFIX + name for name in FILES if resolved == path(name)), str(file))
