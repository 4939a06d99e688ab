"""Sizing answers say the question they answer and refuse bad input in one line: a one-valued grid axis of the
command line (scope, contention) is that value, and max_rate_for_ttft checks the trace before reading its rate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.cli import main
from perfmodel.errors import InputError

SERVING = dict(link="ib-ndr", model="llama-3.1-8b", prefill_tokens_per_s=10_000)


@pytest.mark.parametrize(
    ("grid", "said"),
    [
        (["links=1,2,3", "scope=rank"], "one rank's bytes of each request (scope rank), over N links, within 50 ms"),
        (["links=1,2,3", "scope=group"], "the whole group's bytes of each request (scope group), over N links"),
        (["links=1,2,3", "contention=fifo"], "transfers queued first come first served on each link"),
    ],
)
def test_a_one_valued_grid_axis_is_the_question_it_answers(tmp_path, capsys, grid, said):
    contention = [] if any(g.startswith("contention") for g in grid) else ["--contention", "fifo"]
    code = main(
        ["trace", "dataset:azure-code-2023", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tp", "8",
         *contention, "--grid", *grid, "--budget-ms", "50", "--out", str(tmp_path / "out")]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and said in out, out
    assert "['" not in out, out


def test_the_answer_follows_the_scope_of_a_one_valued_axis(tmp_path, capsys):
    """One rank's bytes of TP8 fit one 400G link within 50 ms at p99 on this trace; the group's do not."""
    answers = {}
    for scope in ("rank", "group"):
        main(["trace", "dataset:azure-code-2023", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tp", "8",
              "--contention", "fifo", "--grid", "links=1,2,3", f"scope={scope}", "--budget-ms", "50",
              "--out", str(tmp_path / scope)])  # fmt: skip
        answers[scope] = capsys.readouterr().out.strip().splitlines()[-3:]
    assert any("within 50 ms: 1 link " in line and "scope rank" in line for line in answers["rank"])
    assert not any("within 50 ms: 1 link " in line for line in answers["group"])


@pytest.mark.parametrize(
    ("trace", "said"),
    [
        (pd.DataFrame({"arrival_ms": [0.0, np.nan, 9.0], "num_input_tokens": [1, 2, 3]}), "got nan at row 1"),
        (pd.DataFrame({"arrival_ms": [0.0, np.inf, 9.0], "num_input_tokens": [1, 2, 3]}), "got inf at row 1"),
        (pd.DataFrame({"num_input_tokens": [1, 2, 3]}), "has no 'arrival_ms' column"),
        ([1, 2, 3], "expected a pandas DataFrame, got list"),
        (pd.DataFrame({"arrival_ms": [5.0, 5.0], "num_input_tokens": [1, 2]}), "^trace: its requests all arrive"),
    ],
)
def test_max_rate_for_ttft_checks_the_trace_first(trace, said):
    with pytest.raises(InputError, match=said):
        perfmodel.max_rate_for_ttft(trace, ttft_budget_ms=100, **SERVING)


@pytest.mark.parametrize(
    ("keywords", "where"),
    [
        (dict(rate_range_per_s=(1, 5, 9)), "rate_range_per_s"),
        (dict(rate_range_per_s=("1", "5")), "rate_range_per_s"),
        (dict(rate_range_per_s=(5, 1)), "rate_range_per_s"),
        (dict(rate_range_per_s=5), "rate_range_per_s"),
        (dict(ttft_budget_ms=True), "ttft_budget_ms"),
    ],
)
def test_max_rate_for_ttft_refuses_bad_ranges_and_budgets_in_one_line(keywords, where):
    keywords = {"ttft_budget_ms": 100, **keywords}
    with pytest.raises(InputError, match=f"^{where}: "):
        perfmodel.max_rate_for_ttft(perfmodel.synthetic_trace(50, 10, seed=0), **keywords, **SERVING)


def test_fewest_for_ttft_refuses_a_boolean_budget():
    with pytest.raises(InputError, match="^ttft_budget_ms: "):
        perfmodel.fewest_for_ttft(perfmodel.synthetic_trace(50, 10, seed=0), ttft_budget_ms=True, **SERVING)


def test_ttft_replays_refuse_a_list_for_a_trace():
    with pytest.raises(InputError, match="expected a pandas DataFrame, got list"):
        perfmodel.replay_ttft([1, 2, 3], "ib-ndr", "llama-3.1-8b", prefill_tokens_per_s=1e4)


def test_a_reversed_rate_range_is_shown_as_given():
    with pytest.raises(InputError, match=r"lowest < highest < inf, got \(5, 1\)"):
        perfmodel.max_rate_for_ttft(perfmodel.synthetic_trace(50, 10, seed=0), ttft_budget_ms=100,
                                    rate_range_per_s=(5, 1), **SERVING)  # fmt: skip
