"""Hostile use, round 13: what a user trying the package as an adversary found, each failing on the code before
its fix. Silently wrong numbers first (hash ids read as blocks larger than the trace's), then options and
messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import InputError


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, cwd=cwd, env=os.environ, timeout=600
    )


# --- hash ids of smaller blocks than the replay assumes ------------------------------------------------------


@pytest.fixture
def page_hashed() -> pd.DataFrame:
    """Two 1,024-token prompts hashed per 16-token page: the second shares its first 2 pages (32 tokens)."""
    return pd.DataFrame(
        {
            "arrival_ms": [0.0, 2000.0],
            "num_input_tokens": [1024, 1024],
            "num_output_tokens": [1, 1],
            "hash_ids": [list(range(1, 65)), [1, 2, *range(101, 163)]],
        }
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda t: perfmodel.replay_handoffs(t, 1.0, 1e6, mode="destination_missing", block_size=16),
        lambda t: perfmodel.replay_handoffs(t, 1.0, 1e6, routing="prefix", decode_workers=2),
        lambda t: perfmodel.replay_ttft(t, 1.0, 1e6, mode="destination_missing", block_size=16),
        lambda t: perfmodel.replay_handoffs(t, "hgx-h100-8x400g", 1e6, mode="destination_missing", block_size=16),
    ],
    ids=["replay", "prefix routing", "ttft", "cluster"],
)
def test_more_hash_ids_than_the_prompt_has_blocks_is_refused(page_hashed, call):
    """64 ids for 1,024 tokens cannot be 512-token blocks: each id was read as 512 tokens, and the second
    request's 32 shared tokens as its whole prompt (a handoff of 0 ms instead of 992 ms), without a word."""
    with pytest.raises(InputError, match=r"request 0 has 64 hash ids for a prompt of 1,024 tokens: at 512 tokens "
                       r"per id .* at most 2 \(2 requests with too many ids\).*hash_block_tokens"):  # fmt: skip
        call(page_hashed)


def test_the_tokens_per_hash_id_given_price_the_shared_pages(page_hashed):
    page_hashed.attrs["hash_block_tokens"] = 16
    replay = perfmodel.replay_handoffs(page_hashed, 1.0, 1e6, mode="destination_missing", block_size=16)
    assert replay["cached_tokens"].tolist() == [0, 32]
    assert replay["handoff_delay_ms"].tolist() == [1024.0, 992.0]


def test_fewer_hash_ids_than_blocks_are_a_prefix_hashed_in_part(page_hashed):
    """Ids for part of a prompt (a trace hashing its first blocks only) stay accepted."""
    page_hashed["hash_ids"] = [[1], [1]]
    replay = perfmodel.replay_handoffs(page_hashed, 1.0, 1e6, mode="destination_missing")
    assert replay["cached_tokens"].tolist() == [0, 512]


