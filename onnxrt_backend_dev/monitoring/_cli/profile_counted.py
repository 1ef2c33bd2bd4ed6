"""``profile --counter instructions``: one run of the program counted by valgrind, each
Python function's own and inclusive instructions (Python >= 3.12, through the
interpreter's perf trampolines; the whole run otherwise), printed hottest first and kept
by ``--save`` for ``compare``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from .common import EXIT_USAGE, CommandError, emit_text

_FOLDER = "onnxrt-monitoring-count-"
DEFAULT_TIMEOUT = 600.0
TOP = 25


def check_counted(args: argparse.Namespace) -> None:
    """Refuses the options of timed or sampled runs (exit 2, one line).

    :param args: the parsed arguments of ``profile``
    :raises CommandError: an option that does not apply to a count
    """
    refused = [
        ("--repeat", args.repeat, "one counted run decides"),
        ("--max-time", args.max_time, "a count has no time budget"),
        ("--clock", getattr(args, "clock", None), "a count reads no clock"),
        ("--pid", getattr(args, "pid", None), "valgrind must start the program"),
        ("--cprofile", getattr(args, "cprofile", False) or None, "valgrind counts each function"),
        ("--interval", getattr(args, "interval", None), "nothing is sampled"),
    ]
    for option, value, why in refused:
        if value is not None:
            raise CommandError(f"{option} does not apply to --counter: {why}", EXIT_USAGE)
    fmt = args.format or "text"
    if fmt not in ("text", "json"):
        raise CommandError(f"--format {fmt} does not apply to --counter: text or json", EXIT_USAGE)
    if args.target == "show":
        raise CommandError("--counter runs a program; show renders files", EXIT_USAGE)


def run_counted(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Counts one run, prints the functions, saves the result.

    :param args: the parsed arguments (checked)
    :param out: where the table goes
    :param err: where notes go
    :return: the exit code: 0, 128 + N when signal N stopped it
    """
    from .._errors import CounterError, RunFailed, signal_name
    from .._results.runner import count_program, counted_result
    from .._run.supervise import Supervisor
    from .profile_repeat import program_of
    from .save_result import write_saved

    program = program_of(args)
    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    with Supervisor() as sup, sup.folder(_FOLDER) as folder:
        try:
            counted = count_program(program, folder, sup, timeout, show_output=True)
        except RunFailed as e:
            raise CommandError(f"profile --counter: {e}") from None
        except CounterError as e:
            raise CommandError(f"profile --counter: {e}", EXIT_USAGE if e.usage else 1) from None
        if counted is None:
            err.write(f"profile --counter: stopped by {signal_name(sup.stopped or 15)}\n")
            return sup.exit_code or 143
    if args.format == "json":
        text = json.dumps(counted_json(counted), indent=2) + "\n"
    else:
        text = counted_text(counted, args.program or "", args.max_depth or TOP)
    if emit_text(text, args.output, out) and not args.quiet:
        err.write(f"profile written to {args.output}\n")
    kind, data = counted_result(program, counted)
    write_saved(args, kind, data)
    return 0


def _rows(counted: Any) -> list[tuple[tuple[str, int, str], list[Any]]]:
    functions = counted.functions or {}
    return sorted(functions.items(), key=lambda kv: (-kv[1][2], kv[0]))


def counted_text(counted: Any, program: str, top: int = TOP) -> str:
    """The counted run as text: the total, then the functions by own instructions.

    :param counted: a ``_count.valgrind.Counted``
    :param program: the program's name, for the header
    :param top: functions shown
    :return: the text
    """
    from .._format import format_count, one_line
    from .._results.keys import display_name

    how = "per Python function" if counted.functions is not None else "the whole run"
    lines = [f"{one_line(program)}: {format_count(counted.total)}, counted by valgrind ({how})"]
    lines.extend(f"note: {n}" for n in counted.notes)
    rows = _rows(counted)
    if rows:
        total = max(counted.total, 1)
        lines.append(f"  {'own':>14} {'own %':>7} {'inclusive':>14} {'calls':>10}  function")
        for (file, line, name), (_, calls, own, inclusive, _) in rows[:top]:
            lines.append(
                f"  {format_count(own):>14} {own / total:>7.1%} {format_count(inclusive):>14} "
                f"{calls:>10,}  {display_name(file, line, name)}"
            )
        if len(rows) > top:
            lines.append(f"  ... {len(rows) - top} more functions")
    return "\n".join(lines) + "\n"


def counted_json(counted: Any) -> dict[str, Any]:
    """The counted run as a JSON-ready dictionary.

    :param counted: a ``_count.valgrind.Counted``
    :return: ``counter``, ``total``, ``notes``, ``functions`` (each ``file``, ``line``,
        ``name``, ``own``, ``inclusive``, ``calls``), hottest first
    """
    return {
        "counter": "instructions",
        "total": counted.total,
        "notes": list(counted.notes),
        "functions": [
            {"file": f, "line": ln, "name": n, "own": v[2], "inclusive": v[3], "calls": v[1]}
            for (f, ln, n), v in _rows(counted)
        ],
    }
