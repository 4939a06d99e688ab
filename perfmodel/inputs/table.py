"""Every input of the model, declared once.

One :class:`Input` per argument says what it is (meaning and unit), how it is read
(``kind``), its default and the value that turns its extension off, which values are
valid (a :class:`Valid` range, the same one the kernel compiles in and the error path
tests in numpy) with the text of the fix, whether it may be an array or a column, and
its names elsewhere: command-line flag, sweep axis, replay-grid axis. The rules that
tie inputs together (:func:`layerwise_given`, :data:`CROSS`) are written here once.

Everything else follows from the table: the kernel's record and validity checks
(:mod:`perfmodel.kernels.handoff`), the coercion and error messages of the numpy API, the
facade's column lookups, the parameter sections of the public docstrings
(:func:`documented`), and the generated tests (``tests/test_inputs.py``), which take
every input through every entry point.
"""

from __future__ import annotations

import inspect
import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, overload

import numpy as np

from ..errors import InputError, check_choice, check_whole, shown
from .codes import TransferMode, WorkerType, choice_names

__all__ = ["GRID_AXES", "INPUTS", "OPTIONS", "ROW_INPUTS", "SWEEP_AXES", "Input", "Valid", "documented", "flags"]

_INF = math.inf
#: An :attr:`Input.replay_default` not given: the replay's default is the input's ``default``.
SAME = "as default"


class Valid(NamedTuple):
    """The valid values of a number: ``low`` (inclusive unless ``open_low``) to ``high``, whole or
    not, and whether NaN (missing / unknown) and +inf are allowed. A plain tuple of numbers and
    flags, so numba compiles it into the kernel as constants."""

    low: float = 0.0
    high: float = _INF
    whole: bool = False
    nan_ok: bool = True
    inf_ok: bool = False
    open_low: bool = False


def outside(x: Any, valid: tuple) -> Any:
    """Whether ``x`` (a number, or a numpy array elementwise) is outside its :class:`Valid` range.

    Operators only, so that one body serves numpy (the error path) and numba (the kernel, where
    the range is constant and the tests fold away).

    >>> with np.errstate(invalid="ignore"):  # (inf - floor(inf) is NaN)
    ...     outside(np.array([-1.0, 0.5, np.nan, np.inf, 3.0]), Valid(whole=True))
    array([ True,  True, False,  True, False])
    """
    low, high, whole, nan_ok, inf_ok, open_low = valid
    return (
        ((x != x) & (not nan_ok))  # noqa: PLR0124 (NaN test in one body for numpy and numba, see above)
        | (x < low) | ((x == low) & open_low) | (x > high)
        | ((x == _INF) & (not inf_ok))
        | ((x - np.floor(x) > 0) & whole)  # (False for NaN and inf)
    )


@dataclass(frozen=True)
class Input:
    """One input of the model: everything every entry point needs to know of it."""

    name: str
    doc: str  # the docstring line (numpydoc body), unit included
    kind: str  # count (int64 or float64, as given) | real (float64) | code | flag | choice | degree (a whole number >= 1) | option | name (presets, configs, objects)
    default: Any = inspect.Parameter.empty  # the public signature's default (empty: required)
    kernel_default: Any = None  # the kernel's value when the caller gives None
    valid: Valid | None = None  # numbers: the valid range (the kernel's and the error path's)
    rule: str = ""  # the valid values in words (the fix of an error)
    labels: dict[str, int] | None = None  # codes and flags: the accepted names
    choices: tuple[str, ...] = ()  # choice options
    group: str = "core"  # core | block | layerwise | option | shape (options that shape the bytes of a model);
    # an extension's inputs (block, layerwise) are off together
    off: Any = None  # the value that turns its extension off (compiled away when all of a group are)
    cli: str | None = None  # its command-line flag
    axis: bool | str = False  # a sweep axis (and a flag of perfmodel sweep): True, or the axis' own name
    grid_axis: bool | str = False  # a replay-grid axis: True, or the axis' own name
    replay: str | None = None  # in a replay: "request" (a value, array or trace column), "one" (one value), None
    example: Any = None  # a valid value that is not the default (the generated tests use it)
    instead_of: str | None = None  # another input this one replaces (given one or the other)
    alias_of: str | None = None  # the input this one names in other words (a model for its bytes per token)
    replay_default: Any = SAME  # the replay's default, where it differs from ``default`` (upstream's replay's)

    @property
    def default_in_replay(self) -> Any:
        """The default of this input in :func:`perfmodel.replay_handoffs` (and a replay grid)."""
        return self.default if self.replay_default == SAME else self.replay_default

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    @property
    def code_limit(self) -> int:
        """The largest valid code of a code or flag."""
        assert self.valid is not None, self.name  # (every code and flag has a range)
        return int(self.valid.high)


_WORKER_NAMES = {m.name.lower(): m.value for m in WorkerType}
_MODE_NAMES = {m.name.lower(): m.value for m in TransferMode}
#: Token counts: whole, and below 2**53, where float64 (the kernel's arithmetic) still tells one count from the next.
_TOKENS = Valid(high=2.0**53, whole=True)

#: The largest count of things a replay or a cluster builds a table of (links, workers, nodes, GPUs and NICs
#: per node, NVLink domains, tensor-parallel degrees): 2**20. The largest clusters built hold about 10**5 GPUs;
#: 2**20 leaves ten times that, and keeps every table such a count sizes within a machine's memory (a
#: larger value is refused up front, never a MemoryError).
MAX_COUNT = 2**20
_COUNT = Valid(low=1, high=MAX_COUNT, whole=True, nan_ok=False)
#: The largest layer count: models have at most a few hundred layers; 2**16 leaves a hundred times that.
MAX_LAYERS = 2**16


def _count_rule(name: str, what: str) -> str:
    if name in CLUSTER_BOUNDS:
        bound, why = CLUSTER_BOUNDS[name]
        return f"pass {name} as a whole number of {what} from 1 to {bound:,} ({why})"
    return f"pass {name} as a whole number of {what} from 1 to 1,048,576 (2**20, ten times the largest clusters built)"


