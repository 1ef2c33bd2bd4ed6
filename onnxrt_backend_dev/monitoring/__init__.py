"""Timing, memory and profiling monitors.

The public faces are :mod:`onnxrt_backend_dev.monitoring.benchmark`,
:mod:`onnxrt_backend_dev.monitoring.memory_peak` and
:mod:`onnxrt_backend_dev.monitoring.profiling`. This package stays light on import:
pandas, matplotlib and NVML are only imported by the functions that need them.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Registers the notebook magics (``%load_ext onnxrt_backend_dev.monitoring``)."""
    from ._magics import register_magics

    register_magics(ipython)
