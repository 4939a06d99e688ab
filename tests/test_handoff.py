"""The numpy-level API and its kernels against the plain-Python reference of SEMANTICS.md."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel
from perfmodel import InputError, TransferMode, WorkerType, handoff_delay_ms
from perfmodel.inputs.args import coerce  # (what reaches the kernel: no copies, codes and masks; no public view)

from .reference import InvalidRow, destination_missing_tokens_row, handoff_delay_row, row_problems

ARGUMENTS = [
    "num_input_tokens",
    "kv_transfer_bandwidth",
    "kv_bytes_per_token",
    "worker_type",
    "completed",
    "mode",
    "destination_missing_tokens",
    "state_bytes",
    "latency_ms",
    "fallback_delay_ms",
]
NAN, INF = math.nan, math.inf


# --- upstream's golden cases, exactly ----------------------------------------------------


def test_golden_prefill_completed():
    assert handoff_delay_ms(128, 1.0, 1_000_000, worker_type=WorkerType.PREFILL, completed=True) == 128.0


@pytest.mark.parametrize(
    "worker, completed", [(WorkerType.PREFILL, False), (WorkerType.DECODE, True), (WorkerType.AGGREGATED, True)]
)
def test_golden_no_handoff(worker, completed):
    assert np.isnan(handoff_delay_ms(128, 1.0, 1_000_000, worker_type=worker, completed=completed))


def test_golden_destination_missing():
    kw = dict(destination_missing_tokens=20)
    assert handoff_delay_ms(100, 1.0, 1000, mode=TransferMode.DESTINATION_MISSING, **kw) == pytest.approx(
        0.02, rel=1e-15
    )
    assert handoff_delay_ms(100, 1.0, 1000, mode=TransferMode.FULL_PROMPT, **kw) == pytest.approx(0.1, rel=1e-15)


def test_upstream_operation_order_bit_for_bit():
    tokens = np.array([1, 7, 4097, 131_072, 2**40])
    bw = np.array([0.3, 1.7, 46.5, 900.0, 3.3])
    per_token = np.array([1, 327_680, 70_272, 1_000_003, 13])
    expected = [float(t) * float(p) / (b * 1e9) * 1000.0 for t, p, b in zip(tokens, per_token, bw)]
    assert handoff_delay_ms(tokens, bw, per_token).tolist() == expected


# --- special values ----------------------------------------------------------------------


@pytest.mark.parametrize("bw", [NAN, 0.0])
def test_unknown_or_disabled_bandwidth_gives_nan_or_fallback(bw):
    assert np.isnan(handoff_delay_ms(128, bw, 1000))
    assert handoff_delay_ms(128, bw, 1000, fallback_delay_ms=0.0) == 0.0
    assert handoff_delay_ms(128, bw, 1000, fallback_delay_ms=2.5, latency_ms=1.0) == 2.5


def test_unknown_bytes_per_token_uses_fallback_but_missing_tokens_do_not():
    assert handoff_delay_ms(128, 10.0, NAN, fallback_delay_ms=3.0) == 3.0
    assert np.isnan(handoff_delay_ms(NAN, 10.0, 1000, fallback_delay_ms=3.0))


def test_infinite_bandwidth_is_free_but_pays_latency():
    assert handoff_delay_ms(128, INF, 1000) == 0.0
    assert handoff_delay_ms(128, INF, 1000, latency_ms=0.5) == 0.5


def test_latency_only_for_transfers_that_move_bytes():
    out = handoff_delay_ms([0, 100], 1.0, 1000, latency_ms=1.5)
    assert out.tolist() == [0.0, 100 * 1000 / 1e9 * 1000 + 1.5]


def test_state_bytes_are_added_per_transfer():
    # the state moves once per completed handoff, even one that charges no token (the newest upstream's rule,
    # SEMANTICS.md state_bytes), with its latency
    assert handoff_delay_ms(0, 1.0, 1000, state_bytes=1e6) == pytest.approx(1.0)
    assert handoff_delay_ms(1, 1.0, 1000, state_bytes=1e6) == pytest.approx(1.001)
    assert handoff_delay_ms(
        100, 1.0, 1000, mode="destination_missing", destination_missing_tokens=0, state_bytes=1e6, latency_ms=5.0
    ) == pytest.approx(6.0)
    assert handoff_delay_ms(0, 1.0, 1000, latency_ms=5.0) == 0.0  # nothing moves: no latency
    assert handoff_delay_ms(10, 2.0, 1000, state_bytes=1e6) == (10 * 1000.0 + 1e6) / 2e9 * 1000


def test_full_destination_hit_is_zero():
    out = handoff_delay_ms(100, 1.0, 1000, mode="destination_missing", destination_missing_tokens=0)
    assert out == 0.0


def test_missing_destination_count_in_its_mode_only():
    out = handoff_delay_ms(100, 1.0, 1000, mode=["full_prompt", "destination_missing"], destination_missing_tokens=NAN)
    assert out[0] == 0.1 and np.isnan(out[1])


# --- the reference, on hostile random inputs ----------------------------------------------

COUNT = st.one_of(st.integers(0, 2**40), st.integers(-3, 3), st.sampled_from([NAN, INF, -INF, 0.5, 1e18, -0.0, 7.0]))
REAL = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, 50.0, 900.0, -1.0]))
VALUES = {
    "num_input_tokens": COUNT,
    "kv_transfer_bandwidth": REAL,
    "kv_bytes_per_token": st.one_of(st.integers(-2, 2_000_000), REAL),
    "worker_type": st.sampled_from(
        [0, 1, 2, -1, 3, "prefill", "decode", "aggregated", "Prefill", "bogus", WorkerType.PREFILL]
    ),
    "completed": st.sampled_from([True, False, 1, 0, 2]),
    "mode": st.sampled_from([0, 1, "full_prompt", "destination_missing", 2, TransferMode.DESTINATION_MISSING]),
    "destination_missing_tokens": COUNT,
    "state_bytes": st.one_of(st.just(0), REAL),
    "latency_ms": st.one_of(st.just(0.0), REAL),
    "fallback_delay_ms": st.one_of(st.just(None), REAL),
    # the extensions, at their defaults here (test_extensions_equal_the_reference varies them)
    "per_block_ms": st.just(0.0),
    "block_size": st.just(None),
    "prefill_ms": st.just(None),
    "prefill_tokens_per_s": st.just(None),
    "num_layers": st.just(None),
    "layer_group": st.just(1),
    "layerwise_min_tokens": st.just(0),
}
UPSTREAM = ARGUMENTS[:10]  # upstream's ten inputs


# Which arguments are arrays (the rest scalars). Each layout is a compiled specialization
# (~0.5 s each), so the random cases draw from a representative fixed set of layouts
# rather than from all 1024; the values inside them are unrestricted.
LAYOUTS = [
    set(UPSTREAM),
    set(),
    {"num_input_tokens"},
    {"num_input_tokens", "kv_transfer_bandwidth", "kv_bytes_per_token", "worker_type", "completed"},
    {"num_input_tokens", "mode", "destination_missing_tokens"},
    {"kv_transfer_bandwidth", "state_bytes", "latency_ms", "fallback_delay_ms"},
]


@st.composite
def cases(draw):
    """Ten arguments, each a scalar or a list of the case's length."""
    arrays = draw(st.sampled_from(LAYOUTS))
    n = draw(st.integers(1, 12)) if arrays else 1
    columns = {}
    for name, values in VALUES.items():
        columns[name] = draw(st.lists(values, min_size=n, max_size=n)) if name in arrays else draw(values)
    return n, columns


