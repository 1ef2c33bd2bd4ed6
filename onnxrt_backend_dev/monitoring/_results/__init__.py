"""Saved results and their comparison: the schema, saving and loading, each command's
payload, repeated runs of programs, the comparison of two results, its verdict and its
renderers (one module each, listed in ``docs/architecture.rst``)."""
