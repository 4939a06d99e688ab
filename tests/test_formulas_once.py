"""Each formula once (issue #41): the bytes a handoff moves, the tokens of a prompt's current chunk, the
messages a handoff posts and a transfer's fixed costs are computed by :mod:`perfmodel.kernels.handoff` only
(``kv_bytes``/``capped_bytes``, ``current_chunk``, ``messages_of``, ``fixed_ms``/``transfer_ms``); every other
module calls them. A source scan catches the arithmetic coming back elsewhere; the paths that price one
handoff give the same number to the last bit."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parent.parent / "perfmodel"

#: The arithmetic of the formulas, as written out by hand (the code and the docs' formulas differ: ``mod``).
PATTERNS = {
    "the current chunk": re.compile(
        r"%\s*\(?\s*(np\.)?[\w.]*(max\w*\()?[\w.]*chunk|floor\(\s*\(\s*\w+\s*-\s*1(\.0)?\s*\)\s*/"
    ),
    "the capped bytes": re.compile(r"\*\s*(np\.)?min(imum)?\(\s*[\w.\[\]]+\s*,\s*[\w.\[\]]*(window_tokens|current)\b"),
    "the full-attention bytes": re.compile(r"\bcharged\s*\*\s*[\w.]*full\b|\bfull\w*\s*\*\s*charged\b"),
    "the messages": re.compile(r"\bregions\(|//\s*int\(\s*blocks_per_message|/\s*blocks_per_message\b"),
    "the fixed costs": re.compile(r"\+\s*[\w.\[\], ]+\*\s*[\w.\[\], ]*per_(block|message)\w*"),
}

#: Known sites left, each with why (file: count of lines).
LEFT = {
    # the end of the chunk before a prompt's current one, floor((n - 1) / C) * C (= n - current_chunk), for the
    # inverse search's bracket on arrays: numpy, not yet a jitted vectorised loop
    "sweeps.py": 1,
    # a fitted profile's residuals over its measurements (arrays of sizes, no latency or blocks): the model the
    # fit solves for, written as its normal equations read it
    "network/links.py": 1,
}


def _code_lines(source: str) -> dict[int, str]:
    """Each line's code without its strings (docstrings, messages) and comments: what the scan reads."""
    lines: dict[int, list[str]] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.STRING, tokenize.COMMENT) and token.string.strip():
            lines.setdefault(token.start[0], []).append(token.string)
    return {number: re.sub(r"\s*([^\w\s])\s*", r"\1", " ".join(parts)) for number, parts in lines.items()}


def _sites(source: str) -> list[tuple[int, str]]:
    return [
        (number, what)
        for number, code in _code_lines(source).items()
        for what, pattern in PATTERNS.items()
        if pattern.search(code)
    ]


def test_the_formulas_are_written_once_in_the_kernels():
    sites = {
        f"{path.relative_to(PACKAGE).as_posix()}:{number} ({what})"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() != "kernels/handoff.py"
        and len(found := _sites(path.read_text(encoding="utf-8"))) > LEFT.get(path.relative_to(PACKAGE).as_posix(), 0)
        for number, what in found
    }
    assert not sites, (
        f"write these with perfmodel.kernels.handoff' formulas (kv_bytes, current_chunk, messages_of): {sites}"
    )


def test_the_scan_sees_the_formulas_written_out():
    """The patterns catch each formula as the code wrote it before (so the scan above means something)."""
    written = [
        "current = ((tokens - 1) % terms.chunk_tokens) + 1 if terms.chunk_tokens > 0 and tokens > 0 else 0.0",
        "current = np.where(n > 0, (n - 1) % np.maximum(chunk_tokens, 1) + 1, 0)",
        "return (tokens - 1.0) - np.floor((tokens - 1.0) / c) * c + 1.0",
        "return charged * full + (window * min(charged, terms.window_tokens) if window else 0.0)",
        "x = chunk_bytes_per_token * np.minimum(m, current) + state_bytes",
        "return -(-whole // int(blocks_per_message))",
        "regions(np.ceil(charged / block_size), bpm) * full",
        "fixed = self.latency_ms + counts * self.per_block_ms + posted * self.per_message_ms",
        "common = cfg.latency_ms + messages * cfg.per_message_ms + moved * cfg.per_block_ms",
        "begin[f] = flows.costs[f, 0] + messages * flows.costs[f, 1] + blocks * per_block[f]",
    ]
    assert [bool(_sites(line)) for line in written] == [True] * len(written)
    assert _kernels_source_has_each()


def _kernels_source_has_each() -> bool:
    source = (PACKAGE / "kernels/handoff.py").read_text(encoding="utf-8")
    names = ("kv_bytes", "capped_bytes", "current_chunk", "messages_of", "fixed_ms", "transfer_ms")
    return all(f"def {name}(" in source for name in names)


def test_the_one_formulas_give_the_byte_and_message_counts():
    """The formulas themselves: integers stay exact integers (numpy's int64 formula, beyond 2**53 too)."""
    from perfmodel.kernels import handoff as _kernels

    assert _kernels.current_chunk(8193, 8192) == 1 and _kernels.current_chunk(8192.0, 8192.0) == 8192.0
    assert _kernels.current_chunk(0, 8192) == 0 and _kernels.current_chunk(5.0, 0.0) == 0.0
    big = 2**40 + 5
    assert _kernels.kv_bytes(147456, 0, 147456, 0, 0, 8192, big, big) == 147456 * big + 147456 * 5
    assert _kernels.ByteTerms(40960.0, state=7.0).bytes(1024, 1024) == 40960.0 * 1024 + 7.0
    assert _kernels.messages_of(33.0, 33.0, 16.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0) == 3 * 2 + 1
    assert np.isnan(_kernels.kv_bytes(1.0, None, None, 0.0, None, None, np.nan, 1.0))


