"""``compare``: tells what changed between two saved results, and whether it is real.

``compare BASE.json NEW.json`` reads two results saved with ``--save`` (``time``, ``spy``,
``profile``, ``run``); ``compare --a "python old.py" --b "python new.py"`` runs both programs
interleaved (A B A B ...), ``--repeat`` times each, under cProfile, and compares them.
Text (significant changes first, ``+12.3 % ± 2.1``), ``--format json`` or ``html``.

Exit codes, for CI: 0 no significant regression above ``--fail-above``, 1 a significant
regression above it, 2 bad input (a file that is not a result, of another version or kind,
a bad option) or a run that failed: one line naming the file or option and the problem;
130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any, TextIO

from .._gc import gc_paused
from .common import EXIT_USAGE, CommandError, check_outputs, emit_text, save_output

_EXIT_CODES = (
    "Exit codes: 0 no significant regression above --fail-above, 1 a significant "
    "regression above it, 2 bad input (a file that is not a result of this version, two "
    "results of different kinds, a bad option) or a run of --a/--b that failed, "
    "one line on stderr; 130 interrupted (the running program is killed)."
)
_FORMATS = ("text", "json", "html")
_DEFAULT_REPEAT = 20
_DEFAULT_TIMEOUT = 600.0


def parse_percent(option: str, text: str) -> float:
    """``5%`` or ``5`` as the fraction 0.05.

    :param option: the option, for the message
    :param text: what the user gave
    :return: the fraction
    :raises CommandError: exit code 2, not a finite percentage >= 0
    """
    raw = text.strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise CommandError(
            f"{option} must be a percentage >= 0 such as 5%, got {text!r}", EXIT_USAGE
        )
    return value / 100


def _check_sources(args: argparse.Namespace) -> None:
    programs = args.a is not None or args.b is not None
    if programs and (args.a is None or args.b is None):
        raise CommandError("give both --a and --b", EXIT_USAGE)
    if programs and args.files:
        raise CommandError("give two result files or --a/--b, not both", EXIT_USAGE)
    if not programs and len(args.files) != 2:
        raise CommandError(
            f"give two result files (BASE.json NEW.json), got {len(args.files)}", EXIT_USAGE
        )


def _check_numbers(args: argparse.Namespace) -> None:
    if args.repeat < 1:
        raise CommandError(f"--repeat must be >= 1, got {args.repeat}", EXIT_USAGE)
    for option, value in (("--max-time", args.max_time), ("--timeout", args.timeout)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CommandError(f"{option} must be a number > 0, got {value!r}", EXIT_USAGE)
    if not (math.isfinite(args.alpha) and 0 < args.alpha <= 0.5):
        raise CommandError(f"--alpha must be in (0, 0.5], got {args.alpha!r}", EXIT_USAGE)
    if args.top < 1:
        raise CommandError(f"--top must be >= 1, got {args.top}", EXIT_USAGE)


def _check_files(args: argparse.Namespace) -> None:
    outputs = {"-o": args.output, "--save-a": args.save_a, "--save-b": args.save_b}
    suffixes = {"--save-a": (".json",), "--save-b": (".json",)}
    check_outputs(outputs, inputs=list(args.files), suffixes=suffixes)
    for option, path in (("--save-a", args.save_a), ("--save-b", args.save_b)):
        if path is not None and os.path.isfile(path) and not args.force:
            raise CommandError(
                f"cannot write {option} {path!r}: the file exists; add --force to replace it",
                EXIT_USAGE,
            )


class CompareCommand:
    """The ``compare`` subcommand."""

    name = "compare"
    help = "compare two saved results (or two programs run interleaved), with significance"
    exit_codes = _EXIT_CODES

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.usage = (
            "%(prog)s BASE.json NEW.json [options] | --a 'python old.py' --b 'python new.py' "
            "[options]"
        )
        parser.add_argument("files", nargs="*", help="the baseline and the new result")
        parser.add_argument("--a", default=None, metavar="CMD", help="the baseline program")
        parser.add_argument("--b", default=None, metavar="CMD", help="the new program")
        parser.add_argument(
            "--repeat",
            type=int,
            default=_DEFAULT_REPEAT,
            help=f"with --a/--b: runs of each, interleaved ({_DEFAULT_REPEAT})",
        )
        parser.add_argument(
            "--max-time",
            type=float,
            default=None,
            metavar="SECONDS",
            help="with --a/--b: start no new round after this many seconds (2 rounds at least)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=_DEFAULT_TIMEOUT,
            metavar="SECONDS",
            help=f"with --a/--b: kill a run after this many seconds ({_DEFAULT_TIMEOUT:g})",
        )
        parser.add_argument(
            "--timer",
            choices=("cpu", "wall"),
            default="cpu",
            help="with --a/--b: cProfile's clock, the thread's CPU time (default: another "
            "process's use of the machine is not counted) or the wall clock",
        )
        parser.add_argument(
            "--paired",
            action="store_true",
            help="profiles: test pair by pair (run i of A ran beside run i of B: --a/--b, or "
            "two files saved by --save-a/--save-b), Wilcoxon's signed-rank test",
        )
        parser.add_argument(
            "--robust",
            action="store_true",
            help="two files: test each function's time over its run's common factor (a "
            "share-weighted median) rather than its share (always so with --a/--b)",
        )
        parser.add_argument("--save-a", metavar="FILE.json", help="with --a/--b: save A's runs")
        parser.add_argument("--save-b", metavar="FILE.json", help="with --a/--b: save B's runs")
        parser.add_argument(
            "--force", action="store_true", help="let --save-a/--save-b replace files"
        )
        parser.add_argument("--format", choices=_FORMATS, default="text")
        parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
        parser.add_argument(
            "--fail-above",
            default="5%",
            metavar="PERCENT",
            help="exit 1 on a significant change for the worse above this (5%%)",
        )
        parser.add_argument(
            "--alpha", type=float, default=0.05, help="significance level, Holm-corrected (0.05)"
        )
        parser.add_argument(
            "--min-share",
            default="0.1%",
            metavar="PERCENT",
            help="profiles: functions under this share of the run on both sides are not "
            "tested (0.1%%)",
        )
        parser.add_argument("--top", type=int, default=25, help="text: rows shown (25)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Compares, prints, and returns the gate's exit code."""
        settings = self._check(args)
        if args.a is None:
            return self._compare(args, settings, out, err, None)
        from .._run.supervise import Supervisor

        # The runs' supervisor: SIGINT, SIGTERM and SIGHUP end the running program's
        # group, and the runs done are saved before the exit with 128 + N.
        with Supervisor() as supervisor:
            code = self._compare(args, settings, out, err, supervisor)
            return supervisor.exit_code or code

    def _compare(
        self,
        args: argparse.Namespace,
        settings: dict[str, float],
        out: TextIO,
        err: TextIO,
        supervisor: Any,
    ) -> int:
        from .._errors import MonitoringError, Stopped

        # One pause from the files to the text: each end of a pause is a collection
        # over all that was built (20,000 functions' figures and changes, which survive).
        with gc_paused():
            try:
                if args.a is not None:
                    cmp = self._programs(args, err, supervisor)
                else:
                    cmp = self._files(args)
            except Stopped as e:
                return _stopped(args, e, err)
            except MonitoringError as e:
                if isinstance(e, CommandError):
                    raise
                raise CommandError(str(e), EXIT_USAGE) from None
            regressions = cmp.regressions(settings["fail_above"])
            self._write(args, cmp, regressions, out)
        if regressions and not args.quiet:
            from .._results.render import format_change, label

            worst = regressions[0]
            err.write(
                f"compare: {len(regressions)} significant regression(s) above "
                f"{settings['fail_above']:.1%}, the largest {label(worst)} "
                f"{format_change(worst)}\n"
            )
        return 1 if regressions else 0

    @staticmethod
    def _check(args: argparse.Namespace) -> dict[str, float]:
        """Every option checked before any work (exit 2, one line)."""
        _check_sources(args)
        _check_numbers(args)
        settings = {
            "fail_above": parse_percent("--fail-above", args.fail_above),
            "min_share": parse_percent("--min-share", args.min_share),
        }
        if settings["min_share"] > 1:
            raise CommandError(f"--min-share must be <= 100%, got {args.min_share!r}", EXIT_USAGE)
        args.min_share_value = settings["min_share"]
        _check_files(args)
        return settings

    @staticmethod
    def _files(args: argparse.Namespace) -> Any:
        from .._results.compare import compare_results
        from .._results.store import load_result

        a, b = (load_result(path) for path in args.files)
        return compare_results(
            a, b, (args.files[0], args.files[1]), alpha=args.alpha,
            min_share=args.min_share_value, paired=args.paired, robust=args.robust,
        )  # fmt: skip

    @staticmethod
    def _programs(args: argparse.Namespace, err: TextIO, supervisor: Any = None) -> Any:
        from .._results.runner import compare_programs

        live = not args.quiet and err.isatty()

        def progress(round_: int, side: int) -> None:
            if live and side == 1:
                err.write(f"\rcompare: round {round_ + 1} of {args.repeat}")
                err.flush()

        cmp, doc_a, doc_b = compare_programs(
            args.a, args.b, args.repeat, args.timeout, args.max_time, alpha=args.alpha,
            on_run=progress, min_share=args.min_share_value, timer=args.timer,
            paired=args.paired, robust=True,  # robust by default here (RESULTS.md)
            supervisor=supervisor,
        )  # fmt: skip
        if live:
            err.write("\n")
        _save_sides(args, doc_a, doc_b)
        return cmp

    @staticmethod
    def _write(args: argparse.Namespace, cmp: Any, regressions: list[Any], out: TextIO) -> None:
        from .._results import render

        if args.format == "json":
            text = render.to_json(cmp, regressions)
        elif args.format == "html":
            text = render.to_html(cmp)
        else:
            text = render.to_text(cmp, top=args.top)
        emit_text(text, args.output, out)


