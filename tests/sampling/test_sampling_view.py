"""The views' rules on hand-made stacks: library frames folded, imports named by module,
the event loop's idle time, no row standing for nothing, hot lines, the text."""

from __future__ import annotations

import json
import re
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._sampling.model import SampledProfile, ThreadProfile
from onnxrt_backend_dev.monitoring._sampling.render_text import to_text
from onnxrt_backend_dev.monitoring._sampling.view import (
    build_tree,
    fold_stack,
    hot_lines,
    mark_waiting,
    source_line,
    visible_rows,
)
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

SITE = "/venv/lib/python3.11/site-packages/"
STDLIB = sysconfig.get_paths()["stdlib"] + "/"
USER = "/home/me/script.py"


def user(name: str, line: int = 10) -> SampledFrame:
    return SampledFrame(name, USER, 1, line)


def lib(name: str, path: str, line: int = 5) -> SampledFrame:
    return SampledFrame(name, SITE + path, 1, line)


def std(name: str, path: str) -> SampledFrame:
    return SampledFrame(name, STDLIB + path, 1, 2)


IMPORTLIB = [
    SampledFrame("_find_and_load", "<frozen importlib._bootstrap>", 1, 2),
    SampledFrame("_load_unlocked", "<frozen importlib._bootstrap>", 1, 2),
    SampledFrame("exec_module", "<frozen importlib._bootstrap_external>", 1, 2),
    SampledFrame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 1, 2),
]


def _profile(stacks: Sequence[tuple[tuple[SampledFrame, ...], float]]) -> SampledProfile:
    totals = {i: [w, w, 1.0] for i, (_, w) in enumerate(stacks)}
    thread = ThreadProfile(1, "MainThread", True, totals)
    return SampledProfile([s for s, _ in stacks], [thread], 0.002, "prof", 1.0, 1.0, len(stacks))


def test_consecutive_library_frames_fold_into_the_first_one_called() -> None:
    # GIVEN main > load > read_csv > 3 pandas frames > a concurrent frame
    stack = (
        user("main"),
        user("load"),
        lib("read_csv", "pandas/io/parsers/readers.py"),
        lib("_read", "pandas/io/parsers/readers.py"),
        lib("TextFileReader.read", "pandas/io/parsers/readers.py"),
        std("Future.result", "concurrent/futures/_base.py"),
        std("Condition.wait", "threading.py"),
    )
    steps = fold_stack(stack)
    # THEN one row keeps read_csv named and says what it hides
    assert [s.label for s in steps] == ["main", "load", "read_csv"]
    assert steps[-1].hidden == 4
    assert steps[-1].packages == {"pandas", "concurrent", "threading"}
    # AND with show_all nothing is folded
    assert len(fold_stack(stack, show_all=True)) == 7


def test_user_code_called_back_by_a_library_opens_a_new_row() -> None:
    # GIVEN agg > pandas frames > a user aggregate function > numpy
    stack = (
        user("agg"),
        lib("DataFrameGroupBy.aggregate", "pandas/core/groupby/generic.py"),
        lib("_aggregate", "pandas/core/apply.py"),
        user("my_mean"),
        lib("mean", "numpy/_core/fromnumeric.py"),
    )
    labels = [s.label for s in fold_stack(stack)]
    # THEN the library runs fold on each side of the user's function
    assert labels == ["agg", "DataFrameGroupBy.aggregate", "my_mean", "mean"]


def test_imports_are_rows_named_by_module_never_importlib() -> None:
    # GIVEN the user imports pandas, which imports a submodule, then numpy
    pandas_init = SampledFrame("<module>", SITE + "pandas/__init__.py", 1, 3)
    sub = SampledFrame("<module>", SITE + "pandas/core/api.py", 1, 3)
    numpy_init = SampledFrame("<module>", SITE + "numpy/__init__.py", 1, 3)
    stack = (user("<module>"), *IMPORTLIB, pandas_init, *IMPORTLIB, sub, *IMPORTLIB, numpy_init)
    steps = fold_stack(stack)
    # THEN one row for the module the user imports, what it runs folded into it
    assert [s.label for s in steps] == ["<module>", "import pandas"]
    assert steps[1].kind == "import"
    assert steps[1].hidden == 2 + 2 * len(IMPORTLIB)
    assert not any("importlib" in s.file for s in steps)
    # AND a module the user imports directly is its own row, a user module's too
    mine = SampledFrame("<module>", "/home/me/mine.py", 1, 3)
    assert [s.label for s in fold_stack((user("<module>"), *IMPORTLIB, numpy_init))] == [
        "<module>",
        "import numpy",
    ]
    steps = fold_stack((user("<module>"), *IMPORTLIB, mine, *IMPORTLIB, numpy_init))
    assert [s.label for s in steps] == ["<module>", "import mine", "import numpy"]


