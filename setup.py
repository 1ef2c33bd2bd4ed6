"""The optional compiled part: the allocation-tracking shim (C, Linux only).

Everything else is declared in ``pyproject.toml``. The extension is optional: without a
C compiler the package still installs, and allocation tracking says it is off.
"""

import sys

from setuptools import Extension, setup

EXTENSIONS = []
if sys.platform.startswith("linux"):
    EXTENSIONS.append(
        Extension(
            "onnxrt_backend_dev.monitoring._alloc._shim",
            sources=["onnxrt_backend_dev/monitoring/_alloc/shim.c"],
            extra_compile_args=["-O2", "-std=gnu11", "-fvisibility=hidden", "-fno-strict-aliasing"],
            libraries=["dl", "m", "pthread"],
            optional=True,
        )
    )

setup(ext_modules=EXTENSIONS)
