"""``compare``: two saved results or two programs; text, JSON and HTML; the CI exit codes
(0 no significant regression, 1 one above --fail-above, 2 bad input, 3 undecided) and, for
each bad input, one line naming the file or option, no traceback, no hang; ``--save`` of
the commands."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, run_cli
from results_data import memory_doc, profile_doc, timing_doc

from onnxrt_backend_dev.monitoring._cli import save_result as _save
from onnxrt_backend_dev.monitoring._cli.common import CommandError
from onnxrt_backend_dev.monitoring._results import store

CLI = [sys.executable, "-m", "onnxrt_backend_dev.monitoring"]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """Saved results: base and 10 % slower timings, an equal one, profiles, memory."""
    docs = {
        "base": timing_doc(1e-3, seed=1, processes=10),
        "slow": timing_doc(1.1e-3, seed=2, processes=10),
        "same": timing_doc(1e-3, seed=3, processes=10),
        "one_base": timing_doc(1e-3, seed=1),
        "one_slow": timing_doc(1.1e-3, seed=2),
        "prof_a": profile_doc(20, seed=1),
        "prof_b": profile_doc(20, slow={7: 1.3}, seed=2),
        "one_a": profile_doc(1, seed=1),
        "one_b": profile_doc(1, slow={7: 1.3}, seed=2),
        "mem": memory_doc(1e8),
    }
    paths = {}
    for name, doc in docs.items():
        paths[name] = store.save_result(tmp_path / f"{name}.json", doc)
    (tmp_path / "truncated.json").write_text(
        Path(paths["base"]).read_text(encoding="utf-8")[:100], encoding="utf-8"
    )
    edited = json.loads(Path(paths["base"]).read_text(encoding="utf-8"))
    edited["data"]["series"][0]["times"][2] = -1.0
    (tmp_path / "negative.json").write_text(json.dumps(edited), encoding="utf-8")
    edited["data"]["series"][0]["times"][2] = 1.0
    edited["version"] = 99
    (tmp_path / "future.json").write_text(json.dumps(edited), encoding="utf-8")
    for name in ("truncated", "negative", "future"):
        paths[name] = str(tmp_path / f"{name}.json")
    os.mkfifo(tmp_path / "fifo")  # opening it would wait for a writer: never opened
    paths["fifo"] = str(tmp_path / "fifo")
    paths["dir"] = str(tmp_path)
    return paths


def test_regression_exits_1(files: dict[str, str]) -> None:
    # GIVEN a timing 10 % slower WHEN compared THEN exit 1, the line says which
    code, out, err = run_cli("compare", files["base"], files["slow"])
    assert code == 1 and re.search(r"\+(9|10)\.\d %", out) and "*" in out
    assert "1 significant regression(s) above 5 %" in err and out.startswith("verdict: B is worse")
    # AND above a 20 % threshold it passes
    assert run_cli("compare", files["base"], files["slow"], "--fail-above", "20%")[0] == 0


def test_no_difference_exits_0(files: dict[str, str]) -> None:
    code, out, err = run_cli("compare", files["base"], files["same"])
    assert code == 0 and err == ""
    assert out.startswith("verdict: no significant regression above 5 %")


def test_timings_of_one_process_a_side_are_weaker_evidence(files: dict[str, str]) -> None:
    # GIVEN timings 10 % apart, each saved by a single process (20 batches)
    code, out, err = run_cli("compare", files["one_base"], files["one_slow"])
    # THEN judged on their batches, labelled weaker evidence: the spread between two
    # processes they cannot show leaves +10 % undecided (exit 3), never a pass
    assert code == 3 and "undecided" in err and "one process on a side" in out
    assert "processes: 1 in A, 1 in B: a single one on a side is weaker evidence" in out
    assert "time --processes N" in out


def test_profiles_json(files: dict[str, str]) -> None:
    # GIVEN profiles where f_007 is 30 % slower WHEN compared as JSON
    code, out, _ = run_cli("compare", files["prof_a"], files["prof_b"], "--format", "json")
    doc = json.loads(out)
    # THEN exit 1, f_007 a regression, one entry per function with the documented fields
    assert code == 1 and doc["regressions"] == ["f_007 (prog.py:71)"]
    assert doc["verdict"]["exit_code"] == 1 and doc["verdict"]["state"] == "regressed"
    f7 = next(e for e in doc["entries"] if e["function"] == "f_007" and e["figure"] == "own")
    assert f7["significant"] is True and f7["file"] == "prog.py" and f7["line"] == 71
    assert f7["ci_low"] < f7["change"] < f7["ci_high"] and f7["verdict"] == "worse"


def test_single_runs_say_they_are_weaker_evidence(files: dict[str, str]) -> None:
    code, out, _ = run_cli("compare", files["one_a"], files["one_b"])
    assert code in (0, 3) and "a single one on a side is weaker evidence" in out
    assert "significance not judged" in out


def test_html_to_file(files: dict[str, str], tmp_path: Path) -> None:
    page = tmp_path / "diff.html"
    code, out, _ = run_cli(
        "compare", files["prof_a"], files["prof_b"], "--format", "html", "-o", str(page)
    )
    text = page.read_text(encoding="utf-8")
    assert (
        code == 1 and out == "" and text.startswith("<!DOCTYPE html>") and 'class="worse"' in text
    )


BAD = [
    ("one file", ["{base}"], "give two result files"),
    ("three files", ["{base}", "{slow}", "{same}"], "give two result files"),
    ("missing", ["{base}", "{dir}/nothere.json"], "nothere.json"),
    ("folder", ["{base}", "{dir}"], "cannot read result .*: it is a directory, not a file"),
    ("/dev/zero", ["/dev/zero", "{base}"], "'/dev/zero': it is a character device, not a file"),
    ("/dev/urandom", ["{base}", "/dev/urandom"], "'/dev/urandom': it is a character device"),
    ("fifo", ["{fifo}", "{base}"], "fifo': it is a named pipe \\(FIFO\\), not a file"),
    (
        "html as text",
        ["{base}", "{slow}", "--format", "text", "-o", "{dir}/x.html"],
        "-o .*x.html' names a html file but --format is text",
    ),
    ("unknown suffix", ["{base}", "{slow}", "-o", "{dir}/x.pdf"], "cannot tell the format"),
    ("min-change", ["{base}", "{slow}", "--min-change", "x"], "--min-change must be"),
    ("interval", ["--a", "true", "--b", "true", "--interval", "0"], "--interval must be"),
    ("save-a alone", ["{base}", "{slow}", "--save-a", "{dir}/a.json"], "--save-a needs --a/--b"),
    ("truncated", ["{base}", "{truncated}"], "truncated.json': not JSON or truncated"),
    ("negative", ["{base}", "{negative}"], r"negative.json': data.series\[0\].times\[2\] must be"),
    ("version", ["{future}", "{base}"], "future.json': schema version 99"),
    (
        "profile file",
        ["{base}", str(ROOT / "tests/data/cprofile.prof")],
        "cprofile.prof': not UTF-8",
    ),
    ("kinds", ["{base}", "{prof_a}"], "a timing result, with .*prof_a.json', a profile result"),
    ("kinds memory", ["{mem}", "{base}"], "a memory result"),
    (
        "fail-above",
        ["{base}", "{slow}", "--fail-above", "lots"],
        "--fail-above must be a percentage",
    ),
    ("fail-above <0", ["{base}", "{slow}", "--fail-above=-5%"], "--fail-above must be"),
    ("fail-above nan", ["{base}", "{slow}", "--fail-above", "nan"], "--fail-above must be"),
    ("min-share", ["{base}", "{slow}", "--min-share", "200%"], "--min-share must be <= 100%"),
    ("alpha", ["{base}", "{slow}", "--alpha", "0"], "--alpha must be in"),
    ("alpha nan", ["{base}", "{slow}", "--alpha", "nan"], "--alpha must be in"),
    ("top", ["{base}", "{slow}", "--top", "0"], "--top must be >= 1"),
    ("repeat", ["--a", "true", "--b", "true", "--repeat", "0"], "--repeat must be >= 1"),
    ("timeout", ["--a", "true", "--b", "true", "--timeout=-1"], "--timeout must be"),
    ("max-time", ["--a", "true", "--b", "true", "--max-time", "inf"], "--max-time must be"),
    ("only a", ["--a", "true"], "give both --a and --b"),
    ("a and files", ["{base}", "--a", "true", "--b", "true"], "not both"),
    ("mixed", ["--a", "python x.py", "--b", "true"], "both be Python programs"),
    ("-o an input", ["{base}", "{slow}", "-o", "{slow}"], "-o .*the same file as the input"),
    ("save-a exists", ["--a", "true", "--b", "true", "--save-a", "{base}"], "exists; add --force"),
    ("save-b suffix", ["--a", "true", "--b", "true", "--save-b", "{dir}/x.txt"], "--save-b"),
    ("run fails", ["--a", "python -c 1", "--b", "false", "--repeat", "1"], "exited with 1"),
]


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_exits_2_with_one_line(
    files: dict[str, str], argv: list[str], message: str
) -> None:
    # GIVEN a bad file or option WHEN compare runs
    before = {k: Path(v).read_bytes() for k, v in files.items() if k not in ("dir", "fifo")}
    code, _, err = run_cli("compare", *[a.format(**files) for a in argv])
    # THEN exit 2, one line on stderr naming it, no traceback, no input changed
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert re.search(message, err), err
    assert before == {k: Path(v).read_bytes() for k, v in files.items() if k not in ("dir", "fifo")}


def test_programs_end_to_end(tmp_path: Path) -> None:
    # GIVEN two scripts, B doing more work in one function
    for name, n in (("old.py", 400_000), ("new.py", 1_200_000)):
        (tmp_path / name).write_text(
            "def hot(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
            f"def cold():\n    return sum(range(20000))\nhot({n})\ncold()\n",
            encoding="utf-8",
        )
    # WHEN compared in a real subprocess, saving both sides
    proc = subprocess.run(
        [*CLI, "compare", "--a", f"{sys.executable} old.py", "--b", "new.py", "--repeat", "6",
         "--format", "json", "--save-a", "a.json", "--save-b", "b.json", "--fail-above", "1000%"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    # THEN sampled runs: the hot function's time grew, and the saved sides compare again
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    hot = next(e for e in doc["entries"] if e["function"] == "hot" and e["figure"] == "own")
    assert hot["b"]["time"] > hot["a"]["time"] and hot["file"] == "new.py"
    saved = store.load_result(tmp_path / "a.json")
    assert saved["data"]["profile"]["profiler"] == "sampled"
    code, out, _ = run_cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert code in (0, 1) and "hot" in out


def _args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    _save.add_save_options(parser)
    return parser.parse_args(list(argv))


def test_save_option_checks_then_writes(tmp_path: Path) -> None:
    # GIVEN --save onto a new file WHEN checked and written THEN a loadable timing result
    target = tmp_path / "t.json"
    args = _args(tmp_path, "--save", str(target))
    _save.check_save(args)
    _save.save_timing(args, [("x", [0.1, 0.2], [10, 10], {"average": 0.015})])
    doc = store.load_result(target, kind="timing")
    assert doc["data"]["series"][0]["times"] == [0.1, 0.2]
    # AND onto it again: refused without --force (exit 2), accepted with it
    with pytest.raises(CommandError, match="exists; add --force") as info:
        _save.check_save(_args(tmp_path, "--save", str(target)))
    assert info.value.exit_code == 2
    _save.check_save(_args(tmp_path, "--save", str(target), "--force"))


@pytest.mark.parametrize(
    ("name", "message"), [("x.txt", "suffix '.txt'"), ("nodir/x.json", "does not exist")]
)
def test_save_option_refuses_bad_paths(tmp_path: Path, name: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _save.check_save(_args(tmp_path, "--save", str(tmp_path / name)))


def test_save_never_replaces_an_input(tmp_path: Path) -> None:
    script = tmp_path / "prog.json"
    script.write_text("{}", encoding="utf-8")
    args = _args(tmp_path, "--save", str(script), "--force")
    with pytest.raises(CommandError, match="the same file as the input"):
        _save.check_save(args, inputs=[str(script)])


def test_save_profile_and_memory(tmp_path: Path) -> None:
    # GIVEN a profile's stats and a spy's result WHEN saved THEN loadable results
    stats: dict[Any, Any] = {("a.py", 1, "f"): (1, 1, 0.5, 0.5, {})}
    args = _args(tmp_path, "--save", str(tmp_path / "p.json"))
    _save.check_save(args)
    _save.save_profile(args, stats, 0.6)
    assert store.load_result(tmp_path / "p.json", kind="profile")["data"]["functions"] == [
        ["a.py", 1, "f"]
    ]

    class Monitor:
        name, max_peak, begin, end, mean = "cpu", 3e6, 1e6, 1e6, 2e6

    class Result:
        def monitors(self) -> list[Monitor]:
            return [Monitor()]

    args = _args(tmp_path, "--save", str(tmp_path / "m.json"))
    _save.save_memory(args, Result())
    assert (
        store.load_result(tmp_path / "m.json", kind="memory")["data"]["channels"]["cpu"][0]["peak"]
        == 3e6
    )


def test_time_save_then_compare(tmp_path: Path) -> None:
    # GIVEN two statements timed with --save (one of them with --compare: two series)
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    assert run_cli("time", "sum(range(50))", "-n", "100", "-r", "5", "-q", "--save", a)[0] == 0
    argv = ["sum(range(50))", "--compare", "sum(range(60))", "-n", "100", "-r", "5", "-q"]
    assert run_cli("time", *argv, "--save", b)[0] == 0
    # THEN the raw batches are saved, and the statement both hold is compared
    doc = store.load_result(b, kind="timing")
    assert [s["name"] for s in doc["data"]["series"]] == ["sum(range(50))", "sum(range(60))"]
    assert doc["data"]["series"][0]["sizes"] == [100] * 5
    code, out, _ = run_cli("compare", a, b, "--fail-above", "1000%")
    # (3, undecided, when a loaded machine preempted batches of 100 µs: the estimate then
    # can pass 1000 % with evidence too weak to decide; never a pass nor a failure)
    assert code in (0, 3) and "sum(range(50))" in out
    # AND --save onto the baseline again is refused before timing
    code, _, err = run_cli("time", "sum(range(50))", "-n", "100", "-r", "5", "--save", a)
    assert code == 2 and "exists; add --force" in err


def test_profile_and_spy_save(tmp_path: Path) -> None:
    # GIVEN a script profiled and spied on with --save
    script = tmp_path / "prog.py"
    script.write_text("def f():\n    return sum(range(10000))\nf()\n", encoding="utf-8")
    prof, mem = str(tmp_path / "p.json"), str(tmp_path / "m.json")
    code, _, err = run_cli(
        "profile", "-q", "--cprofile", "--save", prof, "-o", os.devnull, str(script)
    )
    assert code == 0, err
    code, _, err = run_cli("spy", "-q", "--save", mem, "--", sys.executable, str(script))
    assert code == 0, err
    # THEN a one-run profile (its edges) and a one-run memory result, compared as weaker
    data = store.load_result(prof, kind="profile")["data"]
    assert "f" in {f[2] for f in data["functions"]} and data["stacks"]
    assert store.load_result(mem, kind="memory")["data"]["channels"]["cpu"][0]["peak"] > 0
    code, out, _ = run_cli("compare", prof, prof)
    assert code == 0 and "weaker evidence" in out
    # AND --save may not be the profiled script itself
    code, _, err = run_cli("profile", "--save", str(script), "--force", str(script))
    assert code == 2 and "--save" in err


def test_html_from_the_suffix_escapes_a_crafted_name(tmp_path: Path) -> None:
    # GIVEN results whose function name is markup WHEN compared into cmp.html (no --format)
    a = profile_doc(5, functions=6, seed=1, file="<script>alert(1)</script>.py")
    b = profile_doc(5, functions=6, slow={2: 1.5}, seed=2, file="<script>alert(1)</script>.py")
    pa = store.save_result(tmp_path / "a.json", a)
    pb = store.save_result(tmp_path / "b.json", b)
    page = tmp_path / "cmp.html"
    code, _, err = run_cli("compare", pa, pb, "-o", str(page))
    # THEN an HTML page, the verdict in its banner, nothing of the name runs as script
    text = page.read_text(encoding="utf-8")
    assert code == 1 and "B is worse" in err
    assert text.startswith("<!DOCTYPE html>") and 'class="banner regressed"' in text
    assert "<script>" not in text


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_device_or_a_fifo_never_hangs(tmp_path: Path, special: str) -> None:
    # GIVEN /dev/zero or a FIFO no one writes to WHEN compared in a real process
    path = special
    if special == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    good = store.save_result(tmp_path / "t.json", timing_doc(1e-3))
    proc = subprocess.run(
        [*CLI, "compare", path, good], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    # THEN exit 2 at once, one line naming it
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and path in proc.stderr


def test_help_states_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    from onnxrt_backend_dev.monitoring import _cli

    assert _cli.main(["compare", "--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    for words in ("0 no significant regression above --fail-above", "1 a significant regression",
                  "2 bad input", "3 undecided", "weaker evidence"):  # fmt: skip
        assert words in flat, words


def test_compare_names_its_files_and_cuts_a_name_of_megabytes(tmp_path: Path) -> None:
    from results_data import sampled_doc

    # GIVEN a cProfile profile, a sampled one, and a cProfile one naming a function
    # with 10 MB (made by hand, or by an attacker)
    cprofiled = store.save_result(tmp_path / "cp.json", profile_doc(5, seed=1))
    sampled = store.save_result(tmp_path / "sp.json", sampled_doc(5, {("main", "f"): 0.1}))
    huge = profile_doc(5, slow={7: 1.5}, seed=2)
    huge["data"]["functions"][7][2] = "g" * 10_000_000
    big = store.save_result(tmp_path / "big.json", huge)
    # WHEN compared THEN the message names the files, not "A" and "B"
    code, _, err = run_cli("compare", sampled, cprofiled)
    assert code == 2 and "sp.json was profiled with the sampler, " in err
    assert "cp.json with cProfile" in err
    # AND the name is cut where it is read: the output stays small
    code, out, err = run_cli("compare", cprofiled, big)
    assert code in (0, 1, 3), err
    assert "g" * 1000 + "…" in out and len(out) < 100_000


def test_a_single_sampled_run_a_side_never_decides_a_regression(tmp_path: Path) -> None:
    from results_data import sampled_doc

    # GIVEN one sampled run a side (profile --save without --repeat), a function twice
    # as slow in B: its counts say so, the spread between two runs is not known
    stacks: dict[tuple[str, ...], float] = {
        ("main", "build"): 0.5, ("main", "score"): 0.5, ("main", "load"): 0.5,
        ("main", "parse"): 0.5, ("main", "write"): 0.5,
    }  # fmt: skip
    a = store.save_result(tmp_path / "a.json", sampled_doc(1, stacks, seed=1))
    b = store.save_result(
        tmp_path / "b.json", sampled_doc(1, stacks, slow={("main", "build"): 2.0}, seed=2)
    )
    # WHEN compared THEN undecided (3), naming the function and what would decide it
    code, out, _ = run_cli("compare", a, b)
    assert code == 3, out
    assert out.startswith("verdict: undecided: build") and "--repeat 5" in out.splitlines()[0]
