"""Notebook magics, loaded with ``%load_ext onnxrt_backend_dev.monitoring``.

``%measure_time`` / ``%%measure_time`` time a statement or a cell with
:func:`~onnxrt_backend_dev.monitoring.benchmark.measure_time` and print one line, like
``%timeit`` but with the median, the minimum and the deviation
(``x * 2: 24.1 ns ± 0.6 ns (median 24.0 ns, min 23.7 ns; 10 x 50 runs)``). As with
``%timeit``, without ``-n`` the batch size is calibrated (1, 2, 5, 10... executions until
a batch lasts at least 0.2 s), so a slow statement takes seconds, not minutes. The code
is compiled into the timing loop with a copy of the notebook's namespace as globals.

``%%spy`` runs the cell under
:func:`~onnxrt_backend_dev.monitoring.memory_peak.start_spying_on` and prints the peak,
mean, first and last resident memory of the kernel (and of the GPUs) and how much the
cell added at its peak; when the front end shows images (a notebook, not a terminal) and
matplotlib is installed, it draws the memory curve. ``%%monitor`` prints the cell's
one-page report (:mod:`onnxrt_backend_dev.monitoring.report`).

``%%profile_tree`` samples the cell's stacks (the sampler of ``profile script.py``:
true stacks, library frames folded into the first one called from the cell) and prints
its call tree, starting at the cell; ``--cprofile`` profiles it with
:func:`~onnxrt_backend_dev.monitoring.profiling.profile` instead (every call timed) and
prints the call tree of ``profile2graph``'s graph, folded by the same code. The options
only cProfile has imply ``--cprofile``, as they do for ``profile``.

Errors in the options are reported in one line, errors in the cell as usual.
``-h``/``--help`` prints a magic's options (the cell is not run), as ``%measure_time?``
does: each magic's options are declared once, in a table that gives both what IPython's
option parser accepts and the help, listed below.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import math
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class, no_var_expand

from ._cli.cmd_time import format_line
from ._format import format_bytes

# Batches of %measure_time without -r: %timeit's default.
_MAGIC_REPEAT = 7


@dataclass(frozen=True)
class _Option:
    """An option of a magic: ``flag`` is ``-r`` or ``--max-time``, ``metavar`` None for a
    switch."""

    flag: str
    metavar: str | None
    help: str


@dataclass(frozen=True)
class _MagicSpec:
    """A magic's options, declared once: what ``parse_options`` accepts and the help."""

    name: str
    title: str
    usage: str
    summary: str
    options: tuple[_Option, ...]

    def getopt(self) -> tuple[str, list[str]]:
        """The short options (``"r:n:qh"``) and long ones (``["max-time=", "help"]``)
        of ``Magics.parse_options``, with ``-h``/``--help``."""
        short = "".join(
            o.flag[1] + (":" if o.metavar else "") for o in self.options if o.flag[1] != "-"
        )
        long = [o.flag[2:] + ("=" if o.metavar else "") for o in self.options if o.flag[1] == "-"]
        return short + "h", [*long, "help"]

    def help(self) -> str:
        """The help: usage, summary and one line per option."""
        parser = argparse.ArgumentParser(
            prog=self.name,
            usage=self.usage.replace("%", "%%"),  # argparse formats it (and help) with %
            description=self.summary,
            add_help=False,
        )
        parser.add_argument("-h", "--help", action="store_true", help="show this help")
        for o in self.options:
            kind: dict[str, Any] = (
                {"action": "store_true"} if o.metavar is None else {"metavar": o.metavar}
            )
            parser.add_argument(o.flag, help=o.help.replace("%", "%%"), **kind)
        return parser.format_help()


_F = TypeVar("_F", bound=Callable[..., Any])


def _documented(spec: _MagicSpec) -> Callable[[_F], _F]:
    """Makes the help of ``spec`` the docstring of the magic (what ``%name?`` shows)."""

    def decorate(function: _F) -> _F:
        # A literal block: the help reads the same in IPython and in Sphinx. The line at
        # column 0 keeps it indented once docstrings are dedented (inspect.cleandoc).
        block = textwrap.indent(spec.help(), "    ")
        function.__doc__ = f"{spec.title}.\n\nIts options (``-h``, ``--help``)::\n\n{block}"
        return function

    return decorate


