"""Tests for where the memory peak happened: the in-process recorder's running stacks
(``_sampling/recorder.py``), the attribution and its renderers (``_memory/where.py``)
and the views bound to the results (``_memory/views.py``),
``stacks=True`` and ``spy --where``."""

from __future__ import annotations

import array
import functools
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._cli.spy_where import flame_format
from onnxrt_backend_dev.monitoring._memory import frames as _frames
from onnxrt_backend_dev.monitoring._memory import where as _where
from onnxrt_backend_dev.monitoring._memory.plot import plot_memory
from onnxrt_backend_dev.monitoring._memory.series import Monitor, SpyResult
from onnxrt_backend_dev.monitoring._memory.views import attach
from onnxrt_backend_dev.monitoring._memory.where import (
    where_collapsed,
    where_speedscope,
    where_text,
)
from onnxrt_backend_dev.monitoring._sampling.aggregate import NO_STACK
from onnxrt_backend_dev.monitoring._sampling.frames import decode_key, line_of, walk
from onnxrt_backend_dev.monitoring._sampling.recorder import (
    StackSamples,
    is_idle,
    pick_thread,
    spy_recorder,
)
from onnxrt_backend_dev.monitoring._sampling.timer import Ticker
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame
from onnxrt_backend_dev.monitoring.memory_peak import MemorySpy, spy_call

pytest_plugins = ["pytester"]

MIB = 2**20
OWN = os.path.dirname(_where.__file__)  # a file of this tool
LIB = "/usr/lib/python3.11/site-packages/numpy/core/numeric.py"

MAIN = SampledFrame("main", "script.py", 28, 30)
GROUP = SampledFrame("groupby_sum", "script.py", 10, 12)
ONES = SampledFrame("ones", LIB, 180, 200)
LOAD = SampledFrame("load", "script.py", 3, 5)
STOP = SampledFrame("MemorySpy.stop", os.path.join(OWN, "x.py"), 1, 1)


def _samples(
    times: list[float], ids: list[int], stacks: list[tuple[SampledFrame, ...]]
) -> StackSamples:
    return StackSamples(array.array("d", times), array.array("q", ids), stacks, 0)


# -- attribution on fake series and stacks (no clock) -----------------------------------

STACKS = [(MAIN, LOAD), (MAIN, GROUP, ONES), (MAIN,), (MAIN, STOP)]
# The spy's ticks: (time, peak of the interval, memory at its end).
POINTS = [
    (0.0, 10 * MIB, 10 * MIB),
    (1.0, 30 * MIB, 30 * MIB),  # load: +20
    (2.0, 40 * MIB, 40 * MIB),  # load: +10
    (3.0, 100 * MIB, 20 * MIB),  # groupby_sum (in numpy's ones): +60, freed at once
    (4.0, 25 * MIB, 25 * MIB),  # main: +5 from the end of the previous interval
    (5.0, 25 * MIB, 25 * MIB),  # the spy stopping: nothing
]
SAMPLES = _samples([0.5, 1.5, 2.5, 3.5, 4.5], [0, 0, 1, 2, 3], STACKS)


def test_each_interval_gets_the_first_sample_taken_after_it_began() -> None:
    att = _where.attribute(POINTS, SAMPLES, peak_after=2.0)
    rows = {r.function: r for r in att.functions}
    # (growth up to the peak, net growth), each the function's own
    assert (rows["load"].to_peak, rows["load"].net) == (30 * MIB, 30 * MIB)
    # the peak's +60, then -80 once freed: up to the peak +60, net -20
    assert (rows["groupby_sum"].to_peak, rows["groupby_sum"].net) == (60 * MIB, -20 * MIB)
    # numpy's frame is on the stack, never the innermost *user* frame
    assert (rows["ones"].to_peak, rows["ones"].net) == (0, 0)
    assert (rows["main"].to_peak, rows["main"].net) == (0, 5 * MIB)
    assert rows["groupby_sum"].highest == 100 * MIB and rows["load"].highest == 40 * MIB
    assert rows["main"].highest == 100 * MIB and rows["main"].ticks == 5
    # by decreasing growth up to the peak
    assert [r.function for r in att.functions] == ["groupby_sum", "load", "main", "ones"]
    assert att.peak_stack == (MAIN, GROUP, ONES)
    assert att.peak_labels() == (
        "main (script.py:30)",
        "groupby_sum (script.py:12)",
        "ones (numeric.py:200)",
    )


