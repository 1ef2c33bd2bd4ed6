"""The renderers of a comparison: text sorted by significance and size, JSON fields, HTML
escaped and coloured only where significant."""

from __future__ import annotations

import html
import json
import re

from results_data import profile_doc, timing_doc

from onnxrt_backend_dev.monitoring._results import render
from onnxrt_backend_dev.monitoring._results.compare import compare_results


def _slow_profile():  # type: ignore[no-untyped-def]
    return compare_results(
        profile_doc(20, seed=1),
        profile_doc(20, slow={7: 1.1, 9: 0.8}, seed=2),
        ("a.json", "b.json"),
    )


def test_text_puts_significant_changes_first() -> None:
    # GIVEN f_007 10 % slower and f_009 20 % faster WHEN rendered as text
    text = render.to_text(_slow_profile(), top=5)
    rows = [line for line in text.splitlines() if "prog.py" in line]
    # THEN f_009 (more share points moved) then f_007, both starred, in the '+x % ± y' form
    assert "f_009" in rows[0] and "f_007" in rows[1]
    assert re.search(r"\+\d+\.\d % ± \d+\.\d  \*", rows[1])
    assert re.search(r"-\d+\.\d % ± \d+\.\d  \*", rows[0])
    assert "more, none significant" in text and "2 significant change(s): 1 worse, 1 better" in text


def test_json_has_one_entry_per_function() -> None:
    # GIVEN the comparison WHEN rendered as JSON
    doc = json.loads(render.to_json(_slow_profile(), regressions=[]))
    entries = [e for e in doc["entries"] if e["figure"] == "share"]
    # THEN each function has the documented fields, significant as a bool
    assert len(entries) == 50 and doc["correction"] == "holm" and doc["regressions"] == []
    for e in entries:
        assert {"function", "file", "line", "a", "b", "change", "ci_low", "ci_high"} <= set(e)
        assert isinstance(e["significant"], bool)
    f7 = next(e for e in entries if e["function"] == "f_007")
    assert f7["significant"] and f7["ci_low"] < f7["change"] < f7["ci_high"]
    assert f7["a"]["share"] < f7["b"]["share"]


def test_html_is_escaped_and_coloured_where_significant() -> None:
    # GIVEN a function whose name and file hold markup
    a = profile_doc(20, functions=3, seed=1, file="<script>alert(1)</script>.py")
    b = profile_doc(20, functions=3, slow={1: 1.5}, seed=2, file="<script>alert(1)</script>.py")
    page = render.to_html(compare_results(a, b, ("<a>", "b&")))
    # THEN no markup of the file reaches the page, and only the significant rows coloured
    assert "<script>" not in page and html.escape("<script>alert(1)</script>.py") in page
    assert "&lt;a&gt;" in page and "b&amp;" in page
    coloured = re.findall(r'<tr class="(worse|better)">', page)
    assert coloured and len(coloured) == sum(
        1 for c in compare_results(a, b).changes if c.significant
    )


def test_untested_change_has_no_interval() -> None:
    # GIVEN one run a side WHEN shown THEN '+x %' with no '±', and the verdict says why
    cmp = compare_results(timing_doc(1e-3, batches=1), timing_doc(2e-3, batches=1))
    text = render.to_text(cmp)
    assert "+100.0 %" in text and "±" not in text
    assert "significance not judged" in text
