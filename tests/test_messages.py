"""Messages per KV layout, different TP on the two sides, fits with a per-message cost, transport profiles.

The message count against a plain-Python, layer-by-layer reference (tests/reference.py: messages) over
random layer mixes, layouts, block sizes and charged tails, through the kernel (both loops) and
kv_messages; the decode_tp bytes against an enumeration of the KV heads each decode rank serves.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel
from perfmodel import InputError, fit_link, handoff_delay_ms, kv_bytes_per_token, kv_messages
from perfmodel.network.links import transport_profiles

from .reference import messages as reference_messages
from .test_cli import run

LAYOUTS = ("layer_kv", "layer", "block")


# --- the contract's examples ---------------------------------------------------------------------------


@pytest.mark.parametrize(("layout", "count"), [("layer_kv", 30_016), ("layer", 15_008), ("block", 469)])
def test_the_contracts_message_counts(layout, count):
    # Llama-3.1-8B (32 layers), 7,500 tokens, 16-token blocks: 469 blocks
    assert kv_messages("llama-3.1-8b", 7500, 16, kv_layout=layout) == count
    # the kernel: at an unlimited bandwidth only the messages cost (1 ms each here)
    assert handoff_delay_ms(7500, np.inf, "llama-3.1-8b", per_message_ms=1.0, block_size=16, kv_layout=layout) == count


@pytest.mark.parametrize(
    ("model", "tp", "decode_tp", "rank", "group"),
    [
        ("llama-3.1-70b", 8, 2, 163_840, 327_680),
        ("qwen3-235b-a22b", 8, 4, 48_128, 192_512),
        ("qwen3-235b-a22b", 4, 8, 96_256, 385_024),
    ],
)
def test_the_contracts_decode_tp_bytes(model, tp, decode_tp, rank, group):
    assert kv_bytes_per_token(model, tp=tp, decode_tp=decode_tp) == rank
    assert kv_bytes_per_token(model, tp=tp, decode_tp=decode_tp, scope="group") == group
    assert handoff_delay_ms(1000, 1.0, model, tp=tp, decode_tp=decode_tp) == pytest.approx(rank * 1000 / 1e6)


def test_off_by_default_bit_for_bit():
    tokens = np.array([0, 1, 17, 4096, 131_072, 7_777_777])
    plain = handoff_delay_ms(tokens, 50.0, "gemma-3-27b", latency_ms=0.3, per_block_ms=0.002, block_size=16)
    for extra in (
        {"per_message_ms": 0.0},
        {"kv_layout": "block"},
        {"decode_tp": 1},
        {"per_message_ms": 0.0, "kv_layout": "layer"},
    ):
        same = handoff_delay_ms(tokens, 50.0, "gemma-3-27b", latency_ms=0.3, per_block_ms=0.002, block_size=16, **extra)
        assert same.tobytes() == plain.tobytes(), extra
    assert kv_bytes_per_token("llama-3.1-70b", tp=8, decode_tp=8) == kv_bytes_per_token("llama-3.1-70b", tp=8)


# --- the message count against the reference ---------------------------------------------------------


def _config(kinds: list[str], window: int, chunk: int, mla: bool) -> dict:
    names = {
        "full": "full_attention",
        "window": "sliding_attention",
        "chunk": "chunked_attention",
        "state": "linear_attention",
    }
    config = {
        "num_hidden_layers": len(kinds),
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "layer_types": [names[k] for k in kinds],
        "sliding_window": window,
        "attention_chunk_size": chunk,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
    }
    if mla:
        config.update(kv_lora_rank=64, qk_rope_head_dim=16)
    return config


@st.composite
def layer_mixes(draw):
    mla = draw(st.booleans())
    kinds = draw(
        st.lists(st.sampled_from(["full"] if mla else ["full", "window", "chunk", "state"]), min_size=1, max_size=12)
    )
    window, chunk = draw(st.integers(1, 3000)), draw(st.integers(1, 3000))
    layers = [(kind, window if kind == "window" else chunk, 1 if mla else 2) for kind in kinds]
    return _config(kinds, window, chunk, mla), layers


@given(
    mix=layer_mixes(),
    layout=st.sampled_from(LAYOUTS),
    block=st.sampled_from([1, 3, 16, 64, 512]),
    tokens=st.lists(st.integers(0, 100_000), min_size=1, max_size=8),
    data=st.data(),
)
def test_message_counts_equal_the_layer_by_layer_reference(mix, layout, block, tokens, data):
    config, layers = mix
    charged = [data.draw(st.integers(0, t + block)) for t in tokens]  # a block-rounded tail may exceed the prompt
    want = [reference_messages(t, c, block, layers, layout) for t, c in zip(tokens, charged)]
    assert kv_messages(config, tokens, block, charged_tokens=charged, kv_layout=layout).tolist() == want
    for parallel in (False, True):
        got = handoff_delay_ms(
            tokens,
            np.inf,
            config,
            mode="destination_missing",
            destination_missing_tokens=charged,
            per_message_ms=1.0,
            block_size=block,
            kv_layout=layout,
            parallel=parallel,
        )
        moved = np.asarray(perfmodel.kv_bytes(config, tokens, charged_tokens=charged)) > 0  # (no bytes: no cost)
        assert np.atleast_1d(got).tolist() == [w if m else 0.0 for w, m in zip(want, moved)], parallel


def test_numbers_of_bytes_count_messages_with_num_layers():
    assert handoff_delay_ms(7500, np.inf, 131_072, per_message_ms=1.0, block_size=16, num_layers=32) == 30_016
    assert handoff_delay_ms(7500, np.inf, 131_072, per_message_ms=1.0, block_size=16, kv_layout="block") == 469
    with pytest.raises(InputError, match="num_layers"):
        handoff_delay_ms(7500, np.inf, 131_072, per_message_ms=1.0, block_size=16)
    with pytest.raises(InputError, match="per_message_ms.*block size"):
        handoff_delay_ms(7500, np.inf, 131_072, per_message_ms=1.0, num_layers=32)
    with pytest.raises(InputError, match="layer-wise"):  # a layer count with nothing that uses it
        handoff_delay_ms(7500, 50.0, 131_072, num_layers=32)


def test_a_links_per_message_cost_applies_everywhere(entry_point):
    link = perfmodel.Link("descriptors", 50.0, per_message_ms=0.001)
    expected = 7500 * 131_072 / 50e9 * 1000 + 30_016 * 0.001
    np.testing.assert_allclose(entry_point([7500], link, "llama-3.1-8b", block_size=16), [expected], rtol=1e-12)
    np.testing.assert_allclose(
        entry_point([7500], 50.0, "llama-3.1-8b", block_size=16, per_message_ms=0.001), [expected], rtol=1e-12
    )  # (the command line's form: the link's terms as numbers)


# --- different TP on the two sides, against an enumeration of heads -----------------------------------


def _served_heads(heads: int, decode_tp: int) -> list[list[int]]:
    """The KV heads each decode rank holds: a share of them, or (more ranks than heads) one, replicated."""
    if decode_tp <= heads:
        share = heads // decode_tp
        return [list(range(r * share, (r + 1) * share)) for r in range(decode_tp)]
    return [[r * heads // decode_tp] for r in range(decode_tp)]


@given(
    heads=st.sampled_from([1, 2, 4, 8, 16]),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    decode_tp=st.sampled_from([1, 2, 4, 8, 16]),
    layers=st.integers(1, 100),
    head_dim=st.sampled_from([64, 128]),
    mla=st.booleans(),
)
def test_decode_tp_bytes_equal_an_enumeration_of_heads(heads, tp, decode_tp, layers, head_dim, mla):
    config = {
        "num_hidden_layers": layers,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": heads,
        "head_dim": head_dim,
    }
    if mla:
        config.update(kv_lora_rank=512, qk_rope_head_dim=64)
        per_rank = [(512 + 64) * 2 * layers] * decode_tp  # every decode rank holds the whole latent
    else:
        per_rank = [len(served) * 2 * head_dim * 2 * layers for served in _served_heads(heads, decode_tp)]
    group = sum(per_rank)
    busiest = max(*per_rank, math.ceil(group / tp))  # the busiest receiver, or sender (they share evenly)
    assert kv_bytes_per_token(config, tp=tp, decode_tp=decode_tp, scope="group") == group
    assert kv_bytes_per_token(config, tp=tp, decode_tp=decode_tp) == busiest


# --- fits with a per-message cost ---------------------------------------------------------------------


def test_the_page_size_pair_fits_one_per_message_cost():
    # 7,500 tokens of a 32-layer model over NVLink: 20 ms at 16-token pages, 8 ms at 128 (the same bytes)
    nbytes = float(perfmodel.kv_bytes("llama-3.1-8b", 7500))
    pages = [int(kv_messages("llama-3.1-8b", 7500, size)) for size in (16, 128)]
    link = fit_link([nbytes, nbytes], [20.0, 8.0], n_messages=pages, name="lmcache-nvlink")
    assert 0.19e-3 <= link.per_message_ms <= 1.03e-3  # the microbenchmarks' range, in ms
    assert link.fit.max_relative_error < 1e-9 and link.latency_ms == 0.0
    assert "latency cannot be told apart" in link.fit.note
    assert link.fit.parameters["per_message_ms"] == link.per_message_ms
    assert "us per message" in link.fit.describe()


def test_blocks_proportional_to_bytes_fit_the_bandwidth_and_say_so():
    nbytes = np.array([1e6, 4e6, 16e6, 64e6])
    link = fit_link(nbytes, nbytes / 20e9 * 1000 + 0.01, n_blocks=nbytes / 65536, n_messages=nbytes / 65536 * 64)
    assert "per-block cost cannot be told apart" in link.fit.note and "per-message cost" in link.fit.note
    assert link.per_block_ms == 0.0 and link.per_message_ms == 0.0 and link.fit.max_relative_error < 1e-9


def _published(name: str):
    """(engine, bytes, measured ms, messages per transfer) of each engine of a shipped microbenchmark table."""
    table = perfmodel.datasets.load(name)
    if name == "mooncake-te-efa":
        table = table[table["citation"].str.contains("block_size sweep")]
    messages = {"fastdeploy-rdma-blocksize": 1538, "mooncake-te-efa": 1, "lmcache-nixl-iov": 256}[name]
    for engine, part in table.groupby(table["notes"].str.split(";").str[0]):
        nbytes = part["nbytes"].to_numpy(float) * (messages if name.startswith("fastdeploy") else 1)
        yield engine, nbytes, nbytes / (part["measured_gb_s"].to_numpy(float) * 1e9) * 1000, messages


@pytest.mark.filterwarnings("ignore:the fit is far:UserWarning", "ignore:the best measured throughput:UserWarning")
@pytest.mark.parametrize("name", ["fastdeploy-rdma-blocksize", "mooncake-te-efa", "lmcache-nixl-iov"])
def test_every_shipped_microbenchmark_fits_at_least_as_well_with_messages(name):
    engines = list(_published(name))
    assert len(engines) >= 2, [engine for engine, *_ in engines]  # (each table compares engines)
    for engine, nbytes, measured, messages in engines:
        by_block = fit_link(nbytes, measured, n_blocks=messages)
        by_message = fit_link(nbytes, measured, n_messages=messages)
        assert by_message.fit.max_relative_error <= by_block.fit.max_relative_error * (1 + 1e-9), engine
        assert 0.05e-3 < by_message.per_message_ms < 1.1e-3, engine  # 0.05-1.1 us per message


# --- transport profiles ---------------------------------------------------------------------------------


def test_transport_profiles_carry_their_source_and_fit():
    profiles = transport_profiles()
    assert {"fastdeploy-rdma", "mooncake-te-rdma", "uccl-rdma", "nixl-ucx-rdma"} <= set(profiles)
    for name, link in profiles.items():
        assert link.source and link.fit is not None and link.per_message_ms > 0, name
        assert perfmodel.get_link(name) is link and perfmodel.get_link(f"2x {name}").bandwidth_gb_s == pytest.approx(
            2 * link.bandwidth_gb_s
        )
    assert profiles["uccl-rdma"].per_message_ms == pytest.approx(0.186e-3, rel=0.01)
    with pytest.raises(InputError, match="built-in"):  # (a profile's name is taken, as a line rate's is)
        perfmodel.network.links.save_link(perfmodel.Link("uccl-rdma", 10.0))


@pytest.mark.parametrize(
    ("profile", "engine"), [("uccl-rdma", "Direct UCCL dual-rail"), ("nixl-uccl-rdma", "NIXL/UCCL dual-rail")]
)
def test_two_rails_of_a_profile_predict_the_held_out_dual_rail_table(profile, engine):
    """Fitted on one rail, the profile's multiple predicts the two-rail measurements it never saw."""
    two = perfmodel.get_link(f"2x {profile}")
    ((_, nbytes, measured, messages),) = [row for row in _published("lmcache-nixl-iov") if row[0] == engine]
    errors = np.abs(two.transfer_ms(nbytes, messages=messages) - measured) / measured
    assert errors.max() < 0.15 and errors.mean() < 0.05  # (the smallest transfer: 13.5%; the rest within 2%)