def _wants_help(opts: dict[str, Any], spec: _MagicSpec) -> bool:
    """Prints the help of the magic when ``-h`` or ``--help`` was given."""
    if "h" not in opts and "help" not in opts:
        return False
    print(spec.help())
    return True


_MEASURE_TIME = _MagicSpec(
    name="%measure_time",
    title="Times a statement or a cell",
    usage="%measure_time [options] statement\n       %%measure_time [options] [setup code]\n"
    "       code to time",
    summary="Times a statement (line magic) or a cell (cell magic, after setup code run "
    "before each batch, not timed) with measure_time and prints one line: average ± "
    "deviation, median, minimum, like %timeit. Without -n the batch size is calibrated as "
    "%timeit does. The code sees the notebook's variables and defines none there.",
    options=(
        _Option("-r", "REPEAT", "batches (7, as %timeit)"),
        _Option(
            "-n",
            "NUMBER",
            "executions per batch (default: calibrated as %timeit, a batch lasting 0.2 s)",
        ),
        _Option("-w", "WARMUP", "executions before timing (1)"),
        _Option("--max-time", "SECONDS", "time batches until this many seconds are measured"),
        _Option("-q", None, "print nothing"),
        _Option("-o", None, "return the dictionary of measure_time"),
    ),
)
_SPY = _MagicSpec(
    name="%%spy",
    title="Spies on the memory of the kernel while the cell runs",
    usage="%%spy [options]\n       code to spy on",
    summary="Runs the cell under start_spying_on and prints the peak, mean, first and "
    "last resident memory of the kernel (and of every GPU with --cuda) and what the cell "
    "added at its peak; in a notebook, with matplotlib, draws the memory curve.",
    options=(
        _Option("-d", "DELAY", "seconds between two measures (0.01)"),
        _Option("--cuda", None, "measure the GPUs too (nvidia-ml-py): --probe nvml"),
        _Option(
            "--probe",
            "NAME",
            "measure the devices of this registered probe (repeatable; nvml, torch: torch's "
            "allocator, exact peaks)",
        ),
        _Option("--stacks", None, "sample the cell's Python stacks: where the peak happened"),
        _Option("--plot", "FILE.png", "write the memory curve to this PNG file"),
        _Option("--no-plot", None, "do not draw the memory curve"),
        _Option("-o", None, "return the spy's result"),
    ),
)
_MONITOR = _MagicSpec(
    name="%%monitor",
    title="Reports the time, memory and GPU of the cell on one page",
    usage="%%monitor [options]\n       code to monitor",
    summary="Runs the cell under the report's ticks, the sampling profiler and the memory "
    "spy and prints the summary (at most 30 lines): wall and CPU time, the exact peak and "
    "the line that built it, what the peak is made of, the heaviest functions and lines.",
    options=(
        _Option("--interval", "SECONDS", "seconds between two ticks (0.005)"),
        _Option("--probe", "NAME", "a device probe to read too (nvml, torch); repeatable"),
        _Option("--html", "FILE", "also write the HTML page there"),
        _Option("--json", "FILE", "also write the JSON report there"),
        _Option("-q", None, "print nothing"),
        _Option("-o", None, "return the report"),
    ),
)
_PROFILE_TREE = _MagicSpec(
    name="%%profile_tree",
    title="Profiles the cell and prints its call tree",
    usage="%%profile_tree [options]\n       code to profile",
    summary="Samples the cell's stacks and prints its call tree rooted at the cell, library "
    "frames folded (--cprofile: cProfile's exact call counts; --view reference: the "
    "reference's rows of profile2graph).",
    options=(
        _Option(
            "--cprofile",
            None,
            "profile with cProfile instead of sampling; implied by --view reference, -s "
            "other than cumulative and --hide-stdlib",
        ),
        _Option("--interval", "SECONDS", "sampling: seconds between samples (0.002)"),
        _Option("--show-library", None, "the tree: show every library frame"),
        _Option("--view", "VIEW", "tree (default: rooted at the cell) or reference"),
        _Option(
            "-s", "SORT", "order of the children: cumulative (the tree's default), line or time"
        ),
        _Option("-w", "WIDTH", "width of the reference's function column (60)"),
        _Option("--max-depth", "N", "hide deeper rows"),
        _Option("--hide-stdlib", None, "hide the standard library and installed packages"),
        _Option("--fold-share", "SHARE", "tree: fold rows under this share (0.005)"),
        _Option("--all", None, "tree: show every row"),
        _Option("-o", None, "return the sampling result (--cprofile: the root of the tree)"),
    ),
)


