"""Sweeps against the core function, and the inverse questions against the forward model."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import perfmodel
from perfmodel import (
    InputError,
    destination_missing_tokens,
    handoff_delay_ms,
    kv_bytes_per_token,
    max_tokens_within,
    required_bandwidth,
    sweep,
)
from perfmodel.sweeps import AXES


def test_rows_order_and_values_match_the_core():
    models, links, tokens = ["llama-3.1-8b", "deepseek-v3"], ["nvlink4", "ib-ndr", "2x pcie5"], [1, 1000, 131072]
    df = sweep(num_input_tokens=tokens, link=links, model=models)  # keyword order does not matter
    assert list(df.columns) == [
        "model",
        "link",
        "num_input_tokens",
        "kv_transfer_bandwidth",
        "transfer_bytes",
        "handoff_delay_ms",
    ]
    expected = list(itertools.product(models, links, tokens))  # AXES order, last fastest
    assert list(zip(df["model"], df["link"], df["num_input_tokens"])) == expected
    for row in df.itertuples():
        link = perfmodel.get_link(row.link)
        core = handoff_delay_ms(row.num_input_tokens, link.bandwidth_gb_s, kv_bytes_per_token(row.model))
        assert row.handoff_delay_ms == core


def test_fractional_bytes_per_token_are_allowed():
    df = sweep(kv_bytes_per_token=[1000.5], kv_transfer_bandwidth=1.0, num_input_tokens=[2])
    assert df["handoff_delay_ms"].tolist() == [2 * 1000.5 / 1e9 * 1000]


def test_row_count_is_the_product():
    df = sweep(
        kv_bytes_per_token=[1, 2],
        kv_transfer_bandwidth=[1.0, 2.0, 3.0],
        latency_ms=[0, 1],
        num_input_tokens=np.arange(5),
    )
    assert len(df) == 2 * 3 * 2 * 5


def test_kv_cache_dtype_and_tp_axes():
    df = sweep(
        model="llama-3.1-70b",
        kv_cache_dtype=["bf16", "fp8"],
        tp=[1, 8],
        kv_transfer_bandwidth=50.0,
        num_input_tokens=1000,
    )
    assert df["transfer_bytes"].tolist() == [1000 * b for b in (327_680, 40_960, 163_840, 20_480)]


def test_cache_hit_ratio_is_block_rounded_like_the_helper():
    ratios, tokens = [0.0, 0.3, 1.0], [100, 1000]
    df = sweep(
        kv_bytes_per_token=1000,
        kv_transfer_bandwidth=1.0,
        cache_hit_ratio=ratios,
        block_size=64,
        num_input_tokens=tokens,
    )
    assert (df["mode"] == "destination_missing").all()
    for row in df.itertuples():
        charged = destination_missing_tokens(
            row.num_input_tokens, int(np.floor(row.cache_hit_ratio * row.num_input_tokens)), 64
        )
        assert row.handoff_delay_ms == handoff_delay_ms(charged, 1.0, 1000)


def test_link_latency_is_added():
    slow = perfmodel.Link("slow", 10.0, latency_ms=1.5)
    df = sweep(link=[slow], kv_bytes_per_token=1000, latency_ms=[0.0, 1.0], num_input_tokens=[0, 1000])
    assert df["handoff_delay_ms"].tolist() == [0.0, 0.1 + 1.5, 0.0, 0.1 + 2.5]


@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=5, unique=True),
    st.lists(st.floats(0.01, 1e4), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(0, 10**6), min_size=1, max_size=3, unique=True),
)
def test_random_grids_equal_the_core(tokens, bandwidths, per_token):
    df = sweep(kv_bytes_per_token=per_token, kv_transfer_bandwidth=bandwidths, num_input_tokens=tokens)
    grid = np.array(list(itertools.product(per_token, bandwidths, tokens)), dtype=object)
    expected = handoff_delay_ms(grid[:, 2].astype(np.int64), grid[:, 1].astype(float), grid[:, 0].astype(np.int64))
    np.testing.assert_array_equal(df["handoff_delay_ms"].to_numpy(), expected)


def test_large_sweep_is_chunked_and_exact():
    df = sweep(
        kv_bytes_per_token=[70_272, 327_680],
        kv_transfer_bandwidth=np.linspace(1, 900, 50),
        num_input_tokens=np.arange(0, 25_000),
        progress=False,
    )
    assert len(df) == 2_500_000
    sample = df.sample(200, random_state=0)
    np.testing.assert_array_equal(
        sample["handoff_delay_ms"].to_numpy(),
        handoff_delay_ms(sample["num_input_tokens"], sample["kv_transfer_bandwidth"], sample["kv_bytes_per_token"]),
    )


@pytest.mark.parametrize(
    "axes, fragment",
    [
        (dict(kv_bytes_per_token=1, kv_transfer_bandwidth=1.0), "num_input_tokens is required"),
        (dict(num_input_tokens=1, kv_transfer_bandwidth=1.0), "kv_bytes_per_token (bytes) or model"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1), "kv_transfer_bandwidth (GB/s) or link"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1, model="qwen3-8b", link="pcie4"), "not both"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1, link="pcie4", bandwith=2), "unknown axis ['bandwith']"),
        (dict(num_input_tokens=[], kv_bytes_per_token=1, link="pcie4"), "is empty"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1, link="pcie4", cache_hit_ratio=1.5), "within [0, 1]"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1, link="pcie4", mode="partial"), "unknown mode"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1, link="pcie7"), "unknown link"),
        (dict(num_input_tokens=1, kv_bytes_per_token=1, link=["pcie4", "pcie4"]), "repeated value"),
        (dict(num_input_tokens=[-1], kv_bytes_per_token=1, link="pcie4"), "negative"),
    ],
)
def test_sweep_errors(axes, fragment):
    with pytest.raises(ValueError) as info:
        sweep(**axes)
    assert fragment in str(info.value)


def test_axes_are_documented_in_order():
    assert AXES[-1] == "num_input_tokens" and len(set(AXES)) == len(AXES)


def test_required_bandwidth_inverts_the_model():
    needed = required_bandwidth([1024, 32768], "llama-3.1-70b", budget_ms=50.0, latency_ms=1.0)
    delays = handoff_delay_ms([1024, 32768], needed, 327_680, latency_ms=1.0)
    np.testing.assert_allclose(delays, 50.0, rtol=1e-12)
    assert required_bandwidth(0, 1000, budget_ms=10.0) == 0.0
    assert required_bandwidth(10, 1000, budget_ms=1.0, latency_ms=1.0) == np.inf


@given(
    st.integers(1, 10**6),
    st.floats(0.01, 1e4),
    st.integers(1, 10**6),
    st.floats(0, 5),
    st.sampled_from([None, "gpt-oss-120b", "qwen3-next-80b-a3b"]),
)
@example(1, 3.0, 3, 0.0, None)
@example(1, 0.25, 1, 0.234375, "gpt-oss-120b")  # the latency dwarfs the transfer: 30 bandwidths give one delay
def test_required_bandwidth_is_the_least_that_fits(tokens, budget, per_token, latency, model):
    """Plugged back into the model, the answer meets the budget, and the float just below it does not
    (the closed form alone misses by a rounding step in ~7% of cases)."""
    spec = per_token if model is None else model
    needed = required_bandwidth(tokens, spec, budget_ms=budget, latency_ms=latency)
    assume(np.isfinite(needed) and needed > 0)
    assert handoff_delay_ms(tokens, needed, spec, latency_ms=latency) <= budget
    below = np.nextafter(needed, 0.0)
    assert handoff_delay_ms(tokens, below, spec, latency_ms=latency) > budget


@given(st.floats(0.01, 1e4), st.floats(0.1, 1e4), st.integers(1, 10**6), st.floats(0, 5))
@example(1.0, 1.0, 1, 0.99999)  # the closed form rounds down to 9 tokens, yet 10 fit (a case hypothesis found)
@example(1.0, 1.0, 1, 1.0 - 1e-5 - 1e-17)
@example(1e4, 1e4, 1, 5.0)  # ~1e-10 ms per token: many token counts round to one delay
def test_max_tokens_within_is_the_largest_that_fits(budget, bandwidth, per_token, latency):
    n = max_tokens_within(bandwidth, per_token, budget_ms=budget, latency_ms=latency)
    assert n >= 0 and n == int(n)
    assert handoff_delay_ms(n, bandwidth, per_token, latency_ms=latency) <= budget
    if n < 10**15:
        assert handoff_delay_ms(n + 1, bandwidth, per_token, latency_ms=latency) > budget


def test_max_tokens_within_special_cases():
    assert max_tokens_within(10.0, 0, budget_ms=1.0) == np.inf
    assert max_tokens_within(np.inf, 100, budget_ms=1.0) == np.inf
    assert max_tokens_within(10.0, 1000, budget_ms=1.0, latency_ms=2.0) == 0
    assert max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=[10.0, 50.0]).tolist() == [1525, 7629]
    # a count: int64 where every answer is finite (the docs show tokens), float64 only for an unbounded one
    assert max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=[10.0, 50.0]).dtype == np.int64
    assert type(max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=50.0)) is np.int64
    assert max_tokens_within([10.0, np.inf], 1000, budget_ms=1.0).tolist() == [10000.0, np.inf]
    # beyond 2**53 tokens float64 cannot tell one count from the next: the closed form stands (no overflow)
    assert max_tokens_within(1e9, 1, budget_ms=1e4) == 1e19
    with pytest.raises(ValueError, match="budget_ms"):
        max_tokens_within(10.0, 10, budget_ms=-1.0)


def test_a_progress_bar_only_where_there_is_progress_to_show():
    # (tqdm draws nothing before a second of work: whether a path's bar could show is seen only on the bar)
    from perfmodel import get_options
    from perfmodel.ground.progress import progress_bar

    _CHUNK_ROWS = get_options()["sweep_chunk_rows"]

    with progress_bar(_CHUNK_ROWS, unit="cells", desc="sweep", at_least=_CHUNK_ROWS) as bar:  # one chunk: nothing
        assert bar.disable  # to report
    with progress_bar(10 * _CHUNK_ROWS, unit="cells", desc="sweep", progress=False) as bar:
        assert bar.disable
    with progress_bar(10, unit="cells", desc="sweep", progress=True, at_least=_CHUNK_ROWS) as bar:  # asked for:
        assert not bar.disable and bar.total == 10  # shown whatever the size
    with progress_bar(10 * _CHUNK_ROWS, unit="cells", desc="sweep", at_least=_CHUNK_ROWS) as bar:  # tqdm decides
        assert bar.total == 10 * _CHUNK_ROWS  # (a terminal or not)
    with pytest.raises(ValueError, match="progress"):
        progress_bar(10, unit="cells", desc="sweep", progress="yes")


def test_every_long_path_reports_progress_through_the_one_bar(monkeypatch, tmp_path):
    """Sweeps, replay grids and delay over a file all draw the project's bar (shown when asked)."""
    import perfmodel.ground.progress as progress_module  # (which bar each path opens: unseen in a second's work)
    from perfmodel import io

    seen = []
    real = progress_module.progress_bar

    def spy(total, **keywords):
        seen.append(keywords["desc"])
        return real(total, **keywords)

    monkeypatch.setattr(progress_module, "progress_bar", spy)
    sweep(num_input_tokens=[1, 2], kv_bytes_per_token=1, kv_transfer_bandwidth=1.0, progress=True)
    perfmodel.replay_grid(
        perfmodel.synthetic_trace(20, rate_per_s=10, seed=0),
        model="llama-3.1-8b",
        link="ib-ndr",
        decode_workers=[1, 2],
        progress=True,
    )
    pd.DataFrame({"num_input_tokens": [1, 2]}).to_csv(tmp_path / "r.csv", index=False)
    io.delay_file(
        tmp_path / "r.csv", tmp_path / "o.csv", progress=True, kv_bytes_per_token=1, kv_transfer_bandwidth=1.0
    )
    assert seen == ["sweep", "replay grid", "r.csv"]


