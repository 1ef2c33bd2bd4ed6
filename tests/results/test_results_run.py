"""Tests for the ``run`` results (_results: schema.check_profile, payloads.run_data, the
``run`` section of compare_results and its rendering): bad documents, then comparisons of
synthetic runs whose functions' growth and noise are chosen (seeded, no clock)."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from results_data import ENV, profile_doc

from onnxrt_backend_dev.monitoring._errors import ResultFormatError
from onnxrt_backend_dev.monitoring._report.model import Ending, FunctionRow, Peak, Report, Site
from onnxrt_backend_dev.monitoring._results import payloads, render, store
from onnxrt_backend_dev.monitoring._results.compare import compare_results

MIB = float(2**20)
# name -> (seconds of own time, MiB of growth) of each function of the synthetic program.
FUNCTIONS = {
    "load": (0.20, 30.0),
    "parse": (0.15, 25.0),
    "index": (0.10, 40.0),
    "join": (0.25, 35.0),
    "spin": (0.30, 0.0),
}


def _report(
    rng: random.Random, more: dict[str, float], noise: float, file: str, cpu: bool = False
) -> Report:
    """One run's report: each function grows by its MiB (times ``more``), with noise;
    ``main`` holds them all (its growth and time are theirs, callees included)."""
    machine = rng.uniform(0.8, 1.25)  # the whole run faster or slower
    rows, total_growth, total_time = [], 0.0, 0.0
    for i, (name, (seconds, mib)) in enumerate(FUNCTIONS.items()):
        own = seconds * machine * rng.lognormvariate(0, 0.05)
        grown = mib * MIB * more.get(name, 1.0) * rng.lognormvariate(0, noise) if mib else 0.0
        site = Site(name, file, 10 * i + 1)
        rows.append(FunctionRow(site, own, own, grown, grown, own / 2 if cpu else 0.0))
        total_growth += grown
        total_time += own
    rows.append(FunctionRow(Site("main", file, 100), total_time, 0.0, total_growth, total_growth))
    start = 20 * MIB
    return Report(
        program=file,
        wall=total_time * 1.05,
        cpu=total_time,
        interval=0.005,
        n_ticks=int(total_time / 0.005),
        peak=Peak(start + total_growth, start, total_time),
        end_rss=start + total_growth,
        ending=Ending("exit", 0, "exited with code 0"),
        functions=tuple(rows),
    )


def run_doc(
    runs: int,
    more: dict[str, float] | None = None,
    noise: float = 0.01,
    seed: int = 0,
    cpu: bool = False,
) -> dict[str, Any]:
    """A ``run`` result of ``runs`` runs of the synthetic program (with the sampler's CPU
    times, half the wall times, when ``cpu``)."""
    rng = random.Random(seed)
    file = "prog.py"
    reports = [_report(rng, more or {}, noise, file, cpu) for _ in range(runs)]
    return store.make_result("run", payloads.run_data(reports, main=file), ["run", file], ENV)


def test_the_payload_keeps_every_run_and_every_function() -> None:
    # GIVEN three reports of the synthetic program
    doc = run_doc(3)
    data = doc["data"]
    # THEN each run holds its figures, aligned with the functions
    assert data["profiler"] == "ticks" and data["main"] == "prog.py" and len(data["wall"]) == 3
    names = [f[2] for f in data["functions"]]
    assert names == [*FUNCTIONS, "main"]
    run = {k: v[0::3] for k, v in data["function_figures"].items()}  # run 0 of 3
    figures = {k: v[0] for k, v in data["run_figures"].items()}
    index, main = names.index("index"), names.index("main")
    assert run["growth"][index] == pytest.approx(40 * MIB, rel=0.05)
    assert run["own"][main] == 0.0
    assert run["inclusive"][main] == pytest.approx(sum(run["own"]))
    assert figures["peak"] - figures["start"] == pytest.approx(run["growth"][main])
    assert figures["exit"] == 0 and data["wall"][0] > 0 and "cpu" in figures


def test_a_round_trip_through_a_file(tmp_path: Path) -> None:
    doc = run_doc(2)
    path = store.save_result(tmp_path / "r.json", doc)
    assert store.load_result(path, kind="run")["data"] == doc["data"]


def _edit(path: str, value: Any) -> Any:
    """A change of a valid document: ``path`` is dotted (``data.wall.0``)."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is _DROP:
            node.pop(last)
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


