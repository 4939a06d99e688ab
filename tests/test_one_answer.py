"""One sizing question, one answer: "how many 400G NICs per prefill node keep our p99 under 50 ms?" on the Azure
trace, asked through every entry point (the inverse questions, a sweep or a replay grid read off, the command
line) gives the same count where the question is the same, and each entry point says which question it answers
(the percentile of what, with which contention, over which NICs, with which bytes)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.cli import main
from perfmodel.replay.sizing import counted, fewest_meeting, meets_budget, percentile_ms, required_nics

MODEL = "llama-3.1-70b"
BUDGET = 50.0


@pytest.fixture(scope="module")
def azure() -> pd.DataFrame:
    return perfmodel.datasets.load("azure-code-2023")


def slow_percentile(values, percent: float) -> float:
    """The linear-interpolation percentile, by hand: between the two order statistics around (n - 1) p / 100."""
    ordered = sorted(float(v) for v in values)
    position = (len(ordered) - 1) * percent / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def by_hand(trace, counts, config_of, percent=99.0, **common) -> float:
    """The fewest count whose replay's p-th percentile meets the budget: each count replayed on its own."""
    for count in counts:  # ascending: the first that meets it
        replay = perfmodel.replay_handoffs(trace, model=MODEL, **config_of(count), **common)
        if slow_percentile(replay["handoff_delay_ms"], percent) <= BUDGET:
            return count
    return math.inf


def printed_count(text: str, unit: str) -> int:
    """The count the command line prints beside its question: '...: 3 links (the fewest of ...)'."""
    found = re.findall(rf"within {BUDGET:g} ms: (\d+) {unit}", text)
    assert len(found) == 1, text
    return int(found[0])


