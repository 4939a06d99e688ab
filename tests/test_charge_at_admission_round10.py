"""A handoff is charged against its decode worker's cache as it is when the handoff starts (at admission), not as
it was when the request was routed (at its prefill's end): with bounded decode memory a request can wait
seconds for admission while blocks enter and leave that cache (helper 51: evicted blocks were moved for free,
delivered ones moved again)."""

from __future__ import annotations

import pandas as pd
import pytest

import perfmodel

MS_PER_TOKEN = dict(kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6)  # 1 ms per token


def test_blocks_evicted_while_a_request_waits_are_charged():
    """Request 2 (prefix [1, 2]) waits for request 1's memory until 3,124 ms; at 2,124 request 1's blocks [3, 4]
    entered the 2-block cache and evicted [1, 2]: request 2 moves its 1,024 tokens (TTFT 3,048, not 2,024)."""
    trace = pd.DataFrame(
        {
            "arrival_ms": [0.0, 1100.0, 1101.0],
            "num_input_tokens": [1024, 1024, 1024],
            "num_output_tokens": [0, 1000, 0],
            "hash_ids": [[1, 2], [3, 4], [1, 2]],
        }
    )
    ttft = perfmodel.replay_ttft(trace, **MS_PER_TOKEN, mode="destination_missing", decode_cache_blocks=2,
                                 decode_kv_tokens=2100, decode_step_ms=1.0)  # fmt: skip
    assert ttft["admitted_ms"].tolist() == [0.0, 1100.0, 3124.0]
    assert ttft["cached_tokens"].tolist() == [0, 0, 0] and ttft["charged_tokens"].tolist() == [1024] * 3
    assert ttft["ttft_ms"].tolist() == [1025.0, 1025.0, 3048.0]


def test_blocks_delivered_while_a_request_waits_are_not_moved_again():
    """Two requests of one prefix at 0 ms, memory for one: the second is admitted at 1,034 ms (the first done), after
    the first's blocks arrived at 1,024: it is a whole hit (TTFT 1,035, not 2,059)."""
    trace = pd.DataFrame(
        {
            "arrival_ms": [0.0, 0.0],
            "num_input_tokens": [1024, 1024],
            "num_output_tokens": [10, 10],
            "hash_ids": [[1, 2], [1, 2]],
        }
    )
    ttft = perfmodel.replay_ttft(trace, **MS_PER_TOKEN, mode="destination_missing", decode_kv_tokens=1100,
                                 decode_step_ms=1.0)  # fmt: skip
    assert ttft["admitted_ms"].tolist() == [0.0, 1034.0]
    assert ttft["cached_tokens"].tolist() == [0, 1024] and ttft["charged_tokens"].tolist() == [1024, 0]
    assert ttft["ttft_ms"].tolist() == [1025.0, 1035.0]


@pytest.mark.parametrize("contention", ["none", "fair"])
def test_a_cluster_of_one_nic_each_side_charges_as_its_link(contention):
    trace = pd.DataFrame(
        {
            "arrival_ms": [0.0, 1100.0, 1101.0, 1102.0],
            "num_input_tokens": [1024, 1024, 1024, 1536],
            "num_output_tokens": [0, 1000, 0, 3],
            "hash_ids": [[1, 2], [3, 4], [1, 2], [3, 4, 5]],
        }
    )
    nic = perfmodel.Link("nic", 1.0)
    cluster = perfmodel.Cluster(nic=nic, nics_per_node=1, gpus_per_node=1)
    options = dict(mode="destination_missing", decode_cache_blocks=2, decode_kv_tokens=2100, decode_step_ms=1.0,
                   contention=contention, prefill_workers=1)  # fmt: skip
    on_link = perfmodel.replay_ttft(trace, nic, 1e6, **options)
    on_cluster = perfmodel.replay_ttft(trace, cluster, 1e6, **options)
    for column in ("admitted_ms", "cached_tokens", "charged_tokens", "ttft_ms"):
        assert on_cluster[column].tolist() == pytest.approx(on_link[column].tolist(), rel=1e-12, abs=0), column
