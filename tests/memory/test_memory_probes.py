"""Tests for the process probes (``_memory/probes.py``), through a fake procfs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import write_status
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory import probes as _probes

TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(REAL_TIMEOUT)
    return proc.pid


# --- probes, through a fake procfs ----------------------------------------------------


def test_process_probe_reads_and_resets_the_high_water_mark(tmp_path: Path) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)
    probe = _probes.ProcessProbe(42, proc_root=str(tmp_path))
    assert (probe.source, probe.previous_peak) == ("hwm", 5000 * 1024)
    assert (tmp_path / "42" / "clear_refs").read_bytes() == b"5"
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=3000)
    assert probe.read() == (1000 * 1024, 3000 * 1024)
    write_status(tmp_path, 42, rss_kb=None, hwm_kb=None)  # a zombie shows no memory
    with pytest.raises(_probes.TargetGone):
        probe.read()
    probe.close()


def test_probe_without_reset_uses_the_mark_only_when_it_rises(tmp_path: Path) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)
    probe = _probes.ProcessProbe(42, reset_peak=False, proc_root=str(tmp_path))
    assert probe.source == "sampling+hwm"
    assert (tmp_path / "42" / "clear_refs").read_bytes() == b""
    assert probe.read() == (1000 * 1024, 1000 * 1024)  # the old mark is not ours
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=7000)
    assert probe.read() == (1000 * 1024, 7000 * 1024)  # a new mark: this interval's peak
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=2000)
    assert probe.read() == (1000 * 1024, 2000 * 1024)  # another spy reset it: since then
    assert probe.read() == (1000 * 1024, 1000 * 1024)
    probe.close()


def test_probe_falls_back_to_sampling_when_reset_is_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)
    real_open = os.open

    def deny_clear_refs(path: str, flags: int, *args: int) -> int:
        if path.endswith("clear_refs"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(_probes.os, "open", deny_clear_refs)
    probe = _probes.ProcessProbe(42, proc_root=str(tmp_path))
    assert probe.source == "sampling+hwm"
    probe.close()


def test_probe_permission_denied_gives_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)

    def deny(path: str, flags: int, *args: int) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_probes.os, "open", deny)
    with pytest.raises(PermissionError, match=r"pid 42.*same user.*root"):
        _probes.ProcessProbe(42, proc_root=str(tmp_path))


def test_probe_of_a_missing_process_names_the_pid(tmp_path: Path) -> None:
    with pytest.raises(ProcessLookupError, match="no process with pid 77"):
        _probes.ProcessProbe(77, proc_root=str(tmp_path))
    with pytest.raises(ProcessLookupError, match="no process with pid 4194305"):
        _probes.get_memory_rss(2**22 + 1)  # beyond any pid_max


def test_tree_probe_sums_descendants_and_skips_the_excluded_subtree(tmp_path: Path) -> None:
    # GIVEN 10 -> (11 -> 13, 12 the spy -> 14)
    write_status(tmp_path, 10, 1000, 1000, ppid=1)
    write_status(tmp_path, 11, 200, 300, ppid=10)
    write_status(tmp_path, 13, 20, 30, ppid=11)
    write_status(tmp_path, 12, 5000, 5000, ppid=10)
    write_status(tmp_path, 14, 5000, 5000, ppid=12)
    (tmp_path / "self").mkdir()
    children = _probes.children_map(str(tmp_path))
    assert sorted(_probes.descendants(10, children, exclude=[12])) == [11, 13]
    # WHEN the tree is read THEN the spy's subtree is not counted
    tree = _probes.TreeProbe(10, exclude=[12], proc_root=str(tmp_path), clock=lambda: 0.0)
    assert tree.read() == (1220 * 1024, 1330 * 1024)
    assert sorted(tree.probes) == [11, 13]
    tree.close()
