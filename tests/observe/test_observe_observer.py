"""The observer's loop on this very process: which threads are Python's, whose CPU is
whose (never counted twice)."""

from __future__ import annotations

import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from onnxrt_backend_dev.monitoring._observe import opcodes
from onnxrt_backend_dev.monitoring._observe.build import native_threads, split
from onnxrt_backend_dev.monitoring._observe.observer import (
    NATIVE,
    POOL,
    PYTHON,
    Observer,
    ProcessRecord,
    ThreadRecord,
    _other_threads,
    _python_rows,
    credit_pool,
    sample_threads,
)
from onnxrt_backend_dev.monitoring._observe.reader import ThreadSample

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")


def _record() -> ProcessRecord:
    record = ProcessRecord(os.getpid(), None, bytes(256), sink=None)
    record.reader = object()  # type: ignore[assignment]  # read as Python
    main = ThreadRecord(threading.main_thread().ident or 0, os.getpid(), True)
    record.threads[(1, main.ident)] = main
    return record


def _lines(record: ProcessRecord, n: int) -> tuple[ThreadRecord, list[int]]:
    """The record's main thread and ``n`` stack ids of one frame each (lines A, B...)."""
    record.infos.extend([SimpleNamespace(ops=bytes(4))] * n)
    return next(iter(record.threads.values())), [record.intern((i, 0)) for i in range(n)]


def _runs(main: ThreadRecord, sid: int) -> None:
    """One sample of the main thread on ``sid`` (8 columns, no pool's), its stack now."""
    main.add(sid, 0.05, 0.0, 0.0, 0.0, 0.0, 0.0)
    main.last_sid = sid


def test_a_python_thread_missing_from_one_read_is_not_counted_as_a_native_one() -> None:
    # GIVEN a process whose main thread was read before, and a thread Python's reader
    # did not list (a pool started from C, as the observer sees it)
    record = _record()
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        # WHEN the threads are listed after a read that failed (no thread in it)
        _other_threads(record, [])
        # THEN the main thread is not among the native ones (its CPU would count twice)
        assert os.getpid() not in record.others
        assert worker.native_id in record.others
        # AND a thread listed as native, then read as Python's, leaves the native ones
        known = ThreadRecord(worker.ident or 0, worker.native_id or 0, False)
        record.threads[(2, known.ident)] = known
        _other_threads(record, [])
        assert worker.native_id not in record.others
    finally:
        stop.set()
        worker.join()
        record.close()


def test_the_pools_cpu_lands_on_the_stack_the_main_thread_runs_at_each_read() -> None:
    # GIVEN a main thread sampled on line A, then on line B, and a thread Python does not
    # know (a pool started from C, as the observer sees it) using CPU while it waits
    record = _record()
    main, (line_a, line_b) = _lines(record, 2)
    go, used = threading.Event(), threading.Event()

    def pool() -> None:
        go.wait()
        _spin(0.02)  # 20 ms of its own CPU, not of the wall clock
        used.set()
        go.clear()
        go.wait()

    worker = threading.Thread(target=pool)
    worker.start()
    try:
        _runs(main, line_a)
        _other_threads(record, [])  # its first reading: nothing to credit yet
        go.set()
        used.wait(5)
        # WHEN the pool's CPU is read
        _other_threads(record, [])
        # THEN what it used since the last read is on line A, in the pool's column
        pooled = main.rows[line_a][POOL]
        assert pooled >= 0.02 and len(main.rows[line_a]) == POOL + 1
        # AND it is the pool's total, listed apart as before (counted once each way)
        assert sum(s for _, _, s in native_threads(record)) == pytest.approx(pooled)
        # WHEN the main thread moved on to line B and the pool used 1.5 s more
        _runs(main, line_b)
        credit_pool(record, 1.5)
        # THEN line B has it, line A keeps its own
        assert main.rows[line_b][POOL] == 1.5 and main.rows[line_a][POOL] == pooled
        # AND the model's row carries it at its own index, a row without it reads 0
        from onnxrt_backend_dev.monitoring._sampling import model

        assert split(main.rows[line_b])[model.POOL] == 1.5
        assert model.column(split(main.rows[line_b][:POOL]), model.POOL) == 0.0
    finally:
        go.set()
        worker.join()
        record.close()


def test_a_pool_born_and_idle_between_two_reads_keeps_its_cpu() -> None:
    # GIVEN a main thread on line A, its threads listed once, then a pool thread started
    # that works 20 ms of its own CPU and idles before the next listing
    record = _record()
    main, (line_a,) = _lines(record, 1)
    _runs(main, line_a)
    _other_threads(record, [])
    worked, stop = threading.Event(), threading.Event()

    def pool() -> None:
        _spin(0.02)
        worked.set()
        stop.wait()

    worker = threading.Thread(target=pool)
    worker.start()
    try:
        worked.wait(5)
        # WHEN the threads are listed again
        _other_threads(record, [])
        # THEN its whole CPU is the run's: on line A and in the pool's total
        assert main.rows[line_a][POOL] >= 0.02
        assert sum(s for _, _, s in native_threads(record)) >= 0.02
    finally:
        stop.set()
        worker.join()
        record.close()


