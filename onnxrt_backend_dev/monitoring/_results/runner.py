"""Runs programs several times in child processes, interleaved (A B A B ...), each run
of a Python program sampled (by the observer from outside where this machine allows it,
:func:`observed`, else in-process, :mod:`.sampled_child`) or under cProfile, and turns
the runs into results. A program is ``python old.py args``, ``python -m package args``,
``old.py`` (run with this interpreter) or any other command (timed, not profiled).

Each run is a process group of its own under the command's supervisor
(``_run.supervise``): ended past its timeout, sent SIGINT, SIGTERM and SIGHUP (which
stop the runs, ``Runs.stopped`` naming the signal), dying with the command. Its profile
comes back through a temporary folder removed afterwards (by the janitor if need be).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import RunFailed, Stopped
from .._profiling.load import read_profile_file
from .._run.program import last_line, run_child, run_rounds, supervised
from .._run.supervise import Supervisor
from .._validate import check_choice, check_int, check_number
from .payloads import (
    memory_data,
    merge_sampled,
    profile_data,
    report_data,
    timing_data,
    timing_series,
)

# Run in the child: profiles the program, writes its stats and its wall time even when it
# raises or exits, then exits with the program's code. Standard library only, so that
# any Python interpreter can run it.
_BOOT = r"""
import cProfile, json, marshal, os, runpy, sys, time
try:
    import resource
except ImportError:  # Windows
    resource = None
def maxrss():
    # Linux counts kibibytes, macOS bytes.
    if resource is None:
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024
begin = maxrss()
out, timer, how, target = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sys.argv = [target, *sys.argv[5:]]
if how == "path":
    sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
if timer == "cpu":
    # The thread's CPU time: what a busy machine's preemption does not inflate.
    prof = cProfile.Profile(getattr(time, "thread_time", time.process_time))
else:
    prof = cProfile.Profile()
def program():
    # The program's code called as a function made from it, not through runpy's exec:
    # cProfile keys every exec by one name, and importlib's exec of each imported module
    # would share the program's callers (its tree would cut it between them).
    # A module found as sampled_child._code finds it (python -m's rule).
    import importlib.util, types
    spec = None
    if how == "module":
        spec = importlib.util.find_spec(target)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(target + ".__main__")
        if spec is None or not hasattr(spec.loader, "get_code"):
            raise SystemExit("No module named " + target)
        body = spec.loader.get_code(spec.name)
        name = spec.origin
    elif os.path.isfile(target) and not target.endswith((".zip", ".pyz")):
        with open(target, "rb") as f:
            body = compile(f.read(), target, "exec")
        name = target
    else:  # a folder or an archive with a __main__.py
        return lambda: runpy.run_path(target, run_name="__main__")
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=name, __cached__=None, __builtins__=__builtins__, __spec__=spec,
        __loader__=getattr(spec, "loader", None), __package__=getattr(spec, "parent", None))
    sys.modules["__main__"] = main
    sys.argv[0] = name
    return types.FunctionType(body, main.__dict__)
code = 0
start = time.perf_counter()
try:
    run = program()
    prof.enable()
    run()
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if not isinstance(e.code, (int, type(None))):  # as Python prints sys.exit("message")
        print(e.code, file=sys.stderr)
except BaseException:
    import traceback
    traceback.print_exc()
    code = 1
finally:
    prof.disable()
    wall = time.perf_counter() - start
prof.create_stats()
with open(out + ".prof", "wb") as f:
    marshal.dump(prof.stats, f)
with open(out + ".json", "w") as f:
    json.dump({"wall": wall, "exit": code, "begin": begin, "peak": maxrss()}, f)