def test_the_event_loop_waiting_in_select_is_one_idle_row() -> None:
    # GIVEN asyncio.run's loop waiting in the selector, and a task running a coroutine
    loop = (
        user("<module>"),
        std("run", "asyncio/runners.py"),
        std("BaseEventLoop.run_forever", "asyncio/base_events.py"),
        std("BaseEventLoop._run_once", "asyncio/base_events.py"),
    )
    idle = (*loop, std("EpollSelector.select", "selectors.py"))
    task = (*loop, std("Handle._run", "asyncio/events.py"), user("fetch"), user("cpu"))
    # THEN the waiting stack ends in 'idle (event loop)', the coroutine is a task row
    assert [s.label for s in fold_stack(idle)] == ["<module>", "run", "idle (event loop)"]
    steps = fold_stack(task)
    assert [(s.label, s.kind) for s in steps] == [
        ("<module>", "user"),
        ("run", "library"),
        ("fetch", "task"),
        ("cpu", "user"),
    ]


def test_no_row_stands_for_nothing() -> None:
    # GIVEN one hot function and 30 tiny ones (0.01 % each) under main
    stacks = [((user("main"), user("hot")), 0.97)]
    stacks += [((user("main"), user(f"tiny{i}", 100 + i)), 0.0001) for i in range(30)]
    stacks += [((user("main"), user("small", 99)), 0.02)]
    root = build_tree(_profile(stacks), _profile(stacks).threads[0])
    rows = [(d, r) for d, r, _ in visible_rows(root)]
    labels = [r.label for _, r in rows]
    # THEN the hot one and the 2 % one shown, the tiny ones as one 'N more' row
    assert labels == ["thread MainThread", "main", "hot", "small", "30 more"]
    # AND the 'more' row goes when it would say under 0.1 %
    stacks = [*stacks[:-1][:5], ((user("main"), user("hot")), 0.0)]
    root = build_tree(_profile(stacks), _profile(stacks).threads[0])
    assert all("more" not in r.label for _, r, _ in visible_rows(root))


def test_hot_lines_name_the_user_lines_that_take_the_time() -> None:
    # GIVEN load's line 12 calling read_csv (80 %) and line 13 (20 %)
    stacks = [
        ((user("main", 3), user("load", 12), lib("read_csv", "pandas/io/x.py")), 0.8),
        ((user("main", 3), user("load", 13)), 0.2),
    ]
    found = hot_lines(_profile(stacks))
    # THEN load comes first, its lines by share
    assert found[0].name == "load"
    assert [(h.line, round(h.share, 2)) for h in found[0].lines] == [(12, 0.8), (13, 0.2)]


def test_an_idle_thread_running_library_code_only_dilutes_no_line() -> None:
    # GIVEN a cell's lines (0.4 s and 0.3 s) and a notebook's history thread, idle 0.7 s
    stacks = [
        ((user("cell", 2), user("busy", 4)), 0.4),
        ((user("cell", 3),), 0.3),
        ((std("_bootstrap", "threading.py"), std("wait", "threading.py")), 0.7),
    ]
    profile = _profile(stacks[:2])
    idle = ThreadProfile(2, "IPythonHistorySavingThread", False, {2: [0.7, 0.0, 1.0]})
    profile = SampledProfile([s for s, _ in stacks], [profile.threads[0], idle], 0.002, "prof",
                             1.0, 1.0, 3)  # fmt: skip
    # THEN the lines' shares are those of the tree (of the user's code), not halved
    found = hot_lines(profile)
    assert [round(f.share, 2) for f in found] == [0.57, 0.43]


