"""The observer's loop on this very process: which threads are Python's, whose CPU is
whose (never counted twice)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from onnxrt_backend_dev.monitoring._observe.observer import (
    ProcessRecord,
    ThreadRecord,
    _other_threads,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")


def _record() -> ProcessRecord:
    record = ProcessRecord(os.getpid(), None, bytes(256), sink=None)
    record.reader = object()  # type: ignore[assignment]  # read as Python
    main = ThreadRecord(threading.main_thread().ident or 0, os.getpid(), True)
    record.threads[(1, main.ident)] = main
    return record


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


def test_nothing_is_listed_before_the_program_is_read_as_python() -> None:
    record = _record()
    record.reader = None
    _other_threads(record, [])
    assert not record.others
    record.close()