class ClusterField(NamedTuple):
    """One field of a :class:`perfmodel.Cluster`: what it is, its valid values and default, and its axis.

    ``type``: ``count`` (a whole number from 1 to ``valid.high``), ``real`` (a finite number in ``valid``),
    ``choice`` (a name of :data:`perfmodel.inputs.codes.CHOICES`), ``link``, ``transport``, ``nics`` (NIC indices
    within a node) or ``text``. A field with an
    ``example`` is an axis of sweeps and replay grids (and a flag of the command line)."""

    name: str
    type: str
    valid: Valid | None  # counts and reals: the valid range (the Cluster's check, and its axis')
    default: Any  # the Cluster's default (inspect.Parameter.empty: required)
    doc: str  # the axis' words: what it is, its unit
    example: Any = None  # a valid value that is not the default; None: not an axis
    why: str = ""  # a count bounded below MAX_COUNT: the reason of its bound
    counted: str = ""  # a count: what it counts (the words of its rule)
    rule: str = ""  # a real: how to give it (the fix of an error naming a value outside its range)


def _bounded(high: int) -> Valid:
    """The range of a count of a cluster's node, from 1 to ``high``."""
    return Valid(low=1, high=high, whole=True, nan_ok=False)


_REQUIRED = inspect.Parameter.empty
#: Every field of a :class:`perfmodel.Cluster`, in its order: the Cluster's defaults and checks, the bounds of the
#: counts of a node that size a handoff's flows (its GPUs' NICs split each flow into sub-flows, which share
#: resources max-min fairly: work that grows faster than their number; the largest systems shipping, and room
#: above them), and the axes over clusters' fields.
CLUSTER_TABLE: tuple[ClusterField, ...] = (
    ClusterField("nic", "link", None, _REQUIRED, "the NIC (a link name or :class:`perfmodel.Link`)", "ib-xdr"),
    ClusterField("nics_per_node", "count", _bounded(64), _REQUIRED, "NICs per node", 4, counted="NICs",
                 why="AWS p5 nodes carry 32 NICs, the most shipping; 64 leaves twice that"),
    ClusterField("gpus_per_node", "count", _bounded(64), _REQUIRED, "GPUs per node", 4, counted="GPUs",
                 why="the largest nodes shipping hold 16 GPUs (DGX-2, HGX-2); 64 leaves four times that"),
    ClusterField("nodes", "count", _COUNT, None, "the cluster's size in nodes", 4, counted="nodes"),
    ClusterField("transport", "transport", None, None,
                 "the transport (a profile's name or :class:`perfmodel.Transport`)", "mooncake-te-rdma"),
    ClusterField("nvlink_domain", "count", _bounded(1152), 1, "GPUs joined by NVLink", 8, counted="GPUs",
                 why="the largest NVLink domain announced joins 576 GPUs (NVL576); 1,152 leaves twice that"),
    ClusterField("nvlink", "link", None, None, "the NVLink port of each GPU (a link name or :class:`perfmodel.Link`)"),
    ClusterField("fabric", "choice", None, "flat", "``\"flat\"`` or ``\"rail\"``", "rail"),
    ClusterField("oversubscription", "real", Valid(low=1.0, nan_ok=False), 1.0,
                 "a rail fabric's oversubscription (>= 1)", 2.0,
                 rule="pass oversubscription as a number >= 1 (1: non-blocking)"),
    ClusterField("hop_latency_ms", "real", Valid(nan_ok=False), 0.0, "ms per switch crossed", 0.003,
                 rule="pass hop_latency_ms as a finite number of ms >= 0"),
    ClusterField("gpus_per_pcie_switch", "count", _bounded(64), None, "GPUs behind one PCIe switch", 2,
                 counted="GPUs", why="at most a node's GPUs"),
    ClusterField("pcie_switch_gb_s", "real", Valid(open_low=True, nan_ok=False), None,
                 "each PCIe switch's GB/s each way", 64.0,
                 rule="pass pcie_switch_gb_s as a finite number of GB/s > 0"),
    ClusterField("nic_map", "nics", None, None, "the NIC each GPU of a node uses (a NIC index per GPU; default: GPU "
                 "i uses NIC floor(i * nics / GPUs))"),
    ClusterField("nics_down", "nics", None, (), "NICs down on every node (NIC indices; on a rail fabric, rails "
                 "down): a GPU whose NIC is down uses the next NIC up"),
    ClusterField("host_bridge_gb_s", "real", Valid(open_low=True, nan_ok=False), None,
                 "GB/s each way through the host between a node's PCIe switches, crossed by a GPU's flows to a NIC "
                 "behind another switch", rule="pass host_bridge_gb_s as a finite number of GB/s > 0"),
    ClusterField("name", "text", None, "cluster", "a label for tables and plots"),
)
#: The table's fields by name.
CLUSTER_FIELD: dict[str, ClusterField] = {f.name: f for f in CLUSTER_TABLE}
#: The bound of each count of a cluster's node that has one below :data:`MAX_COUNT`, with its reason (from the table).
CLUSTER_BOUNDS: dict[str, tuple[int, str]] = {
    f.name: (int(f.valid.high), f.why) for f in CLUSTER_TABLE if f.why and f.valid is not None
}
#: The most NICs per GPU a cluster takes (each of a GPU's flows is that many sub-flows): AWS p5 gives each GPU
#: four EFA cards, the most shipping; 8 leaves twice that.
MAX_NICS_PER_GPU = 8
#: The largest tensor-parallel degree of a worker on a cluster (a handoff is up to that many flows per NIC of a
#: GPU): a tensor-parallel group spans at most an NVLink domain in practice (72 GPUs shipping, 576 announced:
#: NVL576). At the bounds (576 ranks, 8 NICs each) a handoff alone is 4,608 flows, a few seconds.
MAX_CLUSTER_TP = 576


