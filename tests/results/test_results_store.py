"""Saving and loading results: the schema's checks, each bad file named with its problem,
no overwrite without ``force``, the environment."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from results_data import ENV, memory_doc, profile_doc, timing_doc

from onnxrt_backend_dev.monitoring._errors import BadValue, ResultFormatError
from onnxrt_backend_dev.monitoring._results import environment, payloads, schema, store
from onnxrt_backend_dev.monitoring._results.compare import compare_results


def test_round_trip_keeps_raw_figures(tmp_path: Path) -> None:
    # GIVEN a timing result of 20 batches
    doc = timing_doc(1e-3)
    # WHEN it is saved and loaded back
    path = store.save_result(tmp_path / "t.json", doc)
    back = store.load_result(path)
    # THEN every batch is there, with the schema's header
    assert back == json.loads(json.dumps(doc))
    assert back["schema"] == schema.SCHEMA and back["version"] == schema.VERSION
    assert len(back["data"]["series"][0]["times"]) == 20


def test_save_refuses_an_existing_file_without_force(tmp_path: Path) -> None:
    # GIVEN a saved baseline
    path = tmp_path / "base.json"
    store.save_result(path, timing_doc(1e-3))
    before = path.read_bytes()
    # WHEN another result is saved onto it without force
    with pytest.raises(BadValue, match="exists; pass force=True"):
        store.save_result(path, timing_doc(2e-3))
    # THEN the baseline is unchanged; with force it is replaced
    assert path.read_bytes() == before
    store.save_result(path, timing_doc(2e-3), force=True)
    assert path.read_bytes() != before


def test_saved_file_is_readable_by_others(tmp_path: Path) -> None:
    # GIVEN/WHEN a result saved (through a private temporary file)
    path = Path(store.save_result(tmp_path / "t.json", timing_doc(1e-3)))
    # THEN it has the permissions of an ordinary new file, and no temporary file is left
    assert path.stat().st_mode & 0o044
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def _edit(doc: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    """A copy of ``doc`` with the value at the dotted path ``where`` replaced."""
    doc = copy.deepcopy(doc)
    *parents, last = where.split(".")
    node: Any = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()
_TIMING = timing_doc(1e-3)
_PROFILE = profile_doc(3, functions=4)  # version 2: 4 functions x 3 runs in each column
_MEMORY = memory_doc(1e8, runs=2)
# Saved by version 1 of the schema (the rows layout of profiles) and by version 3 (a
# layout per profiler), kept as written then.
V1 = Path(__file__).parent.parent / "data" / "results"
_PROFILE_V1 = json.loads((V1 / "profile_v1_a.json").read_text(encoding="utf-8"))
# A profile's figures per function; a bad figure of an older file is named where the
# upgraded file holds it (function 2, run 1 of 6 runs).
_FN = "data.function_figures"
_V1_OWN = r"own\[13\] \(function 2, run 1\) .*\(version 1, read as version 4\)"

BAD_DOCS = [
    ("other schema", _edit(_TIMING, "schema", "pyperf"), "not a saved result"),
    (
        "other version",
        _edit(_TIMING, "version", 5),
        "schema version 5, .* reads versions 1, 2, 3 and 4",
    ),
    ("bool version", _edit(_TIMING, "version", True), "schema version True"),
    ("no version", _edit(_TIMING, "version", _DELETE), "schema version None"),
    ("bad kind", _edit(_TIMING, "kind", "weather"), "kind must be one of"),
    ("command not list", _edit(_TIMING, "command", "time x"), "command must be a list"),
    ("no data", _edit(_TIMING, "data", _DELETE), "missing keys data"),
    ("negative time", _edit(_TIMING, "data.series.0.times.3", -1.0), r"times\[3\] must be"),
    ("zero time", _edit(_TIMING, "data.series.0.times.0", 0.0), r"times\[0\] must be"),
    ("string time", _edit(_TIMING, "data.series.0.times.0", "1"), r"times\[0\] must be"),
    ("bool size", _edit(_TIMING, "data.series.0.sizes.0", True), r"sizes\[0\] must be an int"),
    ("short sizes", _edit(_TIMING, "data.series.0.sizes", [100]), "must hold 20 values"),
    ("no series", _edit(_TIMING, "data.series", []), "at least 1 values"),
    ("processes not list", _edit(_TIMING, "data.series.0.processes", 20), r"processes must be a"),
    ("no processes", _edit(_TIMING, "data.series.0.processes", []), r"processes must hold at"),
    ("zero process", _edit(_TIMING, "data.series.0.processes", [20, 0]), r"processes\[1\] must"),
    ("bool process", _edit(_TIMING, "data.series.0.processes", [True] * 20), r"processes\[0\]"),
    ("processes sum", _edit(_TIMING, "data.series.0.processes", [10, 9]), "add up to the 20"),
    ("whole stolen", _edit(_TIMING, "data.series.0.stolen", 1.0), r"stolen must be a share in"),
    ("negative stolen", _edit(_TIMING, "data.series.0.stolen", -0.1), r"stolen must be a fin"),
    ("bool stolen", _edit(_TIMING, "data.series.0.stolen", True), r"stolen must be a finite"),
    ("negative own", _edit(_PROFILE, f"{_FN}.own.7", -5), r"own\[7\] \(function 2, run 1\)"),
    ("float own", _edit(_PROFILE, f"{_FN}.own.0", 0.5), r"own\[0\] .*an int >= 0, got 0.5"),
    ("bool calls", _edit(_PROFILE, f"{_FN}.calls.11", True), r"calls\[11\] \(function 3, run 2\)"),
    ("huge calls", _edit(_PROFILE, f"{_FN}.calls.0", 10**30), r"calls\[0\] .* must be an int"),
    ("float bytes", _edit(_PROFILE, f"{_FN}.alloc_bytes", [0.5] * 12), r"alloc_bytes\[0\]"),
    ("no calls", _edit(_PROFILE, f"{_FN}.calls", _DELETE), f"{_FN}.calls must be a list of ints"),
    ("zero wall", _edit(_PROFILE, "data.wall.0", 0), r"wall\[0\] must be"),
    ("no wall", _edit(_PROFILE, "data.wall", []), "wall must hold at least 1"),
    ("short own", _edit(_PROFILE, f"{_FN}.own", [1]), r"must hold 12 values \(4 functions x 3"),
    ("rows in v2", _edit(_PROFILE_V1, "version", 2), "data.runs is the layout of version 1"),
    ("bad function", _edit(_PROFILE, "data.functions.0", ["f", "1", "g"]), "file, line, name"),
    ("negative line", _edit(_PROFILE, "data.functions.3", ["f", -1, "g"]), r"functions\[3\]"),
    ("profiler", _edit(_PROFILE, "data.profiler", "yappi"), "profiler must be one of"),
    ("v1 negative own", _edit(_PROFILE_V1, "data.runs.1.own.2", -0.5), _V1_OWN),
    ("v1 zero wall", _edit(_PROFILE_V1, "data.runs.0.wall", 0), r"wall\[0\] must be .*version 1"),
    ("v1 short own", _edit(_PROFILE_V1, "data.runs.0.own", [0.1]), "must hold 8 values"),
    ("v1 columns", _edit(_PROFILE_V1, "data.runs", _DELETE), "data.runs must be a list"),
    ("v1 bad function", _edit(_PROFILE_V1, "data.functions.1", ["f", 1]), r"functions\[1\]"),
    ("negative peak", _edit(_MEMORY, "data.channels.cpu.0.peak", -3), r"cpu\[0\].peak must be"),
    ("no channel", _edit(_MEMORY, "data.channels", {}), "at least one channel"),
]


@pytest.mark.parametrize(
    ("doc", "message"), [c[1:] for c in BAD_DOCS], ids=[c[0] for c in BAD_DOCS]
)
def test_bad_documents_name_the_file_and_problem(tmp_path: Path, doc: Any, message: str) -> None:
    # GIVEN a hand-edited result file
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    # WHEN it is loaded THEN one error names the file and what is wrong
    with pytest.raises(ResultFormatError, match=message) as info:
        store.load_result(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


BAD_TEXTS = [
    ("empty", b"", "the file is empty"),
    ("truncated", json.dumps(_TIMING).encode()[:200], "not JSON or truncated"),
    ("nan", json.dumps(_TIMING).replace("100,", "NaN,", 1).encode(), "NaN is not a number"),
    ("infinity", json.dumps(_TIMING).replace("100,", "Infinity,", 1).encode(), "Infinity"),
    ("not utf-8", b"\xff\xfe{", "not UTF-8"),
    ("a list", b"[1, 2]", "must be a JSON object"),
    ("deep", b"[" * 100000 + b"]" * 100000, "nested too deeply|must be a JSON object"),
]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in BAD_TEXTS], ids=[c[0] for c in BAD_TEXTS]
)
def test_bad_texts(tmp_path: Path, text: bytes, message: str) -> None:
    # GIVEN a file that is no result WHEN loaded THEN the error names it
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    with pytest.raises(ResultFormatError, match=message) as info:
        store.load_result(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["profile_v1_a.json", "profile_v1_b.json", "report_v1.json"])
def test_version_1_files_still_load(name: str) -> None:
    # GIVEN a file saved by version 1 of the schema (profiles in rows, one per run)
    # WHEN loaded THEN it is checked and returned in the current layout, its figures kept
    doc = store.load_result(V1 / name)
    assert doc["version"] == schema.VERSION
    profile = doc["data"] if doc["kind"] == "profile" else doc["data"]["profile"]
    assert len(profile["wall"]) == 6 and len(profile["functions"]) == 8
    raw = json.loads((V1 / name).read_text(encoding="utf-8"))["data"]
    first = (raw if doc["kind"] == "profile" else raw["profile"])["runs"][0]
    assert profile["function_figures"]["own"][::6] == first["own"] and profile["unit"] == "s"


def test_version_3_files_load_as_the_table_of_their_figures() -> None:
    # GIVEN the three profile layouts of version 3, saved by `profile --cprofile --repeat`,
    # `profile --repeat` and `run --repeat` (5 runs each)
    def load(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        raw = json.loads((V1 / name).read_text(encoding="utf-8"))
        return raw["data"], store.load_result(V1 / name)["data"]

    # WHEN loaded THEN each is the table the writers save now, its figures as they were
    raw, cprofile = load("cprofile_v3.json")
    assert (cprofile["stacks"], cprofile["stack_figures"]["time"]) == (raw["edges"], raw["edge_ns"])
    assert cprofile["function_figures"]["own"] == raw["own_ns"] and cprofile["unit"] == "ns"
    raw, sampled = load("sampled_v3.json")
    assert (
        sampled["stack_figures"]["cpu"] == raw["stack_cpu_ns"]
        and sampled["stacks"] == raw["stacks"]
    )
    raw, run = load("run_v3.json")
    assert run["profiler"] == "ticks" and run["unit"] == "s" and run["stacks"] == raw["paths"]
    for r, entry in enumerate(raw["runs"]):
        assert run["function_figures"]["own"][r::5] == entry["own"]
        assert run["stack_figures"]["self"][r::5] == entry["path_self"]
        assert run["run_figures"]["peak"][r] == entry["peak"] and run["wall"][r] == entry["wall"]
    # AND each compares with itself, nothing changed
    for name in ("cprofile_v3.json", "sampled_v3.json", "run_v3.json"):
        doc = store.load_result(V1 / name)
        assert not compare_results(doc, doc).regressions(0.05)


def test_version_2_columns_are_nanoseconds_function_major() -> None:
    # GIVEN two runs of two functions
    runs: list[tuple[dict[Any, Any], float]] = [
        ({("m.py", 1, "f"): (1, 2, 0.25, 0.5, {}), ("m.py", 2, "g"): (1, 1, 1e-9, 1e-9, {})}, 1.0),
        ({("m.py", 1, "f"): (1, 3, 0.125, 0.25, {}), ("m.py", 2, "g"): (1, 1, 0.0, 0.0, {})}, 2.0),
    ]
    # WHEN the payload is built THEN function i's run r is at i * 2 + r, in integers
    data = payloads.profile_data(runs)
    assert data["functions"] == [["m.py", 1, "f"], ["m.py", 2, "g"]]
    assert data["wall"] == [1.0, 2.0]
    figures = data["function_figures"]
    assert figures["own"] == [250_000_000, 125_000_000, 1, 0]
    assert figures["inclusive"] == [500_000_000, 250_000_000, 1, 0]
    assert figures["calls"] == [2, 3, 1, 1]
    growth = {**figures, "growth": [0, 0, -64, 0]}  # growth: any sign
    schema.check_profile("data", {**data, "function_figures": growth})
    # AND a figure that is no number is refused before anything is written
    bad: list[tuple[dict[Any, Any], float]] = [({("m.py", 1, "f"): (1, 1, math.nan, 0.0, {})}, 1.0)]
    with pytest.raises(ResultFormatError, match="own figure is not a finite number"):
        payloads.profile_data(bad)


def test_missing_file_and_wrong_kind(tmp_path: Path) -> None:
    # GIVEN a missing file and a timing result
    with pytest.raises(ResultFormatError, match="No such file"):
        store.load_result(tmp_path / "none.json")
    path = store.save_result(tmp_path / "t.json", timing_doc(1e-3))
    # WHEN the timing is loaded as a profile THEN its kind is named
    with pytest.raises(ResultFormatError, match="is a timing result, not a profile one"):
        store.load_result(path, kind="profile")


def test_make_result_refuses_nan_from_the_program() -> None:
    # GIVEN a payload holding NaN WHEN wrapped THEN refused before any file is written
    series = payloads.timing_series("x", [math.nan], [1])
    with pytest.raises(ResultFormatError, match="times"):
        payloads.timing_data([series])
    with pytest.raises(BadValue, match="kind must be one of"):
        store.make_result("weather", {}, [], ENV)


def test_summary_drops_non_finite_values() -> None:
    # GIVEN a summary with NaN WHEN kept beside the raw figures THEN NaN is left out
    series = payloads.timing_series("x", [1.0, 2.0], [1, 1], {"average": 1.5, "bad": math.nan})
    assert series["summary"] == {"average": 1.5}


def test_report_holds_parts() -> None:
    # GIVEN a profile and a memory part WHEN put in a report THEN both are kept, checked
    data = payloads.report_data(profile=_PROFILE["data"], memory=_MEMORY["data"])
    assert set(data) == {"profile", "memory"}
    with pytest.raises(ResultFormatError, match="timing, memory or profile"):
        payloads.report_data()


def test_environment(tmp_path: Path) -> None:
    # GIVEN a cpuinfo file and a folder outside any repository
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nmodel name : Fake CPU @ 1 GHz\n", encoding="utf-8")
    # WHEN the environment is captured THEN the model is read and no commit is invented
    assert environment.cpu_model(str(info)) == "Fake CPU @ 1 GHz"
    assert environment.git_commit(str(tmp_path)) is None
    env = environment.capture(str(tmp_path))
    assert env["python"] and env["package_version"] and env["git_commit"] is None


def test_git_commit_of_a_repository() -> None:
    # GIVEN this repository WHEN asked THEN a 40-digit commit (when git is installed)
    commit = environment.git_commit(str(Path(__file__).parent))
    assert commit is None or len(commit) == 40


def test_git_that_hangs_is_given_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # GIVEN a git that never answers
    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\nexec sleep 30\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    # WHEN the commit is asked with a short timeout THEN None, quickly
    assert environment.git_commit(str(tmp_path), timeout=0.2) is None
