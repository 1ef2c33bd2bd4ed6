"""The public face of the report: what it exports, and that it stays light."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from onnxrt_backend_dev.monitoring import report


def test_the_face_exports_the_model_the_renderers_and_monitor() -> None:
    assert report.SCHEMA == "onnxrt-monitoring-report" and report.SCHEMA_VERSION == 1
    for name in report.__all__:
        assert getattr(report, name) is not None


def test_importing_the_face_imports_no_heavy_dependency() -> None:
    code = (
        "import sys, onnxrt_backend_dev.monitoring.report\n"
        "print(sorted(m for m in ('pandas', 'matplotlib', 'pynvml', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


MONITOR_CASES = [
    ({"spy": "yes"}, "spy must be a bool"),
    ({"sampler": 1}, "sampler must be a bool"),
    ({"probes": "nvml"}, "probes must be a list or tuple of probe names"),
    ({"probes": [1]}, "probes must hold probe names (str), got int"),
    ({"label": None}, "label must be a str"),
    ({"interval": float("nan")}, "interval must be a finite number"),
    ({"interval": 0}, "interval must be >= 0.001"),
]


@pytest.mark.parametrize(("kwargs", "message"), MONITOR_CASES)
def test_monitor_refuses_a_bad_argument_naming_it(kwargs: dict[str, Any], message: str) -> None:
    from onnxrt_backend_dev.monitoring._errors import MonitoringError

    ran = []
    # WHEN the block is entered with a bad argument THEN an error of the family naming
    # it, before anything is installed or run
    with pytest.raises((ValueError, TypeError)) as info, report.monitor(**kwargs):
        ran.append(True)
    assert isinstance(info.value, MonitoringError) and message in str(info.value)
    assert ran == []


def test_a_monitored_block_shows_neither_the_tool_nor_a_waiting_thread() -> None:
    import os
    import threading

    from onnxrt_backend_dev import monitoring

    # GIVEN a thread waiting the whole block (as IPython's history thread does)
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait, name="history", daemon=True)
    waiter.start()
    try:
        # WHEN a block is monitored (the tool starts its sampler and imports inside it)
        with report.monitor("block") as m:
            kept = [bytearray(100_000) for _ in range(100)]
            sum(range(300_000))
    finally:
        stop.set()
        waiter.join(30)
    assert kept
    tool = os.path.dirname(monitoring.__file__)
    rep = m.report
    assert rep is not None
    # THEN no hot line, function or part of the peak is the tool's, nor the waiting thread
    assert not [r for r in rep.lines if r.site.file.startswith(tool)], rep.lines
    # (the flat table lists every function: the tool's, as libraries', are not the user's)
    assert all(r.site.library for r in rep.functions if r.site.file.startswith(tool))
    assert not [p for p in rep.composition if "onnxrt_backend_dev" in p.label]
    text = report.to_text(rep)
    assert "_bootstrap" not in text and "history" not in text, text
