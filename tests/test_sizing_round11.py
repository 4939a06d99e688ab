"""Inverse questions, round 11: every answer agrees with the forward model where the delay is not monotone in the
prompt (layer-wise streaming: short prompts sent whole, compute that grows with the prompt, windows and chunks),
fractional prompts take an answer between those of their whole neighbours on a link and on a cluster alike, and
the heatmap's budget lines are such answers; errors offer only fixes the question takes; a sweep says what its
flows cross; a token count beyond 2**53 is refused by the sweep and its command."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.errors import InputError

#: Prompts the brute force looks at: every count from 0 to this.
SCANNED = 300_000


def first_miss(bandwidth, model, budget, scanned=SCANNED, **inputs):
    """The shortest prompt whose handoff misses the budget, every count from 0 to ``scanned`` priced by the forward
    model (None: none of them misses)."""
    delays = np.asarray(pm.handoff_delay_ms(np.arange(scanned + 1), bandwidth, model, **inputs), dtype=float)
    missed = np.flatnonzero(~(delays <= budget))
    return int(missed[0]) if missed.size else None


def check_longest(bandwidth, model, budget, scanned=SCANNED, **inputs):
    """max_tokens_within is the longest N with every prompt of up to N tokens within the budget: checked on every
    prompt up to ``scanned``, and beyond it at the answer and one token past it."""
    got = pm.max_tokens_within(bandwidth, model, budget_ms=budget, **inputs)
    miss = first_miss(bandwidth, model, budget, scanned, **inputs)
    if miss is not None:
        assert got == miss - 1, (got, miss - 1)
        return
    assert got >= scanned, (got, scanned)
    if math.isfinite(got) and got < 2**53:
        n = int(got)
        assert pm.handoff_delay_ms(n, bandwidth, model, **inputs) <= budget
        assert pm.handoff_delay_ms(n + 1, bandwidth, model, **inputs) > budget


# --- 1. max_tokens_within where the delay is not monotone ------------------------------------------------------


@pytest.mark.parametrize(
    ("streaming", "expected"),
    [
        (dict(prefill_ms=1000.0, layerwise_min_tokens=8192), 381),  # 382..8191 tokens are sent whole: they miss
        (dict(prefill_tokens_per_s=1e9), 381),  # the window's bytes stop growing, the compute does not
    ],
)
def test_a_window_model_streamed_is_not_said_to_fit_every_prompt(streaming, expected):
    kw = dict(overlap="layerwise", **streaming)
    assert pm.max_tokens_within(1.0, "mistral-7b-v0.1", budget_ms=50.0) == expected  # (without streaming, as is)
    got = pm.max_tokens_within(1.0, "mistral-7b-v0.1", budget_ms=50.0, **kw)
    assert got == expected
    assert pm.handoff_delay_ms(expected, 1.0, "mistral-7b-v0.1", **kw) <= 50.0
    assert pm.handoff_delay_ms(expected + 1, 1.0, "mistral-7b-v0.1", **kw) > 50.0


def test_a_short_prompt_sent_whole_is_the_first_to_miss():
    """Llama-3.1-70B streams from 4,096 tokens: the prompts just below it, sent whole, miss first."""
    check_longest("ib-ndr", "llama-3.1-70b", 50.0, overlap="layerwise", prefill_ms=200.0, layerwise_min_tokens=4096,
                  block_size=16, per_message_ms=0.00073)  # fmt: skip


def test_every_prompt_fits_only_where_every_prompt_fits():
    # state-only growth: the delay stops growing and its highest value fits
    assert pm.max_tokens_within(np.inf, "llama-3.1-70b", budget_ms=50.0, overlap="layerwise",
                                prefill_tokens_per_s=1e4) == np.inf  # fmt: skip
    # windows only, streamed: the delay falls past the window, but its highest value (at the window) misses
    got = pm.max_tokens_within(1.0, "mistral-7b-v0.1", budget_ms=300.0, overlap="layerwise", prefill_tokens_per_s=1e9)
    assert math.isfinite(got)
    check_longest(1.0, "mistral-7b-v0.1", 300.0, overlap="layerwise", prefill_tokens_per_s=1e9)
    # and where the highest fits, every prompt does
    assert pm.max_tokens_within(1.0, "mistral-7b-v0.1", budget_ms=600.0, overlap="layerwise",
                                prefill_tokens_per_s=1e9) == np.inf  # fmt: skip


MODELS = ["mistral-7b-v0.1", "gpt-oss-120b", "gemma-3-27b", "llama-4-scout", "llama-3.1-70b", "qwen3-next-80b-a3b"]
COSTS = st.one_of(
    st.just({}),
    st.builds(lambda b, c: dict(block_size=b, per_block_ms=c), st.sampled_from([16, 64, 256]), st.floats(1e-4, 0.05)),
    st.builds(
        lambda b, c, m, layout: dict(block_size=b, per_message_ms=c, blocks_per_message=m, kv_layout=layout),
        st.sampled_from([16, 64]),
        st.floats(1e-5, 0.01),
        st.sampled_from([1, 4, math.inf]),
        st.sampled_from(["layer_kv", "block"]),
    ),
)
COMPUTE = st.one_of(
    st.builds(lambda ms: dict(prefill_ms=ms), st.floats(0.0, 3000.0)),
    st.builds(lambda rate: dict(prefill_tokens_per_s=rate), st.floats(1e3, 1e9)),
)


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    bandwidth=st.sampled_from([0.5, 2.0, 10.0, 50.0]),
    budget=st.floats(1.0, 800.0),
    compute=COMPUTE,
    minimum=st.sampled_from([0, 1, 100, 2048, 8192, 50_000]),
    group=st.integers(1, 4),
    latency=st.sampled_from([0.0, 0.5]),
    costs=COSTS,
)
@example(model="gemma-3-27b", bandwidth=5.0, budget=50.0, compute=dict(prefill_tokens_per_s=20000.0), minimum=0,
         group=1, latency=0.0, costs={})  # fmt: skip
@example(model="llama-4-scout", bandwidth=50.0, budget=5.0, compute=dict(prefill_ms=200.0), minimum=4096, group=1,
         latency=0.0, costs=dict(block_size=16, per_block_ms=0.01))  # fmt: skip
def test_the_longest_prompt_is_the_longest_whose_every_shorter_prompt_fits(
    model, bandwidth, budget, compute, minimum, group, latency, costs
):
    check_longest(bandwidth, model, budget, overlap="layerwise", layerwise_min_tokens=minimum, layer_group=group,
                  latency_ms=latency, **compute, **costs)  # fmt: skip


@settings(max_examples=15, deadline=None)
@given(
    cluster=st.sampled_from(["hgx-h100-8x400g", "gb200-nvl72"]),
    budget=st.floats(1.0, 60.0),
    compute=COMPUTE,
    minimum=st.sampled_from([0, 2048, 8192]),
)
def test_on_a_cluster_too(cluster, budget, compute, minimum):
    check_longest(cluster, "mistral-7b-v0.1", budget, scanned=20_000, tp=8, overlap="layerwise",
                  layerwise_min_tokens=minimum, **compute)  # fmt: skip


def test_a_chunk_that_is_not_a_whole_number_of_messages_is_refused_with_streaming():
    """The search reads a chunked model's chunks as whole message regions when the delay is not monotone."""
    kw = dict(overlap="layerwise", prefill_tokens_per_s=2e4, block_size=48, per_message_ms=0.001)
    with pytest.raises(InputError, match=r"block_size") as error:
        pm.max_tokens_within("ib-ndr", "llama-4-scout", budget_ms=5.0, **kw)
    assert "\n" not in str(error.value)
    check_longest("ib-ndr", "llama-4-scout", 5.0, **{**kw, "block_size": 64})  # (the fix offered is taken)
    check_longest("ib-ndr", "llama-4-scout", 5.0, block_size=48, per_message_ms=0.001)  # (no streaming: monotone)


