"""Every result writes itself the same way (``_export``): ``result.export(path)``, the
format from the file's suffix in one table, or ``fmt``; bad paths and formats refused in
one line naming them."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA
from results_data import profile_doc

from onnxrt_backend_dev.monitoring import _export
from onnxrt_backend_dev.monitoring._errors import BadType, BadValue


def _report() -> Any:
    from onnxrt_backend_dev.monitoring._report.build import RunFacts, build_report
    from onnxrt_backend_dev.monitoring._report.model import Ending
    from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
    from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

    agg = Aggregator()
    agg.add_stack(
        0, (SampledFrame("<module>", "prog.py", 1, 1), SampledFrame("work", "prog.py", 2, 2))
    )
    for t, mib in ((0.0, 10), (0.1, 60), (0.2, 20)):
        agg.add_tick(t, mib * 2**20, 60 * 2**20, 0)
    return build_report(agg, RunFacts("prog.py", Ending("exit", 0, "exited"), 0.1))


def _spy() -> Any:
    from onnxrt_backend_dev.monitoring._memory.series import Monitor, SpyResult

    mon = Monitor("cpu")
    for t, v in ((0.0, 1e6), (0.1, 5e6), (0.2, 2e6)):
        mon.update(v, v, t)
    return SpyResult(cpu=mon, duration=0.2, marks=[(0.1, "half")], target_exited=False, t0=0.0)


def _sampling() -> Any:
    from onnxrt_backend_dev.monitoring._report.sampling import sample

    return sample(sorted, range(10_000), key=str)


def _comparison() -> Any:
    from onnxrt_backend_dev.monitoring._results.compare import compare_results

    return compare_results(profile_doc(5, functions=3, seed=1), profile_doc(5, functions=3, seed=2))


def _profile() -> Any:
    from onnxrt_backend_dev.monitoring.profiling import profile2graph

    return profile2graph(str(DATA / "cprofile.prof"))[0]


KINDS: dict[str, tuple[Callable[[], Any], list[str]]] = {
    "report": (_report, [".txt", ".json", ".html", ".htm"]),
    "spy": (_spy, [".txt", ".log", ".json", ".csv"]),
    "sampling": (_sampling, [".txt", ".json", ".html", ".speedscope.json", ".collapsed"]),
    "comparison": (_comparison, [".txt", ".json", ".html"]),
    "profile": (_profile, [".txt", ".json", ".html", ".speedscope.json", ".folded"]),
}


def _check(fmt: str, text: str) -> None:
    if fmt == "html":
        assert text.lstrip().lower().startswith("<!doctype html")
    elif fmt in ("json", "speedscope"):
        json.loads(text)
    elif fmt == "csv":
        assert next(csv.reader(io.StringIO(text))) == ["time", "channel", "bytes", "label"]
    elif fmt == "collapsed":
        assert all(line.rsplit(" ", 1)[1].isdigit() for line in text.splitlines())
    else:
        assert not text.lstrip().startswith(("<", "{"))


@pytest.mark.parametrize(
    ("kind", "suffix"), [(k, s) for k, (_, suffixes) in KINDS.items() for s in suffixes]
)
def test_every_result_writes_the_format_its_suffix_names(
    tmp_path: Path, kind: str, suffix: str
) -> None:
    result = KINDS[kind][0]()
    path = tmp_path / f"out{suffix}"
    # WHEN written through the one convention (a method where the kind has one)
    if kind in ("report", "spy", "sampling"):
        fmt = result.export(path)
    else:  # the kinds whose class has no method yet: the same function
        fmt = _export.export(result, path)
    # THEN the format the one table names, and a file of that format
    assert fmt == _export.guess_format(str(path), _export.FORMATS[kind])
    _check(fmt, path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("kind", "path", "fmt", "error", "words"),
    [
        ("report", "out.png", None, BadValue, "out.png': cannot tell the format from its suffix"),
        ("report", "out", None, BadValue, "use one of .txt"),
        ("spy", "out.html", None, BadValue, ".json, .csv"),
        ("report", "out.txt", "csv", BadValue, "fmt must be one of ['html', 'json', 'text']"),
        ("sampling", "out.prof", None, BadValue, ".speedscope.json"),
    ],
)
def test_a_suffix_or_format_the_kind_has_not_is_refused_naming_it(
    tmp_path: Path, kind: str, path: str, fmt: str | None, error: type, words: str
) -> None:
    result = KINDS[kind][0]()
    with pytest.raises(error) as info:
        _export.export(result, tmp_path / path, fmt)
    assert words in str(info.value)
    assert not (tmp_path / path).exists()  # nothing written


def test_what_is_not_a_result_is_refused() -> None:
    with pytest.raises(BadType, match="result must be"):
        _export.export({"a": 1}, "x.json")


def test_one_table_of_suffixes_the_longest_wins() -> None:
    guess = _export.guess_format
    assert guess("x.speedscope.json", ("json", "speedscope")) == "speedscope"
    assert guess("X.JSON", ("json", "speedscope")) == "json"
    assert guess("report", ("text", "html"), default="text") == "text"
    with pytest.raises(BadValue):
        guess("report.pdf", ("text", "html"), default="text")