def test_separate_links_under_fifo_one_answer_everywhere(azure, tmp_path, capsys):
    """N separate 400G links, transfers queued FIFO: the API, a grid read off, the command line and trying each
    count by hand give one count (3), each with its question."""
    counts = list(range(1, 9))
    answer = required_nics(azure, "ib-ndr", MODEL, budget_ms=BUDGET, contention="fifo")
    hand = by_hand(azure, counts, lambda n: dict(link="ib-ndr", links=n), contention="fifo")
    grid = perfmodel.replay_grid(azure, model=MODEL, link="ib-ndr", links=counts, contention="fifo")
    read_off = fewest_meeting(grid["links"].tolist(), grid["p99_ms"].tolist(), BUDGET)
    assert (
        main(
            [
                "trace",
                "dataset:azure-code-2023",
                "--model",
                MODEL,
                "--link",
                "ib-ndr",
                "--contention",
                "fifo",
                "--grid",
                "links=" + ",".join(map(str, counts)),
                "--budget-ms",
                str(BUDGET),
                "--out",
                str(tmp_path / "grid"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert answer.count == hand == read_off == printed_count(out, "links") == 3
    assert str(answer).endswith(": 3 links") and answer.unit == "links" and answer.axis == "links"
    for words in (
        "p99 of per-request handoff delays",
        "queued first come first served",
        "scope rank",
        "over N separate 'ib-ndr' links",
    ):
        assert words in answer.question, answer.question
    for words in ("p99 of per-request handoff delays", "queued first come first served", "scope rank", "over N links"):
        assert words in out, out
    assert "queued first come first served" in grid.attrs["question"]
    pd.testing.assert_series_equal(answer.tried["p99_ms"], grid["p99_ms"].astype(float), check_names=False)


def test_a_cluster_under_fair_sharing_one_answer_everywhere(azure, tmp_path, capsys):
    """The TP8 node as a cluster, its flows sharing the NICs: the same count (4) from the API, by hand and from the
    command line, over the counts the node can take."""
    counts = [1, 2, 4, 8]
    answer = required_nics(azure, "hgx-h100-8x400g", MODEL, budget_ms=BUDGET, contention="fair", tp=8)
    base = perfmodel.get_cluster("hgx-h100-8x400g")
    import dataclasses

    hand = by_hand(
        azure, counts, lambda n: dict(link=dataclasses.replace(base, nics_per_node=n)), contention="fair", tp=8
    )
    assert (
        main(
            [
                "trace",
                "dataset:azure-code-2023",
                "--model",
                MODEL,
                "--cluster",
                "hgx-h100-8x400g",
                "--tp",
                "8",
                "--contention",
                "fair",
                "--grid",
                "nics_per_node=1,2,4,8",
                "--budget-ms",
                str(BUDGET),
                "--out",
                str(tmp_path / "grid"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert answer.count == hand == printed_count(out, "NICs per node") == 4
    assert answer.tried["nics_per_node"].tolist() == [1, 2, 4, 8, 16, 24, 32]  # every count the node can take
    assert str(answer).endswith(": 4 NICs per node") and "max-min fairly" in answer.question
    assert "max-min fairly" in out and "the cluster's NICs" in out


def test_each_handoff_alone_one_answer_everywhere(azure):
    """Each handoff alone (no contention): the replay at contention none, the inverse question on the trace's p99
    prompt and a sweep read off at it give one count, and each says it prices handoffs alone."""
    p99_prompt = percentile_ms(azure["num_input_tokens"], 99)
    assert p99_prompt == azure["num_input_tokens"].quantile(0.99)  # (pandas' default: the same percentile)
    answer = required_nics(azure, "hgx-h100-8x400g", MODEL, budget_ms=BUDGET, contention="none", tp=8)
    inverse = perfmodel.required_nics_per_node(p99_prompt, "hgx-h100-8x400g", MODEL, tp=8, budget_ms=BUDGET)
    swept = perfmodel.sweep(
        cluster="hgx-h100-8x400g", nics_per_node=[1, 2, 4, 8], model=MODEL, tp=8, num_input_tokens=int(p99_prompt)
    )
    read_off = fewest_meeting(swept["nics_per_node"].tolist(), swept["handoff_delay_ms"].tolist(), BUDGET)
    assert answer.count == float(inverse) == read_off == 1
    assert "each handoff alone, no contention" in answer.question
    assert swept.attrs["question"].startswith("each handoff alone, no contention, per prompt")
    links = required_nics(azure, "ib-ndr", MODEL, budget_ms=BUDGET, contention="none")
    assert links.count == 1 and str(links).endswith(": 1 link")  # one 400G NIC meets the p99 prompt's 48.7 ms
    assert float(perfmodel.required_bandwidth(p99_prompt, MODEL, budget_ms=BUDGET)) <= 50.0
    for function in (
        perfmodel.required_bandwidth,
        perfmodel.required_nics_per_node,
        perfmodel.sweep,
        perfmodel.max_tokens_within,
    ):
        first = " ".join(function.__doc__.split("\n\n")[0].split())
        assert "alone" in first and "no contention" in first, (function.__name__, first)


def test_striped_links_say_so(azure):
    """ "Nx ib-ndr" (one link N times as fast) answers another question than links=N: its answer says so."""
    striped = required_nics(azure, "ib-ndr", MODEL, budget_ms=BUDGET, contention="fifo", striped=True)
    hand = by_hand(azure, range(1, 9), lambda n: dict(link=f"{n}x ib-ndr"), contention="fifo")
    assert striped.count == hand == 2 and striped.unit == "NICs striped" and "N times as fast" in striped.question


def test_one_percentile_for_every_entry_point():
    """summarize's p99, a grid's p99 and required_nics's percentile are one helper's: on a trace whose p99 falls
    between two delays (where "linear" and "higher" differ) they agree bit for bit with the slow reference."""
    trace = perfmodel.synthetic_trace(150, rate_per_s=5, seed=3)
    replay = perfmodel.replay_handoffs(trace, model=MODEL, link="ib-ndr", contention="fifo")
    delays = replay["handoff_delay_ms"].to_numpy()
    linear, higher = np.percentile(delays, 99), np.percentile(delays, 99, method="higher")
    assert linear != higher  # (the hostile case: interpolation decides)
    assert perfmodel.summarize(replay)["p99_ms"] == float(percentile_ms(delays, 99)) == linear
    assert math.isclose(linear, slow_percentile(delays, 99), rel_tol=1e-12)
    answer = required_nics(trace, "ib-ndr", MODEL, budget_ms=(linear + higher) / 2, contention="fifo", counts=[1])
    grid = perfmodel.replay_grid(trace, model=MODEL, link="ib-ndr", links=[1, 2], contention="fifo")
    assert answer.tried["p99_ms"].iloc[0] == grid["p99_ms"].iloc[0] == linear and answer.count == 1
    assert meets_budget(delays, (linear + higher) / 2) and not meets_budget(delays, linear - 1e-9)


def test_counts_said_singular_and_plural():
    assert [counted(1, "links"), counted(2, "links"), counted(1, "NICs per node"), counted(8, "NICs per node")] == [
        "1 link",
        "2 links",
        "1 NIC per node",
        "8 NICs per node",
    ]
    assert counted(math.inf, "links") == "none of the counts tried (links)"


def test_the_percentiles_old_name_still_answers_and_warns():
    trace = perfmodel.synthetic_trace(100, rate_per_s=40, seed=0)
    ask = dict(budget_ms=200.0, contention="fifo", counts=[1, 2])
    new = required_nics(trace, "ib-ndr", MODEL, percentile=50, **ask)
    with pytest.warns(FutureWarning, match=r"required_nics\(percent=...\) is now percentile="):
        old = required_nics(trace, "ib-ndr", MODEL, percent=50, **ask)
    assert old == new and new.percentile == 50 and "p50_ms" in new.tried
    with pytest.warns(FutureWarning, match="NicSizing.percent is now NicSizing.percentile"):
        assert new.percent == 50
    with pytest.raises(TypeError, match="percent= and percentile=: give percentile= only"):
        required_nics(trace, "ib-ndr", MODEL, percent=50, percentile=90, **ask)
    with pytest.warns(FutureWarning, match=r"meets_budget\(percent=...\)"):
        assert meets_budget([10.0, 20.0, 100.0], 50.0, percent=50) == meets_budget([10.0, 20.0, 100.0], 50.0, 50)
    with pytest.warns(FutureWarning, match=r"percentile_ms\(percent=...\)"):
        assert percentile_ms([1.0, 3.0], percent=50) == 2.0


def test_no_count_meets_the_budget(azure):
    answer = required_nics(azure.head(200), "ib-ndr", MODEL, budget_ms=0.001, contention="fifo", counts=[1, 2])
    assert answer.count == math.inf and "none of the counts tried" in str(answer)


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(budget_ms=0), "budget_ms"),
        (dict(budget_ms=float("nan")), "budget_ms"),
        (dict(contention="queue"), "contention"),
        (dict(percentile=120), "percentile: 120 is not a percentile"),
        (dict(links=2), "set by required_nics itself"),
        (dict(link_spec=[3.0]), "is not a link, a bandwidth or a cluster"),
        (dict(link_spec=True), "is not a link, a bandwidth or a cluster"),
        (dict(link_spec=-5.0), "bandwidth_gb_s -5.0 is not > 0"),
        (dict(striped="no"), "striped"),
        (dict(counts=[1, 0]), "counts"),
        (dict(counts=[1.5]), "counts"),
        (dict(counts=[]), "counts"),
        (dict(link_spec="hgx-h100-8x400g", striped=True), "striped"),
        (dict(link_spec="hgx-h100-8x400g", counts=[3]), "nics_per_node 3 neither divides"),
    ],
)
def test_bad_input_is_one_clear_line(bad, words):
    trace = perfmodel.synthetic_trace(20, rate_per_s=5, seed=0)
    given = dict(budget_ms=50.0, contention="fifo") | bad
    link = given.pop("link_spec", "ib-ndr")
    with pytest.raises(perfmodel.InputError, match=re.escape(words)) as error:
        required_nics(trace, link, MODEL, **given)
    assert "\n" not in str(error.value)


def test_contention_has_no_default():
    """The contention decides the answer (1, 3 or 4 NICs here): it is asked, never defaulted."""
    with pytest.raises(TypeError, match="contention"):
        required_nics(perfmodel.synthetic_trace(20, rate_per_s=5, seed=0), "ib-ndr", MODEL, budget_ms=50.0)


def test_the_command_line_says_what_its_figures_price(tmp_path, capsys):
    """perfmodel sweep prices each handoff alone; perfmodel trace gives the percentiles of per-request delays under
    its contention: each says so beside its numbers."""
    assert (
        main(
            [
                "sweep",
                "--cluster",
                "hgx-h100-8x400g",
                "--nics-per-node",
                "1",
                "2",
                "--model",
                MODEL,
                "--tp",
                "8",
                "--tokens",
                "7436",
                "--out",
                str(tmp_path / "sweep"),
            ]
        )
        == 0
    )
    assert "(each handoff alone, no contention, per prompt, its flows on the cluster's NICs)" in capsys.readouterr().out
    assert (
        main(
            [
                "trace",
                "dataset:azure-code-2023",
                "--model",
                MODEL,
                "--link",
                "ib-ndr",
                "--contention",
                "fair",
                "--out",
                str(tmp_path / "trace"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "p50_ms, p90_ms, p99_ms: percentiles of per-request handoff delays in the replay, transfers sharing" in out


def test_a_node_tries_the_counts_its_switches_can_take():
    """The counts a cluster's PCIe switches cannot take are skipped, as required_nics_per_node skips them: both
    answer from the same counts (a one-request trace, each handoff alone: the same question)."""
    node = perfmodel.Cluster(
        nic="ib-ndr", nics_per_node=4, gpus_per_node=8, gpus_per_pcie_switch=2, pcie_switch_gb_s=64
    )
    trace = perfmodel.synthetic_trace(1, rate_per_s=1, seed=0)
    prompt = int(trace["num_input_tokens"].iloc[0])
    for budget in (1.0, 3.5, 50.0):  # none, 8, 4
        answer = required_nics(trace, node, MODEL, budget_ms=budget, contention="none", tp=8)
        assert answer.tried["nics_per_node"].tolist() == [4, 8, 16, 24, 32]
        with pytest.warns(UserWarning, match=r"cannot take 2 NIC counts per node \(1: .*; 2: .*among 4, 8, 16, 24, 32"):
            inverse = perfmodel.required_nics_per_node(prompt, node, MODEL, tp=8, budget_ms=budget)
        assert answer.count == float(inverse), (budget, answer.tried)


def test_a_link_object_or_a_bandwidth_is_sized_as_its_name(azure):
    """A fitted link works wherever a bandwidth does: a Link or a number of GB/s is sized as the preset it equals,
    in separate links and striped."""
    trace = azure.head(500)
    for striped in (False, True):
        by_name = required_nics(trace, "ib-ndr", MODEL, budget_ms=BUDGET, contention="fifo", striped=striped)
        for same in (perfmodel.get_link("ib-ndr"), 50.0):
            other = required_nics(trace, same, MODEL, budget_ms=BUDGET, contention="fifo", striped=striped)
            assert other.count == by_name.count
            assert other.tried["p99_ms"].tolist() == by_name.tried["p99_ms"].tolist()


def test_a_trace_with_nothing_to_size_is_refused():
    trace = perfmodel.synthetic_trace(20, rate_per_s=5, seed=0).head(0)
    with pytest.raises(perfmodel.InputError, match="has no handoff to size") as error:
        required_nics(trace, "ib-ndr", MODEL, budget_ms=50.0, contention="fifo")
    assert "\n" not in str(error.value)
