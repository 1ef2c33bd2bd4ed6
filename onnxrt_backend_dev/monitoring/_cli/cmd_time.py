"""``time``: measures a statement from the command line, as ``python -m timeit`` does.

Prints one line such as
``cos(0.5): 24.1 ns ± 0.6 ns (median 24.0 ns, min 23.7 ns; 10 x 50 runs)``,
or the result of ``measure_time`` as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any, TextIO

from .._format import _TIME_UNITS, format_duration
from .common import CommandError

# A live status is worth it only for long runs.
_LIVE_STATUS_MIN_SECONDS = 5.0
# Above this max/min ratio the result is flagged: the machine was busy or the statement
# caches something.
_UNSTABLE_RATIO = 4.0
# Errors main() already reports as one line; anything else comes from the statement.
_USER_ERRORS = (CommandError, ValueError, TypeError, SyntaxError)


def _same_unit(seconds: float, like: str) -> str:
    """Formats ``seconds`` in the unit and with the decimals of ``like`` (``24.1 ns``)."""
    number, unit = like.split(" ")
    decimals = len(number.split(".")[1]) if "." in number else 0
    factor = dict((s, f) for f, s in _TIME_UNITS)[unit]
    return f"{seconds / factor:.{decimals}f} {unit}"


def format_line(name: str, res: Mapping[str, Any]) -> str:
    """One line for a result of ``measure_time``.

    :param name: what was timed
    :param res: the result
    :return: ``name: average ± deviation (median ..., min ...; repeat x number runs)``
    """
    avg = format_duration(float(res["average"]))
    runs = f"{res['repeat']} x {res['number']} runs"
    if res.get("max_time") is not None:
        runs += f", {format_duration(float(res['ttime']))} measured"
    return (
        f"{name}: {avg} ± {_same_unit(float(res['deviation']), avg)} "
        f"(median {_same_unit(float(res['median']), avg)}, "
        f"min {_same_unit(float(res['min_exec']), avg)}; {runs})"
    )


class TimeCommand:
    """The ``time`` subcommand."""

    name = "time"
    help = "measure how long a Python statement takes (like python -m timeit)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.add_argument("stmt", help="the statement to time, e.g. 'cos(0.5)'")
        parser.add_argument(
            "-s",
            "--setup",
            action="append",
            default=[],
            help="setup code run before each batch, not timed (repeatable)",
        )
        parser.add_argument("-r", "--repeat", type=int, default=10, help="batches (10)")
        parser.add_argument(
            "-n", "--number", type=int, default=50, help="executions per batch (50)"
        )
        parser.add_argument(
            "-w", "--warmup", type=int, default=1, help="executions before timing (1)"
        )
        parser.add_argument(
            "-t",
            "--max-time",
            type=float,
            default=None,
            metavar="SECONDS",
            help="time batches until this many seconds are measured (repeat is ignored)",
        )
        parser.add_argument(
            "--compare",
            metavar="STMT2",
            default=None,
            help="also time STMT2 interleaved with STMT and tell which is faster",
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.add_argument(
            "-q", "--quiet", action="store_true", help="no live status, no warnings"
        )

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Times the statement and prints the result."""
        setup = "\n".join(args.setup) or None
        if args.compare is not None and args.max_time is not None:
            raise CommandError("--compare times a fixed --repeat x --number; drop --max-time")
        try:
            if args.compare is not None:
                return self._compare(args, setup, out)
            return self._time(args, setup, out, err)
        except _USER_ERRORS:
            raise
        except Exception as e:  # the user's code failed: one line, no traceback
            what = "the statement or its --setup" if setup else "the statement"
            raise CommandError(f"{what} raised {type(e).__name__}: {e}") from e

    def _time(self, args: argparse.Namespace, setup: str | None, out: TextIO, err: TextIO) -> int:
        from .._progress import LiveStatus
        from .._timing.loop import Progress, measure

        progress = Progress()

        def render() -> str:
            return f"timing {args.stmt}: {status.elapsed():.1f} s, {progress.runs:,} runs"

        live = (
            not args.quiet
            and args.max_time is not None
            and args.max_time >= _LIVE_STATUS_MIN_SECONDS
        )
        with LiveStatus(err, render, enabled=None if live else False) as status:
            result = measure(
                args.stmt,
                None,
                repeat=args.repeat,
                number=args.number,
                warmup=args.warmup,
                max_time=args.max_time,
                setup=setup,
                progress=progress,
            )
        res: dict[str, Any] = dict(result.to_dict())
        if args.json:
            json.dump({"stmt": args.stmt, **res, "max_time": args.max_time}, out, indent=2)
            out.write("\n")
        else:
            out.write(format_line(args.stmt, {**res, "max_time": args.max_time}) + "\n")
        if not args.quiet and res["max_exec"] > _UNSTABLE_RATIO * res["min_exec"]:
            err.write(
                f"warning: the slowest batch took {res['max_exec'] / res['min_exec']:.1f}x "
                "the fastest; the machine may be busy or the statement caches results\n"
            )
        return 0

    def _compare(self, args: argparse.Namespace, setup: str | None, out: TextIO) -> int:
        from .._timing.loop import measure_interleaved
        from .._timing.stats import compare_samples, format_comparison, summarize

        samples = measure_interleaved(
            [args.stmt, args.compare],
            None,
            repeat=args.repeat,
            number=args.number,
            warmup=args.warmup,
            setup=setup,
        )
        cmp = compare_samples(samples[0], samples[1], confidence=0.95, alpha=0.05)
        sides = [
            (name, {**summarize(xs), "repeat": args.repeat, "number": args.number})
            for name, xs in zip((args.stmt, args.compare), samples, strict=True)
        ]
        if args.json:
            stmts = [{"stmt": name, **side} for name, side in sides]
            doc = {"stmts": stmts, "comparison": cmp.to_dict()}
            json.dump(doc, out, indent=2)
            out.write("\n")
            return 0
        for name, side in sides:
            out.write(format_line(name, side) + "\n")
        out.write(format_comparison(cmp, (args.stmt, args.compare)) + "\n")
        return 0


COMMAND = TimeCommand()