def _row(columns, i):
    return [columns[a][i] if isinstance(columns[a], list) else columns[a] for a in ARGUMENTS]


def _call(columns, **kw):
    c = dict(columns)
    return handoff_delay_ms(
        c.pop("num_input_tokens"),
        c.pop("kv_transfer_bandwidth"),
        c.pop("kv_bytes_per_token"),
        worker_type=c.pop("worker_type"),
        completed=c.pop("completed"),
        **c,
        **kw,
    )


@given(case=cases())
def test_kernel_equals_reference(case):
    n, columns = case
    out = _call(columns, errors="coerce", parallel=False)
    scalar = not any(isinstance(v, list) for v in columns.values())  # numpy's convention: scalars in, a scalar out
    assert out.shape == (() if scalar else (n,)) and out.dtype == np.float64
    out = np.atleast_1d(out)
    for i in range(n):
        row = _row(columns, i)
        try:
            expected = handoff_delay_row(*row)
        except InvalidRow:
            expected = None
        if expected is None:
            assert np.isnan(out[i]), (i, row, out[i])
        else:
            assert out[i] == expected or math.isclose(out[i], expected, rel_tol=1e-12), (i, row, out[i], expected)


@given(case=cases())
def test_raise_names_first_invalid_argument_row_and_count(case):
    n, columns = case
    problems = [row_problems(*_row(columns, i)) for i in range(n)]
    invalid = [a for a in ARGUMENTS if any(a in p for p in problems)]
    if not invalid:
        _call(columns)  # no error
        return
    with pytest.raises(InputError) as info:
        _call(columns)
    error = info.value
    assert error.argument == invalid[0] and str(error).startswith(invalid[0])
    if not isinstance(columns[invalid[0]], list):  # one value for every row: reported as such
        assert error.n_invalid is None and error.row is None and repr(error.value) in str(error)
        return
    rows = [i for i, p in enumerate(problems) if invalid[0] in p]
    assert error.n_invalid == len(rows) and error.row == rows[0]
    assert f"{len(rows)} invalid row" in str(error)