_DROP = object()
_RUN, _FN = "data.run_figures", "data.function_figures"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            _edit("version", 5),
            "schema version 5, this version of the package reads versions 1, 2, 3 and 4",
        ),
        (_edit("kind", "runs"), "kind must be one of timing, memory, profile, report, run"),
        (_edit("schema", "other"), "not a saved result"),
        (_edit("data.profiler", "cprofile"), "data.profiler must be one of ticks"),
        (_edit("data.interval", 0), "data.interval must be a finite number > 0"),
        (_edit("data.main", 3), "data.main must be a str"),
        (_edit("data.wall", []), "data.wall must hold at least 1 values"),
        (_edit("data.wall", _DROP), "data.wall must be a list"),
        (_edit("data.functions.1", ["f.py", -1, "g"]), "data.functions[1] must be [file, line"),
        (_edit("data.wall.0", 0), "data.wall[0] must be a finite number > 0"),
        (_edit(f"{_RUN}.peak.1", -5), f"{_RUN}.peak[1] must be a finite number >= 0"),
        (_edit(f"{_RUN}.start", _DROP), f"{_RUN}.start must be a list"),
        (_edit(f"{_RUN}.cpu.0", "1"), f"{_RUN}.cpu[0] must be a finite number"),
        (_edit(f"{_RUN}.exit.0", 0.5), f"{_RUN}.exit[0] must be an int"),
        (_edit(f"{_FN}.own", _DROP), f"{_FN}.own must be a list"),
        (
            _edit(f"{_FN}.own.2", -0.1),
            f"{_FN}.own[2] (function 1, run 0) must be a finite number >= 0",
        ),
        (_edit(f"{_FN}.inclusive.0", True), f"{_FN}.inclusive[0] (function 0, run 0) must be"),
        (
            _edit(f"{_FN}.growth", [1.0]),
            f"{_FN}.growth must hold 12 values (6 functions x 2 runs), got 1",
        ),
        (
            _edit(f"{_FN}.growth.3", "x"),
            f"{_FN}.growth[3] (function 1, run 1) must be a finite number",
        ),
        (_edit(f"{_FN}.to_peak.0", None), f"{_FN}.to_peak[0] (function 0, run 0) must be a finite"),
        (_edit(f"{_FN}.to_peak", _DROP), f"{_FN}.to_peak must be a list"),
    ],
)
def test_bad_run_documents_name_the_file_and_the_problem(
    tmp_path: Path, change: Any, message: str
) -> None:
    # GIVEN a valid run result, changed in one place, written to a file
    doc = copy.deepcopy(run_doc(2))
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    # WHEN it is loaded THEN one message names the file and what is wrong
    with pytest.raises(ResultFormatError) as info:
        store.load_result(path)
    assert str(info.value).startswith(f"cannot read result {str(path)!r}: ")
    assert message in str(info.value), str(info.value)


def test_a_negative_growth_is_a_figure_not_an_error() -> None:
    # GIVEN a function that freed memory (its growth is negative)
    doc = copy.deepcopy(run_doc(2))
    doc["data"]["function_figures"]["growth"][0] = -3 * MIB
    # THEN the document is valid
    assert store.parse_result(json.dumps(doc))["kind"] == "run"


def test_a_nan_growth_is_refused() -> None:
    text = json.dumps(run_doc(2)).replace('"growth": [', '"growth": [NaN, ', 1)
    with pytest.raises(ResultFormatError, match="NaN is not a number a result may hold"):
        store.parse_result(text, "x.json")


@pytest.mark.parametrize("other", ["profile", "timing"])
def test_a_run_is_not_compared_with_another_kind(other: str) -> None:
    a = run_doc(5)
    b = profile_doc(5) if other == "profile" else copy.deepcopy(a) | {"kind": "timing"}
    with pytest.raises(ResultFormatError, match=f"a run result, with 'b.json', a {other} result"):
        compare_results(a, b, ("a.json", "b.json"))


def _entry(cmp: Any, function: str, figure: str) -> Any:
    return next(c for c in cmp.changes if c.function == function and c.figure == figure)


def test_more_allocation_in_one_function_is_found_as_a_share_of_the_rise() -> None:
    # GIVEN 10 runs a side, ``index`` allocating 10 % more in B (4 MiB of a 130 MiB rise),
    # 1 % noise on the growth
    cmp = compare_results(run_doc(10, seed=1), run_doc(10, {"index": 1.1}, seed=2))
    # THEN its memory growth is significant, its change about +3 % of A's rise
    entry = _entry(cmp, "index", "growth")
    assert entry.significant and entry.tested and entry.p_adjusted is not None
    rise = sum(mib for _, mib in FUNCTIONS.values())
    assert entry.change == pytest.approx(4 / rise, abs=0.01)
    assert entry.ci_low is not None and entry.ci_high is not None
    assert entry.ci_low < entry.change < entry.ci_high and entry.ci_low > 0
    assert entry.a["growth"] == pytest.approx(40 * MIB, rel=0.05)
    # AND no other function's growth is, except main, which holds it
    flagged = {c.function for c in cmp.changes if c.figure == "growth" and c.significant}
    assert flagged <= {"index", "main"}
    # AND the gate calls it a regression above 2 %, not above 5 %
    assert entry in cmp.regressions(0.02) and entry not in cmp.regressions(0.05)


