"""The command line against a hostile tester's report: flags given twice, flags a grid would silently drop,
malformed and empty traces, figures that cannot be drawn, and the words of its errors. Each test runs
``perfmodel`` in-process and fails on the behaviour the report found."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from perfmodel.cli._main import main


def _csv(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def t1(tmp_path: Path) -> Path:
    return _csv(tmp_path, "t1.csv", "arrival_ms,num_input_tokens,num_output_tokens\n0,1000,10\n0,2000,10\n5,1000,10\n")


def _trace(path: Path, *extra: str) -> int:
    """``perfmodel trace PATH`` at 1e6 bytes per token over 1 GB/s, with ``extra`` arguments; its exit code."""
    return main(["trace", str(path), "--kv-bytes-per-token", "1e6", "--bandwidth", "1", *extra])


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr (and nothing else there)."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- A1: a single-value flag given twice is refused, on every command --------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag", "values"),
    [
        (
            ["trace", "{t1}", "--kv-bytes-per-token", "1e6", "--bandwidth", "1", "--bandwidth", "2"],
            "--bandwidth",
            "1, 2",
        ),
        (
            [
                "trace",
                "{t1}",
                "--kv-bytes-per-token",
                "1e6",
                "--bandwidth",
                "1",
                "--contention",
                "fifo",
                "--contention",
                "none",
            ],
            "--contention",
            "fifo, none",
        ),
        (
            ["sweep", "--link", "nvlink4", "--link", "ib-ndr", "--model", "llama-3.1-70b", "--tokens", "1k"],
            "--link",
            "nvlink4, ib-ndr",
        ),
        (
            ["sweep", "--bandwidth", "1", "--kv-bytes-per-token", "1000000", "--tokens", "1k", "--tokens", "2k"],
            "--tokens",
            "1k, 2k",
        ),
        (
            [
                "trace",
                "{t1}",
                "--kv-bytes-per-token",
                "1e6",
                "--bandwidth",
                "1",
                "--contention",
                "fifo",
                "--grid",
                "links=1,2",
                "--budget-ms",
                "1500",
                "--budget-ms",
                "5000",
            ],
            "--budget-ms",
            "1500, 5000",
        ),
        (
            ["ttft", "{t1}", "--kv-bytes-per-token", "1e6", "--bandwidth", "1", "--rate", "5", "--rate", "10"],
            "--rate",
            "5, 10",
        ),
        (
            ["delay", "{t1}", "--kv-bytes-per-token", "1e6", "--bandwidth", "1", "--bandwidth", "2"],
            "--bandwidth",
            "1, 2",
        ),
    ],
)
def test_a_flag_given_twice_is_refused(tmp_path, t1, capsys, argv, flag, values):
    out = tmp_path / "out"
    argv = [a.format(t1=t1) for a in argv] + (["--out", str(out)] if argv[0] != "ttft" else [])
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{flag} given twice ({values}): give it once" in line, line
    assert not out.exists()


def test_flags_meant_to_repeat_still_add_up(tmp_path, t1, capsys):
    out = tmp_path / "g"
    assert _trace(t1, "--contention", "fifo", "--grid", "links=1,2", "--grid", "latency_ms=0,1", "--out", str(out)) == 0
    assert len(pd.read_csv(out / "grid.csv")) == 4
    renamed = _csv(tmp_path, "r.csv", "t,n\n0,1000\n5,2000\n")
    assert (
        main(
            [
                "trace",
                str(renamed),
                "--column",
                "arrival_ms=t",
                "--column",
                "num_input_tokens=n",
                "--kv-bytes-per-token",
                "1e6",
                "--bandwidth",
                "1",
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )


# --- A6: a cluster field's flag and the grid axis of that field ----------------------------------------------


def test_a_cluster_field_flag_and_its_grid_axis_are_refused(tmp_path, t1, capsys):
    out = tmp_path / "cl"
    assert (
        main(
            [
                "trace",
                str(t1),
                "--model",
                "llama-3.1-70b",
                "--cluster",
                "hgx-h100-8x400g",
                "--nics-per-node",
                "2",
                "--tp",
                "8",
                "--contention",
                "fair",
                "--grid",
                "nics_per_node=1,4",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    line = _error(capsys)
    assert "--grid nics_per_node=... and its flag --nics-per-node are both given" in line, line
    assert not out.exists()


# --- B1: --skip-bad-lines skips a line with more fields than the header ---------------------------------------


def test_without_long_lines_leaves_out_and_counts_long_records(tmp_path):
    from perfmodel.ground.tables import without_long_lines

    bad = _csv(tmp_path, "bad.csv", 'a,b,c\n0,1000,1\n7,1000,1,9\n\n"x,y",2,3\n4,5\n1,2,3,4,5\n')
    text, left_out = without_long_lines(bad)
    assert left_out == [1, 4]  # (the records' positions, the blank line not counted)
    assert pd.read_csv(text)["a"].tolist() == ["0", "x,y", "4"]


def test_skip_bad_lines_skips_a_line_with_too_many_fields(tmp_path, capsys):
    bad = _csv(tmp_path, "bad2.csv", "arrival_ms,num_input_tokens,num_output_tokens\n0,1000,1\n7,1000,1,9\n")
    out = tmp_path / "n5"
    assert _trace(bad, "--skip-bad-lines", "--out", str(out)) == 0
    assert "skipped 1 malformed line" in capsys.readouterr().err
    assert len(pd.read_csv(out / "replay.csv")) == 1


def test_read_trace_skips_a_line_with_too_many_fields(tmp_path):
    import perfmodel

    bad = _csv(tmp_path, "bad2.csv", "arrival_ms,num_input_tokens,num_output_tokens\n0,1000,1\n7,1000,1,9\n3,500,1\n")
    with pytest.warns(UserWarning, match="skipped 1 malformed line"):
        trace = perfmodel.read_trace(bad, errors="skip")
    assert trace["num_input_tokens"].tolist() == [1000, 500] and trace.attrs["skipped_lines"] == 1


# --- B3: an empty trace -------------------------------------------------------------------------------------


def test_an_empty_trace_is_refused_up_front(tmp_path, capsys):
    empty = _csv(tmp_path, "empty.csv", "arrival_ms,num_input_tokens,num_output_tokens\n")
    out = tmp_path / "e1"
    assert _trace(empty, "--out", str(out)) == 2
    line = _error(capsys)
    assert f"{empty} has no requests" in line and "delay_cdf" not in line, line
    assert not out.exists()


# --- B4: sweep writes its table when the heatmap cannot be drawn ---------------------------------------------


@pytest.mark.parametrize("fork", [False, True], ids=["in-process", "forked"])
@pytest.mark.parametrize(
    "how",
    [
        ["--bandwidth", "1", "--kv-bytes-per-token", "1000000", "--cache-hit", "1"],
        ["--kv-bytes-per-token", "0", "--bandwidth", "1"],
    ],
)
def test_sweep_writes_the_table_when_the_heatmap_cannot_be_drawn(tmp_path, capsys, monkeypatch, how, fork):
    import perfmodel.cli._draw as draw

    monkeypatch.setattr(draw, "_fork_is_safe_and_useful", lambda: fork)
    out = tmp_path / "s6"
    assert main(["sweep", *how, "--tokens", "1k,2k", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert (out / "sweep.csv").exists() and not (out / "heatmap.png").exists()
    warnings = [line for line in captured.err.splitlines() if "heatmap.png not drawn" in line]
    assert len(warnings) == 1 and warnings[0].startswith("perfmodel sweep: warning: "), captured.err
    assert "Fix:" not in warnings[0] and "error" not in captured.err
    assert "heatmap.png" not in captured.out.splitlines()[-1] and "sweep.csv (2 rows)" in captured.out


# --- B5: a replay whose every delay is 0 ms ------------------------------------------------------------------


def test_a_replay_of_zero_delays_draws_no_empty_figure(tmp_path, t1, capsys):
    out = tmp_path / "o6"
    assert main(["trace", str(t1), "--kv-bytes-per-token", "1e6", "--bandwidth", "0", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "UserWarning" not in captured.err and "replay.py" not in captured.err, captured.err
    said = [line for line in captured.err.splitlines() if "replay.png" in line]
    assert len(said) == 1 and said[0].startswith("perfmodel trace: warning: replay.png not drawn"), captured.err
    assert not (out / "replay.png").exists() and (out / "replay.csv").exists()
    assert "replay.png" not in captured.out.splitlines()[-1]


def test_delay_cdf_lists_only_drawn_lines():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import perfmodel.plotting as pp

    fig, ax = plt.subplots()
    with pytest.warns(UserWarning, match="zeros"):
        pp.delay_cdf({"zeros": np.zeros(5), "some": np.array([1.0, 2.0, 0.0])}, ax=ax)
    assert [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()] == ["some (33.3% at 0 ms)"]
    plt.close(fig)


# --- D: the command line's words --------------------------------------------------------------------------


def test_a_grid_value_error_names_the_axis_once(tmp_path, t1, capsys):
    assert _trace(t1, "--grid", "latency_ms=-1,1", "--out", str(tmp_path / "g")) == 2
    line = _error(capsys)
    assert line.count("--grid latency_ms") == 1, line


def test_a_grid_value_refused_by_the_model_names_the_grid_not_a_flag(tmp_path, t1, capsys):
    assert _trace(t1, "--grid", "latency_ms=inf,1", "--out", str(tmp_path / "g")) == 2
    line = _error(capsys)
    assert "--grid latency_ms" in line and "--latency-ms" not in line, line


@pytest.mark.parametrize(("flag", "value"), [("--kv-bytes-per-token", "-1"), ("--blocks-per-message", "1.5")])
def test_a_single_value_flag_is_not_reported_as_rows(tmp_path, t1, capsys, flag, value):
    argv = ["trace", str(t1), "--kv-bytes-per-token", "1e6", "--bandwidth", "1", "--out", str(tmp_path / "o")]
    if flag == "--kv-bytes-per-token":
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    assert main(argv) == 2
    line = _error(capsys)
    assert "row" not in line and flag in line and value in line, line


def test_a_missing_input_file_is_said_as_missing(tmp_path, capsys):
    folder = tmp_path / "u4"
    assert (
        main(["trace", str(folder / "t.csv"), "--kv-bytes-per-token", "1e6", "--bandwidth", "1", "--out", str(folder)])
        == 2
    )
    line = _error(capsys)
    assert "no such file" in line and "contains the input" not in line, line


def test_an_edited_output_is_not_said_both_written_and_not_written(tmp_path, capsys):
    out = tmp_path / "s"
    argv = ["sweep", "--bandwidth", "1", "--kv-bytes-per-token", "1000000", "--tokens", "1k", "--out", str(out)]
    assert main(argv) == 0
    with open(out / "sweep.csv", "a") as file:
        file.write("1,2,3\n")
    capsys.readouterr()
    assert main(argv) == 2
    line = _error(capsys)
    assert "which perfmodel sweep did not write, or changed since it wrote them" in line, line


def test_an_api_fix_is_said_with_the_flag(tmp_path, t1, capsys):
    assert (
        main(
            [
                "trace",
                str(t1),
                "--kv-bytes-per-token",
                "1e6",
                "--cluster",
                "hgx-h100-8x400g",
                "--contention",
                "fifo",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    line = _error(capsys)
    assert "--contention fair" in line and "contention='fair'" not in line, line


def test_a_sweep_value_given_twice_is_said_as_the_flag(tmp_path, capsys):
    assert (
        main(
            [
                "sweep",
                "--bandwidth",
                "1",
                "1",
                "--kv-bytes-per-token",
                "1000000",
                "--tokens",
                "1k",
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 2
    )
    line = _error(capsys)
    assert "--bandwidth: 1 is given twice" in line and "df[" not in line, line
