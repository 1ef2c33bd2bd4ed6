"""What the observer keeps between runs (``_observe/checks.py``): the layout check and
the interpreter's symbols, used again for the same interpreter file, never trusted
blindly (a damaged file or line is ignored and rewritten)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._observe import checks, target, verify
from onnxrt_backend_dev.monitoring._observe.session import availability

pytestmark = pytest.mark.skipif(not availability().ok, reason="the observer cannot run here")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder, nothing of this process's memory of it."""
    monkeypatch.setenv(checks.ENV, str(tmp_path))
    monkeypatch.setattr(checks, "_READ", {})
    monkeypatch.setattr(verify, "_CACHE", {})
    yield tmp_path


def _forget() -> None:
    """As a new process: nothing read yet."""
    checks._READ.clear()
    verify._CACHE.clear()


def test_a_check_is_kept_and_used_again(folder: Path) -> None:
    interp = target.locate(os.getpid())
    # WHEN checked, then checked again by a new run
    first = verify.verify(interp)
    _forget()
    again = verify.verify(interp)
    # THEN the second run used what the first kept, with the same findings
    assert not first.kept and again.kept
    assert (again.how, again.native_flags, again.pthread_tid, again.names, again.native) == (
        first.how, first.native_flags, first.pthread_tid, first.names, first.native
    )  # fmt: skip


@pytest.mark.parametrize(
    "damage",
    [
        "not the format line\nwhatever",
        "",
        "\x00\xff" * 100,
        "{flags}",  # the right key, a field of the wrong shape
    ],
)
def test_a_damaged_cache_is_ignored_and_rewritten(folder: Path, damage: str) -> None:
    interp = target.locate(os.getpid())
    key = checks.key_of(interp.path, verify._parts(interp))
    flags = "02" * 256  # a flag that is not 0 or 1
    line = "\t".join(["check", key, "self", flags, "-1", "1", ""])
    text = f"{checks.FORMAT}\n{line}" if damage == "{flags}" else damage
    (folder / checks.FILE).write_text(text, encoding="utf-8", errors="surrogateescape")
    # WHEN a run looks for its check
    found = verify.verify(interp)
    # THEN it checked anew (nothing of the damaged file trusted) and kept a good line
    assert not found.kept
    _forget()
    assert verify.verify(interp).kept
    assert (folder / checks.FILE).read_text().startswith(checks.FORMAT)


def test_another_file_or_a_changed_one_has_another_key(tmp_path: Path) -> None:
    # GIVEN a copy of this interpreter's file, then the copy modified
    exe = tmp_path / "python"
    shutil.copy2(target.executable(os.getpid()) or "", exe)
    key = checks.key_of(str(exe), ("parts",))
    assert key and key != checks.key_of(str(exe), ("other parts",))
    os.utime(exe, ns=(1, 1))
    # THEN nothing kept for the file before applies to it now
    assert checks.key_of(str(exe), ("parts",)) not in ("", key)
    assert checks.key_of(str(tmp_path / "missing"), ("parts",)) == ""


@pytest.mark.parametrize(
    "fields",
    [["4096", "_PyRuntime=281474976710656"], ["x"], ["0", "no_such_symbol=1"], ["0", "=="]],
)
def test_kept_symbols_out_of_bounds_are_not_used(fields: list[str]) -> None:
    assert target._kept_symbols(fields) is None


def test_the_symbols_are_kept_and_read_back(folder: Path) -> None:
    interp = target.locate(os.getpid())
    path = interp.path
    parsed = target._symbols(path)
    _forget()
    assert target._symbols(path) == parsed
    assert "symbols" in (folder / checks.FILE).read_text()


def test_nothing_is_kept_when_the_folder_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(checks.ENV, "")
    checks.store("check", "key", ["a"])
    assert checks.load("check", "key") is None
