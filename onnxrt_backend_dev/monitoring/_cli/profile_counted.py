"""``profile --counter instructions``: one run of the program counted by valgrind, each
Python function's own and inclusive instructions (Python >= 3.12, through the
interpreter's perf trampolines; the whole run otherwise), printed hottest first and kept
by ``--save`` for ``compare``.

Where only the whole run can be counted (Python 3.10, 3.11), one more run under the
sampler attributes the count to functions by their share of its CPU samples, labelled
as sampled: an estimate to read, never what ``compare`` gates on.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from .common import EXIT_USAGE, CommandError, emit_text, timeout_of

_FOLDER = "onnxrt-monitoring-count-"
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
    from .._run.program import supervised
    from .profile_repeat import program_of
    from .save_result import write_saved

    program = program_of(args)
    timeout = timeout_of(args)
    sampled: dict[Any, float] = {}
    with supervised() as sup, sup.folder(_FOLDER) as folder:
        try:
            counted = count_program(program, folder, sup, timeout, show_output=True,
                                    count_bytes=args.count_bytes)  # fmt: skip
            if counted is not None and counted.functions is None and program.python:
                sampled = _sampled_shares(program, folder, sup, timeout)
        except RunFailed as e:
            raise CommandError(f"profile --counter: {e}") from None
        except CounterError as e:
            raise CommandError(f"profile --counter: {e}", EXIT_USAGE if e.usage else 1) from None
        if counted is None or sup.stopped is not None:
            err.write(f"profile --counter: stopped by {signal_name(sup.stopped or 15)}\n")
            return sup.exit_code or 143
    if args.format == "json":
        text = json.dumps(counted_json(counted, sampled), indent=2) + "\n"
    else:
        text = counted_text(counted, args.program or "", args.max_depth or TOP, sampled)
    if emit_text(text, args.output, out) and not args.quiet:
        err.write(f"profile written to {args.output}\n")
    kind, data = counted_result(program, counted)
    write_saved(args, kind, data)
    return 0


def _sampled_shares(program: Any, folder: str, sup: Any, timeout: float) -> dict[Any, float]:
    """Each function's share of the CPU samples of one sampled run (its own time), by
    ``(file, line, name)``; empty when the run gave none."""
    import dataclasses

    from .._results.runner import run_once
    from .._results.tables import side_table

    run = run_once(dataclasses.replace(program, profiler="sampled"), folder, timeout,
                   supervisor=sup)  # fmt: skip
    if run is None or run.sampled is None:
        return {}
    table = side_table("profile", run.sampled, "cpu")
    total = sum(sum(row) for row in table.own.values())
    if total <= 0:
        return {}
    shares: dict[Any, float] = {}
    for key, row in table.own.items():
        file, line, name = table.where.get(key, (key[0], 0, key[1]))
        shares[(file, line, name)] = shares.get((file, line, name), 0.0) + sum(row) / total
    return shares


def _rows(counted: Any) -> list[tuple[tuple[str, int, str], list[Any]]]:
    functions = counted.functions or {}
    return sorted(functions.items(), key=lambda kv: (-kv[1][2], kv[0]))


def counted_text(
    counted: Any, program: str, top: int = TOP, sampled: dict[Any, float] | None = None
) -> str:
    """The counted run as text: the total, then the functions by own instructions (or
    the count attributed by a sampled run's shares, said so).

    :param counted: a ``_count.valgrind.Counted``
    :param program: the program's name, for the header
    :param top: functions shown
    :param sampled: each function's share of a sampled run's CPU samples, where the
        functions could not be counted
    :return: the text
    """
    from .._format import format_bytes, format_count, one_line
    from .._results.keys import display_name

    how = "per Python function" if counted.functions is not None else "the whole run"
    lines = [f"{one_line(program)}: {format_count(counted.total)}, counted by valgrind ({how})"]
    lines.extend(f"note: {n}" for n in counted.notes)
    rows = _rows(counted)
    sizes = counted.alloc_bytes  # --count-bytes: each function's allocated bytes
    if rows:
        total = max(counted.total, 1)
        head = f"  {'own':>14} {'own %':>7} {'inclusive':>14} {'calls':>10}"
        lines.append(head + (f" {'allocated':>10}" if sizes is not None else "") + "  function")
        for key, (_, calls, own, inclusive, _) in rows[:top]:
            allocated = f" {format_bytes(sizes.get(key, 0)):>10}" if sizes is not None else ""
            lines.append(
                f"  {format_count(own):>14} {own / total:>7.1%} {format_count(inclusive):>14} "
                f"{calls:>10,}{allocated}  {display_name(*key)}"
            )
        if len(rows) > top:
            lines.append(f"  ... {len(rows) - top} more functions")
    elif sampled:
        lines.append(
            "attributed by one sampled run (its share of the CPU samples times the count: "
            "an estimate, not counted)"
        )
        lines.append(f"  {'own (sampled)':>14} {'own %':>7}  function")
        ranked = sorted(sampled.items(), key=lambda kv: -kv[1])
        for (file, line, name), share in ranked[:top]:
            lines.append(
                f"  {format_count(share * counted.total):>14} {share:>7.1%}  "
                f"{display_name(file, line, name)}"
            )
    return "\n".join(lines) + "\n"


def counted_json(counted: Any, sampled: dict[Any, float] | None = None) -> dict[str, Any]:
    """The counted run as a JSON-ready dictionary.

    :param counted: a ``_count.valgrind.Counted``
    :param sampled: each function's share of a sampled run's CPU samples
    :return: ``counter``, ``total``, ``notes``, ``functions`` (each ``file``, ``line``,
        ``name``, ``own``, ``inclusive``, ``calls``, and ``allocated`` bytes with
        ``--count-bytes``), hottest first, and ``sampled``
        (each ``file``, ``line``, ``name``, ``share``) where the functions were not
        counted
    """
    shares = sorted((sampled or {}).items(), key=lambda kv: -kv[1])
    sizes = counted.alloc_bytes
    return {
        "sampled": [{"file": f, "line": ln, "name": n, "share": s} for (f, ln, n), s in shares],
        "counter": "instructions",
        "total": counted.total,
        "notes": list(counted.notes),
        "functions": [
            {"file": f, "line": ln, "name": n, "own": v[2], "inclusive": v[3], "calls": v[1]}
            | ({} if sizes is None else {"allocated": sizes.get((f, ln, n), 0)})
            for (f, ln, n), v in _rows(counted)
        ],
    }