# --- inputs: broadcasting, dtypes, pandas, read-only, no copies ----------------------------


def test_scalars_give_a_scalar_and_arrays_an_array():
    result = handoff_delay_ms(128, 1.0, 1e6)
    assert isinstance(result, np.float64) and result == 128.0
    out = handoff_delay_ms([1, 2, 3], 1.0, 1e9)
    assert out.tolist() == [1000.0, 2000.0, 3000.0]


def test_empty_input():
    out = handoff_delay_ms(np.array([], dtype=np.int64), 1.0, 1000)
    assert out.shape == (0,) and out.dtype == np.float64


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint16", "uint64", "float64", "float32", "int8"])
def test_numeric_dtypes_give_the_same_result(dtype):
    tokens = np.array([0, 1, 100, 127], dtype=dtype)
    expected = handoff_delay_ms(tokens.astype(np.float64), 2.0, 100)
    np.testing.assert_array_equal(handoff_delay_ms(tokens, 2.0, np.array([100] * 4, dtype=dtype)), expected)


def test_supported_dtypes_are_never_copied():
    tokens = np.arange(10, dtype=np.int64)
    for name, value in [
        ("num_input_tokens", tokens),
        ("kv_transfer_bandwidth", np.ones(10)),
        ("worker_type", np.ones(10, np.int8)),
        ("completed", np.ones(10, bool)),
        ("num_input_tokens", pd.Series(tokens)),
    ]:
        assert np.shares_memory(coerce(name, value).value, np.asarray(value)), name


def test_read_only_inputs_and_inputs_untouched():
    tokens = np.arange(1000, dtype=np.int64)
    bw = np.full(1000, 10.0)
    tokens.flags.writeable = False
    before = bw.copy()
    out = handoff_delay_ms(tokens, bw, 100)
    np.testing.assert_array_equal(out, tokens * 100.0 / 10e9 * 1000)
    np.testing.assert_array_equal(bw, before)
    assert bw.flags.writeable


def test_pandas_nullable_and_arrow_inputs():
    tokens = pd.Series([100, None, 300], dtype="Int64")
    bw = pd.Series([1.0, 2.0, None], dtype="Float64")
    worker = pd.Series(["prefill", "prefill", "decode"], dtype="category")
    out = handoff_delay_ms(tokens, bw, 1000, worker_type=worker)
    assert out[0] == 0.1 and np.isnan(out[1]) and np.isnan(out[2])
    arrow = pd.Series([100, 200], dtype="int64[pyarrow]")
    np.testing.assert_array_equal(handoff_delay_ms(arrow, 1.0, 1000), [0.1, 0.2])
    flags = pd.Series([True, None], dtype="boolean")
    out = handoff_delay_ms(100, 1.0, 1000, completed=flags, errors="coerce")
    assert out[0] == 0.1 and np.isnan(out[1])


def test_names_enums_and_codes_are_equivalent():
    a = handoff_delay_ms([10, 10, 10], 1.0, 1000, worker_type=["aggregated", "prefill", "decode"])
    b = handoff_delay_ms([10, 10, 10], 1.0, 1000, worker_type=np.array([0, 1, 2], dtype=np.int8))
    c = handoff_delay_ms(
        [10, 10, 10], 1.0, 1000, worker_type=[WorkerType.AGGREGATED, WorkerType.PREFILL, WorkerType.DECODE]
    )
    d = handoff_delay_ms([10, 10, 10], 1.0, 1000, worker_type=pd.Categorical(["aggregated", "PREFILL", "decode"]))
    for other in (b, c, d):
        np.testing.assert_array_equal(a, other)


def test_out_is_filled_and_returned():
    out = np.full(3, -1.0)
    result = handoff_delay_ms([1, 2, 3], 1.0, 1e9, out=out)
    assert result is out and out.tolist() == [1000.0, 2000.0, 3000.0]


@pytest.mark.parametrize("n", [10, 300_000])
def test_serial_and_parallel_kernels_agree(n):
    rng = np.random.default_rng(n)
    tokens = rng.integers(0, 100_000, n)
    bw = rng.choice([0.0, np.nan, np.inf, 25.0, 900.0], n)
    worker = rng.integers(0, 3, n).astype(np.int8)
    serial = handoff_delay_ms(tokens, bw, 70_000, worker_type=worker, fallback_delay_ms=1.0, parallel=False)
    parallel = handoff_delay_ms(
        tokens, bw, 70_000, worker_type=worker, fallback_delay_ms=1.0, parallel=True, num_threads=2
    )
    np.testing.assert_array_equal(serial, parallel)