def test_an_interval_without_sample_takes_the_next_one() -> None:
    # A C call holding the GIL starves the sampler: the sample after it shows its caller.
    samples = _samples([0.5, 3.2], [0, 1], STACKS)
    att = _where.attribute(POINTS[:4], samples, peak_after=2.0)
    rows = {r.function: r for r in att.functions}
    assert rows["groupby_sum"].to_peak == (10 + 60) * MIB  # intervals 2 and 3
    assert rows["groupby_sum"].net == (10 - 20) * MIB
    assert att.peak_stack == (MAIN, GROUP, ONES)


def test_after_the_last_sample_the_last_one_counts_and_no_sample_means_no_stack() -> None:
    samples = _samples([0.5], [1], STACKS)
    assert _where.stack_at(samples, 10.0) == 1
    empty = _samples([], [], [])
    assert _where.stack_at(empty, 0.0) == NO_STACK
    att = _where.attribute(POINTS, empty, peak_after=2.0)
    assert (att.functions, att.peak_stack, att.growth_stacks()) == ([], None, [])


def test_recursion_counts_once_and_unknown_stacks_are_skipped() -> None:
    rec = (MAIN, GROUP, GROUP, GROUP)
    samples = _samples([0.5, 1.5], [0, NO_STACK], [rec])
    att = _where.attribute(POINTS[:3], samples, peak_after=0.0)
    rows = {r.function: r for r in att.functions}
    assert rows["groupby_sum"].net == 20 * MIB and rows["groupby_sum"].ticks == 1
    # the interval without a stack is unattributed, and the sums still hold
    assert att.unattributed == (10 * MIB, 10 * MIB)
    assert att.totals() == (30 * MIB, 30 * MIB)
    assert att.peak_stack == rec


def test_the_user_view_drops_the_runner_above_and_the_tool_below() -> None:
    runner = SampledFrame("_run_code", "<frozen runpy>", 1, 1)
    cli = SampledFrame("run", os.path.join(OWN, "cmd.py"), 1, 3)
    assert _frames.user_view((runner, cli, MAIN, GROUP, ONES, STOP)) == (MAIN, GROUP, ONES)
    assert _frames.user_view((runner, cli, STOP)) == ()  # the tool's own work
    test = SampledFrame("test_cli", "tests/test_x.py", 8, 9)  # a test running the CLI
    assert _frames.user_view((test, cli, runner, MAIN, GROUP)) == (MAIN, GROUP)
    assert _frames.user_view((runner, ONES)) == (runner, ONES)  # library only: kept
    # spy --where -m json.tool: the tool runs library code only, which is what is shown
    lib = SampledFrame("main", "/usr/lib/python3.11/json/tool.py", 19, 40)
    assert _frames.user_view((test, cli, runner, lib, ONES, STOP)) == (lib, ONES)
    assert _frames.innermost_user((MAIN, GROUP, ONES)) == 1
    assert _frames.innermost_user((runner, ONES)) == 1


def test_the_peak_line_names_the_innermost_user_frames() -> None:
    line = _frames.peak_line(427 * MIB, 1.25, (MAIN, GROUP, ONES))
    assert line == "peak 427 MiB at 1.25 s in groupby_sum (script.py:12) <- main (script.py:30)"
    assert _frames.peak_line(MIB, 0.0, None) == "peak 1.00 MiB at 0.00 s (no stack sampled)"
    comp = SampledFrame("groupby_sum.<locals>.<listcomp>", "script.py", 11, 11)
    assert _frames.peak_line(MIB, 0.5, (MAIN, GROUP, comp), depth=5) == (
        "peak 1.00 MiB at 0.50 s in groupby_sum (script.py:11) <- main (script.py:30)"
    )


# -- renderers ---------------------------------------------------------------------------


@functools.cache
def _attribution() -> _where.MemoryProfile:
    return _where.attribute(POINTS, SAMPLES, peak_after=2.0)


