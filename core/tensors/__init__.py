"""Tensor values: lazy loads in logical layout, slices, statistics and NaN/Inf counts in bounded memory."""
