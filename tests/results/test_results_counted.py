"""Comparisons of counted figures (``--counter instructions``): one run a side, no
statistics: a change beyond the noise of the counts is a change."""

from __future__ import annotations

import re
from typing import Any

import pytest

from onnxrt_backend_dev.monitoring._errors import ResultFormatError
from onnxrt_backend_dev.monitoring._results.compare import compare_results
from onnxrt_backend_dev.monitoring._results.counted import counted_change
from onnxrt_backend_dev.monitoring._results.payloads import (
    counted_profile_data,
    counted_series,
    timing_data,
    timing_series,
)
from onnxrt_backend_dev.monitoring._results.render import to_text
from onnxrt_backend_dev.monitoring._results.store import make_result

ENV = {"python": "3.12.1"}


def _timing(per: float, noise: float = 0.0, name: str = "f(x)") -> dict[str, Any]:
    return make_result("timing", timing_data([counted_series(name, per, 1000, noise)]), env=ENV)


def test_a_change_beyond_the_noise_is_one() -> None:
    # GIVEN 1,000 instructions a run, then 1,002 (0.2 %), then 1,020 (2 %)
    same = counted_change("timing", "f", "count", 1000.0, 1000.5)
    small = counted_change("timing", "f", "count", 1000.0, 1002.0)
    worse = counted_change("timing", "f", "count", 1000.0, 1020.0)
    better = counted_change("timing", "f", "count", 1000.0, 980.0, noise=5.0)
    # THEN within 0.1 % it is no change, beyond it it is
    assert not same.significant and not same.verdict
    assert small.significant and small.verdict == "worse"
    assert worse.significant and worse.change == pytest.approx(0.02)
    assert worse.ci_low == pytest.approx(0.02 - 0.00102) and worse.ci_high == pytest.approx(
        0.02 + 0.00102
    )
    assert better.verdict == "better" and (better.ci_high or 0.0) < 0
    assert counted_change("timing", "f", "count", 0.0, 5.0).change is None


@pytest.mark.parametrize(("b", "code"), [(1000.0, 0), (1010.0, 0), (1030.0, 1), (900.0, 0)])
def test_the_gate_on_counted_statements(b: float, code: int) -> None:
    cmp = compare_results(_timing(1000.0), _timing(b))
    assert cmp.verdict(0.02).exit_code == code
    assert any("counted by valgrind" in n for n in cmp.notes)
    assert not any("weaker evidence" in n for n in cmp.notes)  # one run a side decides


def test_a_count_is_never_compared_with_a_time() -> None:
    timed = make_result("timing", timing_data([timing_series("f(x)", [1.0], [1000])]), env=ENV)
    with pytest.raises(ResultFormatError, match=r"A was counted .instructions., B timed"):
        compare_results(_timing(1000.0), timed)


def _profile(c_own: int, d_own: int = 50_000_000) -> dict[str, Any]:
    main = ("/a/prog.py", 10, "main")
    functions = {
        ("~", 0, "<interpreter>"): [1, 1, 30_000_000 + c_own // 1000, 200_000_000, {}],
        main: [1, 1, 1_000_000, 1_000_000 + 40_000_000 + c_own + d_own,
               {("~", 0, "<interpreter>"): [1, 1, 1_000_000, 91_000_000 + c_own]}],
        ("/a/prog.py", 1, "b"): [10, 10, 40_000_000, 40_000_000,
                                 {main: [10, 10, 40_000_000, 40_000_000]}],
        ("/a/prog.py", 4, "c"): [10, 10, c_own, c_own, {main: [10, 10, c_own, c_own]}],
        ("/a/prog.py", 7, "d"): [10, 10, d_own, d_own, {main: [10, 10, d_own, d_own]}],
    }  # fmt: skip
    total = sum(int(v[2]) for v in functions.values())  # type: ignore[call-overload]
    allocs = {("/a/prog.py", 4, "c"): c_own // 100, ("/a/prog.py", 7, "d"): 20_000}
    sizes = {key: 10 * n for key, n in allocs.items()}  # bytes (--count-bytes)
    data = counted_profile_data(
        [(functions, total, 3.0)], main="/a/prog.py", allocations=[allocs], alloc_bytes=[sizes]
    )
    return make_result("profile", data, env=ENV)


def test_only_the_function_that_changed_is_listed() -> None:
    # GIVEN c 3 % slower, d moved by 0.1 % (the garbage collector ran elsewhere)
    cmp = compare_results(_profile(100_000_000), _profile(103_000_000, 50_050_000))
    listed = [(c.function, c.figure, c.verdict) for c in cmp.changes if c.verdict and c.file]
    # THEN c alone of the functions is listed as worse (beside the run's total), its
    # instructions, its allocation calls and bytes, and the gate names it
    # (and its one call path, main → c, where the change starts)
    assert listed == [
        ("c", "own", "worse"), ("c", "allocs", "worse"), ("c", "bytes", "worse"),
        ("c", "path", "worse"),
    ]  # fmt: skip
    verdict = cmp.verdict(0.01)
    assert verdict.exit_code == 1 and "main → c" in verdict.text
    # AND the bytes are shown as bytes, beside the calls
    assert re.search(r"\+3\.0 % .* 9\.54 MiB +9\.82 MiB  bytes: c", to_text(cmp)), to_text(cmp)
    # AND identical counts pass
    assert (
        compare_results(_profile(100_000_000), _profile(100_000_000)).verdict(0.01).exit_code == 0
    )


def test_a_counted_profile_is_never_compared_with_a_sampled_one() -> None:
    from results_data import sampled_doc

    with pytest.raises(ResultFormatError, match="counted"):
        compare_results(_profile(1), sampled_doc(3, {("main", "f"): 0.5}))


def _shared(f07: float, others: float = 1.0) -> dict[str, Any]:
    """Twenty callers of one spin, each passing it 1 M instructions of work (f07 ``f07``
    times that, the others ``others`` times)."""
    spin = ("/a/prog.py", 1, "spin")
    functions: dict[Any, Any] = {spin: [20, 20, 0, 0, {}]}
    for i in range(20):
        caller = ("/a/prog.py", 10 + i, f"f{i:02d}")
        work = int(1_000_000 * (f07 if i == 7 else others))
        functions[caller] = [1, 1, 1_000, 1_000 + work, {}]
        functions[spin][2] += work
        functions[spin][3] += work
        functions[spin][4][caller] = [1, 1, work, work]
    total = sum(int(v[2]) for v in functions.values())
    return make_result("profile", counted_profile_data([(functions, total, 1.0)]), env=ENV)


def test_a_shared_callee_s_change_is_named_by_the_caller_that_carries_it() -> None:
    # GIVEN f07 passing spin 40 % more work, the other nineteen callers unchanged
    verdict = compare_results(_shared(1.0), _shared(1.4)).verdict(0.01)
    # THEN the verdict names f07 → spin, where the change starts, and no other caller
    assert verdict.exit_code == 1 and "f07 → spin +40.0 %" in verdict.text, verdict.text
    assert not re.search(r"f(0[0-689]|1\d) → spin", verdict.text)
    # AND a change every caller shares (spin itself slower) names spin alone
    verdict = compare_results(_shared(1.0), _shared(1.1, 1.1)).verdict(0.01)
    assert verdict.exit_code == 1 and "spin (/a/prog.py:1)" in verdict.text, verdict.text
    assert "→ spin" not in verdict.text
