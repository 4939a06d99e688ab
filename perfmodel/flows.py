"""Why a handoff on a cluster takes what it takes: its flows, their paths, rates and bottlenecks, as tables."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import numpy as np
import pandas as pd

from .errors import InputError, check_whole, shown
from .inputs.coerce import text_number
from .inputs.resolve import with_connector
from .inputs.table import INPUTS
from .kernels.handoff import blocks_of, fixed_ms, messages_of
from .network.clusters import HeadTerms, alone, bottleneck_of, flow_bytes, flow_terms, head_terms, simulate
from .network.placement import get_cluster, refuse_model_options
from .replay import summaries as _questions

__all__ = ["handoff_flows", "required_nics_per_node", "resource_loads"]


#: The columns of :func:`handoff_flows` and their types (``bytes``: float64 where a flow carries part of a byte).
_COLUMNS = dict(src_rank=np.int64, dst_rank=np.int64, sub=np.int64, src_gpu=np.int64, dst_gpu=np.int64,
                heads=np.int64, bytes=np.int64, messages=np.float64, path=str, start_ms=np.float64,
                rate_gb_s=np.float64, time_ms=np.float64, bottleneck=str)


def _bytes_known(delay_ms: float, state_bytes: Any) -> None:
    """Refuse a handoff whose delay is NaN: its bytes are unknown (a NaN state, else NaN bytes per token)."""
    if math.isnan(delay_ms):
        unknown = "state_bytes" if state_bytes is not None and math.isnan(float(state_bytes)) \
            else "kv_bytes_per_token"
        raise InputError(unknown, "is NaN (unknown), so the flows' bytes are unknown", f"pass a number for {unknown} "
                         "(>= 0)" + (", or leave it out (the model's own)" if unknown == "state_bytes" else ""))


def _one_value_each(values: dict[str, Any]) -> dict[str, Any]:
    """``values``, each one value: an array where the one handoff of :func:`handoff_flows` takes one value is
    refused, naming the input."""
    for name, value in values.items():
        if np.ndim(value) != 0:
            raise InputError(name, f"handoff_flows describes one handoff, so it takes one value, got {np.size(value)}",
                             "pass one value (handoff_delay_ms takes an array per row)")
    return values


def _blocks_and_messages(n: int, model: Any, block_size: int | None, kv_layout: str,
                         blocks_per_message: float) -> tuple[float, float]:
    """(blocks, messages) one rank moves and posts for a full ``n``-token prompt of ``model`` (None: bytes given
    as a number, full-attention layers); (0, NaN) with no block size, and NaN messages (not counted) for bytes as
    a number in a layer layout, whose layers are unknown (the numpy API refuses a message cost there)."""
    from .model.models import kv_messages

    if not block_size:
        return 0.0, math.nan
    block = check_whole("block_size", block_size, smallest=1)
    blocks = float(blocks_of(n, block))
    if model is not None:
        return blocks, float(kv_messages(model, n, block, kv_layout=kv_layout, blocks_per_message=blocks_per_message))
    if kv_layout == "block":  # (a message per region of blocks)
        return blocks, float(messages_of(n, n, block, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, float(blocks_per_message)))
    return blocks, math.nan


def handoff_flows(num_input_tokens: int, cluster: Any, kv_bytes_per_token: Any, *, tp: int = 1,
                  decode_tp: int | None = None, kv_cache_dtype: str | None = None, state_bytes: float | None = None,
                  latency_ms: float = 0.0, per_message_ms: float = 0.0, per_block_ms: float = 0.0,
                  block_size: int | None = None, blocks_per_message: float = 1, kv_layout: str = "layer_kv",
                  connector: Any = None) -> pd.DataFrame:
    """The flows of one full-prompt handoff alone in a cluster (prefill worker 0 to decode worker 0).

    One row per (sub-)flow, in order of source rank, destination rank and sub-flow: who sends
    whom (ranks and global GPUs), the KV heads and bytes it carries, the messages its sending rank
    posts (NaN without a ``block_size``: not counted), its path (the resources it crosses, in
    order), when it starts moving bytes (its fixed costs, ms), its rate in its final rate interval
    (GB/s), when it ends (ms) and the resource that held it back then (precise rule 9; missing where
    none is saturated). The handoff's delay (its last flow's end) and bottleneck are in ``attrs``;
    :func:`resource_loads` gives each resource's load.

    Parameters
    ----------
    num_input_tokens
        The prompt's tokens (whole number >= 0), all charged.
    cluster
        A :class:`perfmodel.Cluster` or a cluster preset's name.
    kv_bytes_per_token
        A model (preset name, config or path), or a number of bytes (one GPU's, with ``tp=1``).
    tp, decode_tp, kv_cache_dtype, state_bytes, latency_ms, per_message_ms, per_block_ms, block_size, blocks_per_message, kv_layout, connector
        As for :func:`perfmodel.handoff_delay_ms` (costs in ms, added to the transport's and links'; a
        connector's cost per request and per descriptor added to ``latency_ms`` and ``per_message_ms``).

    Returns
    -------
    pandas.DataFrame
        Columns ``src_rank``, ``dst_rank``, ``sub``, ``src_gpu``, ``dst_gpu``, ``heads``, ``bytes`` (integers;
        floats where a replicated head's bytes are split over its holders), ``messages`` (float, NaN where not
        counted), ``path``, ``start_ms``, ``rate_gb_s``, ``time_ms``, ``bottleneck``;
        ``attrs["delay_ms"]``, ``attrs["bottleneck"]``, ``attrs["resources"]`` (name -> capacity GB/s).

    Examples
    --------
    >>> import perfmodel
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=4, gpus_per_node=8)
    >>> flows = perfmodel.handoff_flows(32_768, c, "llama-3.1-70b", tp=8)
    >>> flows[["src_rank", "dst_rank", "rate_gb_s", "time_ms", "bottleneck"]].head(2)
       src_rank  dst_rank  rate_gb_s    time_ms      bottleneck
    0         0         0       25.0  53.687091  node0/nic0/out
    1         1         1       25.0  53.687091  node0/nic0/out
    >>> round(flows.attrs["delay_ms"], 7), flows.attrs["bottleneck"]
    (53.6870912, 'node0/nic0/out')
    """
    from .handoff import handoff_delay_ms
    from .model.models import ModelShape

    one = _one_value_each(dict(tp=tp, decode_tp=decode_tp, kv_cache_dtype=kv_cache_dtype, state_bytes=state_bytes,
                               latency_ms=latency_ms, per_message_ms=per_message_ms, per_block_ms=per_block_ms,
                               block_size=block_size, blocks_per_message=blocks_per_message, kv_layout=kv_layout,
                               connector=connector))
    read = text_number(num_input_tokens)  # (text reads as the number it holds, as everywhere)
    c, n = get_cluster(cluster), check_whole("num_input_tokens", num_input_tokens if read is None else read)
    # every input checked through the edge every entry point shares, as handoff_delay_ms checks it
    asked = handoff_delay_ms(n, c, kv_bytes_per_token, **one)
    _bytes_known(asked, state_bytes)
    costs = with_connector(dict(latency_ms=latency_ms, per_message_ms=per_message_ms, block_size=block_size), connector)
    latency_ms, per_message_ms = costs.get("latency_ms", latency_ms), costs.get("per_message_ms", per_message_ms)
    shape = ModelShape(kv_cache_dtype=kv_cache_dtype, tp=tp, decode_tp=decode_tp)
    tp, d = shape.tp, shape.decode_degree
    number = isinstance(kv_bytes_per_token, (int, float, np.number)) and not isinstance(kv_bytes_per_token, bool)
    if number:
        refuse_model_options(tp, d, kv_cache_dtype)
        terms = HeadTerms(1, float(kv_bytes_per_token), state=float(state_bytes or 0.0))
    else:
        terms = head_terms(kv_bytes_per_token, kv_cache_dtype=kv_cache_dtype, decode_tp=d, state_bytes=state_bytes)
    resolved = alone(c, terms, tp, d)
    blocks, messages = _blocks_and_messages(n, kv_bytes_per_token if not number else None, block_size, kv_layout,
                                            blocks_per_message)
    counted = 0.0 if math.isnan(messages) else messages
    flows = resolved.flows
    sizes = [flow_bytes(flow_terms(f, terms), terms, n, n) for f in flows]
    kept = [k for k, b in enumerate(sizes) if b > 0]
    fixed = [flows[k].fixed_terms(c, latency_ms, per_message_ms, per_block_ms) for k in kept]
    starts = [float(fixed_ms(latency, blocks * per_block, counted * per_message))
              for latency, per_message, per_block in fixed]
    outcome = simulate(starts, [sizes[k] for k in kept], [flows[k].path for k in kept], resolved.resources.capacities)
    names = resolved.resources.names
    chosen = [flows[k] for k in kept]
    rows: list[dict[str, Any]] = []
    for position, (k, f) in enumerate(zip(kept, chosen)):
        neck = bottleneck_of(outcome, position)
        rows.append(dict(src_rank=f.src_rank, dst_rank=f.dst_rank, sub=f.sub, src_gpu=f.src_gpu, dst_gpu=f.dst_gpu,
                         heads=len(f.heads), bytes=sizes[k], messages=messages, path=" > ".join(names[r] for r in f.path),
                         start_ms=starts[position], rate_gb_s=outcome.final_rates[position],
                         time_ms=outcome.ends_ms[position], bottleneck="" if neck is None else names[neck]))
    whole = all(float(row["bytes"]).is_integer() and row["bytes"] < 2.0**53 for row in rows)  # (else heads spread
    # over holders, parts of bytes; or sizes past float64's whole numbers, which int64 may not hold: floats)
    table = pd.DataFrame(rows, columns=list(_COLUMNS)).astype({**_COLUMNS, "bytes": np.int64 if whole else np.float64})
    table["bottleneck"] = table["bottleneck"].mask(table["bottleneck"] == "")  # (none saturated: missing, not "")
    last = max(range(len(rows)), key=lambda i: (rows[i]["time_ms"], -i)) if rows else None
    table.attrs.update(delay_ms=0.0 if last is None else rows[last]["time_ms"],
                       bottleneck=None if last is None else rows[last]["bottleneck"] or None, cluster=c.name,
                       resources=dict(zip(names, resolved.resources.capacities)))
    return table


#: The columns of :func:`resource_loads` and their types.
_LOAD_COLUMNS = dict(kind=object, capacity_gb_s=np.float64, flows=np.int64, bytes=np.float64, busy_ms=np.float64,
                     bottleneck=bool)


def resource_loads(flows: pd.DataFrame) -> pd.DataFrame:
    """Each resource a handoff's flows cross: its capacity, the flows crossing it, the bytes it carries,
    its busy time at capacity (bytes / capacity, ms) and whether it is the handoff's bottleneck.

    Parameters
    ----------
    flows
        A table of :func:`handoff_flows`.

    Returns
    -------
    pandas.DataFrame
        One row per resource (by name): ``kind``, ``capacity_gb_s``, ``flows``, ``bytes``, ``busy_ms``,
        ``bottleneck``.

    Examples
    --------
    >>> import perfmodel
    >>> c = perfmodel.Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)
    >>> loads = resource_loads(perfmodel.handoff_flows(32_768, c, "llama-3.1-70b", tp=8, decode_tp=2))
    >>> row = loads.loc["node1/nic0/in"]
    >>> int(row["flows"]), round(float(row["busy_ms"]), 7), bool(row["bottleneck"])
    (4, 107.3741824, True)
    """
    if not isinstance(flows, pd.DataFrame) or "path" not in flows or "resources" not in flows.attrs:
        raise InputError("flows", "is not a table of perfmodel.handoff_flows", "pass handoff_flows(...)'s result")
    capacities = flows.attrs["resources"]
    carried: dict[str, list[float]] = {name: [] for name in capacities}
    for path, nbytes in zip(flows["path"], flows["bytes"]):
        for name in path.split(" > "):
            carried[name].append(nbytes)
    rows = {name: dict(kind=next(part.rstrip("0123456789") for part in reversed(name.split("/"))
                                 if part.rstrip("0123456789") in ("nic", "pcie", "leaf", "nvlink")),
                       capacity_gb_s=capacities[name], flows=len(sizes), bytes=float(sum(sizes)),
                       busy_ms=float(sum(sizes)) / (capacities[name] * 1e9) * 1000.0 if capacities[name] else math.inf,
                       bottleneck=name == flows.attrs["bottleneck"])
            for name, sizes in carried.items() if sizes}
    # (the columns, typed, even where the flows move nothing and no resource carries a byte)
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(_LOAD_COLUMNS)).astype(_LOAD_COLUMNS)


#: The most NICs per GPU :func:`required_nics_per_node` tries (AWS p5 nodes have four EFA devices per GPU), as
#: :func:`perfmodel.required_nics` does.
MAX_NICS_PER_GPU = _questions.MAX_NICS_PER_GPU


@_questions.without_coerce_hint
def required_nics_per_node(num_input_tokens: Any, cluster: Any, kv_bytes_per_token: Any, *, budget_ms: float,
                           **inputs: Any) -> np.ndarray:
    """The fewest NICs per node with which a full-prompt handoff alone in ``cluster`` meets ``budget_ms``: per
    prompt, each handoff alone (no contention), the whole TP group's flows over the node's NICs. For a trace's
    p99 under load, :func:`perfmodel.required_nics` replays it on each count.

    The NIC counts tried, the cluster otherwise as it is: the divisors of ``gpus_per_node`` (GPUs sharing a
    NIC), then 2 to :data:`MAX_NICS_PER_GPU` (4) NICs per GPU, as many as shipping nodes have (a cluster takes
    up to 8 per GPU: price more with :func:`perfmodel.handoff_delay_ms` on such a cluster); counts its PCIe
    switches cannot take are skipped. The answer is the smallest count whose delay
    (:func:`perfmodel.handoff_delay_ms` with the same inputs) is within the budget. A handoff that crosses no
    NIC (both workers in one NVLink domain) meets it with any count: the answer is then the smallest. This
    prices each handoff alone; under load, replay the trace on the candidates (:func:`perfmodel.replay_grid`
    with a ``nics_per_node`` axis).

    Parameters
    ----------
    num_input_tokens
        Prompt tokens (a number or an array).
    cluster
        A :class:`perfmodel.Cluster` or a cluster preset name.
    kv_bytes_per_token
        The model (a preset name or config), as :func:`perfmodel.handoff_delay_ms` takes it.
    budget_ms
        The handoff delay to stay within (ms, > 0).
    **inputs
        Any other input of :func:`perfmodel.handoff_delay_ms` (``tp``, ``decode_tp``, ``kv_cache_dtype``,
        ``block_size``...).

    Returns
    -------
    numpy.ndarray
        float64 NICs per node for each prompt: ``inf`` where no count tried meets the budget (even
        :data:`MAX_NICS_PER_GPU` NICs per GPU are too slow, or the fixed costs alone exceed it), NaN where
        no handoff is modeled. Counts the cluster cannot be built with (its PCIe switches, NIC map or NICs
        down) are not tried, and a warning names them.

    Examples
    --------
    >>> import perfmodel
    >>> perfmodel.required_nics_per_node([4096, 32_768, 131_072], "hgx-h100-8x400g", "llama-3.1-70b",
    ...                                  tp=8, budget_ms=50).tolist()
    [1.0, 8.0, 24.0]
    """
    from .handoff import handoff_delay_ms

    for name in inputs:  # (as the other inverse questions refuse them: never Python's TypeError, nor a count replaced)
        if name not in INPUTS or name in ("num_input_tokens", "kv_transfer_bandwidth", "kv_bytes_per_token"):
            raise InputError(name, "is not an input of this question (given as its own argument, or unknown)",
                             f"drop {name}, or ask handoff_delay_ms")
        if name == "nics_per_node":
            raise InputError(name, "is what required_nics_per_node searches", "drop nics_per_node")
    base = get_cluster(cluster)
    number = isinstance(budget_ms, (int, float, np.integer, np.floating)) and not isinstance(budget_ms, bool)
    budget = float(budget_ms) if number else math.nan
    if not (math.isfinite(budget) and budget > 0):
        raise InputError("budget_ms", f"{shown(budget_ms)} is not a finite number of ms > 0", "pass budget_ms > 0")
    from .replay.sizing import buildable

    # (the counts perfmodel.required_nics tries on a cluster too; those its PCIe switches, NIC map or NICs down
    # cannot take skipped, and said, by the one helper every sizing question shares)
    built = buildable("required_nics_per_node", base.name, _questions.nic_counts(base.gpus_per_node),
                      lambda count: dataclasses.replace(base, nics_per_node=count))
    answer, missing = None, None
    for count, candidate in reversed(built):  # from the most down: each count that meets the budget replaces it
        delay = np.asarray(handoff_delay_ms(num_input_tokens, candidate, kv_bytes_per_token, **inputs),
                           dtype=np.float64)
        if answer is None:
            answer, missing = np.full(delay.shape, np.inf), np.isnan(delay)
        answer = np.where(delay <= budget, float(count), answer)
    return np.where(cast(np.ndarray, missing), np.nan, cast(np.ndarray, answer))  # (base's own count is one)
