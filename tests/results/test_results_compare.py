"""The comparison of two results: absolute times against a run-wide factor, where a change
starts, what a single run may say, timings and memory, the verdict and its exit codes.
Seeded synthetic results, no clock."""

from __future__ import annotations

import math
from typing import Any

import pytest
from results_data import (
    ENV,
    graph_doc,
    memory_doc,
    profile_doc,
    sampled_doc,
    shared_callee_stacks,
    timing_doc,
)

from onnxrt_backend_dev.monitoring._errors import BadValue, ResultFormatError
from onnxrt_backend_dev.monitoring._results import payloads, store
from onnxrt_backend_dev.monitoring._results.compare import (
    ResultComparison,
    compare_results,
    environment_warnings,
    label,
    process_medians,
)
from onnxrt_backend_dev.monitoring._results.keys import display_name, match_keys

SPIN = ("<module>", "main", "f07", "spin")


def _by_function(cmp: ResultComparison, name: str, figure: str = "own") -> Any:
    return next(c for c in cmp.changes if c.function == name and c.figure == figure)


def _listed(cmp: ResultComparison) -> list[str]:
    return [label(c) for c in cmp.ordered() if c.verdict and c.file is not None]


def test_slower_function_is_found_and_nothing_else() -> None:
    # GIVEN 50 functions, function 7 made 10 % slower in B, a machine factor per run
    a = profile_doc(20, slow={}, seed=1)
    b = profile_doc(20, slow={7: 1.1}, seed=2)
    # WHEN compared
    cmp = compare_results(a, b, ("a.json", "b.json"))
    # THEN f_007 alone is listed, its own time near +10 % inside its interval
    assert _listed(cmp) == ["f_007 (prog.py:71)"]
    f7 = _by_function(cmp, "f_007")
    assert f7.ci_low < f7.change < f7.ci_high and 0.05 < f7.change < 0.15
    assert f7.file == "prog.py" and f7.line == 71 and f7.verdict == "worse"
    assert f7.p_adjusted is not None and f7.p_value is not None and f7.p_adjusted >= f7.p_value
    assert cmp.correction == "holm" and cmp.factor is not None


def test_the_run_wide_factor_cancels_the_machine() -> None:
    # GIVEN runs whose whole speed varies by 25 %, but no function changes
    for seed in range(5):
        cmp = compare_results(profile_doc(20, seed=2 * seed), profile_doc(20, seed=2 * seed + 1))
        # THEN no function is significant (absolute times alone would swing)
        assert not [c for c in cmp.changes if c.significant and c.file is not None]
        assert any("run as a whole moved" in n for n in cmp.notes)


def test_a_dominant_function_made_slower_leaves_the_others_unchanged() -> None:
    # GIVEN function 0 holds most of the run and is 2.5 times slower in B (sess.run from
    # 1.04 s to 2.59 s), 49 small functions unchanged
    a = profile_doc(10, slow={0: 60.0}, seed=3)
    b = profile_doc(10, slow={0: 150.0}, seed=4)
    cmp = compare_results(a, b)
    # THEN it alone is listed, near +150 %; the others are not called "better"
    assert _listed(cmp) == ["f_000 (prog.py:1)"]
    assert _by_function(cmp, "f_000").change == pytest.approx(1.5, rel=0.1)


def test_the_slowed_caller_is_named_where_the_change_starts() -> None:
    # GIVEN 20 callers of one shared spin, f07's spin 40 % more work, sampled, 5 runs a side
    stacks = shared_callee_stacks(each=0.5)
    a = sampled_doc(5, stacks, seed=1)
    b = sampled_doc(5, stacks, slow={SPIN: 1.4}, seed=2)
    # WHEN compared
    cmp = compare_results(a, b)
    # THEN the first listed change is the path f07 → spin, where the change starts; no other
    # caller is listed, and main (+2 %) is a path the change only runs through
    origins = [c for c in cmp.ordered() if c.role == "origin"]
    assert [label(c) for c in origins] == ["f07 → spin"]
    assert origins[0].change == pytest.approx(0.4, abs=0.12) and origins[0].verdict == "worse"
    assert not [x for x in _listed(cmp) if x.startswith("f") and x != "f07 → spin"]
    assert _listed(cmp)[0] == "f07 → spin"


