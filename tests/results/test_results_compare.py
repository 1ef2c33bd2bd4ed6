"""The comparison of two results: per-function shares, Holm's correction, what a single
run may say, timings and memory, the regression gate."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from results_data import ENV, memory_doc, profile_doc, timing_doc

from onnxrt_backend_dev.monitoring._errors import BadValue, ResultFormatError
from onnxrt_backend_dev.monitoring._results import payloads, store
from onnxrt_backend_dev.monitoring._results.compare import (
    MIN_LOG_VARIANCE,
    _process_medians,
    _Side,
    compare_results,
    holm,
    match_keys,
    precision_weights,
)


def _by_function(cmp, name):  # type: ignore[no-untyped-def]
    return next(c for c in cmp.changes if c.function == name)


def test_holm_matches_its_definition() -> None:
    # GIVEN p-values WHEN adjusted THEN step-down, monotone, capped at 1, order kept
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([]) == []


def test_slower_function_is_found_and_nothing_else() -> None:
    # GIVEN 50 functions, function 7 made 10 % slower in B, a machine factor per run
    a = profile_doc(20, slow={}, seed=1)
    b = profile_doc(20, slow={7: 1.1}, seed=2)
    # WHEN compared
    cmp = compare_results(a, b, ("a.json", "b.json"))
    # THEN f_007 alone is significant, its change near +10 % inside its interval
    significant = [c.function for c in cmp.changes if c.significant]
    assert significant == ["f_007"]
    f7 = _by_function(cmp, "f_007")
    assert f7.ci_low is not None and f7.ci_high is not None
    assert f7.ci_low < f7.change < f7.ci_high and 0.05 < f7.change < 0.15
    assert f7.file == "prog.py" and f7.line == 71 and f7.figure == "share"
    assert f7.p_adjusted is not None and f7.p_value is not None and f7.p_adjusted >= f7.p_value
    assert cmp.ordered()[0] is f7 and cmp.judged and cmp.correction == "holm"


def test_shares_cancel_the_machine_factor() -> None:
    # GIVEN runs whose whole speed varies by 25 %, but no function changes
    a, b = profile_doc(20, seed=3), profile_doc(20, seed=4)
    # WHEN compared THEN no function is significant (absolute times alone would swing)
    cmp = compare_results(a, b)
    assert not [c for c in cmp.changes if c.significant and c.figure == "share"]
    assert cmp.regressions(0.05) == []


def test_a_single_run_cannot_judge() -> None:
    # GIVEN one run a side, with a large change
    cmp = compare_results(profile_doc(1, seed=1), profile_doc(1, slow={3: 2.0}, seed=2))
    # THEN the figures are there, nothing is tested, and the notes say so
    f3 = _by_function(cmp, "f_003")
    assert f3.change is not None and f3.change > 0.5
    assert not f3.tested and not f3.significant and f3.ci_low is None
    assert not cmp.judged and "cannot be judged" in cmp.notes[0]
    assert cmp.regressions(0.0) == []


def test_few_runs_are_flagged() -> None:
    # GIVEN 4 runs a side WHEN compared THEN the notes say the tests are weak
    cmp = compare_results(profile_doc(4, seed=1), profile_doc(4, seed=2))
    assert cmp.judged and "tests are weak" in cmp.notes[0]


def test_functions_only_on_one_side_tiny_or_unmeasured() -> None:
    # GIVEN B with a function A lacks, a function tiny on both sides, and one measured 0 s
    # in a run
    a = profile_doc(10, functions=5, slow={0: 0.0001}, seed=1)
    b = profile_doc(10, functions=6, slow={0: 0.0001}, seed=2)
    b["data"]["own_ns"][1 * 10 + 3] = 0  # function 1, run 3 of 10
    # WHEN compared
    cmp = compare_results(a, b)
    # THEN each is shown, untested, with why
    notes = {c.function: c.note for c in cmp.changes if not c.tested}
    assert notes == {
        "f_005": "only in B",
        "f_000": "below the 0.1% share tested",
        "f_001": "no time measured in some runs",
    }
    assert _by_function(cmp, "f_005").change is None


def test_functions_match_across_scripts_and_moved_lines() -> None:
    # GIVEN the same functions in old.py and new.py, at other lines, two of one name
    a = [["old.py", 10, "f"], ["old.py", 30, "g"], ["old.py", 50, "g"], ["lib.py", 1, "h"]]
    b = [["new.py", 12, "f"], ["new.py", 35, "g"], ["new.py", 60, "g"], ["lib.py", 1, "h"]]
    # WHEN keyed THEN they match one to one, the two g's in line order
    assert match_keys(a, "old.py") == match_keys(b, "new.py")
    assert match_keys(a, None) != match_keys(b, None)


def test_timing_comparison_and_gate() -> None:
    # GIVEN a timing 10 % slower, each side timed by 10 processes of 2 batches
    a = timing_doc(1e-3, seed=1, processes=10)
    cmp = compare_results(a, timing_doc(1.1e-3, seed=2, processes=10))
    # THEN significant over the processes, about +10 %, a regression above 5 % not 20 %
    (change,) = cmp.changes
    assert change.significant and change.change == pytest.approx(0.1, abs=0.03)
    assert change.a["processes"] == 10 and change.a["n"] == 20 and cmp.runs == (10, 10)
    assert cmp.regressions(0.05) == [change] and cmp.regressions(0.2) == []
    with pytest.raises(BadValue):
        cmp.regressions(math.nan)


def test_identical_timings_are_not_different() -> None:
    a = timing_doc(1e-3, seed=1, processes=10)
    cmp = compare_results(a, timing_doc(1e-3, seed=2, processes=10))
    assert not cmp.changes[0].significant and cmp.changes[0].tested


def test_the_process_is_the_unit_of_a_timing() -> None:
    # GIVEN 10 % apart, 200 batches a side but one process each
    cmp = compare_results(timing_doc(1e-3, 200, seed=1), timing_doc(1.1e-3, 200, seed=2))
    # THEN shown, not tested: the batches of one process say nothing of another
    (change,) = cmp.changes
    assert not change.tested and not change.significant and not cmp.judged
    assert "one process on a side" in change.note and cmp.regressions(0.05) == []
    assert change.change == pytest.approx(0.1, abs=0.03) and cmp.runs == (1, 1)
    # AND each process weighs one figure, whatever its batches: 3 processes of 1, 1, 8
    series = payloads.timing_series("x", [1.0, 3.0] + [2.0] * 8, [1] * 10, None, [1, 1, 8])
    assert _process_medians(series, series["times"]) == [1.0, 3.0, 2.0]


def test_memory_peaks() -> None:
    # GIVEN peaks 10 % higher in B over 10 runs WHEN compared THEN significant, ~ +10 %
    cmp = compare_results(memory_doc(1e8, seed=1), memory_doc(1.1e8, seed=2))
    (change,) = cmp.changes
    assert change.significant and change.figure == "peak"
    assert change.change == pytest.approx(0.1, abs=0.01)


def test_kinds_must_match() -> None:
    # GIVEN a timing and a profile WHEN compared THEN refused, naming both
    with pytest.raises(
        ResultFormatError, match=r"'t\.json', a timing result, with 'p\.json', a profile"
    ):
        compare_results(timing_doc(1e-3), profile_doc(2), ("t.json", "p.json"))


def test_timings_without_a_common_statement() -> None:
    a = timing_doc(1e-3, name="x")
    b = timing_doc(1e-3, name="y")
    b["data"]["series"].append(b["data"]["series"][0] | {"name": "z"})
    with pytest.raises(ResultFormatError, match="share no statement"):
        compare_results(a, b)


@pytest.mark.parametrize(
    ("option", "value"),
    [("alpha", 0.0), ("alpha", math.nan), ("confidence", 1.0), ("min_share", -1)],
)
def test_bad_settings(option: str, value: object) -> None:
    settings: dict[str, Any] = {option: value}
    with pytest.raises(BadValue, match=option):
        compare_results(timing_doc(1e-3), timing_doc(1e-3), ("A", "B"), **settings)


def test_small_sample_test_is_compare_samples() -> None:
    # GIVEN random samples, some with ties (rounded)
    import random

    from onnxrt_backend_dev.monitoring._results.compare import small_sample_test
    from onnxrt_backend_dev.monitoring._timing.stats import compare_samples

    rng = random.Random(5)
    for _ in range(100):
        n, m = rng.randint(2, 30), rng.randint(2, 30)
        xs = [round(rng.lognormvariate(0, 0.1), rng.choice([2, 6])) + 0.01 for _ in range(n)]
        ys = [round(rng.lognormvariate(0.05, 0.1), rng.choice([2, 6])) + 0.01 for _ in range(m)]
        # WHEN tested both ways THEN the same change, interval and p-value
        ref = compare_samples(xs, ys, 0.95, 0.05)
        change, low, high, p = small_sample_test(xs, ys, 0.95)
        assert change == pytest.approx(1 / ref.speedup - 1, abs=1e-12)
        assert low == pytest.approx(1 / ref.ci_high - 1, abs=1e-12)
        assert high == pytest.approx(1 / ref.ci_low - 1, abs=1e-12)
        assert p == pytest.approx(ref.p_value, abs=1e-12)


def test_weighted_holm() -> None:
    # GIVEN two p-values, the first of a heavy hypothesis
    # WHEN weighted 9:1 THEN the heavy one is tested at 0.9 alpha, the light one after it
    assert holm([0.01, 0.04], [9.0, 1.0]) == pytest.approx([0.01 / 0.9, 0.04])
    # AND equal weights are the classic method
    assert holm([0.01, 0.04, 0.03], [2.0, 2.0, 2.0]) == pytest.approx(holm([0.01, 0.04, 0.03]))


def test_wall_time_is_tested_on_its_own() -> None:
    # GIVEN B's runs 30 % longer (every function slower alike: no share moves)
    a = profile_doc(20, seed=1)
    b = profile_doc(20, seed=2)
    b["data"]["wall"] = [w * 1.3 for w in b["data"]["wall"]]
    # WHEN compared THEN the wall time alone is significant, tested outside the family
    cmp = compare_results(a, b)
    wall = next(c for c in cmp.changes if c.figure == "wall")
    assert wall.significant and wall.p_adjusted == wall.p_value
    assert cmp.regressions(0.05) == [wall]


def test_paired_finds_the_slower_function_and_leaves_the_others_centred() -> None:
    # GIVEN 20 runs a side, function 3 made 10 % slower, 5 % noise per function
    a = profile_doc(20, seed=1)
    b = profile_doc(20, slow={3: 1.1}, seed=2)
    # WHEN compared pair by pair
    cmp = compare_results(a, b, paired=True)
    funcs = [c for c in cmp.changes if c.file is not None]
    (slow,) = [c for c in funcs if c.significant]
    # THEN only f_003 is significant, its change near +10 %, its figure the time
    assert slow.function == "f_003" and slow.figure == "time"
    low, change, high = slow.ci_low, slow.change, slow.ci_high
    assert low is not None and change is not None and high is not None
    assert 0.03 < low < change < high < 0.2
    # AND the others' changes are centred on 0 (shares would all move by -0.2 %)
    others = sorted(c.change or 0.0 for c in funcs if c.function != "f_003")
    assert abs(others[len(others) // 2]) < 0.01
    assert any("paired runs" in n and "signed-rank" in n for n in cmp.notes)
    # AND the renderers show it first, with its shares
    from onnxrt_backend_dev.monitoring._results import render

    text = render.to_text(cmp)
    assert "f_003" in text and "1 significant change(s): 1 worse" in text
    assert "f_003" in render.to_html(cmp) and '"figure": "time"' in render.to_json(cmp)


def test_paired_needs_as_many_runs_on_each_side() -> None:
    cmp = compare_results(profile_doc(6, seed=1), profile_doc(8, seed=2), paired=True)
    assert "not paired: 6 runs in A, 8 in B" in cmp.notes
    assert all(c.figure != "time" for c in cmp.changes if c.file is not None)


def test_paired_must_be_a_bool() -> None:
    from onnxrt_backend_dev.monitoring._errors import BadType

    with pytest.raises(BadType, match="paired"):
        compare_results(profile_doc(3), profile_doc(3), paired="no")  # type: ignore[arg-type]


def test_signed_rank_test_matches_its_definition() -> None:
    from onnxrt_backend_dev.monitoring._results.compare import signed_rank_test

    # GIVEN ten positive log ratios THEN the p-value is the normal approximation's at the
    # largest statistic (55 of 55 Walsh averages above 0) and the estimate their median
    d = [0.01 * (i + 1) for i in range(10)]
    change, low, high, p = signed_rank_test(d, 0.95)
    assert p < 0.01
    assert change == pytest.approx(math.exp(0.055) - 1)
    assert low < change < high
    # AND symmetric differences give no evidence
    assert signed_rank_test([-0.02, 0.02, -0.01, 0.01, 0.03, -0.03], 0.95)[3] > 0.5


def test_robust_finds_the_slower_function_and_leaves_the_others_centred() -> None:
    # GIVEN 20 runs a side, function 3 made 10 % slower, each run's machine factor random
    a = profile_doc(20, seed=1)
    b = profile_doc(20, slow={3: 1.1}, seed=2)
    # WHEN each function's time is divided by its run's common factor
    cmp = compare_results(a, b, robust=True)
    funcs = [c for c in cmp.changes if c.file is not None]
    # THEN only f_003 is significant, near +10 %, and the others are centred on 0
    assert [c.function for c in funcs if c.significant] == ["f_003"]
    (slow,) = [c for c in funcs if c.significant]
    assert slow.figure == "time" and 0.05 < (slow.change or 0.0) < 0.15
    others = sorted(c.change or 0.0 for c in funcs if c.function != "f_003")
    assert abs(others[len(others) // 2]) < 0.01
    assert any("common factor" in n for n in cmp.notes)


def test_weighted_median() -> None:
    from onnxrt_backend_dev.monitoring._results.compare import weighted_median

    assert weighted_median([3.0, 1.0, 2.0], [1.0, 1.0, 1.0]) == 2.0
    assert weighted_median([3.0, 1.0, 2.0], [10.0, 1.0, 1.0]) == 3.0  # the heavy one wins
    assert weighted_median([], []) == 0.0


def test_precision_weights_favour_functions_whose_runs_agree() -> None:
    # GIVEN two functions of equal share, one steady (1 % noise), one scattering (20 %),
    # and a third whose runs agree to the clock's resolution
    rng = random.Random(3)
    runs = []
    for _ in range(10):
        stats: dict[Any, Any] = {
            ("p.py", 1, "steady"): (1, 1, 0.01 * rng.lognormvariate(0, 0.01), 0.01, {}),
            ("p.py", 2, "scatter"): (1, 1, 0.01 * rng.lognormvariate(0, 0.2), 0.01, {}),
            ("p.py", 3, "exact"): (1, 1, 0.01, 0.01, {}),
            ("p.py", 4, "rest"): (1, 1, 0.5, 0.5, {}),
        }
        runs.append((stats, 1.0))
    doc = store.make_result("profile", payloads.profile_data(runs), [], ENV)
    sa, sb = _Side(doc["data"]), _Side(doc["data"])
    cmp = compare_results(doc, doc)
    functions = [c for c in cmp.changes if c.file is not None]
    keys = [next(k for k in sa.keys if k[1] == c.function) for c in functions]
    # WHEN weighted for Holm
    weights = precision_weights(keys, functions, sa, sb)
    by_name = {functions[i].function: w for i, w in weights.items()}
    # THEN all are tested; the steady one weighs far more than the scattering one, and the
    # exact one no more than its share over a 1 % spread
    assert set(by_name) == {"steady", "scatter", "exact", "rest"}
    assert by_name["steady"] > 50 * by_name["scatter"]
    exact = next(c for c in functions if c.function == "exact")
    assert by_name["exact"] == pytest.approx(exact.a["share"] / MIN_LOG_VARIANCE)
