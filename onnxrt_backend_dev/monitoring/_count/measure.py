"""``measure_time(..., counter="instructions")``: the statement counted in fresh
interpreters (:mod:`.statement`) under a supervisor of this call's own, or, when this
process already runs under callgrind (the pytest plugin's counted session), in this
process (:mod:`.inprocess`).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from .._errors import BadValue, Terminated
from .._validate import check_bool, check_int
from .valgrind import check_counter

_FOLDER = "onnxrt-monitoring-count-"


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
    """Counts a statement's instructions per execution: ``measure_time``'s parameters
    (``max_time``, ``clock``, ``calibrate``, ``progress`` refused, ``div_by_number``
    True) and keys, in instructions per execution.

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
    from .._run.supervise import Supervisor
    from .statement import Statement, count_statement

    statement = Statement(stmt, setup, None, context, warmup, keep_gc)
    with Supervisor() as sup, sup.folder(_FOLDER) as folder:
        counted = count_statement(statement, folder, sup)
        stopped = sup.stopped
    if stopped is not None or counted is None:
        if stopped == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(stopped or signal.SIGTERM)
    return counted.to_dict(context_size=sys.getsizeof(context or {}), warmup=warmup)