def test_parallel_and_serial_count_invalid_rows_alike():
    tokens = np.array([1, -1, 2, -3] * 100_000)
    for parallel in (False, True):
        with pytest.raises(InputError) as info:
            handoff_delay_ms(tokens, 1.0, 1000, parallel=parallel)
        assert info.value.n_invalid == 200_000 and info.value.row == 1


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argument, kwargs, value, problem",
    [
        ("num_input_tokens", dict(num_input_tokens=[5, -2]), -2, "negative"),
        ("num_input_tokens", dict(num_input_tokens=[5, 2.5]), 2.5, "not a whole number"),
        ("num_input_tokens", dict(num_input_tokens=[5, "many"]), "many", "not a number"),
        ("num_input_tokens", dict(num_input_tokens=[5, INF]), INF, "infinite"),
        ("kv_transfer_bandwidth", dict(kv_transfer_bandwidth=[1.0, -INF]), -INF, "negative"),
        ("kv_bytes_per_token", dict(kv_bytes_per_token=[1, INF]), INF, "infinite"),
        ("worker_type", dict(worker_type=["prefill", "prefil"]), "prefil", "not a valid worker type"),
        ("worker_type", dict(worker_type=[1, 7]), 7, "not a valid worker type"),
        ("completed", dict(completed=[1, 2]), 2, "not a valid completed"),
        ("mode", dict(mode=["full_prompt", "partial"]), "partial", "not a valid mode"),
        ("destination_missing_tokens", dict(destination_missing_tokens=[1, -1]), -1, "negative"),
        ("state_bytes", dict(state_bytes=[0, -5]), -5, "negative"),
        ("latency_ms", dict(latency_ms=[0.0, NAN]), NAN, "missing"),
        ("fallback_delay_ms", dict(fallback_delay_ms=[0.0, -1.0]), -1.0, "negative"),
    ],
)
def test_error_messages_name_argument_row_value_and_fix(argument, kwargs, value, problem):
    args = dict(num_input_tokens=[5, 6], kv_transfer_bandwidth=1.0, kv_bytes_per_token=10)
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        handoff_delay_ms(**args)
    message = str(info.value)
    assert message.startswith(f"{argument}: 1 invalid row; first at row 1: ")
    assert repr(value) in message and problem in message and "errors='coerce'" in message
    assert np.isnan(handoff_delay_ms(**args, errors="coerce")[1])


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: handoff_delay_ms([1, 2], [1.0, 2.0, 3.0], 10), "different lengths"),
        (lambda: handoff_delay_ms(np.ones((2, 2)), 1.0, 10), "shape (2, 2)"),
        (lambda: handoff_delay_ms(pd.DataFrame({"a": [1]}), 1.0, 10), "DataFrame"),
        (lambda: handoff_delay_ms([True, False], 1.0, 10), "booleans"),
        (lambda: handoff_delay_ms(pd.Series(pd.to_timedelta([1, 2], unit="s")), 1.0, 10), "got timedelta64"),
        (
            lambda: handoff_delay_ms(1, 1.0, 10, latency_ms=np.array(["2026-01-01"], dtype="datetime64[D]")),
            "datetime64[D] values",
        ),
        (lambda: handoff_delay_ms(1, 1.0, 10, errors="ignore"), "errors"),
        (lambda: handoff_delay_ms(1, 1.0, 10, mode="destination_missing"), "destination_missing_tokens: is required"),
        (lambda: handoff_delay_ms([1, 2], 1.0, 10, out=np.empty(3)), "length 2"),
        (lambda: handoff_delay_ms([1, 2], 1.0, 10, out=np.empty(2, np.float32)), "float64"),
    ],
)
def test_structural_errors_raise_even_when_coercing(call, fragment):
    with pytest.raises(ValueError, match="Fix:") as info:
        call()
    assert fragment in str(info.value)


def test_input_error_survives_pickling():
    import pickle

    with pytest.raises(InputError) as info:
        handoff_delay_ms([1, -2], 1.0, 1)
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is InputError and str(back) == str(info.value)
    assert (back.argument, back.n_invalid, back.row, back.value) == ("num_input_tokens", 1, 1, -2)


def test_out_may_not_overlap_inputs():
    bw = np.ones(4)
    with pytest.raises(ValueError, match="shares memory"):
        handoff_delay_ms(1, bw, 10, out=bw)


def test_invalid_scalar_is_reported_as_one_value():
    with pytest.raises(
        ValueError, match=r"^kv_transfer_bandwidth: -1.0 is negative. Fix: bandwidth is in decimal GB/s"
    ):
        handoff_delay_ms([1, 2, 3], -1.0, 10)


def test_validation_covers_rows_without_handoff():
    with pytest.raises(ValueError, match="kv_transfer_bandwidth"):
        handoff_delay_ms(100, [-1.0], 10, worker_type="decode")


# --- destination_missing_tokens --------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 4096)), min_size=1, max_size=20))
def test_destination_missing_tokens_matches_reference(rows):
    tokens, cached, block = map(np.array, zip(*rows))
    out = perfmodel.destination_missing_tokens(tokens, cached, block)
    assert out.dtype == np.int64
    assert out.tolist() == [destination_missing_tokens_row(*r) for r in rows]


