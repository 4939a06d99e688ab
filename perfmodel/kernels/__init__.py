"""The numba kernels: jitted formulas, the handoff kernel, the event loop, the max-min filler."""
