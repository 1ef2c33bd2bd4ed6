"""``time --counter instructions``: the statement's instructions per execution, counted
by valgrind in fresh interpreters (:mod:`.._count.statement`), one count deciding a
comparison (``--compare``, or ``--save`` then ``compare``).

Prints ``cos(0.5): 373 instr per run (noise ± 0; counted by valgrind over 660,000
runs)``; with ``--compare STMT2``, the second statement's line and the change of its
count (``+5.2 % instructions: more work``). What the counter cannot see (a statement that
sleeps, does I/O, works in the kernel) is said on stderr.
"""

from __future__ import annotations

import argparse
import json
import signal
from typing import Any, TextIO

from .._format import format_count
from .common import EXIT_USAGE, CommandError, timeout_of


def check_options(args: argparse.Namespace) -> None:
    """Refuses what does not apply to a count (exit 2, one line naming the option).

    :param args: the parsed arguments of ``time``
    :raises CommandError: an option that times, not counts
    """
    refused = [
        ("-p/--processes", args.processes > 1, "one counted process decides"),
        ("-t/--max-time", args.max_time is not None, "a count has no time budget"),
        ("-r/--repeat", args.repeat is not None, "a count is not repeated"),
        ("--clock", args.clock is not None, "a count reads no clock"),
    ]
    for option, given, why in refused:
        if given:
            raise CommandError(f"{option} does not apply to --counter: {why}", EXIT_USAGE)


def format_counted(name: str, res: dict[str, Any]) -> str:
    """One line for a counted statement.

    :param name: the statement
    :param res: ``StatementCount.to_dict()``
    :return: the line
    """
    name = name.replace("\n", "\\n")
    return (
        f"{name}: {format_count(float(res['average']))} per run (noise ± "
        f"{format_count(float(res['noise']))}; counted by valgrind over {int(res['runs']):,} runs)"
    )


def count_time(
    args: argparse.Namespace, setup: str | None, setup_once: str | None, out: TextIO, err: TextIO
) -> int:
    """Counts the statement (and ``--compare``'s), prints and saves.

    :param args: the parsed arguments of ``time`` (checked)
    :param setup: ``-s``, joined
    :param setup_once: ``--setup-once``, joined
    :param out: the output
    :param err: the errors' and notes' stream
    :return: the exit code (128 + N when a signal stopped it)
    """
    from .._count.statement import Statement, count_statement
    from .._errors import BadType, CounterError, RunFailed
    from .._run.program import supervised

    stmts = [args.stmt] + ([args.compare] if args.compare is not None else [])
    results: list[dict[str, Any]] = []
    with supervised() as sup:
        for stmt in stmts:
            statement = Statement(stmt, setup, setup_once, None, args.warmup, number=args.number)
            try:
                counted = count_statement(statement, sup, timeout=timeout_of(args))
            except RunFailed as e:
                raise CommandError(str(e)) from None
            except CounterError as e:
                raise CommandError(str(e), EXIT_USAGE if e.usage else 1) from None
            except BadType as e:
                raise CommandError(str(e), EXIT_USAGE) from None
            if counted is None:
                break
            results.append(counted.to_dict(warmup=args.warmup))
        stopped = sup.stopped
    if stopped is not None:
        err.write(f"interrupted by {signal.Signals(stopped).name}: nothing counted is printed\n")
        return 128 + stopped
    _write(args, stmts, results, out, err)
    _save(args, stmts, results)
    return 0


def _write(
    args: argparse.Namespace,
    stmts: list[str],
    results: list[dict[str, Any]],
    out: TextIO,
    err: TextIO,
) -> None:
    change = _change(stmts, results) if len(results) == 2 else None
    if args.json:
        doc: dict[str, Any] = {
            "stmts": [{"stmt": s, **r} for s, r in zip(stmts, results, strict=True)]
        }
        if change is not None:
            doc["comparison"] = change.to_dict()
        json.dump(doc, out, indent=2)
        out.write("\n")
    else:
        for stmt, res in zip(stmts, results, strict=True):
            out.write(format_counted(stmt, res) + "\n")
        if change is not None:
            out.write(_change_line(stmts, change) + "\n")
    if not args.quiet:
        for stmt, res in zip(stmts, results, strict=True):
            if res.get("unseen"):
                name = stmt.replace("\n", "\\n")
                err.write(f"warning: {name}: {res['unseen']}\n")


def _change(stmts: list[str], results: list[dict[str, Any]]) -> Any:
    from .._results.counted import counted_change

    a, b = (float(r["average"]) for r in results)
    noise = float(results[0]["noise"]) + float(results[1]["noise"])
    return counted_change("timing", stmts[1], "count", a, b, noise)


def _change_line(stmts: list[str], c: Any) -> str:
    names = [s.replace("\n", "\\n") for s in stmts]
    if c.change is None:
        return f"{names[1]} against {names[0]}: no instructions counted for {names[0]}"
    if not c.significant:
        return (
            f"{names[1]} against {names[0]}: {c.change:+.2%} instructions, within the noise "
            f"({c.note}): the same work"
        )
    what = "more work" if c.change > 0 else "less work"
    return f"{names[1]} against {names[0]}: {c.change:+.2%} instructions ({c.note}): {what}"


def _save(args: argparse.Namespace, stmts: list[str], results: list[dict[str, Any]]) -> None:
    if getattr(args, "save", None) is None:
        return
    from .._results.payloads import counted_series, timing_data
    from .save_result import write_saved

    series = [
        counted_series(s, float(r["average"]), int(r["runs"]), float(r["noise"]), r)
        for s, r in zip(stmts, results, strict=True)
    ]
    write_saved(args, "timing", timing_data(series))
