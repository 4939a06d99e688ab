"""A slow, obviously correct, plain-Python statement of SEMANTICS.md, one row at a time.

Independent of perfmodel's code: no numpy, no numba. Used by the tests (and by
bench/run.py as the plain-Python baseline).
"""

from __future__ import annotations

import math

WORKER_CODES = {"aggregated": 0, "prefill": 1, "decode": 2}
MODE_CODES = {"full_prompt": 0, "destination_missing": 1}


class InvalidRow(Exception):
    """A row that breaks rule 6 (negative counts, unknown codes...)."""

    def __init__(self, argument: str) -> None:
        super().__init__(argument)
        self.argument = argument


def _number(value) -> float:
    """None (missing) as NaN; anything else must be a real number."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    return float(value)


def _code(value, names: dict[str, int]) -> int | None:
    if isinstance(value, str):
        return names.get(value.lower())
    if isinstance(value, bool):
        return None
    if (
        isinstance(value, (int, float))
        and not math.isnan(value)
        and value == int(value)
        and int(value) in names.values()
    ):
        return int(value)
    return None


def _is_count(x: float) -> bool:
    """A whole number from 0 to 2**53 (where float64 tells one count from the next), or NaN (missing)."""
    return math.isnan(x) or (0 <= x <= 2**53 and x == math.floor(x))


def row_problems(
    tokens,
    bandwidth,
    bytes_per_token,
    worker,
    completed,
    mode,
    missing_tokens,
    state_bytes,
    latency_ms,
    fallback_ms,
    per_block_ms=0.0,
    block_size=None,
    per_message_ms=0.0,
    prefill_ms=None,
    prefill_tokens_per_s=None,
    num_layers=None,
    layer_group=1,
    layerwise_min_tokens=0,
    blocks_per_message=1,
) -> list[str]:
    """The arguments of one row that break rule 6 (and the extensions' rules), in signature order."""
    t, b, p = _number(tokens), _number(bandwidth), _number(bytes_per_token)
    d, s, lat = _number(missing_tokens), _number(state_bytes), _number(latency_ms)
    f = _number(fallback_ms)
    pb, bs, pm, pre = _number(per_block_ms), _number(block_size), _number(per_message_ms), _number(prefill_ms)
    rate, layers, group = _number(prefill_tokens_per_s), _number(num_layers), _number(layer_group)
    lw_min = _number(layerwise_min_tokens)
    layers = 0.0 if num_layers is None else layers
    checks = [
        ("num_input_tokens", _is_count(t)),
        ("kv_transfer_bandwidth", math.isnan(b) or b >= 0),
        ("kv_bytes_per_token", math.isnan(p) or 0 <= p < math.inf),
        ("worker_type", _code(worker, WORKER_CODES) is not None),
        ("completed", isinstance(completed, bool) or completed in (0, 1)),
        ("mode", _code(mode, MODE_CODES) is not None),
        ("destination_missing_tokens", _is_count(d)),
        ("state_bytes", math.isnan(s) or 0 <= s < math.inf),
        ("latency_ms", 0 <= lat < math.inf),
        ("fallback_delay_ms", math.isnan(f) or 0 <= f < math.inf),
        ("per_block_ms", 0 <= pb < math.inf and (pb == 0 or bs > 0)),
        ("block_size", math.isnan(bs) or (0 <= bs < math.inf and bs == math.floor(bs))),
        ("per_message_ms", 0 <= pm < math.inf and (pm == 0 or bs > 0)),
        (
            "blocks_per_message",
            _number(blocks_per_message) == math.inf
            or (_number(blocks_per_message) >= 1 and _number(blocks_per_message) == math.floor(blocks_per_message)),
        ),
        ("prefill_ms", math.isnan(pre) or 0 <= pre < math.inf),
        ("prefill_tokens_per_s", math.isnan(rate) or 0 < rate < math.inf),
        ("num_layers", 0 <= layers < math.inf and layers == math.floor(layers)),
        ("layer_group", group >= 1 and group == math.floor(group) and (layers == 0 or group <= layers)),
        ("layerwise_min_tokens", 0 <= lw_min < math.inf and lw_min == math.floor(lw_min)),
    ]
    return [argument for argument, ok in checks if not ok]


def handoff_delay_row(
    tokens,
    bandwidth,
    bytes_per_token,
    worker=1,
    completed=True,
    mode=0,
    missing_tokens=None,
    state_bytes=0,
    latency_ms=0.0,
    fallback_ms=None,
    per_block_ms=0.0,
    block_size=None,
    per_message_ms=0.0,
    prefill_ms=None,
    prefill_tokens_per_s=None,
    num_layers=None,
    layer_group=1,
    layerwise_min_tokens=0,
    window_bytes_per_token=0,
    window_tokens=0,
    chunk_bytes_per_token=0,
    chunk_tokens=0,
    message_layers=(),
    kv_layout="layer_kv",
    blocks_per_message=1,
):
    """The handoff delay of one row in ms, or None where no delay applies.

    ``bytes_per_token`` is the full-attention layers' bytes; the window/chunk terms are those of
    sliding-window and chunked-attention layers (a model's KVTerms). ``message_layers``: the model's
    layers as :func:`messages` takes them, for a per-message cost. Raises InvalidRow for invalid input.
    """
    problems = row_problems(
        tokens,
        bandwidth,
        bytes_per_token,
        worker,
        completed,
        mode,
        missing_tokens,
        state_bytes,
        latency_ms,
        fallback_ms,
        per_block_ms,
        block_size,
        per_message_ms,
        prefill_ms,
        prefill_tokens_per_s,
        num_layers,
        layer_group,
        layerwise_min_tokens,
        blocks_per_message,
    )
    if problems:
        raise InvalidRow(problems[0])
    # 1. only a completed prefill hands off
    if _code(worker, WORKER_CODES) != 1 or not completed:
        return None
    # 2./3. charged tokens; a missing count gives a missing result
    full = _code(mode, MODE_CODES) == 0
    charged = _number(tokens) if full else _number(missing_tokens)
    if math.isnan(_number(tokens)) or math.isnan(charged):
        return None
    # 4. unknown bytes or bandwidth, or bandwidth disabled: the fallback, if any
    bw, per_token, state = _number(bandwidth), _number(bytes_per_token), _number(state_bytes)
    if math.isnan(bw) or bw == 0 or math.isnan(per_token) or math.isnan(state):
        return None if fallback_ms is None or math.isnan(_number(fallback_ms)) else float(fallback_ms)
    # 5. bytes over line rate, upstream's operation order
    n = int(_number(tokens))
    current_chunk = 0 if n == 0 or not chunk_tokens else (n - 1) % int(chunk_tokens) + 1
    nbytes = (
        float(charged) * float(per_token)
        + (window_bytes_per_token * min(charged, window_tokens) + chunk_bytes_per_token * min(charged, current_chunk))
        + float(state)
    )  # the state moves even when no token is charged
    delay = nbytes / (bw * 1e9) * 1000.0
    if nbytes > 0:  # extensions: setup latency, and a cost per block moved (blocks = ceil(charged / block))
        sized = block_size and not math.isnan(_number(block_size))
        blocks = math.ceil(charged / block_size) if sized else 0
        posted = (
            messages(n, int(charged), int(block_size), message_layers, kv_layout, blocks_per_message)
            if sized and per_message_ms
            else 0
        )
        delay += float(latency_ms) + blocks * float(per_block_ms) + posted * float(per_message_ms)
    # extension: layer-wise streaming exposes only what could not hide behind the prefill's compute
    layers = 0 if num_layers is None else int(num_layers)
    if layers > 0 and _number(tokens) >= layerwise_min_tokens:
        compute = (
            _number(prefill_ms)
            if prefill_tokens_per_s is None or math.isnan(_number(prefill_tokens_per_s))
            else _number(tokens) / prefill_tokens_per_s * 1000.0
        )
        if math.isnan(compute):
            return None
        g = int(layer_group)
        delay = max(delay * g / layers, delay - compute * (layers - g) / layers)
    return delay


def messages(
    num_input_tokens: int,
    charged_tokens: int,
    block_size: int,
    layers,
    kv_layout: str = "layer_kv",
    blocks_per_message=1,
) -> int:
    """Messages one rank posts, layer by layer: ``layers`` is a list of ``(kind, length, tensors)``
    with kind full, window, chunk or state and tensors 2 (K and V) or 1 (an MLA latent). In the
    layer layouts each layer sends its kept tokens (as :func:`layer_bytes` keeps them) block by
    block, one message per block and tensor (``"layer_kv"``) or per block (``"layer"``), and a
    state layer its state as one message; ``"block"`` sends the charged tokens' blocks, every
    layer of a block in one message."""

    def blocks(tokens: int) -> int:
        """Messages of the blocks of ``tokens``: runs of ``blocks_per_message`` blocks (inf: one run)."""
        count = 0
        while count * block_size < tokens:
            count += 1
        runs = 0
        while count > 0:
            runs += 1
            count -= blocks_per_message
        return runs

    if kv_layout == "block":  # a block holds every layer that keeps it: the longest-kept layer's blocks
        kept = [
            layer_bytes([(kind, 1, length, 0)], num_input_tokens, charged_tokens)
            for kind, length, _ in layers
            if kind != "state"
        ]
        return blocks(max(kept, default=0)) if layers else blocks(charged_tokens)
    total = 0
    for kind, length, tensors in layers:
        if kind == "state":
            total += 1  # a state moves with every handoff
            continue
        kept = layer_bytes([(kind, 1, length, 0)], num_input_tokens, charged_tokens)
        total += blocks(kept) * (tensors if kv_layout == "layer_kv" else 1)
    return total


def destination_missing_tokens_row(num_input_tokens: int, cached_tokens: int, block_size: int) -> int:
    """Fresh blocks the destination allocates, times the block size."""
    blocks = math.ceil(num_input_tokens / block_size) if num_input_tokens else 0
    cached_blocks = min(cached_tokens // block_size, num_input_tokens // block_size)  # only full blocks hit
    return (blocks - cached_blocks) * block_size


def layer_bytes(layers, num_input_tokens: int, charged_tokens: int) -> int:
    """Bytes a handoff moves, summed layer by layer: ``layers`` is a list of ``(kind, bytes per
    token, window or chunk length, state bytes)`` with kind full, window, chunk or state. A
    full-attention layer sends every charged token, a window layer the charged tokens within its
    last ``length`` tokens, a chunked layer those within the prompt's current chunk, a state
    layer its state (always: the newest upstream moves it even when no token is charged)."""
    total = 0
    for kind, per_token, length, state in layers:
        if kind == "full":
            kept = charged_tokens
        elif kind == "window":
            kept = min(charged_tokens, length)
        elif kind == "chunk":
            start_of_chunk = (num_input_tokens - 1) // length * length if num_input_tokens else 0
            kept = min(charged_tokens, num_input_tokens - start_of_chunk)
        else:
            kept = 0
            total += state  # even when no token is charged
        total += per_token * kept
    return total
