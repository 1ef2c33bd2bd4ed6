"""A statement's instructions per execution: counted in fresh interpreters under
valgrind, from loops of ``k``, ``2 k``, ``3 k`` and ``4 k`` executions.

The differences of consecutive counts hold ``k`` executions each and nothing else (the
interpreter's start cancels). Once, at some execution, the allocator gives an arena
back or a cache fills and that execution's count moves by millions: that happens in one
of the three differences at most, so their *median* over ``k`` is the figure and the
distance to the closer of the other two its *noise*. ``k`` is found in a plain run first
(about :data:`TARGET_SECONDS` of CPU time), which also tells whether the statement waits
(sleeps, I/O), which the counter cannot see.

:func:`count_measure` is ``measure_time(..., counter="instructions")``: counted so in
fresh interpreters, or in this process when it already runs under callgrind (the pytest
plugin's counted session, :mod:`.inprocess`).

The child gets a str statement with its setup and a pickled copy of its context, or a
function importable by the child; a lambda or a function of ``__main__`` cannot be sent.
"""

from __future__ import annotations

import itertools
import os
import pickle
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import BadType, BadValue, CounterError, RunFailed, Terminated
from .._run.program import last_line, run_child, supervised
from .._validate import check_bool, check_int
from .valgrind import Run, check_counter, count, environment, interpreter

# A plain loop of the statement takes about this much CPU time (20 to 40 million
# instructions): under cachegrind about 20 times longer, beside 1.5 s of valgrind's own
# start. CPU time, not wall time: on a busy machine the loop's length stays the same.
TARGET_SECONDS = 0.01
# A statement that gives the CPU up this often per execution (sleep, I/O, a lock), or
# spends this share of its CPU time in the kernel, does work the counter cannot see.
SWITCHES = 0.5
SYSTEM = 0.2
_TIMEOUT = 600.0
# The start of the name of a count's temporary folder.
_FOLDER = "onnxrt-monitoring-count-"

# The child: the statement's loop, as measure_time builds it (timeit's template).
CHILD = r"""
import gc, itertools, json, pickle, resource, sys, time
mode, n, spec_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(spec_path, "rb") as f:
    spec = pickle.load(f)
sys.path[0:0] = spec["path"]
from onnxrt_backend_dev.monitoring._timing.template import build_timer
ns = dict(spec["context"] or {})
if spec["setup_once"]:
    ns.setdefault("__name__", "__main__")
    exec(compile(spec["setup_once"], "<setup-once>", "exec"), ns)
inner = build_timer(spec["stmt"], ns, spec["setup"])
timer = time.perf_counter
if spec["warmup"]:
    inner(itertools.repeat(None, spec["warmup"]), timer)
if not spec["keep_gc"]:
    gc.disable()
if mode == "count":
    inner(itertools.repeat(None, n), timer)
else:
    k = 1
    while True:
        before = resource.getrusage(resource.RUSAGE_SELF)
        inner(itertools.repeat(None, k), timer)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        if cpu >= n / 1000 or k >= 10**9:
            break
        k *= 2 if cpu <= 0.001 else min(max(2, int(n / 1000 / cpu * 1.2)), 100)
    switches = after.ru_nvcsw - before.ru_nvcsw
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    with open(spec_path + ".json", "w") as f:
        json.dump({"k": k, "switches": switches / k, "user": user, "system": system}, f)
"""


@dataclass(frozen=True)
class StatementCount:
    """A statement's instructions per execution.

    :param per_execution: instructions per execution
    :param noise: from the median difference to the closer of the other two
    :param executions: executions of each difference (``k``)
    :param counts: the four whole-run counts
    :param unseen: what the counter cannot see of it, ``""`` when nothing much
    """

    per_execution: float
    noise: float
    executions: int
    counts: tuple[int, ...]
    unseen: str = ""

    def to_dict(self, context_size: int = 0, warmup: int = 1) -> dict[str, Any]:
        """The shape of ``measure_time``'s result, in instructions per execution
        (``deviation`` is the noise, ``repeat`` the 3 differences, ``number`` is ``k``).

        :param context_size: ``sys.getsizeof`` of the context
        :param warmup: executions before the counted loops
        """
        k = self.executions
        steps = [(b - a) / k for a, b in zip(self.counts, self.counts[1:], strict=False)]
        return {
            "average": self.per_execution,
            "deviation": self.noise,
            "min_exec": min([*steps, self.per_execution]),
            "max_exec": max([*steps, self.per_execution]),
            "repeat": len(steps),
            "number": k,
            "ttime": self.per_execution * len(steps),
            "context_size": context_size,
            "warmup_time": 0.0,
            "counter": "instructions",
            "unit": "instructions",
            "noise": self.noise,
            "median": self.per_execution,
            "runs": k * len(steps),
            "counts": list(self.counts),
            "unseen": self.unseen,
        }