def test_links_lists_profiles_with_their_source():
    done = run("links")
    assert done.returncode == 0, done.stderr
    assert "uccl-rdma" in done.stdout and "LMCache pull request 4161" in done.stdout and "per_message_us" in done.stdout


def test_models_shows_a_prefill_to_decode_pair():
    done = run("models", "--tp", "8", "--decode-tp", "2")
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.strip().startswith("llama-3.1-70b"))
    assert "163840" in line and "327680" in line and "tp8->tp2" in done.stdout


# --- calibrate ----------------------------------------------------------------------------------------


def test_calibrate_turns_tokens_into_bytes_and_messages(tmp_path):
    tokens = np.array([1000, 4000, 16000, 64000])
    link = perfmodel.Link("truth", 40.0, per_message_ms=0.0005)
    measured = link.transfer_ms(
        perfmodel.kv_bytes("llama-3.1-70b", tokens, tp=8, decode_tp=2),
        messages=kv_messages("llama-3.1-70b", tokens, 16),
    )
    pd.DataFrame({"num_input_tokens": tokens, "measured_ms": measured}).to_csv(tmp_path / "e2e.csv", index=False)
    done = run(
        "calibrate",
        str(tmp_path / "e2e.csv"),
        "--name",
        "ours",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "8",
        "--decode-tp",
        "2",
        "--block-size",
        "16",
        "--link",
        "ib-ndr",
        "--no-save",
        "--out",
        str(tmp_path / "c"),
    )
    assert done.returncode == 0, done.stderr
    assert "0.5 us per message" in done.stdout and "40 GB/s" in done.stdout, done.stdout
    assert "ib-ndr" in done.stdout  # the link named is the comparison


