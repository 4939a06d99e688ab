"""Every command that takes a ``dataset:NAME`` refuses an unknown name (or a table where a trace goes) in one
line; ``perfmodel delay dataset:NAME`` reads the shipped trace; a grid axis refuses one value spelt twice."""

from __future__ import annotations

import pandas as pd
import pytest

import perfmodel
from perfmodel.cli import main


def _run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ("delay", "dataset:no-such", "--out", "x.csv", "--model", "llama-3.1-8b", "--link", "ib-ndr"),
        ("trace", "dataset:no-such", "--model", "llama-3.1-8b", "--link", "ib-ndr"),
        ("trace", "dataset:lmcache-nixl-iov", "--model", "llama-3.1-8b", "--link", "ib-ndr"),
        ("calibrate", "dataset:no-such", "--name", "mine"),
        ("trace", "DATASET:no-such", "--model", "llama-3.1-8b", "--link", "ib-ndr"),
    ],
)
def test_an_unknown_dataset_is_refused_by_name(capsys, tmp_path, argv):
    code, err = _run(capsys, *argv)
    assert code == 2
    assert "dataset:" in err and ("not a shipped" in err or "not a trace" in err), err
    assert "Traceback" not in err and "No such file" not in err


def test_delay_reads_a_shipped_trace(capsys, tmp_path):
    out = tmp_path / "delays.csv"
    code, err = _run(
        capsys,
        "delay",
        "dataset:mooncake-synthetic",
        "--out",
        str(out),
        "--model",
        "llama-3.1-8b",
        "--link",
        "ib-ndr",
        "--column",
        "num_input_tokens=input_length",
    )
    assert code == 0, err
    assert len(pd.read_csv(out)) == 3993


@pytest.mark.parametrize("name, column", [("mooncake-synthetic", "input_length"), ("azure-code-2023", "ContextTokens")])
def test_delay_reads_a_shipped_trace_in_its_formats_columns(capsys, tmp_path, name, column):
    """'no column num_input_tokens (it has ['timestamp', 'input_length', ...])' before, though --help says
    dataset:NAME works: the prompt lengths are the format's column, as perfmodel trace reads them."""
    out = tmp_path / "delays.csv"
    code, err = _run(
        capsys, "delay", f"dataset:{name}", "--out", str(out), "--model", "llama-3.1-70b", "--link", "ib-ndr"
    )
    assert code == 0, err
    delays = pd.read_csv(out)
    trace = perfmodel.read_trace(perfmodel.datasets.path(name))
    expected = perfmodel.handoff_delay_ms(trace["num_input_tokens"], "ib-ndr", "llama-3.1-70b")
    assert delays[column].tolist() == trace["num_input_tokens"].tolist()
    assert delays["handoff_delay_ms"].to_numpy() == pytest.approx(expected, rel=1e-12)


def test_calibrate_refuses_a_shipped_trace_by_name(capsys, tmp_path):
    code, err = _run(capsys, "calibrate", "dataset:mooncake-synthetic", "--name", "mine", "--out", str(tmp_path / "c"))
    assert code == 2 and "is a trace, not a table of measurements" in err and "dataset:fastdeploy" in err, err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "axis, values",
    [
        ("link", ["ib-ndr", "IB-NDR"]),
        ("link", ["ib-ndr", " ib-ndr "]),
        ("link", ["ib-ndr", "1x ib-ndr"]),
        ("decode_workers", [1, 1.0]),
        ("contention", ["fifo", "FIFO"]),
    ],
)
def test_a_grid_axis_refuses_one_value_spelt_twice(axis, values):
    trace = perfmodel.synthetic_trace(20, 10, seed=0)
    base = {"model": "llama-3.1-8b", "link": "ib-ndr"}
    with pytest.raises(ValueError, match="repeated value"):
        perfmodel.replay_grid(trace, progress=False, **{**base, axis: values})


def test_a_cli_grid_refuses_one_link_spelt_twice(capsys, tmp_path):
    code, err = _run(
        capsys,
        "trace",
        "dataset:mooncake-synthetic",
        "--model",
        "llama-3.1-8b",
        "--out",
        str(tmp_path / "out"),
        "--grid",
        "link=ib-ndr,IB-NDR",
    )
    assert code == 2 and "repeated value" in err, err


def test_a_sweep_axis_refuses_one_value_spelt_twice():
    with pytest.raises(ValueError, match="repeated value"):
        perfmodel.sweep(num_input_tokens=[1000], model="llama-3.1-8b", link=["ib-ndr", "IB-NDR"])