# --- 2. and 3. fractional prompts: between the answers of their whole neighbours, on a link and on a cluster -----


def between_neighbours(tokens, model, budget, **inputs):
    got = np.asarray(pm.required_bandwidth(tokens, model, budget_ms=budget, **inputs), dtype=float)
    below = np.asarray(pm.required_bandwidth(np.floor(tokens), model, budget_ms=budget, **inputs), dtype=float)
    above = np.asarray(pm.required_bandwidth(np.ceil(tokens), model, budget_ms=budget, **inputs), dtype=float)
    low, high = np.minimum(below, above), np.maximum(below, above)
    assert ((low <= got) & (got <= high)).all(), (tokens[~((low <= got) & (got <= high))], got, below, above)
    return got, below, above


def test_a_fractional_prompt_streamed_needs_what_its_whole_neighbours_need():
    kw = dict(overlap="layerwise", prefill_tokens_per_s=20000)
    got = pm.required_bandwidth([32768, 32768.5, 32769], "llama-3.1-70b", budget_ms=50, **kw)
    assert got[0] <= got[1] <= got[2] and got[1] == pytest.approx((got[0] + got[2]) / 2, rel=1e-12)
    between_neighbours(np.array([1000.5, 1000.25]), "mistral-7b-v0.1", 5.0, **kw)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.floats(0.0, 300_000.0), min_size=1, max_size=6),
    model=st.sampled_from(MODELS),
    budget=st.floats(0.5, 500.0),
    compute=COMPUTE,
    minimum=st.sampled_from([0, 2048]),
    costs=COSTS,
)
def test_fractional_prompts_need_between_what_their_whole_neighbours_need(tokens, model, budget, compute, minimum,
                                                                         costs):  # fmt: skip
    between_neighbours(np.array(tokens), model, budget, overlap="layerwise", layerwise_min_tokens=minimum, **compute,
                       **costs)  # fmt: skip