def test_destination_missing_tokens_examples():
    # a partial last block counts whole and is never a hit (only full blocks carry a hash); cached counts whole
    # blocks only; never below 0
    assert perfmodel.destination_missing_tokens(100, [0, 63, 64, 1000], 64).tolist() == [128, 128, 64, 64]
    assert perfmodel.destination_missing_tokens(128, [1000], 64).tolist() == [0]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((10, -1, 64), "cached_tokens: 1 invalid row; first at row 0: -1 (negative)"),
        ((10, 0, 0), "block_size: 1 invalid row; first at row 0: 0 (below 1)"),
        ((NAN, 0, 64), "(missing)"),
        ((pd.Series([5, 2.5], index=[10, 11]), 0, 64), "first at row 1: 2.5 (not a whole number)"),
        (([1, 2], [1, 2, 3], 4), "broadcast"),
    ],
)
def test_destination_missing_tokens_errors(args, fragment):
    with pytest.raises(ValueError) as info:
        perfmodel.destination_missing_tokens(*args)
    assert fragment in str(info.value)


# --- extensions: per-block cost and layer-wise streaming, against the reference ------------

EXTENSION = {
    "num_input_tokens": st.one_of(st.integers(0, 200_000), st.just(NAN)),
    "kv_transfer_bandwidth": st.one_of(st.floats(0.5, 1000), st.just(INF)),
    "kv_bytes_per_token": st.integers(0, 400_000),
    "latency_ms": st.one_of(st.just(0.0), st.floats(0, 5)),
    "per_block_ms": st.one_of(st.just(0.0), st.floats(0, 0.05)),
    "block_size": st.sampled_from([16, 64, 512]),
    "prefill_ms": st.one_of(st.just(0.0), st.floats(0, 10_000), st.just(NAN)),
    "num_layers": st.sampled_from([1, 32, 80]),
    "layer_group": st.sampled_from([1, 2, 4]),
    "layerwise_min_tokens": st.sampled_from([0, 1024, 8192]),
}
EXTENSION_LAYOUTS = [set(), {"num_input_tokens", "prefill_ms"}, set(EXTENSION)]


@st.composite
def extension_cases(draw):
    arrays = draw(st.sampled_from(EXTENSION_LAYOUTS))
    n = draw(st.integers(1, 10)) if arrays else 1
    columns = {k: draw(st.lists(v, min_size=n, max_size=n)) if k in arrays else draw(v) for k, v in EXTENSION.items()}
    overlap = draw(st.sampled_from(["none", "layerwise"]))
    if overlap == "none":
        for name in ("prefill_ms", "num_layers", "layer_group", "layerwise_min_tokens"):
            columns.pop(name)
    return n, overlap, columns


def _at(columns, name, i, default=None):
    value = columns.get(name, default)
    return value[i] if isinstance(value, list) else value


@given(case=extension_cases())
def test_extensions_equal_the_reference(case):
    n, overlap, columns = case
    c = dict(columns)
    try:
        out = np.atleast_1d(
            handoff_delay_ms(
                c.pop("num_input_tokens"),
                c.pop("kv_transfer_bandwidth"),
                c.pop("kv_bytes_per_token"),
                overlap=overlap,
                errors="coerce",
                **c,
            )
        )
    except InputError as error:  # a layer group larger than the model (a scalar): refused up front
        assert "layer" in str(error)
        return
    for i in range(n):
        try:
            expected = handoff_delay_row(
                _at(columns, "num_input_tokens", i),
                _at(columns, "kv_transfer_bandwidth", i),
                _at(columns, "kv_bytes_per_token", i),
                latency_ms=_at(columns, "latency_ms", i),
                per_block_ms=_at(columns, "per_block_ms", i),
                block_size=_at(columns, "block_size", i),
                prefill_ms=_at(columns, "prefill_ms", i),
                num_layers=_at(columns, "num_layers", i),
                layer_group=_at(columns, "layer_group", i, 1),
                layerwise_min_tokens=_at(columns, "layerwise_min_tokens", i, 0),
            )
        except InvalidRow:
            expected = None
        if expected is None:
            assert np.isnan(out[i])
        else:
            assert math.isclose(out[i], expected, rel_tol=1e-12, abs_tol=1e-300), (i, out[i], expected)


