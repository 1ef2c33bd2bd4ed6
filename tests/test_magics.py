"""Notebook magics, driven through IPython's own API (``run_line_magic``/``run_cell_magic``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("IPython")

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

MiB = 2**20


@pytest.fixture(scope="module")
def ip() -> Iterator[Any]:
    """A shell with the extension loaded, as ``%load_ext`` does in a notebook."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "onnxrt_backend_dev.monitoring")
    yield shell
    # The variables set by the tests must not leak into other test modules' shells.
    shell.reset(new_session=False)


def test_magics_are_registered(ip: Any) -> None:
    magics = ip.magics_manager.magics
    assert "measure_time" in magics["line"]
    assert {"measure_time", "spy", "profile_tree"} <= set(magics["cell"])


# --- %measure_time ------------------------------------------------------------------


def test_measure_time_line_prints_one_readable_line(ip: Any) -> None:
    # GIVEN a variable of the notebook
    ip.user_ns["x"] = 3
    # WHEN a statement using it is timed
    with capture_output() as out:
        res = ip.run_line_magic("measure_time", "-r 4 -n 7 x * 2")
    # THEN one line like %timeit, with the median, the minimum and the shape of the run
    assert res is None
    text = out.stdout.strip()
    assert "\n" not in text
    assert text.startswith("x * 2: ") and " ± " in text
    for word in ("median", "min", "4 x 7 runs"):
        assert word in text, text


def test_measure_time_line_returns_the_dict_with_o(ip: Any) -> None:
    ip.user_ns["x"] = 3
    with capture_output() as out:
        res = ip.run_line_magic("measure_time", "-o -q -r 3 -n 5 -w 2 x + 1")
    assert out.stdout == ""
    assert res["repeat"] == 3 and res["number"] == 5
    assert 0 < res["min_exec"] <= res["average"] <= res["max_exec"]
    assert res["deviation"] >= 0


def test_measure_time_cell_runs_setup_apart(ip: Any) -> None:
    # GIVEN setup code on the magic's line and the code to time in the cell
    ip.user_ns.pop("y", None)
    with capture_output():
        res = ip.run_cell_magic("measure_time", "-o -r 2 -n 3 y = [3, 1, 2]", "z = sorted(y)\n")
    # THEN the cell saw the setup's names, which stay out of the notebook
    assert res["repeat"] == 2 and res["number"] == 3
    assert "y" not in ip.user_ns and "z" not in ip.user_ns


def test_measure_time_max_time(ip: Any) -> None:
    with capture_output():
        res = ip.run_line_magic("measure_time", "-o --max-time 0.05 sum(range(10))")
    assert res["average"] > 0
    # A bound, not a speed: a loaded machine may stop the last batch for a while.
    assert res["total_time"] < 5.0 and res["ttime"] == pytest.approx(res["average"] * res["repeat"])