def test_text_shows_the_folded_row_and_what_it_hides() -> None:
    stacks = [
        (
            (user("main"), user("load"), lib("read_csv", "pandas/a.py"), lib("_r", "pandas/b.py")),
            0.6,
        ),
        ((user("main"), user("agg")), 0.4),
    ]
    text = to_text(_profile(stacks))
    assert "read_csv  pandas/a.py:1  [1 frame hidden (pandas)]" in text
    assert " 60.0 %" in text and " 40.0 %" in text
    assert re.search(r"(?<![0-9])0\.0 %", text) is None


def test_max_depth_counts_from_the_top_level_row() -> None:
    # GIVEN main > load > parse, one stack
    stacks = [((user("main"), user("load"), user("parse")), 1.0)]

    def drawn(max_depth: int | None) -> list[str]:
        text = to_text(_profile(stacks), max_depth=max_depth, hot=False)
        return re.findall(r"%  (\w+)  ", text)

    # THEN max_depth 0 draws the top level only, as the cProfile views do, 1 one more
    assert drawn(0) == ["main"]
    assert drawn(1) == ["main", "load"]
    assert drawn(None) == ["main", "load", "parse"]


def _cpu_profile(rows: list[tuple[str, float, float]]) -> SampledProfile:
    stacks: list[tuple[SampledFrame, ...]] = [(user("main"), user(name)) for name, _, _ in rows]
    totals = {i: [wall, cpu, 1.0] for i, (_, wall, cpu) in enumerate(rows)}
    thread = ThreadProfile(1, "MainThread", True, totals)
    return SampledProfile(stacks, [thread], 0.002, "prof", 1.0, 1.0, len(rows))


def _waiting(rows: list[tuple[str, float, float]]) -> dict[str, bool]:
    profile = _cpu_profile(rows)
    root = build_tree(profile, profile.threads[0])
    mark_waiting(root)
    main = root.children[("main", USER, 1, "user")]
    return {r.label: r.waiting for r in main.children.values()}


def test_waiting_is_told_from_the_cpu_time_relative_to_the_busiest_rows() -> None:
    # GIVEN a computing row (90 % CPU) and a join (1 % CPU)
    assert _waiting([("compute", 0.5, 0.45), ("join", 0.5, 0.005)]) == {
        "compute": False,
        "join": True,
    }
    # GIVEN a loaded machine: every row got 15 % of the CPU THEN none is waiting
    assert _waiting([("compute", 0.5, 0.075), ("other", 0.5, 0.07)]) == {
        "compute": False,
        "other": False,
    }
    # GIVEN no CPU clock THEN nothing is marked
    profile = _cpu_profile([("join", 1.0, 0.0)])
    root = build_tree(profile, profile.threads[0])
    mark_waiting(root, cpu_known=False)
    assert not any(r.waiting for r in root.children.values())


def test_export_follows_the_suffix_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    from onnxrt_backend_dev.monitoring._errors import BadValue
    from onnxrt_backend_dev.monitoring._export import FORMATS, guess_format
    from onnxrt_backend_dev.monitoring._sampling.result import SamplingResult

    # GIVEN a result
    result = SamplingResult(_profile([((user("main"), user("hot")), 1.0)]))
    # THEN each suffix gives its format, the file written
    for name, fmt in [("a.json", "json"), ("a.speedscope.json", "speedscope"), ("a.html", "html"),
                      ("a.txt", "text"), ("a.collapsed", "collapsed")]:  # fmt: skip
        assert guess_format(name, FORMATS["sampling"]) == fmt
        assert result.export(tmp_path / name) == fmt
        assert (tmp_path / name).stat().st_size > 0
    doc = json.loads((tmp_path / "a.json").read_text("utf-8"))
    assert doc["schema"] == "onnxrt-sampling" and doc["version"] == 1
    assert [r["name"] for r in doc["threads"][0]["rows"]] == ["thread MainThread", "main", "hot"]
    # AND an unknown suffix is refused in one line naming the path, nothing written
    with pytest.raises(BadValue, match=r"a\.pdf"):
        result.export(tmp_path / "a.pdf")
    assert not (tmp_path / "a.pdf").exists()