# This page lists every magic's help, from the same tables.
__doc__ = (__doc__ or "") + "".join(
    f"\n``{spec.name}``::\n\n{textwrap.indent(spec.help(), '    ')}"
    for spec in (_MEASURE_TIME, _SPY, _MONITOR, _PROFILE_TREE)
)


def _all_values(opts: dict[str, Any], name: str) -> tuple[str, ...]:
    """Every value given to a repeatable option (IPython keeps a list when repeated)."""
    value = opts.get(name)
    if value is None:
        return ()
    return tuple(str(v) for v in (value if isinstance(value, list) else [value]))


def _option(opts: dict[str, Any], name: str) -> str | None:
    """Returns the last value given to option ``name`` or None."""
    values = _all_values(opts, name)
    return values[-1] if values else None


def _path_option(opts: dict[str, Any], name: str) -> str | None:
    """A file option: the magic's line keeps quotes (``--html ''`` is two quote
    characters), taken off here as a shell would."""
    value = _option(opts, name)
    if value is not None and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


def _number_option(
    opts: dict[str, Any],
    name: str,
    default: float | None,
    cast: Callable[[str], float],
    minimum: float,
) -> Any:
    """Reads a numeric option and checks it is at least ``minimum``."""
    text = _option(opts, name)
    if text is None:
        return default
    dash = "--" if len(name) > 1 else "-"
    try:
        value = cast(text)
    except ValueError:
        raise UsageError(f"{dash}{name} must be a {cast.__name__}, got {text!r}") from None
    if not math.isfinite(value):  # float("nan") passes every bound below
        raise UsageError(f"{dash}{name} must be a finite number, got {text!r}")
    if value < minimum:
        raise UsageError(f"{dash}{name} must be >= {minimum}, got {text}")
    return value


