"""``profile --repeat N [--max-time S] [--timeout S] [--clock cpu|wall]`` and ``profile
--save FILE.json``: the program runs N times (once for ``--save`` alone), each run a
child process under the sampler, or cProfile with ``--cprofile`` or an option only
cProfile has (``_results.runner``: its own process group under the command's supervisor,
ended with its group past ``--timeout`` or on SIGINT, SIGTERM and SIGHUP, when the runs
done are still shown and saved); the profile shows the runs merged and ``--save`` keeps
every run, so that ``compare`` has the spread of each function and call path."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from .._run.program import say_stopped, supervised, target_of
from .common import DEFAULT_TIMEOUT, EXIT_ERROR, EXIT_USAGE, CommandError, emit_text, timeout_of

# What profile says when given no program.
NO_PROGRAM = "give a script, -m module, or show FILE.prof"
_REPEAT_HELP = (
    "run the program N times, each in a child process, and show the runs merged "
    "(--save keeps every run, for compare)"
)


def add_repeat_options(
    parser: argparse.ArgumentParser, clock: bool = True, repeat_help: str = _REPEAT_HELP
) -> None:
    """Adds ``--repeat``, ``--max-time``, ``--timeout`` and ``--clock`` (not ``--timer``,
    the sampler's option of ``profile``).

    :param parser: the ``profile`` parser (or ``run``'s)
    :param clock: add ``--clock``, cProfile's clock (``run`` has no cProfile)
    :param repeat_help: the help of ``--repeat``
    """
    parser.add_argument("--repeat", type=int, default=None, metavar="N", help=repeat_help)
    parser.add_argument(
        "--max-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --repeat: start no new run after this many seconds (2 runs at least)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"with --repeat: kill a run after this many seconds ({DEFAULT_TIMEOUT:g})",
    )
    if not clock:
        return
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default=None,
        help="with --repeat: the clock saved to compare, the thread's CPU time (the "
        "default, as compare --a/--b) or the wall clock; sampled without --repeat: what "
        "ranks the rows and the hot lines (cpu on a busy machine)",
    )


def wants_repeat(args: argparse.Namespace) -> bool:
    """Whether the command runs the program in child processes; refuses the options of
    that mode without ``--repeat`` (exit 2).

    :param args: the parsed arguments
    :return: True with ``--repeat``
    :raises CommandError: a bad value or an option that needs ``--repeat``
    """
    if args.repeat is None:
        for option, value in (
            ("--max-time", args.max_time),
            ("--timeout", args.timeout),
            ("--clock", getattr(args, "clock", None)),
        ):
            if value is not None:
                raise CommandError(f"{option} needs --repeat N", EXIT_USAGE)
        return False
    if args.repeat < 1:
        raise CommandError(f"--repeat must be >= 1, got {args.repeat}", EXIT_USAGE)
    for option, value in (("--max-time", args.max_time), ("--timeout", args.timeout)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CommandError(f"{option} must be a number > 0, got {value!r}", EXIT_USAGE)
    if args.target == "show" and hasattr(args, "clock"):  # profile show FILE.prof
        raise CommandError("--repeat runs a program; show renders files", EXIT_USAGE)
    return True


def program_of(args: argparse.Namespace, sampled: bool = False) -> Any:
    """The program ``profile`` runs in child processes (``--repeat``, ``--save``,
    ``--counter``).

    :param args: the parsed arguments
    :param sampled: its runs are sampled, not cProfile's
    :return: a ``_results.runner.Program``
    :raises CommandError: no program, or a script that does not exist
    """
    from .._results.runner import Program

    profiler = "sampled" if sampled else "cprofile"
    interval = args.interval if sampled else None  # None: the collector's default
    sampler = str(getattr(args, "timer", None) or "prof")
    collector = str(getattr(args, "collector", "auto"))
    target = target_of(args, missing=NO_PROGRAM)
    assert target is not None
    if target.kind == "script" and not os.path.isfile(target.name):
        raise CommandError(f"cannot run {target.name!r}: no such file", EXIT_USAGE)
    # A script is named as given (the command line of its messages), run by this Python.
    command = target.argv([sys.executable] if target.kind == "module" else [])
    how = "module" if target.kind == "module" else "path"
    return Program(tuple(command), sys.executable, how, target.name, target.args, profiler,
                   interval, sampler, collector)  # fmt: skip


def repeat_runs(
    what: str,
    program: Any,
    count: int,
    timeout: float,
    supervisor: Any,
    live: TextIO | None = None,
    on_run: Callable[[int, int], None] | None = None,
    **options: Any,
) -> Any:
    """Runs a program ``count`` times in child processes (``run --repeat``, ``profile
    --repeat``, ``time -p``).

    :param what: the command and option, for the count and the messages
    :param program: a ``_results.runner.Program``
    :param count: its runs
    :param timeout: seconds a run may take
    :param supervisor: the command's
    :param live: the stream of a live count of the runs, None for none
    :param on_run: called with (round, side) after each run
    :param options: more of ``run_interleaved``'s (``max_time``, ``timer``...)
    :return: ``run_interleaved``'s runs (those done when a signal stopped them)
    :raises CommandError: a run failed (exit 1)
    """
    from .._results.runner import RunFailed, run_interleaved

    def progress(round_: int, side: int) -> None:
        if on_run is not None:
            on_run(round_, side)
        if live is not None:
            live.write(f"\r{what.split()[0]}: run {round_ + 1} of {count}")
            live.flush()

    try:
        return run_interleaved([program], count, timeout, on_run=progress,
                               supervisor=supervisor, **options)  # fmt: skip
    except RunFailed as e:
        raise CommandError(f"{what}: {e}", EXIT_ERROR) from None
    finally:
        if live is not None:
            live.write("\n")


@contextlib.contextmanager
def _merged(runs: list[Any]) -> Iterator[Any]:
    """The runs' profiles merged into one ``pstats.Stats`` (through files, as ``show``)."""
    import marshal
    import tempfile

    from .._profiling.load import load_stats_object

    with tempfile.TemporaryDirectory(prefix="onnxrt-monitoring-profile-") as folder:
        files = []
        for i, run in enumerate(runs):
            path = os.path.join(folder, f"run{i}.prof")
            with open(path, "wb") as f:
                marshal.dump(run.stats, f)
            files.append(path)
        yield load_stats_object(files)


def _emit_sampled(data: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> bool:
    """Renders the runs of a sampled payload, added up, as ``profile`` renders one run."""
    from .._results.payloads import sampled_profile
    from .._sampling.result import SamplingResult

    fmt = args.format_resolved
    result = SamplingResult(sampled_profile(data, args.program or ""))
    opts: dict[str, Any] = {}
    if fmt in ("text", "json", "html"):
        opts = {"fold_share": args.fold_share, "show_all": args.show_library}
    if fmt == "text":
        opts["max_depth"] = args.max_depth
    text = getattr(result, f"to_{fmt}")(**opts)
    if emit_text(text, args.output, out) and not args.quiet:
        err.write(f"profile written to {args.output} ({fmt})\n")
    return True


def run_repeated(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    emit: Callable[[Any, argparse.Namespace, TextIO, TextIO], bool],
    sampled: bool = False,
) -> int:
    """Runs the program ``--repeat`` times (once for ``--save`` alone, its output shown),
    renders the merged profile, saves the runs (those done when a signal stops them).

    :param args: the parsed arguments (checked by :func:`wants_repeat`)
    :param out: where the profile goes
    :param err: where the status goes
    :param emit: renders a ``pstats.Stats`` with the view options (``cmd_profile``)
    :param sampled: the runs are sampled (the default of ``profile``), not cProfile's
    :return: the exit code: 0, 1 when a run failed or the render could not be written,
        128 + N when signal N stopped the runs
    """
    program = program_of(args, sampled)
    what = f"profile {'--save' if args.repeat is None else '--repeat'}"
    with supervised() as supervisor:
        live = err if not args.quiet and err.isatty() and args.repeat is not None else None
        done = repeat_runs(what, program, args.repeat or 1, timeout_of(args), supervisor, live,
                           max_time=args.max_time, timer=args.clock or "cpu",
                           show_output=args.repeat is None)  # fmt: skip
        runs: list[Any] = done.runs[0]
        if supervisor.stopped is not None:  # said even with -q: the runs were cut short
            say_stopped(err, what, supervisor.stopped, len(runs))
        shown = _show(args, program, runs, out, err, emit, sampled) if runs else True
        if supervisor.exit_code is not None:
            return supervisor.exit_code
    return 0 if shown else EXIT_ERROR


def _show(
    args: argparse.Namespace,
    program: Any,
    runs: list[Any],
    out: TextIO,
    err: TextIO,
    emit: Callable[[Any, argparse.Namespace, TextIO, TextIO], bool],
    sampled: bool,
) -> bool:
    """Renders the runs merged and saves them; False when the render was not written."""
    # Here, not at the top: a single run (sampled or not) needs none of these.
    import statistics

    from .._format import format_duration
    from .._results.runner import profile_result_data
    from .save_result import write_saved

    timer = args.clock or "cpu"
    walls = [r.wall for r in runs]
    if not args.quiet and args.repeat is not None:
        err.write(
            f"{len(runs)} runs ({timer} clock): median {format_duration(statistics.median(walls))}"
            f", min {format_duration(min(walls))}, max {format_duration(max(walls))}\n"
        )
    data = profile_result_data(runs, program, timer)
    if sampled:
        shown = _emit_sampled(data, args, out, err)
    else:
        with _merged(runs) as stats:
            shown = emit(stats, args, out, err)
    write_saved(args, "profile", data)
    return shown