def test_rows_and_hot_lines_ranked_by_cpu_on_a_busy_machine() -> None:
    # GIVEN an import waiting 0.8 s for a CPU (0.05 s of CPU) and a hot loop of 0.19 s CPU
    stacks: list[tuple[SampledFrame, ...]] = [
        (user("main"), user("load", 3)),
        (user("main"), user("hot", 5)),
    ]
    totals = {0: [0.8, 0.05, 1.0, 0.0, 0.0, 0.0, 0.75], 1: [0.2, 0.19, 1.0, 0.0, 0.0, 0.0, 0.0]}
    profile = SampledProfile(
        stacks, [ThreadProfile(1, "MainThread", True, totals)], 0.002, "prof", 1.0, 1.0, 2
    )
    # WHEN ranked by wall, then by CPU
    by_wall, by_cpu = to_text(profile), to_text(profile, rank="cpu")
    # THEN the wall puts the waiting import first and says most of it was waiting
    assert by_wall.index("load") < by_wall.index("hot")
    assert "75 % of the wall time was spent waiting for a CPU" in by_wall
    assert "--clock cpu ranks the rows by CPU time" in by_wall
    # AND the CPU puts the hot loop first, in the tree and in the hot lines
    assert "(rows ranked by CPU time)" in by_cpu
    tree, hot = by_cpu.split("hot lines")
    assert tree.index("hot") < tree.index("load")
    assert hot.index("hot") < hot.index("load") and "CPU time with the line" in hot


def test_a_source_line_of_a_file_named_with_a_nul_is_empty(tmp_path: Path) -> None:
    # GIVEN a program's file, and a code object's file name holding a NUL (a crafted
    # co_filename, or a name read while the program's memory was reused)
    real = tmp_path / "prog.py"
    real.write_text("x = 1\n", encoding="utf-8")
    # THEN the real file's line is read; the other is no line, never an error
    assert source_line(str(real), 1) == "x = 1"
    assert source_line(str(real) + "\x00.py", 1) == ""


def test_the_pools_cpu_is_shown_where_a_row_has_it_and_nowhere_else() -> None:
    from onnxrt_backend_dev.monitoring._sampling.model import NCOLUMNS, POOL
    from onnxrt_backend_dev.monitoring._sampling.render_json import to_dict

    # GIVEN a line run while a pool used 0.8 s of CPU (the observer's full row) and a
    # line saved before the column existed (the split only)
    stacks: list[tuple[SampledFrame, ...]] = [
        (user("main"), user("infer", 3)),
        (user("main"), user("prepare", 5)),
    ]
    infer = [0.4, 0.1, 1.0, 0.0, 0.1, 0.0, 0.0] + [0.0] * (NCOLUMNS - 7)
    infer[POOL] = 0.8
    totals = {0: infer, 1: [0.6, 0.6, 1.0, 0.6, 0.0, 0.0, 0.0]}
    thread = ThreadProfile(1, "MainThread", True, totals)
    profile = SampledProfile(stacks, [thread], 0.002, "observer", 1.0, 1.0, 2, split_known=True)
    # WHEN rendered
    text, doc = to_text(profile), to_dict(profile)
    # THEN the thread, the row and the line say the pool's CPU (200 % of the line's time)
    assert "pool CPU 800 ms" in text.splitlines()[1]
    assert "infer  /home/me/script.py:1  [pool CPU 800 ms]" in text
    assert "| pool CPU):" in text and "wait  75 | pool 200" in text
    rows = {r["name"]: r for r in doc["threads"][0]["rows"]}
    assert rows["infer"]["pool"] == 0.8 and "pool" not in rows["prepare"]
    lines = {h["line"]: h["split"] for f in doc["hot_lines"] for h in f["lines"]}
    assert lines[3]["pool"] == 2.0 and "pool" not in lines[5]
    # AND without the pool's CPU, nothing says pool (the outputs as before)
    infer[POOL] = 0.0
    assert "pool" not in to_text(profile) and "pool" not in json.dumps(to_dict(profile))