@pytest.mark.parametrize("command", ["trace", "ttft"])
def test_the_commands_read_the_tokens_per_hash_id(page_hashed, tmp_path, command):
    """The command line had no way to say the tokens per id: a page-hashed trace priced its second handoff 0 ms."""
    path = tmp_path / "pages.jsonl"
    page_hashed.to_json(path, orient="records", lines=True)
    common = ["--bandwidth", "1", "--kv-bytes-per-token", "1000000", "--mode", "destination_missing"]
    refused = _cli(command, str(path), *common, "--block-size", "16", "--out", "refused", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "--hash-block-tokens N" in refused.stderr and not (tmp_path / "refused").exists()
    done = _cli(command, str(path), *common, "--block-size", "16", "--hash-block-tokens", "16", "--out", "o",
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(next((tmp_path / "o").glob("*.csv")))
    assert table["charged_tokens"].tolist() == [1024, 992]


# --- grids: axes, warnings, threads ------------------------------------------------------------------------

TINY = pd.DataFrame({"arrival_ms": [0.0, 10.0, 20.0], "num_input_tokens": [100] * 3, "num_output_tokens": [1] * 3})


def test_a_range_is_a_ttft_grid_axis_as_it_is_a_sweep_s():
    """It was refused as 'a range of 2 values is not a whole number >= 1', though lists and arrays are axes."""
    grid = perfmodel.ttft_grid(
        TINY, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6, prefill_workers=range(1, 3), progress=False
    )
    assert grid["prefill_workers"].tolist() == [1, 2]
    with pytest.raises(InputError, match="axis prefill_workers is empty"):
        perfmodel.ttft_grid(TINY, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6, prefill_workers=range(1, 1))


@pytest.mark.parametrize(
    "grid",
    [
        lambda: perfmodel.ttft_grid(
            TINY, kv_transfer_bandwidth=1.0, kv_bytes_per_token=1e6, links=[1, 2], progress=False
        ),
        lambda: perfmodel.replay_grid(TINY, link=1.0, model=1e6, links=[1, 2], progress=False),
    ],
    ids=["ttft_grid", "replay_grid"],
)
def test_a_grid_says_each_warning_once(grid):
    """The check on two requests and the replay on a thread each said it: twice at the caller's line."""
    import warnings

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        grid()
    said = [str(w.message) for w in shown if "has no effect under contention='none'" in str(w.message)]
    assert len(said) == 1 and shown[0].filename == __file__


@pytest.mark.parametrize("num_threads", [0, 2.5, "4"])
def test_replay_grid_checks_its_threads(num_threads):
    """Any num_threads was taken (and ignored) wherever the machine has a core: cpu_count() or (1 if ... else ...)."""
    with pytest.raises(InputError, match="num_threads"):
        perfmodel.replay_grid(TINY, link=[1.0, 2.0], model=1e6, num_threads=num_threads, progress=False)


# --- inverse questions: what they take -------------------------------------------------------------------

M70 = "llama-3.1-70b"
HGX = "hgx-h100-8x400g"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (dict(cluster=HGX, tp=8, nics_per_node=1), "dataclasses.replace"),
        (dict(cluster=HGX, tp=8, hop_latency_ms=10.0), "dataclasses.replace"),
        (dict(link="nvlink4"), r"own argument \(kv_transfer_bandwidth\)"),
        (dict(model="llama-3.1-8b"), r"own argument \(kv_bytes_per_token\)"),
        (dict(cache_hit_ratio=0.5), "required_nics"),
        (dict(contention="fifo"), "required_nics"),
        (dict(nic="zzz-junk"), "dataclasses.replace"),
    ],
)
def test_required_bandwidth_refuses_what_handoff_delay_ms_does_not_take(extra, said):
    """Each was taken and dropped: nics_per_node=1 on HGX answered 26.8 GB/s (8 NICs' answer) for 214.7."""
    name = next(k for k in extra if k not in ("cluster", "tp"))
    with pytest.raises(InputError, match=f"{name}: is not an input of this question.*{said}"):
        perfmodel.required_bandwidth(32768, M70, budget_ms=50, **extra)


@pytest.mark.parametrize("extra", [dict(nics_per_node=1), dict(cluster=HGX), dict(routing="prefix")])
def test_max_tokens_within_refuses_what_handoff_delay_ms_does_not_take(extra):
    with pytest.raises(InputError, match=f"{next(iter(extra))}: is not an input of this question"):
        perfmodel.max_tokens_within(HGX, M70, budget_ms=50, tp=8, **extra)


def test_what_the_inverse_questions_take_still_counts():
    one = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=8)
    assert perfmodel.required_bandwidth(32768, M70, budget_ms=50, cluster=one, tp=8) == pytest.approx(214.7483648)
    assert perfmodel.required_bandwidth(32768, M70, budget_ms=50, latency_ms=1.0) > 214.75


# --- clusters: a listing that lists, a transport paid once ----------------------------------------------


def test_perfmodel_clusters_lists_a_saved_cluster_that_cannot_place_its_example(tmp_path, monkeypatch):
    """One saved cluster of 1 node stopped the whole listing (exit 2), built-in presets included."""
    monkeypatch.setenv("PERFMODEL_CONFIG_DIR", str(tmp_path / "config"))
    perfmodel.save_cluster(perfmodel.Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8, nodes=1, name="one-node"))
    listed = _cli("clusters", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "hgx-h100-8x400g" in listed.stdout and "16-token blocks" in listed.stdout
    assert "n/a: one-node: 1 prefill worker of 8 GPUs and 1 decode worker of 8 GPUs need 2 nodes" in listed.stdout


def test_a_transport_profile_as_the_nic_and_a_transport_is_refused():
    """Its efficiency and per-message cost were applied twice: 33.1 GB/s for 40.7, 1.86x the delay."""
    with pytest.raises(InputError, match="nic 'mooncake-te-rdma' is a transport profile.*'roce-400g'"):
        perfmodel.Cluster(nic="mooncake-te-rdma", nics_per_node=8, gpus_per_node=8, transport="mooncake-te-rdma")
    alone = perfmodel.Cluster(nic="mooncake-te-rdma", nics_per_node=8, gpus_per_node=8)
    documented = perfmodel.Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, transport="mooncake-te-rdma")
    assert alone.nic_capacity_gb_s == pytest.approx(documented.nic_capacity_gb_s)