@given(
    tokens=st.integers(1, 200_000),
    per_token=st.integers(1, 400_000),
    bandwidth=st.floats(1, 1000),
    layers=st.sampled_from([8, 32, 61, 80, 126]),
    group=st.sampled_from([1, 2, 4, 8]),
    compute=st.floats(0, 1e5),
)
def test_layerwise_exposes_at_most_the_transfer(tokens, per_token, bandwidth, layers, group, compute):
    full = handoff_delay_ms(tokens, bandwidth, per_token)
    exposed = handoff_delay_ms(
        tokens,
        bandwidth,
        per_token,
        overlap="layerwise",
        prefill_ms=[0.0, compute, 1e12],
        num_layers=layers,
        layer_group=group,
    )
    assert exposed[0] == full  # no compute to hide behind: the whole transfer
    assert exposed[1] <= full * (1 + 1e-12)
    assert math.isclose(exposed[2], full * group / layers, rel_tol=1e-12)  # long prefill: only the last group
    assert exposed[1] >= exposed[2] * (1 - 1e-12)  # more compute never exposes more


def test_per_block_cost_defaults_reproduce_upstream_bit_for_bit():
    tokens = np.arange(0, 100_000, 37)
    plain = handoff_delay_ms(tokens, 50.0, 327_680)
    np.testing.assert_array_equal(handoff_delay_ms(tokens, 50.0, 327_680, per_block_ms=0.0, block_size=16), plain)
    np.testing.assert_array_equal(
        handoff_delay_ms(tokens, 50.0, 327_680, overlap="layerwise", prefill_ms=0.0, num_layers=80), plain
    )


def test_per_block_cost_counts_blocks_and_needs_a_block_size():
    # LMCache's observation: 7,500 tokens over NVLink cost far more with 16-token pages than with 128-token ones
    link = perfmodel.Link("nvlink-paged", 450.0, per_block_ms=0.0025)
    small, large = handoff_delay_ms(7500, link, "llama-3.1-8b", block_size=[16, 128])
    assert math.isclose(small - large, (math.ceil(7500 / 16) - math.ceil(7500 / 128)) * 0.0025, rel_tol=1e-9)
    assert handoff_delay_ms(0, link, "llama-3.1-8b", block_size=16) == 0.0  # 0 tokens move 0 blocks
    with pytest.raises(InputError, match="per_block_ms: 0.0025: a per-block cost needs a block size"):
        handoff_delay_ms(7500, link, "llama-3.1-8b")
    with pytest.raises(InputError, match="per_block_ms: 1 invalid row; first at row 1"):
        handoff_delay_ms([10, 10], 1.0, 1, per_block_ms=[0.0, 1.0])


def test_layerwise_takes_layers_from_the_model_and_checks_its_inputs():
    by_name = handoff_delay_ms(32768, "ib-ndr", "llama-3.1-70b", overlap="layerwise", prefill_tokens_per_s=10_000)
    explicit = handoff_delay_ms(
        32768, "ib-ndr", 327_680, overlap="layerwise", prefill_ms=32768 / 10_000 * 1000, num_layers=80
    )
    assert by_name == explicit
    with pytest.raises(InputError, match="num_layers: is required"):
        handoff_delay_ms(32768, "ib-ndr", 327_680, overlap="layerwise", prefill_ms=100.0)
    with pytest.raises(InputError, match="exactly one of prefill_ms and prefill_tokens_per_s"):
        handoff_delay_ms(32768, "ib-ndr", "llama-3.1-70b", overlap="layerwise")
    with pytest.raises(InputError, match="overlap: prefill_ms apply to layer-wise streaming, which is off"):
        handoff_delay_ms(32768, "ib-ndr", "llama-3.1-70b", prefill_ms=100.0)
    short = handoff_delay_ms(
        [512, 32768], "ib-ndr", "llama-3.1-70b", overlap="layerwise", prefill_ms=1e6, layerwise_min_tokens=1024
    )
    assert short[0] == handoff_delay_ms(512, "ib-ndr", "llama-3.1-70b")  # below the threshold: after prefill


# --- categorical labels: codes decoded in the kernel -----------------------------------------

_WORKER_LABELS = ["aggregated", "prefill", "decode", "PREFILL ", "2", "bogus"]
_MODE_LABELS = ["full_prompt", "destination_missing", "Destination_Missing", "0", "nope"]