def test_calibrate_refuses_a_column_whose_unit_it_cannot_tell(tmp_path):
    pd.DataFrame({"nbytes": [1e6, 1e7], "measured_gbps": [10.0, 20.0]}).to_csv(tmp_path / "m.csv", index=False)
    done = run("calibrate", str(tmp_path / "m.csv"), "--name", "x", "--no-save", "--out", str(tmp_path / "c"))
    assert done.returncode == 2 and "measured_gbps" in done.stderr and "measured_gib_s" in done.stderr
    assert not (tmp_path / "c").exists()


# --- the inverse questions with per-block and per-message costs ---------------------------------------


@given(
    tokens=st.integers(1, 200_000),
    budget=st.floats(1.0, 5000.0),
    block=st.sampled_from([16, 64, 256]),
    per_message_us=st.floats(0.05, 2.0),
    layout=st.sampled_from(LAYOUTS),
    model=st.sampled_from(["llama-3.1-8b", "deepseek-v3", "gemma-3-27b"]),
)
def test_the_inverse_questions_answer_the_forward_model_with_messages(
    tokens, budget, block, per_message_us, layout, model
):
    costs = dict(per_message_ms=per_message_us / 1000, block_size=block, kv_layout=layout)
    needed = perfmodel.required_bandwidth(tokens, model, budget_ms=budget, **costs)
    if np.isfinite(needed):  # the least bandwidth that meets the budget
        assert handoff_delay_ms(tokens, needed, model, **costs) <= budget
        assert handoff_delay_ms(tokens, np.nextafter(needed, 0), model, **costs) > budget
    else:  # the messages alone exceed the budget
        assert handoff_delay_ms(tokens, np.inf, model, **costs) > budget
    link = perfmodel.Link("profile", 20.0, per_message_ms=per_message_us / 1000)
    longest = perfmodel.max_tokens_within(link, model, budget_ms=budget, block_size=block, kv_layout=layout)
    assert 0 <= longest < 2**40, longest  # (the messages grow with the prompt: some prompt is too long)
    assert handoff_delay_ms(longest, link, model, block_size=block, kv_layout=layout) <= budget
    assert handoff_delay_ms(longest + 1, link, model, block_size=block, kv_layout=layout) > budget