def test_cprofile_edges_name_the_caller_too() -> None:
    # GIVEN the same program under cProfile (exact, its caller -> callee edges saved)
    cmp = compare_results(graph_doc(5, seed=1), graph_doc(5, slow=1.4, seed=2))
    # THEN the edge f07 → spin starts the change; spin (all callers) is listed after it
    listed = _listed(cmp)
    assert listed[0] == "f07 → spin"
    assert not [x for x in listed if x.startswith("f") and x != "f07 → spin"]
    origin = next(c for c in cmp.changes if c.role == "origin")
    assert origin.figure == "path" and origin.path == ("f07", "spin")


def test_a_pipeline_stage_made_slower_and_nothing_unchanged_listed() -> None:
    # GIVEN a three-stage pipeline (load, score, save) and 30 small library functions,
    # score 15 % slower in B, 10 runs a side
    stacks: dict[tuple[str, ...], float] = {
        ("<module>", "main", "load"): 0.4,
        ("<module>", "main", "score"): 0.4,
        ("<module>", "main", "save"): 0.4,
    }
    for k in range(30):
        stacks[("<module>", f"lib{k:02d}")] = 0.03
    a = sampled_doc(10, stacks, rate=1000, seed=5)
    b = sampled_doc(10, stacks, slow={("<module>", "main", "score"): 1.15}, rate=1000, seed=6)
    cmp = compare_results(a, b)
    # THEN score is named, and nothing else is listed as worse or better
    assert "main → score" in _listed(cmp)
    assert {x.split(" ")[0] for x in _listed(cmp)} <= {"main", "score"}
    assert not [c for c in cmp.changes if c.verdict == "better"]


def test_a_single_run_a_side_is_weaker_evidence() -> None:
    # GIVEN one sampled run a side, a caller's path twice as long in B
    stacks = shared_callee_stacks(each=1.0)
    a = sampled_doc(1, stacks, seed=1)
    b = sampled_doc(1, stacks, slow={SPIN: 2.0}, seed=2)
    cmp = compare_results(a, b)
    # THEN its samples are tested (Poisson), marked weaker, and the note says so
    origin = next(c for c in cmp.changes if c.role == "origin")
    assert label(origin) == "f07 → spin" and origin.weaker and origin.significant
    assert any("weaker evidence" in n for n in cmp.notes)
    # AND one cProfile run a side is shown, not tested, never passed in silence
    one = compare_results(profile_doc(1, seed=1), profile_doc(1, slow={3: 2.0}, seed=2))
    f3 = _by_function(one, "f_003")
    assert f3.change is not None and f3.change > 0.5 and not f3.tested
    assert not one.judged and "single one on a side" in one.notes[0]


def test_functions_only_on_one_side_tiny_or_unmeasured() -> None:
    # GIVEN B with a function A lacks, a function tiny on both sides, and one measured 0 s
    # in a run
    a = profile_doc(10, functions=5, slow={0: 0.0001}, seed=1)
    b = profile_doc(10, functions=6, slow={0: 0.0001}, seed=2)
    b["data"]["function_figures"]["own"][1 * 10 + 3] = 0  # function 1, run 3 of 10
    # WHEN compared
    cmp = compare_results(a, b)
    # THEN each is shown, untested, with why
    notes = {c.function: c.note for c in cmp.changes if not c.tested and c.figure == "own"}
    assert notes == {
        "f_005": "only in B",
        "f_000": "below the 0.1% share tested",
        "f_001": "no time measured in some runs",
    }
    assert _by_function(cmp, "f_005").change is None