def test_whole_counts_still_meet_the_budget_exactly_with_streaming():
    kw = dict(overlap="layerwise", prefill_tokens_per_s=20000)
    tokens = np.array([1, 1000, 4096, 32768, 131072])
    needed = pm.required_bandwidth(tokens, "llama-3.1-70b", budget_ms=10.0, **kw)
    for n, bw in zip(tokens, needed):
        assert pm.handoff_delay_ms(n, bw, "llama-3.1-70b", **kw) <= 10.0
        assert pm.handoff_delay_ms(n, np.nextafter(bw, 0.0), "llama-3.1-70b", **kw) > 10.0


@pytest.mark.parametrize("tokens", [[0.5, 0.999, 1.0], [7436.0, 7436.5, 7436.999, 7437.0]])
def test_a_cluster_takes_a_fractional_prompt_as_a_link_does(tokens):
    """One ideal NIC per rank, no latency: the cluster's line rate is the link's bandwidth for one rank's bytes."""
    on_cluster = pm.required_bandwidth(tokens, "llama-3.1-70b", budget_ms=50, cluster="hgx-h100-8x400g", tp=8)
    on_link = pm.required_bandwidth(tokens, 40960, budget_ms=50)
    np.testing.assert_allclose(on_cluster, on_link, rtol=1e-12, atol=0)
    assert (on_cluster > 0).all()
    between_neighbours(np.array(tokens), "llama-3.1-70b", 50.0, cluster="aws-p5", tp=8)


# --- the heatmap's budget lines ---------------------------------------------------------------------------------


def test_the_heatmaps_budget_lines_are_answers_of_the_forward_model():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import perfmodel.plotting as pp

    kw = dict(overlap="layerwise", prefill_tokens_per_s=20000.0)
    df = pm.sweep(model="llama-3.1-70b", kv_transfer_bandwidth=np.geomspace(1, 1000, 61),
                  num_input_tokens=[2**k for k in range(10, 18)], progress=False, **kw)  # fmt: skip
    fig, ax = plt.subplots()
    try:
        pp.heatmap(df, budgets_ms=(10, 50, 100), ax=ax)
        lines = [line for line in ax.get_lines() if str(line.get_label()).endswith("ms budget")]
        assert len(lines) == 3
        for line in lines:
            budget = float(str(line.get_label()).split()[0])
            xs, ys = (np.asarray(v, dtype=float) for v in line.get_data())
            assert (xs == np.round(xs)).all()  # each point a whole prompt, its answer the forward model's
            assert {2**k for k in range(10, 18)} <= set(xs.tolist())
            delays = pm.handoff_delay_ms(xs.astype(np.int64), ys, "llama-3.1-70b", **kw)
            assert (delays <= budget).all()
            assert (pm.handoff_delay_ms(xs.astype(np.int64), np.nextafter(ys, 0), "llama-3.1-70b", **kw) > budget).all()
            assert (np.abs(np.diff(np.log(ys))) < np.log(1.5)).all()  # (no spike between swept prompts)
    finally:
        plt.close(fig)