# --- per-request contiguity in replays (blocks_per_message a value, an array or a trace column) ---------------


@pytest.mark.parametrize("link", ["ib-ndr", "hgx-h100-8x400g"])
def test_a_replay_reads_each_requests_contiguity_as_the_numpy_api_does(link):
    """An allocator's contiguity differs from request to request: a column of blocks merged into a message gives
    each handoff alone the numpy API's delay for its own value, on a link and on a cluster, in the TTFT replay too."""
    trace = perfmodel.synthetic_trace(60, rate_per_s=1.0, seed=5)
    trace["contiguity"] = np.resize([1.0, 4.0, np.inf], len(trace))
    costs = dict(model="llama-3.1-70b", tp=8, per_message_ms=0.0005, block_size=16)
    replay = perfmodel.replay_handoffs(trace, link=link, blocks_per_message="contiguity", **costs)
    alone = perfmodel.handoff_delay_ms(trace["num_input_tokens"], link, "llama-3.1-70b", tp=8, per_message_ms=0.0005,
                                       block_size=16, blocks_per_message=trace["contiguity"])  # fmt: skip
    np.testing.assert_allclose(replay["handoff_delay_ms"], alone, rtol=1e-12)
    as_array = perfmodel.replay_handoffs(trace, link=link, blocks_per_message=trace["contiguity"].to_numpy(), **costs)
    pd.testing.assert_frame_equal(replay, as_array)
    ttft = perfmodel.replay_ttft(trace, link, "llama-3.1-70b", tp=8, per_message_ms=0.0005, block_size=16,
                                 blocks_per_message="contiguity")  # fmt: skip
    np.testing.assert_allclose(ttft["handoff_delay_ms"], alone, rtol=1e-12)


