"""``perfmodel links``: the interconnect presets, built-in and yours, with their sources."""

from __future__ import annotations

import argparse
from typing import Any

from ._parsing import one_line_warnings


def cmd_links(args: argparse.Namespace) -> int:
    with one_line_warnings("links"):  # a user preset that cannot be used: one line, and the others listed
        return _links()


def _links() -> int:
    import pandas as pd

    from ..handoff import handoff_delay_ms
    from ..network.links import LINKS, link_source, transport_profiles, user_links

    links = {**LINKS, **transport_profiles(), **user_links()}
    rows = [
        {
            "link": name,
            "GB/s per direction": link.effective_bandwidth_gb_s,
            "latency_ms": link.latency_ms,
            "per_block_us": link.per_block_ms * 1000,
            "per_message_us": link.per_message_ms * 1000,
            "fit error": "-" if link.fit is None else f"{link.fit.max_relative_error:.0%}",
            "32k tokens of llama-3.1-70b (ms)": handoff_delay_ms(32768, link, "llama-3.1-70b", block_size=16),
            "kind": link_source(name).split(":")[0],
        }
        for name, link in links.items()
    ]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    sources = [f"  {name}: {link_source(name).partition(': ')[2]}" for name in links if ": " in link_source(name)]
    if sources:
        print("\nSources:\n" + "\n".join(sources))
    print(
        "\nMultiples: '8x ib-ndr' is eight NICs (8 x 50 GB/s). Per-block and per-message costs at 16-token blocks, "
        "one message per block, layer and K or V (kv_layout='layer_kv'). Fit your own: perfmodel calibrate "
        "measurements.csv --name NAME --save; list, show or remove yours: perfmodel presets"
    )
    return 0


def register(sub: Any) -> None:
    """Add ``perfmodel links`` to the subcommands ``sub``."""
    sub.add_parser(
        "links",
        help="the interconnect presets, built-in and yours",
        description="List the interconnect presets (NICs, NVLink, PCIe, transport profiles fitted to "
        "published microbenchmarks, and links you saved with perfmodel calibrate): "
        "bandwidth, latency, per-block and per-message costs, and the handoff of 32k tokens "
        "of Llama-3.1-70B over each. Use a name with --link, or as kv_transfer_bandwidth "
        "in Python.",
    ).set_defaults(run=cmd_links)
