"""``profile``: runs a script or a module under cProfile and prints its call tree, or
renders existing profile files.

``profile [options] script.py [args...]``, ``profile [options] -m module [args...]`` and
``profile show FILE.prof [FILE2.prof...] [options]``. The script runs as ``__main__``
with its own ``sys.argv``; its exit code is returned and an exception it raises is
reported, after the profile is written either way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .._run.program import target_of
from .._run.signals import Signals
from .common import (
    EXIT_ERROR,
    EXIT_USAGE,
    CommandError,
    check_outputs,
    emit_text,
    program_inputs,
    save_output,
)
from .profile_repeat import NO_PROGRAM, add_repeat_options, run_repeated, wants_repeat
from .profile_sampled import (
    SAMPLED_FORMATS,
    add_options,
    can_encode,
    check_combinations,
    check_sampled,
    observer_reason,
    resolve_format,
    run_profiled,
    run_sampled,
    uses_cprofile,
)
from .save_result import add_save_options, check_save, save_profile

_EPILOG = (
    "The program runs as __main__ with its own sys.argv, sys.path[0] being its folder "
    "(the current one with -m). Its output and the profile both go to stdout unless -o is "
    "given; errors and status go to stderr. The exit code is the program's (sys.exit, "
    "os._exit), 1 if it raised an exception (its traceback is printed), 130 if "
    "interrupted, 128+N on signal N (SIGTERM 143, SIGHUP 129); the profile is written in "
    "each case (not after os._exit from a thread), to the original stdout if the program "
    "closed sys.stdout. "
    "Before the program runs, a usage error or an -o that cannot be written (or is an "
    "input) exits with 2; an -o failing after the run exits with 1, the profile saved "
    "in a file named on stderr. "
    "show: a file that is not a readable profile (empty, truncated, another format, "
    "values of the wrong type, NaN or infinite times) exits with 1 and one line naming "
    "the file and the problem."
)


def _add_view_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by running a program and ``show``."""
    from .._profiling.choices import VIEWS
    from .._profiling.formats import format_names
    from .._profiling.sorting import SORT_NAMES
    from .._sampling.view import FOLD_SHARE

    parser.add_argument(
        "--sort",
        default="cumulative",
        choices=SORT_NAMES,
        help="order of callees (and roots of the reference view) in text, json and html "
        "(cumulative)",
    )
    parser.add_argument(
        "--view",
        default="tree",
        choices=VIEWS,
        help="text and html: the call tree rooted at the program (tree, the default) or "
        "the reference's forest of functions (reference)",
    )
    parser.add_argument(
        "--fold-share",
        type=float,
        default=FOLD_SHARE,
        metavar="SHARE",
        help=f"tree view: fold the rows under this share of the total (0-1) into one "
        f"'N more' row per parent ({FOLD_SHARE}); 0 shows them all",
    )
    parser.add_argument(
        "--all",
        dest="fold_share",
        action="store_const",
        const=0.0,
        help="tree view: show every row (--fold-share 0)",
    )
    parser.add_argument(
        "--format",
        choices=format_names(),
        default=None,
        help="output format (text, or guessed from -o's suffix)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", default=None, help="write to FILE, not stdout"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no live status, no 'written to' line"
    )
    parser.add_argument(
        "--hide-stdlib",
        action="store_true",
        help="hide standard library, site-packages and built-in frames (their callees "
        "take their place)",
    )
    parser.add_argument(
        "--min-share",
        type=float,
        default=0.0,
        help="hide rows below this share of the total time (0-1)",
    )
    parser.add_argument("--max-depth", type=int, default=None, help="hide deeper rows")
    parser.add_argument(
        "--focus",
        metavar="TEXT",
        default=None,
        help="only the calls made from functions whose name contains TEXT (exit 1, "
        "nothing shown, when no function's name does)",
    )


def _check_before_running(args: argparse.Namespace) -> None:
    """Rejects bad view options and an unwritable ``-o`` before the program runs, so a
    long run is never lost to a typo. ``-o`` becomes absolute: the profile goes where the
    user asked even if the program changes the working folder (as ``python -m cProfile``
    does)."""
    from .._profiling.choices import check_filters

    opts = _view_options(args)
    try:  # the checks of ViewOptions, without the cProfile pipeline a sampled run skips
        check_filters(opts["min_share"], opts["max_depth"], opts["focus"])
    except ValueError as e:  # names the parameter: name the option instead, as argparse
        msg = str(e)
        key = next((k for k in opts if msg.startswith(f"{k} ")), "")
        option = "--" + key.replace("_", "-") if key else ""
        raise CommandError(option + msg[len(key) :], EXIT_USAGE) from e
    if not 0.0 <= args.fold_share <= 1.0:
        raise CommandError(f"--fold-share must be in [0, 1], got {args.fold_share!r}", EXIT_USAGE)
    resolve_format(args)
    if args.output is not None:
        check_outputs({"-o": args.output}, inputs=program_inputs(args))
        args.output = os.path.abspath(args.output)


