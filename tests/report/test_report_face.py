"""The public face of the report: what it exports, and that it stays light."""

from __future__ import annotations

import subprocess
import sys

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
