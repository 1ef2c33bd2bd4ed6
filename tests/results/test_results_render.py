"""The renderers of a comparison: the verdict first, sections of ``top`` rows with the rest
folded into one line, JSON fields, HTML escaped, a banner and a differential flame graph."""

from __future__ import annotations

import html
import json
import re

from results_data import (
    graph_doc,
    profile_doc,
    sampled_doc,
    shared_callee_stacks,
    six_stacks,
    timing_doc,
)

from onnxrt_backend_dev.monitoring._results import render
from onnxrt_backend_dev.monitoring._results.change import Change
from onnxrt_backend_dev.monitoring._results.compare import compare_results
from onnxrt_backend_dev.monitoring._results.flame import flame_html

SPIN = ("<module>", "main", "f07", "spin")


def _slow_profile():  # type: ignore[no-untyped-def]
    return compare_results(
        profile_doc(20, seed=1),
        profile_doc(20, slow={7: 1.1, 9: 0.8}, seed=2),
        ("a.json", "b.json"),
    )


def _shared():  # type: ignore[no-untyped-def]
    stacks = shared_callee_stacks(each=0.5)
    return compare_results(
        sampled_doc(5, stacks, seed=1), sampled_doc(5, stacks, slow={SPIN: 1.4}, seed=2)
    )


def test_text_opens_with_the_verdict_and_lists_the_changes_first() -> None:
    # GIVEN f_007 10 % slower and f_009 20 % faster WHEN rendered as text, 5 rows a section
    text = render.to_text(_slow_profile(), top=5)
    lines = text.splitlines()
    # THEN the verdict is the first line, the regression named
    assert lines[0].startswith("verdict: B is worse: 1 significant regression(s) above 5 %")
    assert "f_007 (prog.py:71)" in lines[0]
    start = next(i for i, line in enumerate(lines) if line.startswith("functions"))
    rows = [line for line in lines[start:] if "prog.py" in line]
    # AND the two listed functions come first, starred, their intervals as bounds (the
    # intervals of ratios are not symmetric)
    assert {"f_007", "f_009"} == {rows[0].split()[-3], rows[1].split()[-3]}
    worse = next(r for r in rows if "f_007" in r)
    assert re.search(r"\+\d+\.\d % \[\+\d+\.\d, \+\d+\.\d\]  \*", worse) and "[worse]" in worse
    better = next(r for r in rows if "f_009" in r)
    assert re.search(r"-\d+\.\d % \[-\d+\.\d, -\d+\.\d\]  \*", better) and "[better]" in better
    # AND --top holds: 5 function rows, the rest folded into one line saying why
    assert len(rows) == 5
    assert re.search(r"\.\.\. 45 more functions: 45 not significant; none significant", text)


def test_text_names_where_the_change_starts() -> None:
    text = render.to_text(_shared(), top=4)
    lines = text.splitlines()
    assert "f07 → spin" in lines[0]
    start = lines.index(
        "where the changes start (inclusive time of each call path, B at A's run speed):"
    )
    assert "f07 → spin" in lines[start + 2] and "*" in lines[start + 2]
    assert "(prog.py:" in lines[start + 2]


def test_json_has_the_verdict_and_one_entry_per_figure() -> None:
    # GIVEN the comparison WHEN rendered as JSON
    doc = json.loads(render.to_json(_slow_profile()))
    entries = [e for e in doc["entries"] if e["figure"] == "own"]
    # THEN the verdict, and each function with the documented fields
    assert doc["verdict"]["state"] == "regressed" and doc["verdict"]["exit_code"] == 1
    assert doc["regressions"] == ["f_007 (prog.py:71)"]
    assert len(entries) == 50 and doc["correction"] == "holm" and doc["factor"] is not None
    for e in entries:
        assert {"function", "file", "line", "a", "b", "change", "ci_low", "ci_high"} <= set(e)
        assert isinstance(e["significant"], bool) and e["verdict"] in ("", "worse", "better")
    f7 = next(e for e in entries if e["function"] == "f_007")
    assert f7["significant"] and f7["ci_low"] < f7["change"] < f7["ci_high"]
    assert f7["a"]["time"] < f7["b"]["time"]


