"""Hostile use at the edges: configs, presets, traces, fits, output folders and option combinations.
Each test is one class of defect: a value never silently wrong, a file of the user's never removed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError, fit_link, handoff_delay_ms, handoff_delays, read_trace, replay_handoffs, sweep
from perfmodel.cli import main

# 1. a value is never taken for a column label ---------------------------------------------------


@pytest.mark.parametrize("value", [np.int64(1), np.int32(1), np.float64(1.0), 1, 1.0])  # (booleans: refused, below)
def test_numbers_are_values_even_where_a_column_has_that_label(value):
    df = pd.DataFrame({"num_input_tokens": [4096, 8192], 1: [7.0, 9.0]})
    got = handoff_delays(df, kv_transfer_bandwidth=1.0, kv_bytes_per_token=value)
    np.testing.assert_allclose(got.to_numpy(dtype=float), np.array([4096, 8192]) / 1e9 * 1000, rtol=1e-12)


def test_a_boolean_value_is_refused_not_read_as_a_column():
    df = pd.DataFrame({"num_input_tokens": [4096, 8192], 1: [7.0, 9.0]})
    with pytest.raises(InputError, match="booleans"):
        handoff_delays(df, kv_transfer_bandwidth=1.0, kv_bytes_per_token=np.bool_(True))


# 2. model configs are read strictly -------------------------------------------------------------

_BASE = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}


@pytest.mark.parametrize(
    "field, value",
    [
        ("sliding_window", -4),
        ("num_hidden_layers", 2.7),
        ("num_key_value_heads", 0),
        ("num_attention_heads", 0),
        ("num_hidden_layers", True),
        ("head_dim", "128"),
        ("num_hidden_layers", float("inf")),
    ],
)
def test_every_count_of_a_config_is_a_whole_number_in_range(tmp_path, field, value):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_BASE, field: value}))
    for call in (lambda: perfmodel.kv_terms(path), lambda: handoff_delay_ms(100, 1.0, str(path))):
        with pytest.raises(InputError) as raised:
            call()
        assert field in str(raised.value) and str(path) in str(raised.value)


@pytest.mark.parametrize("content", ["[1, 2]", "null", "7", '"text"'])
def test_a_config_file_that_is_not_an_object_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(InputError, match="not a JSON object"):
        perfmodel.kv_terms(path)


def test_bytes_and_the_kernel_agree_on_an_accepted_config():
    config = {
        **_BASE,
        "num_key_value_heads": 2,
        "sliding_window": 16,
        "layer_types": ["full_attention", "sliding_attention"],
    }
    for tokens in (0, 10, 16, 17, 1000):
        assert handoff_delay_ms(tokens, 1.0, config) * 1e6 == pytest.approx(float(perfmodel.kv_bytes(config, tokens)))


# 3. user presets ---------------------------------------------------------------------------------


@pytest.fixture
def presets(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path))
    return tmp_path / "presets.json"


@pytest.mark.parametrize("content", ["[1, 2]", '{"links": [1]}', '{"links": "x"}', "{not json"])
def test_a_malformed_presets_file_never_crashes_and_built_ins_still_work(presets, content):
    presets.write_text(content)
    assert perfmodel.get_link("ib-ndr").bandwidth_gb_s == 50.0
    assert handoff_delay_ms(1000, "ib-ndr", "llama-3.1-8b") > 0
    with pytest.raises(InputError) as raised:
        perfmodel.get_link("our-link")
    assert str(presets) in str(raised.value)
    with pytest.raises(InputError, match="presets"):
        perfmodel.network.links.save_link(perfmodel.Link("our-link", 10.0))
    assert presets.read_text() == content  # never overwritten


def test_one_bad_entry_does_not_break_the_others(presets):
    presets.write_text(
        json.dumps(
            {
                "links": {"good": {"bandwidth_gb_s": 10.0}, "bad": "fast", "worse": {"bandwidth_gb_s": "fast"}},
                "models": {"m": {"config": _BASE}, "broken": [1]},
            }
        )
    )
    assert perfmodel.get_link("good").bandwidth_gb_s == 10.0 and perfmodel.get_link("3x good").bandwidth_gb_s == 30.0
    for name in ("bad", "worse"):
        with pytest.raises(InputError) as raised:
            perfmodel.get_link(name)
        assert name in str(raised.value) and str(presets) in str(raised.value)
    assert perfmodel.kv_bytes("m", 10) > 0
    with pytest.raises(InputError, match="broken"):
        perfmodel.kv_bytes("broken", 10)


@pytest.mark.parametrize("name", ["ib-ndr", "8x ib-ndr", "2x anything", " "])
def test_a_preset_name_that_would_shadow_or_mislead_is_refused_when_saved(presets, name):
    with pytest.raises(InputError, match="link name"):
        perfmodel.network.links.save_link(perfmodel.Link(name, 10.0))
    assert not presets.exists()


# 4. integers near their limits --------------------------------------------------------------------


def test_counts_beyond_exact_arithmetic_are_refused_not_wrapped():
    with pytest.raises(InputError, match="2\\*\\*53"):
        sweep(num_input_tokens=[2**62], kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0)
    big = sweep(num_input_tokens=[2**52], kv_bytes_per_token=1000, kv_transfer_bandwidth=1.0)
    assert big["transfer_bytes"].iloc[0] == 2.0**52 * 1000  # float64 where an integer would wrap
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [2**63 - 1]})
    with pytest.raises(InputError, match="num_input_tokens"):
        replay_handoffs(trace, 50.0, 1000, mode="destination_missing")


def test_huge_ids_in_a_trace_name_the_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 1, "input_length": 6, "output_length": 3, "hash_ids": [1]}\n'
        '{"timestamp": 2, "input_length": 6, "output_length": 3, "hash_ids": [99999999999999999999]}\n'
    )
    with pytest.raises(ValueError, match="line 2"):
        read_trace(path)


# 5. traces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, match",
    [
        ("arrival_ms,num_input_tokens\n5,100,7\n6,200,8\n", "more fields than the header"),
        ("arrival_ms,num_input_tokens\n5,100\n6,200,8\n", "line 3"),
        ("arrival_ms,num_input_tokens\n5,100\ninf,200\n", "line 3"),
        ("arrival_ms,num_input_tokens\n5,100\n-inf,200\n", "line 3"),
        ("arrival_ms,num_input_tokens\n5,100\nnan,200\n", "line 3"),
        ("arrival_ms,num_input_tokens,hash_ids\n5,100,[1.5]\n", "not a list of block ids"),
    ],
)
def test_a_malformed_csv_trace_is_refused_naming_where(tmp_path, text, match):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as raised:
        read_trace(path)
    assert str(path) in str(raised.value)


def test_a_trace_of_empty_hash_lists_and_float_counts_reads(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_ms,num_input_tokens,hash_ids\n5,100,[]\n6,200,[]\n")
    assert read_trace(path)["hash_ids"].map(len).tolist() == [0, 0]
    lines = tmp_path / "t.jsonl"
    lines.write_text('{"timestamp": 1, "input_length": 600.0, "output_length": 3, "hash_ids": [1]}\n')
    assert read_trace(lines)["num_input_tokens"].tolist() == [600]
    lines.write_text(
        '{"timestamp": 1, "input_length": 600.5, "output_length": 3}\n'
        '{"timestamp": 2, "input_length": 7, "output_length": 3}\n'
    )
    with pytest.raises(ValueError, match="line 1"):
        read_trace(lines)
    with pytest.warns(UserWarning, match="skipped 1"):
        assert read_trace(lines, errors="skip")["num_input_tokens"].tolist() == [7]


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"arrival_ms,num_input_tokens\n5,100\n\xff\xfe,1\n")
    with pytest.raises(InputError, match="UTF-8") as raised:
        read_trace(path)
    assert str(path) in str(raised.value)


# 6. whole numbers and ranges at every entry point ---------------------------------------------------


def test_a_fractional_block_size_is_refused():
    with pytest.raises(InputError, match="block_size"):
        handoff_delay_ms(4096, 1.0, 1000, per_block_ms=0.01, block_size=1.5)


@pytest.mark.parametrize("tokens", [True, np.inf, None, "x", -1])
def test_inverse_questions_refuse_what_is_not_a_token_count(tokens):
    with pytest.raises(InputError, match="num_input_tokens"):
        perfmodel.required_bandwidth(tokens, "llama-3.1-8b", budget_ms=50)


def test_required_inputs_given_as_none_are_named():
    with pytest.raises(InputError, match="num_input_tokens: is required"):
        handoff_delay_ms(None, 1.0, 1000)


def test_every_row_is_validated_even_without_layers():
    with pytest.raises(InputError, match="layer_group"):
        handoff_delay_ms([100, 200], 1.0, 1000, overlap="layerwise", prefill_ms=5.0, num_layers=0, layer_group=0)


# 7. replay options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "keywords, name",
    [
        (dict(latency_ms=np.array([0.1, 0.2])), "latency_ms"),
        (dict(per_block_ms=[0.1, 0.2]), "per_block_ms"),
        (dict(ready_ms="nope"), "ready_ms"),
        (dict(kv_transfer_bandwidth=np.nan), "kv_transfer_bandwidth"),
        (dict(kv_transfer_bandwidth=np.inf), "kv_transfer_bandwidth"),
        (dict(kv_transfer_bandwidth=1e-320), "kv_transfer_bandwidth"),
    ],
)
def test_replay_options_are_taken_or_refused_clearly(keywords, name):
    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [100, 200]})
    with pytest.raises(InputError) as raised:
        replay_handoffs(trace, **{"kv_transfer_bandwidth": 50.0, "kv_bytes_per_token": 1000, **keywords})
    assert name in str(raised.value)


@pytest.mark.parametrize("contention", ["fifo", "fair"])
def test_layerwise_streaming_of_a_burst_at_zero_equals_the_same_burst_later(contention):
    burst = pd.DataFrame({"arrival_ms": np.zeros(4), "num_input_tokens": [4096] * 4})
    kw = dict(contention=contention, overlap="layerwise", prefill_ms=100.0)
    early = replay_handoffs(burst, 50.0, "llama-3.1-8b", **kw)
    late = replay_handoffs(burst.assign(arrival_ms=10_000.0), 50.0, "llama-3.1-8b", **kw)
    np.testing.assert_allclose(early["handoff_delay_ms"], late["handoff_delay_ms"], rtol=1e-9)
    np.testing.assert_allclose(early["queue_ms"], late["queue_ms"], rtol=1e-9, atol=1e-9)


# 8. output folders hold what each command wrote -------------------------------------------------------


def test_commands_keep_each_others_files(tmp_path, shared_data):
    out = tmp_path / "results"
    assert main(["sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--tokens", "1k,2k", "--out", str(out)]) == 0
    sweep_files = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}
    trace = shared_data / "mooncake_synthetic_trace.jsonl"
    assert main(["trace", str(trace), "--model", "llama-3.1-8b", "--link", "ib-ndr", "--out", str(out)]) == 0
    for name, content in sweep_files.items():
        assert (out / name).read_bytes() == content, name
    assert (out / "replay.csv").exists()
    (out / "mine.txt").write_text("the user's")
    assert main(["sweep", "--model", "llama-3.1-8b", "--link", "ib-ndr", "--tokens", "1k", "--out", str(out)]) == 0
    assert (out / "mine.txt").read_text() == "the user's" and (out / "replay.csv").exists()
    assert not (out / "heatmap.png").exists()  # the sweep's own earlier file, not written again: removed


def test_a_refused_calibration_writes_nothing(tmp_path, presets):
    table = tmp_path / "m.csv"
    pd.DataFrame({"nbytes": [1e6, 1e7, 1e8], "measured_ms": [0.1, 0.3, 2.3]}).to_csv(table, index=False)
    out = tmp_path / "cal"
    assert main(["calibrate", str(table), "--name", "ib-ndr", "--save", "--out", str(out)]) == 2
    assert not out.exists()
    presets.write_text("[1]")
    assert main(["calibrate", str(table), "--name", "ours", "--save", "--out", str(out)]) == 2
    assert not out.exists() and presets.read_text() == "[1]"


# 9. fits never refuse describable data ---------------------------------------------------------------


def test_blocks_proportional_to_bytes_fit_the_simpler_form():
    nbytes = np.array([1e5, 1e6, 1e7, 1e8])
    link = fit_link(nbytes, 0.2 + nbytes / 40e9 * 1000, n_blocks=nbytes / 65536)
    assert link.latency_ms == pytest.approx(0.2) and link.fit.max_relative_error < 1e-9
    assert link.per_block_ms == 0 and "per-block cost cannot be told apart" in link.fit.note


def test_the_same_bytes_at_two_block_counts_fit_a_per_block_cost():
    link = fit_link([7500e3, 7500e3], [20.0, 8.0], n_blocks=[469, 59])
    assert link.per_block_ms == pytest.approx(12 / 410) and link.fit.max_relative_error < 1e-9


# 10. the command line takes what its help shows ---------------------------------------------------------


def test_grid_axes_after_one_flag_and_repeated(tmp_path, shared_data, capsys):
    trace = str(shared_data / "mooncake_synthetic_trace.jsonl")
    base = ["trace", trace, "--model", "llama-3.1-8b", "--link", "ib-ndr"]
    assert main([*base, "--grid", "decode_workers=1,2", "contention=none,fifo", "--out", str(tmp_path / "a")]) == 0
    assert (
        main([*base, "--grid", "decode_workers=1,2", "--grid", "contention=none,fifo", "--out", str(tmp_path / "b")])
        == 0
    )
    a, b = (pd.read_csv(tmp_path / f / "grid.csv") for f in "ab")
    assert len(a) == 4
    pd.testing.assert_frame_equal(a, b)
    capsys.readouterr()
    assert main([*base, "--grid", "decode_workers=2", "--out", str(tmp_path / "c")]) == 2
    assert "nothing to compare" in capsys.readouterr().err and not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "flags, grid",
    [
        (["--decode-workers", "4"], "decode_workers=1,2"),
        (["--tp", "2"], "tp=1,2"),
        (["--contention", "fifo"], "contention=none,fair"),
        ([], "model=llama-3.1-8b,qwen3-32b"),
        ([], "kv_bytes_per_token=1000,2000"),
    ],
)
def test_a_flag_and_a_grid_axis_for_one_option_are_refused(flags, grid, tmp_path, capsys):
    """``perfmodel trace --model M --grid model=...`` (or any flag with its own grid axis) is one line and exit 2:
    one of the two was silently dropped before."""
    trace = "dataset:mooncake-synthetic"
    out = tmp_path / "g"
    assert (
        main(["trace", trace, "--model", "llama-3.1-8b", "--link", "ib-ndr", *flags, "--grid", grid, "--out", str(out)])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--grid" in err[0] and not out.exists(), err


@pytest.mark.parametrize(
    "args", [["sweep", "--bandwidth", "0"], ["sweep", "--bogus"], ["delay"], ["sweep", "--mode", "sideways"]]
)
def test_usage_errors_are_one_line(args, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0], err


# 11. upstream's rules where perfmodel follows upstream -------------------------------------------------------


def test_a_partial_last_block_always_moves():
    assert perfmodel.destination_missing_tokens(100, 1000, 64) == 64
    assert perfmodel.destination_missing_tokens(128, 1000, 64) == 0


# --- class 12: errors that name where ------------------------------------------------------------------


def test_times_with_and_without_a_time_zone_are_refused_naming_the_file_column_and_line(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68+00:00,100,5\n"
        "2023-11-16 18:15:47.68+00:00,100,5\n2023-11-16 18:15:48.68,200,5\n"
    )
    with pytest.raises(
        ValueError,
        match=r"azure\.csv: column 'TIMESTAMP', line 4: '2023-11-16 18:15:48\.68' has no "
        r"time zone",
    ):
        read_trace(path)


def test_times_with_different_offsets_are_the_instants_they_name(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5+00:00,100,5\n"
        "2023-11-16 19:15:47.5+01:00,200,5\n"
    )
    assert read_trace(path)["arrival_ms"].tolist() == [0.0, 1000.0]


def test_calibrate_names_the_column_and_row_of_a_value_that_is_not_a_number(tmp_path, capsys):
    table = tmp_path / "m.csv"
    table.write_text("nbytes,measured_ms\n1000,0.5\n2000,abc\n")
    assert main(["calibrate", str(table), "--name", "x", "--no-save", "--out", str(tmp_path / "c")]) == 2
    error = capsys.readouterr().err
    assert "m.csv, line 3: column 'measured_ms' holds 'abc', not a number" in error, error
    assert not (tmp_path / "c").exists()


def test_a_column_mixing_models_and_numbers_means_the_same_everywhere(entry_point):
    """Each entry of a bytes-per-token column is a model or a number of bytes per token, at every entry
    point (the replay always took such a mix; the numpy API and the facade refused it)."""
    tokens = [100, 200, 300]
    mix = ["llama-3.1-8b", 1000, "gpt-oss-20b"]
    expected = [perfmodel.handoff_delay_ms(t, 50.0, m) for t, m in zip(tokens, mix)]
    np.testing.assert_allclose(entry_point(tokens, 50.0, mix), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="apply to model names"):  # the shaping options are for the models only
        perfmodel.handoff_delay_ms(tokens, 50.0, mix, tp=2)


@pytest.mark.parametrize(
    "axis, values",
    [("link", ["ib-ndr", "ib-ndr"]), ("model", ["llama-3.1-8b", "llama-3.1-8b"]), ("scope", ["rank", "rank"])],
)
def test_a_grid_axis_given_a_value_twice_is_refused_by_sweeps_and_replay_grids_alike(axis, values):
    base = {"model": "llama-3.1-8b", "link": "ib-ndr", axis: values}
    with pytest.raises(InputError, match=f"axis {axis} has a repeated value"):
        sweep(num_input_tokens=[10], **base)
    with pytest.raises(InputError, match=f"axis {axis} has a repeated value"):
        perfmodel.replay_grid(perfmodel.synthetic_trace(20, 10, seed=0), **base)


def test_summaries_refuse_what_is_not_their_result_in_one_line():
    """summarize and summarize_ttft name what they were given and which summary takes it (a raw KeyError)."""
    from perfmodel import replay_ttft, summarize, summarize_ttft

    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [100, 200]})
    handoffs = replay_handoffs(trace, 50.0, 1000, contention="fifo")
    ttft = replay_ttft(trace, 50.0, 1000, contention="fifo")
    with pytest.raises(InputError, match=r"^replay: .*replay_ttft.*Fix: .*summarize_ttft"):
        summarize(ttft)
    with pytest.raises(InputError, match=r"^ttft: .*replay_handoffs.*Fix: .*summarize\("):
        summarize_ttft(handoffs)
    with pytest.raises(InputError, match=r"^replay: .*no column 'handoff_delay_ms'"):
        summarize(pd.DataFrame())
    with pytest.raises(InputError, match=r"^ttft: .*no column 'ttft_ms'"):
        summarize_ttft(pd.DataFrame({"x": [1]}))
    assert summarize(handoffs)["handoffs"] == 2 and summarize_ttft(ttft)["requests"] == 2


@pytest.mark.parametrize("contention", ["none", "fifo", "fair"])
def test_a_ttft_replay_whose_handoff_never_ends_is_refused_by_name(contention):
    """A subnormal bandwidth makes a transfer last inf ms: the TTFT replay names it, as the replay does (it said
    "a bug: please report it")."""
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [100]})
    from perfmodel import replay_ttft

    with pytest.raises(InputError, match=r"^kv_transfer_bandwidth: 5e-324 GB/s gives request 0 a transfer time of inf"):
        replay_ttft(trace, 5e-324, 1e6, contention=contention)


def test_a_transport_or_connector_where_a_link_goes_is_named_for_what_it_is():
    """A Transport (a cluster's data path) given as the link was refused as "not a number"; the error says what it
    is and where it goes."""
    transport, connector = perfmodel.Transport("x", efficiency=0.9), perfmodel.Connector("c", request_ms=1.0)
    for value, goes in ((transport, "transport="), (connector, "connector=")):
        with pytest.raises(InputError, match=rf"^kv_transfer_bandwidth: a {type(value).__name__} .*not a link.*{goes}"):
            handoff_delay_ms(1000, value, "llama-3.1-8b")
