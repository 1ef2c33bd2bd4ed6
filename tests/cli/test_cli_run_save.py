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
        for i in range(2000):
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


def _run_doc(runs: int) -> dict[str, object]:
    """A valid run result with ``runs`` runs of two functions."""
    run = {"wall": 1.0, "peak": 5e7, "start": 1e7, "end": 5e7, "own": [0.5, 0.4],
           "cumulative": [0.9, 0.4], "growth": [4e7, 3e7], "to_peak": [4e7, 3e7]}  # fmt: skip
    data = {
        "sampler": "ticks",
        "interval": 0.005,
        "functions": [["p.py", 1, "main"], ["p.py", 5, "build"]],
        "runs": [dict(run) for _ in range(runs)],
    }
    return store.make_result("run", data, ["run", "p.py"])


@pytest.mark.parametrize(
    ("name", "doc", "words"),
    [
        ("version.json", lambda d: d.update(version=2), "schema version 2"),
        ("kind.json", lambda d: d.update(kind="runs"), "kind must be one of"),
        ("nogrowth.json", lambda d: d["data"]["runs"][0].pop("growth"), "growth must be a list"),
        ("norun.json", lambda d: d["data"].pop("runs"), "data.runs must be a list"),
        ("nan.json", lambda d: d["data"]["runs"][1]["own"].__setitem__(0, -1.0), "own[0] must be"),
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
    assert len(doc["data"]["runs"]) == 2 and doc["data"]["main"] == "prog.py"
    assert doc["command"][:3] == ["run", "--repeat", "2"] and "python" in doc["environment"]
    names = [f[2] for f in doc["data"]["functions"]]
    build = names.index("build")
    assert all(r["growth"][build] > 2**20 for r in doc["data"]["runs"]), doc["data"]["runs"]
    assert len(store.load_result(tmp_path / "one.json")["data"]["runs"]) == 1
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
    # AND a single run on a side says it cannot judge, exit 0
    single = _cli("compare", "one.json", "b.json", cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    assert "significance cannot be judged" in single.stdout
    assert "memory: prog.py:" in single.stdout and "run: peak memory" in single.stdout
