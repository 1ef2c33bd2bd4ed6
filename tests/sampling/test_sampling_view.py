"""The views' rules on hand-made stacks: library frames folded, imports named by module,
the event loop's idle time, no row standing for nothing, hot lines, the text."""

from __future__ import annotations

import re
import sysconfig
from collections.abc import Sequence

from onnxrt_backend_dev.monitoring._sampling.frames import SampledFrame
from onnxrt_backend_dev.monitoring._sampling.model import SampledProfile, ThreadProfile
from onnxrt_backend_dev.monitoring._sampling.render_text import to_text
from onnxrt_backend_dev.monitoring._sampling.view import (
    build_tree,
    fold_stack,
    hot_lines,
    visible_rows,
)

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
