"""A grid's refusal of one configuration counts and names the whole trace's rows (not the two-request sample's
that checks each configuration first) and names the configuration refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

import perfmodel
from perfmodel.errors import InputError


@pytest.fixture(scope="module")
def trace():
    return perfmodel.synthetic_trace(50, rate_per_s=10, seed=0)


def _layerwise_grid(trace, ready):
    return perfmodel.replay_grid(
        trace,
        model="llama-3.1-70b",
        link="ib-ndr",
        ready_ms=ready,
        overlap="layerwise",
        prefill_tokens_per_s=[1e9, 20_000],
        num_layers=80,
        contention="fifo",
        progress=False,
    )


@pytest.mark.parametrize("short", [[0, 1, 10, 11, 12], [10, 11, 12]], ids=["in the sample too", "beyond the sample"])
def test_replay_grid_counts_the_whole_traces_rows_and_names_the_configuration(trace, short):
    arrival = trace["arrival_ms"].to_numpy()
    ready = arrival + 1e6  # every prefill fits ...
    ready[short] = arrival[short] + 1.0  # ... but these, at 20,000 tokens/s
    with pytest.raises(InputError) as caught:
        _layerwise_grid(trace, ready)
    message = str(caught.value)
    assert f"at row {short[0]} ({len(short)} such rows)" in message, message
    assert "prefill_tokens_per_s=20000" in message and "prefill_tokens_per_s=1000000000.0" not in message, message
    assert caught.value.argument == "ready_ms, prefill_tokens_per_s"


def test_replay_grid_single_refusal_agrees_with_the_single_replay(trace):
    arrival = trace["arrival_ms"].to_numpy()
    ready = arrival + 100.0
    with pytest.raises(InputError) as one:
        perfmodel.replay_handoffs(
            trace,
            "ib-ndr",
            "llama-3.1-70b",
            ready_ms=ready,
            overlap="layerwise",
            prefill_tokens_per_s=20_000,
            num_layers=80,
            contention="fifo",
        )
    with pytest.raises(InputError) as grid:
        _layerwise_grid(trace, ready)
    counted = re.compile(r"at row \d+ \([\d,]+ such rows?\)")
    assert counted.search(str(one.value)).group() == counted.search(str(grid.value)).group()


def test_ttft_grid_names_the_configuration_refused(trace):
    big = trace.copy()
    big.loc[7, "num_input_tokens"] = 2_000_000
    with pytest.raises(InputError) as caught:
        perfmodel.ttft_grid(
            big,
            model="llama-3.1-8b",
            link="ib-ndr",
            prefill_tokens_per_s=40_000,
            decode_kv_tokens=[10_000_000, 1_000_000],
            progress=False,
        )
    message = str(caught.value)
    assert "decode_kv_tokens=1000000)" in message and "request 7" in message, message


def test_grid_of_valid_configurations_is_unchanged(trace):
    arrival = trace["arrival_ms"].to_numpy()
    grid = _layerwise_grid(trace, arrival + 1e6)
    assert len(grid) == 2 and np.isfinite(grid["p99_ms"]).all()


def test_the_command_line_says_the_layerwise_fix_as_its_flag(tmp_path, trace, capsys):
    from perfmodel.cli import main

    short = trace.assign(ready_ms=trace["arrival_ms"] + 1.0)
    short.to_csv(tmp_path / "ready.csv", index=False)
    code = main(
        [
            "trace",
            str(tmp_path / "ready.csv"),
            "--model",
            "llama-3.1-70b",
            "--link",
            "ib-ndr",
            "--overlap",
            "layerwise",
            "--prefill-tokens-per-s",
            "20000",
            "--num-layers",
            "80",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    said = capsys.readouterr().err
    assert code == 2 and "--column ready_ms=arrival_ms to take each arrival" in said, said
    assert "ready_ms='arrival_ms'" not in said and not (tmp_path / "out").exists()


def test_ttft_vs_rate_names_values_as_given(trace):
    import matplotlib

    matplotlib.use("Agg")
    import perfmodel.plotting as pp

    grid = perfmodel.ttft_grid(
        trace,
        link="ib-ndr",
        model="llama-3.1-8b",
        prefill_tokens_per_s=40_000,
        decode_kv_tokens=[None, 200_000],
        request_rate_per_s=[5, 10],
        progress=False,
    )
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots()  # (its own axes: the current ones may hold another test's lines)
    labels = [line.get_label() for line in pp.ttft_vs_rate(grid, by="decode_kv_tokens", ax=ax).get_lines()]
    plt.close(figure)
    assert labels[0] == "decode_kv_tokens=unbounded: p99 TTFT" and labels[3] == "decode_kv_tokens=200,000: p99 TTFT"


@pytest.mark.parametrize("text", ["1,024", "131,072", "1,024,000", " 8,016 ", "32,768", "128,256,512"])
def test_tokens_that_read_as_one_number_with_thousands_separators_are_refused(text):
    from perfmodel.cli._parsing import UsageError, parse_tokens

    with pytest.raises(UsageError, match=f"write {text.strip().replace(',', '')} for one count"):
        parse_tokens(text)


@pytest.mark.parametrize(
    ("text", "counts"),
    [("32, 768", [32, 768]), ("128, 256, 512", [128, 256, 512]), ("1k,8k", [1024, 8192]), ("100,1000", [100, 1000])],
)
def test_token_lists_that_are_no_number_stay_lists(text, counts):
    from perfmodel.cli._parsing import parse_tokens

    assert parse_tokens(text) == counts