# --- fits and readers say what they cannot vouch for -----------------------------------------------------

NBYTES = np.array([4e5, 4e6, 4e7, 4e8])


def test_fit_link_warns_of_a_throughput_above_the_line_rate():
    """It held a 40 GB/s table at 20 GB/s and returned a fit 96% off without a word (calibrate warned)."""
    with pytest.warns(UserWarning) as said:
        link = perfmodel.fit_link(NBYTES, 0.3 + NBYTES / 40e9 * 1000, line_rate_gb_s=20.0)
    assert link.bandwidth_gb_s == 20.0
    texts = [str(w.message) for w in said]
    assert "the best measured throughput, 38.83 GB/s, is above the line rate given, 20 GB/s" in texts[0]
    assert "far from the measurements" in texts[1] and len(texts) == 2


def test_fit_link_warns_of_a_fit_far_off_and_not_of_a_close_one():
    with pytest.warns(UserWarning, match=r"far from the measurements \(4 points, max error"):
        perfmodel.fit_link(NBYTES, [1.0, 50.0, 2.0, 30.0])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        perfmodel.fit_link(NBYTES, 0.3 + NBYTES / 40e9 * 1000, line_rate_gb_s=50.0)


def test_calibrate_says_each_of_its_warnings_once():
    import warnings

    table = pd.DataFrame({"nbytes": NBYTES, "measured_ms": 0.3 + NBYTES / 40e9 * 1000})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        perfmodel.calibrate(table, line_rate_gb_s=20.0)
    texts = [str(w.message) for w in said]
    assert len(texts) == 2 and sum("above the line rate" in t for t in texts) == 1


def test_a_one_line_scrape_given_as_text_says_how_text_is_told_from_a_path():
    with pytest.raises(FileNotFoundError, match="only when it holds a newline"):
        perfmodel.read_engine_metrics('vllm:num_requests_running{engine="0"} 2.0')
    assert perfmodel.read_engine_metrics('vllm:num_requests_running{engine="0"} 2.0\n')["value"].tolist() == [2.0]


# --- handoff_flows explains what handoff_delay_ms computes ---------------------------------------------------


def test_handoff_flows_reads_text_and_takes_a_connector_as_handoff_delay_ms_does():
    """'1024' was refused (handoff_delay_ms reads it), and connector= raised TypeError: a handoff whose delay
    counted a connector could not be broken into its flows."""
    flows = perfmodel.handoff_flows("1024", HGX, M70, tp=8)
    assert flows.attrs["delay_ms"] == perfmodel.handoff_delay_ms(1024, HGX, M70, tp=8)
    keywords = dict(tp=8, block_size=16, connector="vllm-nixl-0.10.1")
    with_connector = perfmodel.handoff_flows(32768, HGX, M70, **keywords)
    assert with_connector.attrs["delay_ms"] == pytest.approx(perfmodel.handoff_delay_ms(32768, HGX, M70, **keywords))
    assert (
        with_connector.attrs["delay_ms"]
        > perfmodel.handoff_flows(32768, HGX, M70, tp=8, block_size=16).attrs["delay_ms"]
    )


# --- model configs read as transformers reads them ---------------------------------------------------------

GEMMA3_12B = {  # google/gemma-3-12b-it's config: its text_config saved as its difference from Gemma3TextConfig
    "model_type": "gemma3",
    "torch_dtype": "bfloat16",
    "text_config": {"model_type": "gemma3_text", "hidden_size": 3840, "num_attention_heads": 16,
                    "num_hidden_layers": 48, "num_key_value_heads": 8, "sliding_window": 1024},
}  # fmt: skip


def test_a_text_config_without_the_fields_its_class_defaults_is_read_with_those_defaults():
    """gemma-3-12b's head_dim (256, the class default, left out) was taken as 3840 / 16 = 240: 6.25% low; gemma-3-4b's
    heads (8 and 4, left out) were refused."""
    full, window = 8 * 2 * 8 * 256 * 2, 40 * 2 * 8 * 256 * 2  # 8 global layers, 40 of a 1024-token window
    assert int(perfmodel.kv_bytes(GEMMA3_12B, 32768)) == full * 32768 + window * 1024
    gemma3_4b = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                                                         "num_hidden_layers": 34, "sliding_window": 1024}}  # fmt: skip
    assert int(perfmodel.kv_bytes(gemma3_4b, 32768)) == 5 * 2 * 4 * 256 * 2 * 32768 + 29 * 2 * 4 * 256 * 2 * 1024


