"""Links, transports, clusters, placement of flows on paths, presets and fits."""
