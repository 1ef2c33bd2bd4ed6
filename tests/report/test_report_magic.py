"""The ``%%monitor`` cell magic, driven through IPython's own API."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("IPython")

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

# 80 MiB at once: over glibc's largest mmap threshold, always new pages.
CELL = "def fill():\n    return bytearray(80 * 2**20)\n\ndata = fill()\ndel data\n"


@pytest.fixture(scope="module")
def ip() -> Iterator[Any]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "onnxrt_backend_dev.monitoring")
    yield shell
    shell.reset(new_session=False)


def test_monitor_prints_the_summary_and_returns_the_report(ip: Any, tmp_path: Path) -> None:
    # WHEN a cell filling 60 MiB runs under %%monitor with -o and --html
    page = tmp_path / "cell.html"
    with capture_output() as out:
        report = ip.run_cell_magic("monitor", f"-o --html {page}", CELL)
    # THEN the summary is printed, the peak credited to fill, the page written
    assert "peak RSS" in out.stdout and len(out.stdout.splitlines()) <= 30
    assert out.stdout.endswith("\n")  # the next output starts a line of its own
    assert report.peak.site is not None and report.peak.site.function == "fill"
    assert report.tree[0].site.file == "<monitor>"
    assert "<svg" in page.read_text(encoding="utf-8")


def test_monitor_quiet_prints_nothing(ip: Any) -> None:
    with capture_output() as out:
        assert ip.run_cell_magic("monitor", "-q", "x = 1\n") is None
    assert out.stdout == ""


def test_monitor_lets_the_cell_error_through(ip: Any) -> None:
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("monitor", "-q", "1 / 0\n")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--interval 0", "--interval must be >= 0.001"),
        ("--interval x", "--interval must be a float"),
        ("--probe nope", "%%monitor cannot run"),
        ("--bogus", "see %%monitor --help"),
        ("--interval 1e9", "--interval must be <= 1"),
        ("extra words", "%%monitor: unexpected 'extra words'"),
        ("--html ''", "cannot write --html '': the path is empty"),
    ],
)
def test_monitor_rejects_bad_options_in_one_line(ip: Any, line: str, message: str) -> None:
    ip.user_ns.pop("ran", None)
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("monitor", line, "ran = True\n")
    assert "ran" not in ip.user_ns


def test_monitor_help_lists_its_options(ip: Any) -> None:
    with capture_output() as out:
        ip.run_cell_magic("monitor", "--help", "ran = True\n")
    for option in ("--interval SECONDS", "--probe NAME", "--html FILE", "-q", "-o"):
        assert option in out.stdout


def _bad_paths(tmp: Path) -> list[tuple[str, str]]:
    """``(the magic's line, what the one-line error says)`` for output files the command
    line refuses too."""
    (tmp / "folder").mkdir(exist_ok=True)
    dangling = tmp / "dangling.html"
    if not dangling.is_symlink():
        dangling.symlink_to(tmp / "nowhere" / "x.html")
    same = tmp / "same.out"
    return [
        (f"--html {tmp / 'folder'}", "cannot write --html .*it is a folder"),
        (f"--json {tmp / 'missing' / 'r.json'}", "cannot write --json .*does not exist"),
        (f"--html {dangling}", "cannot write --html .*symbolic link"),
        (f"--html {same} --json {same}", "cannot write --json .*the same file as --html"),
    ]


@pytest.mark.parametrize("case", range(4))
def test_monitor_refuses_bad_output_files_before_the_cell_runs(
    ip: Any, tmp_path: Path, case: int
) -> None:
    # GIVEN an output file %%monitor could not write at the end
    line, message = _bad_paths(tmp_path)[case]
    ip.user_ns.pop("ran", None)
    # WHEN the cell is run with it
    with pytest.raises(UsageError, match=message) as info:
        ip.run_cell_magic("monitor", f"-q {line}", "ran = True\n")
    # THEN one line names the option and the file, and the cell did not run
    assert "\n" not in str(info.value) and str(info.value).startswith("%%monitor: ")
    assert "ran" not in ip.user_ns


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_monitor_refuses_a_folder_it_may_not_write(ip: Any, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(UsageError, match=r"cannot write --json .*permission denied"):
            ip.run_cell_magic("monitor", f"-q --json {locked / 'r.json'}", "ran = True\n")
    finally:
        locked.chmod(0o700)


def test_monitor_writes_both_files_when_both_are_good(ip: Any, tmp_path: Path) -> None:
    page, doc = tmp_path / "r.html", tmp_path / "r.json"
    ip.run_cell_magic("monitor", f"-q --html {page} --json {doc}", "x = [0] * 1000\n")
    assert "<svg" in page.read_text(encoding="utf-8")
    assert '"schema": "onnxrt-monitoring-report"' in doc.read_text(encoding="utf-8")


@pytest.mark.parametrize("error", ["1 / 0", "raise KeyboardInterrupt"])
def test_monitor_writes_its_page_when_the_cell_raises_or_is_interrupted(
    ip: Any, tmp_path: Path, error: str
) -> None:
    page = tmp_path / "cell.html"
    with pytest.raises((ZeroDivisionError, KeyboardInterrupt)):
        ip.run_cell_magic("monitor", f"-q --html {page}", f"x = [0] * 1000\n{error}\n")
    assert "the cell raised" in page.read_text(encoding="utf-8")