def test_a_contiguity_column_with_a_bad_value_is_refused_naming_its_row():
    trace = perfmodel.synthetic_trace(5, rate_per_s=1.0, seed=5)
    trace["contiguity"] = [1.0, 2.0, 0.5, 4.0, 1.0]
    with pytest.raises(InputError) as raised:
        perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", per_message_ms=0.0005, block_size=16,
                                  blocks_per_message="contiguity")  # fmt: skip
    assert str(raised.value).startswith("blocks_per_message:") and "row 2" in str(raised.value)


def test_a_replay_refuses_booleans_per_request_as_the_numpy_api_does():
    trace = perfmodel.synthetic_trace(4, rate_per_s=1.0, seed=5).assign(flag=[True, False, True, True])
    call = dict(per_message_ms=0.0005, block_size=16)
    for value in (True, np.True_, "flag", np.array([True] * 4)):
        with pytest.raises(InputError, match="blocks_per_message: got booleans"):
            perfmodel.replay_handoffs(trace, "ib-ndr", "llama-3.1-8b", blocks_per_message=value, **call)
    with pytest.raises(InputError, match="prefill_ms: got booleans"):
        perfmodel.replay_ttft(trace, "ib-ndr", "llama-3.1-8b", prefill_ms=True)


def test_a_grid_over_contiguity_with_inf_draws_it_as_a_label(tmp_path):
    from perfmodel.cli import main

    trace = tmp_path / "t.csv"
    pd.DataFrame({"arrival_ms": [0.0, 10.0, 20.0], "num_input_tokens": [1000, 2000, 3000]}).to_csv(trace, index=False)
    words = ["trace", str(trace), "--link", "ib-ndr", "--model", "llama-3.1-70b", "--per-message-ms", "0.001",
             "--block-size", "16", "--grid", "blocks_per_message=1,4,inf", "--out", str(tmp_path / "grid")]  # fmt: skip
    assert main(words) == 0
    assert (tmp_path / "grid" / "grid.png").stat().st_size > 0
