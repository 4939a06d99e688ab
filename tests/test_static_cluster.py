"""The static path's one engine (perfmodel.kernels.sharing.simulate_keys, and simulate_flows, one key of it) against
the plain-Python reference (tests/reference_maxmin.py), flow by flow, over hostile small clusters and keys: ties
of capacities, starts and bytes, flows of 0 bytes, flows that cross nothing, shared and disjoint paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import Cluster, Link, Transport
from perfmodel.kernels.sharing import FlowTerms, Keys, simulate_flows, simulate_keys
from perfmodel.network.clusters import alone, alone_ms, flow_bytes, flow_terms, head_terms

from .reference_maxmin import saturated, simulate


def reference_bottleneck(paths, capacities, outcome, f):
    """Precise rule 9 for flow ``f`` of the reference's outcome (what clusters.bottleneck_of computed from it)."""
    interval = outcome.final_interval[f]
    moving = list(interval)
    full = saturated([paths[g] for g in moving], capacities, [interval[g] for g in moving])
    mine = interval.get(f, math.inf)
    for r in paths[f]:
        if r in full and all(interval[g] <= mine * (1 + 1e-12) for g in moving if r in paths[g]):
            return r
    return None


@st.composite
def hostile(draw):
    """A small cluster (resources of tied and far-apart capacities; paths shared, disjoint, duplicated or
    empty) and a few keys of each flow's start and bytes (tied, 0, tiny, huge)."""
    resources = draw(st.integers(1, 6))
    capacities = draw(
        st.lists(
            st.one_of(st.sampled_from([1.0, 2.0, 12.5, 50.0, 1e-3, 1e4]), st.floats(1e-3, 1e4)),
            min_size=resources,
            max_size=resources,
        )
    )
    flows = draw(st.integers(1, 8))
    resource = st.integers(0, resources - 1)
    paths = draw(
        st.lists(
            st.one_of(st.lists(resource, min_size=1, max_size=4, unique=True), st.lists(resource, max_size=3)),
            min_size=flows,
            max_size=flows,
        )
    )
    keys = draw(st.integers(1, 4))
    start = st.one_of(st.sampled_from([0.0, 0.003, 0.009, 1.0]), st.floats(0.0, 10.0))
    size = st.one_of(st.sampled_from([0.0, 1.0, 4096.0, 1e9, 3e9]), st.floats(0.0, 1e10), st.integers(0, 10**7))
    starts = draw(st.lists(st.lists(start, min_size=flows, max_size=flows), min_size=keys, max_size=keys))
    nbytes = draw(st.lists(st.lists(size, min_size=flows, max_size=flows), min_size=keys, max_size=keys))
    return capacities, paths, np.array(starts), np.array(nbytes, dtype=np.float64)


def assert_key_equals_the_reference(got, k, starts, nbytes, paths, capacities):
    """Row ``k`` of a :class:`perfmodel.kernels.sharing.Batch` against the reference's simulation of its flows."""
    want = simulate(starts, nbytes, paths, capacities)
    assert got.ends[k].tolist() == pytest.approx(want.ends_ms, rel=1e-12, abs=0)
    moving = [f for f in range(len(paths)) if nbytes[f] > 0]
    last = max(moving, key=lambda f: (want.ends_ms[f], -f)) if moving else -1
    assert got.last[k] == last
    assert got.end[k] == (want.ends_ms[last] if moving else -math.inf)
    necks = [reference_bottleneck(paths, capacities, want, f) for f in range(len(paths))]
    assert [None if n < 0 else n for n in got.necks[k].tolist()] == necks
    assert got.neck[k] == (-1 if last < 0 or necks[last] is None else necks[last])
    for f in moving:
        assert got.rates[k, f] == want.final_rates[f]


@settings(max_examples=300, deadline=None)
@given(hostile())
def test_explicit_flows_equal_the_reference_flow_by_flow(case):
    capacities, paths, starts, nbytes = case
    for k in range(len(nbytes)):
        got = simulate_flows(starts[k], nbytes[k], paths, capacities)
        assert_key_equals_the_reference(got, 0, starts[k].tolist(), nbytes[k].tolist(), paths, capacities)


@settings(max_examples=300, deadline=None)
@given(hostile(), st.data())
def test_keys_sharing_their_fillings_equal_the_reference_flow_by_flow(case, data):
    """Keys as the static path gives them (tokens, messages and blocks per key; bytes per token and costs per
    flow), their fillings shared between keys through the memo: each key's flows as the reference has them."""
    capacities, paths, starts, nbytes = case
    n = len(nbytes)
    tokens = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 7.0, 1e3]), min_size=n, max_size=n)))
    counts = st.lists(st.sampled_from([0.0, 1.0, 3.0, 64.0]), min_size=n, max_size=n)
    messages, blocks = np.array(data.draw(counts)), np.array(data.draw(counts))
    costs = np.stack([starts[0], starts[-1] / 7, np.full(len(paths), 0.001)], axis=1)
    flows = FlowTerms(np.pad(nbytes[:1].T, ((0, 0), (0, 3))), costs, 0.0, 0.0)
    got = simulate_keys(Keys(tokens, tokens, messages, blocks), flows, paths, capacities, per_flow=True)
    for k in range(n):
        # (a flow's fixed costs in their one order: its latency, then its blocks', then its messages')
        begin = [costs[f, 0] + blocks[k] * costs[f, 2] + messages[k] * costs[f, 1] for f in range(len(paths))]
        size = [tokens[k] * nbytes[0, f] for f in range(len(paths))]
        assert_key_equals_the_reference(got, k, begin, size, paths, capacities)