def test_a_qwen3_config_without_head_dim_has_its_class_s():
    qwen3 = {"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 2560, "num_attention_heads": 32,
             "num_key_value_heads": 8}  # fmt: skip
    assert perfmodel.kv_bytes_per_token(qwen3) == 2 * 36 * 8 * 128 * 2  # not 2560 / 32 = 80 values a head
    moe = {**qwen3, "model_type": "qwen3_moe"}  # (Qwen3MoeConfig declares no head_dim: derived)
    assert perfmodel.kv_bytes_per_token(moe) == 2 * 36 * 8 * 80 * 2


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_kv_shared_layers", 10), ("use_cla", True)],
)
def test_layers_that_share_another_s_kv_cache_are_refused_not_counted_twice(field, value):
    """Gemma 3n's 10 shared layers were counted as holding their own cache: +50% bytes."""
    config = {"model_type": "gemma3n_text", "num_hidden_layers": 30, "hidden_size": 2048, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 256, field: value}  # fmt: skip
    with pytest.raises(InputError, match=f"model config field '{field}'.*does not read"):
        perfmodel.kv_bytes(config, 1000)
    assert perfmodel.kv_bytes({**config, field: 0 if field != "use_cla" else False}, 1000) > 0


# --- messages: say what is so -------------------------------------------------------------------------------


def test_an_oversubscribed_rail_fabric_sized_by_its_placement_is_said():
    """Its uplinks grow with the workers placed: handoffs alone took 40, 26.7 or 16 ms at 2, 4 or 8 decode workers."""
    rail = perfmodel.Cluster(nic="ib-ndr", nics_per_node=2, gpus_per_node=2, fabric="rail", oversubscription=8.0)
    trace = pd.DataFrame({"arrival_ms": [0.0, 100.0], "num_input_tokens": [500, 500]})
    with pytest.warns(UserWarning, match="leaf uplinks carry .* / 8, and with nodes unset .* nodes=N"):
        perfmodel.replay_handoffs(trace, rail, 1e6, decode_workers=2, contention="none")
    import dataclasses
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        perfmodel.replay_handoffs(trace, dataclasses.replace(rail, nodes=8), 1e6, decode_workers=2, contention="none")


def test_each_skipped_nic_count_is_said_with_its_own_reason():
    """Count 1's reason ('a node has 1') was given for 2, 16, 24 and 32 too."""
    down = perfmodel.Cluster(nic="roce-400g", nics_per_node=8, gpus_per_node=8, nics_down=(3,))
    trace = perfmodel.datasets.load("azure-code-2023").head(50)
    with pytest.warns(UserWarning, match=r"\(1: .*a node has 1 .*; 2: .*a node has 2 .*; 16: .*16 NICs"):
        perfmodel.required_nics(trace, down, M70, budget_ms=20, contention="fair", tp=8)


def test_an_empty_fair_replay_on_a_cluster_has_nothing_to_draw():
    import matplotlib

    matplotlib.use("Agg")
    from perfmodel.plotting.cluster import resource_utilisation

    one = perfmodel.Cluster(nic="ib-ndr", nics_per_node=1, gpus_per_node=1)
    empty = perfmodel.replay_handoffs(
        pd.DataFrame({"arrival_ms": [], "num_input_tokens": []}), one, 1e6, contention="fair"
    )
    with pytest.raises(InputError, match="no handoffs to draw"):
        resource_utilisation(empty)


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: perfmodel.handoff_delay_ms(1000, "0x ib-ndr", 131072), r"'0x ib-ndr' is 0 links.*'1x ib-ndr'"),
        (
            lambda: perfmodel.kv_terms(
                {
                    "model_type": "llama",
                    "num_hidden_layers": 2,
                    "hidden_size": 256,
                    "num_attention_heads": 2,
                    "layer_types": ["sliding_attention"] * 2,
                    "sliding_window": None,
                }
            ),
            "field 'sliding_window'.*is null",
        ),
    ],
    ids=["0x link", "null window"],
)
def test_messages_name_what_was_given(call, said):
    """'0x ib-ndr' was refused as a bad count= (a name never written); a null window was said to be missing."""
    with pytest.raises(InputError, match=said):
        call()