@given(st.data(), st.integers(1, 400), st.booleans())
def test_categoricals_any_order_equal_their_labels(data, n, parallel):
    """A categorical worker type or mode (any categories, in any order, unused ones, invalid ones, missing
    rows) gives what its labels give as plain strings: the kernel decodes the codes through two masks."""
    worker_categories = data.draw(st.lists(st.sampled_from(_WORKER_LABELS), min_size=1, max_size=6, unique=True))
    mode_categories = data.draw(st.lists(st.sampled_from(_MODE_LABELS), min_size=1, max_size=5, unique=True))
    workers = data.draw(st.lists(st.sampled_from(worker_categories + [None]), min_size=n, max_size=n))
    modes = data.draw(st.lists(st.sampled_from(mode_categories + [None]), min_size=n, max_size=n))
    rng = np.random.default_rng(n)
    kw = dict(destination_missing_tokens=rng.integers(0, 5000, n), parallel=parallel)
    args = (rng.integers(0, 5000, n), rng.choice([0.0, 10.0, np.nan, np.inf], n), 1000)
    as_strings = dict(worker_type=np.array(workers, dtype=object), mode=np.array(modes, dtype=object))
    as_categories = dict(
        worker_type=pd.Categorical(workers, categories=worker_categories),
        mode=pd.Categorical(modes, categories=mode_categories),
    )
    np.testing.assert_array_equal(
        handoff_delay_ms(*args, **as_categories, errors="coerce", **kw),
        handoff_delay_ms(*args, **as_strings, errors="coerce", **kw),
    )
    try:
        expected = handoff_delay_ms(*args, **as_strings, **kw)
    except InputError as error:
        with pytest.raises(InputError) as raised:
            handoff_delay_ms(*args, **as_categories, **kw)
        # the same argument, count, first row and label (a categorical shows its missing label as nan)
        assert str(raised.value).replace(": nan (", ": None (") == str(error)
    else:
        np.testing.assert_array_equal(handoff_delay_ms(*args, **as_categories, **kw), expected)


def test_categorical_codes_reach_the_kernel_without_a_copy():
    column = pd.Series(pd.Categorical(["prefill", "decode", "aggregated"] * 4))  # categories sorted: codes 2, 1, 0
    arg = coerce("worker_type", column)
    assert np.shares_memory(arg.value, column.array.codes) and arg.masks == (0b100, 0b111)
    np.testing.assert_array_equal(arg.kernel_values(), [1, 0, 0] * 4)  # prefill 1, the others 0 (valid)
    many = pd.Categorical(["prefill"] + [f"label {k}" for k in range(70)])
    assert coerce("worker_type", pd.Series(many)).masks is None  # beyond 64 categories: spread as before
    np.testing.assert_array_equal(
        handoff_delay_ms([10, 10], 1.0, 1000, worker_type=many[:2], errors="coerce"), [0.01, np.nan]
    )


# --- text labels: codes decoded in the kernel, no full-length pass before it ------------------

_EXPECTED_WORKER = {"aggregated": 0, "prefill": 1, "decode": 2, "PREFILL ": 1, "2": 2, "bogus": -1, None: -1}
_EXPECTED_MODE = {"full_prompt": 0, "destination_missing": 1, "Destination_Missing": 1, "0": 0, "nope": -1, None: -1}


def _text_forms(labels: list) -> dict[str, object]:
    """One column of labels (None: missing) in every form a user's text can take."""
    import pyarrow as pa

    half = len(labels) // 2
    chunks = pa.chunked_array(
        [pa.array(labels[:half], pa.string()), pa.array([], pa.string()), pa.array(labels[half:], pa.string())],
        pa.string(),
    )
    forms = {
        "list": list(labels),
        "object array": np.array(labels, dtype=object),
        "object Series": pd.Series(labels, dtype=object),
        "python strings": pd.Series(labels, dtype=pd.StringDtype("python")),
        "arrow strings": pd.Series(labels, dtype=pd.StringDtype("pyarrow")),
        "arrow string": pd.Series(labels, dtype=pd.ArrowDtype(pa.string())),
        "arrow large_string": pd.Series(labels, dtype=pd.ArrowDtype(pa.large_string())),
        "arrow dictionary": pd.Series(labels, dtype=pd.ArrowDtype(pa.dictionary(pa.int8(), pa.string()))),
        "arrow chunks": pd.Series(pd.arrays.ArrowExtensionArray(chunks)),
    }
    if None not in labels:
        forms["numpy unicode"] = np.array(labels, dtype=str)
    return forms


@given(st.data(), st.integers(1, 300), st.booleans())
def test_text_labels_in_every_form_equal_their_codes(data, n, parallel):
    """Worker types and modes given as text (object, python and Arrow strings, chunked Arrow, Arrow
    dictionaries; unknown, padded, numeric and missing labels) give exactly what their codes give,
    and a bad label is reported at its row."""
    workers = data.draw(st.lists(st.sampled_from(list(_EXPECTED_WORKER)), min_size=n, max_size=n))
    modes = data.draw(st.lists(st.sampled_from(list(_EXPECTED_MODE)), min_size=n, max_size=n))
    rng = np.random.default_rng(n)
    args = (rng.integers(0, 5000, n), rng.choice([0.0, 10.0, np.nan, np.inf], n), 1000)
    kw = dict(destination_missing_tokens=rng.integers(0, 5000, n), parallel=parallel)
    worker_codes = np.array([_EXPECTED_WORKER[w] for w in workers], dtype=np.int8)
    mode_codes = np.array([_EXPECTED_MODE[m] for m in modes], dtype=np.int8)
    expected = handoff_delay_ms(*args, worker_type=worker_codes, mode=mode_codes, errors="coerce", **kw)
    first_bad = next((i for i in range(n) if worker_codes[i] < 0), None)
    mode_forms = _text_forms(modes)
    for form, column in _text_forms(workers).items():
        mode_column = mode_forms.get(form, mode_forms["object array"])
        got = handoff_delay_ms(*args, worker_type=column, mode=mode_column, errors="coerce", **kw)
        np.testing.assert_array_equal(got, expected, err_msg=form)
        if first_bad is not None:
            with pytest.raises(InputError) as raised:
                handoff_delay_ms(*args, worker_type=column, mode=mode_column, **kw)
            assert raised.value.argument == "worker_type" and raised.value.row == first_bad, form
            assert raised.value.n_invalid == int((worker_codes < 0).sum()), form


