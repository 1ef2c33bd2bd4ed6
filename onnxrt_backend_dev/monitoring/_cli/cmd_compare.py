"""``compare``: tells what changed between two saved results, where it starts, and
whether it is real.

``compare BASE.json NEW.json`` reads two results saved with ``--save`` (``time``, ``spy``,
``profile``, ``run``); ``compare --a "python old.py" --b "python new.py"`` runs both
programs interleaved (A B A B ...), ``--repeat`` times each, under the sampler (the
observer, from outside, where it can run; ``--cprofile`` for cProfile), and compares
them. Text (the verdict first), ``--format json`` or ``html`` (``-o`` guesses it from
the suffix). The exit codes, for CI, are those of ``--help`` (:data:`_EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
from collections.abc import Iterator
from typing import Any, TextIO

from .._gc import gc_paused
from .common import (
    DEFAULT_TIMEOUT,
    EXIT_USAGE,
    CommandError,
    check_outputs,
    emit_text,
    save_output,
    unknown_suffix,
)

_EXIT_CODES = (
    "The gate: the verdict is the first line of every output. Exit codes: 0 no "
    "significant regression above --fail-above; 1 a significant regression above it (the "
    "run's time or peak, a statement, a call path where a change starts, a function's own "
    "time, a memory growth); 2 bad input (a file that is not a result of a version this "
    "package reads, two results of different kinds, clocks or profilers, a bad option) or "
    "a run of --a/--b that failed, one line on stderr; 3 undecided: the interval of the "
    "run's time (a statement, a peak) reaches above --fail-above (a single process or run "
    "a side, too few runs, too noisy), with the runs a side that would decide it, or a "
    "function or path above it is significant alone but not once corrected for all the "
    "figures; 130 interrupted (the running program is killed). A single process a side "
    "is judged on its batches, as weaker evidence, and never passed in silence. Results "
    "from different Python versions or machines are compared with a warning."
)
_FORMATS = ("text", "json", "html")
_SUFFIXES = {".html": "html", ".htm": "html", ".json": "json", ".txt": "text", ".text": "text",
             ".log": "text", "": "text"}  # fmt: skip
_DEFAULT_REPEAT = 20


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
    if not programs:
        for option in ("save_a", "save_b"):
            if getattr(args, option) is not None:
                raise CommandError(f"--{option.replace('_', '-')} needs --a/--b", EXIT_USAGE)
    else:
        _check_programs(args)


def _check_programs(args: argparse.Namespace) -> None:
    """``--a`` and ``--b`` parsed, both Python programs or both not, each found."""
    from .._results.runner import parse_program
    from .._run.supervise import check_command

    sides = [("--a", args.a), ("--b", args.b)]
    parsed = []
    for option, command in sides:
        with _blamed(option, command):
            parsed.append(parse_program(command))
    if parsed[0].profiled != parsed[1].profiled:
        raise CommandError("a and b must both be Python programs, or both other commands",
                           EXIT_USAGE)  # fmt: skip
    for (option, command), program in zip(sides, parsed, strict=True):
        with _blamed(option, command):  # a command found, or a script that exists
            if not program.profiled:
                check_command(program.command[0])
            elif program.how == "path" and not os.path.exists(program.target):
                raise CommandError(f"script not found: {program.target!r}")


@contextlib.contextmanager
def _blamed(option: str, command: str) -> Iterator[None]:
    """``--a``/``--b`` checked, else exit 2 and one line naming the option (a quote left
    open, nothing given, a command or a script not found)."""
    try:
        yield
    except (ValueError, CommandError) as e:
        raise CommandError(f"{option} {command!r}: {e}", EXIT_USAGE) from None


def _check_counter(args: argparse.Namespace) -> None:
    """``--counter``: with --a/--b, and none of the options of timed runs."""
    if args.counter is None:
        if args.count_bytes:
            raise CommandError("--count-bytes needs --counter instructions", EXIT_USAGE)
        args.repeat = _DEFAULT_REPEAT if args.repeat is None else args.repeat
        return
    if args.a is None:
        raise CommandError(
            "--counter needs --a/--b (saved results say themselves whether they were counted)",
            EXIT_USAGE,
        )
    refused = [("--repeat", args.repeat, "one counted run a side decides"),
               ("--max-time", args.max_time, "a count has no time budget"),
               ("--cprofile", args.cprofile or None, "valgrind counts each function itself"),
               ("--interval", args.interval, "nothing is sampled"),
               ("--timer", args.timer, "a count reads no clock")]  # fmt: skip
    for option, value, why in refused:
        if value is not None:
            raise CommandError(f"{option} does not apply to --counter: {why}", EXIT_USAGE)
    args.repeat = 1


def _check_numbers(args: argparse.Namespace) -> None:
    if args.repeat < 1:
        raise CommandError(f"--repeat must be >= 1, got {args.repeat}", EXIT_USAGE)
    for option, value in (
        ("--max-time", args.max_time),
        ("--timeout", args.timeout),
        ("--interval", args.interval),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CommandError(f"{option} must be a number > 0, got {value!r}", EXIT_USAGE)
    if not (math.isfinite(args.alpha) and 0 < args.alpha <= 0.5):
        raise CommandError(f"--alpha must be in (0, 0.5], got {args.alpha!r}", EXIT_USAGE)
    if args.top < 1:
        raise CommandError(f"--top must be >= 1, got {args.top}", EXIT_USAGE)


def output_format(fmt: str | None, output: str | None) -> str:
    """The format to write: ``--format``, else the suffix of ``-o``; a page named
    ``.html`` never receives text (a name in it would run as a script).

    :param fmt: ``--format``, None when not given
    :param output: ``-o``, None for stdout
    :return: ``text``, ``json`` or ``html``
    :raises CommandError: exit code 2, a suffix naming another format, or none known
    """
    suffix = os.path.splitext(output or "")[1].lower()
    guessed = _SUFFIXES.get(suffix)
    if fmt is None:
        if guessed is None:
            raise unknown_suffix(output, _FORMATS)
        return guessed
    if guessed is not None and suffix and guessed != fmt:
        raise CommandError(
            f"-o {output!r} names a {guessed} file but --format is {fmt}: give -o a "
            f"{'.' + fmt if fmt != 'text' else '.txt'} name, or drop --format",
            EXIT_USAGE,
        )
    return fmt


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
            "--repeat", type=int, default=None,
            help=f"with --a/--b: runs of each, interleaved ({_DEFAULT_REPEAT})",
        )  # fmt: skip
        parser.add_argument(
            "--counter", choices=("instructions",), default=None,
            help="with --a/--b: count the instructions of one run of each under valgrind "
            "instead of timing them (per Python function on Python >= 3.12, the whole run "
            "otherwise): the same count whatever the machine's load, one run a side decides",
        )  # fmt: skip
        parser.add_argument(
            "--count-bytes", action="store_true",
            help="with --counter on Python >= 3.12: each function's allocated bytes too, "
            "counted under valgrind's DHAT (a second run of each, 2 to 3 times the CPU of "
            "the first)",
        )  # fmt: skip
        parser.add_argument(
            "--max-time", type=float, default=None, metavar="SECONDS",
            help="with --a/--b: start no new round after this many seconds (2 rounds at least)",
        )  # fmt: skip
        parser.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
            help=f"with --a/--b: kill a run after this many seconds ({DEFAULT_TIMEOUT:g})",
        )  # fmt: skip
        parser.add_argument(
            "--cprofile", action="store_true",
            help="with --a/--b: profile the runs with cProfile (exact, about 2x the time) "
            "instead of the sampler (about 1.1x)",
        )  # fmt: skip
        parser.add_argument(
            "--interval", type=float, default=None, metavar="SECONDS",
            help="with --a/--b: the sampler's seconds between samples (0.00025 read from "
            "outside by the observer, 0.001 by the in-process sampler)",
        )  # fmt: skip
        parser.add_argument(
            "--clock", "--timer", dest="timer", choices=("cpu", "wall"), default=None,
            help="the clock compared, as time, profile and run say it: the CPU time (the "
            "default with --a/--b: another process's use of the machine is not counted) or "
            "the wall clock (waiting counted); for two sampled files, each file's own unless "
            "given (--timer: its older name; profile's --timer is the in-process sampler's)",
        )  # fmt: skip
        parser.add_argument("--save-a", metavar="FILE.json", help="with --a/--b: save A's runs")
        parser.add_argument("--save-b", metavar="FILE.json", help="with --a/--b: save B's runs")
        parser.add_argument(
            "--force", action="store_true", help="let --save-a/--save-b replace files"
        )
        parser.add_argument(
            "--format", choices=_FORMATS, default=None,
            help="text, json or html (guessed from -o's suffix; text on stdout)",
        )  # fmt: skip
        parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
        parser.add_argument(
            "--fail-above", default="5%", metavar="PERCENT",
            help="the gate's threshold: exit 1 on a significant regression above it, 3 when "
            "the evidence cannot rule one out (5%%)",
        )  # fmt: skip
        parser.add_argument(
            "--alpha", type=float, default=0.05,
            help="significance level, Holm-corrected over all the figures (0.05)",
        )  # fmt: skip
        parser.add_argument(
            "--min-share", default="0.1%", metavar="PERCENT",
            help="profiles: figures under this share of the run on both sides are shown, not "
            "tested (0.1%%)",
        )  # fmt: skip
        parser.add_argument(
            "--min-change", default="2%", metavar="PERCENT",
            help="profiles: a change within this is negligible, never significant (2%%)",
        )  # fmt: skip
        parser.add_argument(
            "--top", type=int, default=25, help="rows of each section (25; the changes "
            "listed as worse or better always shown)",
        )  # fmt: skip
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Compares, prints, and returns the gate's exit code."""
        settings = self._check(args)
        if args.a is None:
            return self._compare(args, settings, out, err, None)
        from .._run.program import supervised

        # The runs' supervisor: SIGINT, SIGTERM and SIGHUP end the running program's
        # group, and the runs done are saved before the exit with 128 + N.
        with supervised() as supervisor:
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
                raise CommandError(str(e), _exit_of(e)) from None
            verdict = cmp.verdict(settings["fail_above"])
            self._write(args, cmp, settings["fail_above"], out)
        if not args.quiet:
            for warning in cmp.warnings:
                err.write(f"compare: warning: {warning}\n")
            if args.output is not None or verdict.exit_code:
                err.write(f"compare: {verdict.text}\n")
        return int(verdict.exit_code)

    @staticmethod
    def _check(args: argparse.Namespace) -> dict[str, float]:
        """Every option checked before any work (exit 2, one line)."""
        _check_counter(args)  # the options first: nothing looked at before they are right
        _check_sources(args)
        _check_numbers(args)
        settings = {
            "fail_above": parse_percent("--fail-above", args.fail_above),
            "min_share": parse_percent("--min-share", args.min_share),
            "min_change": parse_percent("--min-change", args.min_change),
        }
        for option, key in (("--min-share", "min_share"), ("--min-change", "min_change")):
            if settings[key] > 1:
                raise CommandError(
                    f"{option} must be <= 100%, got {getattr(args, key)!r}", EXIT_USAGE
                )
        args.min_share_value = settings["min_share"]
        args.min_change_value = settings["min_change"]
        args.format = output_format(args.format, args.output)
        _check_files(args)
        return settings

    @staticmethod
    def _files(args: argparse.Namespace) -> Any:
        from .._results.compare import compare_results
        from .._results.store import load_result

        a, b = (load_result(path) for path in args.files)
        return compare_results(
            a, b, (args.files[0], args.files[1]), alpha=args.alpha,
            min_share=args.min_share_value, min_change=args.min_change_value, clock=args.timer,
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
            on_run=progress, min_share=args.min_share_value, timer=args.timer or "cpu",
            profiler="cprofile" if args.cprofile else "sampled",
            interval=args.interval, min_change=args.min_change_value,
            supervisor=supervisor, counter=args.counter, count_bytes=args.count_bytes,
        )  # fmt: skip
        if live:
            err.write("\n")
        _save_sides(args, doc_a, doc_b)
        return cmp

    @staticmethod
    def _write(args: argparse.Namespace, cmp: Any, above: float, out: TextIO) -> None:
        from .._results import render

        if args.format == "json":
            text = render.to_json(cmp, above=above)
        elif args.format == "html":
            text = render.to_html(cmp, top=args.top, above=above)
        else:
            text = render.to_text(cmp, top=args.top, above=above)
        emit_text(text, args.output, out)