#: The kind of input (:attr:`Input.kind`) of each type of cluster field, as an axis.
_AXIS_KIND = {"count": "degree", "real": "real", "choice": "choice", "link": "name", "transport": "name"}
#: The per-row inputs, in the kernel's record order.
ROW_INPUTS: tuple[Input, ...] = (
    Input("num_input_tokens", "Prompt tokens, whole numbers >= 0; NaN marks a missing count.", "count",
          valid=_TOKENS, rule="token counts are whole numbers from 0 to 2**53 (NaN marks a missing count)",
          cli="--tokens", axis=True,
          example=4096),
    Input("kv_transfer_bandwidth",
          "Link bandwidth in decimal GB/s (1 GB = 1e9 bytes). NaN (unknown) or 0 (disabled): no delay is "
          "modeled (NaN, or ``fallback_delay_ms``); +inf: 0 ms. Also a link preset name (``\"ib-ndr\"``, "
          "``\"8x ib-ndr\"``), a :class:`perfmodel.Link` (its latency and per-block cost are added), a "
          ":class:`perfmodel.Cluster` or cluster preset name (``\"hgx-h100-8x400g\"``: the handoff's flows share "
          "its NICs, switches and NVLink ports; see :doc:`the clusters page </clusters>`) or an array of these.",
          "real", valid=Valid(inf_ok=True),
          rule="bandwidth is in decimal GB/s and >= 0 (0 or NaN: no delay modeled; +inf: free transfer)",
          cli="--bandwidth", axis=True, grid_axis=True,
          example=50.0, replay="one", replay_default=None),
    Input("kv_bytes_per_token",
          "KV-cache bytes per token (>= 0); NaN marks unknown, like a missing bandwidth. Also a model preset "
          "name, a Hugging Face config dict or ``config.json`` path, or an array of these (see "
          "``kv_cache_dtype``, ``tp`` and ``scope``): a model with sliding-window, chunked-attention or "
          "linear-attention layers moves the bytes of :class:`perfmodel.KVTerms`.", "count", valid=Valid(),
          rule="KV bytes per token are finite numbers >= 0 (NaN marks unknown)",
          cli="--kv-bytes-per-token", axis=True, grid_axis=True,
          example=1000.0, replay="request", replay_default=None),
    Input("worker_type", ":class:`perfmodel.WorkerType`, its code (0/1/2) or name (``\"prefill\"``). Only a "
          "prefill worker pays a handoff.", "code", default=WorkerType.PREFILL, valid=Valid(high=2, whole=True),
          rule="worker types are aggregated/prefill/decode, their codes 0/1/2 or WorkerType members",
          labels=_WORKER_NAMES,
          example="decode"),
    Input("completed", "Whether the prefill emitted its terminal token (bool). Only completed prefills pay.",
          "flag", default=True, valid=Valid(high=1, whole=True), rule="completed is True/False (or 1/0)",
          labels={"true": 1, "false": 0},
          example=False),
    Input("mode", ":class:`perfmodel.TransferMode`, its code or name: charge the full prompt, or only "
          "``destination_missing_tokens``.", "code", default=TransferMode.FULL_PROMPT,
          valid=Valid(high=1, whole=True),
          rule="modes are full_prompt/destination_missing, their codes 0/1 or TransferMode members",
          labels=_MODE_NAMES, cli="--mode", axis=True, grid_axis=True,
          example="destination_missing", replay="one", replay_default="full_prompt"),
    Input("destination_missing_tokens", "Tokens the decode worker lacks (whole numbers >= 0; see "
          ":func:`perfmodel.destination_missing_tokens`); required where ``mode`` is destination_missing.",
          "count", default=None, kernel_default=np.nan, valid=_TOKENS,
          rule="destination-missing token counts are whole numbers from 0 to 2**53 (NaN marks a missing count)",
          example=1024),
    Input("state_bytes", "Extra bytes of every completed handoff, moved even when 0 tokens are charged (the "
          "recurrent state of hybrid models), counted as bytes per token given as a number are: one rank's "
          "(``scope=\"rank\"``), the group's (``scope=\"group\"``), each decode rank's on a cluster. "
          "Default: the model's state so counted (``kv_terms(model, tp=..., decode_tp=..., scope=...).state_bytes``; "
          "on a cluster ``kv_terms(model, tp=decode_tp)``), 0 when bytes per token are numbers; "
          "given, it replaces the model's.", "real", default=None, kernel_default=0, valid=Valid(),
          rule="state bytes are finite numbers >= 0 (NaN marks unknown)",
          cli="--state-bytes", axis=True, grid_axis=True,
          example=1e6, replay="request"),
    Input("latency_ms", "Fixed setup latency (ms) added to each transfer that moves more than 0 bytes "
          "(added to a link's own).", "real", default=0.0, kernel_default=0.0, valid=Valid(nan_ok=False),
          rule="latency is a finite number of milliseconds >= 0",
          cli="--latency-ms", axis=True, grid_axis=True,
          example=0.5, replay="one"),
    Input("fallback_delay_ms", "Delay (ms) used instead of NaN where the bandwidth or bytes per token are "
          "unknown or the bandwidth is 0 (upstream's coordinated-handoff fallback). Default: none.", "real",
          default=None, kernel_default=np.nan, valid=Valid(),
          rule="the fallback delay is a finite number of milliseconds >= 0, or None", cli="--fallback-delay-ms",
          example=3.0, replay="one", replay_default=0.0),  # (upstream's replay: 0.0 at a bandwidth of 0)
    Input("per_block_ms", "Cost (ms) of each KV block moved, on top of its bytes (added to a link's own); "
          "needs ``block_size``.", "real", default=0.0, kernel_default=0.0, valid=Valid(nan_ok=False),
          rule="the per-block cost is a finite number of milliseconds >= 0 (it needs a block_size)",
          group="block", off=0.0, cli="--per-block-ms", axis=True, grid_axis=True,
          example=0.002, replay="one"),
    Input("block_size", "KV block size in tokens (whole numbers >= 1; 0 or NaN: none), for per-block costs.",
          "count", default=None, kernel_default=0, valid=Valid(high=2.0**53, whole=True),
          rule="block sizes are whole numbers of tokens from 1 to 2**53 (0 or NaN: none)",
          group="block", off=0, cli="--block-size", axis=True, grid_axis=True,
          example=16, replay="one", replay_default=512),
    Input("per_message_ms", "Cost (ms) of each message (transfer descriptor: a contiguous region of the KV "
          "cache, see ``kv_layout``) one rank posts, on top of its bytes (added to a link's own); needs "
          "``block_size``, and for the layer layouts the model's layers (a model, or ``num_layers``).", "real",
          default=0.0, kernel_default=0.0, valid=Valid(nan_ok=False),
          rule="the per-message cost is a finite number of milliseconds >= 0 (it needs a block_size)",
          group="block", off=0.0, cli="--per-message-ms", axis=True, grid_axis=True,
          example=0.0005, replay="one"),
    Input("blocks_per_message", "Consecutive KV blocks merged into one message (region, one descriptor), for "
          "``per_message_ms``: each layer's (or, for ``kv_layout=\"block\"``, the request's) blocks make "
          "``ceil(blocks / blocks_per_message)`` messages. Whole numbers >= 1 (default 1: every block its own "
          "message), or ``inf``: one message per layer and K/V (a fresh allocator with the whole request "
          "contiguous).", "real", default=1.0, kernel_default=1.0, valid=Valid(low=1.0, whole=True, nan_ok=False,
                                                                               inf_ok=True),
          rule="blocks per message are whole numbers >= 1, or inf (one message per layer)",
          group="block", off=1.0, cli="--blocks-per-message", axis="blocks_per_message",
          grid_axis="blocks_per_message", example=4.0, replay="request"),
    Input("prefill_ms", "Layer-wise streaming: the prefill's duration (ms >= 0; NaN: unknown).", "real",
          default=None, kernel_default=np.nan, valid=Valid(),
          rule="prefill durations are finite numbers of milliseconds >= 0 (NaN marks unknown)",
          group="layerwise", off=np.nan, cli="--prefill-ms", axis=True, grid_axis=True,
          example=5.0, replay="request"),
    Input("prefill_tokens_per_s", "Layer-wise streaming: the prefill's rate (tokens/s > 0), instead of "
          "``prefill_ms``.", "real", default=None, kernel_default=np.nan, valid=Valid(open_low=True),
          rule="prefill rates are finite numbers of tokens per second > 0",
          group="layerwise", off=np.nan, cli="--prefill-tokens-per-s", axis=True,
          grid_axis=True,
          example=200_000.0, replay="request", instead_of="prefill_ms"),
    Input("num_layers", "Layer-wise streaming and per-message costs: the model's layer count (whole number "
          "from 0 to 2**16; default: the model's, when ``kv_bytes_per_token`` names one).", "count", default=None, kernel_default=0,
          valid=Valid(high=MAX_LAYERS, whole=True, nan_ok=False),
          rule="layer counts are whole numbers from 0 to 65,536 (2**16: models have at most a few hundred layers; 0: "
               "no layer-wise streaming)",
          group="layerwise", off=0, cli="--num-layers", axis=True, grid_axis=True,
          example=32, replay="request"),
    Input("layer_group", "Layer-wise streaming: layers sent together (whole number from 1 to the layer count).",
          "count", default=1, kernel_default=1, valid=Valid(low=1, whole=True, nan_ok=False),
          rule="layer groups are whole numbers of layers, from 1 to the number of layers",
          group="layerwise", off=1, cli="--layer-group", axis=True, grid_axis=True,
          example=2, replay="one"),
    Input("layerwise_min_tokens", "Layer-wise streaming: prompts shorter than this (tokens) are sent after "
          "prefill as usual.", "count", default=0, kernel_default=0, valid=Valid(whole=True, nan_ok=False),
          rule="the layer-wise threshold is a whole number of tokens >= 0",
          group="layerwise", off=0, cli="--layerwise-min-tokens", axis=True,
          grid_axis=True,
          example=1024, replay="one"),
)

