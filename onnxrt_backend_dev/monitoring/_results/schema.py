"""The schema of a saved result, version 1 (documented in ``docs/results.rst``).

Every file is one JSON object::

    {"schema": "onnxrt-monitoring-result", "version": 1,
     "kind": "timing" | "memory" | "profile" | "report",
     "created": "2026-12-01T21:00:00Z", "command": ["time", "cos(0.5)"],
     "environment": {...}, "data": {...}}

``data`` holds the raw figures, never only summaries, so that a comparison has the
spread of every side:

* ``timing``: ``{"series": [{"name", "times": [seconds per batch], "sizes":
  [executions per batch], "summary": {...}}]}``; a sample is ``times[i] / sizes[i]``;
* ``memory``: ``{"channels": {"cpu": [{"peak", "begin", "end", "mean"} per run]}}``, bytes;
* ``profile``: ``{"profiler": "cprofile", "functions": [[file, line, name], ...],
  "runs": [{"wall", "own": [...], "cumulative": [...], "calls": [...]} per run]}``, the
  lists aligned with ``functions`` (seconds, counts), optionally ``"memory"`` (bytes of
  growth per function), ``"main"`` (the program's script, matched with the other side's)
  and ``"timer"`` (``wall``, the default, or ``cpu``: the clock cProfile read);
* ``report``: ``{"timing": ..., "memory": ..., "profile": ...}``, one or more of them;
* ``run`` (the ``run`` command's one report, one entry per run): ``{"sampler": "ticks",
  "interval": seconds, "functions": [[file, line, name], ...], "runs": [{"wall", "peak",
  "start", "end", "own": [...], "cumulative": [...], "growth": [...], "to_peak": [...]}
  per run]}``: seconds, the exact peak and the RSS at the start and the end in bytes; per
  function (aligned with ``functions``) the seconds where it was the innermost user
  function (``own``) and while it ran (``cumulative``), and its memory growth while it
  ran (net, and up to the peak; negative when it freed), optionally ``"own_cpu"`` (the
  sampler's CPU seconds where it was the innermost user function), ``"cpu"`` and
  ``"exit"`` per run and ``"main"`` (the program's script).

:func:`check_result` checks a loaded document and raises :class:`ResultFormatError`
with the path of the first bad value (``data.runs[3].own[17] must be ...``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import ResultFormatError

SCHEMA = "onnxrt-monitoring-result"
VERSION = 1
KINDS = ("timing", "memory", "profile", "report", "run")
PROFILERS = ("cprofile",)
TIMERS = ("wall", "cpu")
SAMPLERS = ("ticks",)
_TOP_KEYS = ("schema", "version", "kind", "created", "command", "environment", "data")


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
        _numbers(f"{at}.times", times, None, positive=True)
        sizes = _list(f"{at}.sizes", s.get("sizes"), len(times))
        for j, n in enumerate(sizes):
            _count(f"{at}.sizes[{j}]", n, 1)
        if "summary" in s:
            _dict(f"{at}.summary", s["summary"])


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
            for key in ("end", "mean"):
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


def check_profile(where: str, data: Any) -> None:
    """Checks the ``data`` of a profile result."""
    data = _dict(where, data)
    if data.get("profiler") not in PROFILERS:
        raise _fail(f"{where}.profiler", f"one of {', '.join(PROFILERS)}", data.get("profiler"))
    functions = _list(f"{where}.functions", data.get("functions"))
    for i, f in enumerate(functions):
        _check_function(f"{where}.functions[{i}]", f)
    if data.get("timer", "wall") not in TIMERS:
        raise _fail(f"{where}.timer", f"one of {', '.join(TIMERS)}", data.get("timer"))
    if "main" in data and not isinstance(data["main"], str):
        raise _fail(f"{where}.main", "a str", data["main"])
    runs = _list(f"{where}.runs", data.get("runs"), least=1)
    n = len(functions)
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


def check_report(where: str, data: Any) -> None:
    """Checks the ``data`` of a report: its timing, memory and profile parts."""
    data = _dict(where, data)
    parts = [k for k in ("timing", "memory", "profile") if k in data]
    if not parts:
        raise ResultFormatError(f"{where} must hold timing, memory or profile, got none")
    for part in parts:
        _CHECKS[part](f"{where}.{part}", data[part])


def _signed(where: str, values: Any, length: int) -> None:
    """Finite numbers of any sign (memory growth: a function may free)."""
    values = _list(where, values, length)
    if values and set(map(type, values)) <= {float, int} and all(map(math.isfinite, values)):
        return
    for j, x in enumerate(values):
        if not (isinstance(x, (int, float)) and math.isfinite(x)) or isinstance(x, bool):
            raise _fail(f"{where}[{j}]", "a finite number", x)


def _check_run_entry(at: str, run: Any, n: int) -> None:
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
    runs = _list(f"{where}.runs", data.get("runs"), least=1)
    for i, run in enumerate(runs):
        _check_run_entry(f"{where}.runs[{i}]", run, len(functions))


_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "timing": check_timing,
    "memory": check_memory,
    "profile": check_profile,
    "report": check_report,
    "run": check_run,
}


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
    if version != VERSION:
        raise ResultFormatError(
            f"schema version {version!r}, this version of the package reads version {VERSION}"
        )
    missing = [k for k in _TOP_KEYS if k not in doc]
    if missing:
        raise ResultFormatError(f"missing keys {', '.join(missing)}")
    if doc["kind"] not in KINDS:
        raise _fail("kind", f"one of {', '.join(KINDS)}", doc["kind"])
    if not isinstance(doc["command"], list) or not all(isinstance(c, str) for c in doc["command"]):
        raise _fail("command", "a list of str", doc["command"])
    _dict("environment", doc["environment"])
    _CHECKS[doc["kind"]]("data", doc["data"])
    return dict(doc)