def test_keys_shared_between_threads_give_what_one_thread_gives():
    rng = np.random.default_rng(7)
    paths, capacities = [[0, 1], [2, 1], [2, 3], [0]], [50.0, 25.0, 50.0, 12.5]
    tokens = rng.integers(0, 10**5, 5000).astype(np.float64)
    keys = Keys(tokens, tokens, rng.integers(0, 100, 5000).astype(np.float64), np.zeros(5000))
    flows = FlowTerms(np.array([[1e5, 0, 0, 0], [3e5, 0, 0, 0], [2e4, 0, 0, 0], [7e5, 0, 0, 0]]),
                      np.array([[0.003, 1e-4, 0], [0.009, 0, 0], [0.009, 2e-4, 0], [0.001, 0, 0]]), 0.0, 0.0)  # fmt: skip
    with perfmodel.set_options(parallel_min_rows=10**9):
        one = simulate_keys(keys, flows, paths, capacities, per_flow=True)
    with perfmodel.set_options(parallel_min_rows=0):
        many = simulate_keys(keys, flows, paths, capacities, per_flow=True)
    for a, b in zip(one, many):
        assert a.tobytes() == b.tobytes()


def rail(**extra):
    return Cluster(
        nic=Link("nic", 50.0, latency_ms=0.002, per_message_ms=0.0001),
        nics_per_node=extra.pop("nics_per_node", 8),
        gpus_per_node=8,
        fabric="rail",
        hop_latency_ms=0.003,
        **extra,
    )


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(0, 70_000), min_size=1, max_size=30),
    st.sampled_from([(8, 2), (8, 1), (4, 2), (8, 4)]),
    st.sampled_from([1.0, 2.0]),
    st.sampled_from([16, 64]),
    st.sampled_from([0.0, 1e6]),
)
def test_a_nonlinear_cluster_row_by_row_is_the_reference_simulation(tokens, degrees, oversubscription, block, state):
    """handoff_delay_ms on a rail cluster with hop latency and cross-rail flows (one kernel call for all
    distinct rows) against the reference simulation of each row's flows, by hand."""
    p, d = degrees
    c = rail(oversubscription=oversubscription, transport=Transport("t", setup_ms=0.01))
    got = perfmodel.handoff_delay_ms(tokens, c, "llama-3.1-70b", tp=p, decode_tp=d, block_size=block, state_bytes=state)
    resolved = alone(c, head_terms("llama-3.1-70b", decode_tp=d, state_bytes=state), p, d)
    assert not resolved.linear
    for n, ms in zip(tokens, got):
        blocks = float(-(-n // block))
        messages = float(perfmodel.kv_messages("llama-3.1-70b", n, block))  # (each rank posts its own)
        sizes = [flow_bytes(flow_terms(f, resolved.terms), resolved.terms, n, n) for f in resolved.flows]
        kept = [k for k, b in enumerate(sizes) if b > 0]
        starts = [
            0.0
            + c.transport.setup_ms
            + resolved.flows[k].own_latency_ms(c)
            + messages * resolved.flows[k].link.per_message_ms
            + blocks * resolved.flows[k].link.per_block_ms
            for k in kept
        ]
        want = simulate(
            starts, [sizes[k] for k in kept], [resolved.flows[k].path for k in kept], resolved.resources.capacities
        )
        simulated = max(want.ends_ms, default=0.0)  # (the transport costs nothing per message: no cost to add)
        assert ms == pytest.approx(simulated, rel=1e-12)
        assert alone_ms(resolved, c, n, n, messages=messages, blocks=blocks)[0] == pytest.approx(simulated, rel=1e-12)


def test_one_kernel_call_for_every_distinct_row(monkeypatch):
    """The distinct rows are simulated in one call (no call per row), and repeated rows are simulated once."""
    from perfmodel.kernels import sharing as _sharing

    calls = []
    original = _sharing.simulate_keys

    def counting(keys, *args, **kwargs):
        calls.append(len(keys.charged))
        return original(keys, *args, **kwargs)

    monkeypatch.setattr(_sharing, "simulate_keys", counting)
    tokens = np.arange(2000) % 700
    perfmodel.handoff_delay_ms(tokens, rail(), "llama-3.1-70b", tp=8, decode_tp=2, block_size=16)
    assert calls == [1, 700]  # (the handoff's flows resolved once, one key; then every distinct row in one call)