def test_functions_match_across_scripts_moved_lines_and_addresses() -> None:
    # GIVEN the same functions in old.py and new.py, at other lines, two of one name
    a = [["old.py", 10, "f"], ["old.py", 30, "g"], ["old.py", 50, "g"], ["lib.py", 1, "h"]]
    b = [["new.py", 12, "f"], ["new.py", 35, "g"], ["new.py", 60, "g"], ["lib.py", 1, "h"]]
    # WHEN keyed THEN they match one to one, the two g's in line order
    assert match_keys(a, "old.py") == match_keys(b, "new.py")
    assert match_keys(a, None) != match_keys(b, None)
    # AND names holding an address match, and those left alike fold into one
    c = [["<string>", 1, "__new__ at 0x7f3a12"], ["<string>", 1, "__new__ at 0x7f3b99"]]
    d = [["<string>", 1, "__new__ at 0x55aa00"]]
    assert match_keys(c, None)[0] == match_keys(c, None)[1] == match_keys(d, None)[0]
    assert match_keys(c, None)[0][1] == "__new__ at 0x…"


def test_names_are_shown_as_profile_shows_them() -> None:
    import sysconfig

    stdlib = sysconfig.get_paths()["stdlib"]
    assert display_name(f"{stdlib}/typing.py", 1252, "_is_dunder") == "_is_dunder (typing.py:1252)"
    site = "/x/lib/python3.11/site-packages/pandas/io/parsers/readers.py"
    assert display_name(site, 1304, "read_csv") == "read_csv (pandas/io/parsers/readers.py:1304)"
    assert (
        display_name("~", 0, "<built-in method builtins.sum>") == "<built-in method builtins.sum>"
    )
    assert display_name("a.py", 1, "bad\nname\x00") == "bad\\nname\\x00 (a.py:1)"


def test_timing_over_processes_and_the_gate() -> None:
    # GIVEN a timing 10 % slower, each side timed by 10 processes of 2 batches
    a = timing_doc(1e-3, seed=1, processes=10)
    cmp = compare_results(a, timing_doc(1.1e-3, seed=2, processes=10))
    # THEN significant over the processes, about +10 %, a regression above 5 % not 20 %
    (change,) = cmp.changes
    assert change.significant and change.change == pytest.approx(0.1, abs=0.03)
    assert change.a["processes"] == 10 and change.a["batches"] == 20 and cmp.runs == (10, 10)
    assert not change.weaker
    assert cmp.regressions(0.05) == [change] and cmp.regressions(0.2) == []
    assert cmp.verdict(0.05).exit_code == 1 and cmp.verdict(0.2).exit_code == 0
    with pytest.raises(BadValue):
        cmp.regressions(math.nan)


def test_identical_timings_are_not_different() -> None:
    a = timing_doc(1e-3, seed=1, processes=10)
    cmp = compare_results(a, timing_doc(1e-3, seed=2, processes=10))
    assert not cmp.changes[0].significant and cmp.changes[0].tested
    assert cmp.verdict(0.05).exit_code == 0


def test_one_process_a_side_is_judged_on_its_batches_as_weaker_evidence() -> None:
    # GIVEN three times slower, 200 batches a side but one process each (the README's
    # recipe)
    cmp = compare_results(timing_doc(1e-3, 200, seed=1), timing_doc(3e-3, 200, seed=2))
    # THEN judged on the batches, labelled weaker, and the gate fails: never exit 0
    (change,) = cmp.changes
    assert change.tested and change.significant and change.weaker
    assert "one process on a side" in change.note and cmp.runs == (1, 1)
    verdict = cmp.verdict(0.05)
    assert verdict.exit_code == 1 and "weaker evidence" in verdict.text
    # AND 60 % apart is within what two processes differ by (-31 % to +56 % measured):
    # undecided, never a pass, never decisive
    wide = compare_results(timing_doc(1e-3, 200, seed=1), timing_doc(1.6e-3, 200, seed=2))
    assert not wide.changes[0].significant and wide.verdict(0.05).exit_code == 3
    # AND faster by as much is not called better, nor a pass
    faster = compare_results(timing_doc(1.6e-3, 200, seed=1), timing_doc(1e-3, 200, seed=2))
    assert not faster.changes[0].significant and faster.verdict(0.05).exit_code == 3
    # AND identical statements of one process a side are not passed: undecided
    same = compare_results(timing_doc(1e-3, 200, seed=1), timing_doc(1e-3, 200, seed=3))
    assert same.verdict(0.05).exit_code == 3
    # AND each process weighs one figure, whatever its batches: 3 processes of 1, 1, 8
    series = payloads.timing_series("x", [1.0, 3.0] + [2.0] * 8, [1] * 10, None, [1, 1, 8])
    assert process_medians(series, series["times"]) == [1.0, 3.0, 2.0]


