"""The C walk (``_observe/walker.c``) on what can go wrong: a stack 10,000 deep, 1,000
threads, a process gone or refused, a fault of the C code itself (the observer goes on
with the Python reader), and the package without the extension (the Python reader runs
and the notes say so). The torn reads are in test_observe_reader.py (both readers on a
fake memory), the live interpreters of every version in test_observe_live.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakeproc import TYPES, Image

from onnxrt_backend_dev.monitoring._observe import walk
from onnxrt_backend_dev.monitoring._observe.observer import ProcessRecord, sample_process
from onnxrt_backend_dev.monitoring._observe.reader import StackReader
from onnxrt_backend_dev.monitoring._observe.session import availability, open_target

pytestmark = pytest.mark.skipif(
    bool(walk.WHY_NOT) or not availability().ok, reason=walk.WHY_NOT or "no observer"
)

DEEP = """
import sys, time
sys.setrecursionlimit(20_000)
def deep(n):
    if n == 0:
        sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(60)
    return deep(n - 1)
deep(10_000)
"""
THREADS = """
import sys, threading, time
ev = threading.Event()
for _ in range(1000):
    threading.Thread(target=ev.wait, daemon=True).start()
sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(60)
"""


@pytest.fixture
def program(request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str]]:
    """A Python process running ``request.param`` until it says ready."""
    proc = subprocess.Popen([sys.executable, "-c", request.param], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("program", [DEEP], indirect=True)
def test_a_stack_10000_deep_keeps_its_innermost_frames(program: subprocess.Popen[str]) -> None:
    opened = open_target(program.pid)
    reader = opened.reader
    assert reader.native is not None
    # WHEN read by the C walk, THEN its innermost frames, as many as kept, no crash
    (sample,) = reader.threads()
    names = [reader.infos[sample.frames[i]].name for i in range(0, len(sample.frames), 2)]
    assert len(names) == reader.max_depth and names[0] == "deep" and set(names) == {"deep"}
    # AND a sample reads it in bounded time (a few chunks, not 10,000 reads)
    rss, _, rows = reader.native.sample()
    assert rows is not None and rss


@pytest.mark.parametrize("program", [THREADS], indirect=True)
def test_a_thousand_threads_are_read_in_one_call(program: subprocess.Popen[str]) -> None:
    fds = len(os.listdir("/proc/self/fd"))
    opened = open_target(program.pid)
    assert opened.reader.native is not None
    rss, _, rows = opened.reader.native.sample()
    # THEN every thread, its CPU read, no more files kept open than the cache allows
    assert rows is not None and len(rows) == 1001 and rss
    assert all(r[walk.RUN_NS] >= 0 for r in rows)
    assert len(os.listdir("/proc/self/fd")) - fds <= 2 * 256 + 8
    opened.reader.native.close()
    assert len(os.listdir("/proc/self/fd")) - fds <= 8


@pytest.mark.parametrize("program", [THREADS.replace("range(1000)", "range(1)")], indirect=True)
def test_a_process_gone_gives_no_stacks_and_no_error(program: subprocess.Popen[str]) -> None:
    opened = open_target(program.pid)
    program.kill()
    program.wait()
    assert opened.reader.native is not None
    # WHEN the process ended between two samples, THEN no memory, no rows, no exception
    assert opened.reader.native.sample() == (None, None, None)


def test_a_read_refused_everywhere_gives_no_stacks() -> None:
    # GIVEN a memory that refuses every read (a container without CAP_SYS_PTRACE)
    from onnxrt_backend_dev.monitoring._observe.memory import FakeMemory

    class Refused(FakeMemory):
        def read_many(self, requests: Sequence[tuple[int, int]]) -> list[bytes | None]:
            return [None] * len(requests)

    img = Image()
    reader = StackReader(img.memory, img.layout, img.runtime, TYPES)
    assert walk.attach_native(reader, Refused()) == ""
    # THEN the runtime is unreadable: no rows, no exception
    assert reader.native.sample()[2] is None


def test_a_fault_of_the_c_code_is_an_error_not_a_crash() -> None:
    from onnxrt_backend_dev.monitoring._observe import _walker

    with pytest.raises(walk.Fault, match="SIGSEGV"):
        _walker._selftest_fault()


def test_the_observer_goes_on_with_the_python_reader_after_a_fault() -> None:
    # GIVEN this process observed, its C walk faulting at the next sample
    opened = open_target(os.getpid())
    record = ProcessRecord(os.getpid(), opened.reader, opened.verified.native_flags, _Sink())

    class Faulting:  # the C walk, with its sample faulting
        def __init__(self, walker: Any) -> None:
            self.walker, self.counts = walker, walker.counts
            self.set_interner, self.close = walker.set_interner, walker.close

        def sample(self, *args: object) -> None:
            raise walk.Fault("the C walker faulted (SIGSEGV) while reading the stacks")

    assert opened.reader.native is not None
    opened.reader.native = Faulting(opened.reader.native)
    # WHEN sampled
    sample_process(record, 1.0)
    # THEN the fault is kept for the notes, the walk dropped, the stacks read in Python
    assert record.faults == ["the C walker faulted (SIGSEGV) while reading the stacks"]
    assert opened.reader.native is None
    assert any(th.rows for th in record.threads.values())


class _Sink:
    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        """Memory ticks are not looked at here."""


def test_without_the_extension_the_python_reader_runs_and_says_so(tmp_path: Path) -> None:
    # GIVEN the package as installed without a compiler (the module cannot be imported)
    script = tmp_path / "s.py"
    script.write_text("def f():\n    return sum(range(3 * 10**6))\nf()\n")
    code = (
        "import sys; sys.modules['onnxrt_backend_dev.monitoring._observe._walker'] = None\n"
        "from onnxrt_backend_dev.monitoring._cli.dispatch import main\n"
        f"sys.exit(main(['profile', {str(script)!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)  # fmt: skip
    # THEN the observer reads the program in Python, and the note says why
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert "stacks read in Python: the C walker is not built" in text, text
    assert "f  s.py:1" in text, text
