"""The run-wide factor of a profile comparison on seeded synthetic profiles: a function
holding 40 % of the run and changed does not move the others, a figure holding the whole
run is judged by the run's time, a caller's inclusive time is tested as its path, and a
path whose change the family cannot confirm keeps the gate undecided."""

from __future__ import annotations

import statistics

import pytest
from results_data import sampled_doc, shared_callee_stacks, six_stacks

from onnxrt_backend_dev.monitoring._results.compare import compare_results, label
from onnxrt_backend_dev.monitoring._results.tables import smooth_cpu
from onnxrt_backend_dev.monitoring._stats.robust import biweight_location

C = ("<module>", "main", "c")
SPIN = ("<module>", "main", "f07", "spin")


@pytest.mark.parametrize("slow", [0.75, 1.25, 2.0])
@pytest.mark.parametrize("rate", [1000.0, 250.0])
def test_a_function_holding_40_percent_of_the_run_does_not_drag_the_others(
    slow: float, rate: float
) -> None:
    # GIVEN six functions, c 40 % of the run changed by slow in B; Poisson samples (the
    # observer's 1 ms, the CPU timer's 4 ms), each run's machine factor uniform in 1 ± 40 %,
    # 20 runs a side
    changes: list[float] = []
    listed = found = 0
    for seed in range(20):
        a = sampled_doc(20, six_stacks(), rate=rate, uniform=0.4, seed=2 * seed)
        b = sampled_doc(20, six_stacks(), {C: slow}, rate=rate, uniform=0.4, seed=2 * seed + 1)
        cmp = compare_results(a, b)
        own = {c.function: c for c in cmp.changes if c.figure == "own" and c.tested}
        changes += [own[name].change or 0.0 for name in "abdef"]
        listed += any(c.verdict and c.function != "c" for c in cmp.changes if c.file)
        found += own["c"].verdict == ("worse" if slow > 1 else "better")
    # THEN the unchanged functions' median change is within 2 %, none listed
    assert abs(statistics.median(changes)) < 0.02, statistics.median(changes)
    assert listed == 0
    # AND c is found (at 1 ms; at 4 ms, 50 samples a run, a 25 % change only often)
    assert found >= 18 if rate == 1000 or slow == 2.0 else found >= 6


def test_a_figure_holding_the_whole_run_is_judged_by_the_run_time() -> None:
    # GIVEN one run a side, the machine 9 % slower in B and f07's path twice as long
    stacks = shared_callee_stacks(each=1.0)
    cmp = compare_results(
        sampled_doc(1, stacks, seed=1), sampled_doc(1, stacks, slow={SPIN: 2.0}, seed=2)
    )
    # THEN <module> → main (all the run) is not an origin: the run's time judges it
    main = next(c for c in cmp.changes if c.figure == "path" and c.path == ("<module>", "main"))
    assert not main.tested and main.note == "most of the run: judged by the run's time"
    assert [label(c) for c in cmp.changes if c.role == "origin"] == ["f07 → spin"]


def test_a_callers_inclusive_time_is_tested_as_its_call_path() -> None:
    # GIVEN f07's spin 40 % more work, 5 runs a side
    stacks = shared_callee_stacks(each=0.5)
    cmp = compare_results(
        sampled_doc(5, stacks, seed=1), sampled_doc(5, stacks, {SPIN: 1.4}, seed=2)
    )
    # THEN f07's inclusive time shows its path's test (once in the family), not "not tested"
    inc = next(c for c in cmp.changes if c.figure == "inclusive" and c.function == "f07")
    path = next(c for c in cmp.changes if c.figure == "path" and c.path == SPIN)
    assert inc.tested and inc.significant and inc.note == "the same as its only call path"
    assert (inc.change, inc.ci_low, inc.p_adjusted) == (path.change, path.ci_low, path.p_adjusted)