def test_undecided_when_above_the_threshold_without_evidence() -> None:
    # GIVEN two batches a side, 30 % apart and noisy: above 5 % but not significant
    def doc(times: list[float]) -> dict[str, Any]:
        series = payloads.timing_series("x", times, [1] * len(times))
        return store.make_result("timing", payloads.timing_data([series]), ["time"], ENV)

    cmp = compare_results(doc([1.0, 1.5]), doc([1.2, 2.0]))
    verdict = cmp.verdict(0.05)
    # THEN undecided: exit 3, the runs that would decide it named
    assert verdict.state == "undecided" and verdict.exit_code == 3
    assert verdict.runs_needed is not None and verdict.runs_needed > 2
    assert f"about {verdict.runs_needed}" in verdict.text
    # AND a single value a side, above the threshold: undecided too, never a pass
    single = compare_results(doc([1.0]), doc([1.5])).verdict(0.05)
    assert single.exit_code == 3 and single.runs_needed is None


def test_memory_peaks() -> None:
    # GIVEN peaks 10 % higher in B over 10 runs WHEN compared THEN significant, ~ +10 %
    cmp = compare_results(memory_doc(1e8, seed=1), memory_doc(1.1e8, seed=2))
    (change,) = cmp.changes
    assert change.significant and change.figure == "peak"
    assert change.change == pytest.approx(0.1, abs=0.01)
    assert label(change) == "peak memory"


def test_kinds_clocks_and_profilers_must_match() -> None:
    # GIVEN a timing and a profile WHEN compared THEN refused, naming both
    with pytest.raises(
        ResultFormatError, match=r"'t\.json', a timing result, with 'p\.json', a profile"
    ):
        compare_results(timing_doc(1e-3), profile_doc(2), ("t.json", "p.json"))
    # AND a cProfile profile with a sampled one, or two clocks
    sampled = sampled_doc(2, shared_callee_stacks())
    with pytest.raises(ResultFormatError, match="cProfile, B with the sampler"):
        compare_results(profile_doc(2), sampled)
    wall = profile_doc(2)
    wall["data"]["timer"] = "cpu"
    with pytest.raises(ResultFormatError, match="wall clock, B with the cpu clock"):
        compare_results(profile_doc(2), wall)


def test_timings_without_a_common_statement() -> None:
    a = timing_doc(1e-3, name="x")
    b = timing_doc(1e-3, name="y")
    b["data"]["series"].append(b["data"]["series"][0] | {"name": "z"})
    with pytest.raises(ResultFormatError, match="share no statement"):
        compare_results(a, b)


@pytest.mark.parametrize(
    ("option", "value"),
    [("alpha", 0.0), ("alpha", math.nan), ("confidence", 1.0), ("min_share", -1),
     ("min_change", 2.0)],
)  # fmt: skip
def test_bad_settings(option: str, value: object) -> None:
    settings: dict[str, Any] = {option: value}
    with pytest.raises(BadValue, match=option):
        compare_results(timing_doc(1e-3), timing_doc(1e-3), ("A", "B"), **settings)