def _statement_clock(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake clock the timing loop reads, advanced by the timed statement itself."""
    from fakes import FakeClock

    from onnxrt_backend_dev.monitoring._timing import loop

    clock = FakeClock()
    monkeypatch.setattr(loop, "perf_counter", clock)
    ip.user_ns["clock"] = clock
    return clock


def test_measure_time_calibrates_like_timeit_without_n(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a statement taking 20 ms (on a clock the statement advances: exact figures)
    clock = _statement_clock(ip, monkeypatch)
    # WHEN it is timed with neither -n nor -r
    with capture_output() as out:
        res = ip.run_line_magic("measure_time", "-o clock.advance(0.02)")
    # THEN the batch size is calibrated as %timeit does (a batch of at least 0.2 s) and 7
    # batches are timed: 1 warmup + 1 + 2 + 5 + 10 trial executions + 7 x 10 timed
    assert res["number"] == 10 and res["repeat"] == 7
    assert res["average"] == pytest.approx(0.02)
    assert "7 x 10 runs, calibrated" in out.stdout
    # and the whole magic measured 1.78 s of statement: the floor is 3 s (it was 10 x 50
    # executions, 10 s, before; %timeit takes 1.62 s)
    assert clock.now == pytest.approx(0.02 * (1 + 18 + 70))
    assert clock.now <= 3.0


@pytest.mark.parametrize(
    ("options", "repeat", "number", "calibrated"),
    [
        ("-r 3", 3, 10, True),  # -r alone: the batch size is still calibrated (as %timeit)
        ("-n 4", 7, 4, False),  # -n: exactly that many, 7 batches
        ("-r 2 -n 3", 2, 3, False),
    ],
)
def test_measure_time_obeys_r_and_n(
    ip: Any,
    monkeypatch: pytest.MonkeyPatch,
    options: str,
    repeat: int,
    number: int,
    calibrated: bool,
) -> None:
    _statement_clock(ip, monkeypatch)
    with capture_output() as out:
        res = ip.run_line_magic("measure_time", f"-o {options} clock.advance(0.02)")
    assert (res["repeat"], res["number"]) == (repeat, number)
    assert ("calibrated" in out.stdout) is calibrated, out.stdout


def test_measure_time_function_keeps_the_reference_defaults() -> None:
    # The library's defaults are the reference's contract: 10 batches of 50, no calibration.
    import inspect

    from onnxrt_backend_dev.monitoring.benchmark import measure_time

    params = inspect.signature(measure_time).parameters
    assert params["repeat"].default == 10 and params["number"].default == 50
    assert params["calibrate"].default is False


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-r 0 pass", "-r must be >= 1"),
        ("-n many pass", "-n must be a int"),
        ("--max-time -1 pass", "--max-time must be >= "),
        ("--max-time nan pass", "--max-time must be a finite number, got 'nan'"),
        ("--max-time inf pass", "--max-time must be a finite number, got 'inf'"),
        ("--max-time -inf pass", "--max-time must be a finite number, got '-inf'"),
        ("-r 1e3 pass", "-r must be a int, got '1e3'"),
        ("-r 3", "nothing to time"),
    ],
)
def test_measure_time_rejects_bad_options(ip: Any, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("measure_time", line)


def test_measure_time_syntax_error_points_at_the_statement(ip: Any) -> None:
    with pytest.raises(SyntaxError):
        ip.run_line_magic("measure_time", "-q x +* 2")


# --- %%spy --------------------------------------------------------------------------


def _spy_children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_spy_reports_the_cell_peak(ip: Any) -> None:
    # GIVEN a cell that touches 64 MiB, then frees them
    cell = "buf = bytearray(b'x') * (64 * 2**20)\ndel buf\n"
    before = _spy_children()
    with capture_output() as out:
        stats = ip.run_cell_magic("spy", "-o --no-plot", cell)
    # THEN the peak rose by about that much, and the output says so with units
    cpu = stats["cpu"]
    assert cpu.max_peak - cpu.begin >= 48 * MiB
    assert cpu.n_measures >= 1
    assert "cpu" in out.stdout and "peak" in out.stdout and "MiB" in out.stdout
    assert _spy_children() <= before  # the spy process is gone


def test_spy_stops_when_the_cell_fails(ip: Any) -> None:
    before = _spy_children()
    with pytest.raises(ZeroDivisionError), capture_output():
        ip.run_cell_magic("spy", "--no-plot", "1 / 0\n")
    assert _spy_children() <= before


def test_spy_draws_the_curve_with_matplotlib(ip: Any) -> None:
    pytest.importorskip("matplotlib")
    with capture_output() as out:
        ip.run_cell_magic("spy", "", "buf = bytearray(b'x') * (8 * 2**20)\ndel buf\n")
    assert any("image/png" in o.data for o in out.outputs), out.outputs


def test_spy_reports_a_spy_that_cannot_start(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from onnxrt_backend_dev.monitoring import memory_peak

    def no_nvml(**kwargs: Any) -> None:
        raise RuntimeError("cuda=True but NVML is unusable")

    monkeypatch.setattr(memory_peak, "start_spying_on", no_nvml)
    with pytest.raises(UsageError, match="the memory spy cannot start: cuda=True but NVML"):
        ip.run_cell_magic("spy", "--cuda", "pass\n")


def test_spy_rejects_a_bad_delay(ip: Any) -> None:
    with pytest.raises(UsageError, match="-d must be"):
        ip.run_cell_magic("spy", "-d 0", "pass\n")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-d nan", "-d must be a finite number, got 'nan'"),
        ("-d inf", "-d must be a finite number, got 'inf'"),
        ("-d x", "-d must be a float, got 'x'"),
        ("--probe rocm", "--probe: unknown probe 'rocm', choose from"),
        ("--probe nvml --probe x", "--probe: unknown probe 'x'"),
        ("--plot curve.svg", "--plot must name a .png file, got 'curve.svg'"),
    ],
)
def test_spy_bad_options_are_usage_errors(ip: Any, line: str, message: str) -> None:
    # WHEN %%spy gets a bad option THEN it is a UsageError naming it, and no cell runs
    with pytest.raises(UsageError, match=re.escape(message)):
        ip.run_cell_magic("spy", line, "raise AssertionError('ran')\n")


def test_spy_writes_the_curve_where_asked(ip: Any, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "curve.png"
    with capture_output() as out:
        ip.run_cell_magic("spy", f"--plot {target}", "buf = bytearray(8 * 2**20)\ndel buf\n")
    assert target.read_bytes().startswith(b"\x89PNG")
    assert f"memory curve written to {target}" in out.stdout
    assert not out.outputs  # written, not displayed


def test_in_a_terminal_the_spy_prints_no_image_object(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from onnxrt_backend_dev.monitoring import _magics

    # GIVEN a terminal shell (its class is TerminalInteractiveShell)
    class TerminalInteractiveShell:
        class display_formatter:
            active_types = ("text/plain", "image/png")

    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    with capture_output() as out:
        _magics._plot_memory(TerminalInteractiveShell(), {})
    # THEN nothing is displayed (no "<IPython.core.display.Image object>"), a hint is printed
    assert shown == [] and "--plot FILE.png" in out.stdout


# --- %%profile_tree -----------------------------------------------------------------

_CELL = """
import time

def leaf():
    time.sleep(0.01)

def branch():
    leaf()
    leaf()

branch()
"""


# 100 ms in leaf, for the sampler (the loaded machine may delay some samples).
_LONG_CELL = _CELL.replace("0.01", "0.05")


def test_profile_tree_samples_the_cell_by_default(ip: Any) -> None:
    # WHEN a cell is profiled without options
    with capture_output() as out:
        res = ip.run_cell_magic("profile_tree", "", _LONG_CELL)
    assert res is None
    lines = [line for line in out.stdout.splitlines() if not line.startswith("note: ")]
    # THEN its stacks were sampled: the sampler's header, the main thread's tree rooted at
    # the cell's <module> (the magic's own frames left out), branch above leaf
    assert lines[0].startswith("the cell: wall ") and " samples every 2.00 ms " in lines[0]
    assert lines[1].startswith("thread MainThread: ")
    assert lines[2].startswith("└─ ") and lines[2].endswith("<module>  <cell>:1")
    assert "profile_tree" not in out.stdout and "_sample_cell" not in out.stdout
    branch = next(i for i, line in enumerate(lines) if "%  branch  <cell>:" in line)
    leaf = next(i for i, line in enumerate(lines) if "%  leaf  <cell>:" in line)
    assert leaf == branch + 1
    assert lines[leaf].index("leaf") > lines[branch].index("branch")


def test_profile_tree_cprofile_prints_the_call_tree(ip: Any) -> None:
    with capture_output() as out:
        res = ip.run_cell_magic("profile_tree", "--cprofile", _CELL)
    assert res is None
    lines = out.stdout.splitlines()
    # THEN cProfile's call tree rooted at the cell, folded as the sampled one, with its
    # header and where its call counts are
    assert lines[0].startswith("Call tree of the cell: ") and "(cProfile: " in lines[0]
    assert lines[1].startswith("note: exact call counts: the reference view")
    assert lines[2].startswith("thread MainThread: ") and lines[3].endswith("<module>  <cell>:1")
    branch = next(i for i, line in enumerate(lines) if "%  branch  " in line)
    leaf = next(i for i, line in enumerate(lines) if "%  leaf  " in line)
    sleep = next(i for i, line in enumerate(lines) if "%  <built-in method time.sleep>" in line)
    assert sleep == leaf + 1 == branch + 2  # the built-in leaf calls, a library frame
    assert lines[leaf].index("leaf") > lines[branch].index("branch")


def test_profile_tree_cprofile_folds_library_frames_unless_asked(ip: Any) -> None:
    cell = "import json\njson.dumps([{'a': i} for i in range(2000)], indent=2)\n"
    # WHEN the cell's cProfile tree is printed (the magic keeps file names only) THEN
    # json's frames fold into dumps, known as the standard library's all the same
    with capture_output() as out:
        ip.run_cell_magic("profile_tree", "--cprofile --all", cell)
    assert "%  dumps  __init__.py:" in out.stdout and "frames hidden (" in out.stdout
    assert "%  encode  " not in out.stdout
    # WHEN --show-library THEN they are rows
    with capture_output() as out:
        ip.run_cell_magic("profile_tree", "--cprofile --all --show-library", cell)
    assert "%  encode  encoder.py:" in out.stdout and "frames hidden" not in out.stdout


def test_profile_tree_o_returns_what_was_profiled(ip: Any) -> None:
    from onnxrt_backend_dev.monitoring._sampling.result import SamplingResult
    from onnxrt_backend_dev.monitoring.profiling import ProfileNode

    with capture_output():
        sampled = ip.run_cell_magic("profile_tree", "-o --interval 0.001", _LONG_CELL)
        graph = ip.run_cell_magic("profile_tree", "-o --cprofile", _CELL)
    # THEN the sampling result (its interval the option's), or cProfile's root
    assert isinstance(sampled, SamplingResult)
    assert sampled.profile.interval == 0.001 and sampled.profile.samples >= 1
    assert isinstance(graph, ProfileNode) and "branch" in graph.to_text()


class _FakeResult:
    """What the sampler returns, recording the options of its text."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.profile = type("P", (), {"notes": ["SIGPROF is taken: sampled by a thread"]})()

    def to_text(self, **kwargs: Any) -> str:
        self.asked.append(kwargs)  # the text holds the notes, as the real one's does
        return "the sampled tree\nnote: SIGPROF is taken: sampled by a thread\n"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", {"fold_share": 0.005, "show_all": False, "max_depth": None}),
        ("--all --show-library", {"fold_share": 0.0, "show_all": True, "max_depth": None}),
        ("--fold-share 0.2 --max-depth 3", {"fold_share": 0.2, "show_all": False, "max_depth": 3}),
        ("-s cumulative -w 30", {"fold_share": 0.005, "show_all": False, "max_depth": None}),
    ],
)
def test_profile_tree_passes_its_options_to_the_sampled_text(
    ip: Any, monkeypatch: pytest.MonkeyPatch, line: str, expected: dict[str, Any]
) -> None:
    from onnxrt_backend_dev.monitoring import _magics

    # GIVEN a fake sampler (no timing: what the magic asks of the result is checked)
    fake = _FakeResult()
    seen: list[float] = []

    def sample_cell(run: Any, interval: float) -> _FakeResult:
        seen.append(interval)
        run()
        return fake

    monkeypatch.setattr(_magics, "_sample_cell", sample_cell)
    ip.user_ns.pop("ran", None)
    with capture_output() as out:
        res = ip.run_cell_magic("profile_tree", line, "ran = True\n")
    # THEN the cell ran once under it, the text has the options, the notes printed once
    assert res is None and ip.user_ns["ran"] is True and seen == [0.002]
    assert fake.asked == [expected]
    assert out.stdout == "the sampled tree\nnote: SIGPROF is taken: sampled by a thread\n"