# --- a transfer's fixed costs: one sum, in one order ------------------------------------------------------------
# A replay's time alone and the numpy API's delay of the same request differed in the last bit on a quarter of
# the rows when latency, per-block and per-message costs were all on: one path added (latency + blocks) +
# messages, the other latency + (blocks + messages).

COSTS = st.floats(0.0, 2.0, allow_subnormal=False)
#: A handoff's fixed costs as a call gives them: latency, per block and per message, with blocks to count.
CALL_COSTS = st.fixed_dictionaries(
    dict(
        latency_ms=COSTS,
        per_block_ms=COSTS,
        per_message_ms=COSTS,
        block_size=st.sampled_from([16, 64]),
        blocks_per_message=st.sampled_from([1.0, 4.0, np.inf]),
    )
)
# On a cluster the caller's costs, the transport's and each flow's own were added in three orders (the numpy
# API, the cluster replay, handoff_flows): a quarter of the rows differed in the last bit. Each flow's terms
# now come from Flow.fixed_terms, summed by fixed_ms.
NETWORKS = {
    "a link": ("ib-ndr", 1),
    "one NIC each side": (dict(nic="ib-ndr", nics_per_node=1, gpus_per_node=1), 1),
    "a NIC per GPU": (dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8), 8),
    "a NIC per GPU, a costly transport": (
        dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, transport="nixl-ucx-rdma"),
        8,
    ),
}


@settings(max_examples=30, deadline=None)
@given(costs=CALL_COSTS, name=st.sampled_from(sorted(NETWORKS)), seed=st.integers(0, 2**16))
def test_a_replay_alone_is_the_numpy_delay_bit_for_bit(costs, name, seed):
    import perfmodel

    spec, tp = NETWORKS[name]
    network = perfmodel.Cluster(**spec) if isinstance(spec, dict) else spec
    trace = perfmodel.synthetic_trace(200, rate_per_s=50, seed=seed)
    replay = perfmodel.replay_handoffs(trace, network, "llama-3.1-8b", contention="none", tp=tp, **costs)
    delays = perfmodel.handoff_delay_ms(trace["num_input_tokens"].to_numpy(), network, "llama-3.1-8b", tp=tp, **costs)
    np.testing.assert_array_equal(replay["transfer_ms"].to_numpy(float), delays)
    np.testing.assert_array_equal(replay["handoff_delay_ms"].to_numpy(float), delays)


@settings(max_examples=25, deadline=None)
@given(latency_ms=COSTS, per_block_ms=COSTS, per_message_ms=COSTS, tokens=st.integers(1, 200_000))
def test_a_links_transfer_time_is_the_numpy_delay_bit_for_bit(latency_ms, per_block_ms, per_message_ms, tokens):
    import perfmodel

    link = perfmodel.Link("ours", 40.0, latency_ms=latency_ms, per_block_ms=per_block_ms, per_message_ms=per_message_ms)
    nbytes = perfmodel.kv_bytes("llama-3.1-8b", tokens)
    blocks, messages = -(-tokens // 16), perfmodel.kv_messages("llama-3.1-8b", tokens, 16)
    assert link.transfer_ms(nbytes, blocks, messages) == perfmodel.handoff_delay_ms(
        tokens, link, "llama-3.1-8b", block_size=16
    )


@settings(max_examples=40, deadline=None)
@given(
    costs=CALL_COSTS,
    tokens=st.integers(1, 200_000),
    cluster=st.sampled_from(["hgx-h100-8x400g", "aws-p5"]),
    decode_tp=st.sampled_from([8, 2]),
)
def test_the_flows_of_a_handoff_end_at_its_numpy_delay_bit_for_bit(costs, tokens, cluster, decode_tp):
    import perfmodel

    flows = perfmodel.handoff_flows(tokens, cluster, "llama-3.1-70b", tp=8, decode_tp=decode_tp, **costs)
    delay = perfmodel.handoff_delay_ms(tokens, cluster, "llama-3.1-70b", tp=8, decode_tp=decode_tp, **costs)
    assert flows.attrs["delay_ms"] == delay


@pytest.mark.parametrize("blocks_per_message", [1, 4, np.inf])
def test_the_flows_of_a_handoff_of_bytes_given_as_a_number_count_its_messages_as_the_numpy_api(blocks_per_message):
    """Found by a hostile pass: with bytes per token given as a number, handoff_flows counted a message per block
    whatever blocks_per_message said (34.1 ms against the numpy API's 10.6 for 1,000 tokens, 4 blocks a message)."""
    import perfmodel

    cluster = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    costs = dict(per_message_ms=0.5, block_size=16, blocks_per_message=blocks_per_message, kv_layout="block")
    flows = perfmodel.handoff_flows(1000, cluster, 131072.0, **costs)
    assert flows.attrs["delay_ms"] == perfmodel.handoff_delay_ms(1000, cluster, 131072.0, **costs)
    assert flows["messages"].tolist() == [{1: 63.0, 4: 16.0, np.inf: 1.0}[blocks_per_message]]


def test_the_flows_of_a_handoff_of_bytes_given_as_a_number_in_a_layer_layout_count_no_messages():
    """With no layers known (bytes as a number, a layer layout, no message cost), no message count is shown."""
    import perfmodel

    cluster = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    flows = perfmodel.handoff_flows(1000, cluster, 131072.0, block_size=16)
    assert np.isnan(flows["messages"]).all()
    assert flows.attrs["delay_ms"] == perfmodel.handoff_delay_ms(1000, cluster, 131072.0, block_size=16)