def test_the_run_time_is_tested_on_its_own() -> None:
    # GIVEN B's runs 30 % longer (every function slower alike: the factor takes it)
    a = profile_doc(20, seed=1)
    b = profile_doc(20, seed=2)
    b["data"]["wall"] = [w * 1.3 for w in b["data"]["wall"]]
    # WHEN compared THEN the wall time alone is significant, tested outside the family
    cmp = compare_results(a, b)
    wall = next(c for c in cmp.changes if c.figure == "wall")
    assert wall.significant and wall.p_adjusted == wall.p_value
    assert cmp.regressions(0.05) == [wall]


def test_environments_that_differ_are_a_warning() -> None:
    a = {"environment": {"python": "3.11.7", "machine": "x86_64"}}
    b = {"environment": {"python": "3.12.1", "machine": "x86_64"}}
    (line,) = environment_warnings(a, b)
    assert "different Pythons ('3.11.7' and '3.12.1')" in line
    doc_b = profile_doc(3, seed=2)
    doc_b["environment"] = dict(doc_b["environment"], python="3.99")
    assert compare_results(profile_doc(3, seed=1), doc_b).warnings


def test_a_version_2_profile_without_paths_compares_functions() -> None:
    # GIVEN a profile saved before version 3 (no edges)
    docs = [graph_doc(5, seed=1), graph_doc(5, slow=1.4, seed=2)]
    for doc in docs:
        data = doc["data"]
        figures = data.pop("function_figures")
        for key in ("unit", "stacks", "stack_figures"):
            del data[key]
        data.update(own_ns=figures["own"], cumulative_ns=figures["inclusive"])
        data["calls"] = figures["calls"]
        doc["version"] = 2
    # WHEN loaded (upgraded) and compared
    a, b = (store.check_result(doc) for doc in docs)
    cmp = compare_results(a, b)
    # THEN compared on functions, the note says why no path is
    assert any("no call paths" in n for n in cmp.notes)
    assert not [c for c in cmp.changes if c.figure == "path"]


def test_timings_of_different_clocks_are_refused() -> None:
    # GIVEN a statement timed on the wall clock and on the CPU clock (time --clock cpu
    # says it in the summary)
    a = timing_doc(1e-3, processes=4)
    b = timing_doc(1e-3, seed=2, processes=4)
    b["data"]["series"][0]["summary"]["clock"] = "cpu"
    with pytest.raises(ResultFormatError, match="wall clock in A and the cpu clock in B"):
        compare_results(a, b)


def _session(scale: float, reference: float, slow: float = 1.0) -> dict[str, Any]:
    """A pytest session of six tests, one measured figure each (10 batches), the
    reference work beside it; test t5 ``slow`` times slower."""
    from onnxrt_backend_dev.monitoring._results.gate import session_data

    rows = []
    for i in range(6):
        k = scale * (slow if i == 5 else 1.0)
        times = [k * (1 + 0.01 * j) for j in range(10)]
        figure = {"kind": "time", "label": "m", "times": times, "sizes": [1] * 10}
        rows.append((f"t.py::t{i}", [{**figure, "reference": reference}]))
    data = session_data(rows)
    assert data is not None
    return store.make_result("report", data, ["pytest"], ENV)


def test_two_saved_sessions_compare_after_the_machines_shift() -> None:
    # GIVEN two pytest sessions, the machine 60 % slower in B's (its references too)
    cmp = compare_results(_session(1.0, 1e-3), _session(1.6, 1.6e-3))
    # THEN the shift is said and taken out: nothing regressed
    assert any("the machine was +60.0% slower in B's session" in n for n in cmp.notes)
    assert not [c for c in cmp.changes if c.significant]
    # AND a test 4 times slower than the machine is still found
    worse = compare_results(_session(1.0, 1e-3), _session(1.6, 1.6e-3, slow=4.0))
    assert [c.function for c in worse.regressions(0.05)] == ["t.py::t5::m"]
