"""``time --processes N``: the statement timed in N fresh interpreters, one after the
other, as pyperf spawns its worker processes.

The batches of one process share its memory layout, its hash seed and the machine's
load of the moment: they say how stable that process was, not how another process of
the same code will do (two ``time --save`` of one statement here differed by -31 % to
+56 %, each "significant" over its batches). ``compare`` therefore judges timings over
processes, one figure each (``_results.compare``); this command gives it them. Each
process is a ``time`` of its own (its output discarded, its own process group, ended with
it past ``--timeout``); the result printed and saved holds every batch of
every process, with the batches of each process (``processes`` in the saved series).
SIGTERM, SIGHUP or Ctrl-C stop it after ending the running process's group
(``_run.supervise``): the processes done so far are printed and saved.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import PACKAGE, CommandError, timeout_of


def child_argv(args: argparse.Namespace, output: str) -> list[str]:
    """The ``time`` command one process runs, saving its batches into ``output``.

    :param args: the parsed arguments of ``time``
    :param output: the result file of that process
    :return: the command line
    """
    argv = [sys.executable, "-m", PACKAGE, "time", "-q", "--save", output, "--force"]
    argv += ["-w", str(args.warmup)]
    argv += [f"--setup={code}" for code in args.setup]  # a setup may start with "-"
    argv += [f"--setup-once={code}" for code in args.setup_once]
    argv += ["--clock", args.clock]
    for option, value in (("-r", args.repeat), ("-n", args.number), ("-t", args.max_time)):
        if value is not None:
            argv += [option, repr(value)]
    return [*argv, "--", args.stmt]


def _read(path: str) -> dict[str, Any]:
    from .._errors import ResultFormatError
    from .._results.store import load_result

    try:
        series: dict[str, Any] = load_result(path, "timing")["data"]["series"][0]
        os.remove(path)
        return series
    except (OSError, ResultFormatError) as e:
        raise CommandError(f"time --processes: a process left no readable result: {e}") from None


def time_in_processes(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int | None]:
    """Times the statement in ``args.processes`` child processes, one after the other,
    under a supervisor (``_run.supervise``): SIGINT, SIGTERM and SIGHUP end the running
    process's group and stop the others.

    :param args: the parsed arguments of ``time`` (checked)
    :return: each finished process's saved series, and the signal that stopped the
        command early (None when all ran)
    :raises CommandError: a process failed or ran past ``--timeout`` (exit 1)
    """
    from .._results.runner import ChildRun
    from .._run.program import supervised
    from .profile_repeat import repeat_runs

    series: list[dict[str, Any]] = []
    with supervised() as supervisor, supervisor.folder("onnxrt-monitoring-time-") as folder:
        path = os.path.join(folder, "timing.json")
        program = ChildRun(("time", args.stmt), real=tuple(child_argv(args, path)))
        repeat_runs("time --processes", program, args.processes, timeout_of(args), supervisor,
                    on_run=lambda _round, _side: series.append(_read(path)))  # fmt: skip
        return series, supervisor.stopped


def merged(series: list[dict[str, Any]], max_time: float | None) -> tuple[Any, list[int]]:
    """The processes' batches as one timing, and the batches of each process.

    :param series: each process's saved series (at least one)
    :param max_time: the budget of each process, None for fixed batches
    :return: a ``TimingResult`` over every batch, and the batches per process
    """
    from .._timing.loop import TimingResult

    def total(key: str) -> float:
        return sum(float(s.get("summary", {}).get(key, 0.0)) for s in series)

    times = [t for s in series for t in s["times"]]
    sizes = [n for s in series for n in s["sizes"]]
    result = TimingResult(
        times=tuple(times),
        sizes=tuple(sizes),
        div_by_number=True,
        total_time=total("total_time") or sum(times),
        batches=int(total("batches")) or len(times),
        runs=int(total("runs")) or sum(sizes),
        warmup_time=total("warmup_time"),
        context_size=int(series[0].get("summary", {}).get("context_size", 0)),
        max_time=max_time,
    )
    return result, [len(s["times"]) for s in series]