def test_a_cache_hit_ratio_where_no_mode_uses_it_is_refused():
    """mode='full_prompt' moved the whole prompt beside a column saying a hit ratio of 0.9."""
    with pytest.raises(InputError, match="cache_hit_ratio: applies to mode='destination_missing'"):
        perfmodel.sweep(kv_bytes_per_token=1000, kv_transfer_bandwidth=50, num_input_tokens=1000,
                        cache_hit_ratio=0.9, mode="full_prompt")  # fmt: skip
    mixed = perfmodel.sweep(kv_bytes_per_token=1000, kv_transfer_bandwidth=50, num_input_tokens=1000,
                            cache_hit_ratio=0.9, mode=["full_prompt", "destination_missing"])  # fmt: skip
    assert mixed["transfer_bytes"].tolist() == [1_000_000, 128_000]  # (the other mode's rows: each its own)


def test_inverse_questions_at_their_edges():
    """An infinite budget fits every prompt (it said 2**53 - 1); a typo or the searched count in
    required_nics_per_node is refused as the other questions refuse it (a TypeError before)."""
    assert perfmodel.max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=float("inf")) == np.inf
    assert perfmodel.max_tokens_within("ib-ndr", "llama-3.1-70b", budget_ms=[50, np.inf]).tolist() == [7629, np.inf]
    for extra, words in ((dict(latncy_ms=5), "latncy_ms: is not an input"), (dict(nics_per_node=4), "searches")):
        with pytest.raises(InputError, match=words):
            perfmodel.required_nics_per_node(32768, "hgx-h100-8x400g", "llama-3.1-70b", budget_ms=50, **extra)


