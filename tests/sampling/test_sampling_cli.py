"""``profile script.py`` sampled (the default): the program's exit code, exception,
``os._exit``, closed stdout and SIGTERM still deliver the profile; the outputs by suffix;
``--cprofile`` and the cProfile-only options; bad options refused in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_cli

PROFILE = [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "profile"]
BUSY = """
import sys, time

def busy(seconds):
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += sum(range(300))
    return n

busy(0.15)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _script(tmp_path: Path, tail: str = "", name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(BUSY + tail, encoding="utf-8")
    return path


def _run(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PROFILE, *args], cwd=tmp_path, env=_env(), capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_the_default_is_sampled_and_names_the_hot_function(tmp_path: Path) -> None:
    # GIVEN a script WHEN profiled with no option THEN the sampled tree is printed
    from onnxrt_backend_dev.monitoring._observe.session import availability

    code, out, err = run_cli("profile", "-q", str(_script(tmp_path)))
    assert code == 0, err
    # (every millisecond read by the observer, every two inside the program)
    assert f"samples every {'1.00' if availability().ok else '2.00'} ms" in out
    assert "busy" in out and "<module>" in out
    # AND the tree starts at the program (none of the command's own frames)
    assert "run_sampled" not in out and "_sampling" not in out


def test_cprofile_gives_todays_call_tree(tmp_path: Path) -> None:
    code, out, err = run_cli("profile", "-q", "--cprofile", str(_script(tmp_path)))
    assert code == 0, err
    assert out.startswith("Call tree of ") and "busy" in out


@pytest.mark.parametrize(
    "option", [["--view", "reference"], ["--sort", "tottime"], ["--focus", "busy"]]
)
def test_cprofile_only_options_imply_cprofile(tmp_path: Path, option: list[str]) -> None:
    code, out, err = run_cli("profile", "-q", *option, str(_script(tmp_path)))
    assert code == 0, err
    assert "samples every" not in out and "busy" in out


@pytest.mark.parametrize(
    ("suffix", "check"),
    [
        (".json", lambda t: json.loads(t)["schema"] == "onnxrt-sampling"),
        (".html", lambda t: t.startswith("<!DOCTYPE html>") and "profile-data" in t),
        (".speedscope.json", lambda t: json.loads(t)["profiles"][0]["type"] == "sampled"),
        (".collapsed", lambda t: "busy (" in t and t.splitlines()[0].rsplit(" ", 1)[1].isdigit()),
        (".txt", lambda t: "busy" in t),
    ],
)
def test_outputs_follow_the_suffix(tmp_path: Path, suffix: str, check: object) -> None:
    out = tmp_path / f"out{suffix}"
    code, _, err = run_cli("profile", "-q", "-o", str(out), str(_script(tmp_path)))
    assert code == 0, err
    assert callable(check) and check(out.read_text("utf-8"))


def test_a_prof_output_runs_cprofile(tmp_path: Path) -> None:
    out = tmp_path / "out.prof"
    code, _, err = run_cli("profile", "-q", "-o", str(out), str(_script(tmp_path)))
    assert code == 0, err
    assert out.stat().st_size > 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "--interval must be >= 0.0001, got 0.0"),
        ("-1", "--interval must be >= 0.0001, got -1.0"),
        ("nan", "--interval must be a finite number, got nan"),
        ("1e-9", "--interval must be >= 0.0001, got 1e-09"),
        ("100", "--interval must be <= 1, got 100.0"),
    ],
)
def test_a_bad_interval_is_refused_before_the_program_runs(
    tmp_path: Path, value: str, message: str
) -> None:
    # GIVEN a script that would leave a mark if it ran
    script = tmp_path / "mark.py"
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n", encoding="utf-8")
    code, out, err = run_cli("profile", "--interval", value, str(script))
    # THEN exit 2, one line naming the option, the program never ran
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: {message}"], err
    assert not (tmp_path / "ran").exists()


