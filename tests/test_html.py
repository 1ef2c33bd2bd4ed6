"""One escaping layer for every HTML page (``_html``): a hostile name, file, title or
note given to each HTML renderer of the package never becomes markup or script."""

from __future__ import annotations

import json
import marshal
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from results_data import profile_doc

from onnxrt_backend_dev.monitoring import _html

# Ends a script element, opens a comment, adds an element with a handler, breaks a line
# of JavaScript, and closes quotes of both kinds.
HOSTILE = "</script><!--<img src=x onerror=alert(1)>\u2028\u2029'\"&<svg onload=alert(2)>"


def _sampled_page(name: str) -> str:
    from onnxrt_backend_dev.monitoring._sampling.model import SampledProfile, ThreadProfile
    from onnxrt_backend_dev.monitoring._sampling.render_html import to_html
    from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

    main, evil = SampledFrame("main", "/app.py", 1, 2), SampledFrame(name, name, 3, 4)
    thread = ThreadProfile(1, name, True, {0: [1.0, 1.0, 10]}, [(0.0, 1.0, 0)])
    return to_html(SampledProfile([(main, evil)], [thread], 0.002, name, 1.0, 1.0, 10, [name]))


def _profile_page(view: str) -> Callable[[str], str]:
    def page(name: str) -> str:
        from pstats import Stats

        from onnxrt_backend_dev.monitoring.profiling import profile2graph, to_html

        main, evil = ("prog.py", 1, "main"), (name, 5, name)
        stats = {main: (1, 1, 0.5, 2.0, {}), evil: (3, 3, 1.5, 1.5, {main: (3, 3, 1.5, 1.5)})}
        path = Path(page.folder) / "p.prof"  # type: ignore[attr-defined]
        path.write_bytes(marshal.dumps(stats))
        return to_html(profile2graph(Stats(str(path)))[0], title=name, view=view)

    return page


def _report_page(name: str) -> str:
    from onnxrt_backend_dev.monitoring._report.build import RunFacts, build_report
    from onnxrt_backend_dev.monitoring._report.model import Ending
    from onnxrt_backend_dev.monitoring._report.render_html import to_html
    from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
    from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

    agg = Aggregator()
    agg.add_stack(0, (SampledFrame("<module>", name, 1, 1), SampledFrame(name, name, 2, 2)))
    for t, mib in ((0.0, 10), (0.1, 60), (0.2, 20)):
        agg.add_tick(t, mib * 2**20, 60 * 2**20, 0)
    facts = RunFacts(
        program=name, ending=Ending("exit", 0, name), interval=0.1, cpu=0.1, wall=0.2,
        notes=[name], curves=[(name, [0.0, 0.2], [0.0, 1.0], name)],
    )  # fmt: skip
    return to_html(build_report(agg, facts))


def _compare_page(name: str) -> str:
    from onnxrt_backend_dev.monitoring._results import render
    from onnxrt_backend_dev.monitoring._results.compare import compare_results

    a = profile_doc(8, functions=3, seed=1, file=name)
    b = profile_doc(8, functions=3, slow={1: 1.5}, seed=2, file=name)
    return render.to_html(compare_results(a, b, (name, name)))


PAGES: dict[str, Callable[[str], str]] = {
    "profile tree": _profile_page("tree"),
    "profile reference forest": _profile_page("reference"),
    "sampled profile": _sampled_page,
    "run report": _report_page,
    "compare": _compare_page,
}


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>", page, re.I)


@pytest.mark.parametrize("kind", list(PAGES))
def test_a_hostile_name_is_text_on_every_page(kind: str, tmp_path: Path) -> None:
    render = PAGES[kind]
    render.folder = str(tmp_path)  # type: ignore[attr-defined]
    page, plain = render(HOSTILE), render("plain_name")
    # THEN no element, comment or script of the name: the page's own ones only
    assert _scripts(page) == _scripts(plain)
    assert page.count("<!--") == plain.count("<!--")
    for markup in ("<img", "<svg onload", "</script><"):
        assert markup not in page, (kind, markup)
    # AND no line terminator inside a script (harmless in text, it ends a JS line)
    for body in re.findall(r"<script\b[^>]*>(.*?)</script>", page, re.S | re.I):
        assert "\u2028" not in body and "\u2029" not in body, kind
    # AND the name is there, escaped (in the text, or in the data of the page's script)
    assert _html.text("<img src=x onerror=alert(1)>") in page or (
        "\\u003cimg src=x onerror=alert(1)\\u003e" in page
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("</script>", '"\\u003c/script\\u003e"'),
        ("<!--", '"\\u003c!--"'),
        ("a\u2028b\u2029", '"a\\u2028b\\u2029"'),
        ({"k": "&"}, '{"k": "\\u0026"}'),
    ],
)
def test_script_json_cannot_end_its_script(data: Any, expected: str) -> None:
    text = _html.script_json(data)
    assert text == expected and json.loads(text) == data


def test_script_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="JSON"):
        _html.script_json(float("nan"))


def test_text_escapes_quotes_for_attributes() -> None:
    assert _html.text("'\"<&>") == "&#x27;&quot;&lt;&amp;&gt;"