#: One value per call: how names resolve, which extensions apply, how the call runs.
OPTIONS: tuple[Input, ...] = (
    Input("overlap", "``\"none\"`` (default) or ``\"layerwise\"``: stream layer groups while prefill runs "
          "(needs ``prefill_ms`` or ``prefill_tokens_per_s``, and ``num_layers`` or a model).", "choice",
          default="none", choices=choice_names("overlap"), group="option", cli="--overlap",
          axis=True, grid_axis=True,
          example="layerwise", replay="one"),
    Input("kv_cache_dtype", "For models given by name or config: the KV-cache dtype (``\"bf16\"``, "
          "``\"fp8\"``...; default: the model's).", "option", default=None, group="shape",
          cli="--kv-cache-dtype", axis=True, grid_axis=True,
          example="fp8", replay="one"),
    Input("tp", "For models given by name or config: the (prefill side's) tensor-parallel degree (whole number "
          ">= 1).",
          "degree", valid=_COUNT, rule=_count_rule("tp", "GPUs"), default=1, group="shape", cli="--tp", axis=True,
          grid_axis=True,
          example=2, replay="one"),
    Input("decode_tp", "For models given by name or config: the decode side's tensor-parallel degree "
          "(default: ``tp``). Each decode rank receives the KV heads it serves (an MLA latent whole), so the "
          "group moves ``decode_tp`` times one decode rank's bytes, shared by the ``tp`` senders.", "degree",
          valid=_COUNT, rule=_count_rule("decode_tp", "GPUs"),
          default=None, group="shape", cli="--decode-tp", axis=True, grid_axis=True,
          example=2, replay="one"),
    Input("scope", "``\"rank\"`` (default): the busiest GPU's bytes; ``\"group\"``: the tensor-parallel "
          "group's (replicated KV heads counted once per rank).", "choice", default="rank",
          choices=choice_names("scope"), group="shape", cli="--scope", axis=True, grid_axis=True,
          example="group", replay="one"),
    Input("kv_layout", "How a KV block lies in memory, which sets the messages of ``per_message_ms``: "
          "``\"layer_kv\"`` (default: one message per block, layer and K or V; per block and layer for MLA), "
          "``\"layer\"`` (K and V of a block contiguous: one per block and layer) or ``\"block\"`` (every "
          "layer contiguous: one per block).", "choice", default="layer_kv", choices=choice_names("kv_layout"),
          group="option", cli="--kv-layout", axis=True, grid_axis=True,
          example="layer", replay="one"),
    Input("connector", "The serving engine's KV connector (:class:`perfmodel.Connector` or a name of "
          ":data:`perfmodel.CONNECTORS`, or one saved with :func:`perfmodel.save_connector`): its cost per request "
          "is added to ``latency_ms`` and its cost per descriptor to ``per_message_ms`` (default: none).", "name",
          default=None, group="option", cli="--connector", axis=True, grid_axis=True,
          example="vllm-nixl-0.10.1", replay="one"),
    Input("errors", "``\"raise\"`` (default): invalid values raise :class:`perfmodel.InputError` (a "
          "ValueError) naming the argument, the number of invalid rows, the first one and its value. "
          "``\"coerce\"``: invalid rows (and unknown names) give NaN.", "choice", default="raise",
          choices=choice_names("errors"), group="option", cli="--errors",
          example="coerce"),
    Input("out", "Optional preallocated float64 array of the result's length to write into (a call that raises "
          "may have written part of it).", "option",
          default=None, group="option"),
    Input("parallel", "Share the kernel pass between threads (True) or run it in the calling thread (False); "
          "default: shared from the option ``parallel_min_rows`` (:func:`perfmodel.set_options`) rows on when numba's thread count "
          "(``NUMBA_NUM_THREADS``) is above one.", "option", default=None, group="option"),
    Input("num_threads", "Threads sharing a kernel pass (default: numba's thread count).", "option", default=None,
          group="option"),
)