@pytest.mark.parametrize(
    ("line", "cprofile"),
    [
        ("", False),
        ("-s cumulative", False),
        ("-s cumtime --all --max-depth 2", False),
        ("--cprofile", True),
        ("--view reference", True),
        ("--view tree -s line", True),
        ("-s time", True),
        ("--hide-stdlib", True),
    ],
)
def test_profile_tree_options_only_cprofile_has_imply_it(
    ip: Any, monkeypatch: pytest.MonkeyPatch, line: str, cprofile: bool
) -> None:
    from onnxrt_backend_dev.monitoring import _magics

    # GIVEN both profilers replaced by fakes that say which one ran
    ran: list[str] = []
    real_cprofile_cell = _magics._cprofile_cell

    def sample_cell(run: Any, interval: float) -> _FakeResult:
        ran.append("sampled")
        return _FakeResult()

    def cprofile_cell(run: Any) -> Any:
        ran.append("cprofile")
        return real_cprofile_cell(run)

    monkeypatch.setattr(_magics, "_sample_cell", sample_cell)
    monkeypatch.setattr(_magics, "_cprofile_cell", cprofile_cell)
    with capture_output():
        ip.run_cell_magic("profile_tree", line, "x = 1\n")
    # THEN cProfile runs exactly when asked for or implied, as for ``profile``
    assert ran == ["cprofile" if cprofile else "sampled"]


