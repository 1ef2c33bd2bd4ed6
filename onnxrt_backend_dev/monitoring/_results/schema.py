"""The schema of a saved result, version 3; version 1 and 2 files still load. The
document and each kind's ``data`` are laid out in ``docs/results.rst``; ``data`` holds
the raw figures, never only summaries, so that a comparison has the spread of every side.
Beyond that page, optional keys:

* a timing series: ``"reference"`` (the pytest plugin's: seconds of a fixed piece of
  work timed beside it, the machine's speed of the moment), ``"stolen"`` (the share of
  its wall time other programs took, waiting for a CPU), ``"counter": "instructions"``
  (counted by valgrind: ``times`` are then instructions and may be 0) with its
  ``"noise"`` (instructions per execution);
* a memory run: ``"alloc_peak"``;
* a cProfile profile counted by valgrind: ``"counter": "instructions"`` (instructions in
  place of nanoseconds), ``"total"`` (each whole run's instructions), ``"alloc_calls"``
  and ``"alloc_bytes"`` (each function's calls to the allocators and bytes allocated,
  columns).

Integers parse four times faster than floats and are exact: cProfile counts
nanoseconds. :func:`check_result` raises :class:`ResultFormatError` with the path of the
first bad value (``data.runs[3].own[17] must be ...``, ``data.own_ns[61] (function 3,
run 1) must be ...``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from .._count import COUNTERS
from .._errors import ResultFormatError

SCHEMA = "onnxrt-monitoring-result"
VERSION = 3
# The versions this package reads: 1 differs from 2 in the layout of profiles only; 3
# adds call paths (cProfile's edges, sampled stacks, the run's tree) and the clock.
VERSIONS = (1, 2, 3)
KINDS = ("timing", "memory", "profile", "report", "run")
PROFILERS = ("cprofile", "sampled")
TIMERS = ("wall", "cpu")
SAMPLERS = ("ticks",)
_TOP_KEYS = ("schema", "version", "kind", "created", "command", "environment", "data")
# The columns of a version 2 profile: key, whether required, whether negative values pass.
COLUMNS = (
    ("own_ns", True, False),
    ("cumulative_ns", True, False),
    ("calls", True, False),
    ("memory_bytes", False, True),
    ("alloc_calls", False, False),
    ("alloc_bytes", False, False),
)
# An integer figure above this is no measurement (292 years in nanoseconds).
_MAX_INT = 2**63 - 1


def _fail(where: str, rule: str, value: Any) -> ResultFormatError:
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return ResultFormatError(f"{where} must be {rule}, got {text}")


def _number(where: str, value: Any, positive: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    x = float(value) if ok else math.nan
    if not (math.isfinite(x) and (x > 0 if positive else x >= 0)):
        raise _fail(where, "a finite number " + ("> 0" if positive else ">= 0"), value)
    return x


def _count(where: str, value: Any, minimum: int = 0) -> int:
    if type(value) is not int or value < minimum:
        raise _fail(where, f"an int >= {minimum}", value)
    return value


def _list(where: str, value: Any, length: int | None = None, least: int = 0) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, "a list", value)
    if length is not None and len(value) != length:
        raise ResultFormatError(f"{where} must hold {length} values, got {len(value)}")
    if len(value) < least:
        raise ResultFormatError(f"{where} must hold at least {least} values, got {len(value)}")
    return value


def _choice(where: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _fail(where, f"one of {', '.join(choices)}", value)


def _dict(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    return value


def _all_good(values: list[Any], positive: bool) -> bool:
    """Whether every value is a finite number in bounds, at C speed (map, min, max): a
    20-run 20,000-function profile holds over a million of them."""
    if not values:
        return True
    if not set(map(type, values)) <= {float, int}:  # bool is its own type: refused
        return False
    if any(map(math.isnan, values)):
        return False
    low, high = min(values), max(values)
    return (low > 0 if positive else low >= 0) and high < math.inf


def _numbers(where: str, values: Any, length: int | None, positive: bool = False) -> None:
    values = _list(where, values, length)
    if _all_good(values, positive):
        return
    for i, x in enumerate(values):  # find the first bad one, for the message
        # The fast path: most figures are plain floats.
        if type(x) is float and (x > 0 if positive else x >= 0) and x != math.inf:
            continue
        _number(f"{where}[{i}]", x, positive)


def check_timing(where: str, data: Any) -> None:
    """Checks the ``data`` of a timing result (see the module's description)."""
    series = _list(f"{where}.series", _dict(where, data).get("series"), least=1)
    for i, s in enumerate(series):
        at = f"{where}.series[{i}]"
        s = _dict(at, s)
        if not isinstance(s.get("name"), str):
            raise _fail(f"{at}.name", "a str", s.get("name"))
        times = _list(f"{at}.times", s.get("times"), least=1)
        counted = _counter(at, s)
        _numbers(f"{at}.times", times, None, positive=not counted)
        sizes = _list(f"{at}.sizes", s.get("sizes"), len(times))
        for j, n in enumerate(sizes):
            _count(f"{at}.sizes[{j}]", n, 1)
        if "processes" in s:
            _check_processes(f"{at}.processes", s["processes"], len(times))
        if "summary" in s:
            _dict(f"{at}.summary", s["summary"])
        _choice(f"{at}.clock", s.get("clock", "wall"), TIMERS)
        if "reference" in s:
            _number(f"{at}.reference", s["reference"], positive=True)
        if "stolen" in s and _number(f"{at}.stolen", s["stolen"]) >= 1:
            raise _fail(f"{at}.stolen", "a share in [0, 1)", s["stolen"])


def _counter(where: str, data: dict[str, Any]) -> bool:
    """The optional ``counter`` (instructions counted by valgrind, not time) and its
    ``noise``; whether there is one."""
    if "counter" not in data:
        return False
    _choice(f"{where}.counter", data["counter"], COUNTERS)
    if "noise" in data:
        _number(f"{where}.noise", data["noise"])
    return True


def _check_processes(where: str, value: Any, batches: int) -> None:
    """The batches each process timed: counts >= 1 adding up to the batches."""
    counts = _list(where, value, least=1)
    for j, k in enumerate(counts):
        _count(f"{where}[{j}]", k, 1)
    if sum(counts) != batches:
        raise ResultFormatError(
            f"{where} must add up to the {batches} batches of the series, got {sum(counts)}"
        )


def check_memory(where: str, data: Any) -> None:
    """Checks the ``data`` of a memory result."""
    channels = _dict(f"{where}.channels", _dict(where, data).get("channels"))
    if not channels:
        raise ResultFormatError(f"{where}.channels must name at least one channel, got none")
    for name, runs in channels.items():
        runs = _list(f"{where}.channels.{name}", runs, least=1)
        for i, run in enumerate(runs):
            at = f"{where}.channels.{name}[{i}]"
            run = _dict(at, run)
            for key in ("peak", "begin"):
                _number(f"{at}.{key}", run.get(key))
            for key in ("end", "mean", "alloc_peak"):
                if key in run:
                    _number(f"{at}.{key}", run[key])


def _check_function(at: str, f: Any) -> None:
    ok = (
        isinstance(f, list)
        and len(f) == 3
        and isinstance(f[0], str)
        and type(f[1]) is int
        and f[1] >= 0
        and isinstance(f[2], str)
    )
    if not ok:
        raise _fail(at, "[file, line, name]", f)


def _check_functions(where: str, functions: list[Any]) -> None:
    """Each function is ``[file, line, name]``: checked in bulk (map, set, min), then
    one by one only to name the first bad one."""
    line = itemgetter(1)
    ok = (
        set(map(type, functions)) <= {list}
        and set(map(len, functions)) <= {3}
        and set(map(type, map(itemgetter(0), functions))) <= {str}
        and set(map(type, map(line, functions))) <= {int}
        and min(map(line, functions), default=0) >= 0
        and set(map(type, map(itemgetter(2), functions))) <= {str}
    )
    if not ok:
        for i, f in enumerate(functions):
            _check_function(f"{where}[{i}]", f)
    _cut_names(functions)


# Characters of a function's file or name kept (a real one is far shorter): a longer one,
# from a file made by hand or by an attacker, is cut where it is read, so that no output
# prints megabytes of it.
MAX_NAME = 1000


def _cut_names(functions: list[Any]) -> None:
    longest = max((max(len(f[0]), len(f[2])) for f in functions), default=0)
    if longest <= MAX_NAME:
        return
    for f in functions:
        for j in (0, 2):
            if len(f[j]) > MAX_NAME:
                f[j] = f[j][:MAX_NAME] + "…"


def _profile_header(where: str, data: Any) -> tuple[dict[str, Any], int]:
    """The keys both layouts share; returns the data and its number of functions."""
    data = _dict(where, data)
    _choice(f"{where}.profiler", data.get("profiler"), PROFILERS)
    functions = _list(f"{where}.functions", data.get("functions"))
    _check_functions(f"{where}.functions", functions)
    _choice(f"{where}.timer", data.get("timer", "wall"), TIMERS)
    if "main" in data and not isinstance(data["main"], str):
        raise _fail(f"{where}.main", "a str", data["main"])
    return data, len(functions)


def _check_rows(where: str, data: dict[str, Any], n: int) -> None:
    """Version 1: one object per run, its lists aligned with the functions."""
    runs = _list(f"{where}.runs", data.get("runs"), least=1)
    for i, run in enumerate(runs):
        at = f"{where}.runs[{i}]"
        run = _dict(at, run)
        _number(f"{at}.wall", run.get("wall"), positive=True)
        for key in ("own", "cumulative", "calls"):
            _numbers(f"{at}.{key}", run.get(key), n)
        if "memory" in run:  # growth may be negative: a function that frees
            _signed(f"{at}.memory", run["memory"], n)


def _integers(where: str, values: Any, runs: int, negative: bool) -> None:
    """A column of ``functions x runs`` integers; the first bad one is named with its
    function and run."""
    if not isinstance(values, list):
        raise _fail(where, "a list of ints", values)
    if values and set(map(type, values)) <= {int}:  # bool is its own type: refused
        low, high = min(values), max(values)
        if (negative or low >= 0) and max(high, -low) <= _MAX_INT:
            return
    rule = "an int" if negative else "an int >= 0"
    for k, x in enumerate(values):
        if type(x) is not int or not (negative or x >= 0) or abs(x) > _MAX_INT:
            raise _fail(f"{where}[{k}] (function {k // runs}, run {k % runs})", rule, x)


def _column(where: str, values: Any, rows: int, what: str, runs: int, negative: bool) -> None:
    """A column of ``rows x runs`` integers, row-major."""
    if isinstance(values, list) and len(values) != rows * runs:
        raise ResultFormatError(
            f"{where} must hold {rows * runs} values ({rows} {what} x {runs} runs), "
            f"got {len(values)}"
        )
    _integers(where, values, runs, negative)


def _check_columns(where: str, data: dict[str, Any], n: int) -> None:
    """Version 2: one flat list of integers per figure, function-major."""
    if "runs" in data:
        raise ResultFormatError(
            f"{where}.runs is the layout of version 1; a version 2 profile holds wall, "
            "own_ns, cumulative_ns and calls"
        )
    walls = _list(f"{where}.wall", data.get("wall"), least=1)
    _numbers(f"{where}.wall", walls, None, positive=True)
    runs = len(walls)
    for key, required, negative in COLUMNS:
        if key not in data and not required:
            continue
        _column(f"{where}.{key}", data.get(key), n, "functions", runs, negative)


def _check_paths(where: str, paths: Any, n: int, least: int) -> list[Any]:
    """Lists of function indices (``least`` to 1024 of them), each in ``[0, n)``."""
    paths = _list(where, paths)
    for i, path in enumerate(paths):
        ok = (
            isinstance(path, list)
            and least <= len(path) <= 1024
            and set(map(type, path)) <= {int}
            and (not path or (min(path) >= 0 and max(path) < n))
        )
        if not ok:
            raise _fail(f"{where}[{i}]", f"{least} to 1024 indices of functions (< {n})", path)
    return paths


def _check_edges(where: str, data: dict[str, Any], n: int) -> None:
    """Version 3's edges of a cProfile profile (optional)."""
    if "edges" not in data:
        return
    edges = _check_paths(f"{where}.edges", data["edges"], n, 2)
    if any(len(e) != 2 for e in edges):
        raise ResultFormatError(f"{where}.edges must be pairs [caller, callee]")
    _column(f"{where}.edge_ns", data.get("edge_ns"), len(edges), "edges", len(data["wall"]), False)


SAMPLED_COLUMNS = ("stack_wall_ns", "stack_cpu_ns", "stack_samples")


def _check_sampled(where: str, data: dict[str, Any], n: int) -> None:
    """A sampling profiler's stacks and their figures per run (version 3)."""
    _number(f"{where}.interval", data.get("interval"), positive=True)
    if not isinstance(data.get("sampler", ""), str):
        raise _fail(f"{where}.sampler", "a str", data.get("sampler"))
    stacks = _check_paths(f"{where}.stacks", data.get("stacks"), n, 1)
    walls = _list(f"{where}.wall", data.get("wall"), least=1)
    _numbers(f"{where}.wall", walls, None, positive=True)
    runs = len(walls)
    for key in SAMPLED_COLUMNS:
        _column(f"{where}.{key}", data.get(key), len(stacks), "stacks", runs, False)


def check_profile(where: str, data: Any, version: int = VERSION) -> None:
    """Checks the ``data`` of a profile result, in the layout of ``version``."""
    data, n = _profile_header(where, data)
    if data["profiler"] == "sampled":
        if version < 3:
            raise ResultFormatError(f"{where}.profiler 'sampled' needs version 3, got {version}")
        _check_sampled(where, data, n)
    elif version == 1:
        _check_rows(where, data, n)
    else:
        _check_columns(where, data, n)
        _check_edges(where, data, n)
        if _counter(where, data):
            _numbers(f"{where}.total", data.get("total"), len(data["wall"]))


def check_report(where: str, data: Any, version: int = VERSION) -> None:
    """Checks the ``data`` of a report: its timing, memory and profile parts."""
    data = _dict(where, data)
    parts = [k for k in ("timing", "memory", "profile") if k in data]
    if not parts:
        raise ResultFormatError(f"{where} must hold timing, memory or profile, got none")
    for part in parts:
        _check_data(part, f"{where}.{part}", data[part], version)


def _signed(where: str, values: Any, length: int) -> None:
    """Finite numbers of any sign (memory growth: a function may free)."""
    values = _list(where, values, length)
    if values and set(map(type, values)) <= {float, int} and all(map(math.isfinite, values)):
        return
    for j, x in enumerate(values):
        if not (isinstance(x, (int, float)) and math.isfinite(x)) or isinstance(x, bool):
            raise _fail(f"{where}[{j}]", "a finite number", x)


def _check_run_entry(at: str, run: Any, n: int, paths: int | None = None) -> None:
    run = _dict(at, run)
    _number(f"{at}.wall", run.get("wall"), positive=True)
    for key in ("peak", "start", "end"):
        _number(f"{at}.{key}", run.get(key))
    if "cpu" in run:
        _number(f"{at}.cpu", run["cpu"])
    if "exit" in run and type(run["exit"]) is not int:
        raise _fail(f"{at}.exit", "an int", run["exit"])
    for key in ("own", "cumulative"):
        _numbers(f"{at}.{key}", run.get(key), n)
    if "own_cpu" in run:
        _numbers(f"{at}.own_cpu", run["own_cpu"], n)
    for key in ("growth", "to_peak"):
        _signed(f"{at}.{key}", run.get(key), n)
    if paths is not None:
        _numbers(f"{at}.path_time", run.get("path_time"), paths)
        if "path_self" in run:
            _numbers(f"{at}.path_self", run["path_self"], paths)


def check_run(where: str, data: Any) -> None:
    """Checks the ``data`` of a ``run`` result (see the module's description)."""
    data = _dict(where, data)
    _choice(f"{where}.sampler", data.get("sampler"), SAMPLERS)
    _number(f"{where}.interval", data.get("interval"), positive=True)
    if "main" in data and not isinstance(data["main"], str):
        raise _fail(f"{where}.main", "a str", data["main"])
    functions = _list(f"{where}.functions", data.get("functions"))
    for i, f in enumerate(functions):
        _check_function(f"{where}.functions[{i}]", f)
    paths = None
    if "paths" in data:
        paths = len(_check_paths(f"{where}.paths", data["paths"], len(functions), 1))
    runs = _list(f"{where}.runs", data.get("runs"), least=1)
    for i, run in enumerate(runs):
        _check_run_entry(f"{where}.runs[{i}]", run, len(functions), paths)


def _check_data(kind: str, where: str, data: Any, version: int = VERSION) -> None:
    """Checks the payload of a result of ``kind`` in the layout of ``version``."""
    if kind == "timing":
        check_timing(where, data)
    elif kind == "memory":
        check_memory(where, data)
    elif kind == "profile":
        check_profile(where, data, version)
    elif kind == "run":
        check_run(where, data)
    else:
        check_report(where, data, version)


def check_result(doc: Any) -> dict[str, Any]:
    """Checks a loaded document against the schema.

    :param doc: what ``json.load`` returned
    :return: the document, unchanged
    :raises ResultFormatError: the first problem, with where it is
    """
    if not isinstance(doc, Mapping):
        raise _fail("the file", "a JSON object", type(doc).__name__)
    if doc.get("schema") != SCHEMA:
        raise ResultFormatError(
            f"not a saved result (schema {doc.get('schema')!r}, expected {SCHEMA!r})"
        )
    version = doc.get("version")
    if type(version) is not int or version not in VERSIONS:
        raise ResultFormatError(
            f"schema version {version!r}, this version of the package reads versions "
            f"{', '.join(map(str, VERSIONS[:-1]))} and {VERSIONS[-1]}"
        )
    missing = [k for k in _TOP_KEYS if k not in doc]
    if missing:
        raise ResultFormatError(f"missing keys {', '.join(missing)}")
    _choice("kind", doc["kind"], KINDS)
    if not isinstance(doc["command"], list) or not all(isinstance(c, str) for c in doc["command"]):
        raise _fail("command", "a list of str", doc["command"])
    _dict("environment", doc["environment"])
    _check_data(doc["kind"], "data", doc["data"], version)
    return dict(doc)