#: The inputs of the tables layer (sweeps, replays, their grids): other names of the kernel's inputs, and
#: how a replay shares its links and routes its requests.
API_INPUTS: tuple[Input, ...] = (
    Input("model", "Model presets (``\"llama-3.1-70b\"``), Hugging Face config dicts or ``config.json`` paths: "
          "``kv_bytes_per_token`` in other words.", "name", default=None, cli="--model", axis=True, grid_axis=True, replay="one",
          alias_of="kv_bytes_per_token", example="llama-3.1-8b"),
    Input("link", "Link presets (``\"ib-ndr\"``, ``\"8x ib-ndr\"``) or :class:`perfmodel.Link` objects: "
          "``kv_transfer_bandwidth`` in other words.", "name", default=None, cli="--link", axis=True, grid_axis=True,
          replay="one", alias_of="kv_transfer_bandwidth", example="ib-ndr"),
    Input("cache_hit_ratio", "The fraction of each prompt already cached at the destination (0 to 1); "
          "with it, ``mode`` defaults to destination_missing.", "real", valid=Valid(high=1.0, nan_ok=False),
          rule="cache hit ratios are fractions of the prompt within [0, 1]", cli="--cache-hit", axis=True,
          example=0.5),
    Input("links", "Identical links the transfers share (whole number >= 1).", "degree",
          valid=_COUNT, rule=_count_rule("links", "links"), default=1,
          cli="--links", grid_axis=True, replay="one", example=2),
    Input("contention", "``\"none\"`` (default: every transfer at line rate, as upstream), ``\"fifo\"`` "
          "(transfers queue for the link free soonest; ties: the lowest) or ``\"fair\"`` (transfers on a link "
          "share it equally).",
          "choice", default="none", choices=choice_names("contention"), cli="--contention", grid_axis=True,
          replay="one", example="fair"),
    Input("decode_workers", "Decode workers, each with its own prefix cache (whole number >= 1).",
          "degree", valid=_COUNT, rule=_count_rule("decode_workers", "workers"), default=1, cli="--decode-workers",
          grid_axis=True, replay="one", example=4),
    Input("decode_cache_blocks", "Each decode worker's LRU cache capacity in blocks (whole number; "
          "default: unbounded).", "count", default=None, valid=Valid(high=2.0**53, whole=True, nan_ok=False),
          rule="cache capacities are whole numbers of blocks from 0 to 2**53", cli="--cache-blocks", grid_axis=True,
          replay="one", example=1000),
    Input("routing", "``\"prefix\"`` (default: the decode worker caching the longest prefix, ties round "
          "robin) or ``\"round_robin\"``; on a cluster also ``\"least_loaded\"`` (fewest bytes routed to it "
          "and not yet delivered, ties round robin among the tied: the first after the worker chosen last) and "
          "``\"topology\"`` (fewest hops summed over the handoff's flows, ties by the longest cached prefix, then "
          "least loaded, then round robin).",
          "choice", default="prefix", choices=choice_names("routing"),
          cli="--routing", grid_axis=True, replay="one", example="round_robin"),
    Input("prefill_workers", "On a cluster: prefill workers of ``tp`` GPUs each, taking requests round robin "
          "in trace order, or as a trace column ``prefill_worker`` says (default: 1, or that column's largest "
          "worker + 1).", "degree", valid=_COUNT, rule=_count_rule("prefill_workers", "workers"), default=None,
          cli="--prefill-workers", grid_axis=True, replay="one",
          example=2),
    Input("cluster", "Clusters (:class:`perfmodel.Cluster` or preset names such as ``\"hgx-h100-8x400g\"``): "
          "``kv_transfer_bandwidth`` in other words; a handoff's flows share its NICs, switches and NVLink ports.",
          "name", default=None, axis=True, grid_axis=True, alias_of="kv_transfer_bandwidth",
          example="hgx-h100-8x400g"),
    *(Input(f.name, f"A field of the ``cluster`` axis' clusters: {f.doc}.", _AXIS_KIND[f.type], default=None,
            axis=True, valid=f.valid, grid_axis=True, cli=f"--{f.name.replace('_', '-')}",
            choices=choice_names(f.name) if f.type == "choice" else (), group="cluster_field", example=f.example,
            rule=_count_rule(f.name, f.counted) if f.type == "count" else f.rule)
      for f in CLUSTER_TABLE if f.example is not None),
)

