"""One report: time, memory and GPU of a block or a program on one page.

::

    from onnxrt_backend_dev.monitoring.report import monitor, to_text, to_html

    with monitor("training") as m:
        train()
    print(to_text(m.report))          # at most 30 lines
    m.report.export("report.html")    # .html, .json, .txt: the format from the suffix

The block runs under ticks taken every ``interval`` seconds in the main thread (a
``SIGALRM`` handler reading the RSS and the kernel's high-water mark with the running
stack), the sampling profiler (every thread, CPU-time ``SIGPROF``) and the memory spy
(the curve from another process, the GPUs by probe name). The peak is exact (the
high-water mark, reset when the block starts) and credited to the line that built it,
a call that held the GIL or a peak shorter than a tick included; memory columns are net
growth, growth up to the peak (it adds up to ``peak - start``) and the highest RSS while
a function ran. ``onnxrt-monitoring run script.py`` does the same for a whole program,
in a fresh interpreter whose ticks stream to the command, so that the report is written
even when the program is killed. The JSON (:func:`to_json`) has a schema name and a version.
"""

from __future__ import annotations

from ._report.model import SCHEMA, SCHEMA_VERSION, Report
from ._report.render_html import to_html
from ._report.render_json import from_json, to_dict, to_json
from ._report.render_text import to_text
from ._report.session import monitor

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "Report",
    "from_json",
    "monitor",
    "to_dict",
    "to_html",
    "to_json",
    "to_text",
]