def _save_sides(args: argparse.Namespace, doc_a: Any, doc_b: Any) -> list[str]:
    """Writes ``--save-a``/``--save-b`` (those given, for a side with runs).

    :return: the files written
    """
    written = []
    for option, path, doc in (("--save-a", args.save_a, doc_a), ("--save-b", args.save_b, doc_b)):
        if path is not None and doc is not None:
            save_output(option, path, _writer(doc))
            written.append(path)
    return written


def _stopped(args: argparse.Namespace, stop: Any, err: TextIO) -> int:
    """A signal stopped the runs of --a/--b: no comparison, the runs done saved.

    :param args: the parsed arguments
    :param stop: the ``Stopped`` error, its ``done`` the two sides' results (or None)
    :param err: where the line goes
    :return: ``128 + N``
    """
    from .._errors import signal_name

    doc_a, doc_b = stop.done
    written = _save_sides(args, doc_a, doc_b)
    kept = f"; the runs done are saved in {', '.join(written)}" if written else ""
    lead = "\n" if not args.quiet and err.isatty() else ""  # after the live line
    err.write(f"{lead}compare: stopped by {signal_name(stop.signum)}: no comparison{kept}\n")
    return 128 + int(stop.signum)


def _writer(doc: dict[str, Any]) -> Any:
    """Writes ``doc`` into the path it is given (checked before the runs)."""
    from .._results.store import save_result

    def write(path: str) -> None:
        save_result(path, doc, force=True)

    return write


COMMAND = CompareCommand()