def test_a_slower_path_the_family_cannot_confirm_is_undecided_never_passed() -> None:
    # GIVEN twenty callers of one spin, f07's 40 % more work, few samples a caller (5 a
    # run), the run's time steady: the path is significant alone, not among 60 figures
    stacks = shared_callee_stacks(each=0.02)
    codes = []
    for seed in range(8):
        a = sampled_doc(20, stacks, machine=0.0, rate=250, seed=2 * seed)
        b = sampled_doc(20, stacks, {SPIN: 1.4}, machine=0.0, rate=250, seed=2 * seed + 1)
        verdict = compare_results(a, b).verdict(0.05)
        codes.append(verdict.exit_code)
        if verdict.exit_code == 3 and "f07" in verdict.text:
            assert "main → f07 → spin" in verdict.text and "once corrected" in verdict.text
    # THEN f07 → spin named, or undecided: never exit 0
    assert 0 not in codes and 3 in codes, codes


def test_a_shared_callee_charged_in_lumps_is_split_among_its_callers_by_samples() -> None:
    # GIVEN twenty callers of one spin, 25 ms each a run at 1 ms samples, f07's 40 % more
    # work in B, each sample charged a lumpy CPU time (a late sampler on a busy machine:
    # a caller's path spread by 0.35 from run to run, its samples by 0.2), 20 runs a side
    stacks = shared_callee_stacks(each=0.025)
    codes, named, others, same = [], 0, 0, 0
    for seed in range(8):
        a = sampled_doc(20, stacks, machine=0.02, rate=1000, seed=2 * seed, lumpy=1.5)
        b = sampled_doc(
            20, stacks, {SPIN: 1.4}, machine=0.02, rate=1000, seed=2 * seed + 1, lumpy=1.5
        )
        cmp = compare_results(a, b)
        codes.append(cmp.verdict(0.05).exit_code)
        listed = [label(c) for c in cmp.changes if c.verdict and c.file]
        named += "f07 → spin" in listed
        others += any(x.startswith("f") and not x.startswith("f07") for x in listed)
        # (an identical copy beside it)
        again = sampled_doc(20, stacks, machine=0.02, rate=1000, seed=100 + seed, lumpy=1.5)
        same += any(c.verdict and c.file for c in compare_results(a, again).changes)
    # THEN f07 → spin named or undecided, never passed (its CPU time as charged: named in
    # 8 of 40 seeds, exit 0 in 10), no other caller listed, nothing in an identical copy
    assert 0 not in codes and named >= 6 and others == 0 and same == 0, (codes, named)


def test_a_lone_stack_keeps_its_cpu_time_as_charged() -> None:
    # GIVEN two runs of a stack alone in ending where it ends, charged 3 and 9 ms on 4 and
    # 5 samples, beside two stacks ending in spin (2 and 6 samples, 5 ms charged to one)
    cpu = [[3.0, 9.0], [0.0, 5.0], [4.0, 0.0]]
    samples = [[4, 5], [2, 1], [6, 4]]
    out = smooth_cpu(cpu, samples, ["f", "spin", "spin"])
    # THEN the lone stack is as charged; spin's 4 and 5 ms split by the samples of each run
    assert out[0] == [3.0, 9.0]
    assert out[1] == pytest.approx([1.0, 1.0]) and out[2] == pytest.approx([3.0, 4.0])


def test_the_biweight_leaves_a_piece_that_changed_out() -> None:
    # GIVEN five pieces that agree on a shift of +0.1 within their noise, one at -0.3
    values = [0.1, 0.12, 0.08, 0.11, 0.09, -0.3]
    fit = biweight_location(values, [1 / 0.02**2] * 6)
    # THEN the estimate is theirs, the changed piece weighs nothing
    assert fit.value == pytest.approx(0.1, abs=0.01) and fit.weights[-1] == 0.0
    assert fit.variance([0.02**2] * 6) < fit.variance([0.02**2] * 6, left_out=[0, 1])
    # AND no value, no estimate
    assert biweight_location([], []).value == 0.0