@magics_class
class MonitoringMagics(Magics):
    """``%measure_time``, ``%%measure_time``, ``%%spy`` and ``%%profile_tree``."""

    @property
    def _shell(self) -> Any:
        """The shell the magics are registered on (always set once registered)."""
        if self.shell is None:
            raise UsageError("the monitoring magics are not attached to a shell")
        return self.shell

    def _options(self, spec: _MagicSpec, line: str, **kwargs: Any) -> tuple[Any, str]:
        """Parses the options of a magic (``kwargs``: ``parse_options``'s); an unknown
        option points at its help. Returns a dict-like ``Struct`` and the rest of the line."""
        short, long = spec.getopt()
        try:
            opts, rest = self.parse_options(line, short, *long, posix=False, **kwargs)
        except UsageError as e:
            # IPython appends the getopt spec ('( allowed: "r:n:qh" help)'): the help is clearer
            reason = re.split(r"\s*\(\s*allowed:", str(e))[0]
            raise UsageError(f"{spec.name}: {reason}; see {spec.name} --help") from None
        return opts, rest

    def _code(self, source: str, name: str) -> tuple[Callable[[], None], Any]:
        """Compiles a cell (IPython syntax allowed) into a function running it in the
        notebook's namespace, and its code object; syntax errors surface here, before
        any measure starts."""
        code = self._shell.compile(self._shell.transform_cell(source), f"<{name}>", "exec")
        namespace = self._shell.user_ns

        def run() -> None:
            exec(code, namespace)

        return run, code

    def _checked(self, source: str | None) -> str | None:
        """Turns IPython syntax into Python and compiles it, so that a syntax error
        points at the user's code only; None for blank code."""
        if source is None or not source.strip():
            return None
        code: str = self._shell.transform_cell(source)
        self._shell.compile(code, "<measure_time>", "exec")
        return code

    @no_var_expand
    @line_cell_magic
    @_documented(_MEASURE_TIME)
    def measure_time(self, line: str, cell: str | None = None) -> dict[str, Any] | None:
        from .benchmark import measure_time

        opts, stmt = self._options(_MEASURE_TIME, line, strict=False, preserve_non_opts=True)
        if _wants_help(opts, _MEASURE_TIME):
            return None
        repeat = _number_option(opts, "r", _MAGIC_REPEAT, int, 1)
        number = _number_option(opts, "n", None, int, 1)
        warmup = _number_option(opts, "w", 1, int, 0)
        max_time = _number_option(opts, "max-time", None, float, 1e-9)
        setup, body = (None, stmt) if cell is None else (stmt, cell)
        # As %timeit: the batch size is found unless given (or a budget sizes them).
        calibrated = number is None and max_time is None
        code = self._checked(body)
        if code is None:
            raise UsageError("nothing to time: give a statement or a cell")
        # measure_time compiles the code into its loop with a copy of the namespace as
        # globals: the code sees the notebook's variables and defines none there.
        res = measure_time(
            code,
            self._shell.user_ns,
            repeat=repeat,
            number=1 if number is None else number,
            warmup=warmup,
            max_time=max_time,
            setup=self._checked(setup),
            calibrate=calibrated,
        )
        if "q" not in opts:
            name = stmt.strip() if cell is None else "cell"
            print(format_line(name, {**res, "max_time": max_time, "calibrated": calibrated}))
        return res if "o" in opts else None

    @no_var_expand
    @cell_magic
    @_documented(_SPY)
    def spy(self, line: str, cell: str) -> dict[str, Any] | None:
        from ._memory.spy import check_delay, probe_names
        from .memory_peak import MIN_DELAY, start_spying_on

        opts, _ = self._options(_SPY, line)
        if _wants_help(opts, _SPY):
            return None
        delay = _number_option(opts, "d", 0.01, float, MIN_DELAY)
        probes = _all_values(opts, "probe")
        plot_file = _option(opts, "plot")
        try:
            check_delay(delay, "-d")
            probe_names(probes)
        except ValueError as e:  # NaN, inf; an unknown probe
            raise UsageError(str(e).replace("probes: unknown", "--probe: unknown")) from None
        if plot_file is not None and not plot_file.lower().endswith(".png"):
            raise UsageError(f"--plot must name a .png file, got {plot_file!r}")
        run, _ = self._code(cell, "spy")
        try:
            spy = start_spying_on(
                delay=delay, cuda="cuda" in opts, stacks="stacks" in opts, probes=probes
            )
        except (ImportError, RuntimeError, OSError) as e:  # no NVML, no permission...
            raise UsageError(f"the memory spy cannot start: {e}") from None
        try:
            run()
        finally:
            stats = spy.stop()
        _print_spy(stats)
        if plot_file is not None:
            _write_plot(stats, plot_file)
        elif "no-plot" not in opts:
            _plot_memory(self._shell, stats)
        return stats if "o" in opts else None

    @no_var_expand
    @cell_magic
    @_documented(_MONITOR)
    def monitor(self, line: str, cell: str) -> Any:
        from ._cli.common import check_outputs, save_outputs, text_writer
        from ._report.render_html import to_html
        from ._report.render_json import to_json
        from ._report.render_text import to_text
        from ._report.session import run_monitored

        opts, rest = self._options(_MONITOR, line, list_all=True)
        if _wants_help(opts, _MONITOR):
            return None
        if rest.strip():  # a word the magic does not take: refused before the cell runs
            raise UsageError(f"%%monitor: unexpected {rest.strip()!r}; see %%monitor --help")
        interval = _interval(opts, 0.005, 0.001)
        probes = _all_values(opts, "probe")
        outputs = {"--html": _path_option(opts, "html"), "--json": _path_option(opts, "json")}
        with _monitor_errors():  # before the cell runs, as the command line does
            check_outputs(outputs)

        def keep(report: Any) -> None:  # the files, also when the cell raised
            renders = {"--html": to_html, "--json": to_json}
            with _monitor_errors():  # one that fails goes to a fallback file named there
                save_outputs(
                    [
                        (option, path, text_writer(renders[option](report)))
                        for option, path in outputs.items()
                        if path is not None
                    ]
                )

        run, code = self._code(cell, "monitor")
        try:
            report = run_monitored(run, "cell", code, interval, probes, keep)
        except (ImportError, RuntimeError, OSError, ValueError) as e:
            if not getattr(e, "__traceback__", None) or not _from_cell(e):
                raise UsageError(f"%%monitor cannot run: {e}") from None
            raise
        if "q" not in opts:
            print(to_text(report))  # the summary has no line break of its own
        return report if "o" in opts else None

    @no_var_expand
    @cell_magic
    @_documented(_PROFILE_TREE)
    def profile_tree(self, line: str, cell: str) -> Any:
        from ._profiling.choices import check_view
        from ._sampling.view import FOLD_SHARE

        opts, _ = self._options(_PROFILE_TREE, line, strict=False)
        if _wants_help(opts, _PROFILE_TREE):
            return None
        view = _option(opts, "view") or "tree"
        try:
            check_view(view)
        except ValueError as e:
            raise UsageError(f"--view {view}: {e}") from None
        sort = _option(opts, "s")
        tree = view == "tree"
        options: dict[str, Any] = {
            "sort_key": _sort_key(sort or ("cumulative" if tree else "line")),
            "max_depth": _number_option(opts, "max-depth", None, int, 0),
            "hide_stdlib": "hide-stdlib" in opts,
        }
        fold = _number_option(opts, "fold-share", FOLD_SHARE, float, 0)
        if fold > 1:
            raise UsageError(f"--fold-share must be in [0, 1], got {fold!r}")
        fold = 0.0 if "all" in opts else fold
        width = _number_option(opts, "w", 60, int, 10)
        interval = _interval(opts)
        run, _ = self._code(cell, _CELL_NAME)
        if not _wants_cprofile(opts, tree, sort):
            result = _sample_cell(run, interval)
            print(result.to_text(fold_share=fold, show_all="show-library" in opts,
                                 max_depth=options["max_depth"]), end="")  # fmt: skip
            return result if "o" in opts else None
        from .profiling import to_tree_text

        root = _cprofile_cell(run)
        # The tree starts at the cell: the wrapper running it is left out.
        options["focus"] = f"<{_CELL_NAME}>:1:<module>"
        if tree:
            every = "show-library" in opts
            print(
                to_tree_text(root, program="the cell", fold_share=fold, show_all=every, **options)
            )
        else:
            print(root.to_text(fct_width=width, **options))
        return root if "o" in opts else None


