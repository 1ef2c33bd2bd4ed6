"""Profiling: the call graph built from pstats and its renderers."""
