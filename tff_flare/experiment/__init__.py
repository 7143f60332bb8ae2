"""See the package docstring of tff_flare."""