def _view_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "hide_stdlib": args.hide_stdlib,
        "min_share": args.min_share,
        "max_depth": args.max_depth,
        "focus": args.focus,
    }


def _render(stats: Any, args: argparse.Namespace, fmt: str) -> str | None:
    """The profile rendered as ``--format`` says; None when ``--focus`` matches no
    function (nothing to show: the caller says so and exits 1)."""
    from .._profiling.filters import ViewOptions, focus_starts
    from .._profiling.formats import get_format
    from .._profiling.model import reachable_nodes
    from ..profiling import path_cleaner, profile2graph

    root, _ = profile2graph(stats, clean_text=path_cleaner())
    if args.focus is not None and not focus_starts(
        ViewOptions(focus=args.focus), reachable_nodes(root)
    ):
        return None
    entry = get_format(fmt)
    opts = _view_options(args)
    # Each format takes its own keywords, as the registry says.
    given = {"sort_key": args.sort, "view": args.view}
    opts.update({k: v for k, v in given.items() if k in entry.takes})
    if fmt == "text" and opts.get("view") == "reference":
        opts["show_share"] = True  # the reference's text has no share column: opt in
    if opts.get("view") == "tree":
        opts["fold_share"] = args.fold_share
        opts["program"] = getattr(args, "program", None)
        opts["show_all"] = args.show_library
        if fmt == "text" and args.output is None and not can_encode(sys.stdout, "├─│└"):
            opts["guides"] = "ascii"  # a terminal that cannot show the box characters
    if entry.render is None:  # _emit dumps the statistics of such formats itself
        raise CommandError(f"--format {fmt} is not a rendering of the call graph")
    return entry.render(root, **opts)


