"""``run --save FILE.json`` and ``run --repeat N [--max-time S] [--timeout S]``.

With ``--repeat`` the program runs N times, each run a ``run`` of its own in a child
process (``_results.runner.run_interleaved``, the machinery of ``profile --repeat``: its
own process group under the command's supervisor, ended with its group past
``--timeout`` or on SIGINT, SIGTERM and SIGHUP, no new run after ``--max-time``)
writing its report as JSON into a temporary folder; the report shown is the run of the
median wall time, and ``--save`` keeps every run's figures (wall time, exact peak, each
function's time and memory growth) for ``compare``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .._run.program import Target, say_stopped, supervised, target_of
from .common import PACKAGE, CommandError, timeout_of


def save_run(args: argparse.Namespace, reports: Sequence[Any], main: str | None) -> None:
    """Writes ``--save`` (if given) from the reports of the runs.

    :param args: the parsed arguments
    :param reports: one ``Report`` per run
    :param main: the program's script
    """
    if getattr(args, "save", None) is None:
        return
    from .._results.payloads import run_data
    from .save_result import write_saved

    write_saved(args, "run", run_data(reports, main))


def _child_argv(args: argparse.Namespace, program: Target, output: str) -> list[str]:
    argv = [sys.executable, "-m", PACKAGE, "run", "-q", "--format", "json", "-o", output]
    argv += ["--interval", repr(args.interval)]
    for name in args.probe:
        argv += ["--probe", name]
    if hasattr(args, "alloc_sample"):
        argv += ["--alloc-sample", str(args.alloc_sample)]
    return program.argv(argv if args.module else [*argv, "--"])


def _read_report(path: str) -> Any:
    from .._errors import ResultFormatError
    from .._report.render_json import from_json

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        os.remove(path)
        return from_json(text)
    except (OSError, UnicodeDecodeError, ResultFormatError) as e:
        raise CommandError(f"run --repeat: a run left no readable report: {e}") from None


def run_repeated_reports(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    emit: Callable[[Any, argparse.Namespace, TextIO, TextIO], None],
) -> int:
    """Runs the program ``--repeat`` times, shows the median run's report, saves all (those
    done when a signal stops them).

    :param args: the parsed arguments (checked by ``wants_repeat``)
    :param out: where the report goes
    :param err: where the status goes
    :param emit: writes one report with the options (``cmd_run``)
    :return: 0, 1 when a run failed, 128 + N when signal N stopped the runs
    """
    from .._results.runner import ChildRun
    from .profile_repeat import repeat_runs

    target = target_of(args, commands=True)
    assert target is not None  # checked by cmd_run
    main = target.check() if target.python else None  # a missing script: before any run
    with supervised() as supervisor, supervisor.folder("onnxrt-monitoring-run-") as folder:
        path = os.path.join(folder, "report.json")
        program = ChildRun(("run", *target.argv()), real=tuple(_child_argv(args, target, path)))
        reports: list[Any] = []
        live = err if not args.quiet and err.isatty() else None
        repeat_runs("run --repeat", program, args.repeat, timeout_of(args), supervisor, live,
                    lambda _round, _side: reports.append(_read_report(path)),
                    max_time=args.max_time)  # fmt: skip
        if supervisor.stopped is not None:  # said even with -q: the runs were cut short
            say_stopped(err, "run --repeat", supervisor.stopped, len(reports))
        if reports:
            _show(args, reports, main, out, err, emit)
        return supervisor.exit_code or 0


def _show(
    args: argparse.Namespace,
    reports: list[Any],
    main: str | None,
    out: TextIO,
    err: TextIO,
    emit: Callable[[Any, argparse.Namespace, TextIO, TextIO], None],
) -> None:
    """Shows the median run's report, sums the runs up, saves them all."""
    import statistics

    from .._format import format_bytes, format_duration

    order = sorted(range(len(reports)), key=lambda i: reports[i].wall)
    median = order[(len(order) - 1) // 2]
    if not args.quiet:
        walls = [r.wall for r in reports]
        peaks = [r.peak.value for r in reports]
        err.write(
            f"{len(reports)} runs: wall median {format_duration(statistics.median(walls))} "
            f"(min {format_duration(min(walls))}, max {format_duration(max(walls))}), peak "
            f"median {format_bytes(statistics.median(peaks))}; the report is run "
            f"{median + 1}'s, of the median wall time\n"
        )
    emit(reports[median], args, out, err)
    save_run(args, reports, main)
