"""The inputs: the table (one entry per input), coercion at the edge, names resolved to numbers."""
