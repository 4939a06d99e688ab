"""Layer-wise streaming with measured prefill ends (``ready_ms``) and a prefill duration (``prefill_ms`` or
``prefill_tokens_per_s``). The contract (SEMANTICS.md): ``ready_ms`` is when each prefill ends; a prefill of C ms
computes L layers at an even pace and the first group of g layers goes ``C * (L - g) / L`` before that end. A
prefill runs after its request arrives (the TTFT section: ``queue_ms = prefill_start - arrival >= 0``), so a
trace whose prefill could only have started before its arrival (``ready_ms - C < arrival_ms``) contradicts
itself: the replay started such a transfer before its request arrived and ended it before its prefill could
have ended. Found by a hostile pass (round 9): now refused by name, on links and on a cluster.

Every number here is computed by hand: 1,000 tokens of 1,000,000 bytes at 100 GB/s is X = 10 ms; 10 layers
sent one at a time (g = 1); alone, a handoff starts at ``ready - C * 9 / 10`` and ends at
``max(ready + X / 10, start + X)``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.errors import InputError

ONE_EACH_SIDE = perfmodel.Cluster(
    name="one", nic=perfmodel.Link("nic", 100.0), nics_per_node=1, gpus_per_node=1, nodes=2, nvlink_domain=1
)
LINK = 100.0  # GB/s
BYTES = 1_000_000  # per token: 1,000 tokens take X = 10 ms at 100 GB/s
STREAM = dict(overlap="layerwise", num_layers=10)
EVERYWHERE = [
    pytest.param(LINK, "none", id="link-none"),
    pytest.param(LINK, "fifo", id="link-fifo"),
    pytest.param(LINK, "fair", id="link-fair"),
    pytest.param(ONE_EACH_SIDE, "none", id="cluster-none"),
    pytest.param(ONE_EACH_SIDE, "fair", id="cluster-fair"),
]


def _trace(ready_after: list[float], labels: list[str] | None = None) -> pd.DataFrame:
    """Two requests of 1,000 tokens arriving at 0 and 100 ms (far apart: nothing shares a link), each prefill
    ending ``ready_after`` ms after its arrival."""
    arrival = np.array([0.0, 100.0])
    return pd.DataFrame(
        {"arrival_ms": arrival, "num_input_tokens": [1000, 1000], "ready_ms": arrival + np.array(ready_after)},
        index=labels,
    )


def _replay(trace: pd.DataFrame, link, contention: str, **kw) -> pd.DataFrame:
    return perfmodel.replay_handoffs(trace, link, BYTES, contention=contention, **STREAM, **kw)


@pytest.mark.parametrize(("link", "contention"), EVERYWHERE)
def test_a_prefill_longer_than_arrival_to_ready_is_refused(link, contention):
    # ready_ms = arrival + 1 while the prefill takes 50 ms: it would have started 49 ms before its request arrived
    # (the replay started the transfer at -44 ms, before the arrival at 0, and ended it at 2 ms, before 50)
    with pytest.raises(InputError) as error:
        _replay(_trace([1.0, 1.0]), link, contention, prefill_ms=50.0)
    message = str(error.value)
    assert "\n" not in message
    for said in ("ready_ms", "prefill_ms", "row 0", "50.0", "1.0", "before", "arriv", "2 such rows"):
        assert said in message, (said, message)


@pytest.mark.parametrize(("link", "contention"), EVERYWHERE)
def test_a_prefill_rate_too_slow_for_the_measured_end_is_refused_by_its_name(link, contention):
    # 1,000 tokens at 20,000 tokens/s: a prefill of 50 ms, again ending 1 ms after arrival
    with pytest.raises(InputError, match="prefill_tokens_per_s") as error:
        _replay(_trace([1.0, 60.0]), link, contention, prefill_tokens_per_s=20_000.0)
    assert "row 0" in str(error.value) and "1 such row" in str(error.value)


def test_the_first_offending_row_is_named_by_its_label():
    # only the second request is inconsistent (its prefill of 50 ms ends 20 ms after its arrival at 100)
    with pytest.raises(InputError, match=r"row 'late'.*1 such row") as error:
        _replay(_trace([60.0, 20.0], ["early", "late"]), LINK, "fifo", prefill_ms=50.0)
    assert "100.0" in str(error.value) and "120.0" in str(error.value)


def test_a_request_too_short_to_stream_is_checked_too():
    # layerwise_min_tokens keeps both requests from streaming, but their inputs still contradict each other
    with pytest.raises(InputError, match="ready_ms"):
        _replay(_trace([1.0, 1.0]), LINK, "none", prefill_ms=50.0, layerwise_min_tokens=5000)


def test_a_grid_refuses_the_configuration_whose_prefill_does_not_fit():
    with pytest.raises(InputError, match="ready_ms"):
        perfmodel.replay_grid(
            _trace([1.0, 1.0]), link=[LINK], kv_bytes_per_token=[BYTES], prefill_ms=[0.5, 50.0], **STREAM
        )


@pytest.mark.parametrize(("link", "contention"), EVERYWHERE)
@pytest.mark.parametrize(
    ("prefill_ms", "start", "end"),
    [
        # prefill 50 ms ending exactly at arrival + 50: starts 45 ms before its end, ends X / 10 after it
        (50.0, [5.0, 105.0], [51.0, 151.0]),
        # prefill 5 ms ending at arrival + 50 (45 ms of queueing): starts at 50 - 4.5, ends 10 ms later
        (5.0, [45.5, 145.5], [55.5, 155.5]),
    ],
)
def test_a_prefill_that_fits_streams_by_the_contracts_rule(link, contention, prefill_ms, start, end):
    replay = _replay(_trace([50.0, 50.0]), link, contention, prefill_ms=prefill_ms)
    np.testing.assert_allclose(replay["start_ms"], start, rtol=1e-12)
    np.testing.assert_allclose(replay["end_ms"], end, rtol=1e-12)
    np.testing.assert_allclose(replay["handoff_delay_ms"], np.array(end) - [50.0, 150.0], rtol=1e-12)
    assert (replay["start_ms"] >= replay["arrival_ms"]).all()


@pytest.mark.parametrize(("link", "contention"), EVERYWHERE)
def test_a_prefill_ending_where_it_could_first_end_on_an_epoch_clock_is_kept(link, contention):
    # ready computed as arrival + prefill in float64 (rounded at 1.7e12 ms): exactly consistent, never refused
    arrival = np.array([1.7e12 + 0.1, 1.7e12 + 100.3])
    prefill = np.array([50.3, 7.7])
    trace = pd.DataFrame({"arrival_ms": arrival, "num_input_tokens": [1000, 1000], "ready_ms": arrival + prefill})
    replay = _replay(trace, link, contention, prefill_ms=prefill)
    assert (replay["start_ms"] >= replay["arrival_ms"]).all()


@pytest.mark.parametrize(("link", "contention"), EVERYWHERE)
@pytest.mark.parametrize("how", ["no ready_ms", "ready_ms='arrival_ms'", "a ready_ms column equal to arrival_ms"])
def test_without_measured_prefill_ends_the_arrival_is_the_prefills_end_as_documented(link, contention, how):
    # "A handoff is ready at its request's arrival time unless the caller gives prefill completion times":
    # the arrival stands for the prefill's end, so the first group goes 45 ms before it (as before)
    trace = _trace([0.0, 0.0])
    kw = {}
    if how == "no ready_ms":
        trace = trace.drop(columns="ready_ms")
    elif how == "ready_ms='arrival_ms'":
        trace["ready_ms"] = trace["arrival_ms"] + 1.0  # (ignored: the arrivals are asked for)
        kw = dict(ready_ms="arrival_ms")
    replay = _replay(trace, link, contention, prefill_ms=50.0, **kw)
    np.testing.assert_allclose(replay["start_ms"], [-45.0, 55.0], rtol=1e-12)
    np.testing.assert_allclose(replay["end_ms"], [1.0, 101.0], rtol=1e-12)
    np.testing.assert_allclose(replay["handoff_delay_ms"], [1.0, 1.0], rtol=1e-12)


def test_without_streaming_measured_ends_are_replayed_as_before():
    # no prefill duration is read without layer-wise streaming: each handoff starts at its ready time
    replay = perfmodel.replay_handoffs(_trace([1.0, 1.0]), LINK, BYTES, contention="fifo")
    np.testing.assert_allclose(replay["start_ms"], [1.0, 101.0], rtol=1e-12)
    np.testing.assert_allclose(replay["end_ms"], [11.0, 111.0], rtol=1e-12)


def test_ready_times_logged_on_an_epoch_clock_as_arrival_plus_prefill_are_accepted():
    """A log on an epoch clock in ms (~1.7e12, with microsecond decimals) whose ready time is its arrival plus its
    prefill, each rounded as logged: the sum computed again differs in the last bits (~2.4e-4 ms), and the trace
    is consistent: accepted, never refused for rounding."""
    rng = np.random.default_rng(7)
    arrival = np.round(1.7e12 + np.sort(rng.uniform(0, 60_000, 200)), 3)
    prefill = np.round(rng.uniform(5, 80, 200), 3)
    trace = pd.DataFrame(
        {"arrival_ms": arrival, "num_input_tokens": 4096, "ready_ms": np.round(arrival + prefill, 3), "p": prefill}
    )
    assert ((trace["ready_ms"] - trace["arrival_ms"]) < trace["p"]).any()  # (the rounding this is about)
    replay = perfmodel.replay_handoffs(
        trace, "ib-ndr", "llama-3.1-8b", overlap="layerwise", prefill_ms="p", contention="fifo"
    )
    assert len(replay) == 200
