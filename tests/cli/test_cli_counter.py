"""``--counter instructions`` on ``time``, ``profile`` and ``compare``, and the pytest
plugin's ``--monitoring-counter``: bad input refused in one line with exit code 2, and
real counts where valgrind is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._count import valgrind

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
# valgrind runs a program 20 to 100 times slower: minutes at load 8
pytestmark = pytest.mark.timeout(600)
C = ("--counter", "instructions")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("time", "--counter", "cycles", "1"), "invalid choice: 'cycles'"),
        (("time", *C, "-p", "2", "1"), "-p/--processes does not apply to --counter"),
        (("time", *C, "-t", "1", "1"), "-t/--max-time does not apply to --counter"),
        (("time", *C, "-r", "5", "1"), "-r/--repeat does not apply to --counter"),
        (("time", *C, "--clock", "cpu", "1"), "--clock does not apply to --counter"),
        (("compare", *C, "a.json", "b.json"), "--counter needs --a/--b"),
        (("compare", *C, "--a", "x.py", "--b", "y.py", "--repeat", "3"), "--repeat does not apply"),
        (("compare", *C, "--a", "x.py", "--b", "y.py", "--cprofile"), "--cprofile does not apply"),
        (("profile", *C, "--repeat", "2", "x.py"), "--repeat does not apply to --counter"),
        (("profile", *C, "--format", "html", "x.py"), "--format html does not apply"),
        (("profile", *C, "--pid", "1"), "--pid does not apply to --counter"),
        (("profile", "--count-bytes", "x.py"), "--count-bytes needs --counter instructions"),
        (
            ("compare", "--count-bytes", "--a", "x.py", "--b", "y.py"),
            "--count-bytes needs --counter",
        ),
    ],
)
def test_bad_options(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(*argv)
    err += capsys.readouterr().err  # argparse's own refusals
    assert code == 2 and "Traceback" not in err and out == ""
    assert message in err.strip().splitlines()[-1]  # after argparse's usage, one line


def test_no_valgrind_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(valgrind.shutil, "which", lambda name: None)
    script = tmp_path / "p.py"
    script.write_text("pass\n")
    for argv in (("time", *C, "-n", "5", "pass"), ("profile", *C, str(script)),
                 ("compare", *C, "--a", str(script), "--b", str(script))):  # fmt: skip
        code, _, err = run_cli(*argv)
        assert code == 2 and "needs valgrind" in err and "apt-get install valgrind" in err, err
        assert "Traceback" not in err


@needs_valgrind
def test_what_fails_under_the_counter(tmp_path: Path) -> None:
    # A statement that raises: exit 1, its error; a program that forks: exit 2, why.
    code, _, err = run_cli("time", *C, "-n", "5", "1 / 0")
    assert code == 1 and "ZeroDivisionError" in err and "Traceback" not in err
    forks = tmp_path / "forks.py"
    forks.write_text("import os, sys\nif os.fork() == 0:\n    os._exit(0)\nos.wait()\n")
    code, _, err = run_cli("compare", *C, "--a", str(forks), "--b", str(forks))
    assert code == 2 and "forked 1 process" in err, err
    # valgrind killed (the out-of-memory killer's SIGKILL): exit 1, said as the tool's
    killed = tmp_path / "killed.py"
    killed.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    code, _, err = run_cli("compare", *C, "--a", str(killed), "--b", str(killed))
    assert code == 1 and "valgrind was killed by SIGKILL" in err and "Traceback" not in err


@needs_valgrind
def test_compare_two_programs_by_their_counts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("s = sum(i * i for i in range(30000))\n")
    b.write_text("s = sum(i * i for i in range(30000)) + sum(i for i in range(30000))\n")
    code, out, err = run_cli("compare", *C, "--a", str(a), "--b", str(b), "--fail-above", "1%")
    assert code == 1 and "B is worse" in out and "counted by valgrind" in out, err
    code, out, _ = run_cli("compare", *C, "--a", str(a), "--b", str(a), "--fail-above", "1%")
    assert code == 0, out


@needs_valgrind
def test_pytest_counts_each_block(tmp_path: Path) -> None:
    from onnxrt_backend_dev.monitoring._count.inprocess import client

    if client() is None:
        pytest.skip("the client requests were not built")
    test = tmp_path / "test_blocks.py"
    body = (
        "def work(n):\n    return sum(i * i for i in range(n))\n\n"
        "def test_a(monitor_time):\n    with monitor_time('a'):\n        work(N)\n"
    )
    test.write_text(body.replace("N", "20000"))
    saved = tmp_path / "s.json"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--monitoring-counter",
            "instructions", str(test)]  # fmt: skip
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

    def session(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*argv, *more], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env=env, check=False)  # fmt: skip

    done = session("--monitoring-save", str(saved))
    assert done.returncode == 0 and "instructions a:" in done.stdout, done.stdout + done.stderr
    assert session("--monitoring-compare", str(saved)).returncode == 0  # unchanged: passes
    test.write_text(body.replace("N", "30000"))  # 1.5 times the work
    done = session("--monitoring-compare", str(saved))
    # 1.5 times the loop: +50 %, give or take the heap's layout (the folder's name moves
    # this block's count by 1.3 %)
    said = re.search(r"instructions a: .*\+(4[6-9]|5[0-4])\.", done.stdout)
    assert done.returncode == 1 and said, done.stdout