def _wants_cprofile(opts: dict[str, Any], tree: bool, sort: str | None) -> bool:
    """Whether ``--cprofile`` was given or implied by an option only cProfile has (as for
    ``profile``): the reference view, a sort other than cumulative, ``--hide-stdlib``."""
    return (
        "cprofile" in opts
        or not tree
        or "hide-stdlib" in opts
        or (sort is not None and sort not in ("cumulative", "cumtime"))
    )


def _interval(
    opts: dict[str, Any], default: float | None = None, minimum: float | None = None
) -> float:
    """``--interval``, checked as the commands check it (the sampler's by default)."""
    from ._sampling.rates import DEFAULT_INTERVAL, MIN_INTERVAL, check_interval

    least = MIN_INTERVAL if minimum is None else minimum
    interval = _number_option(opts, "interval", default or DEFAULT_INTERVAL, float, least)
    try:
        return check_interval(interval, "--interval", minimum=least)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _sample_cell(run: Callable[[], None], interval: float) -> Any:
    """Runs the cell under the sampler, its ``<module>`` at the root of the main thread's
    tree (this function and ``run`` are left out)."""
    import sys

    from ._report.sampling import Sampling
    from ._sampling.frames import depth

    sampler = Sampling(interval, program="the cell")
    sampler.start(skip_outer=depth(sys._getframe()) + 1)
    try:
        run()
    finally:
        result = sampler.stop()
    return result