def test_html_is_escaped_with_a_banner_and_coloured_where_listed() -> None:
    # GIVEN functions whose name and file hold markup
    file = "<script>alert(1)</script>.py"
    a = profile_doc(20, functions=8, seed=1, file=file)
    b = profile_doc(20, functions=8, slow={1: 1.5}, seed=2, file=file)
    page = render.to_html(compare_results(a, b, ("<a>", "b&")))
    # THEN no markup of the file reaches the page; the banner says the verdict
    assert "<script>" not in page and html.escape(file) in page
    assert "&lt;a&gt;" in page and "b&amp;" in page
    assert re.search(r'<div class="banner regressed">B is worse', page)
    coloured = re.findall(r'<tr class="(worse|better)">', page)
    assert coloured and len(coloured) == sum(1 for c in compare_results(a, b).changes if c.verdict)


def test_html_draws_the_differential_flame_graph_beside_the_table() -> None:
    page = render.to_html(_shared())
    assert "Call paths of B" in page and "class='cols'" in page
    # the origin's box outlined, coloured red (a slower path)
    box = re.search(r'<div class="fb origin" style="[^"]*background:hsl\(2,[^"]*"[^>]*>spin<', page)
    assert box is not None
    # cProfile's edges are expanded into a tree
    edges = render.to_html(compare_results(graph_doc(5, seed=1), graph_doc(5, slow=1.4, seed=2)))
    assert "Call paths of B" in edges and ">f07<" in edges


def test_a_crafted_name_never_runs_as_script() -> None:
    stacks: dict[tuple[str, ...], float] = {
        ("<module>", "<img src=x onerror=alert(1)>"): 0.5,
        ("<module>", "ok"): 0.5,
    }
    page = render.to_html(
        compare_results(sampled_doc(3, stacks, seed=1), sampled_doc(3, stacks, seed=2))
    )
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_untested_change_has_no_interval() -> None:
    # GIVEN one run a side WHEN shown THEN '+x %' with no '±', and the verdict says why
    cmp = compare_results(timing_doc(1e-3, batches=1), timing_doc(2e-3, batches=1))
    text = render.to_text(cmp)
    assert "+100.0 %" in text and "±" not in text
    assert text.startswith("verdict: undecided") and "significance not judged" in text


def _change(change: float, low: float | None, high: float | None) -> Change:
    return Change("timing", "x", None, None, "time", {}, {}, change, low, high, 0.01, 0.01,
                  True, low is not None)  # fmt: skip


def test_plus_minus_only_for_a_symmetric_interval() -> None:
    assert render.format_change(_change(0.12, 0.10, 0.14)) == "+12.0 % ± 2.0"
    assert render.format_change(_change(0.543, 0.067, 1.233)) == "+54.3 % [+6.7, +123.3]"
    assert render.format_change(_change(0.027, None, None)) == "+2.7 %"


def test_each_row_change_is_the_one_of_the_times_beside_it() -> None:
    # GIVEN profiles whose whole run moved, with f_007 10 % slower WHEN rendered
    cmp = _slow_profile()
    assert cmp.factor is not None
    text = render.to_text(cmp, top=50)
    rows = [line for line in text.splitlines() if "(prog.py:" in line]
    # THEN each row's change is B's time over A's, less one (B at A's run speed, as the
    # header says), to the rounding of the times shown
    assert "functions (own time; inclusive beside), B at A's run speed:" in text
    seen = 0
    for row in rows:
        found = re.match(r"\s+([-+]\d+\.\d) %.*?(\d+(?:\.\d+)?) ms\s+(\d+(?:\.\d+)?) ms", row)
        if found:
            change, a, b = (float(x) for x in found.groups())
            assert abs((b / a - 1) * 100 - change) < 1.5, row
            seen += 1
    assert seen >= 20
    # AND every figure's change has the sign of its B against its A (never B > A shown as
    # "faster"), in the page too
    for c in cmp.changes:
        if c.tested and "typical" in c.b and c.change is not None:
            assert (c.change > 0) == (c.b["typical"] > c.a["typical"])