def _emit(stats: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> bool:
    """Writes the profile in the chosen format to -o or ``out``.

    :return: False when ``--focus`` matched no function (said on ``err``, nothing written)
    """
    fmt = resolve_format(args)
    if fmt == "prof":
        save_output("-o", args.output, stats.dump_stats)
    else:
        text = _render(stats, args, fmt)
        if text is None:
            err.write(f"--focus {args.focus!r}: no function name contains it, nothing to show\n")
            return False
        if not emit_text(text, args.output, out):
            return True
    if not args.quiet:
        err.write(f"profile written to {args.output} ({fmt})\n")
    return True


def _run_in_process(profile: Callable[..., int], args: argparse.Namespace, out: TextIO,
                    err: TextIO) -> int:  # fmt: skip
    """Runs the script or the module in this process under ``profile``."""
    target = target_of(args, missing=NO_PROGRAM)
    assert target is not None
    return profile(target.code(), args, out, err)


class ProfileCommand:
    """The ``profile`` subcommand."""

    name = "profile"
    help = "profile a script or module (sampled, or --cprofile) and show its call tree"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.usage = (
            "%(prog)s [options] script.py [args...] | -m module [args...] | "
            "show FILE.prof [FILE.prof...] [options]"
        )
        parser.epilog = _EPILOG
        _add_view_options(parser)

        add_options(parser)
        parser.add_argument(
            "-m", dest="module", nargs=argparse.REMAINDER, default=None,
            help="run a module as a script, the rest is its arguments",
        )  # fmt: skip
        parser.add_argument(
            "target",
            nargs="?",
            default=None,
            help="the script to run, or 'show' to render profile files",
        )
        add_save_options(parser)
        add_repeat_options(parser)
        parser.add_argument(
            "--counter",
            choices=("instructions",),
            default=None,
            help="count the instructions of one run under valgrind instead of sampling it: "
            "each Python function's own and inclusive count (Python >= 3.12), the whole run "
            "otherwise; --save keeps it for compare",
        )
        parser.add_argument(
            "--count-bytes",
            action="store_true",
            help="with --counter on Python >= 3.12: each function's allocated bytes too, "
            "counted under valgrind's DHAT (a second run, 2 to 3 times the CPU of the first)",
        )
        parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Profiles the program (sampled, or with cProfile), or renders files with
        ``show``."""
        if args.counter is not None:
            return self._counted(args, out, err)
        if args.count_bytes:
            raise CommandError("--count-bytes needs --counter instructions", EXIT_USAGE)
        implied = uses_cprofile(argparse.Namespace(**{**vars(args), "save": None}))
        target = check_combinations(args, implied)
        if target is not None and target.kind == "pid":  # read by the observer
            from .profile_observed import run_attached

            _check_before_running(args)
            with Signals():  # recorded to the end: the profile is written whatever comes
                return run_attached(args, out, err)
        if args.target != "show":
            _check_before_running(args)
            check_save(args, program_inputs(args))
        # The program's name in the call tree's header.
        args.program = f"-m {args.module[0]}" if args.module else args.target
        # --repeat runs child processes, sampled unless cProfile is asked for; so does a
        # sampled --save, to keep its stacks (cProfile's --save runs in this process).
        if wants_repeat(args) or (args.save is not None and not implied):
            return self._children(args, out, err, not implied)
        profile: Callable[..., int] = self._profile
        if not uses_cprofile(args):  # sampled, the default
            check_sampled(args)  # a bad --interval is reported before the program runs
            if args.target != "show" and (args.module or args.target):
                # Read from outside by the observer where it can run; else the note says
                # why, and the in-process sampler runs.
                args.collector_note = observer_reason(args)
                if not args.collector_note:
                    from .profile_observed import run_observed

                    with Signals():  # recorded to the end: the profile is written
                        return run_observed(args, out, err)
            profile = run_sampled
        if args.target == "show" and not args.module:
            return self._show(args, out, err)
        return _run_in_process(profile, args, out, err)

    @staticmethod
    def _counted(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """``--counter instructions``: one run counted by valgrind (:mod:`.profile_counted`)."""
        from .profile_counted import check_counted, run_counted

        check_counted(args)
        _check_before_running(args)
        check_save(args, program_inputs(args))
        args.program = f"-m {args.module[0]}" if args.module else args.target
        return run_counted(args, out, err)

    @staticmethod
    def _children(args: argparse.Namespace, out: TextIO, err: TextIO, sampled: bool) -> int:
        """``--repeat N`` or ``--save`` alone: the runs in child processes, sampled or
        under cProfile (:mod:`.profile_repeat`)."""
        args.format_resolved = resolve_format(args)
        if sampled:
            check_sampled(args)
            if args.format_resolved not in SAMPLED_FORMATS:
                raise CommandError(f"--format {args.format_resolved} needs --cprofile", EXIT_USAGE)
        return run_repeated(args, out, err, _emit, sampled)

    def _show(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        from .._profiling.load import ProfileFormatError, load_stats_object

        parser = argparse.ArgumentParser(
            prog="python -m onnxrt_backend_dev.monitoring profile show",
            description="Renders existing profile files (merged) in any format.",
            epilog="Exit codes: 0 done, 1 a file that is not a readable profile (one line "
            "naming it and the problem) or an -o failing after the render, 2 a usage error "
            "or an -o that cannot be written (or is one of the profiles).",
        )
        _add_view_options(parser)
        parser.add_argument(
            "--show-library",
            action="store_true",
            help="tree view: show every library frame (no folding of the standard library "
            "and installed packages)",
        )
        parser.add_argument("files", nargs="+", help="profile files (merged)")
        # The view options given before ``show`` are the defaults of those after it.
        shared = {a.dest for a in parser._actions} - {"help", "files"}
        parser.set_defaults(**{k: getattr(args, k) for k in shared})
        try:
            sargs = parser.parse_args(args.args)
        except SystemExit as e:  # argparse already wrote the help or the error
            return e.code if isinstance(e.code, int) else EXIT_USAGE
        _check_before_running(sargs)
        sargs.program = ", ".join(os.path.basename(f) for f in sargs.files)
        try:  # each file validated, pstats never reads one (it prints on bad files)
            stats = load_stats_object(sargs.files)
        except ProfileFormatError as e:
            raise CommandError(str(e)) from e
        except OSError as e:
            raise CommandError(f"cannot read profile {e.filename!r}: {e.strerror}") from e
        return 0 if _emit(stats, sargs, out, err) else EXIT_ERROR

    @staticmethod
    def _profile(program: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Runs the program (a :data:`.profile_sampled.Program`) under cProfile (see
        :func:`.profile_sampled.run_profiled`)."""
        import cProfile
        from pstats import Stats

        from ..profiling import check_no_profiler_active

        resolve_format(args)  # a usage error is reported before the program runs
        check_no_profiler_active()
        pr = cProfile.Profile()

        class Profiler:
            @staticmethod
            def start(skip_outer: int) -> None:
                pr.enable()

            @staticmethod
            def stop() -> Stats:
                pr.disable()
                return Stats(pr)

        def emit(stats: Stats, stream: TextIO) -> bool:
            shown = _emit(stats, args, stream, err)
            save_profile(args, stats)
            return shown

        return run_profiled(program, args, out, err, Profiler, emit)


COMMAND = ProfileCommand()