def test_text_shows_the_top_functions_with_units() -> None:
    text = where_text(_attribution(), top=2)
    lines = text.splitlines()
    assert lines[0] == "memory growth by function (top 2 of 4)"
    assert lines[1].split() == ["to", "peak", "net", "highest", "function"]
    assert where_text(_attribution(), top=10).splitlines()[0] == (
        "memory growth by function (4 functions)"
    )
    assert lines[2].split() == [
        "60.0",
        "MiB",
        "-20.0",
        "MiB",
        "100",
        "MiB",
        "groupby_sum",
        "(script.py:10)",
    ]
    assert "load (script.py:3)" in lines[3]
    # the total: peak - begin (100 - 10) and end - begin (25 - 10)
    assert lines[4].split() == [
        "90.0",
        "MiB",
        "15.0",
        "MiB",
        *["total:", "peak", "-", "begin,", "end", "-", "begin"],
    ]
    assert len(lines) == 5
    with pytest.raises(ValueError, match="top must be >= 1, got 0"):
        where_text(_attribution(), top=0)
    # the model's convenience method is the same renderer
    assert _attribution().to_text(2) == text


def test_a_function_name_with_a_line_break_stays_on_its_row() -> None:
    # GIVEN a function whose name holds a newline (an exec'd code object can have one)
    odd = SampledFrame("f\nx", "s.py", 1, 1)
    att = _where.attribute(POINTS[:2], _samples([0.5], [0], [(odd,)]))
    # THEN the table keeps one row for it, escaped, and the flame file keeps it too
    rows = where_text(att).splitlines()
    assert rows[2].endswith("f\\nx (s.py:1)") and len(rows) == 4
    assert where_collapsed(att) == f"f x (s.py:1) {20 * MIB}\n"


def test_the_sums_of_the_columns_are_the_series_own_differences() -> None:
    # GIVEN a series rising, falling and rising again over three functions and a gap
    points = [
        (0.0, 50.0, 50.0),
        (1.0, 80.0, 70.0),  # a: +20 net, its peak 80
        (2.0, 90.0, 40.0),  # b: -30 net, the peak (90) in it: +20 up to the peak
        (3.0, 60.0, 60.0),  # no stack: +20
        (4.0, 65.0, 30.0),  # a: -30
    ]
    a, b = SampledFrame("a", "s.py", 1, 2), SampledFrame("b", "s.py", 5, 6)
    samples = _samples([0.1, 1.1, 2.1, 3.1], [0, 1, NO_STACK, 0], [(a,), (b,)])
    att = _where.attribute(points, samples)
    rows = {r.function: r for r in att.functions}
    # THEN net growth sums to last - first and growth up to the peak to peak - first
    assert att.totals() == (30.0 - 50.0, 90.0 - 50.0)
    assert (rows["a"].net, rows["a"].to_peak) == (20.0 - 30.0, 20.0)
    assert (rows["b"].net, rows["b"].to_peak) == (-30.0, 20.0)
    assert att.unattributed == (20.0, 0.0)
    # AND highest is the highest memory reached while the function ran
    assert (rows["a"].highest, rows["b"].highest) == (80.0, 90.0)
    # AND no column adds rises without falls: the many-times freed loop counts its net
    loop = [(float(t), 150.0 if t % 2 else 50.0, 50.0) for t in range(101)]
    one = _samples([0.0], [0], [(a,)])
    row = _where.attribute(loop, one).functions[0]
    assert (row.net, row.to_peak, row.highest) == (0.0, 100.0, 150.0)


def test_collapsed_stacks_weigh_bytes_and_escape_separators() -> None:
    text = where_collapsed(_attribution())
    # weighed by the growth up to the peak: main's own +5 came after it
    assert text.splitlines() == [
        f"main (script.py:28);load (script.py:3) {30 * MIB}",
        f"main (script.py:28);groupby_sum (script.py:10);ones ({LIB}:180) {60 * MIB}",
    ]
    odd = SampledFrame("f\nx", "a;b.py", 1, 1)
    att = _where.attribute(POINTS[:2], _samples([0.5], [0], [(odd,)]))
    assert where_collapsed(att) == f"f x (a:b.py:1) {20 * MIB}\n"


