"""The janitor (``_run.janitor``): what is still registered when its pipe ends is
cleaned up, what was unregistered is left alone."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._run.janitor import Janitor

TIMEOUT = 60


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def _ended(proc: subprocess.Popen[bytes], seconds: float = 15.0) -> bool:
    try:
        proc.wait(seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


@pytest.mark.timeout(TIMEOUT)
def test_what_is_registered_when_the_pipe_ends_is_cleaned_up(tmp_path: Path) -> None:
    # GIVEN a group and two folders (one with a glob character and a space) registered
    kept, gone, odd = _sleeper(), _sleeper(), tmp_path / "a b*"
    folder = tmp_path / "runs"
    for path in (folder, odd):
        path.mkdir()
        (path / "f").write_text("x")
    janitor = Janitor()
    try:
        for proc in (kept, gone):
            janitor.add_group(proc.pid)
        janitor.add_folder(str(folder))
        janitor.add_folder(str(odd))
        janitor.add_folder(str(tmp_path / "line\nbreak"))  # refused: never registered
        # AND one group and one folder unregistered
        janitor.drop_group(kept.pid)
        janitor.drop_folder(str(odd))
        # WHEN its pipe ends as if this process died (what stop() does first)
        janitor.stop()
        # THEN the registered group is killed and the folder removed, the others kept
        assert _ended(gone) and gone.returncode == -9
        assert not folder.exists() and (odd / "f").exists()
        time.sleep(0.2)
        assert kept.poll() is None
    finally:
        for proc in (kept, gone):
            if proc.poll() is None:
                proc.kill()
                proc.wait(TIMEOUT)


def test_a_disabled_janitor_starts_nothing(tmp_path: Path) -> None:
    janitor = Janitor(enabled=False)
    janitor.add_folder(str(tmp_path))
    janitor.stop()
    assert janitor.fd is None and os.path.isdir(tmp_path)
