"""``--save FILE.json`` for the commands that measure (``time``, ``spy``, ``profile``): the
option, its check before any work, and the writing of the result after it.

The file is refused before the work starts when it cannot be written, is not a ``.json``,
is one of the command's inputs, or already exists without ``--force`` (a baseline is
never replaced by mistake; nothing is renamed behind the user's back). The result is
written atomically, with a fallback file when the write fails after the work.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .common import EXIT_USAGE, CommandError, check_outputs, save_output


def add_save_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--save FILE.json`` and ``--force`` to a command's parser.

    :param parser: the command's parser
    """
    parser.add_argument(
        "--save",
        metavar="FILE.json",
        default=None,
        help="save the raw figures, the environment and the command as a versioned result "
        "(read by the compare command)",
    )
    parser.add_argument("--force", action="store_true", help="let --save replace an existing file")


def check_save(args: argparse.Namespace, inputs: Iterable[str] = ()) -> None:
    """Refuses ``--save`` before any work (exit 2, one line), and makes it absolute so a
    program changing its folder does not move it.

    :param args: the parsed arguments (``save``, ``force``)
    :param inputs: the files the command reads, which ``--save`` must not replace
    :raises CommandError: exit code 2
    """
    path = getattr(args, "save", None)
    if path is None:
        return
    check_outputs({"--save": path}, inputs=inputs, suffixes={"--save": (".json",)})
    if os.path.isfile(path) and not getattr(args, "force", False):
        raise CommandError(
            f"cannot write --save {path!r}: the file exists; add --force to replace it",
            EXIT_USAGE,
        )
    args.save = os.path.abspath(path)


def write_saved(args: argparse.Namespace, kind: str, data: Mapping[str, Any]) -> None:
    """Writes the result of the work to ``--save``, if given.

    :param args: the parsed arguments
    :param kind: the result's kind
    :param data: its payload (``_results.payloads``)
    :raises CommandError: exit code 1 when the file cannot be written (the result is then
        saved to a fallback file named in the message)
    """
    path = getattr(args, "save", None)
    if path is None:
        return
    from .._results.store import make_result, save_result

    doc = make_result(kind, data, sys.argv[1:])
    # Forced: an existing file was refused before the work without --force.
    save_output("--save", path, functools.partial(save_result, doc=doc, force=True))


def save_timing(
    args: argparse.Namespace,
    series: Sequence[tuple[Any, ...]],
) -> None:
    """``--save`` of ``time``: each statement's batches.

    :param args: the parsed arguments
    :param series: ``(statement, seconds of each batch, executions of each, summary)``,
        and the batches of each process when several timed them (``--processes``)
    """
    if getattr(args, "save", None) is None:
        return
    from .._results.payloads import timing_data, timing_series

    write_saved(args, "timing", timing_data([timing_series(*s) for s in series]))


def save_memory(args: argparse.Namespace, result: Any) -> None:
    """``--save`` of ``spy``: the peaks of the run.

    :param args: the parsed arguments
    :param result: the spy's result
    """
    if getattr(args, "save", None) is None:
        return
    from .._results.payloads import memory_data, memory_run

    write_saved(args, "memory", memory_data([memory_run(result)]))


def save_profile(args: argparse.Namespace, profile: Any, wall: float | None = None) -> None:
    """``--save`` of ``profile``: one run's figures per function.

    :param args: the parsed arguments
    :param profile: a ``pstats.Stats``, or its ``stats`` dictionary
    :param wall: the run's seconds, the profiled seconds (the sum of own times) if None
    """
    if getattr(args, "save", None) is None:
        return
    from .._results.payloads import profile_data

    stats: Mapping[Any, Any] = getattr(profile, "stats", profile)
    if wall is None:
        wall = math.fsum(float(figures[2]) for figures in stats.values())
    write_saved(args, "profile", profile_data([(stats, max(wall, 1e-9))]))
