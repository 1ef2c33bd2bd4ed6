"""``demo``: the reference document's three examples on a small built-in workload.

Times a statement, spies on a block that allocates and frees memory, profiles the
``fct0``..``fct4`` calls and prints their call tree (then the same profile in the
reference's rows, the format of its contract, with a legend); prints each result
readably and writes into ``--out`` a memory-curve PNG, a profile bar chart PNG, the HTML
call tree, a speedscope JSON and a JSON of all results. Pictures need the ``plot``
extra; without it they are skipped and the demo says so.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from pprint import pformat
from typing import Any, TextIO

from .._optional import MissingDependencyError
from .common import make_output_folder, save_output, text_writer

# The workload of the memory example: three steps of this size, then everything freed.
_STEP_BYTES = 64 * 2**20
# The files the demo writes into --out.
_FILES = ("memory.png", "profile.png", "calltree.html", "profile.speedscope.json", "results.json")
# Sleeps of the profiling example, shorter than the reference's so the demo stays quick.
_SLEEP_SCALE = 0.1


def fct0(t: float) -> None:
    """Sleeps ``t`` seconds (the reference's profiling example)."""
    time.sleep(t)


def fct1(t: float) -> None:
    """Sleeps ``t`` seconds (the reference's profiling example)."""
    time.sleep(t)


def fct2() -> None:
    """Calls fct1 twice (the reference's profiling example)."""
    fct1(0.1 * _SLEEP_SCALE)
    fct1(0.01 * _SLEEP_SCALE)


def fct3() -> None:
    """Calls fct0 and fct1 (the reference's profiling example)."""
    fct0(0.2 * _SLEEP_SCALE)
    fct1(0.5 * _SLEEP_SCALE)


def fct4() -> None:
    """The entry point of the reference's profiling example."""
    fct2()
    fct3()


# What the reference's rows say: their format is the reference's contract, unlabelled.
_REFERENCE_LEGEND = (
    "(the reference document's format, kept byte for byte: each function once at the top\n"
    " and again under each caller; columns: name -- primitive calls, calls -- own time,\n"
    " time with callees (s) -- file:line:name; +++: its callees are listed where it is a\n"
    " top row. The call tree above, rooted at the program, is the one to read:\n"
    " to_tree_text() here, `profile --cprofile script.py` on the command line)\n"
)


def _section(out: TextIO, title: str) -> None:
    out.write(f"\n== {title} ==\n")


class DemoCommand:
    """The ``demo`` subcommand."""

    name = "demo"
    help = "run the reference examples (time, memory, profile) and write their pictures"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.add_argument(
            "--out",
            default="monitoring-demo",
            metavar="DIR",
            help="folder for the pictures, the HTML call tree and the JSON files "
            "(default: ./monitoring-demo)",
        )

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Runs the three examples and writes their files."""
        make_output_folder(args.out, "--out", _FILES)
        folder = Path(args.out)
        written: list[Path] = []
        results: dict[str, Any] = {}
        started = time.perf_counter()
        results["timing"] = self._timing(out)
        results["memory"] = self._memory(out, err, folder, written)
        results["profile"] = self._profile(out, err, folder, written)
        path = folder / "results.json"
        save_output("--out", str(path), text_writer(json.dumps(results, indent=2) + "\n"))
        written.append(path)
        _section(out, "files")
        out.writelines(f"wrote {p}\n" for p in written)
        out.write(f"demo finished in {time.perf_counter() - started:.1f} s\n")
        return 0

    def _timing(self, out: TextIO) -> dict[str, Any]:
        from math import cos

        from ..benchmark import measure_time
        from .cmd_time import format_line

        _section(out, "measure_time(lambda: cos(0.5))")
        res = measure_time(lambda: cos(0.5))
        out.write(pformat(res) + "\n")
        out.write(format_line("cos(0.5)", res) + "\n")
        return res

    def _memory(self, out: TextIO, err: TextIO, folder: Path, written: list[Path]) -> Any:
        from ..memory_peak import start_spying_on

        _section(out, "start_spying_on(): three allocations of 64 MiB, then freed")
        p = start_spying_on()
        blocks = []
        for i in range(3):
            # Multiplying writes every byte, so the pages are really resident.
            blocks.append(b"\x01" * _STEP_BYTES)
            p.mark(f"+64 MiB #{i + 1}")
            time.sleep(0.05)
        del blocks
        p.mark("freed")
        time.sleep(0.05)
        stat = p.stop()
        out.write(str(stat) + "\n")
        self._picture(err, folder / "memory.png", written, lambda ax: stat.plot(ax=ax))
        return {
            "cpu_MiB": stat["cpu"].to_dict(unit=2**20),
            "peak_source": stat["cpu"].peak_source,
            "duration": stat.get("duration"),
            "marks": stat.get("marks", []),
        }

    def _profile(self, out: TextIO, err: TextIO, folder: Path, written: list[Path]) -> Any:
        from ..profiling import (
            plot_profile,
            profile,
            profile2graph,
            to_html,
            to_speedscope,
            to_tree_text,
        )

        _section(out, "profile(fct4), its call tree: to_tree_text(profile2graph(...)[0])")
        ps = profile(fct4)[0]
        root, _nodes = profile2graph(ps, clean_text=lambda x: x.split("/")[-1])
        # The demo's functions live in this package, a library to the tree's folding: all
        # shown (folded, the first picture would be one row, "fct4 [3 frames hidden]").
        out.write(to_tree_text(root, show_all=True))
        _section(out, "the same profile in the reference's rows: root.to_text()")
        out.write(_REFERENCE_LEGEND)
        out.write(root.to_text() + "\n")
        for name, text in (
            ("calltree.html", to_html(root, title="demo: fct4", view="tree", show_all=True)),
            ("profile.speedscope.json", str(to_speedscope(root, name="demo: fct4"))),
        ):
            path = folder / name
            save_output("--out", str(path), text_writer(text))
            written.append(path)
        self._picture(err, folder / "profile.png", written, lambda ax: plot_profile(root, ax=ax))
        return root.as_dict()

    @staticmethod
    def _picture(err: TextIO, path: Path, written: list[Path], draw: Callable[[Any], Any]) -> None:
        """Draws with matplotlib (Agg) into ``path``, or says why it cannot."""
        try:
            os.environ.setdefault("MPLBACKEND", "Agg")
            from .._optional import require

            plt = require("matplotlib.pyplot", "plot", "the demo's pictures")
        except MissingDependencyError as e:
            err.write(f"skipped {path.name}: {e}\n")
            return
        fig, ax = plt.subplots(figsize=(8, 4))
        try:
            draw(ax)
            fig.tight_layout()
            save_output("--out", str(path), lambda p: fig.savefig(p, dpi=100, format="png"))
        finally:
            plt.close(fig)
        written.append(path)


COMMAND = DemoCommand()