def test_speedscope_is_a_sampled_profile_in_bytes() -> None:
    doc = json.loads(where_speedscope(_attribution(), name="run"))
    profile = doc["profiles"][0]
    assert (profile["type"], profile["unit"], profile["name"]) == ("sampled", "bytes", "run")
    assert profile["weights"] == [30 * MIB, 60 * MIB]
    assert profile["endValue"] == 90 * MIB  # peak - begin
    names = [doc["shared"]["frames"][i]["name"] for i in profile["samples"][1]]
    assert names == ["main", "groupby_sum", "ones"]


def test_the_monitor_dict_and_the_result_text_carry_the_stacks() -> None:
    mon = Monitor("cpu")
    for t, peak, end in POINTS:
        mon.update(end, peak, t)
    attach(mon, SAMPLES)
    assert mon.peak_time == 3.0 and mon.peak_prev_timestamp == 2.0
    assert mon.peak_stack == _attribution().peak_labels()
    d = mon.to_dict(MIB)
    assert d["peak"] == 100 and d["peak_time"] == 3.0
    assert d["peak_stack"] == list(mon.peak_stack or ())
    assert d["functions"][0] == {
        "function": "groupby_sum",
        "file": "script.py",
        "line": 10,
        "growth_to_peak": 60.0,
        "net_growth": -20.0,
        "highest": 100.0,
        "ticks": 1,
    }
    assert d["unattributed"] == {"net_growth": 0.0, "growth_to_peak": 0.0}
    json.dumps(d, allow_nan=False)
    text = str(SpyResult(cpu=mon, duration=5.0))
    assert text.splitlines()[-1] == (
        "peak 100 MiB at 3.00 s in groupby_sum (script.py:12) <- main (script.py:30)"
    )


# -- the monitor dates its peak ----------------------------------------------------------


def test_peak_time_is_the_tick_that_first_reached_the_peak() -> None:
    mon = Monitor()
    for t, v in [(10.0, 5 * MIB), (11.0, 50 * MIB), (12.0, 200 * MIB), (13.0, 200 * MIB + 4096)]:
        mon.update(v, None, t)
    # the plateau gaining a page later is still dated from when it was reached
    assert (mon.peak_time, mon.peak_prev_timestamp, mon.max_peak) == (2.0, 11.0, 200 * MIB + 4096)
    mon.update(100 * MIB, 300 * MIB, 14.0)  # a later, higher spike moves it
    assert (mon.peak_time, mon.peak_prev_timestamp) == (4.0, 13.0)
    back = Monitor.from_state(*mon.to_state())
    assert (back.peak_time, back.peak_prev_timestamp) == (4.0, 13.0)
    back.add_final_peak(400 * MIB, 15.0)
    assert (back.max_peak, back.peak_time, list(back.series)[-1]) == (
        400 * MIB,
        5.0,
        (15.0, 400 * MIB),
    )


# -- the sampler, with fake frames and clock ---------------------------------------------


