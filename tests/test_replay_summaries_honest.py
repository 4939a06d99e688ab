"""A replay's summary and messages against a hostile tester's report (h5: findings 3, 5, 6, 8, 9, 13):
``link_utilisation`` counts the time the links are held (checked by hand), the command line's fixes name
the failing command's own flags, and a replay's refusals give the replay's own rules."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.cli._main import main
from perfmodel.errors import InputError


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --- 5: under fair sharing the links are held for the bytes only ----------------------------------------------

#: Three handoffs at 0 ms on one 1 GB/s link, 1 ms of latency each: 0.05 MB, 8.05 MB and 0.05 MB.
_THREE = pd.DataFrame({"arrival_ms": [0.0, 0.0, 0.0], "num_input_tokens": [0, 5, 0]})
_THREE_CONFIG = dict(latency_ms=1.0, state_bytes=50_000, mode="destination_missing", block_size=4)


def test_fair_utilisation_counts_the_bytes_time_only() -> None:
    """By hand: each pays 1 ms of latency holding no share; from 1 ms the three share the link, the small two
    end at 1.15 ms, the large one at 9.15 ms. The link moves bytes from 1 to 9.15 ms (8.15 MB at 1 GB/s): of
    the span 0-9.15 ms it is held 8.15 ms."""
    replay = perfmodel.replay_handoffs(_THREE, 1.0, 1e6, contention="fair", **_THREE_CONFIG)
    assert replay["end_ms"].tolist() == pytest.approx([1.15, 9.15, 1.15])
    assert perfmodel.summarize(replay)["link_utilisation"] == pytest.approx(8.15 / 9.15, rel=1e-12)


def test_fair_utilisation_with_per_block_costs_stays_at_most_one() -> None:
    """Per-block work is setup under fair sharing, as latency is: one link, never more than 1."""
    trace = pd.DataFrame({"arrival_ms": [0.0] * 4, "num_input_tokens": [64, 4, 4, 4]})
    replay = perfmodel.replay_handoffs(trace, 1.0, 1e6, contention="fair", per_block_ms=2.0, block_size=4)
    busy = replay["transfer_bytes"].sum() / 1e6  # ms of bytes at 1 GB/s
    span = replay["end_ms"].max() - replay["start_ms"].min()
    assert perfmodel.summarize(replay)["link_utilisation"] == pytest.approx(busy / span, rel=1e-12)
    assert perfmodel.summarize(replay)["link_utilisation"] <= 1.0


def test_fifo_utilisation_counts_the_whole_transfer() -> None:
    """Under fifo the link is held for the latency too: 1.05, 9.05 and 1.05 ms back to back, 11.15 ms of
    11.15: the link was busy throughout."""
    replay = perfmodel.replay_handoffs(_THREE, 1.0, 1e6, contention="fifo", **_THREE_CONFIG)
    assert replay["transfer_ms"].tolist() == pytest.approx([1.05, 9.05, 1.05])
    assert perfmodel.summarize(replay)["link_utilisation"] == pytest.approx(1.0, rel=1e-12)


def test_fair_utilisation_on_two_links_divides_by_the_links() -> None:
    """Two handoffs of 10 MB at 0 ms, 5 ms of latency each. Two links: each moves alone on its own link from 5
    to 15 ms: 20 ms of bytes over 2 links x 15 ms. One link: they share it from 5 to 25 ms: 20 ms over 25."""
    trace = pd.DataFrame({"arrival_ms": [0.0, 0.0], "num_input_tokens": [10, 10]})
    for links, expected in ((1, 20 / 25), (2, 20 / 30)):
        replay = perfmodel.replay_handoffs(trace, 1.0, 1e6, contention="fair", links=links, latency_ms=5.0)
        assert perfmodel.summarize(replay)["link_utilisation"] == pytest.approx(expected, rel=1e-12)


# --- 6: under contention="none" the links count divides nothing -----------------------------------------------


@pytest.mark.filterwarnings("ignore:links=")
def test_none_utilisation_does_not_depend_on_links() -> None:
    """Four handoffs of 100 ms at 0 ms, each alone: on average 4 in flight over the 100 ms span, whatever
    ``links`` (which the warning says has no effect)."""
    trace = pd.DataFrame({"arrival_ms": [0.0] * 4, "num_input_tokens": [100] * 4})
    figures = [
        perfmodel.summarize(perfmodel.replay_handoffs(trace, 1.0, 1e6, contention="none", links=n))["link_utilisation"]
        for n in (1, 4)
    ]
    assert figures == pytest.approx([4.0, 4.0])


def test_summarize_docstring_says_what_the_figure_is_under_each_contention() -> None:
    doc = " ".join((perfmodel.summarize.__doc__ or "").split())
    assert 'contention="none"' in doc or "contention='none'" in doc
    assert "in flight" in doc  # (what the figure is when each handoff is alone)
    assert "fair" in doc and "fixed costs" in doc


# --- 13: an empty replay's figures are all NaN --------------------------------------------------------------------


def test_empty_replay_utilisation_is_nan() -> None:
    trace = pd.DataFrame({"arrival_ms": np.array([], float), "num_input_tokens": np.array([], np.int64)})
    summary = perfmodel.summarize(perfmodel.replay_handoffs(trace, 1.0, 1e6, contention="fifo"))
    assert math.isnan(summary["p99_ms"])
    assert math.isnan(summary["link_utilisation"])


def test_fifo_docstring_says_the_link_free_soonest() -> None:
    """The kernel takes the link free soonest (ties: the lowest), not "the first free one": link 1 over an idle
    link 0 once link 0 is busy longer."""
    doc = " ".join((perfmodel.replay_handoffs.__doc__ or "").split())
    assert "first free one" not in doc
    assert "free soonest" in doc and "lowest" in doc


# --- 8: the identity handoff = queue + transfer holds only without layer-wise streaming -----------------------


def test_layerwise_identity_is_documented() -> None:
    trace = pd.DataFrame({"arrival_ms": [1000.0], "num_input_tokens": [100]})
    replay = perfmodel.replay_handoffs(trace, 1.0, 1e6, overlap="layerwise", num_layers=4, prefill_ms=60.0)
    row = replay.iloc[0]
    assert row["handoff_delay_ms"] == pytest.approx(55.0)  # max(100 / 4, 100 - 60 * 3 / 4)
    assert row["handoff_delay_ms"] != row["queue_ms"] + row["transfer_ms"]
    assert row["handoff_delay_ms"] == pytest.approx(row["end_ms"] - 1000.0)  # from the prefill's end
    doc = " ".join((perfmodel.replay_handoffs.__doc__ or "").split())
    said = doc[doc.index("``handoff_delay_ms``") :][:600]
    assert "layerwise" in said and "end_ms" in said


# --- 9: a replay's refusal of a bandwidth gives the replay's own rule ------------------------------------------


@pytest.mark.parametrize("bandwidth", [-1.0, float("nan"), float("inf"), -float("inf")])
def test_replay_bandwidth_refusal_offers_only_what_a_replay_takes(bandwidth: float) -> None:
    trace = pd.DataFrame({"arrival_ms": [0.0], "num_input_tokens": [10]})
    with pytest.raises(InputError) as caught:
        perfmodel.replay_handoffs(trace, bandwidth, 1e6)
    text = str(caught.value)
    assert caught.value.where == "kv_transfer_bandwidth"
    assert "finite" in text and ">= 0" in text and "fallback_delay_ms" in text
    assert "NaN:" not in text and "free transfer" not in text and "no delay modeled" not in text


# --- 3: the command line's fixes name the flags of the command that failed ------------------------------------


def test_trace_malformed_row_names_skip_bad_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g6.csv"
    path.write_text("arrival_ms,num_input_tokens,num_output_tokens\n0,10,3\n5,20,NA\n")
    args = ["trace", str(path), "--bandwidth", "1", "--kv-bytes-per-token", "1e6", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    line = _error(capsys)
    assert "--skip-bad-lines" in line
    assert "--errors" not in line and "errors=" not in line
    assert "(--skip-bad-lines)" not in line  # (said once)
    assert main([*args, "--skip-bad-lines"]) == 0  # the fix it gives works


def test_ttft_malformed_line_names_skip_bad_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1}\n{"timestamp": 5, "input_len\n')
    assert main(["ttft", str(path), "--bandwidth", "1", "--kv-bytes-per-token", "1e6"]) == 2
    line = _error(capsys)
    assert "--skip-bad-lines" in line and "--errors" not in line


def test_fair_at_bandwidth_zero_names_the_fallback_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival_ms,num_input_tokens\n0,10\n")
    args = ["trace", str(path), "--bandwidth", "0", "--kv-bytes-per-token", "1e6", "--contention", "fair"]
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert "--fallback-delay-ms" in line
    assert not re.search(r"(?<![-\w])fallback_delay_ms", line.split("Fix:")[1])


def test_flags_are_the_failing_commands_own() -> None:
    """Each command's words for the API's names come from its own parser: ``errors='skip'`` is trace's and
    ttft's ``--skip-bad-lines``; delay's ``--errors`` is delay's alone; a flag another command has is not
    offered."""
    from perfmodel.cli._main import build_parser
    from perfmodel.cli._parsing import command_flags, in_flags

    required = {"trace": ["t.csv", "--out", "o"], "ttft": ["t.csv"], "delay": ["t.csv", "--out", "o.csv"]}

    def as_flags(text: str, command: str) -> str:  # (the failing command's own flags, from its own parser)
        parsed = build_parser().parse_args([command, *required[command]])
        return in_flags(text, command_flags(parsed.command_parser))

    skip = "repair the line, or pass errors='skip' (--skip-bad-lines) to leave such lines out"
    for command in ("trace", "ttft"):
        assert as_flags(skip, command) == "repair the line, or pass --skip-bad-lines to leave such lines out"
    assert as_flags("pass decode_cache_blocks=4", "trace") == "pass --cache-blocks 4"
    assert as_flags("with fallback_delay_ms", "trace") == "with --fallback-delay-ms"
    assert as_flags("pass errors='coerce'", "delay") == "pass --errors coerce"
    assert as_flags("pass chunk_rows=5", "trace") == "pass chunk_rows=5"  # (delay's flag, not trace's)
    assert as_flags("the trace column 'num_input_tokens'", "trace") == "the trace column 'num_input_tokens'"


def test_a_replay_at_0_gb_s_says_it_charges_no_delay() -> None:
    """A bandwidth of 0 takes upstream's fallback delay, 0.0 ms unless given: every delay 0 ms, as if the link were
    infinitely fast, which is said; a fallback given is not."""
    import warnings

    trace = pd.DataFrame({"arrival_ms": [0.0, 1.0], "num_input_tokens": [100, 200]})
    with pytest.warns(UserWarning, match="a bandwidth of 0 models no transfer: each handoff takes fallback_delay_ms"):
        replay = perfmodel.replay_handoffs(trace, 0.0, 1000)
    assert replay["handoff_delay_ms"].tolist() == [0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert perfmodel.replay_handoffs(trace, 0.0, 1000, fallback_delay_ms=5.0)["handoff_delay_ms"].tolist() == [
            5.0,
            5.0,
        ]
