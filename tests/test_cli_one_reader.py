"""One input, one way to read it on every command: the bytes per token and the bandwidth go through the input
table's reader on ``delay``, ``trace``, ``ttft`` and ``sweep`` alike (``1e6`` was refused by ``sweep``, a negative
bandwidth reached the API on some commands and not others), and ``ttft``'s memory flags read token counts as
``--tokens`` does (``32k``). Each test runs ``perfmodel`` in-process."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from perfmodel.cli._main import main


@pytest.fixture
def trace_csv(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("arrival_ms,num_input_tokens,num_output_tokens\n0,1000,10\n0,2000,10\n5,1000,10\n")
    return path


def _argv(command: str, trace: Path, out: Path, *flags: str) -> list[str]:
    """A run of ``command`` with ``flags`` writing to ``out`` (sweep takes no trace)."""
    source = [] if command == "sweep" else [str(trace)]
    return [command, *source, *flags, "--out", str(out)]


def _exit_code(argv: list[str]) -> int:
    """``perfmodel ARGV``'s exit code (argparse's refusals exit, the rest return)."""
    try:
        return main(argv)
    except SystemExit as stop:
        return int(stop.code or 0)


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


OUTPUTS = {"delay": "delays.csv", "trace": "replay", "ttft": "ttft", "sweep": "sweep"}


@pytest.mark.parametrize("command", ["delay", "trace", "ttft", "sweep"])
def test_bytes_per_token_in_exponent_form_is_read_as_the_number(command: str, trace_csv: Path, tmp_path: Path) -> None:
    """``--kv-bytes-per-token 1e6`` prices the same bytes as ``1000000`` on every command."""
    tables = []
    for spelled in ("1e6", "1000000"):
        out = tmp_path / spelled / OUTPUTS[command]
        bandwidth = ["--bandwidth", "1"] if command != "sweep" else ["--bandwidth", "1", "--tokens", "1k"]
        assert main(_argv(command, trace_csv, out, "--kv-bytes-per-token", spelled, *bandwidth)) == 0
        table = out if out.suffix else next(p for p in sorted(out.iterdir()) if p.suffix == ".csv")
        tables.append(pd.read_csv(table))
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_sweep_keeps_whole_bytes_per_token_whole(tmp_path: Path, trace_csv: Path) -> None:
    """1e6 bytes per token is the whole number 1000000 in sweep.csv, as 131072 is (a fraction stays a fraction)."""
    out = tmp_path / "s"
    argv = _argv(
        "sweep", trace_csv, out, "--kv-bytes-per-token", "1e6", "131072", "--bandwidth", "50", "--tokens", "1k"
    )
    assert main(argv) == 0
    text = (out / "sweep.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in text[1:]] == ["1000000", "131072"]
    out = tmp_path / "f"
    argv = _argv("sweep", trace_csv, out, "--kv-bytes-per-token", "1.5", "--bandwidth", "50", "--tokens", "1k")
    assert main(argv) == 0
    assert (out / "sweep.csv").read_text().splitlines()[1].split(",")[0] == "1.5"


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--kv-bytes-per-token", "-1", "KV bytes per token are finite numbers >= 0"),
        ("--kv-bytes-per-token", "nan", "KV bytes per token are finite numbers >= 0"),
        ("--bandwidth", "-1", "bandwidth is in decimal GB/s and >= 0"),
    ],
)
@pytest.mark.parametrize("command", ["delay", "trace", "ttft", "sweep"])
def test_a_bad_value_gets_the_same_rule_on_every_command(
    command: str, flag: str, value: str, rule: str, trace_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same value of the same flag is refused in the same words everywhere, before any work."""
    if command == "sweep" and flag == "--bandwidth":
        pytest.skip("sweep's --bandwidth is an axis of positive values (a log axis): its own rule")
    other = ["--bandwidth", "1"] if flag != "--bandwidth" else ["--kv-bytes-per-token", "1000"]
    out = tmp_path / "out"
    assert _exit_code(_argv(command, trace_csv, out, flag, value, *other)) == 2
    line = _one_error(capsys)
    assert flag in line and value in line and rule in line, line
    assert not out.exists()


def test_ttft_memory_flags_read_token_counts_like_tokens(trace_csv: Path, tmp_path: Path) -> None:
    """``--prefill-kv-tokens 4k --decode-kv-tokens 1M`` is ``4096`` and ``1048576``."""
    tables = []
    for prefill, decode in (("4k", "1M"), ("4096", "1048576")):
        out = tmp_path / prefill
        argv = _argv("ttft", trace_csv, out, "--kv-bytes-per-token", "1e6", "--bandwidth", "1",
                     "--prefill-kv-tokens", prefill, "--decode-kv-tokens", decode, "--prefill-ms", "1")  # fmt: skip
        assert main(argv) == 0
        tables.append(pd.read_csv(out / "ttft.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_ttft_memory_fix_names_the_flag(trace_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A prefill memory too small for a prompt: the fix names ``--prefill-kv-tokens``, with the value it needs."""
    argv = _argv("ttft", trace_csv, tmp_path / "o", "--kv-bytes-per-token", "1e6", "--bandwidth", "1",
                 "--prefill-kv-tokens", "1k")  # fmt: skip
    assert _exit_code(argv) == 2
    line = _one_error(capsys)
    assert "Fix: pass --prefill-kv-tokens >= 2,000" in line, line


# --- options that would change nothing are said, not silently ignored --------------------------------------


def test_links_under_no_contention_warn_that_they_change_nothing() -> None:
    """``links=4`` with ``contention="none"`` (the default) replays each handoff alone: the same table as one link,
    and a warning that says so; with a queue the links count."""
    import perfmodel

    trace = perfmodel.synthetic_trace(30, rate_per_s=10, seed=0)
    keywords = dict(link="ib-ndr", model="llama-3.1-8b")
    with pytest.warns(UserWarning, match=r"links=4 has no effect under contention='none'.*contention='fifo'"):
        four = perfmodel.replay_handoffs(trace, links=4, **keywords)
    pd.testing.assert_frame_equal(four, perfmodel.replay_handoffs(trace, links=1, **keywords))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        perfmodel.replay_handoffs(trace, links=4, contention="fifo", **keywords)


def test_bounded_caches_without_hashes_warn_that_they_change_nothing(trace_csv: Path) -> None:
    """``decode_cache_blocks`` on a trace without hash ids: no block ever enters a cache, so it is said."""
    import perfmodel

    trace = perfmodel.synthetic_trace(30, rate_per_s=10, seed=0).drop(columns="hash_ids")
    with pytest.warns(UserWarning, match=r"decode_cache_blocks=10 has no effect: the trace has no hash_ids"):
        perfmodel.replay_handoffs(trace, link="ib-ndr", model="llama-3.1-8b", decode_cache_blocks=10)


def test_a_grid_axis_given_a_value_twice_is_named_by_its_flag(
    trace_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--grid links=3,1,2,2`` is refused as the ``--grid links`` axis, not as ``replay_grid``, the API function
    the user did not call."""
    argv = ["trace", str(trace_csv), "--kv-bytes-per-token", "1e6", "--bandwidth", "1", "--contention", "fifo",
            "--grid", "links=3,1,2,2", "--out", str(tmp_path / "g")]  # fmt: skip
    assert _exit_code(argv) == 2
    line = _one_error(capsys)
    assert line.startswith("perfmodel trace: error: --grid links: axis links has a repeated value"), line
    assert "replay_grid" not in line and not (tmp_path / "g").exists()
