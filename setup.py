"""The optional compiled parts (C, Linux only): the allocation-tracking shim, and the
observer's walk of another process's stacks.

Everything else is declared in ``pyproject.toml``. Both extensions are optional: without
a C compiler the package still installs; allocation tracking says it is off, and the
observer reads stacks with its Python reader and says which reader ran.
"""

import sys

from setuptools import Extension, setup

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

setup(ext_modules=EXTENSIONS)
