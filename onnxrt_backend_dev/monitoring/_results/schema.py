"""The schema of a saved result, version 4 (``docs/results.rst``); files of versions 1 to
3 are brought to it as they are read (:func:`upgrade`). ``data`` holds the raw figures,
never only summaries, so that a comparison has the spread of every side. A profile and a
``run`` save one layout, the profile table (:func:`check_profile`): interned functions
and stacks, each run's wall time, named columns of figures per run, function and stack,
integers where ``unit`` is ``ns`` (exact, and parsed four times faster than floats:
cProfile and the sampler count nanoseconds), seconds where it is ``s`` (a ``run``'s
ticks). Beyond that page, optional keys:

* a timing series: ``"reference"`` (the pytest plugin's: seconds of a fixed piece of
  work timed beside it, the machine's speed of the moment), ``"stolen"`` (the share of
  its wall time other programs took, waiting for a CPU), ``"counter": "instructions"``
  (counted by valgrind: ``times`` are then instructions and may be 0) with its
  ``"noise"`` (instructions per execution);
* a memory run: ``"alloc_peak"``;
* a cProfile profile counted by valgrind: ``"counter": "instructions"`` (instructions in
  place of nanoseconds), the run figure ``total`` (each run's), the function figures
  ``alloc_calls`` and ``alloc_bytes`` (calls to the allocators, bytes allocated).

:func:`check_result` raises :class:`ResultFormatError` with the path of the first bad
value (``data.function_figures.own[61] (function 3, run 1) must be ...``).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from .._count import COUNTERS
from .._errors import ResultFormatError

SCHEMA = "onnxrt-monitoring-result"
VERSION = 4
# The versions this package reads: 1 differs from 2 in the layout of profiles only; 3
# adds call paths (cProfile's edges, sampled stacks, the run's tree) and the clock; 4
# saves every profile and run in one table. 1 to 3 are upgraded as they are read.
VERSIONS = (1, 2, 3, 4)
KINDS = ("timing", "memory", "profile", "report", "run")
# A profile's profilers; a run's figures are its report's ticks.
PROFILERS = ("cprofile", "sampled")
TICKS = ("ticks",)
TIMERS = ("wall", "cpu")
UNITS = ("ns", "s")
_TOP_KEYS = ("schema", "version", "kind", "created", "command", "environment", "data")
# The columns each profiler's table holds at least.
REQUIRED: dict[str, dict[str, tuple[str, ...]]] = {
    "cprofile": {"function_figures": ("own", "inclusive", "calls")},
    "sampled": {"stack_figures": ("wall", "cpu", "samples")},
    "ticks": {
        "run_figures": ("peak", "start", "end"),
        "function_figures": ("own", "inclusive", "growth", "to_peak"),
    },
}
# Figures of any sign: memory growth (a function may free).
SIGNED = ("growth", "to_peak")
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


def _all_good(values: list[Any], positive: bool, signed: bool = False, ints: bool = False) -> bool:
    """Whether every value is a finite number (an int below :data:`_MAX_INT` where
    ``ints``) in bounds, at C speed (map, min, max): a 20-run 20,000-function profile
    holds over a million of them."""
    if not values:
        return True
    kinds = set(map(type, values))
    if not kinds <= ({int} if ints else {float, int}):  # bool is its own type: refused
        return False
    with contextlib.suppress(OverflowError):  # an int too large for a float
        if float not in kinds or not any(map(math.isnan, values)):
            low, high = min(values), max(values)
            bound = max(high, -low) <= _MAX_INT if ints else max(high, -low) < math.inf
            return bound and (signed or (low > 0 if positive else low >= 0))
    return False


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
    if not ok:  # one by one, to name the first bad one
        for i, f in enumerate(functions):
            if not (isinstance(f, list) and list(map(type, f)) == [str, int, str] and f[1] >= 0):
                raise _fail(f"{where}[{i}]", "[file, line, name]", f)
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


def _figures(
    where: str, values: Any, rows: tuple[int, str], runs: int, unit: str, signed: bool
) -> None:
    """A row-major column of ``rows x runs`` ints (``unit`` ``ns``) or finite numbers,
    ``>= 0`` unless ``signed``; the first bad one named with its row and run."""
    count, what = rows
    integers = unit == "ns"
    if not isinstance(values, list):
        raise _fail(where, "a list of " + ("ints" if integers else "numbers"), values)
    if len(values) != count * runs:
        raise ResultFormatError(
            f"{where} must hold {count * runs} values ({count} {what} x {runs} runs), "
            f"got {len(values)}"
        )
    if _all_good(values, False, signed, integers):
        return
    rule = ("an int" if integers else "a finite number") + ("" if signed else " >= 0")
    allowed, bound = ({int}, _MAX_INT + 1) if integers else ({int, float}, math.inf)
    for k, x in enumerate(values):
        if not (type(x) in allowed and (signed or x >= 0) and abs(x) < bound):
            at = f"{where}[{k}] ({what[:-1]} {k // runs}, run {k % runs})"
            raise _fail(at, rule, x)


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


def _check_runs(where: str, data: dict[str, Any], needed: tuple[str, ...]) -> int:
    """Each run's wall seconds and figures (exit codes, numbers >= 0); its runs."""
    walls = _list(f"{where}.wall", data.get("wall"), least=1)
    _numbers(f"{where}.wall", walls, None, positive=True)
    figures = _dict(f"{where}.run_figures", data.get("run_figures", {}))
    for name in dict.fromkeys((*needed, *figures)):
        at = f"{where}.run_figures.{name}"
        values = _list(at, figures.get(name), len(walls))
        if name != "exit":
            _numbers(at, values, None)
            continue
        for r, code in enumerate(values):
            if type(code) is not int:
                raise _fail(f"{at}[{r}]", "an int", code)
    return len(walls)