#: The fields of a cluster that sweeps and replay grids vary (each an axis of its own).
CLUSTER_FIELDS: tuple[str, ...] = tuple(entry.name for entry in API_INPUTS if entry.group == "cluster_field")

#: Every input by name.
INPUTS: dict[str, Input] = {entry.name: entry for entry in (*ROW_INPUTS, *OPTIONS, *API_INPUTS)}


# --- the API's shape, derived from the table ------------------------------------------------------

def _api_order() -> tuple[Input, ...]:
    """The inputs in the order of the tables' columns: the bytes per token and the options that shape them
    first, then the table's order; each other name just before the input it names, the prompt lengths
    last (they vary fastest in a grid)."""
    def named(entry: Input) -> list[Input]:
        return [other for other in API_INPUTS if other.alias_of == entry.name] + [entry]

    first = [*named(INPUTS["kv_bytes_per_token"]), *(e for e in OPTIONS if e.group == "shape")]
    rest = [e for entry in INPUTS.values() if entry.alias_of is None and entry not in first
            and entry.name != "num_input_tokens" for e in named(entry)]
    return (*first, *rest, INPUTS["num_input_tokens"])


_ORDER = _api_order()
#: The axes of :func:`perfmodel.sweep`, in the order of its columns (the last given varies fastest).
SWEEP_AXES: tuple[str, ...] = tuple(entry.name for entry in _ORDER if entry.axis)
#: The axes of :func:`perfmodel.replay_grid`, in the order of its columns.
GRID_AXES: tuple[str, ...] = tuple(entry.name for entry in _ORDER if entry.grid_axis)
#: The axes whose values are names (presets, choices, codes): categorical columns, labelled by name.
LABEL_AXES: frozenset[str] = frozenset(entry.name for entry in _ORDER if (entry.axis or entry.grid_axis)
                                       and entry.kind in ("name", "choice", "option", "code"))
#: The options of the edge among the sweep axes: one value per call (a grid makes one call per combination).
OPTION_AXES: frozenset[str] = frozenset(entry.name for entry in OPTIONS if entry.axis)
#: The inputs that other inputs name in other words (bytes per token: a model; a bandwidth: a link or a
#: cluster), each with those names: in a sweep's frame, its column holds the numbers they resolve to.
NAMED_BY: dict[str, tuple[str, ...]] = {
    target: tuple(e.name for e in _ORDER if e.alias_of == target) for target in dict.fromkeys(
        e.alias_of for e in _ORDER if e.alias_of)}


def flags(command: str) -> tuple[str, ...]:
    """The inputs a command takes as flags built from this table: ``"sweep"`` its axes, ``"trace"`` the
    replay's keywords, ``"delay"`` every input of the numpy API; without the required inputs, which each
    command reads its own way (a range of prompt lengths, a model or bytes, a link or a bandwidth), and
    their other names.

    >>> flags("sweep")[:6]
    ('kv_cache_dtype', 'tp', 'decode_tp', 'scope', 'mode', 'state_bytes')
    """
    check_choice("command", command, ("sweep", "trace", "delay"))
    takes = {"sweep": lambda e: e.axis, "trace": lambda e: e.replay is not None,
             "delay": lambda e: e in ROW_INPUTS or (e.axis and e.group != "cluster_field")}[command]
    own = {e.name for e in INPUTS.values() if e.required or e.alias_of} | {"cache_hit_ratio"}
    return tuple(e.name for e in _ORDER if e.cli and takes(e) and e.name not in own)
#: The per-row inputs' names, in the kernel's order.
ROW_NAMES: tuple[str, ...] = tuple(entry.name for entry in ROW_INPUTS)
#: What an inverse question (:func:`perfmodel.required_bandwidth`, :func:`perfmodel.max_tokens_within`) takes
#: beside its own arguments: handoff_delay_ms's inputs (the row inputs and options), but those a completed
#: prefill's full-prompt handoff fixes and the call's own.
INVERSE_INPUTS: frozenset[str] = frozenset(e.name for e in (*ROW_INPUTS, *OPTIONS)) - {
    "num_input_tokens", "kv_transfer_bandwidth", "kv_bytes_per_token", "worker_type", "completed", "mode",
    "destination_missing_tokens", "fallback_delay_ms", "errors", "out", "parallel", "num_threads"}


def check_inverse_input(name: str) -> None:
    """Refuse ``name`` given to an inverse question unless it is one of :data:`INVERSE_INPUTS`: the other inputs
    of the table (a cluster's fields, a replay's options, the aliases of the question's own arguments) were taken
    and dropped, answering another question.

    >>> check_inverse_input("latency_ms")
    """
    if name in INVERSE_INPUTS:
        return
    entry = INPUTS.get(name)
    if entry is not None and entry.group == "cluster_field":
        fix = (f"give the cluster with it set, e.g. dataclasses.replace(perfmodel.get_cluster('NAME'), {name}=...), "
               "as the question's cluster")
    elif entry is not None and entry.alias_of is not None:
        fix = f"give it as the question's own argument ({entry.alias_of})"
    else:
        fix = f"drop {name}; for a trace's handoffs under contention, ask perfmodel.required_nics"
    raise InputError(name, "is not an input of this question (a completed prefill's full-prompt handoff, alone; "
                     "it takes what handoff_delay_ms takes)", fix)