def test_no_run_wide_factor_no_word_of_one() -> None:
    # GIVEN four functions: too few to estimate a run-wide factor
    cmp = compare_results(
        profile_doc(10, functions=4, seed=1), profile_doc(10, functions=4, seed=2)
    )
    text = render.to_text(cmp)
    assert cmp.factor is None and "functions (own time; inclusive beside):" in text
    assert "run speed" not in text and "run-wide factor" in " ".join(cmp.notes)


def test_a_function_and_its_path_are_one_regression() -> None:
    # GIVEN c twice slower: its own time and the path main → c both significant
    c_path = ("<module>", "main", "c")
    cmp = compare_results(
        sampled_doc(20, six_stacks(), rate=1000, seed=1),
        sampled_doc(20, six_stacks(), {c_path: 2.0}, rate=1000, seed=2),
    )
    listed = [c for c in cmp.regressions(0.05) if c.file is not None]
    assert {c.figure for c in listed} == {"own", "path"}
    # THEN the verdict counts one regression for c (and the run's time beside it)
    text = cmp.verdict(0.05).text
    assert text.startswith("B is worse: 2 significant regression(s) above 5 %: main → c +")
    assert "; CPU time +" in text and "c (prog.py" not in text
    assert json.loads(render.to_json(cmp))["regressions"] == ["main → c", "CPU time"]


def _edge(caller: tuple[str, str], callee: tuple[str, str], time: float) -> Change:
    """An edge ``caller → callee`` of counted figures; each end ``(file, name)``."""
    figures = {"time": time, "counted": 1.0, "share": 0.1}
    return Change(
        "profile", callee[1], callee[0], 1, "path", figures, dict(figures), 0.0, tested=True,
        path=(caller[1], callee[1]), places=tuple(f"{f}:1:{n}" for f, n in (caller, callee)),
    )  # fmt: skip


def _inclusive(where: tuple[str, str], time: float) -> Change:
    figures = {"time": time, "counted": 1.0, "share": 0.1}
    return Change("profile", where[1], where[0], 1, "inclusive", figures, dict(figures), 0.0)


def test_the_flame_of_edges_tells_apart_functions_of_one_name() -> None:
    # GIVEN callgrind's edges where two modules' <module> share a name: the program's
    # calls main (90 % of the run), json's runs under the import machinery (2 %)
    prog, lib = ("prog.py", "<module>"), ("json/__init__.py", "<module>")
    root, main, load = ("~", "<interpreter>"), ("prog.py", "main"), ("<frozen>", "_find_and_load")
    changes = [
        _edge(root, prog, 100.0), _edge(prog, main, 90.0), _edge(prog, load, 2.5),
        _edge(load, lib, 2.0), _inclusive(root, 100.0), _inclusive(prog, 100.0),
        _inclusive(main, 90.0), _inclusive(load, 2.5), _inclusive(lib, 2.0),
    ]  # fmt: skip

    class Comparison:
        pass

    cmp = Comparison()
    cmp.changes = tuple(changes)  # type: ignore[attr-defined]
    page = flame_html(cmp)
    # THEN main's box is 90 % wide under the program's <module>, the import 2.5 %
    widths = {name: float(w) for w, name in re.findall(r"width:([\d.]+)%[^>]*>([^<]+)<", page)}
    assert widths["main"] == 90.0 and widths["_find_and_load"] == 2.5
    # AND the widths of counted figures are instructions, not time
    assert "width: instructions in B" in page and "A 90 instr, B 90 instr" in page