def check_profile(where: str, data: Any, profilers: tuple[str, ...] = PROFILERS) -> None:
    """Checks a profile table: the ``data`` of a profile, or of a run (``ticks``).

    :param where: its path in the document, for messages
    :param data: the payload
    :param profilers: the profilers its kind admits
    :raises ResultFormatError: the first problem, with where it is
    """
    data = _dict(where, data)
    _choice(f"{where}.profiler", data.get("profiler"), profilers)
    profiler = data["profiler"]
    _choice(f"{where}.timer", data.get("timer", "wall"), TIMERS)
    _choice(f"{where}.unit", data.get("unit"), UNITS)
    for key in ("main", "sampler"):
        if key in data and not isinstance(data[key], str):
            raise _fail(f"{where}.{key}", "a str", data[key])
    if profiler != "cprofile":
        _number(f"{where}.interval", data.get("interval"), positive=True)
    functions = _list(f"{where}.functions", data.get("functions"))
    _check_functions(f"{where}.functions", functions)
    edges = profiler == "cprofile"  # cProfile's paths are its edges: [caller, callee]
    stacks = _check_paths(f"{where}.stacks", data.get("stacks"), len(functions), 1 + edges)
    if edges and any(len(s) != 2 for s in stacks):
        raise ResultFormatError(f"{where}.stacks of cProfile must be pairs [caller, callee]")
    needed = dict(REQUIRED[profiler])
    if edges and stacks:  # saved edges have their times
        needed["stack_figures"] = ("time",)
    counted = ("total",) if _counter(where, data) else ()
    runs = _check_runs(where, data, needed.get("run_figures", ()) + counted)
    rows = {"function_figures": (len(functions), "functions")}
    rows["stack_figures"] = (len(stacks), "stacks")
    for table, counted_rows in rows.items():
        columns = _dict(f"{where}.{table}", data.get(table, {}))
        for name in dict.fromkeys((*needed.get(table, ()), *columns)):
            at, values = f"{where}.{table}.{name}", columns.get(name)
            _figures(at, values, counted_rows, runs, data["unit"], name in SIGNED)


def check_report(where: str, data: Any) -> None:
    """Checks the ``data`` of a report: its timing, memory and profile parts."""
    data = _dict(where, data)
    parts = [k for k in ("timing", "memory", "profile") if k in data]
    if not parts:
        raise ResultFormatError(f"{where} must hold timing, memory or profile, got none")
    for part in parts:
        _check_data(part, f"{where}.{part}", data[part])


def _check_data(kind: str, where: str, data: Any) -> None:
    """Checks the payload of a result of ``kind``."""
    if kind == "timing":
        check_timing(where, data)
    elif kind == "memory":
        check_memory(where, data)
    elif kind in ("profile", "run"):
        check_profile(where, data, PROFILERS if kind == "profile" else TICKS)
    else:
        check_report(where, data)


