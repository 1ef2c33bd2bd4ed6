"""The folded call tree of a cProfile graph (``_profiling/view_folded.py``, drawn by
``by_view.py``'s ``to_tree_text`` and ``to_html``): the graph's call paths handed to
the sampled profile's fold, so that ``profile --cprofile`` and the sampled ``profile``
show one tree."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import dump_dom, needs_browser
from helpers import tree_rows as rows
from test_profiling import FakeStats, chain_stats

from onnxrt_backend_dev.monitoring._profiling import view_folded
from onnxrt_backend_dev.monitoring._profiling.view_folded import FoldedView, folded_profile
from onnxrt_backend_dev.monitoring._profiling.view_tree import call_tree
from onnxrt_backend_dev.monitoring._sampling.model import CPROFILE
from onnxrt_backend_dev.monitoring._sampling.view import build_tree as fold_tree
from onnxrt_backend_dev.monitoring.profiling import profile2graph, to_html, to_tree_text


def folded_stacks(view: FoldedView) -> Any:
    """The ``(frames, seconds)`` stacks of a folded view (moved here from the package:
    only these tests read them)."""
    thread = view.profile.threads[0]
    for frames, totals in view.profile.thread_stacks(thread):
        yield frames, totals[0]


Key = tuple[str, int, str]
SITE = "/venv/lib/python3.11/site-packages"
BOOT, EXT = "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"
EXEC: Key = ("~", 0, "<built-in method builtins.exec>")
MODULE: Key = ("prog.py", 1, "<module>")
MAIN: Key = ("prog.py", 10, "main")
FIND: Key = (BOOT, 1165, "_find_and_load")
UNLOCKED: Key = (BOOT, 1120, "_find_and_load_unlocked")
LOAD: Key = (BOOT, 666, "_load_unlocked")
EXEC_MODULE: Key = (EXT, 934, "exec_module")
REMOVED: Key = (BOOT, 233, "_call_with_frames_removed")
GET_CODE: Key = (EXT, 1007, "get_code")
MARSHAL: Key = ("~", 0, "<built-in method marshal.loads>")
LIB_INIT: Key = (f"{SITE}/mylib/__init__.py", 1, "<module>")
LIB_CORE: Key = (f"{SITE}/mylib/core.py", 1, "<module>")
NP_INIT: Key = (f"{SITE}/numpy/__init__.py", 1, "<module>")
READ: Key = (f"{SITE}/mylib/io.py", 40, "read")
PARSE: Key = (f"{SITE}/mylib/io.py", 80, "_parse")
FROMBUFFER: Key = ("~", 0, "<built-in method numpy.frombuffer>")


def import_stats() -> FakeStats:
    """A script importing a library (mylib, which loads mylib.core and numpy) through
    importlib's frames, exec and marshal as cProfile records them, then calling the
    library (read > _parse > numpy.frombuffer): 10 s in all, 4 s of imports."""
    st = FakeStats()
    for key, cc, tt, ct in (
        (EXEC, 4, 0.0, 10.0), (MODULE, 1, 0.0, 10.0), (MAIN, 1, 1.0, 6.0),
        (FIND, 1, 0.1, 4.0), (UNLOCKED, 3, 0.1, 3.9), (LOAD, 3, 0.1, 3.8),
        (EXEC_MODULE, 3, 0.1, 3.7), (REMOVED, 3, 0.1, 3.0), (GET_CODE, 3, 0.1, 0.6),
        (MARSHAL, 3, 0.5, 0.5), (LIB_INIT, 1, 1.0, 1.8), (LIB_CORE, 1, 0.7, 0.7),
        (NP_INIT, 1, 0.4, 0.4), (READ, 1, 1.0, 5.0), (PARSE, 1, 1.0, 4.0),
        (FROMBUFFER, 1, 3.0, 3.0),
    ):  # fmt: skip
        st.add(key, cc, cc, tt, ct)
    for caller, callee, n, tt, ct in (
        (EXEC, MODULE, 1, 0.0, 10.0), (MODULE, FIND, 1, 0.1, 4.0), (MODULE, MAIN, 1, 1.0, 6.0),
        (FIND, UNLOCKED, 3, 0.1, 3.9), (UNLOCKED, LOAD, 3, 0.1, 3.8),
        (LOAD, EXEC_MODULE, 3, 0.1, 3.7), (EXEC_MODULE, REMOVED, 3, 0.1, 3.0),
        (EXEC_MODULE, GET_CODE, 3, 0.1, 0.6), (GET_CODE, MARSHAL, 3, 0.5, 0.5),
        (REMOVED, EXEC, 3, 0.0, 2.9), (EXEC, LIB_INIT, 1, 1.0, 1.8),
        (EXEC, LIB_CORE, 1, 0.7, 0.7), (EXEC, NP_INIT, 1, 0.4, 0.4),
        (MAIN, READ, 1, 1.0, 5.0), (READ, PARSE, 1, 1.0, 4.0), (PARSE, FROMBUFFER, 1, 3.0, 3.0),
    ):  # fmt: skip
        st.call(caller, callee, n, tt, ct)
    return st


def test_an_import_is_one_row_and_library_calls_fold() -> None:
    # GIVEN a script importing a library through importlib (exec and marshal under it),
    # then calling into the library, as cProfile records it
    root, _ = profile2graph(import_stats())
    # WHEN its call tree is drawn
    text = to_tree_text(root, program="prog.py", fold_share=0.0)
    got = rows(text)
    names = [name for _, _, name, _ in got]
    # THEN the header says cProfile, and where the call counts are
    assert text.startswith("Call tree of prog.py: 10.0 s in total (cProfile: every call timed")
    assert "exact call counts: the reference view" in text
    # AND the tree starts at the script's <module> (not exec), the import is one row
    # holding the whole import (4 s, marshal and importlib's own time included), named
    # by the package that took most of it, the other packages counted as hidden
    assert names[0] == "<module>"
    (imp,) = [r for r in got if r[2].startswith("import ")]
    assert imp[:3] == (2, 4.0, "import mylib") and "mylib/__init__.py:1" in imp[3]
    assert "hidden (mylib, numpy)" in imp[3]
    assert "cProfile does not say which module imported which" in text
    # AND importlib's frames and the built-ins under them are nowhere
    assert not {"_find_and_load", "exec_module", "<built-in method builtins.exec>"} & set(names)
    assert "<built-in method marshal.loads>" not in names
    # AND the user's main holds the library call folded into its first frame (read), the
    # built-in below it counted in its package
    main = next(r for r in got if r[2] == "main")
    read = got[got.index(main) + 1]
    assert main[:2] == (2, 6.0) and read[:3] == (3, 5.0, "read")
    assert "[2 frames hidden (mylib, numpy)]" in read[3]
    assert len(got) == 4  # <module>, import mylib, main, read


def test_the_folded_paths_add_up_to_the_tree() -> None:
    # GIVEN the graph WHEN turned into the sampled model
    root, _ = profile2graph(import_stats())
    view = folded_profile(root, program="prog.py")
    stacks = list(folded_stacks(view))
    # THEN one thread, its stacks' own times add up to the total, no C frame under
    # importlib, no CPU known, the timer says cProfile
    profile = view.profile
    assert [t.name for t in profile.threads] == ["MainThread"] and not profile.cpu_known
    assert profile.timer == CPROFILE and profile.duration == pytest.approx(10.0)
    assert sum(s for _, s in stacks) == pytest.approx(10.0)
    for frames, _ in stacks:
        for above, frame in itertools.pairwise(frames):
            assert not (frame.file == "" and above.file.startswith("<frozen importlib"))
    # AND the fold of the sampled view builds its tree
    tree = fold_tree(profile, profile.threads[0])
    (top,) = tree.children.values()
    assert top.label == "<module>" and top.wall == pytest.approx(10.0)
    assert {r.label for r in top.children.values()} == {"import mylib", "main"}


@pytest.mark.parametrize("seed", range(4))
def test_the_paths_of_random_graphs_add_up(seed: int) -> None:
    # GIVEN random graphs (fan-in, recursion, cycles) WHEN folded
    from test_profiling_tree import random_stats

    root, _ = profile2graph(random_stats(seed))
    view = folded_profile(root)
    total = call_tree(root, fold_share=view_folded.FLOOR_SHARE).total
    # THEN the stacks keep the tree's total, no stack is empty or deeper than the bound
    stacks = list(folded_stacks(view))
    assert sum(s for _, s in stacks) == pytest.approx(total, rel=1e-9)
    assert all(0 < len(f) <= view_folded.MAX_DEPTH for f, _ in stacks)
    text = to_tree_text(root, fold_share=0.0)  # the top level: the entry points
    assert sum(s for d, s, _, _ in rows(text) if d == 1) == pytest.approx(total, rel=1e-3)


def test_options_of_the_tree() -> None:
    root, _ = profile2graph(import_stats())
    # WHEN show_all THEN every library frame is a row, importlib's still not, the
    # import still named
    every = [name for _, _, name, _ in rows(to_tree_text(root, fold_share=0.0, show_all=True))]
    assert {"read", "_parse", "<built-in method numpy.frombuffer>", "import mylib"} <= set(every)
    assert "_find_and_load" not in every and "exec_module" not in every
    # WHEN hide_stdlib THEN no library frame at all: main holds its callees' time, and
    # the imports are the script's own time
    hidden = rows(to_tree_text(root, fold_share=0.0, hide_stdlib=True))
    assert [(d, s, n) for d, s, n, _ in hidden] == [(1, 10.0, "<module>"), (2, 6.0, "main")]
    # WHEN max_depth 0 THEN the top level only; 1: its children too
    assert [n for _, _, n, _ in rows(to_tree_text(root, max_depth=0))] == ["<module>"]
    assert len(rows(to_tree_text(root, max_depth=1))) == 3
    # WHEN focus THEN the tree starts at the matching function
    focused = rows(to_tree_text(root, focus="main"))
    assert focused[0][:3] == (1, 6.0, "main") and len(focused) == 2
    # WHEN min_share or fold_share above a row's share THEN it goes into 'N more'
    folded = rows(to_tree_text(root, min_share=0.45))
    assert [n for _, _, n, _ in folded] == ["<module>", "main", "read", "1 more"]
    # WHEN sorted by line THEN the children in file and line order (mylib's file sorts
    # before prog.py), and a note says so
    text = to_tree_text(root, sort_key="line", fold_share=0.0)
    assert [n for d, _, n, _ in rows(text) if d == 2] == ["import mylib", "main"]
    assert "note: children in line order" in text


def test_bad_options_are_refused() -> None:
    root, _ = profile2graph(import_stats())
    with pytest.raises(TypeError, match=r"unexpected option\(s\) \['fct_width'\]"):
        to_tree_text(root, fct_width=20)
    with pytest.raises(ValueError, match="max_indent must be >= 1"):
        to_tree_text(root, max_indent=0)
    with pytest.raises(ValueError, match="guides must be one of"):
        to_tree_text(root, guides="emoji")
    with pytest.raises(ValueError, match="fold_share must be in"):
        to_tree_text(root, fold_share=2.0)
    with pytest.raises(ValueError, match="min_share must be in"):
        to_tree_text(root, min_share=-1.0)
    with pytest.raises(NotImplementedError, match="sort_key must be one of"):
        to_tree_text(root, sort_key="calls")


def test_a_deep_chain_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a chain of 3000 user functions, each with own time
    root, _ = profile2graph(chain_stats(3000))
    # WHEN folded THEN each stack keeps at most MAX_DEPTH frames, the deeper time on
    # the last one kept
    view = folded_profile(root)
    stacks = list(folded_stacks(view))
    assert max(len(f) for f, _ in stacks) == view_folded.MAX_DEPTH
    assert sum(s for _, s in stacks) == pytest.approx(root.tall)
    # GIVEN a small bound on the frames of all paths THEN the paths past it are cut,
    # and the text says so
    monkeypatch.setattr(view_folded, "MAX_CELLS", 5000)
    view = folded_profile(root)
    assert view.shortened > 0
    assert sum(len(f) for f, _ in folded_stacks(view)) <= 5000 + 16 * view.shortened
    text = to_tree_text(root, fold_share=0.0, max_indent=10)
    assert "call paths were cut to their outermost 16 frames" in text
    # AND rows deeper than max_indent are drawn at that level, their level said
    lines = text.splitlines()
    assert max(map(len, lines)) < 120 and "[11] " in text
    assert lines[-1].startswith("[") and "deeper than 10 levels" in lines[-1]


def test_html_page_of_the_tree() -> None:
    # GIVEN the graph WHEN its tree page is written
    root, _ = profile2graph(import_stats())
    page = to_html(root, view="tree", program="prog.py")
    # THEN the sampled page, its title the cProfile header, no timeline nor hot lines
    # tab, and the script opening the hottest path through the user's code
    assert "<title>Call tree of prog.py: 10.0 s in total (cProfile" in page
    assert 'data-view="timeline"' not in page and 'data-view="hot"' not in page
    assert "r.kind === 'import'" in page
    data: Any = page.split('id="profile-data">')[1].split("</script>")[0]
    assert "import mylib" in data and "read" in data
    # AND a title given is the page's
    assert "<title>&lt;t&gt;</title>" in to_html(root, view="tree", title="<t>")


def test_many_paths_stay_fast_and_bounded() -> None:
    # GIVEN a wide graph of 400 functions called from many places
    rnd = random.Random(1)
    st = FakeStats()
    keys = [(f"m{i % 7}.py", i, f"f{i}") for i in range(400)]
    for key in keys:
        st.add(key, 1, 1, 1e-3, 1.0)
    for i in range(1, 400):
        for c in rnd.sample(range(i), min(i, 3)):
            st.call(keys[c], keys[i], 1, 1e-4, 0.3)
    root, _ = profile2graph(st)
    # WHEN folded THEN the expansion keeps to its bound of rows
    view = folded_profile(root, max_rows=2000)
    assert len(view.profile.stacks) <= 2000 and view.capped == 2000
    assert "past 2,000 rows" in to_tree_text(root, max_rows=2000)


def import_heavy_stats() -> FakeStats:
    """The script of :func:`import_stats` whose import takes 97 % of the time, its main
    (and the work under it) 3 %: under the page's 5 % that opens a row."""
    st = import_stats()
    st.stats[MODULE] = (1, 1, 0.0, 200.0, st.stats[MODULE][4])
    st.stats[EXEC] = (4, 4, 0.0, 200.0, st.stats[EXEC][4])
    st.stats[MODULE][4][EXEC] = (1, 1, 0.0, 200.0)
    st.stats[FIND] = (1, 1, 190.1, 194.0, {MODULE: (1, 1, 190.1, 194.0)})
    return st


