"""The inverse questions with every cost and model kind: the answer, put back into handoff_delay_ms, meets
the budget, and the next token (max_tokens_within) or the next float below (required_bandwidth) does not;
``inf`` only where every prompt truly fits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import handoff_delay_ms, max_tokens_within, required_bandwidth

MODELS = [
    131_072,
    "llama-3.1-8b",
    "deepseek-v3",
    "mistral-7b-v0.1",
    "gemma-3-27b",
    "llama-4-scout",
    "qwen3-next-80b-a3b",
]


@st.composite
def costs(draw):
    kw = {}
    model = draw(st.sampled_from(MODELS))
    if draw(st.booleans()):
        kw["latency_ms"] = draw(st.sampled_from([0.05, 0.5, 3.0]))
    if draw(st.booleans()):
        kw["per_block_ms"] = draw(st.sampled_from([1e-5, 1e-3]))
    if draw(st.booleans()):
        kw["per_message_ms"] = draw(st.sampled_from([1e-6, 1e-4]))
        kw["kv_layout"] = draw(st.sampled_from(["layer_kv", "layer", "block"]))
    kw["block_size"] = draw(st.sampled_from([16, 64, 512]))  # (a transport's per-message cost needs one)
    if isinstance(model, int) and kw.get("kv_layout", "layer_kv") != "block":
        kw["num_layers"] = draw(st.sampled_from([1, 32]))  # (and, for bytes as numbers, layers when messages cost)
    if not isinstance(model, int) and draw(st.booleans()):
        kw["tp"], kw["decode_tp"] = draw(st.sampled_from([(8, 2), (4, 8), (2, 2)]))
    return model, kw


def _messages_cost(kw, bandwidth):
    """``kw`` without num_layers where nothing costs per message (num_layers is refused there)."""
    if "per_message_ms" not in kw and bandwidth != "nixl-ucx-rdma":
        kw = {k: v for k, v in kw.items() if k != "num_layers"}
    return kw


def _delay(tokens, bandwidth, model, kw):
    return handoff_delay_ms(np.asarray(tokens, dtype=np.int64), bandwidth, model, **kw)


@settings(max_examples=150, deadline=None)
@given(
    case=costs(),
    bandwidth=st.sampled_from([np.inf, 50.0, 400.0, "ib-ndr", "nixl-ucx-rdma"]),
    budget=st.sampled_from([0.001, 0.3, 5.0, 100.0]),
)
def test_max_tokens_within_meets_the_budget_and_one_more_token_does_not(case, bandwidth, budget):
    model, kw = case
    kw = _messages_cost(kw, bandwidth)
    n = max_tokens_within(bandwidth, model, budget_ms=budget, **kw)
    if n == np.inf:  # every prompt fits: the delay stops growing below the budget
        far = _delay([10**7, 10**9, 10**11, 2 * 10**11], bandwidth, model, kw)
        assert (far <= budget).all() and far[-1] == far[-2]
        return
    if n == -1:  # not even an empty prompt fits (a state and its latency alone exceed the budget)
        assert _delay(0, bandwidth, model, kw) > budget
        return
    assert n >= 0 and n == np.floor(n)
    n = int(n)
    sample = np.unique(np.concatenate([np.linspace(0, n, 200).astype(np.int64), [n]]))
    assert (_delay(sample, bandwidth, model, kw) <= budget).all()
    chunk = 8192 if model == "llama-4-scout" else 0  # a chunked model's bytes drop after each chunk's end
    beyond = [n + 1] + ([(n // chunk) * chunk] if chunk else [])
    assert _delay(beyond, bandwidth, model, kw).max() > budget


@settings(max_examples=150, deadline=None)
@given(
    case=costs(),
    tokens=st.sampled_from([0, 1, 100, 4096, 32_768, 1_000_000]),
    budget=st.sampled_from([0.001, 0.3, 5.0, 100.0]),
)
def test_required_bandwidth_meets_the_budget_and_the_next_float_below_does_not(case, tokens, budget):
    model, kw = case
    kw = _messages_cost(kw, np.inf)
    needed = required_bandwidth(tokens, model, budget_ms=budget, **kw)
    fixed = _delay(tokens, np.inf, model, kw)
    if needed == np.inf:  # no bandwidth meets it: the fixed costs alone reach the budget
        assert fixed >= budget
        return
    if needed > 0:
        assert _delay(tokens, needed, model, kw) <= budget
        assert _delay(tokens, np.nextafter(needed, 0), model, kw) > budget
    else:  # nothing moves (a bandwidth of 0 itself means "unknown")
        assert _delay(tokens, 5e-324, model, kw) == 0.0


@pytest.mark.parametrize(
    "kw, budget",
    [
        (dict(latency_ms=200.0), 100.0),  # the latency alone exceeds the budget at an infinite bandwidth
        (dict(per_block_ms=0.001, block_size=16), 100.0),  # blocks grow with the prompt
        (dict(per_message_ms=0.0001, block_size=16), 100.0),
    ],
)
def test_the_issue_s_cases_are_not_every_prompt(kw, budget):
    assert max_tokens_within(np.inf, "llama-3.1-8b", budget_ms=budget, **kw) < np.inf
    # a model whose layers all keep a window, with per-block costs that grow with the prompt
    assert max_tokens_within(50.0, "mistral-7b-v0.1", budget_ms=budget, per_block_ms=0.01, block_size=16) < np.inf
    assert max_tokens_within(50.0, "mistral-7b-v0.1", budget_ms=budget) == np.inf
