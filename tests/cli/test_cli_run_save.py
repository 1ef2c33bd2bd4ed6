"""Tests for ``run --save`` / ``run --repeat`` (_cli/run_repeat.py) and ``compare`` of two
saved ``run`` results: bad inputs in process (refused before anything runs, exit 2, one
line), then one real end-to-end chain of subprocesses."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._results import store

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="run needs fork")
# Seconds for one command of the chain at load 8 on 2 cores (a run takes about 2 s there).
TIMEOUT = 180
SCRIPT = """\
import sys

KEEP = []


def build(n):
    for _ in range(n):
        KEEP.append(b"\\x01" * (1 << 20))
        s = 0
        for i in range(200_000):  # ~10 ms a block: several ticks see it, even at load 8
            s += i


def main():
    build(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
    print("ran", flush=True)


main()
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--save", "{tmp}/r.txt", "{script}"], "cannot write --save"),
        (["--save", "{tmp}/r", "{script}"], "a name without a suffix is not supported"),
        (["--save", "{existing}", "{script}"], "the file exists; add --force to replace it"),
        (
            ["--save", "{existing}", "--force", "{script}", "{existing}"],
            "the same file as the input",
        ),
        (["-o", "{tmp}/r.json", "--save", "{tmp}/r.json", "{script}"], "the same file as -o"),
        (["--save", "{missing}/r.json", "{script}"], "does not exist"),
        (["--save", "{tmp}", "{script}"], "it is a folder"),
        (["--repeat", "0", "{script}"], "--repeat must be >= 1, got 0"),
        (["--repeat", "x", "{script}"], "invalid int value"),
        (["--max-time", "5", "{script}"], "--max-time needs --repeat N"),
        (["--timeout", "5", "{script}"], "--timeout needs --repeat N"),
        (["--repeat", "2", "--timeout", "-1", "{script}"], "--timeout must be a number > 0"),
        (["--repeat", "2", "--max-time", "nan", "{script}"], "--max-time must be a number > 0"),
        (["--repeat", "2", "--clock", "cpu", "{script}"], "unrecognized arguments: --clock"),
        (["--repeat", "2", "{tmp}/missing.py"], "script not found"),
        (["--repeat", "2", "-m", "no_such_module_xyz"], "no module named"),
        (["--repeat", "2", "--interval", "0", "{script}"], "--interval must be >= 0.001"),
    ],
)
def test_bad_save_and_repeat_options_exit_2_before_anything_runs(
    tmp_path: Path,
    script: Path,
    argv: list[str],
    words: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN options naming files around the test's folder, one of them existing
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    subst = {
        "missing": str(tmp_path / "missing"),
        "script": str(script),
        "tmp": str(tmp_path),
        "existing": str(existing),
    }
    argv = [a.format(**subst) for a in argv]
    # WHEN run is called in process THEN exit 2, one line naming the problem, nothing ran
    code, out, err = run_cli("run", *argv)
    err += capsys.readouterr().err  # argparse writes to sys.stderr
    assert code == 2, (out, err)
    assert words in err and "Traceback" not in err, err
    assert "ran" not in out and len(err.strip().splitlines()) <= 2  # argparse adds its usage
    assert existing.read_text() == "{}"  # never replaced


_FN = "function_figures"


def _run_doc(runs: int) -> dict[str, object]:
    """A valid run result with ``runs`` runs of two functions."""
    functions = {"own": [0.5, 0.4], "inclusive": [0.9, 0.4], "growth": [4e7, 3e7],
                 "to_peak": [4e7, 3e7]}  # fmt: skip
    data = {
        "profiler": "ticks",
        "unit": "s",
        "interval": 0.005,
        "functions": [["p.py", 1, "main"], ["p.py", 5, "build"]],
        "stacks": [],
        "wall": [1.0] * runs,
        "run_figures": {"peak": [5e7] * runs, "start": [1e7] * runs, "end": [5e7] * runs},
        "function_figures": {k: [x for x in v for _ in range(runs)] for k, v in functions.items()},
    }
    return store.make_result("run", data, ["run", "p.py"])


@pytest.mark.parametrize(
    ("name", "doc", "words"),
    [
        ("version.json", lambda d: d.update(version=5), "schema version 5"),
        ("kind.json", lambda d: d.update(kind="runs"), "kind must be one of"),
        ("nogrowth.json", lambda d: d["data"][_FN].pop("growth"), "growth must be a list"),
        ("norun.json", lambda d: d["data"].pop("wall"), "data.wall must be a list"),
        (
            "nan.json",
            lambda d: d["data"][_FN]["own"].__setitem__(1, -1.0),
            "own[1] (function 0, run 1) must be",
        ),
        ("text.json", None, "not JSON or truncated"),
    ],
)
def test_compare_refuses_a_bad_run_file_naming_it(
    tmp_path: Path, name: str, doc: object, words: str
) -> None:
    # GIVEN a good run result and a bad one (changed in one place, or truncated)
    good = tmp_path / "good.json"
    store.save_result(good, _run_doc(3))
    bad = tmp_path / name
    if doc is None:
        bad.write_text(json.dumps(_run_doc(3))[:-40])
    else:
        changed = copy.deepcopy(_run_doc(3))
        doc(changed)  # type: ignore[operator]
        bad.write_text(json.dumps(changed))
    # WHEN they are compared THEN exit 2, one line naming the bad file and the problem
    code, out, err = run_cli("compare", str(good), str(bad))
    assert code == 2 and out == "", (out, err)
    assert len(err.strip().splitlines()) == 1 and str(bad) in err and words in err, err


def test_compare_refuses_a_run_beside_a_profile(tmp_path: Path) -> None:
    # GIVEN a run result and a profile result
    from results_data import profile_doc

    run, profile = tmp_path / "run.json", tmp_path / "profile.json"
    store.save_result(run, _run_doc(3))
    store.save_result(profile, profile_doc(3))
    # WHEN compared THEN exit 2, one line naming both files and both kinds
    code, _, err = run_cli("compare", str(run), str(profile))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "a run result" in err and "a profile result" in err and str(profile) in err


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", *argv],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_run_save_and_repeat_then_compare_end_to_end(tmp_path: Path, script: Path) -> None:
    # GIVEN a program run once with --save, then twice with --repeat 2 for A and for B
    # (B allocating 3 times as much)
    one = _cli("run", "--save", "one.json", "-q", "-o", "one.html", "prog.py", "6", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    a = _cli("run", "--repeat", "2", "--save", "a.json", "prog.py", "6", cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    b = _cli("run", "--repeat", "2", "--timeout", "120", "-q", "--save", "b.json",
             "prog.py", "18", cwd=tmp_path)  # fmt: skip
    assert b.returncode == 0, b.stderr
    # THEN the report of the median run is shown, the runs summed up on stderr
    assert "peak RSS" in a.stdout and "ran" not in a.stdout.splitlines()  # the program's: not kept
    assert "2 runs: wall median" in a.stderr and "of the median wall time" in a.stderr
    # AND every run is saved, with the environment and the command
    doc = store.load_result(tmp_path / "a.json", kind="run")
    assert len(doc["data"]["wall"]) == 2 and doc["data"]["main"] == "prog.py"
    assert doc["command"][:3] == ["run", "--repeat", "2"] and "python" in doc["environment"]
    names = [f[2] for f in doc["data"]["functions"]]
    build = names.index("build")
    growth = doc["data"]["function_figures"]["growth"][build * 2 : build * 2 + 2]
    assert all(g > 2**20 for g in growth), growth
    assert len(store.load_result(tmp_path / "one.json")["data"]["wall"]) == 1
    assert (tmp_path / "one.html").read_text().startswith("<!DOCTYPE html>")
    # WHEN A and B are compared as JSON
    cmp = _cli("compare", "a.json", "b.json", "--format", "json", cwd=tmp_path)
    # THEN one entry per figure, build's memory growth with A's and B's figures
    assert cmp.returncode in (0, 1) and "Traceback" not in cmp.stderr, cmp.stderr
    report = json.loads(cmp.stdout)
    assert report["kind"] == "run" and report["runs"] == [2, 2] and report["correction"] == "holm"
    entry = next(
        e for e in report["entries"] if e["function"] == "build" and e["figure"] == "growth"
    )
    assert entry["file"] == "prog.py" and isinstance(entry["line"], int)
    assert entry["b"]["growth"] > entry["a"]["growth"] > 0 and entry["change"] > 0
    assert isinstance(entry["significant"], bool)
    assert {"ci_low", "ci_high", "a", "b", "change"} <= set(entry)
    # AND a single run on a side is weaker evidence, never passed in silence (1 or 3)
    single = _cli("compare", "one.json", "b.json", cwd=tmp_path)
    assert single.returncode in (1, 3), single.stderr
    assert single.stdout.startswith("verdict: ") and "weaker evidence" in single.stdout
    assert "memory: build (prog.py:" in single.stdout and "peak memory" in single.stdout


def _fake_report(wall: float, grown: float) -> str:
    """The JSON of a report of one run of ``build`` (as a child ``run`` writes it)."""
    from onnxrt_backend_dev.monitoring._report.model import (
        Ending,
        FunctionRow,
        Peak,
        Report,
        Site,
    )
    from onnxrt_backend_dev.monitoring._report.render_json import to_json

    row = FunctionRow(Site("build", "prog.py", 7), wall, wall, grown, grown, wall / 2)
    report = Report(
        program="prog.py", wall=wall, cpu=wall / 2, interval=0.005, n_ticks=10,
        peak=Peak(1e7 + grown, 1e7, wall), end_rss=1e7 + grown,
        ending=Ending("exit", 0, "exited with code 0"), functions=(row,),
    )  # fmt: skip
    return to_json(report)


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """``run_interleaved`` replaced: each run writes a report of wall 0.3, 0.1, 0.2... s
    where the child would; returns the command lines it was given."""
    from onnxrt_backend_dev.monitoring._results import runner

    started: list[list[str]] = []

    def fake(programs: list[object], repeat: int, timeout: float, max_time: object, **kw: object):  # type: ignore[no-untyped-def]
        for r in range(repeat):
            argv = programs[0].argv("unused")  # type: ignore[attr-defined]
            started.append(argv)
            path = argv[argv.index("-o") + 1]
            Path(path).write_text(_fake_report([0.3, 0.1, 0.2][r % 3], (20 + r) * 2**20))
            kw["on_run"](r, 0)  # type: ignore[operator]

    monkeypatch.setattr(runner, "run_interleaved", fake)
    return started


def test_repeat_shows_the_median_run_and_saves_all(
    tmp_path: Path, script: Path, fake_runs: list[list[str]]
) -> None:
    # GIVEN three runs of 0.3, 0.1 and 0.2 s (faked)
    saved = tmp_path / "runs.json"
    code, out, err = run_cli(
        "run", "--repeat", "3", "--interval", "0.01", "--save", str(saved), str(script), "x"
    )
    # THEN the report shown is the median run's (0.2 s, the third), the runs summed up
    assert code == 0, err
    assert "wall 200 ms" in out and "3 runs: wall median 200 ms" in err
    assert "the report is run 3's, of the median wall time" in err
    # AND each child was a quiet `run` writing JSON, with the options and the arguments
    argv = fake_runs[0]
    assert argv[2:4] == ["onnxrt_backend_dev.monitoring", "run"] and "-q" in argv
    assert argv[argv.index("--interval") + 1] == "0.01" and argv[-2:] == [str(script), "x"]
    # AND every run is saved, CPU times included
    data = store.load_result(saved, kind="run")["data"]
    assert data["wall"] == [0.3, 0.1, 0.2]
    assert data["function_figures"]["growth"][:3] == [20 * 2**20, 21 * 2**20, 22 * 2**20]
    assert data["function_figures"]["own_cpu"][:1] == [0.15] and data["main"] == str(script)


def test_a_run_that_leaves_no_report_is_one_line_exit_1(
    tmp_path: Path, script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._results import runner

    def fake(programs: list[object], repeat: int, timeout: float, max_time: object, **kw: object):  # type: ignore[no-untyped-def]
        kw["on_run"](0, 0)  # type: ignore[operator]

    monkeypatch.setattr(runner, "run_interleaved", fake)
    code, _, err = run_cli("run", "--repeat", "2", "--save", str(tmp_path / "r.json"), str(script))
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "run --repeat: a run left no readable report" in err
    assert not (tmp_path / "r.json").exists()


def test_a_failed_run_is_one_line_exit_1(
    tmp_path: Path, script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._results import runner

    def fake(*args: object, **kw: object) -> None:
        raise runner.RunFailed("run prog.py exited with 3: ValueError: boom")

    monkeypatch.setattr(runner, "run_interleaved", fake)
    code, _, err = run_cli("run", "--repeat", "2", str(script))
    assert (
        code == 1
        and err.strip() == "error: run --repeat: run prog.py exited with 3: ValueError: boom"
    )