def test_two_model_configs_of_one_label_are_told_apart_from_one_config_twice():
    """Two different configs were called "a repeated value: 'config' twice"."""
    d1 = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}
    d2 = dict(d1, num_key_value_heads=4)
    with pytest.raises(InputError, match="different values labelled 'config'.*'_name_or_path'"):
        perfmodel.sweep(model=[d1, d2], link="ib-ndr", num_input_tokens=1000)
    with pytest.raises(InputError, match="repeated value: 'config' twice"):
        perfmodel.sweep(model=[d1, dict(d1)], link="ib-ndr", num_input_tokens=1000)
    named = perfmodel.sweep(model=[dict(d1, _name_or_path="a"), dict(d2, _name_or_path="b")], link="ib-ndr",
                            num_input_tokens=1000)  # fmt: skip
    assert named["model"].tolist() == ["a", "b"]


def test_axes_given_as_arrow_arrays_or_numbers_as_text_come_out_as_numbers():
    """An Arrow array as an axis was refused ("<pyarrow.Int64Scalar: 1024> (not a whole number)"); bandwidths
    given as text ("50") were priced as numbers but came out as a text column, which sorts "100" before "50"."""
    pa = pytest.importorskip("pyarrow")
    plain = perfmodel.sweep(model="llama-3.1-8b", link="ib-ndr", num_input_tokens=[1024, 2048])
    arrow = perfmodel.sweep(model="llama-3.1-8b", link="ib-ndr", num_input_tokens=pa.array([1024, 2048]))
    pd.testing.assert_frame_equal(arrow, plain)
    missing = perfmodel.sweep(kv_bytes_per_token=1000, kv_transfer_bandwidth=50, num_input_tokens=pa.array([1, None]))
    assert missing["handoff_delay_ms"].isna().tolist() == [False, True]
    text = perfmodel.sweep(model="llama-3.1-8b", kv_transfer_bandwidth=["50", "100"], num_input_tokens=[1024])
    numbers = perfmodel.sweep(model="llama-3.1-8b", kv_transfer_bandwidth=[50.0, 100.0], num_input_tokens=[1024])
    pd.testing.assert_frame_equal(text, numbers)
    assert text.sort_values("kv_transfer_bandwidth")["kv_transfer_bandwidth"].tolist() == [50.0, 100.0]