@dataclass(frozen=True)
class Statement:
    """What the child runs.

    :param stmt: a str, or a function the child can import
    :param setup: run before each loop, outside it
    :param setup_once: run once before everything, its names the statement's globals
    :param context: the globals of a str statement (pickled)
    :param warmup: executions before the counted loop
    :param keep_gc: keep the garbage collector on in the loop
    :param number: executions of the first loop (``k``), None to find it
    """

    stmt: str | Callable[[], Any]
    setup: str | None = None
    setup_once: str | None = None
    context: Mapping[str, Any] | None = None
    warmup: int = 1
    keep_gc: bool = False
    number: int | None = None


def _spec(statement: Statement, path: str) -> None:
    """Writes what the child needs, refusing what cannot be sent."""
    spec = {
        "stmt": statement.stmt,
        "setup": statement.setup,
        "setup_once": statement.setup_once,
        "context": dict(statement.context) if statement.context else None,
        "warmup": statement.warmup,
        "keep_gc": statement.keep_gc,
        "path": [os.getcwd(), *[p for p in sys.path if p]],
    }
    if callable(statement.stmt) and getattr(statement.stmt, "__module__", "") == "__main__":
        raise BadType(_UNSENDABLE.format(what=f"{statement.stmt!r} (defined in __main__)"))
    try:
        data = pickle.dumps(spec)
    except Exception as e:  # pickle raises many kinds: each means "cannot be sent"
        raise BadType(_UNSENDABLE.format(what=_culprit(spec, e))) from None
    with open(path, "wb") as f:
        f.write(data)


_UNSENDABLE = (
    "counter='instructions' runs the statement in a fresh interpreter under valgrind: "
    "cannot send {what}; give a str statement (with setup and picklable context), or a "
    "function importable from a module"
)


def _culprit(spec: Mapping[str, Any], error: Exception) -> str:
    """What could not be pickled: the statement, or the context's first bad value."""
    try:
        pickle.dumps(spec["stmt"])
    except Exception:
        return f"the statement {spec['stmt']!r} ({error})"
    for name, value in (spec["context"] or {}).items():
        try:
            pickle.dumps(value)
        except Exception as e:
            return f"context[{name!r}] ({type(e).__name__}: {e})"
    return f"the statement's context ({error})"


def count_statement(
    statement: Statement,
    supervisor: Any,
    python: str | None = None,
    timeout: float = _TIMEOUT,
) -> StatementCount | None:
    """Counts a statement's instructions per execution (the runs' files in a folder of
    their own, removed afterwards).

    :param statement: what to count
    :param supervisor: the command's ``_run.supervise.Supervisor``
    :param python: the interpreter, this one when None
    :param timeout: seconds each run may take
    :return: the count, None when a signal stopped it
    :raises BadType: the statement or its context cannot be sent to the child
    :raises RunFailed: the statement raised (the message holds the end of its error)
    """
    binary = interpreter(python or sys.executable).binary
    with supervisor.folder(_FOLDER) as folder:
        spec = os.path.join(folder, "statement.pickle")
        _spec(statement, spec)
        runs = os.path.join(folder, "runs")
        os.makedirs(runs, exist_ok=True)
        k, unseen = statement.number, ""
        if k is None:
            found = _calibrate(binary, spec, supervisor, timeout)
            if found is None:
                return None
            k, unseen = found
        counts = []
        for n in (k, 2 * k, 3 * k, 4 * k):
            run = Run([binary, "-c", CHILD, "count", str(n), spec], what="the statement",
                      timeout=timeout, env=environment())  # fmt: skip
            counted = count(run, runs, supervisor)
            if counted is None:
                return None
            counts.append(counted.total)
    return _figure(counts, k, unseen)