def _sampler_threads_end(timeout: float = 5.0) -> bool:
    """True once no sampler thread is left (one ends when its last sleep does)."""
    deadline = time.monotonic() + timeout
    while any(t.name == "onnxrt-sampler" for t in threading.enumerate()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _frame(code: Any, back: Any = None, lasti: int = 0) -> Any:
    return SimpleNamespace(f_code=code, f_lasti=lasti, f_back=back)


def _user() -> None:
    pass


def _other() -> None:
    pass


IDLE_CODE = threading.Event.wait.__code__  # a thread waiting in threading.py


def test_the_walk_goes_from_the_innermost_frame_and_cuts_deep_stacks() -> None:
    codes: dict[int, Any] = {}
    inner = _frame(_other.__code__, _frame(_user.__code__, lasti=4), lasti=2)
    key = walk(inner, codes)
    assert key == (id(_other.__code__), 2, id(_user.__code__), 4)
    assert codes == {id(_other.__code__): _other.__code__, id(_user.__code__): _user.__code__}
    frames = decode_key(key, codes)  # outermost first
    assert [f.name for f in frames] == ["_user", "_other"]
    deep = None
    for _ in range(50):
        deep = _frame(_user.__code__, deep)
    assert len(walk(deep, codes, max_depth=10)) == 20


def test_offsets_become_the_lines_the_interpreter_reports() -> None:
    frame = sys._getframe()
    here = frame.f_lineno  # the offset read next is on the following line
    lasti, lineno = frame.f_lasti, frame.f_lineno
    assert line_of(frame.f_code, lasti) == lineno == here + 1
    assert line_of(_user.__code__, -1) == _user.__code__.co_firstlineno  # not started


def test_the_running_thread_is_preferred_to_idle_and_unchanged_ones() -> None:
    codes = {id(c): c for c in (_user.__code__, _other.__code__, IDLE_CODE)}
    # the stacks by id, as the recorder's table gives them
    keys = [
        (id(_user.__code__), 0),
        (id(IDLE_CODE), 2, id(_user.__code__), 0),
        (id(_other.__code__), 0),
    ]
    busy, idle, moved = range(3)
    assert is_idle(keys[idle], codes) and not is_idle(keys[busy], codes) and is_idle((), codes)

    def waits(sid: int) -> bool:
        return is_idle(keys[sid], codes)

    assert pick_thread({1: idle, 2: busy}, {}, 1, waits) == 2
    assert pick_thread({1: busy, 2: moved}, {1: busy, 2: busy}, 1, waits) == 2
    assert pick_thread({1: busy, 2: busy}, {1: busy, 2: busy}, 1, waits) == 1
    assert pick_thread({}, {}, 1, waits) is None
    # every thread waits (Event.wait, a join): none is credited with the memory's moves
    assert pick_thread({1: idle, 2: idle}, {1: busy}, 1, waits) is None


def test_the_sampler_interns_stacks_and_stays_bounded() -> None:
    clock = iter(float(i) for i in range(1000))
    frames = [{1: _frame(_user.__code__, lasti=2 * (i % 3))} for i in range(100)]
    feed = iter(frames)
    recorder = spy_recorder(
        0.01,
        max_points=8,
        max_stacks=2,
        clock=lambda: next(clock),
        current_frames=lambda: next(feed),
    )
    for _ in range(100):
        recorder.sample()
    snap = recorder.running_samples()
    assert recorder.running is not None
    assert len(snap.times) < 8 and recorder.running.stride > 1
    # the third stack came with the table full: kept as its outer frames, counted
    assert len(snap.stacks) == 3 and snap.dropped == 1
    line = line_of(_user.__code__, 0)
    assert snap.stacks[0] == (SampledFrame("_user", __file__, _user.__code__.co_firstlineno, line),)
    assert list(snap.times) == sorted(snap.times)
    with pytest.raises(ValueError, match="max_points must be >= 2, got 1"):
        MemorySpy(os.getpid(), stacks=True, max_points=1)


def test_the_sampler_thread_starts_stops_and_skips_itself() -> None:
    ticker = Ticker(spy_recorder(0.001, 1000), "thread")
    ticker.start()
    time.sleep(0.05)
    ticker.stop()
    ticker.stop()  # idempotent
    snap = ticker.recorder.running_samples()
    assert len(snap.times) >= 2
    assert _sampler_threads_end()
    names = {f.name for stack in snap.stacks for f in stack}
    assert "Ticker._watch" not in names  # its own thread is never sampled


# -- the spy, for real ---------------------------------------------------------------------


def test_stacks_need_the_current_process() -> None:
    with pytest.raises(ValueError, match=r"stacks=True .* pid must be the current process"):
        MemorySpy(os.getppid(), stacks=True)


def _allocate_and_hold() -> int:
    block = bytearray(100 * MIB)  # zero-filled by the kernel: touch every page
    block[::4096] = b"x" * len(block[::4096])
    time.sleep(0.3)
    return len(block)


@pytest.mark.slow
def test_a_function_holding_100_mib_is_named_as_the_peak() -> None:
    def run() -> None:
        time.sleep(0.05)
        _allocate_and_hold()
        time.sleep(0.05)

    _, result = spy_call(run, delay=0.01, stacks=True)
    cpu = result["cpu"]
    assert cpu.peak_stack is not None
    assert cpu.peak_stack[-1].startswith("_allocate_and_hold ("), cpu.peak_stack
    assert 0.03 < cpu.peak_time < 5  # generous: a loaded machine
    rows = {r.function: r for r in cpu.where.functions}
    assert rows["_allocate_and_hold"].to_peak > 50 * MIB
    assert _sampler_threads_end()


# -- spy --where -----------------------------------------------------------------------------

SCRIPT = """\
import sys
import time


def groupby_sum(n):
    rows = [bytes(1024) for _ in range(n)]
    time.sleep(0.2)
    return len(rows)


def main():
    groupby_sum(60_000)
    return 3


if __name__ == "__main__":
    sys.exit(main())
"""


@pytest.mark.slow
def test_spy_where_runs_a_script_and_names_the_peak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("script.py").write_text(SCRIPT, encoding="utf-8")
    code, out, _ = run_cli(
        "spy", "-q", "--json", "r.json", "--flame", "f.speedscope.json", "--where", "script.py"
    )
    assert code == 3, out
    lines = out.splitlines()
    assert lines[0].startswith("memory growth by function")
    assert lines[-1] == "exit code 3"
    assert re.fullmatch(
        r"peak \S+ \S+ at \d+\.\d\d s in groupby_sum \(script\.py:\d+\) <- main \(script\.py:12\)"
        r" <- <module> \(script\.py:17\)",
        lines[-2],
    ), lines[-2]
    doc = json.loads(Path("r.json").read_text(encoding="utf-8"))
    # the same labels as the summary's: function (file:line)
    assert re.fullmatch(r".* \(script\.py:\d+\)", doc["cpu"]["peak_stack"][-1])
    assert doc["exit_code"] == 3
    # the list comprehension (its own frame before Python 3.12) or groupby_sum around it
    inner = [label.split(" (")[0] for label in doc["cpu"]["peak_stack"][-2:]]
    assert "groupby_sum" in inner, doc["cpu"]["peak_stack"]
    flame = json.loads(Path("f.speedscope.json").read_text(encoding="utf-8"))
    assert flame["profiles"][0]["unit"] == "bytes"
    # the tool's own frames (runpy, the CLI) are not in the graph
    names = {f["name"] for f in flame["shared"]["frames"]}
    assert "groupby_sum" in names and "run_where" not in names


@pytest.mark.slow
def test_spy_where_runs_a_module_and_reports_its_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    Path("boom_mod.py").write_text("x = [0] * 10**6\nraise KeyError('boom')\n", encoding="utf-8")
    code, out, err = run_cli("spy", "-q", "--flame", "f.collapsed", "--where", "-m", "boom_mod")
    assert code == 1
    assert "error: boom_mod.py raised KeyError: 'boom'" in err
    assert out.splitlines()[-2].startswith("peak ") and "module: boom_mod" in out
    assert Path("f.collapsed").exists()
    assert sys.modules["__main__"].__name__ != "boom_mod"


@pytest.mark.slow
def test_spy_where_interrupted_still_reports_and_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("stop.py").write_text("x = [0] * 10**6\nraise KeyboardInterrupt\n", encoding="utf-8")
    code, out, err = run_cli("spy", "-q", "--json", "r.json", "--where", "stop.py")
    assert code == 130 and "stop.py interrupted" in err
    assert out.splitlines()[-2].startswith("peak ")
    assert json.loads(Path("r.json").read_text(encoding="utf-8"))["exit_code"] == 130


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_spy_where_terminated_still_reports_and_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signame: str
) -> None:
    # GIVEN a program that receives SIGTERM (or SIGHUP) while it holds memory
    monkeypatch.chdir(tmp_path)
    Path("term.py").write_text(
        "import os, signal, time\nx = [0] * 10**6\n"
        f"os.kill(os.getpid(), signal.{signame})\ntime.sleep(5)\n",
        encoding="utf-8",
    )
    # WHEN spied with --where THEN the measure is printed and written, exit 128 + signum
    code, out, err = run_cli("spy", "-q", "--json", "r.json", "--where", "term.py")
    signum = int(getattr(signal, signame))
    assert code == 128 + signum and f"term.py terminated by {signame}" in err
    assert out.splitlines()[-2].startswith("peak ")
    assert json.loads(Path("r.json").read_text(encoding="utf-8"))["signal"] == signum


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("-m", "x"), "-m needs --where"),
        (("--flame", "f.collapsed", "--", "true"), "--flame needs --where"),
        (("--where", "--pid", "1"), "does not go with --pid"),
        (("--where",), "--where needs script.py [args] or -m module [args]"),
        (("--where", "--top", "0", "s.py"), "--top must be >= 1, got 0"),
        (("--where", "missing_script.py"), "script not found: 'missing_script.py'"),
        (("--where", "-m", "no_such_module_xyz"), "no module named 'no_such_module_xyz'"),
    ],
)
def test_spy_where_usage_mistakes_are_one_line_and_exit_2(
    argv: tuple[str, ...], message: str
) -> None:
    code, out, err = run_cli("spy", *argv)
    assert (code, out) == (2, ""), err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_the_flame_format_follows_the_suffix() -> None:
    assert flame_format("a.speedscope.json") == "speedscope"
    assert flame_format("A.JSON") == "speedscope"
    assert flame_format("a.collapsed") == flame_format("a.txt") == "collapsed"