def test_perfmodel_ttft_says_how_the_decode_side_routes(tmp_path):
    ran = _cli("ttft", "dataset:azure-code-2023", "--model", "llama-3.1-8b", "--bandwidth", "50", "--decode-workers",
               "2", "--routing", "round_robin", "--prefill-tokens-per-s", "20000", "--out", "t", cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "2 decode workers (routing: round robin)" in ran.stdout + ran.stderr


def test_delay_vs_tokens_says_rows_repeat_when_they_do(ax):
    """Repeated rows were said to be 'several columns vary' (one listed), with a fix that could not help."""
    import perfmodel.plotting as pp

    df = perfmodel.sweep(model="llama-3.1-8b", kv_transfer_bandwidth=[10.0, 100.0], num_input_tokens=[1024, 8192])
    with pytest.raises(ValueError, match=r"rows repeat the same \['num_input_tokens', 'kv_transfer_bandwidth'\]"):
        pp.delay_vs_tokens(pd.concat([df, df]), ax=ax)
    pp.delay_vs_tokens(df, ax=ax)


# --- sizing answers say what they answer (helper E) ----------------------------------------------------------


def test_required_nics_says_the_tp_degree_and_the_counts_asked_for():
    """TP1 and TP8 answers shared one text; counts=[1, 3] answered '3 links' as if 2 had been tried."""
    azure = perfmodel.datasets.load("azure-code-2023")
    tp8 = perfmodel.required_nics(azure, "ib-ndr", M70, budget_ms=60, contention="fifo", tp=8)
    assert "at TP8 over one link whole" in str(tp8)
    gappy = perfmodel.required_nics(azure, "ib-ndr", M70, budget_ms=60, contention="fifo", counts=[1, 3])
    assert str(gappy).endswith("at TP1 over one link whole, N among 1, 3: 3 links")
    with pytest.raises(InputError, match="nics_per_node: is what required_nics searches on a cluster"):
        perfmodel.required_nics(azure.head(20), HGX, M70, budget_ms=60, contention="fair", tp=8, nics_per_node=4)


def test_a_search_says_each_warning_of_its_replays_once():
    """8 replays of required_nics said 'no hash_ids' 8 times, and max_rate_for_ttft 13 times."""
    import warnings

    azure = perfmodel.datasets.load("azure-code-2023").head(300)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        perfmodel.required_nics(azure, "ib-ndr", M70, budget_ms=50, contention="fifo", mode="destination_missing")
    assert len([w for w in shown if "no hash_ids" in str(w.message)]) == 1
    assert all(w.filename == __file__ for w in shown)


def test_fewest_for_ttft_stops_where_a_sized_cluster_holds_no_more_workers():
    """It raised the placement's error for a count never asked for (2 decode workers on 2 nodes with a prefill)."""
    import dataclasses

    two = dataclasses.replace(perfmodel.get_cluster(HGX), nodes=2, nics_per_node=1)
    trace = perfmodel.synthetic_trace(60, 20, seed=0)
    with pytest.warns(UserWarning, match="of 2 nodes holds at most 1 decode worker here"):
        answer = perfmodel.fewest_for_ttft(trace, "decode_workers", ttft_budget_ms=1e-3, link=two, model=M70, tp=8,
                                           prefill_tokens_per_s=400_000, contention="fair")  # fmt: skip
    assert answer is None


def test_perfmodel_ttft_names_the_handoff_it_prices(tmp_path):
    ran = _cli("ttft", "dataset:mooncake-synthetic", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tp", "8",
               "--prefill-tokens-per-s", "400000", "--contention", "fifo", "--out", "t", cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "handoffs of llama-3.1-70b at TP8 over ib-ndr:" in ran.stdout + ran.stderr


def test_perfmodel_trace_says_when_it_shows_part_of_the_configurations(tmp_path):
    ran = _cli("trace", "dataset:azure-code-2023", "--model", "llama-3.1-70b", "--tp", "8", "--link", "ib-ndr",
               "--contention", "fifo", "--grid", "links=1,2,3,4,5,6,7,8", "--budget-ms", "50", "--out", "g",
               cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "(the first 5 shown; all 8 in" in ran.stdout


def test_fewest_links_without_contention_says_one_replay_answered(tmp_path):
    """It said it had searched 1..4,096 links, where one replay (each handoff alone) answered every count."""
    ran = _cli("ttft", "dataset:azure-code-2023", "--model", "llama-3.1-70b", "--link", "ib-ndr",
               "--prefill-tokens-per-s", "20000", "--contention", "none", "--budget-ms", "100", "--fewest", "links",
               cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "any count of links gives the TTFT of one, replayed once" in ran.stdout