def _exit_of(error: Exception) -> int:
    """2 for bad input and a run that failed (the documented codes), 1 for the counter's
    own failure (valgrind killed)."""
    from .._errors import CounterError

    return 1 if isinstance(error, CounterError) and not error.usage else EXIT_USAGE


def _save_sides(args: argparse.Namespace, doc_a: Any, doc_b: Any) -> list[str]:
    """Writes ``--save-a``/``--save-b`` (those given, for a side with runs).

    :return: the files written
    """
    from .._results.store import save_result

    written = []
    for option, path, doc in (("--save-a", args.save_a, doc_a), ("--save-b", args.save_b, doc_b)):
        if path is not None and doc is not None:
            save_output(option, path, functools.partial(save_result, doc=doc, force=True))
            written.append(path)
    return written


def _stopped(args: argparse.Namespace, stop: Any, err: TextIO) -> int:
    """A signal stopped the runs of --a/--b (``stop.done``: the two sides' results, or
    None): no comparison, the runs done saved, ``128 + N``."""
    from .._errors import signal_name

    doc_a, doc_b = stop.done
    written = _save_sides(args, doc_a, doc_b)
    kept = f"; the runs done are saved in {', '.join(written)}" if written else ""
    lead = "\n" if not args.quiet and err.isatty() else ""  # after the live line
    err.write(f"{lead}compare: stopped by {signal_name(stop.signum)}: no comparison{kept}\n")
    return 128 + int(stop.signum)


COMMAND = CompareCommand()
