"""The schema of a saved result, version 3 (documented in ``docs/results.rst``); version
1 and 2 files still load.

Every file is one JSON object::

    {"schema": "onnxrt-monitoring-result", "version": 3,
     "kind": "timing" | "memory" | "profile" | "report" | "run",
     "created": "2026-12-01T21:00:00Z", "command": ["time", "cos(0.5)"],
     "environment": {...}, "data": {...}}

``data`` holds the raw figures, never only summaries, so that a comparison has the
spread of every side:

* ``timing``: ``{"series": [{"name", "times": [seconds per batch], "sizes":
  [executions per batch], "summary": {...}}]}``; a sample is ``times[i] / sizes[i]``;
  ``"processes": [batches of each process]`` (optional, ``time --processes``: the
  batches in order, process by process; absent, one process timed them all);
  ``"clock": "wall" | "cpu"`` (optional, version 3: the clock that timed it, ``wall``
  when absent) and ``"reference"`` (optional, the pytest plugin's: seconds of a fixed
  piece of work timed beside it, the machine's speed of the moment), ``"stolen"``
  (optional, the pytest plugin's on the wall clock: the share of the figure's wall time
  other programs took, waiting for a CPU); ``"counter":
  "instructions"`` (optional: counted by valgrind, ``times`` then instructions per batch
  and possibly 0) with its ``"noise"`` (instructions per execution);
* ``memory``: ``{"channels": {"cpu": [{"peak", "begin", "end", "mean"} per run]}}``, bytes;
* ``profile``, version 2 (columns): ``{"profiler": "cprofile", "functions": [[file, line,
  name], ...], "wall": [seconds per run], "own_ns": [...], "cumulative_ns": [...],
  "calls": [...]}``: each figure one flat list of integers (nanoseconds, counts) holding
  function ``i``'s figure in run ``r`` at ``i * runs + r`` (``runs = len(wall)``),
  optionally ``"memory_bytes"`` (growth per function, may be negative), ``"main"`` (the
  program's script, matched with the other side's) and ``"timer"`` (``wall``, the
  default, or ``cpu``: the clock cProfile read). Integers parse four times faster than
  floats and are exact: cProfile counts nanoseconds. Version 3 adds the call paths
  cProfile knows, its edges: ``"edges": [[caller, callee], ...]`` (indices into
  ``functions``) and ``"edge_ns"``, the callee's inclusive time when called from that
  caller, edge ``e``'s run ``r`` at ``e * runs + r``. A profile counted by valgrind
  (``--counter instructions``) has ``"counter": "instructions"``, instructions in
  place of nanoseconds in ``own_ns``, ``cumulative_ns`` and ``edge_ns``, and
  ``"total"``: the instructions of each whole run, and optionally ``"alloc_calls"``: each
  function's calls to the allocators (``malloc``, ``PyObject_Malloc``...), and
  ``"alloc_bytes"`` (``--count-bytes``): the bytes it allocated, columns;
* ``profile`` of a sampling profiler (version 3, ``"profiler": "sampled"``):
  ``{"timer": "cpu" | "wall" (the figure compared), "sampler": how samples were
  taken, "interval": seconds, "functions": [[file, first line, name], ...], "stacks":
  [[function indices, outermost first], ...], "wall": [seconds per run],
  "stack_wall_ns": [...], "stack_cpu_ns": [...], "stack_samples": [...]}``: per stack
  and run (stack ``j``'s run ``r`` at ``j * runs + r``) the wall and CPU nanoseconds it
  stood for and its samples, the model's per-thread totals; a thread other than the main
  one roots its stacks at a function ``["<thread>", 0, name]``; optionally ``"main"``;
* ``profile``, version 1 (rows, still read): ``{..., "runs": [{"wall", "own": [...],
  "cumulative": [...], "calls": [...]} per run]}``, the lists aligned with ``functions``
  (seconds, counts), optionally ``"memory"`` per run;
* ``report``: ``{"timing": ..., "memory": ..., "profile": ...}``, one or more of them;
* ``run`` (the ``run`` command's one report, one entry per run): ``{"sampler": "ticks",
  "interval": seconds, "functions": [[file, line, name], ...], "runs": [{"wall", "peak",
  "start", "end", "own": [...], "cumulative": [...], "growth": [...], "to_peak": [...]}
  per run]}``: seconds, the exact peak and the RSS at the start and the end in bytes; per
  function (aligned with ``functions``) the seconds where it was the innermost user
  function (``own``) and while it ran (``cumulative``), and its memory growth while it
  ran (net, and up to the peak; negative when it freed), optionally ``"own_cpu"`` (the
  sampler's CPU seconds where it was the innermost user function), ``"cpu"`` and
  ``"exit"`` per run and ``"main"`` (the program's script); the same in versions 1 and
  2. Version 3 adds the call tree's paths: ``"paths": [[function indices, outermost
  first], ...]`` and per run ``"path_time"`` (the wall seconds inside each path, callees
  included) and ``"path_self"`` (its own wall seconds).

Timing and memory payloads are the same in both versions. :func:`check_result` checks a
loaded document and raises :class:`ResultFormatError` with the path of the first bad
value (``data.runs[3].own[17] must be ...``, ``data.own_ns[61] (function 3, run 1) must
be ...``).
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
        if s.get("clock", "wall") not in TIMERS:
            raise _fail(f"{at}.clock", f"one of {', '.join(TIMERS)}", s.get("clock"))
        if "reference" in s:
            _number(f"{at}.reference", s["reference"], positive=True)
        if "stolen" in s and _number(f"{at}.stolen", s["stolen"]) >= 1:
            raise _fail(f"{at}.stolen", "a share in [0, 1)", s["stolen"])


def _counter(where: str, data: dict[str, Any]) -> bool:
    """The optional ``counter`` (instructions counted by valgrind, not time) and its
    ``noise``; whether there is one."""
    if "counter" not in data:
        return False
    if data["counter"] not in COUNTERS:
        raise _fail(f"{where}.counter", f"one of {', '.join(COUNTERS)}", data["counter"])
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
    if data.get("profiler") not in PROFILERS:
        raise _fail(f"{where}.profiler", f"one of {', '.join(PROFILERS)}", data.get("profiler"))
    functions = _list(f"{where}.functions", data.get("functions"))
    _check_functions(f"{where}.functions", functions)
    if data.get("timer", "wall") not in TIMERS:
        raise _fail(f"{where}.timer", f"one of {', '.join(TIMERS)}", data.get("timer"))
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
            values = _list(f"{at}.memory", run["memory"], n)
            for j, x in enumerate(values):
                if not (isinstance(x, (int, float)) and math.isfinite(x)) or isinstance(x, bool):
                    raise _fail(f"{at}.memory[{j}]", "a finite number", x)


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
        values = data.get(key)
        if isinstance(values, list) and len(values) != n * runs:
            raise ResultFormatError(
                f"{where}.{key} must hold {n * runs} values ({n} functions x {runs} runs), "
                f"got {len(values)}"
            )
        _integers(f"{where}.{key}", values, runs, negative)


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
    runs = len(data["wall"])
    values = data.get("edge_ns")
    if isinstance(values, list) and len(values) != len(edges) * runs:
        raise ResultFormatError(
            f"{where}.edge_ns must hold {len(edges) * runs} values ({len(edges)} edges x "
            f"{runs} runs), got {len(values)}"
        )
    _integers(f"{where}.edge_ns", values, runs, False)


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
        values = data.get(key)
        if isinstance(values, list) and len(values) != len(stacks) * runs:
            raise ResultFormatError(
                f"{where}.{key} must hold {len(stacks) * runs} values ({len(stacks)} stacks x "
                f"{runs} runs), got {len(values)}"
            )
        _integers(f"{where}.{key}", values, runs, False)


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
        check_data(part, f"{where}.{part}", data[part], version)


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
    if data.get("sampler") not in SAMPLERS:
        raise _fail(f"{where}.sampler", f"one of {', '.join(SAMPLERS)}", data.get("sampler"))
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


def check_data(kind: str, where: str, data: Any, version: int = VERSION) -> None:
    """Checks the payload of a result of ``kind`` in the layout of ``version``.

    :param kind: one of :data:`KINDS`
    :param where: what to call it in messages (``data``)
    :param data: the payload
    :param version: the document's version (only profiles differ)
    :raises ResultFormatError: the first problem, with where it is
    """
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
    if doc["kind"] not in KINDS:
        raise _fail("kind", f"one of {', '.join(KINDS)}", doc["kind"])
    if not isinstance(doc["command"], list) or not all(isinstance(c, str) for c in doc["command"]):
        raise _fail("command", "a list of str", doc["command"])
    _dict("environment", doc["environment"])
    check_data(doc["kind"], "data", doc["data"], version)
    return dict(doc)