@pytest.mark.slow
@needs_browser
def test_the_page_opens_on_the_users_code(tmp_path: Path) -> None:
    # GIVEN a program whose import takes nearly all the time, its own code 3 %
    root, _ = profile2graph(import_heavy_stats())
    path = tmp_path / "tree.html"
    path.write_text(to_html(root, view="tree", program="prog.py"), encoding="utf-8")
    # WHEN the page is opened
    dom = dump_dom(path.as_uri())
    shown = re.findall(r'<div class="row k-(\w+)"[^>]*>.*?<span class="n">([^<]*)</span>', dom)
    # THEN the import is one row, and the hottest path through the user's code is open
    # down to the library call (main alone holds under the 5 % that opens a row)
    assert ("import", "import mylib") in shown
    assert [name for kind, name in shown if kind != "import"] == ["&lt;module&gt;", "main", "read"]
    assert 'data-ready="yes"' in dom


def test_library_code_stays_library_after_clean_text() -> None:
    # GIVEN the graph built with a cleaner keeping file names only (as the magics do)
    root, _ = profile2graph(import_stats(), clean_text=lambda x: x.split("/")[-1])
    # WHEN its tree is drawn THEN the library frames fold all the same, shown by their
    # short names, and the import is still one row
    got = rows(to_tree_text(root, fold_share=0.0))
    read = next(r for r in got if r[2] == "read")
    assert read[3].startswith("  io.py:40  [2 frames hidden (")
    assert [name for _, _, name, _ in got] == ["<module>", "main", "read", "import __init__"]