def test_profile_tree_reference_view(ip: Any) -> None:
    with capture_output() as out:
        ip.run_cell_magic("profile_tree", "--view reference", _CELL)
    lines = out.stdout.splitlines()
    branch = next(i for i, line in enumerate(lines) if line.lstrip().startswith("branch"))
    leaf = next(i for i, line in enumerate(lines) if line.lstrip().startswith("leaf"))
    # leaf is printed under branch, further indented
    assert leaf > branch
    indent = len(lines[leaf]) - len(lines[leaf].lstrip())
    assert indent > len(lines[branch]) - len(lines[branch].lstrip())


def test_profile_tree_options(ip: Any) -> None:
    with capture_output() as out:
        root = ip.run_cell_magic("profile_tree", "-o --cprofile -s cumulative -w 30", _CELL)
    assert "branch" in root.to_text()
    assert "branch" in out.stdout


def test_profile_tree_depth_and_stdlib(ip: Any) -> None:
    for line in ("--max-depth 1", "--max-depth 1 --cprofile"):
        with capture_output() as out:
            ip.run_cell_magic("profile_tree", line, _LONG_CELL)
        assert "branch" in out.stdout and "leaf" not in out.stdout, line
    with capture_output() as out:
        ip.run_cell_magic("profile_tree", "--hide-stdlib", _CELL)
    # THEN the library call leaf makes is left out: leaf is the last row, its time its
    # own (the default tree shows the call, see above)
    assert "leaf" in out.stdout and "time.sleep" not in out.stdout
    assert out.stdout.rstrip().splitlines()[-1].endswith("%  leaf  <cell>:3")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-s nowhere", "-s nowhere: .*must be one of"),
        ("-w 2", "-w"),
        ("--view flat", "--view flat: view must be one of"),
        ("--fold-share 2", "--fold-share must be in"),
        ("--interval 0", "--interval must be >= 0.0001, got 0"),
        ("--interval nan", "--interval must be a finite number"),
        ("--interval 1e-9", "--interval must be >= 0.0001"),
        ("--interval 100", "--interval must be <= 1"),
        ("--interval soon", "--interval must be a float, got 'soon'"),
    ],
)
def test_profile_tree_rejects_bad_options(ip: Any, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("profile_tree", line, "pass\n")


# --- help ---------------------------------------------------------------------------

# Each magic, how it is called, and options its help must list.
_HELPS = [
    ("measure_time", "line", ["-r REPEAT", "-n NUMBER", "-w WARMUP", "--max-time SECONDS", "-q"]),
    ("measure_time", "cell", ["-r REPEAT", "--max-time SECONDS", "setup code"]),
    ("spy", "cell", ["-d DELAY", "--cuda", "--no-plot", "-o"]),
    (
        "profile_tree",
        "cell",
        [
            "-s SORT",
            "-w WIDTH",
            "--max-depth N",
            "--hide-stdlib",
            "--cprofile",
            "--interval SECONDS",
        ],
    ),
]


@pytest.mark.parametrize(("name", "kind", "options"), _HELPS)
def test_the_docstring_lists_the_options(ip: Any, name: str, kind: str, options: list) -> None:
    # WHEN the user asks IPython about the magic (``%measure_time?``, ``%%spy?``)
    prefix = "%" if kind == "line" else "%%"
    with capture_output() as out:
        ip.run_line_magic("pinfo", prefix + name)
    # THEN the options are listed with their values
    for option in options:
        assert option in out.stdout, out.stdout


@pytest.mark.parametrize(("name", "kind", "options"), _HELPS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_inside_a_magic_prints_its_usage(
    ip: Any, name: str, kind: str, options: list, flag: str
) -> None:
    # GIVEN a cell that must not run when only the help is asked for
    ip.user_ns.pop("ran", None)
    with capture_output() as out:
        if kind == "line":
            res = ip.run_line_magic(name, f"-r 3 {flag}")
        else:
            res = ip.run_cell_magic(name, flag, "ran = True\n")
    # THEN the usage and the options are printed, nothing ran, no UsageError
    assert res is None
    assert out.stdout.startswith("usage: ")
    for option in options:
        assert option in out.stdout
    assert "ran" not in ip.user_ns


def test_a_statement_with_h_is_not_taken_for_help(ip: Any) -> None:
    ip.user_ns["h"] = 2
    with capture_output() as out:
        res = ip.run_line_magic("measure_time", "-o -q -r 2 -n 2 3 -h")
    assert res["repeat"] == 2 and out.stdout == ""


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        (
            "measure_time",
            "-z pass",
            "%measure_time: option -z not recognized; see %measure_time --help",
        ),
        ("spy", "--bad", "%%spy: option --bad not recognized; see %%spy --help"),
        ("profile_tree", "--max-depth", "option --max-depth requires argument; see %%profile_tree"),
    ],
)
def test_an_unknown_option_points_at_the_help(ip: Any, name: str, line: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        if name == "measure_time":
            ip.run_line_magic(name, line)
        else:
            ip.run_cell_magic(name, line, "pass\n")
    assert message in str(e.value)


def test_profile_tree_says_each_note_once(ip: Any) -> None:
    with capture_output() as out:
        ip.run_cell_magic("profile_tree", "", "sum(range(100_000))\n")
    assert out.stdout.count("note: collector:") == 1
