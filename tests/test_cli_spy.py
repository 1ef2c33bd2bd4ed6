"""Tests for ``python -m onnxrt_backend_dev.monitoring spy``: in-process, once for real."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring import _cli
from onnxrt_backend_dev.monitoring._cli_spy import COMMAND, _exit_code

TIMEOUT = 60
ALLOC = "import sys, time; b = b'x' * (50 * 2**20); time.sleep(0.1); sys.exit({code})"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _main(*argv: str, err: io.StringIO | None = None) -> tuple[int, str, str]:
    out = io.StringIO()
    err = io.StringIO() if err is None else err
    code = _cli.main(["spy", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_is_registered() -> None:
    assert COMMAND.name == "spy" and "memory" in COMMAND.help
    _, commands = _cli.build_parser()
    assert commands["spy"] is COMMAND


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "nothing to spy on"),
        (("--pid", "1", "--", "true"), "either --pid PID or -- COMMAND"),
        (("--delay", "0", "--", "true"), "--delay must be > 0, got 0.0"),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_2(argv: tuple[str, ...], message: str) -> None:
    code, out, err = _main(*argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_missing_command_exits_127() -> None:
    code, _, err = _main("--", "no-such-command-xyz")
    assert code == 127 and "command not found: no-such-command-xyz" in err


def test_exit_codes_of_signals_follow_the_shell() -> None:
    assert (_exit_code(0), _exit_code(3), _exit_code(-9)) == (0, 3, 137)


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_a_command_is_measured_and_its_exit_code_returned(tmp_path: Path) -> None:
    # GIVEN a command allocating 50 MiB and exiting with 3
    files = {k: tmp_path / f"series.{k}" for k in ("json", "csv", "png")}
    code, out, err = _main(
        "--json", str(files["json"]), "--csv", str(files["csv"]), "--plot", str(files["png"]),
        "--", sys.executable, "-c", ALLOC.format(code=3),
    )  # fmt: skip
    # THEN its exit code, the figures with units, the files, and nothing on stderr
    assert code == 3, err
    assert err == ""  # not a terminal: no live status
    assert "cpu: peak" in out and "MiB" in out and "duration" in out and "exit code 3" in out
    doc = json.loads(files["json"].read_text())
    assert doc["exit_code"] == 3 and doc["cpu"]["peak"] > 50 * 2**20
    assert doc["target_exited"] is True and doc["peak_source"] == "hwm"
    with files["csv"].open() as f:
        rows = list(csv.DictReader(f))
    assert rows and rows[0]["channel"] == "cpu" and float(rows[0]["bytes"]) > 0
    assert files["png"].read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_live_status_on_a_terminal_and_none_with_quiet() -> None:
    slow = "import time; b = b'x' * (20 * 2**20); time.sleep(1.2)"
    code, _, err = _main("--", sys.executable, "-c", slow, err=_Terminal())
    assert code == 0 and "peak so far" in err
    code, _, err = _main("--quiet", "--", sys.executable, "-c", slow, err=_Terminal())
    assert code == 0 and err == ""


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_attach_to_a_running_process_until_it_ends() -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    try:
        code, out, err = _main("--pid", str(target.pid), "--delay", "0.02")
    finally:
        target.wait(TIMEOUT)
    assert code == 0, err
    assert out.startswith(f"pid {target.pid}\n") and "exited before stop()" in out


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_attach_to_a_missing_pid_is_one_error_line() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(TIMEOUT)
    code, _, err = _main("--pid", str(proc.pid))
    assert code == 1 and err == f"error: ProcessLookupError: no process with pid {proc.pid}\n"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU driver is present")
def test_cuda_without_a_driver_is_one_error_line_and_no_leftover_command() -> None:
    pytest.importorskip("pynvml")
    code, out, err = _main("--cuda", "--", sys.executable, "-c", "import time; time.sleep(30)")
    assert code == 1 and out == ""
    assert err.startswith("error: RuntimeError: cuda=True but NVML is unusable")


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT)
def test_real_subprocess_exits_with_the_command_code() -> None:
    begin = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "spy", "--",
         sys.executable, "-c", ALLOC.format(code=5)],
        capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert res.returncode == 5, res.stderr
    assert "cpu: peak" in res.stdout and res.stderr == ""
    assert time.monotonic() - begin < TIMEOUT