def test_text_labels_reach_the_kernel_as_codes_and_masks(monkeypatch):
    """No full-length pass spreads text labels' values before the kernel: the kernel decodes the
    codes of each distinct label (up to 64 of them) through two masks."""
    from perfmodel.inputs import coerce as coerce_module

    def refused(*args, **kwargs):
        raise AssertionError("a full-length pass spread the labels before the kernel")

    for module, name in ((coerce_module, "spread"),):
        monkeypatch.setattr(module, name, refused)
    labels = ["prefill", "decode", "aggregated", None] * 3000
    for form, column in _text_forms(labels).items():
        arg = coerce("worker_type", column)
        assert arg.masks is not None and arg.value.dtype.kind == "i", form
        delays = handoff_delay_ms(10, 1.0, 1000, worker_type=column, errors="coerce")
        np.testing.assert_array_equal(delays, np.tile([0.01, np.nan, np.nan, np.nan], 3000), err_msg=form)
    arrow = pd.Series(labels[:4000], dtype=pd.StringDtype("pyarrow"))
    assert coerce("worker_type", arrow).value.dtype == np.int8  # Arrow's dictionary indices, narrowed (one form)


def test_more_than_64_distinct_labels_still_give_their_values():
    labels = ["prefill", "decode"] + [f"label {k}" for k in range(70)]
    for column in (np.array(labels, dtype=object), pd.Series(labels, dtype=pd.StringDtype("pyarrow"))):
        assert coerce("worker_type", column).masks is None
        delays = handoff_delay_ms(10, 1.0, 1000, worker_type=column, errors="coerce")
        np.testing.assert_array_equal(delays, [0.01] + [np.nan] * 71)


_LABEL_FORMS = {
    "worker_type": [0, 1, 2, 1.0, 2.0, *WorkerType, "prefill", " Decode", "aggregated", "1", "bogus", True, 7, 1.5],
    "mode": [0, 1, 1.0, *TransferMode, "full_prompt", "DESTINATION_MISSING", "0", "bogus", False, 3],
    "completed": [True, False, 1, 0, 1.0, "true", "False", "1", "yes", 2, np.True_],
    "num_input_tokens": [100, 100.0, "100", True, -1, 2.5, "many", np.int64(7), np.float64(3.0)],
}


@given(data=st.data(), name=st.sampled_from(sorted(_LABEL_FORMS)))
def test_a_list_of_mixed_label_forms_reads_each_as_it_reads_alone(data, name):
    """A list mixing forms (codes, floats, enum members, names, booleans, text numbers) is read entry by
    entry, as each would be alone: numpy turns such a list into text (1.0 -> '1.0', and on Python 3.10
    an enum member -> 'WorkerType.PREFILL') or booleans into numbers, which no parser should see."""
    labels = data.draw(st.lists(st.sampled_from(_LABEL_FORMS[name]), min_size=1, max_size=8))
    kw = dict(errors="coerce", destination_missing_tokens=10)
    args = {"num_input_tokens": 100, "kv_transfer_bandwidth": 1.0, "kv_bytes_per_token": 1000}
    refused = []
    alone = []
    for label in labels:
        try:
            alone.append(handoff_delay_ms(**{**args, name: label}, **kw))
        except InputError as error:  # (booleans where numbers are expected: refused whole, even with coerce)
            refused.append(str(error))
    call = dict(args, **{name: labels, "kv_transfer_bandwidth": [1.0] * len(labels)})
    if refused:
        with pytest.raises(InputError, match="got booleans where numbers were expected"):
            handoff_delay_ms(**call, **kw)
        assert all("got booleans where numbers were expected" in message for message in refused)
    else:
        np.testing.assert_array_equal(handoff_delay_ms(**call, **kw), alone)


@pytest.mark.parametrize(
    "values", [[1, True], pd.Series([1, True], dtype=object), np.array([2.0, np.True_], dtype=object)]
)
def test_a_boolean_beside_an_equal_number_is_still_a_boolean(values):
    """True == 1: a test of the distinct values (pd.unique) kept 1 alone and read True as one token."""
    with pytest.raises(InputError, match="got booleans where numbers were expected"):
        handoff_delay_ms(values, 50.0, 1000.0)