def test_a_bad_timer_is_refused(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--timer", "cpu", str(_script(tmp_path)))
    assert proc.returncode == 2 and "--timer" in proc.stderr


def test_exit_code_and_exception_still_deliver_the_profile(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a program exiting with 3, another raising
    code, out, err = run_cli("profile", "-q", str(_script(tmp_path, "sys.exit(3)\n")))
    assert code == 3 and "busy" in out
    code, out, err = run_cli("profile", "-q", str(_script(tmp_path, "raise KeyError('k')\n")))
    # THEN the profile, the program's code, and its own traceback (it runs as a plain
    # interpreter: the traceback is the one `python prog.py` prints)
    assert code == 1 and "busy" in out
    assert "prog.py exited with code 1" in err
    assert "KeyError: 'k'" in capfd.readouterr().err


def test_os_exit_still_delivers_the_profile(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    proc = _run(tmp_path, "-q", "-o", str(out), str(_script(tmp_path, "import os; os._exit(4)\n")))
    assert proc.returncode == 4, proc.stderr
    assert "busy" in out.read_text("utf-8")
    assert "prog.py exited with code 4" in proc.stderr


def test_a_closed_stdout_still_gets_the_profile(tmp_path: Path) -> None:
    proc = _run(tmp_path, "-q", str(_script(tmp_path, "sys.stdout.close()\n")))
    assert proc.returncode == 0, proc.stderr
    assert "busy" in proc.stdout


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_writes_the_profile(tmp_path: Path, signame: str) -> None:
    signum = getattr(signal, signame)
    script = tmp_path / "sleeper.py"
    script.write_text(
        # 0.3 s of waiting before 'ready': samples exist when the signal comes
        "import time\ndef wait():\n    time.sleep(0.3)\n    print('ready', flush=True)\n"
        "    time.sleep(60)\nwait()\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [*PROFILE, "-o", str(out), str(script)], cwd=tmp_path, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signum, err
    text = out.read_text("utf-8")
    # THEN the waiting function is in the profile, marked waiting
    assert "wait  sleeper.py:2" in text
    assert "[waiting]" in text
    assert f"terminated by {signame}" in err


def test_module_mode_is_sampled(tmp_path: Path) -> None:
    (tmp_path / "mymod.py").write_text(BUSY, encoding="utf-8")
    proc = _run(tmp_path, "-q", "-m", "mymod")
    assert proc.returncode == 0, proc.stderr
    assert "busy" in proc.stdout and "samples every" in proc.stdout


def test_threads_have_their_own_trees_main_first(tmp_path: Path) -> None:
    script = tmp_path / "threads.py"
    script.write_text(
        BUSY + "import threading\n"
        "ts = [threading.Thread(target=busy, args=(0.2,), name=f'w{i}') for i in range(2)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\n",
        encoding="utf-8",
    )
    code, out, err = run_cli("profile", "-q", str(script))
    assert code == 0, err
    heads = [line for line in out.splitlines() if line.startswith("thread ")]
    assert heads[0].startswith("thread MainThread")
    assert any(h.startswith("thread w0") for h in heads)
    assert any(h.startswith("thread w1") for h in heads)


# What a sampled run must not import: the cProfile pipeline (pstats, the model, the
# filters, the reference's renderings, the views and renderers of the call graph), what
# only --repeat, --save or a failed output use, and dataclasses (inspect, ast, dis).
_CPROFILE_ONLY = (
    "cProfile", "pstats", "dataclasses", "inspect", "statistics", "tempfile",
    "onnxrt_backend_dev.monitoring._profiling.model",
    "onnxrt_backend_dev.monitoring._profiling.filters",
    "onnxrt_backend_dev.monitoring._profiling.reference",
    "onnxrt_backend_dev.monitoring._profiling.by_view",
    "onnxrt_backend_dev.monitoring._profiling.view_tree",
    "onnxrt_backend_dev.monitoring._profiling.view_reference",
    "onnxrt_backend_dev.monitoring._profiling.render_forest_html",
    "onnxrt_backend_dev.monitoring._profiling.view_folded",
    "onnxrt_backend_dev.monitoring._profiling.view_paths",
    "onnxrt_backend_dev.monitoring._profiling.run",
    "onnxrt_backend_dev.monitoring._results",
)  # fmt: skip
_IMPORTS = """\
import json, sys
from onnxrt_backend_dev.monitoring._cli import dispatch
watched, out, script, options = json.loads(sys.argv[1])
seen = {}
for label, more in options.items():
    assert dispatch.main(["profile", "-q", *more, "-o", out, script]) == 0, label
    with open(out, encoding="utf-8") as f:
        head = f.read(200)
    seen[label] = {"loaded": [m for m in watched if m in sys.modules], "head": head}
print(json.dumps(seen))
"""


def test_a_sampled_run_imports_none_of_the_cprofile_pipeline(tmp_path: Path) -> None:
    # GIVEN a fresh interpreter (no module imported by other tests) running `profile` on a
    # tiny script, sampled to JSON, then the same with --cprofile
    script = tmp_path / "tiny.py"
    script.write_text("x = sum(range(1000))\n", encoding="utf-8")
    out = str(tmp_path / "out.json")
    options = {"sampled": ["--format", "json"], "cprofile": ["--cprofile", "--format", "json"]}
    # (a module renamed or merged away must leave this list, not silently check nothing)
    assert all(importlib.util.find_spec(m) for m in _CPROFILE_ONLY)
    arg = json.dumps([list(_CPROFILE_ONLY), out, str(script), options])
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS, arg], capture_output=True, text=True, timeout=120,
        env=_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    # THEN the sampled run wrote its profile and imported none of them
    assert '"schema": "onnxrt-sampling"' in seen["sampled"]["head"]
    assert seen["sampled"]["loaded"] == []
    # AND --cprofile (the check sees them: it is not vacuous) imports the pipeline it uses
    assert '"profile"' in seen["cprofile"]["head"]
    loaded = set(seen["cprofile"]["loaded"])
    assert {"cProfile", "pstats", "onnxrt_backend_dev.monitoring._profiling.reference"} <= loaded