# Where versions 2 and 3 kept what version 4 holds in its tables: (table, name).
_MOVED = {
    "own_ns": ("function_figures", "own"),
    "cumulative_ns": ("function_figures", "inclusive"),
    "calls": ("function_figures", "calls"),
    "alloc_calls": ("function_figures", "alloc_calls"),
    "alloc_bytes": ("function_figures", "alloc_bytes"),
    "edge_ns": ("stack_figures", "time"),
    "stack_wall_ns": ("stack_figures", "wall"),
    "stack_cpu_ns": ("stack_figures", "cpu"),
    "stack_samples": ("stack_figures", "samples"),
    "total": ("run_figures", "total"),
}
# Keys of a version 1 profile's rows and of a version 3 run's entries, one per run (the
# optional ones kept where every run has them), and their names in version 4.
_ROWS = {
    "profile": ("own", "cumulative", "calls"),
    "run": ("own", "own_cpu", "cumulative", "growth", "to_peak"),
    "run_figures": ("peak", "start", "end", "cpu", "exit"),
    "stack_figures": ("path_time", "path_self"),
}
_OPTIONAL = ("own_cpu", "cpu", "path_self")
_RENAMED = {"cumulative": "inclusive", "path_time": "time", "path_self": "self"}


def _rows(where: str, runs: list[Any], keys: tuple[str, ...], n: int | None) -> dict[str, Any]:
    """The figures of one object per run as columns: each key's ``n`` values a run
    row-major (``i * runs + r``), or its one value a run when ``n`` is None."""
    columns = {}
    for key in keys:
        if key in _OPTIONAL and not all(key in run for run in runs):
            continue
        if n is None:  # a run without an exit code exited with 0
            columns[key] = [run.get(key, 0 if key == "exit" else None) for run in runs]
            continue
        rows = [_list(f"{where}[{r}].{key}", run.get(key), n) for r, run in enumerate(runs)]
        values = itertools.chain.from_iterable(zip(*rows, strict=True))
        columns[_RENAMED.get(key, key)] = list(values)
    return columns


def upgrade(where: str, kind: str, data: Any, version: int) -> Any:
    """A payload of an older version in the layout of :data:`VERSION`, its figures as
    they were (checked after): one step from any of versions 1 to 3.

    :param where: its path in the document, for messages
    :param kind: the result's kind
    :param data: the payload as read
    :param version: the file's version
    :return: the payload in the current layout (a timing or memory payload as it is)
    :raises ResultFormatError: its shape is not that of its version
    """
    if kind == "report" and isinstance(data, dict) and "profile" in data:
        return {**data, "profile": upgrade(f"{where}.profile", "profile", data["profile"], version)}
    if kind not in ("profile", "run"):
        return data
    data = _dict(where, data)
    rows = kind == "run" or (version == 1 and data.get("profiler") == "cprofile")
    if "runs" in data and not rows:
        raise ResultFormatError(
            f"{where}.runs is the layout of version 1; a version {version} profile holds "
            "wall, own_ns, cumulative_ns and calls"
        )
    moved = {*_MOVED, "edges", "runs", "paths"} | ({"sampler"} if kind == "run" else set())
    out = {k: v for k, v in data.items() if k not in moved}
    out.update(unit="ns", stacks=data.get("edges", data.get("stacks", [])))
    for key, (table, name) in _MOVED.items():
        if key in data:
            out.setdefault(table, {})[name] = data[key]
    if not rows:
        return out
    runs = _list(f"{where}.runs", data.get("runs"), least=1)
    runs = [_dict(f"{where}.runs[{r}]", run) for r, run in enumerate(runs)]
    n = len(_list(f"{where}.functions", data.get("functions")))
    out.update(unit="s", wall=[run.get("wall") for run in runs])
    out["function_figures"] = _rows(f"{where}.runs", runs, _ROWS[kind], n)
    if kind == "run":
        _choice(f"{where}.sampler", data.get("sampler"), TICKS)
        out.update(profiler="ticks", timer="wall", stacks=data.get("paths", []))
        out["run_figures"] = _rows(f"{where}.runs", runs, _ROWS["run_figures"], None)
        paths = len(_list(f"{where}.paths", out["stacks"])) if "paths" in data else None
        keys = _ROWS["stack_figures"] if paths is not None else ()
        out["stack_figures"] = _rows(f"{where}.runs", runs, keys, paths)
    return out


def check_result(doc: Any) -> dict[str, Any]:
    """Checks a loaded document against the schema, an older version brought to the
    current one (:func:`upgrade`).

    :param doc: what ``json.load`` returned
    :return: the document, in the layout of :data:`VERSION`
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
    data = doc["data"] if version == VERSION else upgrade("data", doc["kind"], doc["data"], version)
    try:
        _check_data(doc["kind"], "data", data)
    except ResultFormatError as e:  # an older file's named where the upgraded one holds it
        if version == VERSION:
            raise
        raise ResultFormatError(f"{e} (version {version}, read as version {VERSION})") from None
    return {**doc, "version": VERSION, "data": data}