# --- 4. errors offer only fixes the question takes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda: pm.max_tokens_within(["ib-ndr", -5.0], "llama-3.1-70b", budget_ms=50.0), "kv_transfer_bandwidth"),
        (lambda: pm.max_tokens_within(["ib-ndr", "hgx-h100-8x400g"], "llama-3.1-70b", budget_ms=50.0),
         "kv_transfer_bandwidth"),
        (lambda: pm.max_tokens_within(["ib-ndr", "nope"], "llama-3.1-70b", budget_ms=50.0), "kv_transfer_bandwidth"),
        (lambda: pm.max_tokens_within("ib-ndr", ["llama-3.1-70b", "nope"], budget_ms=50.0), "kv_bytes_per_token"),
        (lambda: pm.max_tokens_within("ib-ndr", 1000.0, budget_ms=50.0, overlap="layerwise", prefill_ms=[1.0, -1.0],
                                      num_layers=8), "prefill_ms"),
        (lambda: pm.required_bandwidth(1000, "llama-3.1-70b", budget_ms=50, latency_ms=[-1.0, 0.0]), "latency_ms"),
        (lambda: pm.required_bandwidth(1000, "llama-3.1-70b", budget_ms=50, per_block_ms=[-1.0, 0.0], block_size=16),
         "per_block_ms"),
        (lambda: pm.required_bandwidth([1, 1], ["llama-3.1-70b", "nope"], budget_ms=50), "kv_bytes_per_token"),
        (lambda: pm.required_bandwidth(1000, [1000.0, -5.0], budget_ms=50), "kv_bytes_per_token"),
        (lambda: pm.required_bandwidth(1000, "llama-3.1-70b", budget_ms=50, cluster="hgx-h100-8x400g", tp=8,
                                       latency_ms=[-1.0, 0.0]), "latency_ms"),
    ],
)  # fmt: skip
def test_an_error_offers_only_fixes_the_question_takes(call, where):
    with pytest.raises(InputError) as error:
        call()
    message = str(error.value)
    assert message.startswith(where + ":") and "\n" not in message, message
    assert "errors=" not in message and "coerce" not in message, message


# --- 5. what a sweep's flows cross ---------------------------------------------------------------------------


def test_a_sweep_says_what_its_flows_cross():
    asked = dict(model="llama-3.1-70b", num_input_tokens=[1024, 32768], progress=False)
    nvlink = pm.sweep(cluster="gb200-nvl72", tp=8, **asked).attrs["question"]
    assert "NVLink only" in nvlink and "cluster's NICs" not in nvlink, nvlink
    nics = pm.sweep(cluster="hgx-h100-8x400g", tp=8, **asked).attrs["question"]
    assert nics.endswith("its flows on the cluster's NICs"), nics
    both = pm.sweep(cluster=["hgx-h100-8x400g", "gb200-nvl72"], tp=8, **asked).attrs["question"]
    assert "NICs" in both and "NVLink" in both and "only" not in both, both
    mixed = pm.Cluster(nic="ib-ndr", gpus_per_node=8, nics_per_node=8, nvlink_domain=24, nodes=4,
                       nvlink="nvlink4")  # fmt: skip
    split = pm.sweep(cluster=mixed, tp=16, **asked).attrs["question"]  # decode ranks 0-7 in prefill's domain
    assert "NICs" in split and "NVLink" in split and "only" not in split, split


def test_the_sweep_command_says_what_its_flows_cross(tmp_path, capsys):
    code = main(["sweep", "--cluster", "gb200-nvl72", "--model", "llama-3.1-70b", "--tp", "8", "--tokens", "1k,32k",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "NVLink only" in out and "cluster's NICs" not in out, out


# --- minor: a count beyond 2**53 --------------------------------------------------------------------------------


def test_a_sweep_refuses_a_count_beyond_two_to_the_53():
    with pytest.raises(InputError, match="9007199254740993"):
        pm.sweep(num_input_tokens=[2**53 + 1], kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, progress=False)
    assert pm.sweep(num_input_tokens=[2**53], kv_bytes_per_token=1, kv_transfer_bandwidth=1.0,
                    progress=False)["num_input_tokens"].tolist() == [2**53]  # fmt: skip


def test_required_bandwidth_refuses_a_count_beyond_two_to_the_53():
    with pytest.raises(InputError, match="9007199254740993") as error:
        pm.required_bandwidth([1, 2**53 + 1], 1, budget_ms=1.0)
    assert "coerce" not in str(error.value)
    assert pm.required_bandwidth(2**53, 1, budget_ms=1e4) == pytest.approx(2**53 / 1e10)


def test_the_sweep_command_refuses_a_count_beyond_two_to_the_53(tmp_path, capsys):
    code = main(["sweep", "--tokens", "9007199254740993", "--kv-bytes-per-token", "1", "--bandwidth", "1",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    captured = capsys.readouterr()
    assert code != 0 and "9007199254740993" in captured.err, captured
    assert not (tmp_path / "out").exists()
