"""A native pool's threads keeping the process's name, named by the library on their
stacks: a made-up syscall line, mappings and stack, then real pools (OpenBLAS's, ONNX
Runtime's) under ``profile``."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onnxrt_backend_dev.monitoring._observe import pools
from onnxrt_backend_dev.monitoring._observe.build import native_threads
from onnxrt_backend_dev.monitoring._observe.memory import FakeMemory
from onnxrt_backend_dev.monitoring._observe.observer import ProcessRecord
from onnxrt_backend_dev.monitoring._observe.pools import Code, name_pools, stack_library
from onnxrt_backend_dev.monitoring._observe.process import Mapping

SITE = "/venv/lib/python3.11/site-packages/"
STACK, LIBC, PYTHON, ORT, NUMPY = 0x7000_0000, 0x7F00_0000, 0x40_0000, 0x7F10_0000, 0x7F20_0000
GOMP = 0x7F30_0000
MAPS = [
    Mapping(PYTHON, PYTHON + 0x1000, "r-xp", 0, "/usr/bin/python3.11"),
    Mapping(STACK, STACK + 0x2000, "rw-p", 0, ""),
    Mapping(LIBC, LIBC + 0x1000, "r-xp", 0, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
    Mapping(ORT, ORT + 0x1000, "r--p", 0, SITE + "onnxruntime/capi/onnxruntime_pybind11_state.so"),
    Mapping(ORT + 0x1000, ORT + 0x9000, "r-xp", 0x1000,
            SITE + "onnxruntime/capi/onnxruntime_pybind11_state.so"),
    Mapping(NUMPY, NUMPY + 0x1000, "r-xp", 0, SITE + "numpy.libs/libscipy_openblas64_-ab12.so"),
    Mapping(GOMP, GOMP + 0x1000, "r-xp", 0, SITE + "torch/lib/libgomp-a34b3233.so.1"),
]  # fmt: skip
SP = STACK + 0x100
BLOCKED = b"202 0x7f01 0x80 0x0 0x0 0x0 0x0 %#x %#x\n" % (SP, LIBC + 0x10)
ORT_LABEL = "onnxruntime (onnxruntime_pybind11_state)"


def _stack(*words: int) -> FakeMemory:
    """A thread's stack: ``words`` from the stack pointer up, zeros to the mapping's end."""
    data = bytearray(0x2000)
    struct.pack_into(f"<{len(words)}Q", data, SP - STACK, *words)
    return FakeMemory({STACK: bytes(data)})


def test_the_first_library_on_the_stack_not_the_runtimes_names_the_thread() -> None:
    # GIVEN a thread blocked in libc, its stack holding junk, the C runtime's, the
    # interpreter's, data of the library, then ONNX Runtime's and numpy's return addresses
    memory = _stack(7, SP + 64, LIBC + 0x20, PYTHON + 8, ORT + 0x10, ORT + 0x1234, NUMPY + 4)
    # THEN ONNX Runtime's code names it, labelled as the report labels a library
    assert stack_library(BLOCKED, Code(MAPS), memory) == ORT_LABEL
    # AND numpy's OpenBLAS by its package, when it comes first
    assert stack_library(BLOCKED, Code(MAPS), _stack(NUMPY + 4, ORT + 0x1234)) == (
        "numpy (libscipy_openblas64_-ab12)"
    )
    # AND a stack of the runtime's alone names nothing
    assert stack_library(BLOCKED, Code(MAPS), _stack(LIBC + 1, PYTHON + 1)) == ""
    # AND OpenMP's code names a thread only when no other library is on its stack
    assert stack_library(BLOCKED, Code(MAPS), _stack(GOMP + 1, ORT + 0x1234)) == ORT_LABEL
    assert stack_library(BLOCKED, Code(MAPS), _stack(GOMP + 1, LIBC + 1)) == (
        "torch (libgomp-a34b3233)"
    )


def _entries(*names: str) -> dict[int, list[Any]]:
    return {tid: [name, 0, 10**9, "", 0] for tid, name in enumerate(names, start=100)}


def test_a_thread_running_is_tried_on_later_reads_then_left_unnamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pools, "LAST_TRY", 5)
    memory = _stack(ORT + 0x1234)
    lines = {100: [b"running\n"] * 2 + [BLOCKED], 101: [b"running\n"] * 99}
    asked: list[int] = []

    def syscall(pid: int, tid: int) -> bytes:
        asked.append(tid)
        return lines[tid].pop(0)

    # GIVEN two threads keeping the process's name, one named by the kernel
    others = _entries("python3", "python3", "OpenBLAS")
    for _ in range(10):
        # WHEN read every period
        name_pools(1, others, "python3", memory, syscall, lambda pid: MAPS)
    # THEN the one running twice is named at the read that found it blocked
    assert others[100][3:] == [ORT_LABEL, -1] and asked.count(100) == 3
    # AND the one always running is tried at each read until the last try, then left
    assert others[101][3:] == ["", -1] and asked.count(101) == 6
    # AND the kernel's name wins: its stack is never read
    assert 102 not in asked
    record = ProcessRecord(os.getpid(), None, bytes(256), sink=None)
    record.comm, record.others = "python3", others
    assert sorted(native_threads(record)) == [
        ("OpenBLAS", 1, 1.0), (ORT_LABEL, 1, 1.0), ("unnamed", 1, 1.0)
    ]  # fmt: skip
    record.close()


@pytest.mark.parametrize(
    "line",
    [b"", b"garbage\n", b"202 0xzz 0x1\n", b"-1 0x1 0x2\n", b"-1 %#x 0x2 0x3\n" % SP,
     b"-1 0xffffffffffffffffffffffff 0x1\n", b"202 " + b"0x1 " * 200],
)  # fmt: skip
def test_a_line_without_a_readable_stack_leaves_the_thread_unnamed(line: bytes) -> None:
    others = _entries("python3")
    memory = _stack(ORT + 0x1234)
    name_pools(1, others, "python3", memory, lambda pid, tid: line, lambda pid: MAPS)
    assert others[100][3:] == ["", -1]  # not tried again
    # AND a stack pointer whose mapping is not readable, or mappings gone, name nothing
    assert stack_library(BLOCKED, Code(MAPS), FakeMemory()) == ""
    others = _entries("python3")

    def gone(pid: int) -> list[Mapping]:
        raise OSError("gone")

    name_pools(1, others, "python3", memory, lambda pid, tid: BLOCKED, gone)
    assert others[100][3] == ""


POOL = """\
import sys, time
import numpy as np