def _cprofile_cell(run: Callable[[], None]) -> Any:
    """Runs the cell under cProfile and returns the root of its call graph."""
    from .profiling import profile, profile2graph

    stats = profile(run)[0]
    # The file name only in the call tree's labels.
    return profile2graph(stats, clean_text=lambda text: text.split("/")[-1])[0]


# The file name of the cell in the call tree.
_CELL_NAME = "cell"


@contextlib.contextmanager
def _monitor_errors() -> Iterator[None]:
    """The command line's refusal of an output file (checked before the cell runs, or
    failing once written) as the magic's one-line error."""
    from ._cli.common import CommandError

    try:
        yield
    except CommandError as e:
        raise UsageError(f"%%monitor: {e}") from None


def _from_cell(error: BaseException) -> bool:
    """Tells whether an exception was raised by the cell's code (not by the tool)."""
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<monitor"):
            return True
        tb = tb.tb_next
    return False


def _sort_key(name: str) -> str:
    """Checks ``-s NAME`` against the sort keys of the call tree."""
    from ._profiling.sorting import sort_function

    try:
        sort_function(name)
    except NotImplementedError as e:
        raise UsageError(f"-s {name}: {e}") from None
    return name


def _print_spy(stats: Any) -> None:
    """Prints the growth table (with --stacks), the summary and what the cell added."""
    from ._memory.where import where_text

    cpu = stats["cpu"]
    if cpu.where is not None:
        print(where_text(cpu.where, 10))
    print(
        f"{stats}\nthe cell added {format_bytes(cpu.max_peak - cpu.begin)} at its peak "
        f"and kept {format_bytes(cpu.end - cpu.begin)}"
    )


def _figure(stats: Any) -> Any:
    """The memory curve on a bare Figure (no pyplot: no global state, nothing left open)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ._memory.plot import plot_memory

    fig = Figure(figsize=(8, 3.5))
    FigureCanvasAgg(fig)
    plot_memory(stats, ax=fig.add_subplot())
    fig.tight_layout()
    return fig


def _write_plot(stats: Any, path: str) -> None:
    """Writes the memory curve to ``path`` and says where (any front end)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib: pip install 'onnxrt-backend-dev[plot]'")
    try:
        _figure(stats).savefig(path, format="png")
    except OSError as e:
        raise UsageError(f"--plot {path}: {e.strerror or e}") from None
    print(f"memory curve written to {path}")


def _plot_memory(shell: Any, stats: Any) -> None:
    """Shows the memory curve as a PNG, when the front end displays images (a notebook,
    not a terminal: there the text summary is all, and ``--plot FILE.png`` writes the
    curve) and matplotlib is installed."""
    if importlib.util.find_spec("matplotlib") is None:
        return
    # Terminal IPython prints an image as ``<IPython.core.display.Image object>``.
    if any(c.__name__ == "TerminalInteractiveShell" for c in type(shell).__mro__):
        print("(the memory curve is drawn in notebooks; --plot FILE.png writes it here)")
        return
    if "image/png" not in getattr(getattr(shell, "display_formatter", None), "active_types", ()):
        return  # a front end that draws no image
    from IPython.display import Image, display

    buffer = io.BytesIO()
    _figure(stats).savefig(buffer, format="png")
    display(Image(data=buffer.getvalue(), format="png"))


def register_magics(ipython: Any) -> None:
    """Registers the magics on an IPython shell.

    :param ipython: the shell, as given to ``load_ipython_extension``
    """
    ipython.register_magics(MonitoringMagics)
