"""The optional compiled parts (C, Linux only): the allocation-tracking shim, and
valgrind's client requests for counted blocks (where valgrind's headers are found).

Everything else is declared in ``pyproject.toml``. The extension is optional: without a
C compiler the package still installs, and allocation tracking says it is off.
"""

import os
import sys

from setuptools import Extension, setup

# valgrind's headers (Debian's valgrind package installs them beside the tool).
VALGRIND_HEADERS = "/usr/include/valgrind/callgrind.h"

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

    if os.path.exists(VALGRIND_HEADERS):
        EXTENSIONS.append(
            Extension(
                "onnxrt_backend_dev.monitoring._count._client",
                sources=["onnxrt_backend_dev/monitoring/_count/client.c"],
                extra_compile_args=["-O2", "-std=gnu11", "-fvisibility=hidden"],
                optional=True,
            )
        )

setup(ext_modules=EXTENSIONS)