a = np.random.rand(400, 400)
end = time.perf_counter() + 0.6
while time.perf_counter() < end:
    a @ a
if sys.argv[1] == "onnxruntime":
    import onnx, onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [256, 256])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [256, 256])
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "X"], ["Y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 4
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    data = np.random.rand(256, 256).astype(np.float32)
    for _ in range(30):
        sess.run(None, {"X": data})
time.sleep(0.8)  # the pools idle: their threads block, to be read
"""


@pytest.mark.parametrize("library", ["numpy", "onnxruntime"])
def test_a_real_pool_is_named_after_its_library(tmp_path: Path, library: str) -> None:
    from onnxrt_backend_dev.monitoring._observe.session import availability

    if not sys.platform.startswith("linux") or not availability().ok:
        pytest.skip("the observer cannot run here")
    for module in {"numpy", library} | ({"onnx"} if library == "onnxruntime" else set()):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"no {module}")
    # GIVEN a program whose pool threads keep the process's name (OpenBLAS's, 2 threads,
    # then ONNX Runtime's, 4)
    (tmp_path / "pool.py").write_text(POOL)
    out = tmp_path / "p.json"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    # WHEN profiled
    proc = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "profile", "-q", "-o",
         str(out), "pool.py", library], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # THEN its pool is named after the library, which holds its CPU (a thread that ended
    # before it was read, a few microseconds of CPU, stays unnamed)
    pooled = {t["name"]: t["cpu"] for t in json.loads(out.read_text())["native_threads"]}
    named = sum(cpu for name, cpu in pooled.items() if name.startswith(library))
    assert named > 0 and named > pooled.get("unnamed", 0.0), pooled