#: Inputs of each extension group (off together: then compiled out of the kernel).
GROUPS: dict[str, tuple[Input, ...]] = {
    group: tuple(e for e in ROW_INPUTS if e.group == group) for group in ("block", "layerwise")}


def _nan(value: Any) -> bool:
    """Whether ``value`` is a NaN (False for what is not a number)."""
    try:
        return bool(np.isnan(value))
    except TypeError:
        return False


def group_off(group: str, values: dict[str, Any]) -> bool:
    """Whether every input of an extension ``group`` is one value equal to its off value (NaN equals NaN)."""
    for entry in GROUPS[group]:
        value = values[entry.name]
        if isinstance(value, np.ndarray) and value.ndim:
            return False
        if not (value == entry.off or (_nan(value) and _nan(entry.off))):
            return False
    return True


# --- rules that tie inputs together (written once, called by every entry point) --------------------

class Cross(NamedTuple):
    """A rule over two inputs of a row: ``invalid(blamed, other)`` marks the rows that break it."""

    blamed: str
    other: str
    invalid: Callable[[Any, Any], Any]
    problem: str
    fix: str


def per_block_without_block(per_block_ms: Any, block_size: Any) -> Any:
    return (per_block_ms > 0) & ((block_size > 0) == False)  # noqa: E712 (numpy and numba alike; NaN: none)


def group_beyond_layers(layer_group: Any, num_layers: Any) -> Any:
    return (num_layers > 0) & (layer_group > num_layers)


CROSS: tuple[Cross, ...] = (
    Cross("per_block_ms", "block_size", per_block_without_block, "a per-block cost needs a block size",
          "give the KV block size in tokens (block_size=, or --block-size on the command line)"),
    Cross("per_message_ms", "block_size", per_block_without_block, "a per-message cost needs a block size",
          "give the KV block size in tokens (block_size=, or --block-size on the command line)"),
    Cross("layer_group", "num_layers", group_beyond_layers, "more layers per group than the model has",
          "pass a layer_group between 1 and num_layers"),
)

def check_cross(values: dict[str, Any], where: str) -> None:
    """Every rule of :data:`CROSS` over all combinations of the values an entry point was given (scalars or
    lists per input; absent or None: the input's value when not given), before any kernel pass: the rule's
    :class:`InputError` at ``where`` for the first rule some combination breaks. Sweeps and grids call it
    with their axes; the numpy API finds the same rules in its kernel pass (:func:`perfmodel.handoff_delay_ms`).

    >>> check_cross({"per_message_ms": [0.0, 0.001]}, "sweep")
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: sweep: a per-message cost needs a block size. Fix: give the KV block size in tokens (block_size=, or --block-size on the command line).
    """
    for rule in CROSS:
        if values.get(rule.blamed) is None and values.get(rule.other) is None:
            continue
        pair = [np.ravel(np.asarray(INPUTS[name].kernel_default if values.get(name) is None else values[name],
                                    dtype=np.float64)) for name in (rule.blamed, rule.other)]
        with np.errstate(invalid="ignore"):
            if np.any(rule.invalid(pair[0][:, None], pair[1][None, :])):
                raise InputError(where, rule.problem, rule.fix)


#: The inputs only layer-wise streaming reads.
LAYERWISE: tuple[str, ...] = tuple(e.name for e in GROUPS["layerwise"])


def is_default(name: str, value: Any) -> bool:
    """Whether ``value`` is the input's public default (None counts as not given)."""
    default = INPUTS[name].default
    if value is None or value is default:
        return True
    if default is None or isinstance(value, str) or getattr(value, "ndim", 0) > 0 or isinstance(value, (list, tuple)):
        return False
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False


def _costs_something(value: Any) -> bool:
    """Whether a cost (a number or an array) is above 0 on some row: a scalar 0 and an array of zeros alike."""
    if value is None:
        return False
    try:
        return bool(np.any(np.asarray(value, dtype=np.float64) > 0))
    except (TypeError, ValueError):
        return True  # (a value of another kind is checked, and named, where it is coerced)


#: The problem of a layer count that counts nothing (a grid keeps one only where it counts:
#: :func:`perfmodel.replay.prepared.layers_where_counted`).
UNCOUNTED_LAYERS = (
    "counts the layers of messages posted per layer or of layer-wise streaming, and neither is on (no cost per "
    "message, or kv_layout='block', which posts messages per block; overlap off)"
)


def layerwise_given(values: dict[str, Any], overlap: Any, kv_layout: Any = None) -> None:
    """The rules of layer-wise streaming, for every entry point: with ``overlap="none"`` none of its
    inputs may be given (never silently ignored), but a layer count where messages are posted per layer
    (a per-message cost, ``kv_layout`` not ``"block"``; None: some layout of a grid may count them); with
    ``"layerwise"`` exactly one of a prefill duration and a rate is required. ``values`` holds what the caller
    gave (absent or None: not given)."""
    if overlap == "none":
        given = [name for name in LAYERWISE if not is_default(name, values.get(name))]
        if given == ["num_layers"] and _costs_something(values.get("per_message_ms")) and kv_layout != "block":
            given = []  # (messages posted per layer count layers too)
        if given == ["num_layers"]:  # (layers count messages too: not only a matter of streaming)
            raise InputError("num_layers", UNCOUNTED_LAYERS,
                             "pass a per_message_ms with kv_layout 'layer_kv' or 'layer' (or overlap='layerwise' "
                             "where the call streams), or drop num_layers")
        if given:
            raise InputError("overlap", f"{', '.join(given)} apply to layer-wise streaming, which is off",
                             "pass overlap='layerwise', or drop them")
    elif overlap == "layerwise" and (values.get("prefill_ms") is None) == (values.get("prefill_tokens_per_s") is None):
        raise InputError("prefill_ms", "overlap='layerwise' needs exactly one of prefill_ms and prefill_tokens_per_s",
                         "pass the prefill's duration (ms) or its rate (tokens/s)")