def test_no_main_thread_read_yet_credits_no_stack() -> None:
    record = _record()
    credit_pool(record, 1.0)  # its stack not read yet (last_sid -1): the total keeps it
    assert not next(iter(record.threads.values())).rows
    record.close()


def test_pools_are_named_by_kernel_name_without_digits() -> None:
    # GIVEN threads named by their pool and number, one keeping the process's name, one
    # whose name could not be read
    record = _record()
    record.comm = "python3.11"
    for tid, name in enumerate(["onnxruntime-1", "onnxruntime-2", "OpenBLAS", "python3.11", ""]):
        record.others[tid] = [name, 0, (tid + 1) * 10**9, "", -1]
    # THEN one row per pool, the unnamed threads together
    assert sorted(native_threads(record)) == [
        ("OpenBLAS", 1, 3.0), ("onnxruntime", 2, 3.0), ("unnamed", 2, 9.0)
    ]  # fmt: skip
    record.close()


def test_nothing_is_listed_before_the_program_is_read_as_python() -> None:
    record = _record()
    record.reader = None
    _other_threads(record, [])
    assert not record.others
    record.close()


OP_OPERATOR, OP_CALL, OP_BYTECODE = 10, 20, 30


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _split_of(record: ProcessRecord, offsets: list[int]) -> list[tuple[float, float]]:
    """The Python and native CPU credited at each sample of this thread on an
    instruction (the CPU since the previous sample is credited to what it runs now)."""
    flags = bytearray(256)
    flags[OP_OPERATOR], flags[OP_CALL] = opcodes.OPERATOR, opcodes.NATIVE_CALL
    record.flags = bytes(flags)
    record.infos.append(SimpleNamespace(ops=bytes([OP_OPERATOR, OP_CALL, OP_BYTECODE])))
    out = []
    for i, offset in enumerate([2, *offsets]):  # the first reading of its CPU: none yet
        _spin(0.002)
        sample = ThreadSample(1, 2, threading.get_native_id(), (0, offset), True, 0, True)
        sample_threads(record, _python_rows(record, [sample]), float(i), 0.01)
        row = next(iter(record.threads.values())).rows[record.intern((0, offset))]
        out.append((row[PYTHON], row[NATIVE]))
    return out[1:]


def test_a_call_into_c_is_native_and_an_operator_only_while_it_lasts() -> None:
    record = _record()
    record.threads.clear()
    # a call into C (a numpy method, sorted): native at its first sample
    (python, native), *_ = _split_of(record, [1])
    assert native > 0 and python == 0
    # an operator seen once (an int's % in a loop): the interpreter's work, Python
    record = _record()
    record.threads.clear()
    first, second = _split_of(record, [0, 0])
    assert first[0] > 0 and first[1] == 0
    # the same operator at the next sample too (a numpy a @ b): native from then on
    assert second[1] > 0 and second[0] == first[0]
    record.close()


@pytest.mark.parametrize(
    ("name", "family", "kind"),
    [
        ("CALL_ADAPTIVE", "CALL", opcodes.NATIVE_CALL),  # 3.11 warming up: the generic call
        ("PRECALL_ADAPTIVE", "PRECALL", opcodes.NATIVE_CALL),
        ("PRECALL_BUILTIN_CLASS", "PRECALL", opcodes.NATIVE_CALL),  # np.float32(x)
        ("PRECALL_BUILTIN_FAST_WITH_KEYWORDS", "PRECALL", opcodes.NATIVE_CALL),
        ("CALL_BUILTIN_CLASS", "CALL", opcodes.NATIVE_CALL),
        ("CALL_PY_EXACT_ARGS", "CALL", opcodes.PYTHON),
        ("PRECALL_NO_KW_LIST_APPEND", "PRECALL", opcodes.PYTHON),
        ("BINARY_OP", "BINARY_OP", opcodes.OPERATOR),
        ("BINARY_OP_ADAPTIVE", "BINARY_OP", opcodes.OPERATOR),
        ("BINARY_OP_ADD_INT", "BINARY_OP", opcodes.PYTHON),
        ("BINARY_MULTIPLY", "BINARY_MULTIPLY", opcodes.OPERATOR),  # 3.10
        ("CALL_FUNCTION", "CALL_FUNCTION", opcodes.NATIVE_CALL),
        ("LOAD_FAST", "LOAD_FAST", opcodes.PYTHON),
    ],
)
def test_each_instruction_has_its_kind(name: str, family: str, kind: int) -> None:
    assert opcodes.kind_of(name, family) == kind