sys.exit(code)
"""

# Run in the child of a sampled run: the package's sampler (see .sampled_child).
SAMPLED_BOOT = (
    "import sys\n"
    "from onnxrt_backend_dev.monitoring._results.sampled_child import main\n"
    "sys.exit(main(sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[5], sys.argv[6], "
    "sys.argv[7:], sys.argv[4]))\n"
)
# cProfile's clocks: the thread's CPU time, or the wall clock (cProfile's default).
TIMERS = ("cpu", "wall")
PROFILERS = ("sampled", "cprofile")
# The sampler's interval in the runs of compare --a/--b and profile --repeat: 1 ms in the
# program (each sample is its handler's work), 0.25 ms from outside (18 % of a core beside
# the program). A path is as good as its samples: 25 a run of a 25 ms caller hid a 40 %
# change in 2 of 20 comparisons at load 1; 100 named it in 20/20.
RUN_INTERVAL = 0.001
OBSERVED_INTERVAL = 0.00025
# The start of the name of the runs' temporary folder.
_FOLDER_PREFIX = "onnxrt-monitoring-runs-"

__all__ = ["ChildRun", "Program", "Run", "RunFailed", "Runs", "run_interleaved", "run_once"]


@dataclass(frozen=True)
class Program:
    """How to run a program.

    :param command: the command line, split
    :param python: the interpreter, None for a command that is not Python
    :param how: ``path`` (a script) or ``module`` (``-m``)
    :param target: the script or the module
    :param args: the program's arguments
    :param profiler: ``sampled`` or ``cprofile``
    :param interval: the sampler's seconds between samples, None for the collector's
        default (:data:`RUN_INTERVAL` in the program, :data:`OBSERVED_INTERVAL` outside)
    :param sampler: the sampler's timer (``prof``, ``real``, ``thread``)
    :param collector: ``auto`` (the observer where this machine allows it and the
        program runs this interpreter, else in-process), ``observer`` or ``in-process``
    """

    command: tuple[str, ...]
    python: str | None = None
    how: str = "path"
    target: str = ""
    args: tuple[str, ...] = ()
    profiler: str = "cprofile"
    interval: float | None = None
    sampler: str = "prof"
    collector: str = "auto"

    @property
    def profiled(self) -> bool:
        """Whether runs are profiled (a Python program)."""
        return self.python is not None

    def argv(self, out: str, timer: str = "cpu") -> list[str]:
        """The command line of one run, writing into ``out`` when profiled.

        :param out: the start of the names of the run's files
        :param timer: cProfile's clock, ``cpu`` (the thread's CPU time) or ``wall``
        """
        if self.python is None:
            return list(self.command)
        if self.profiler == "sampled":
            return [self.python, "-c", SAMPLED_BOOT, out, repr(self.interval or RUN_INTERVAL),
                    self.sampler,
                    self.collector, self.how, self.target, *self.args]  # fmt: skip
        return [self.python, "-c", _BOOT, out, timer, self.how, self.target, *self.args]


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") or word == sys.executable


def parse_program(
    command: str | Sequence[str], profiler: str = "cprofile", interval: float | None = None
) -> Program:
    """Reads a program given as a command line.

    :param command: ``"python old.py -x"``, ``"python -m pkg"``, ``"old.py"`` or any command
    :param profiler: ``sampled`` or ``cprofile``, for a Python program
    :param interval: the sampler's seconds between samples, None for the default
    :raises BadValue: an empty command, or ``python`` with nothing to run
    """
    from .._errors import BadValue

    check_choice("profiler", profiler, PROFILERS)
    words = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    if not words:
        raise BadValue(f"the program must be a command line, got {command!r}")
    if words[0].endswith(".py"):
        python, how, rest = sys.executable, "path", words
    elif not _is_python(words[0]):
        return Program(tuple(words))
    elif len(words) < 2:
        raise BadValue(f"the program {command!r} names python but nothing to run")
    elif len(words) >= 3 and words[1] == "-m":
        python, how, rest = shutil.which(words[0]) or words[0], "module", words[2:]
    elif words[1].startswith("-"):  # python -c ...: a command, not profiled
        return Program(tuple(words))
    else:
        python, how, rest = shutil.which(words[0]) or words[0], "path", words[1:]
    return Program(tuple(words), python, how, rest[0], tuple(rest[1:]), profiler, interval)


@dataclass
class Run:
    """One run: its wall seconds and, when profiled, its validated stats and its memory
    high-water mark (``ru_maxrss``) before and after the program, in bytes."""

    wall: float
    stats: dict[Any, Any] | None = None
    begin: float | None = None
    peak: float | None = None
    sampled: dict[str, Any] | None = None


@dataclass
class Runs:
    """The runs of each program, filled as they end.

    :param runs: each program's runs
    :param stopped: the signal that stopped the runs early (the run it cut not kept)
    """

    runs: list[list[Run]]
    stopped: int | None = None


@dataclass(frozen=True)
class ChildRun(Program):
    """One of the tool's own commands run in a child process (``run --repeat``, ``time
    --processes``): ``command`` is what messages show, ``real`` the command line started.

    :param real: the command line started
    """

    real: tuple[str, ...] = ()

    def argv(self, out: str, timer: str = "cpu") -> list[str]:
        """The command line started (``out`` and ``timer`` are cProfile's: unused)."""
        return list(self.real)


def run_once(
    program: Program,
    folder: str,
    timeout: float,
    timer: str = "cpu",
    supervisor: Supervisor | None = None,
    show_output: bool = False,
) -> Run | None:
    """Runs the program once in a child process.

    :param program: what to run
    :param folder: a folder for the run's files
    :param timeout: seconds before the run is killed
    :param timer: cProfile's clock (see :data:`TIMERS`)
    :param supervisor: the command's (signals, janitor), None for one of its own
    :param show_output: show the program's output (else discarded, the end of its
        stderr kept for a failed run's message)
    :return: the run, None when a signal stopped it
    :raises RunFailed: it exited with an error or ran past ``timeout``
    """
    out = os.path.join(folder, "run")  # the folder is emptied after each run
    errors = out + ".stderr"
    with supervised(supervisor) as sup:
        if sup.stopped is not None:
            return None
        if observed(program):
            return _observed_run(program, errors, timeout, sup, show_output)
        start = time.perf_counter()
        ended = run_child(sup, program.argv(out, timer), errors, timeout, show_output)
        wall = time.perf_counter() - start
        if ended is None:
            return None  # cut short by the signal: not a run
    _check_ended(program, ended, errors, timeout)
    if not program.profiled:
        return Run(wall)
    try:
        with open(out + ".json", encoding="utf-8") as f:
            sidecar = json.load(f)
    except (OSError, ValueError) as e:
        raise RunFailed(
            f"{shlex.join(program.command)} left no readable profile ({e}): did it call "
            "os._exit, or is this package missing from its interpreter?"
        ) from None
    sampled = program.profiler == "sampled"
    return Run(
        _figure(sidecar.get("wall")) or wall,
        None if sampled else read_profile_file(out + ".prof").stats,
        _figure(sidecar.get("begin")),
        _figure(sidecar.get("peak")),
        _checked_profile(sidecar.get("profile"), program) if sampled else None,
    )


def observed(program: Program) -> bool:
    """Whether a run of ``program`` is sampled by the observer from outside: a sampled
    Python program, where this machine allows it, unless in-process is asked for.

    :param program: the program
    :raises BadValue: the observer is asked for and cannot run
    """
    if program.profiler != "sampled" or program.python is None:
        return False
    from .._observe.session import choose

    return choose(program.collector, python=program.python).observer


def _observed_run(
    program: Program,
    errors: str,
    timeout: float,
    sup: Supervisor,
    show_output: bool,
) -> Run | None:
    """:func:`run_once` sampled by the observer from outside: nothing of this tool in the
    program, the line inside a C call right, at the interval asked (the in-process
    sampler's CPU timer ticks once per kernel tick, 4 ms here)."""
    from .._observe.build import to_profile
    from .._observe.launch import observe_program
    from .._run.supervise import Exit
    from .._sampling.aggregate import Aggregator
    from .payloads import sampled_data

    head = [program.python or sys.executable]
    target = ["-m", program.target] if program.how == "module" else [program.target]
    agg = Aggregator()
    interval = program.interval or OBSERVED_INTERVAL
    with open(errors, "wb") as err:
        quiet = subprocess.DEVNULL if not show_output else None
        run = observe_program(
            [*head, *target, *program.args], interval, agg, supervisor=sup, timeout=timeout,
            group=True, stdin=quiet, stdout=quiet, stderr=err if quiet else None,
        )  # fmt: skip
    if sup.stopped is not None:
        return None  # cut short by the signal: not a run
    _check_ended(program, Exit(run.status, run.rusage, run.timed_out), errors, timeout)
    usage = run.rusage
    cpu = (usage.ru_utime + usage.ru_stime) if usage is not None else 0.0
    profile = to_profile(run.record, interval, run.wall, os.path.basename(program.target),
                         run.why, cpu, run.observer.samples)  # fmt: skip
    main = None
    if program.how == "path":
        # The script's code is named by its absolute path (Python >= 3.9): named back as
        # given, as the in-process sampler names it.
        path = os.path.abspath(program.target)
        main = program.target
        profile.stacks = [
            tuple(f._replace(file=main) if f.file == path else f for f in stack)
            for stack in profile.stacks
        ]
    _program_only(profile, main)
    # The memory as the observer read it (/proc): the first reading and the high-water
    # mark; the child's ru_maxrss may be this command's, copied by the fork.
    begin = agg.first_rss if agg.n else None
    peak = max(agg.last_hwm, agg.peak) if agg.n else None
    return Run(run.wall, None, begin, peak or None, sampled_data([profile], main=main))


def _program_only(profile: Any, main: str | None) -> None:
    """Leaves the interpreter's start and end (the main thread's stacks without the
    program's module: ``main``'s ``<module>``, or runpy's ``_run_module_as_main`` for
    ``-m``) out of ``profile``, as the in-process sampler does. The same on both sides,
    they only widen the family Holm corrects over: 150 functions of start-up beside the
    program's 40 hid a 15 % slower stage. The run's whole times still count them."""
    for thread in profile.threads:
        if not thread.is_main:
            continue
        keep: dict[int, list[float]] = {}
        for sid, row in thread.totals.items():
            stack = profile.stacks[sid]
            if main is not None:
                ours = any(f.file == main and f.name == "<module>" for f in stack)
            else:
                ours = any(f.name == "_run_module_as_main" for f in stack)
            if ours:
                keep[sid] = row
        if keep:  # a program the rule does not fit keeps everything
            thread.totals = keep
            thread.timeline = [e for e in thread.timeline if e[2] in keep]


def _check_ended(program: Program, ended: Any, errors: str, timeout: float) -> None:
    """Refuses (:class:`RunFailed`) a run past its timeout or exiting with an error, the
    end of its standard error (the file ``errors``) in the message."""
    if ended.timed_out:
        raise RunFailed(f"{shlex.join(program.command)} ran past its timeout of {timeout:g} s")
    if ended.code != 0:
        tail = last_line(errors)
        raise RunFailed(
            f"{shlex.join(program.command)} exited with {ended.code}"
            + (f": {tail}" if tail else "")
        )


def _checked_profile(data: Any, program: Program) -> dict[str, Any]:
    """The sampled payload a child wrote, checked (another process wrote it)."""
    from .._errors import ResultFormatError
    from .schema import check_profile

    try:
        check_profile("profile", data)
    except ResultFormatError as e:
        raise RunFailed(f"{shlex.join(program.command)} left a bad profile: {e}") from None
    assert isinstance(data, dict)
    return data


def _figure(value: Any) -> float | None:
    """A figure the child wrote, None unless a finite number >= 0 (it ran user code)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and 0 <= value < float("inf") else None


def _check_sampler(program: Program, timeout: float = 60.0) -> None:
    """Refuses (:class:`BadValue`), before any run, a program whose interpreter cannot
    import this package: the sampler runs inside the program's process."""
    from .._errors import BadValue

    if program.profiler != "sampled" or program.python in (None, sys.executable):
        return
    check = "import onnxrt_backend_dev.monitoring._results.sampled_child"
    try:
        done = subprocess.run(
            [program.python or "", "-c", check], stdin=subprocess.DEVNULL,
            capture_output=True, timeout=timeout, check=False,
        )  # fmt: skip
        ok = done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    if not ok:
        raise BadValue(
            f"{shlex.join(program.command)}: its interpreter {program.python!r} cannot import "
            f"onnxrt_backend_dev (the sampler runs in the program): install it there, run "
            f"{sys.executable!r} instead, or use --cprofile"
        )


def run_interleaved(
    programs: Sequence[Program],
    repeat: int,
    timeout: float = 600.0,
    max_time: float | None = None,
    on_run: Callable[[int, int], None] | None = None,
    timer: str = "cpu",
    supervisor: Supervisor | None = None,
    show_output: bool = False,
) -> Runs:
    """Runs each program ``repeat`` times, in rounds of one run of each (A B A B ...), so
    that a drift of the machine weighs on all of them alike.

    :param programs: what to run
    :param repeat: runs of each program
    :param timeout: seconds each run may take before it is killed
    :param max_time: stop starting rounds after this many seconds (two rounds at least)
    :param on_run: called with (round, program index) after each run
    :param timer: cProfile's clock (see :data:`TIMERS`)
    :param supervisor: the command's (its signals stop the runs), None for one of its own
    :param show_output: show the programs' output
    :return: the runs; ``stopped`` names the signal that stopped them early
    :raises RunFailed: a run failed
    """
    check_int("repeat", repeat, 1)
    check_choice("timer", timer, TIMERS)
    check_number("timeout", timeout, above=0)
    if max_time is not None:
        check_number("max_time", max_time, above=0)
    runs = Runs([[] for _ in programs])
    with supervised(supervisor) as sup, sup.folder(_FOLDER_PREFIX) as folder:

        def run_one(_round: int, i: int) -> bool:
            run = run_once(programs[i], folder, timeout, timer, sup, show_output)
            for name in os.listdir(folder):  # one run's files at a time on disk
                os.remove(os.path.join(folder, name))
            if run is not None:
                runs.runs[i].append(run)
            return run is not None

        if not run_rounds(run_one, repeat, len(programs), max_time, on_run):
            runs.stopped = sup.stopped
    return runs


def profile_result_data(
    runs: Sequence[Run], program: Program | None = None, timer: str = "cpu"
) -> dict[str, Any]:
    """The payload of a profile result from profiled runs.

    :param runs: runs of one program, all profiled
    :param program: the program, whose script is recorded as ``main``
    :param timer: the clock the runs were profiled with
    :raises BadValue: a run was not profiled
    """
    from .._errors import BadValue

    if runs and all(run.sampled is not None for run in runs):
        data = merge_sampled([run.sampled or {} for run in runs])
        if timer == "wall":
            data["timer"] = "wall"
        return data
    if any(run.stats is None for run in runs):
        raise BadValue("every run must be profiled to build a profile result")
    main = None
    if program is not None and program.profiled and program.how == "path":
        main = program.target  # runpy names the script's code by the path as given
    return profile_data([(run.stats or {}, run.wall) for run in runs], main=main, timer=timer)


def _side_result(
    runs: Sequence[Run], program: Program, timer: str = "cpu"
) -> tuple[str, dict[str, Any]]:
    """``(kind, data)`` of one program's runs: a report of its profile and memory peaks
    when profiled, else a timing of its wall time."""
    if not program.profiled:
        name = shlex.join(program.command)
        walls = [r.wall for r in runs]
        # Each run is a process of its own: the unit the timing is judged on.
        series = timing_series(name, walls, [1] * len(runs), processes=[1] * len(runs))
        return "timing", timing_data([series])
    profile = profile_result_data(runs, program, timer)
    if any(r.peak is None or r.begin is None for r in runs):
        return "report", report_data(profile=profile)
    memory = memory_data([{"cpu": {"peak": r.peak or 0.0, "begin": r.begin or 0.0}} for r in runs])
    return "report", report_data(profile=profile, memory=memory)


def compare_programs(
    a: str | Sequence[str],
    b: str | Sequence[str],
    repeat: int = 20,
    timeout: float = 600.0,
    max_time: float | None = None,
    alpha: float = 0.05,
    on_run: Callable[[int, int], None] | None = None,
    min_share: float | None = None,
    timer: str = "cpu",
    profiler: str = "sampled",
    interval: float | None = None,
    min_change: float | None = None,
    supervisor: Supervisor | None = None,
    counter: str | None = None,
    count_bytes: bool = False,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Runs two programs interleaved (A B A B ...) and compares them: their time, and for
    Python programs each function's and call path's time and the memory peak; or, with
    ``counter``, counts one run of each (see :func:`count_program`).

    :param a: the baseline's command line (``"python old.py"``, ``"old.py"``...)
    :param b: the new one's
    :param repeat: runs of each
    :param timeout: seconds each run may take
    :param max_time: stop starting rounds after this many seconds (two rounds at least)
    :param alpha: significance level (Holm-corrected across functions and paths)
    :param on_run: called with (round, program index) after each run
    :param min_share: figures under this share on both sides are not tested
    :param timer: ``cpu`` (the default: not what other processes take on a busy
        machine) or ``wall``; cProfile's clock with ``profiler="cprofile"``
    :param profiler: ``sampled`` (the default, about 1.1x the program's time) or
        ``cprofile`` (exact counts, about 2x)
    :param interval: the sampler's seconds between samples (see :class:`Program`)
    :param min_change: changes deemed negligible
    :param supervisor: the command's supervisor, None for one of its own
    :param counter: ``instructions``: one run of each counted by valgrind (``repeat``,
        ``max_time``, ``timer``, ``profiler`` and ``interval`` unused)
    :param count_bytes: with ``counter``, each function's allocated bytes too (a second
        run under DHAT)
    :return: ``(comparison, result of A, result of B)``, the results ready to save
    :raises RunFailed: a run failed or ran past ``timeout``
    :raises Stopped: a signal stopped the runs; ``done`` holds the results of A and B
        (None for a side without a run)
    """
    from .compare import MIN_CHANGE, MIN_SHARE, compare_results
    from .store import make_result

    programs = [parse_program(a, profiler, interval), parse_program(b, profiler, interval)]
    names = (shlex.join(programs[0].command), shlex.join(programs[1].command))
    if counter is not None:
        docs = _count_both(programs, timeout, on_run, supervisor, count_bytes)
        min_change = None  # a count changes beyond its noise, never by a share
    else:
        if programs[0].profiled != programs[1].profiled:
            from .._errors import BadValue

            raise BadValue("a and b must both be Python programs, or both other commands")
        for program in programs:
            _check_sampler(program)
        runs = run_interleaved(
            programs,
            repeat,
            timeout,
            max_time,
            on_run=on_run,
            timer=timer,
            supervisor=supervisor,
        )
        docs = []
        for program, side in zip(programs, runs.runs, strict=True):
            kind, data = _side_result(side, program, timer) if side else ("", {})
            docs.append(make_result(kind, data, ["compare", *program.command]) if side else None)
        if runs.stopped is not None:
            raise Stopped(runs.stopped, (docs[0], docs[1]))
    cmp = compare_results(
        docs[0],
        docs[1],
        names,
        alpha=alpha,
        min_share=MIN_SHARE if min_share is None else min_share,
        min_change=MIN_CHANGE if min_change is None else min_change,
    )
    return cmp, docs[0], docs[1]


def count_program(
    program: Program,
    folder: str,
    supervisor: Supervisor,
    timeout: float = 600.0,
    show_output: bool = False,
    count_bytes: bool = False,
) -> Any:
    """Counts one run of a program's instructions under valgrind: per Python function
    where its interpreter has perf trampolines (Python >= 3.12), else the whole run.

    :param program: what to run
    :param folder: a folder for the run's files
    :param supervisor: the command's supervisor
    :param timeout: seconds before the run is killed
    :param show_output: show the program's output
    :param count_bytes: each function's allocated bytes too (a second run, under DHAT)
    :return: the ``_count.valgrind.Counted``, None when a signal stopped it
    :raises CounterError: valgrind is missing or killed, the program forked
    :raises RunFailed: it exited with an error or ran past ``timeout``
    """
    from .._count.valgrind import Run, count, interpreter

    what = shlex.join(program.command)
    if program.python is None:
        run = Run(program.command, False, None, None, show_output, timeout, what)
        return count(run, folder, supervisor)
    found = interpreter(program.python)
    target = ["-m", program.target] if program.how == "module" else [program.target]
    run = Run([found.binary, *target, *program.args], found.per_function, None, None,
              show_output, timeout, what, count_bytes)  # fmt: skip
    counted = count(run, folder, supervisor)
    if counted is not None and not found.per_function:
        no_bytes = "; --count-bytes needs each function counted: no bytes counted"
        counted.notes.append(
            f"Python {found.version[0]}.{found.version[1]} has no perf trampolines (Python "
            ">= 3.12 built with them): the whole run counted, not each function"
            + (no_bytes if count_bytes else "")
        )
    return counted


def counted_result(program: Program, counted: Any) -> tuple[str, Any]:
    """``(kind, data)`` of a counted run: a profile counted per function, or a timing of
    the whole run (one execution).

    :param program: what ran
    :param counted: its ``Counted``
    """
    from .payloads import counted_profile_data, counted_series

    if counted.functions is None:
        summary = {"note": "; ".join(counted.notes)} if counted.notes else None
        series = counted_series(shlex.join(program.command), counted.total, 1, 0.0, summary)
        return "timing", timing_data([series])
    main = None
    if program.how == "path" and program.python is not None:
        # The script's code is named by its absolute path: named back as given.
        main = os.path.abspath(program.target)
    data = counted_profile_data(
        [(counted.functions, counted.total, counted.wall)], main=main,
        allocations=[counted.allocations],
        alloc_bytes=None if counted.alloc_bytes is None else [counted.alloc_bytes],
    )  # fmt: skip
    return "profile", data


def _count_both(
    programs: Sequence[Program],
    timeout: float,
    on_run: Callable[[int, int], None] | None,
    supervisor: Supervisor | None,
    count_bytes: bool = False,
) -> list[Any]:
    """One counted run of each program, as results ready to save and compare.

    :raises Stopped: a signal stopped the runs (what was counted in ``done``)
    """
    from .store import make_result

    docs: list[Any] = [None, None]
    with supervised(supervisor) as sup, sup.folder(_FOLDER_PREFIX) as folder:
        for i, program in enumerate(programs):
            counted = count_program(program, folder, sup, timeout, count_bytes=count_bytes)
            if counted is None:
                raise Stopped(sup.stopped or 15, (docs[0], docs[1]))
            kind, data = counted_result(program, counted)
            docs[i] = make_result(kind, data, ["compare", "--counter", *program.command])
            if on_run is not None:
                on_run(0, i)
    if docs[0]["kind"] != docs[1]["kind"]:
        from .._errors import BadValue

        raise BadValue(
            "A and B were not counted alike (one per function, one as a whole): run both "
            "with the same interpreter"
        )
    return docs
