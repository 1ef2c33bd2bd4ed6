"""Following the program's Python children that are not forks: the variable left in
the environment, its checks, the labels, and the ``sitecustomize`` that starts it
(which must leave an interpreter as it would have started, its own sitecustomize run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._report import follow
from onnxrt_backend_dev.monitoring._report.stream import command_label

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "/proc/1/fd/3|0.005",  # two parts
        "/etc/passwd|0.005|/root",  # not a /proc path
        "/proc/1/fd/3|abc|/root",
        "/proc/1/fd/3|nan|/root",
        "/proc/1/fd/3|0|/root",
        "/proc/1/fd/3|1e9|/root",
        "/proc/1/fd/3|0.005|/root|x",
    ],
)
def test_a_variable_that_makes_no_sense_starts_nothing(spec: str) -> None:
    assert follow.parse_spec(spec) is None
    assert follow.start_in_descendant(spec) is False


def test_a_pipe_that_is_gone_starts_nothing() -> None:
    # GIVEN the path of a descriptor no process has WHEN started THEN nothing, no error
    assert follow.parse_spec("/proc/1/fd/999999|0.005|/x") == ("/proc/1/fd/999999", 0.005)
    assert follow.start_in_descendant(f"/proc/{os.getpid()}/fd/999999|0.005|/x") is False


def test_labels_are_one_printable_bounded_line() -> None:
    assert command_label(["python", "a.py", "x\ny\x1b[31m"]) == "python a.py x?y?[31m"
    long = command_label(["x" * 500])
    assert len(long) == 160 and long.endswith("…")


def test_the_environment_left_for_the_children(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a PYTHONPATH of the user's WHEN the program's children are followed
    monkeypatch.setenv("PYTHONPATH", "/user/lib")
    monkeypatch.delenv(follow.ENV, raising=False)
    follow.follow_descendants(7, 0.005)
    # THEN the boot folder leads it, the variable says the pipe, interval and package
    assert os.environ["PYTHONPATH"] == follow.BOOT_DIR + os.pathsep + "/user/lib"
    path, interval = follow.parse_spec(os.environ[follow.ENV]) or ("", 0.0)
    assert path == f"/proc/{os.getpid()}/fd/7" and interval == 0.005
    assert os.path.isfile(os.path.join(follow.BOOT_DIR, "sitecustomize.py"))


def _python(code: str, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_boot_runs_the_sitecustomize_it_hides_and_leaves_no_trace(tmp_path: Path) -> None:
    # GIVEN a sitecustomize of the user's, behind the boot folder, and a variable whose
    # pipe does not exist
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE = 1\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = follow.BOOT_DIR + os.pathsep + str(tmp_path)
    env[follow.ENV] = f"/proc/{os.getpid()}/fd/999999|0.005|{follow._ROOT}"
    # WHEN a Python starts
    code = (
        "import builtins, sys; print(getattr(builtins, 'USER_SITE', 0)); "
        f"print({follow.BOOT_DIR!r} in sys.path); "
        "print('onnxrt_backend_dev.monitoring._report.follow' in sys.modules)"
    )
    out = _python(code, env).split()
    # THEN the user's sitecustomize ran, the boot folder is off sys.path, and it tried
    assert out == ["1", "False", "True"]


def test_a_python_given_a_real_pipe_streams_its_ticks_with_its_command(tmp_path: Path) -> None:
    from onnxrt_backend_dev.monitoring._report.stream import StreamReader
    from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator

    # GIVEN a pipe whose write end this process holds, named by its /proc path
    rfd, wfd = os.pipe()
    env = dict(os.environ)
    env["PYTHONPATH"] = follow.BOOT_DIR
    env[follow.ENV] = f"/proc/{os.getpid()}/fd/{wfd}|0.002|{follow._ROOT}"
    try:
        # WHEN a Python busy for 0.2 s starts, then ends
        code = "import time\nend = time.perf_counter() + 0.2\nwhile time.perf_counter() < end: pass"
        _python(code, env)
        os.close(wfd)
        wfd = -1
        reader = StreamReader(Aggregator(), pid=os.getpid())
        reader.read_until(rfd, lambda: True)
    finally:
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)
    # THEN its ticks arrived under its own pid, with its command line
    ((pid, agg),) = reader.children.items()
    assert reader.commands[pid] == command_label([sys.executable, "-c", code])
    assert agg.last_t > agg.first_t and not reader.bad