def test_a_long_interval_does_not_keep_the_loop_waiting_once_it_is_done() -> None:
    # GIVEN an observer sampling every 1000 s, whose program ends after the first sample
    record = _record()
    record.reader = None
    record.sink = SimpleNamespace(add_tick=lambda *tick: None)
    observer = Observer(record, 1000.0)
    calls = []

    def done() -> bool:
        calls.append(1)
        return len(calls) > 1

    # WHEN it runs THEN it stops at its next look (50 ms), not after 1000 s
    start = time.monotonic()
    observer.run(done)
    assert time.monotonic() - start < 30 and len(calls) == 2
    observer.close()


def _ended(status: int, received: list[int], started: bool) -> tuple[int, str]:
    from onnxrt_backend_dev.monitoring._report.observed import ending_of_run

    ran = SimpleNamespace(file="/home/me/p.py" if started else SITE_PANDAS)
    record = SimpleNamespace(python_seen=started, key_list=[(0, 0)], user_codes={}, infos=[ran])
    run = SimpleNamespace(status=status, received=received, record=record)
    ending = ending_of_run(run)  # type: ignore[arg-type]
    return ending.code, ending.detail


@pytest.mark.parametrize(
    ("status", "received", "started", "code", "words"),
    [
        (9, [2], True, 130, "interrupted (SIGINT), then killed (SIGKILL)"),  # the grace's end
        (9, [15], False, 143, "stopped by SIGTERM before its first line"),  # killed at start
        (1 << 8, [2], False, 130, "before its first line"),  # Python's init_import_site exit 1
        (1 << 8, [2], True, 1, "exited with code 1"),  # the program's own choice
        (0, [2], True, 0, "exited with code 0"),  # it handled Ctrl-C and ended well
        (2, [2], True, 130, "interrupted (SIGINT)"),
        (9, [], True, 137, "killed by SIGKILL"),  # the OOM killer: no signal of the command
    ],
)
def test_the_ending_is_the_signal_the_command_received_when_it_decided(
    status: int, received: list[int], started: bool, code: int, words: str
) -> None:
    found = _ended(status, received, started)
    assert found[0] == code and words in found[1], found


def test_a_ctrl_c_in_the_layout_check_leaves_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from onnxrt_backend_dev.monitoring._observe import verify

    class Interrupted(threading.Thread):
        def start(self) -> None:  # Ctrl-C as start() returns (it waits for the thread)
            super().start()
            raise KeyboardInterrupt

    monkeypatch.setattr(verify.threading, "Thread", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify._check_self(None, None)  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _checks():
        time.sleep(0.01)
    assert not _checks()


def _checks() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "onnxrt-layout-check"]


def test_memory_a_pool_thread_grows_in_library_code_is_the_waiting_users_line() -> None:
    # GIVEN the main thread waiting in the user's line, a pool thread parsing in pandas
    record = _record()
    record.threads.clear()
    record.flags = bytes(256)
    record.infos.extend([SimpleNamespace(ops=bytes(4), file="/home/me/load.py"),
                         SimpleNamespace(ops=bytes(4), file=SITE_PANDAS)])  # fmt: skip
    stop = threading.Event()

    def parse() -> None:
        while not stop.is_set():
            _spin(0.001)

    pool = threading.Thread(target=parse)
    pool.start()
    try:
        main = ThreadSample(1, 1, 0, (0, 0), True, 0, False)  # no CPU read: it waits
        worker = ThreadSample(2, 2, pool.native_id or 0, (1, 0), True, 0, True)
        for i in range(3):  # the pool's thread uses the CPU, the main one waits
            time.sleep(0.01)
            credited = sample_threads(record, _python_rows(record, [main, worker]), float(i), 0.01)
    finally:
        stop.set()
        pool.join()
        record.close()
    # THEN the memory is credited to the user's line, not to the pool's pandas frame
    assert credited == record.intern((0, 0))


SITE_PANDAS = "/venv/lib/python3.11/site-packages/pandas/io/parsers/c_parser_wrapper.py"


def test_an_allocation_of_a_pool_thread_is_the_waiting_users_line() -> None:
    from onnxrt_backend_dev.monitoring._alloc.tracker import _waited_for

    record = _record()
    record.infos.extend([SimpleNamespace(ops=bytes(4), file="/home/me/load.py"),
                         SimpleNamespace(ops=bytes(4), file=SITE_PANDAS)])  # fmt: skip
    user, pandas = record.intern((0, 0)), record.intern((1, 0))
    next(iter(record.threads.values())).last_sid = user  # the main thread waits there
    assert _waited_for(record, pandas) == user
    assert _waited_for(record, user) == user  # a thread running the user's code keeps it
    record.close()