def _figure(counts: list[int], k: int, unseen: str = "") -> StatementCount:
    """The median difference per execution and its noise (see the module's description);
    counts that do not grow (a statement of almost no instructions, a few hundred moving
    with the timing of a sleep) give 0 and a noise saying so."""
    steps = sorted(b - a for a, b in itertools.pairwise(counts))
    middle = steps[len(steps) // 2]
    closer = min(abs(middle - steps[0]), abs(steps[-1] - middle))
    return StatementCount(max(middle, 0) / k, closer / k, k, tuple(counts), unseen)


def _calibrate(binary: str, spec: str, supervisor: Any, timeout: float) -> tuple[int, str] | None:
    """``k`` and what the counter cannot see, from a plain run of the loop."""
    import json

    errors = spec + ".stderr"
    argv = [binary, "-c", CHILD, "calibrate", str(round(TARGET_SECONDS * 1000)), spec]
    ended = run_child(supervisor, argv, errors, timeout, env=environment())
    if ended is None:
        return None
    if ended.timed_out or ended.code != 0:
        last = last_line(errors)
        why = "ran past its timeout" if ended.timed_out else f"exited with {ended.code}"
        raise RunFailed(f"the statement {why}" + (f": {last}" if last else ""))
    try:
        with open(spec + ".json", encoding="utf-8") as f:
            found = json.load(f)
        k, switches = int(found["k"]), float(found["switches"])
        user, system = float(found["user"]), float(found["system"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CounterError(
            f"the statement's plain run left no reading ({e})", usage=False
        ) from None
    kernel = system / (user + system) if user + system > 0 else 0.0
    return max(k, 1), _unseen(switches, kernel)


def _unseen(switches: float, kernel: float) -> str:
    """What the counter cannot see of the statement, ``""`` when nothing much."""
    parts = []
    if switches >= SWITCHES:
        parts.append(f"it gives the CPU up {switches:.3g} times an execution (sleep, I/O, a lock)")
    if kernel >= SYSTEM:
        parts.append(f"{kernel:.0%} of its CPU time is the kernel's (system calls)")
    if not parts:
        return ""
    return (
        "the counter counts the statement's own instructions, not its waiting nor the "
        "kernel's work: " + "; ".join(parts)
    )


def _refuse(**given: Any) -> None:
    for name, value in given.items():
        if value not in (None, False):
            raise BadValue(f"{name} does not apply with counter='instructions', got {value!r}")


def count_measure(
    stmt: str | Callable[[], Any],
    context: dict[str, Any] | None,
    counter: str,
    warmup: int = 1,
    div_by_number: bool = True,
    max_time: float | None = None,
    keep_gc: bool = False,
    setup: str | None = None,
    clock: Any = None,
    calibrate: bool = False,
    progress: Any = None,
    executions: int = 500,
) -> dict[str, Any]:
    """Counts a statement's instructions per execution (``measure_time``'s keys).

    :param stmt: a str, or a function importable from a module
    :param context: the globals of a str statement (pickled for the child)
    :param counter: ``instructions``
    :param warmup: executions before the counted loops
    :param div_by_number: must be True: a count is per execution
    :param max_time: refused, as are ``clock``, ``calibrate`` and ``progress``
    :param keep_gc: keep the garbage collector on in the loops
    :param setup: run before each loop
    :param executions: executions counted in a counted session (``repeat * number``)
    """
    check_counter(counter)
    check_int("warmup", warmup, 0)
    check_bool("keep_gc", keep_gc)
    if not div_by_number:
        raise BadValue(
            "div_by_number must be True with counter='instructions' (a count is per execution)"
        )
    _refuse(max_time=max_time, clock=clock, calibrate=calibrate, progress=progress)
    from . import inprocess

    if inprocess.active():
        return inprocess.measure(stmt, context, setup, warmup, keep_gc, executions)
    statement = Statement(stmt, setup, None, context, warmup, keep_gc)
    with supervised() as sup:
        counted = count_statement(statement, sup)
        stopped = sup.stopped
    if stopped is not None or counted is None:
        if stopped == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(stopped or signal.SIGTERM)
    return counted.to_dict(context_size=sys.getsizeof(context or {}), warmup=warmup)