def layerwise_overlaps(given: dict[str, Any], overlaps: set[str]) -> None:
    """:func:`layerwise_given` for a grid of ``overlaps`` (sweeps, replay grids): the layer-wise inputs
    are refused only when no value of the grid streams; where some do, they apply to those rows. A layer count
    counts messages unless every layout of the grid is ``"block"``."""
    layouts = given.get("kv_layout")
    layouts = [layouts] if isinstance(layouts, str) else layouts if isinstance(layouts, (list, tuple)) else [None]
    blocks = "block" if layouts and all(layout == "block" for layout in layouts) else None
    layerwise_given(given, "layerwise" if "layerwise" in overlaps else "none", blocks)


def nonnegative(name: str, value: Any, *, whole: bool = False, inf_ok: bool = False) -> np.ndarray:
    """``value`` (a scalar or an array) as float64 numbers >= 0, finite unless ``inf_ok`` (whole ones with
    ``whole``), or :class:`InputError` naming the first that is not one; None, booleans and text refused.

    >>> nonnegative("budget_ms", [10, 50.0])
    array([10., 50.])
    """
    if value is None:
        raise InputError(name, "is required (got None)", f"pass {name} as numbers >= 0")
    if np.asarray(value).dtype.kind == "b":
        raise InputError(name, "got booleans where numbers were expected", f"pass {name} as numbers >= 0")
    try:
        numbers = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(name, f"{shown(value)} holds values that are not numbers", f"pass {name} as numbers >= 0") from None
    with np.errstate(invalid="ignore"):
        bad = outside(numbers, Valid(whole=whole, nan_ok=False, inf_ok=inf_ok))
    if np.any(bad):
        position = int(np.argmax(np.reshape(bad, -1)))
        first = np.reshape(numbers, -1)[position].item()
        kind = ("" if inf_ok else "finite ") + ("whole " if whole else "")
        raise InputError(name, f"not a {kind}number >= 0", f"pass {name} as {kind}numbers >= 0",
                         n_invalid=int(np.sum(bad)), row=position, value=first, coerce_hint="")
    return numbers


def check_range(name: str, value: Any, where: str) -> np.ndarray:
    """Values of a table input that the kernel does not read (a sweep's or a replay's own), as float64, or
    the :class:`InputError` at ``where`` naming the first outside the input's valid range, with its rule.

    >>> check_range("cache_hit_ratio", [0.0, 0.5], "sweep axis cache_hit_ratio")
    array([0. , 0.5])
    """
    entry = INPUTS[name]
    assert entry.valid is not None, name  # (only numbers are checked here)
    try:
        numbers = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(where, f"{shown(value)} holds values that are not numbers", entry.rule) from None
    with np.errstate(invalid="ignore"):
        bad = np.reshape(outside(numbers, entry.valid), -1)
    if np.any(bad):
        position = int(np.argmax(bad))
        raise InputError(where, f"{np.reshape(numbers, -1)[position].item()!r} is outside its range", entry.rule)
    return numbers


@overload
def check_count(name: str, value: Any, *, optional: Literal[False] = ...) -> int: ...
@overload
def check_count(name: str, value: Any, *, optional: bool = ...) -> int | None: ...
def check_count(name: str, value: Any, *, optional: bool = False) -> int | None:
    """A count of the table (``links``, ``decode_workers``, ``tp``, a cluster's ``nodes``...) as a Python int:
    a whole number from 1 to its bound (:data:`MAX_COUNT`), or :class:`InputError` with the table's rule. Every
    entry point reads such a count here, before it sizes anything by it.

    >>> check_count("links", 10**9)
    Traceback (most recent call last):
    ...
    perfmodel.errors.InputError: links: 1,000,000,000 is above 1,048,576. Fix: pass links as a whole number of links from 1 to 1,048,576 (2**20, ten times the largest clusters built).
    """
    entry = INPUTS[name]
    assert entry.valid is not None, name  # (every count has a range)
    return check_whole(name, value, smallest=int(entry.valid.low), optional=optional, largest=int(entry.valid.high),
                       above=entry.rule)


def check_option(name: str, value: Any) -> Any:
    """A choice option's value, or :class:`InputError` listing the table's choices."""
    return check_choice(name, value, INPUTS[name].choices)


# --- docstrings -----------------------------------------------------------------------------------

_MARKER = re.compile(r"^([ \t]*)@inputs[ \t]*$", re.MULTILINE)


def documented(*, extra: dict[str, str] | None = None, skip: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """Fill the line ``@inputs`` of a function's docstring with a numpydoc entry per parameter of its
    signature: the table's line for an input, ``extra``'s for the function's own. A parameter that
    neither documents is an error at import time, so no public signature drifts from its docs."""

    def decorate(function: Any) -> Any:
        own = extra or {}
        lines = []
        for name, parameter in inspect.signature(function).parameters.items():
            if name in skip:
                continue
            text = own.get(name) or (INPUTS[name].doc if name in INPUTS else None)
            if text is None:
                raise AssertionError(f"{function.__qualname__}: parameter {name!r} is not documented")
            stars = "**" if parameter.kind is parameter.VAR_KEYWORD else "*" if parameter.kind is parameter.VAR_POSITIONAL else ""
            lines.append(stars + name)
            lines.extend(textwrap.wrap(text, 92, initial_indent="    ", subsequent_indent="    "))
        doc = function.__doc__ or ""
        # The marker's own indentation is the section's (Python 3.13 strips a docstring's common
        # indentation at compile time; earlier versions keep it).
        marker = _MARKER.search(doc)
        if marker is None:
            raise AssertionError(f"{function.__qualname__}: its docstring has no '@inputs' line")
        section = textwrap.indent("\n".join(lines), marker.group(1))
        function.__doc__ = doc[: marker.start()] + section + doc[marker.end():]
        return function

    return decorate
