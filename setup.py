"""The optional compiled parts (C, Linux only): the allocation-tracking shim, the
observer's walk of another process's stacks, and valgrind's client requests for counted
blocks (where valgrind's headers are found).

Everything else is declared in ``pyproject.toml``. Every extension is optional: without
a C compiler the package still installs; allocation tracking says it is off, the
observer reads stacks with its Python reader and says which reader ran, and the pytest
plugin's counter says it needs the client requests.
"""

import os
import sys

from setuptools import Extension, setup

# valgrind's headers (Debian's valgrind package installs them beside the tool).
VALGRIND_HEADERS = "/usr/include/valgrind/callgrind.h"
FLAGS = ["-O2", "-std=gnu11", "-fvisibility=hidden", "-fno-strict-aliasing"]
EXTENSIONS = []
if sys.platform.startswith("linux"):
    EXTENSIONS.append(
        Extension(
            "onnxrt_backend_dev.monitoring._alloc._shim",
            sources=["onnxrt_backend_dev/monitoring/_alloc/shim.c"],
            extra_compile_args=FLAGS,
            libraries=["dl", "m", "pthread"],
            optional=True,
        )
    )
    EXTENSIONS.append(
        Extension(
            "onnxrt_backend_dev.monitoring._observe._walker",
            sources=["onnxrt_backend_dev/monitoring/_observe/walker.c"],
            extra_compile_args=[*FLAGS, "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
            optional=True,
        )
    )

    if os.path.exists(VALGRIND_HEADERS):
        EXTENSIONS.append(
            Extension(
                "onnxrt_backend_dev.monitoring._count._client",
                sources=["onnxrt_backend_dev/monitoring/_count/client.c"],
                extra_compile_args=FLAGS,
                optional=True,
            )
        )

setup(ext_modules=EXTENSIONS)