# -- the magic, the fixture, the plot ------------------------------------------------------


def test_the_spy_magic_prints_where_the_peak_happened() -> None:
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "onnxrt_backend_dev.monitoring")
    cell = (
        "import time\n"
        "def fill():\n"
        "    b = bytearray(b'x') * (64 * 2**20)\n"
        "    time.sleep(0.2)\n"
        "fill()\n"
    )
    try:
        with capture_output() as out:
            stats = shell.run_cell_magic("spy", "-o --no-plot --stacks", cell)
    finally:
        shell.reset(new_session=False)
    assert stats["cpu"].peak_stack[-1].startswith("fill ("), stats["cpu"].peak_stack
    assert "memory growth by function" in out.stdout
    assert re.search(r"^peak .* in fill \(", out.stdout, re.M), out.stdout


def test_the_fixture_samples_stacks_on_request(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import time

        def fill():
            b = bytearray(b"x") * (64 * 2**20)
            time.sleep(0.2)

        def test_block(monitor_memory):
            with monitor_memory("fill", stacks=True) as m:
                fill()
            assert m.stats["cpu"].peak_stack[-1].startswith("fill (")
        """
    )
    result = pytester.runpytest_inprocess("-rA", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r"\s+peak .* in fill \(test_the_fixture_samples.*\.py:\d+\)"])


def test_the_plot_marks_the_peak_with_its_function() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    mon = Monitor("cpu")
    for t, peak, end in POINTS:
        mon.update(end, peak, t)
    attach(mon, SAMPLES)
    result = SpyResult(cpu=mon, duration=5.0, marks=[], t0=0.0)
    ax = plot_memory(result, ax=Figure().subplots())
    texts = [t.get_text() for t in ax.texts]
    assert "peak 100 MiB in groupby_sum <- main" in texts
    assert ax.get_xlabel().startswith("time") and ax.get_ylabel() == "memory (MiB)"


def test_the_plot_marks_the_peak_value_without_stacks() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    mon = Monitor("cpu")
    for t, peak, end in POINTS:
        mon.update(end, peak, t)
    ax = plot_memory(SpyResult(cpu=mon, t0=0.0), ax=Figure().subplots())
    assert [t.get_text() for t in ax.texts] == ["peak 100 MiB"]


def test_the_console_script_launching_the_tool_is_not_the_users_code() -> None:
    import sysconfig

    # GIVEN the stack of a sample taken while the CLI itself ran (bin/onnxrt-monitoring)
    launcher = SampledFrame(
        "<module>", os.path.join(sysconfig.get_paths()["scripts"], "onnxrt-monitoring"), 1, 8
    )
    cli = SampledFrame("run", os.path.join(OWN, "cmd.py"), 1, 3)
    # THEN it is the tool's own work, not a row of the growth table
    assert _frames.user_view((launcher, cli, STOP)) == ()
    assert not _frames.is_user_frame(launcher)
    # AND once the script runs, the view starts at the script
    assert _frames.user_view((launcher, cli, MAIN, GROUP)) == (MAIN, GROUP)
