"""The observer on live processes: finding the interpreter, the layout's check against
this interpreter (and against others installed here), refusals, agreement of the stacks
read with the program's own view, and the CLI's ``dump``/``--pid`` bad inputs."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._errors import ObserveError
from onnxrt_backend_dev.monitoring._observe import target, verify, walk
from onnxrt_backend_dev.monitoring._observe.process import state_of
from onnxrt_backend_dev.monitoring._observe.session import availability, open_target

pytestmark = pytest.mark.skipif(
    not availability().ok, reason=f"the observer cannot run here: {availability().reason}"
)

SLEEPER = """
import sys, threading, time
def waiting_here(ev):
    ev.wait(60)
ev = threading.Event()
threading.Thread(target=waiting_here, args=(ev,), daemon=True, name="side").start()
def main_sleep():
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    time.sleep(60)
main_sleep()
"""


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[str]]:
    """A Python process started on its own (not a child of the observer's command)."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    yield proc
    proc.kill()
    proc.wait()


def _both_readers(opened: Any) -> list[Any]:
    """The stacks read by the reader the target has (the C walk where built), then by
    the Python reader: they must be the same (the process is asleep)."""
    reader = opened.reader
    first = reader.threads()
    native, reader.native = reader.native, None
    try:
        second = reader.threads()
    finally:
        reader.native = native
    assert [(s.frames, s.native_id, s.gil) for s in first] == [
        (s.frames, s.native_id, s.gil) for s in second
    ]
    return first


def test_a_running_process_is_read_with_its_threads(sleeper: subprocess.Popen[str]) -> None:
    opened = open_target(sleeper.pid)
    # THEN the C walk reads it where built (the Python reader otherwise, saying why)
    assert opened.why_python == walk.WHY_NOT
    samples = _both_readers(opened)
    names = [[opened.reader.infos[s.frames[i]].name for i in range(0, len(s.frames), 2)]
             for s in samples]  # fmt: skip
    assert names[0][:2] == ["main_sleep", "<module>"]
    assert any("waiting_here" in n for n in names[1:])
    assert samples[0].native_id == sleeper.pid


def test_this_interpreter_checks_its_own_layout() -> None:
    checked = verify.verify(target.locate(os.getpid()))
    assert checked.how == "self"
    assert sum(checked.native_flags) > 10


def _other_pythons() -> list[str]:
    found = []
    for exe in sorted(glob.glob("/root/.pyenv/versions/3.1[0-3]*/bin/python3.1[0-3]")):
        if os.path.realpath(exe) != os.path.realpath(sys.executable):
            found.append(exe)
    return found[:4]


@pytest.mark.slow
@pytest.mark.parametrize("exe", _other_pythons() or ["none"])
def test_other_versions_installed_here_pass_the_check(exe: str) -> None:
    # GIVEN another CPython of this machine (3.10, 3.12, 3.13 when installed)
    if exe == "none":
        pytest.skip("no other CPython installed here")
    proc = subprocess.Popen([exe, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        # WHEN its layout is checked (a probe child of that executable) and it is read
        opened = open_target(proc.pid)
        assert opened.verified.how == "probe"
        # THEN the C walk passed the check too and reads it (where built), the same
        # stacks as the Python reader, its threads' names too
        assert opened.why_python == walk.WHY_NOT
        samples = _both_readers(opened)
        first = samples[0]
        names = [opened.reader.infos[first.frames[i]].name for i in range(0, len(first.frames), 2)]
        # THEN its stacks are its own
        assert names[:2] == ["main_sleep", "<module>"]
        assert [opened.reader.thread_name(s) for s in samples] == ["", "side"]
        assert samples[0].native_id == proc.pid and samples[1].native_id > 0
    finally:
        proc.kill()
        proc.wait()


def test_a_failed_check_is_an_unverified_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a layout whose frame offsets are wrong (a build with other options)
    interp = target.locate(os.getpid())
    wrong = dict(interp.layout.offsets)
    wrong["frame.back"], wrong["frame.code"] = wrong["frame.code"], wrong["frame.back"]
    from onnxrt_backend_dev.monitoring._observe.layouts import Layout

    bad = interp._replace(layout=Layout(interp.version, wrong, "table"), path="/nonexistent")
    monkeypatch.setattr(verify, "_identity", lambda path: ("fake", path))
    monkeypatch.setattr(verify, "_own_interpreter", lambda: bad)
    # THEN the check fails with its reason, never a wrong stack
    with pytest.raises(ObserveError) as e:
        verify.verify(bad)
    assert e.value.reason == "unverified"


def test_a_refused_read_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a system refusing to read the process (Yama, a container without CAP_SYS_PTRACE)
    from onnxrt_backend_dev.monitoring._observe.memory import FakeMemory, ReadError

    class Refused(FakeMemory):
        def read(self, address: int, size: int) -> bytes:
            raise ReadError(address, size, os.strerror(1))

    with pytest.raises(ObserveError) as e:
        target.locate(os.getpid(), memory=Refused())
    assert e.value.reason == "refused"
    assert "ptrace_scope" in str(e.value) and "SYS_PTRACE" in str(e.value)


def test_a_process_that_is_not_python_is_refused() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        with pytest.raises(ObserveError) as e:
            target.locate(proc.pid)
        assert e.value.reason == "not-python"
    finally:
        proc.kill()
        proc.wait()


def test_a_stripped_interpreter_is_refused_with_its_reason(
    sleeper: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._observe.elf import ElfSymbols

    # GIVEN a Python process whose files export none of the interpreter's symbols (a
    # stripped or static build: its files parsed, nothing wanted found), nothing kept
    monkeypatch.setattr(target, "symbols_of", lambda path, names: ElfSymbols(path, ()))
    monkeypatch.setenv("ONNXRT_MONITORING_CACHE_DIR", "")
    # WHEN it is located
    with pytest.raises(ObserveError) as e:
        target.locate(sleeper.pid)
    # THEN refused as not readable, in one line naming the cause
    assert e.value.reason == "not-python"
    assert "stripped or static" in str(e.value) and "\n" not in str(e.value)


def test_a_zombie_and_a_dead_process_are_refused() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while state_of(proc.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(ObserveError) as e:
        target.locate(proc.pid)
    assert e.value.reason == "zombie"
    proc.wait()
    with pytest.raises(ObserveError) as e:
        target.locate(proc.pid)
    assert e.value.reason == "gone"


AGREEMENT = """
import signal, sys, os
def record(signum, frame):
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    sys.stdout.write(repr(names) + "\\n")
    sys.stdout.flush()
signal.signal(signal.SIGUSR1, record)
def leaf_a(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
def leaf_b(n):
    s = 0.0
    for i in range(n):
        s += i / 3.0
    return s
def middle(k):
    return leaf_a(20000) if k % 2 else leaf_b(20000)
def outer():
    k = 0
    while True:
        middle(k)
        k += 1
sys.stdout.write("ready\\n"); sys.stdout.flush()
outer()
"""


@pytest.mark.slow
def test_the_stacks_read_agree_with_the_programs_own_view() -> None:
    # GIVEN a pure-Python program, frozen (SIGSTOP) at random moments, read from outside,
    # then asked for its own stack (SIGUSR1, handled as it resumes: a few bytecodes later)
    n = 200
    proc = subprocess.Popen([sys.executable, "-c", AGREEMENT], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    ours, theirs = [], []
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        opened = open_target(proc.pid)
        for _ in range(n):
            time.sleep(0.003)
            os.kill(proc.pid, signal.SIGSTOP)
            while state_of(proc.pid) not in ("T", "t"):
                time.sleep(0.0005)
            sample = opened.reader.threads()[0]
            ours.append([opened.reader.infos[sample.frames[i]].name
                         for i in range(0, len(sample.frames), 2)])  # fmt: skip
            os.kill(proc.pid, signal.SIGUSR1)
            os.kill(proc.pid, signal.SIGCONT)
            theirs.append(eval(proc.stdout.readline()))  # its own stack, as it resumed
    finally:
        proc.kill()
        proc.wait()
    # THEN >= 99 % are the same stack, function by function
    same = sum(a == b for a, b in zip(ours, theirs, strict=False))
    assert len(theirs) == n
    assert same >= 0.99 * n, [(a, b) for a, b in zip(ours, theirs, strict=False) if a != b][:5]


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["dump", "--pid", "0"], 2, "--pid must be a positive"),
        (["dump", "--pid", "-4"], 2, "--pid must be a positive"),
        (["dump", "--pid", "99999999"], 1, "no process 99999999"),
        (["profile", "--pid", "99999999"], 1, "no process 99999999"),
        (["run", "--pid", "99999999"], 1, "no process 99999999"),
        (["profile", "--pid", "{self}", "--duration", "nan"], 2, "--duration must be > 0"),
        (["profile", "--pid", "{self}", "--duration", "0"], 2, "--duration must be > 0"),
        (["run", "--pid", "{self}", "--duration", "-1"], 2, "--duration must be > 0"),
        (["profile", "--pid", "{self}", "x.py"], 2, "give no script"),
        (["dump", "--pid", "{sleep}"], 1, "not a Python process"),
        (["dump", "--pid", "{zombie}"], 1, "zombie"),
    ],
)
def test_bad_pids_and_durations_are_one_line(
    argv: list[str], code: int, words: str, tmp_path: Path
) -> None:
    sleep = subprocess.Popen(["sleep", "30"])
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while state_of(zombie.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        values = {"{self}": str(os.getpid()), "{sleep}": str(sleep.pid),
                  "{zombie}": str(zombie.pid)}  # fmt: skip
        rc, _, err = run_cli(*[values.get(a, a) for a in argv])
    finally:
        sleep.kill()
        sleep.wait()
        zombie.wait()
    assert rc == code, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1 and words in lines[0], err


def test_dump_names_the_running_function_of_an_independent_process(
    sleeper: subprocess.Popen[str], tmp_path: Path
) -> None:
    rc, out, err = run_cli("dump", "--pid", str(sleeper.pid))
    assert rc == 0, err
    assert "main_sleep (<string>:" in out and "waiting_here (<string>:" in out
    # AND each thread by its threading name, as py-spy shows them
    assert "): MainThread" in out and "): side" in out, out
    rc, out, err = run_cli("dump", "--pid", str(sleeper.pid), "--json")
    found = json.loads(out)
    assert found["threads"][0]["main"] and found["threads"][0]["frames"][0]["function"] == (
        "main_sleep"
    )
    assert [t["name"] for t in found["threads"]] == ["MainThread", "side"]


@pytest.mark.slow
def test_profile_pid_names_the_running_function(tmp_path: Path) -> None:
    busy = tmp_path / "busy.py"
    busy.write_text(
        "import sys\ndef spinning_here():\n    x = 0\n    while True:\n        x += 1\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\nspinning_here()\n"
    )
    proc = subprocess.Popen([sys.executable, str(busy)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        rc, out, err = run_cli("profile", "--pid", str(proc.pid), "--duration", "0.5", "-q")
    finally:
        proc.kill()
        proc.wait()
    assert rc == 0, err
    assert "spinning_here" in out and "attached to process" in out


def test_a_python_of_a_version_without_a_layout_is_refused_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, sleeper: subprocess.Popen[str]
) -> None:
    # GIVEN an interpreter whose version no table knows (3.9, or a 3.14 not yet read)
    monkeypatch.setattr(target, "_version", lambda *args: (3, 9))
    # THEN it is refused, the reason naming the version and the versions known
    with pytest.raises(ObserveError) as e:
        target.locate(sleeper.pid)
    assert e.value.reason == "unsupported"
    assert "3.9 is not supported" in str(e.value) and "3.13" in str(e.value)


def test_the_cli_falls_back_with_its_reason_when_the_observer_cannot_run(tmp_path: Path) -> None:
    # GIVEN the observer turned off (as a refused container would make it)
    script = tmp_path / "s.py"
    script.write_text("def f():\n    return sum(range(10**6))\nf()\n")
    env = dict(os.environ, ONNXRT_MONITORING_OBSERVER="0")
    proc = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "profile", str(script)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    # THEN the in-process sampler ran, and the output says why
    assert proc.returncode == 0, proc.stderr
    assert "ONNXRT_MONITORING_OBSERVER=0" in proc.stdout + proc.stderr