def test_a_callback_charged_with_noise_is_not_a_huge_regression() -> None:
    # GIVEN a callback growing 4 KiB in A and 1 MiB in B at the end of a 130 MiB program
    a, b = copy.deepcopy(run_doc(10, seed=1)), copy.deepcopy(run_doc(10, seed=2))
    spin = [f[2] for f in a["data"]["functions"]].index("spin")
    for doc, grown in ((a, 4096.0), (b, 1.5 * MIB)):
        for r in range(10):
            doc["data"]["function_figures"]["growth"][spin * 10 + r] = grown
    entry = _entry(compare_results(a, b), "spin", "growth")
    # THEN its change is about +1 % of the rise, not +36,000 %, and no regression above 5 %
    assert entry.change is not None and entry.change < 0.02
    assert entry not in compare_results(a, b).regressions(0.05)


def test_identical_programs_show_no_significant_change() -> None:
    cmp = compare_results(run_doc(10, seed=3), run_doc(10, seed=4))
    assert cmp.judged and not [c for c in cmp.changes if c.significant and c.file is not None]
    # the functions' times and memory growths were tested, as one family
    assert sum(c.tested and c.figure == "own" for c in cmp.changes) == 5
    assert sum(c.tested and c.figure == "growth" for c in cmp.changes) == 5  # spin: none
    assert cmp.correction == "holm"


def test_a_function_that_grew_nothing_is_shown_not_tested() -> None:
    cmp = compare_results(run_doc(10, seed=3), run_doc(10, seed=4))
    spin = _entry(cmp, "spin", "growth")
    assert not spin.tested and spin.note == "too small to test"
    main_time = _entry(cmp, "main", "own")  # no own time: nothing to test
    assert not main_time.tested


def test_a_single_run_on_a_side_is_weaker_evidence() -> None:
    cmp = compare_results(run_doc(1), run_doc(10, {"index": 1.5}))
    assert not cmp.judged and "single one on a side" in cmp.notes[0]
    # the growths are not judged; the times are, on their ticks, as weaker evidence
    assert not any(c.tested for c in cmp.changes if c.figure == "growth")
    assert all(c.weaker for c in cmp.changes if c.tested and c.figure == "own")
    assert cmp.verdict(0.05).exit_code in (1, 3)


def test_a_failed_run_is_noted() -> None:
    a = copy.deepcopy(run_doc(4))
    a["data"]["run_figures"]["exit"][2] = 137
    cmp = compare_results(a, run_doc(4))
    assert "A: 1 of 4 runs did not exit with 0" in cmp.notes


def test_the_renderings_say_memory_and_carry_the_figures() -> None:
    # GIVEN a comparison where ``index`` grew 10 % more
    cmp = compare_results(run_doc(10, seed=1), run_doc(10, {"index": 1.1}, seed=2))
    # THEN the text names the memory row, with the bytes of A and B and its interval
    text = render.to_text(cmp)
    line = next(r for r in text.splitlines() if "memory: index (prog.py:21)" in r)
    assert " * " in line and "MiB" in line and "±" in line, line
    assert "peak memory" in text and "wall time" in text
    # AND the JSON has one entry per figure with the fields
    doc = json.loads(render.to_json(cmp, cmp.regressions(0.02)))
    entry = next(e for e in doc["entries"] if e["function"] == "index" and e["figure"] == "growth")
    assert entry["file"] == "prog.py" and entry["line"] == 21
    assert entry["significant"] is True and entry["ci_low"] < entry["change"] < entry["ci_high"]
    assert entry["a"]["growth"] > 0 and entry["b"]["growth"] > entry["a"]["growth"]
    assert "memory: index (prog.py:21)" in doc["regressions"]
    # AND the HTML colours that row as worse
    page = render.to_html(cmp)
    row = next(r for r in page.split("<tr") if "memory: index (prog.py:21)" in r)
    assert 'class="worse"' in row


def test_hostile_names_are_escaped_in_html() -> None:
    doc = copy.deepcopy(run_doc(3))
    doc["data"]["functions"][0][2] = "<script>alert(1)</script>"
    page = render.to_html(compare_results(doc, run_doc(3)))
    assert "<script>alert" not in page and "&lt;script&gt;" in page


def test_cpu_times_are_compared_when_both_sides_have_them() -> None:
    # GIVEN B where ``join`` waited 60 % longer (wall), its CPU time unchanged
    a = run_doc(10, seed=5, cpu=True)
    b = copy.deepcopy(run_doc(10, seed=6, cpu=True))
    join = [f[2] for f in b["data"]["functions"]].index("join")
    own = b["data"]["function_figures"]["own"]
    for r in range(10):
        own[join * 10 + r] *= 1.6
    # WHEN compared on the CPU clock THEN nothing significant, the headline says CPU
    cmp = compare_results(a, b, clock="cpu")
    assert not _entry(cmp, "join", "own").significant
    assert any(c.figure == "cpu" for c in cmp.headlines())
    # AND on the wall clock (the default: the ticks' inclusive and path times are wall
    # times), or with a side without CPU times, the wait shows
    assert _entry(compare_results(a, b), "join", "own").significant
    b["data"]["function_figures"].pop("own_cpu")
    cmp = compare_results(a, b, clock="cpu")
    assert _entry(cmp, "join", "own").significant
    assert any(c.figure == "wall" for c in cmp.headlines())
    assert "a side has no CPU times" in " ".join(cmp.notes)
