"""The call tree view (``_profiling/view_tree.py``: the expansion of the graph into
call paths that ``view_folded`` folds, ``call_tree``, ``hot_paths``), the text and page
of the folded tree on those paths, and the layout of the profiling pipeline."""

from __future__ import annotations

import ast
import cProfile
import io
import json
import os
import random
import re
import sys
from pathlib import Path
from pstats import Stats
from typing import Any

import pytest
from helpers import DATA as _DATA
from helpers import ROOT, dump_dom, needs_browser, run_cli
from helpers import tree_rows as rows
from test_profiling import FakeStats, chain_stats, self_recursion_stats

from onnxrt_backend_dev.monitoring._profiling.view_tree import CallTree, TreeItem
from onnxrt_backend_dev.monitoring.profiling import (
    FORMATS,
    ProfileNode,
    call_tree,
    hot_paths,
    profile2graph,
    to_collapsed,
    to_html,
    to_tree_text,
)

DATA = str(_DATA)
PACKAGE = ROOT / "onnxrt_backend_dev" / "monitoring" / "_profiling"


def random_stats(seed: int, n: int = 80) -> FakeStats:
    """Random graph with fan-in, self recursion and back edges (cycles)."""
    rnd = random.Random(seed)
    st = FakeStats()
    keys = [("prog.py", i + 1, f"f{i}") for i in range(n)]
    for key in keys:
        st.add(key, 1, 1, rnd.uniform(0, 1e-3), rnd.uniform(1e-3, 1.0))
    for i in range(1, n):
        for c in rnd.sample(range(i), min(i, rnd.randint(1, 4))):
            k = rnd.randint(1, 9)
            st.call(keys[c], keys[i], k, 1e-4, rnd.uniform(0, 1.2) * st.stats[keys[i]][3])
    for _ in range(n // 8):
        a = rnd.randrange(n)
        b = rnd.randrange(a + 1)
        st.call(keys[a], keys[b], 3, 1e-5, rnd.uniform(0, 0.5))
    return st


def check_invariants(tree: CallTree) -> None:
    items = tree.items
    assert items[0].parent == -1 and items[0].depth == 0
    sums = [0.0] * len(items)
    for i, it in enumerate(items):
        assert it.share == pytest.approx(it.time / tree.total if tree.total else 0.0)
        if it.parent < 0:
            continue
        parent = items[it.parent]
        assert it.parent < i and it.depth == parent.depth + 1
        assert it.time <= parent.time * (1 + 1e-9) + 1e-12
        sums[it.parent] += it.time
    for it, s in zip(items, sums, strict=True):
        # Children (folded rows included) never add up to more than their parent.
        assert s <= it.time * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("fold", [0.0, 0.005, 0.05])
def test_tree_invariants_on_random_graphs(seed: int, fold: float) -> None:
    root, _ = profile2graph(random_stats(seed))
    tree = call_tree(root, fold_share=fold, max_rows=3000)
    check_invariants(tree)
    limit = fold * tree.total
    # Past max_rows (paths multiply in a dense graph), the rest is folded too.
    capped = len(tree.items) >= 3000
    for it in tree.items[1:]:
        if it.node is None:  # a folded row: each row it stands for was under the share
            assert it.folded >= 1
            assert capped or it.time <= it.folded * limit + 1e-12
        else:
            assert it.time >= limit and (it.time > 0 or fold == 0)
    assert len(tree.items) < 3000 + 3000  # at most one folded row per expanded row


def test_tree_of_real_profiles_respects_filters() -> None:
    for name in ("cprofile.prof", "yappi.prof", "pyinstrument.prof", "profile_module.prof"):
        root, _ = profile2graph(os.path.join(DATA, name))
        for opts in ({}, {"hide_stdlib": True}, {"max_depth": 2}, {"min_share": 0.1}):
            tree = call_tree(root, **opts)
            check_invariants(tree)
            if "max_depth" in opts:
                base = 1 if tree.items[0].node is not None and tree.items[0].node.virtual else 0
                assert max(it.depth for it in tree.items if it.node) <= 2 + base
            if opts.get("hide_stdlib"):
                # THEN consecutive library frames are collapsed into the first one called
                # from the user's code: no library row under another library row
                items = tree.items
                parents = [items[it.parent].node if it.parent >= 0 else None for it in items]
                assert not any(
                    it.node.library and parent.library
                    for it, parent in zip(items, parents, strict=True)
                    if it.node is not None and parent is not None
                )


def test_edge_figures_and_entry_point() -> None:
    # GIVEN exec -> main -> (a, b), b called by main and by a
    st = FakeStats()
    ex, main, a, b = (
        ("~", 0, "<built-in method builtins.exec>"),
        *(("prog.py", i, n) for i, n in ((1, "<module>"), (5, "a"), (9, "b"))),
    )
    st.add(ex, 1, 1, 0.0, 10.0)
    st.add(main, 1, 1, 1.0, 10.0)
    st.add(a, 2, 2, 2.0, 6.0)
    st.add(b, 5, 5, 4.0, 4.0)
    st.call(ex, main, 1, 1.0, 10.0)
    st.call(main, a, 2, 2.0, 6.0)
    st.call(main, b, 1, 0.8, 3.0)
    st.call(a, b, 4, 3.2, 1.0)
    root, _ = profile2graph(st)
    tree = call_tree(root, fold_share=0.0)
    rows = [(it.depth, it.node.func_name, it.calls, it.time) for it in tree.items if it.node]
    # THEN the tree starts at the script's <module>, not at exec; each edge is a child with
    # its own calls and time, hottest first; b appears under both callers
    assert rows == [
        (0, "<module>", 1, 10.0),
        (1, "a", 2, 6.0),
        (2, "b", 4, 1.0),
        (1, "b", 1, 3.0),
    ]
    # AND the text draws these paths, from the <module>, each row its path's time
    text = to_tree_text(root, program="prog.py", fold_share=0.0)
    assert text.startswith("Call tree of prog.py: 10.0 s in total (cProfile")
    lines = text.splitlines()
    assert lines[3] == "└─ 10.000 s 100.0 %  <module>  prog.py:1"
    assert "   ├─ 6.000 s  60.0 %  a  prog.py:5" in lines
    assert "   │  └─ 1.000 s  10.0 %  b  prog.py:9" in lines
    assert "   └─ 3.000 s  30.0 %  b  prog.py:9" in lines


def test_recursion_5000_deep_stays_small() -> None:
    root, _ = profile2graph(self_recursion_stats(5000))
    tree = call_tree(root)
    assert len(tree.items) == 2
    rec = tree.items[1]
    assert rec.node is not None and rec.node.func_name == "rec" and rec.recursive == 5000
    # AND the text is two rows, the recursion's time on rec (its calls are the
    # reference view's)
    lines = to_tree_text(root).splitlines()
    assert lines[3:] == [
        "└─ 1.000 s 100.0 %  main  prog.py:1",
        "   └─ 1.000 s 100.0 %  rec  prog.py:5",
    ]


def _ping(n: int) -> int:
    return _pong(n - 1) if n > 0 else 0


def _pong(n: int) -> int:
    return _ping(n - 1) + 1 if n > 0 else 0


def test_real_mutual_recursion_is_folded() -> None:
    pr = cProfile.Profile()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 12_000))
    try:
        pr.enable()
        _ping(5000)
        pr.disable()
    finally:
        sys.setrecursionlimit(limit)
    root, _ = profile2graph(Stats(pr))
    tree = call_tree(root, fold_share=0.0)
    names = [it.node.func_name for it in tree.items if it.node is not None]
    assert names.count("_ping") == 1 and names.count("_pong") == 1
    assert len(tree.items) < 10
    check_invariants(tree)


def reentry_stats(recursive_calls: bool = True, helper: float = 0.9) -> FakeStats:
    """main > agg > amf > agg > mean > factorize, as pandas' SeriesGroupBy.aggregate
    records it: ``agg`` calls ``amf`` which calls ``agg`` again, whose second call goes
    on into ``mean``. cProfile only keeps the edges ``agg -> amf``, ``amf -> agg`` and
    ``agg -> mean``."""
    st = FakeStats()
    main, agg, amf = ("prog.py", 1, "main"), ("prog.py", 10, "agg"), ("prog.py", 20, "amf")
    mean, fact = ("prog.py", 30, "mean"), ("prog.py", 40, "factorize")
    st.add(main, 1, 1, 0.0, 1.0)
    st.add(agg, 1, 2 if recursive_calls else 1, 0.01, 1.0)
    st.add(amf, 1, 1, 0.01, 0.99)
    st.add(mean, 1, 1, 0.1 * helper, helper)
    st.add(fact, 1, 1, 0.9 * helper, 0.9 * helper)
    st.call(main, agg, 1, 0.0, 1.0)
    st.call(agg, amf, 1, 0.01, 0.99)
    st.call(amf, agg, 1, 0.005, 0.95)
    st.call(agg, mean, 1, 0.1 * helper, helper)
    st.call(mean, fact, 1, 0.9 * helper, 0.9 * helper)
    return st


def _path_check(tree: CallTree) -> None:
    """On every path: functions new to the path are distinct, a re-entry row names a
    function above it and opens no re-entry, and is never a direct self call."""
    items = tree.items
    for it in items:
        if it.node is None:
            continue
        chain, j = [], it.parent
        while j >= 0:
            chain.append(items[j])
            j = items[j].parent
        above = [c.node for c in chain if not c.reentry]
        if it.reentry:
            assert it.node in above and it.node is not items[it.parent].node
            assert not items[it.parent].reentry
        else:
            assert it.node not in above


def test_reentry_goes_on_into_new_callees() -> None:
    # GIVEN agg re-entered through amf (its second call recursive, as cProfile counts)
    root, _ = profile2graph(reentry_stats())
    tree = call_tree(root)
    check_invariants(tree)
    _path_check(tree)
    # THEN the hot path goes on past the re-entry, as pyinstrument's stack does
    assert hot_paths(tree)[0] == ["main", "agg", "amf", "agg", "mean", "factorize"]
    again = [it for it in tree.items if it.reentry]
    assert len(again) == 1 and again[0].node is not None and again[0].node.func_name == "agg"
    assert items_names(tree, again[0]) == ["mean"]  # amf, on the path, is not expanded
    assert again[0].recursive == 1  # agg -> amf, folded on the re-entry row
    # AND the text goes down the same path first, agg drawn again under amf
    names = [name for _, _, name, _ in rows(to_tree_text(root))]
    assert names[:6] == ["main", "agg", "amf", "agg", "mean", "factorize"]


def items_names(tree: CallTree, row: TreeItem) -> list[str]:
    index = tree.items.index(row)
    return [it.node.func_name for it in tree.items if it.parent == index and it.node is not None]


@pytest.mark.parametrize(
    ("recursive_calls", "fold", "helper"),
    [(False, 0.005, 0.9), (True, 0.5, 0.9), (True, 0.005, 0.0), (True, 0.0, 0.005)],
)
def test_reentry_folded_when_it_leads_nowhere(
    recursive_calls: bool, fold: float, helper: float
) -> None:
    # GIVEN no recursive call recorded (agg never ran twice at once), or callees under
    # the fold, or none with time, or one under 1 % of the re-entry's time (a finalizer)
    root, _ = profile2graph(reentry_stats(recursive_calls, helper))
    tree = call_tree(root, fold_share=fold)
    # THEN no re-entry row: the calls are counted on the caller's row, as before
    assert not any(it.reentry for it in tree.items)
    amf = [it for it in tree.items if it.node is not None and it.node.func_name == "amf"]
    assert [it.recursive for it in amf] == [1] * len(amf)
    check_invariants(tree)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fold", [0.0, 0.01])
def test_reentry_invariants_on_random_recursive_graphs(seed: int, fold: float) -> None:
    st = random_stats(seed, n=40)
    for key, (cc, nc, tt, ct, callers) in list(st.stats.items()):
        st.stats[key] = (cc, nc + 2, tt, ct, callers)  # every function recursive
    root, _ = profile2graph(st)
    tree = call_tree(root, fold_share=fold, max_rows=5000)
    check_invariants(tree)
    _path_check(tree)
    depth = max(it.depth for it in tree.items)
    assert depth <= 2 * 40
    # Folding nothing, the cycles of these graphs do show re-entries.
    assert fold > 0 or any(it.reentry for it in tree.items)


def _leaf() -> int:
    return sum(range(200_000))


def _ping_leaf(n: int) -> int:
    return _pong_leaf(n - 1) if n > 0 else _leaf()


def _pong_leaf(n: int) -> int:
    return _ping_leaf(n - 1) + 1


def test_real_mutual_recursion_with_a_reentry_stays_small() -> None:
    # GIVEN a 5,000-deep mutual recursion whose innermost call goes into a new function
    pr = cProfile.Profile()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 12_000))
    try:
        pr.enable()
        _ping_leaf(5000)
        pr.disable()
    finally:
        sys.setrecursionlimit(limit)
    root, _ = profile2graph(Stats(pr))
    tree = call_tree(root, fold_share=0.0)
    # THEN the re-entry of _ping_leaf is one marked row leading to _leaf, a few rows
    again = [it for it in tree.items if it.reentry]
    assert [it.node.func_name for it in again if it.node is not None] == ["_ping_leaf"]
    assert items_names(tree, again[0]) == ["_leaf"]
    assert hot_paths(tree)[0][-4:] == ["_ping_leaf", "_pong_leaf", "_ping_leaf", "_leaf"]
    assert len(tree.items) < 12
    check_invariants(tree)
    _path_check(tree)


def _json_profile(records: int) -> ProfileNode:
    data = [{"id": i, "name": f"n{i}", "tags": ["a", "b"], "sub": {"x": i}} for i in range(records)]

    def main() -> None:
        json.dumps(data, indent=2)

    pr = cProfile.Profile()
    pr.enable()
    main()
    pr.disable()
    return profile2graph(Stats(pr))[0]


EXPECTED_JSON_PATH = ["main", "dumps", "encode", "_iterencode", "_iterencode_list"]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"fold_share": 0.0},
        {"fold_share": 0.05},
        {"sort_key": "line"},
        {"sort_key": "time"},
        {"min_share": 0.01},
        {"max_depth": 12},
    ],
)
def test_hot_path_of_json_dumps_survives_folding_filters_and_sorting(options: Any) -> None:
    root = _json_profile(4000)
    paths = hot_paths(call_tree(root, **options), count=5)
    # THEN the hottest path reads as pyinstrument's (built-ins left out, the recursive
    # encoders written once)
    assert paths[0] == [*EXPECTED_JSON_PATH, "_iterencode_dict"]
    assert 1 <= len(paths) <= 5 and len({tuple(p) for p in paths}) == len(paths)
    with_builtins = hot_paths(root, count=5, builtins=True)
    assert with_builtins[0][:3] == ["main", "dumps", "encode"]
    assert any("built-in" in name for path in with_builtins for name in path)


JSON_SCRIPT = """
import json
records = [{"id": i, "name": f"user{i}", "tags": ["a", "b"], "sub": {"x": i, "y": [1, 2]}}
           for i in range(40_000)]
text = json.dumps(records, indent=2)
"""


@pytest.mark.slow
def test_hot_path_of_the_issue_workload(tmp_path: Path) -> None:
    # GIVEN json.dumps(indent=2) of 40,000 records profiled by the profile command
    script = tmp_path / "dump.py"
    script.write_text(JSON_SCRIPT, encoding="utf-8")
    prof = tmp_path / "dump.prof"
    code, _, err = run_cli("profile", "-q", "-o", str(prof), str(script))
    assert code == 0, err
    # THEN the hottest path of the call tree is pyinstrument's
    expected = ["<module>", "dumps", "encode", "_iterencode", "_iterencode_list"]
    assert hot_paths(profile2graph(str(prof))[0])[0] == [*expected, "_iterencode_dict"]
    # AND the text shows the script's <module>, its library call folded into one row
    code, out, _ = run_cli("profile", "show", str(prof))
    got = rows(out)
    assert [name for _, _, name, _ in got] == ["<module>", "dumps", "<listcomp>"]
    assert got[0][3].endswith("/dump.py:1") and "frames hidden (" in got[1][3]
    # AND with --show-library, the path from the script's <module> down, hottest first
    code, out, _ = run_cli("profile", "--show-library", "show", str(prof))
    names = [name for _, _, name, _ in rows(out)]
    assert names[:6] == [*expected, "_iterencode_dict"]
    # (the hottest built-in under _iterencode_dict is a near-tie that cProfile's timings
    # decide: isinstance, called 7 times a record, or the string encoder, 6 times; a
    # stress run at load 3 saw the encoder first)
    assert names[6] in (
        "<built-in method builtins.isinstance>",
        "<built-in method _json.encode_basestring_ascii>",
    )


def test_hot_paths_bad_count() -> None:
    with pytest.raises(ValueError, match="count must be >= 1, got 0"):
        hot_paths(_json_profile(10), count=0)


def test_bad_tree_options() -> None:
    root, _ = profile2graph(os.path.join(DATA, "cprofile.prof"))
    with pytest.raises(ValueError, match="fold_share must be in"):
        call_tree(root, fold_share=1.5)
    with pytest.raises(ValueError, match="max_rows must be >= 1"):
        call_tree(root, max_rows=0)
    with pytest.raises(ValueError, match="max_indent must be >= 1"):
        to_tree_text(root, max_indent=0)
    with pytest.raises(ValueError, match="view must be one of"):
        to_html(root, view="flat")
    with pytest.raises(TypeError, match=r"unexpected option\(s\) \['fct_width'\]"):
        to_tree_text(root, fct_width=20)
    with pytest.raises(NotImplementedError, match="sort_key must be one of"):
        call_tree(root, sort_key="calls")


def test_text_rows_fold_and_names() -> None:
    # GIVEN a function with a long name in a deep folder, 30 tiny callees and a name
    # holding a newline
    st = FakeStats()
    main = ("/home/user/project/src/pkg/very/deep/module.py", 3, "main")
    long = ("/home/user/project/src/pkg/very/deep/module.py", 9, "a" * 90)
    st.add(main, 1, 1, 0.0, 1.0)
    st.add(long, 1, 1, 0.5, 0.9)
    st.call(main, long, 1, 0.5, 0.9)
    for i in range(30):
        f = ("other.py", i, f"tiny{i}\nx" if i == 0 else f"tiny{i}")
        st.add(f, 1, 1, 0.001, 0.001)
        st.call(main, f, 1, 0.001, 0.001)
    root, _ = profile2graph(st)
    text = to_tree_text(root)
    lines = text.splitlines()
    # never cut; the path as every view shows it (_sampling.view.short_file: a library's
    # from its root, a user's relative to the current folder, else whole)
    assert "a" * 90 + "  /home/user/project/src/pkg/very/deep/module.py:9" in text
    assert re.search(r"└─ 0\.030 s   3\.0 %  30 more$", lines[-1]), lines[-1]
    assert len(lines) == 3 + 3  # header, note, thread; main, its callee, '30 more'
    shown = to_tree_text(root, fold_share=0.0)
    assert "tiny0\\nx  other.py:0" in shown and " more" not in shown
    assert len(shown.splitlines()) == 3 + 2 + 30


def test_deep_chain_is_drawn_bounded() -> None:
    root, _ = profile2graph(chain_stats(300))
    text = to_tree_text(root, fold_share=0.0, max_indent=10)
    lines = text.splitlines()
    assert len(lines) == 3 + 300 + 1
    assert max(map(len, lines)) < 120
    assert re.search(r"└─ \[299\] 1\.000 ms   0\.3 %  f299  prog\.py:300$", lines[-2])
    assert lines[-1].startswith("[289 rows deeper than 10")


def test_html_tree_page_is_self_contained_and_escaped() -> None:
    st = FakeStats()
    main, evil = ("prog.py", 1, "main"), ("prog.py", 2, "</script><b>x</b>\u2028")
    st.add(main, 1, 1, 0.0, 1.0)
    st.add(evil, 1, 1, 1.0, 1.0)
    st.call(main, evil, 1, 1.0, 1.0)
    root, _ = profile2graph(st)
    page = to_html(root, view="tree", title="<t>")
    assert (
        "</script><b>" not in page and "\u2028" not in page and "<title>&lt;t&gt;</title>" in page
    )
    assert not re.search(r"(src|href)\s*=|https?://|@import", page)
    data = page.split('<script type="application/json" id="profile-data">')[1]
    doc = json.loads(data.split("</script>")[0])
    assert doc["threads"][0]["rows"][2]["name"] == "</script><b>x</b>\u2028"


def test_registry_is_the_one_list() -> None:
    from onnxrt_backend_dev.monitoring._cli import cmd_profile
    from onnxrt_backend_dev.monitoring._profiling.formats import guess_format

    assert guess_format("x.speedscope.json") == "speedscope"
    assert guess_format("x.JSON") == "json" and guess_format("x.folded") == "collapsed"
    assert guess_format("x.pstats") == "prof" and guess_format("x.out") == "text"
    assert FORMATS["html"].takes == {"sort_key", "view"}
    source = Path(cmd_profile.__file__).read_text()
    assert '"speedscope"' not in source and '".folded"' not in source and "tottime" not in source


def _top_imports(path: Path) -> set[str]:
    """The sibling modules imported at import time (not inside functions)."""
    found = set()
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.ImportFrom) and stmt.level == 1:
            if stmt.module:
                found.add(stmt.module)
            else:
                found.update(alias.name for alias in stmt.names)
    return found


def test_pipeline_has_no_import_cycle() -> None:
    graph = {p.stem: _top_imports(p) for p in PACKAGE.glob("*.py")}
    assert graph["model"] == set(), "the model imports no later stage"
    state: dict[str, int] = {}
    for start in graph:
        stack = [(start, iter(sorted(graph[start])))]
        state[start] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[name] = 2
                stack.pop()
            elif nxt in graph:
                assert state.get(nxt) != 1, f"import cycle through {name} -> {nxt}"
                if nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(graph[nxt]))))
    # Renderers read views, never another renderer's or a walker's private names.
    for path in PACKAGE.glob("render_*.py"):
        for stmt in ast.parse(path.read_text()).body:
            if isinstance(stmt, ast.ImportFrom) and stmt.level == 1:
                assert not any(a.name.startswith("_") for a in stmt.names), path.name


# ---------------------------------------------------------------- the page in a browser


def visible_rows(dom: str) -> list[tuple[str, str]]:
    """``(kind, name)`` of the rows of a tree page shown after its scripts ran."""
    found = re.findall(r'<div class="row k-(\w+)( hidden)?"[^>]*>(.*?)</div>', dom)
    names = [
        (kind, re.search(r'<span class="n">([^<]*)</span>', body))
        for kind, h, body in found
        if not h
    ]
    return [(kind, m.group(1)) for kind, m in names if m]


@pytest.mark.slow
@needs_browser
def test_tree_page_in_browser(tmp_path: Path) -> None:
    # GIVEN the tree page of json.dumps
    path = tmp_path / "tree.html"
    path.write_text(to_html(_json_profile(3000), view="tree"), encoding="utf-8")
    # WHEN opened THEN the user's function and the library call it makes are shown, the
    # json frames folded into it
    dom = dump_dom(path.as_uri())
    assert visible_rows(dom) == [("user", "main"), ("library", "dumps")]
    assert 'data-ready="yes"' in dom and "frames hidden (" in dom
    # GIVEN a re-entry on the hot path THEN the page opens through it
    path.write_text(to_html(profile2graph(reentry_stats())[0], view="tree"), encoding="utf-8")
    dom = dump_dom(path.as_uri())
    names = [name for _, name in visible_rows(dom)]
    assert names[:6] == ["main", "agg", "amf", "agg", "mean", "factorize"]


def test_max_rows_caps_and_says_so() -> None:
    root, _ = profile2graph(random_stats(0))
    tree = call_tree(root, fold_share=0.0, max_rows=50)
    check_invariants(tree)
    assert tree.capped == 50 and len([it for it in tree.items if it.node is not None]) <= 50
    text = to_tree_text(root, fold_share=0.0, max_rows=50)
    assert "note: the call paths past 50 rows are in their callers' time" in text.splitlines()
    assert call_tree(root).capped == 0


def test_ascii_guides_for_a_terminal_without_box_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prof = os.path.join(DATA, "cprofile.prof")
    root, _ = profile2graph(prof)
    assert re.search(r"\n   `- [\d.]+ ms  99\.9 %  fct4  ", to_tree_text(root, guides="ascii"))
    with pytest.raises(ValueError, match="guides must be one of"):
        to_tree_text(root, guides="emoji")
    # GIVEN a standard output that cannot write box characters WHEN the command prints
    # the tree THEN it draws it in ASCII
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    code, out, _ = run_cli("profile", "show", prof)
    assert code == 0 and "`- " in out and "─" not in out


@pytest.mark.slow
@needs_browser
def test_tree_page_shows_hostile_names_as_text(tmp_path: Path) -> None:
    # GIVEN a profile whose function names hold markup and a script
    st = FakeStats()
    main = ("prog.py", 1, "main")
    evil = ("<b>f.py</b>", 2, "<img src=x onerror=\"document.title='X'\">")
    closing = ("prog.py", 3, "</script><script>document.title='Y'</script>")
    st.add(main, 1, 1, 0.0, 1.0)
    for f, t in ((evil, 0.6), (closing, 0.4)):
        st.add(f, 1, 1, t, t)
        st.call(main, f, 1, t, t)
    root, _ = profile2graph(st)
    path = tmp_path / "evil.html"
    path.write_text(to_html(root, view="tree", title="t"), encoding="utf-8")
    # WHEN opened THEN the names show as text and no script of theirs ran
    dom = dump_dom(path.as_uri())
    assert "<title>t</title>" in dom and 'data-ready="yes"' in dom
    assert "&lt;img src=x onerror=" in dom and "<img" not in dom
    assert "&lt;/script&gt;&lt;script&gt;" in dom


@pytest.mark.parametrize(
    ("sort_key", "said"),
    [("cumulative", ""), ("time", "children by own time"), ("line", "children in line order")],
)
def test_a_note_says_the_order_of_the_children(sort_key: str, said: str) -> None:
    # GIVEN main calling a (own 1 s), b (own 3 s, 3 s in all) and c (own 0, 5 s in all)
    st = FakeStats()
    keys = {n: ("prog.py", i, n) for i, n in ((1, "main"), (9, "c"), (5, "b"), (3, "a"))}
    st.add(keys["main"], 1, 1, 0.0, 9.0)
    for name, own, total in (("a", 1.0, 1.0), ("b", 3.0, 3.0), ("c", 0.0, 5.0)):
        st.add(keys[name], 1, 1, own, total)
        st.call(keys["main"], keys[name], 1, own, total)
    st.add(("prog.py", 20, "d"), 1, 1, 5.0, 5.0)
    st.call(keys["c"], ("prog.py", 20, "d"), 1, 5.0, 5.0)
    text = to_tree_text(profile2graph(st)[0], sort_key=sort_key)
    # THEN the children come in that order, and a note says which (none: hottest first)
    order = [name for _, _, name, _ in rows(text) if name in "abc"]
    assert order == {"cumulative": ["c", "b", "a"], "time": ["b", "a", "c"]}.get(
        sort_key, ["a", "b", "c"]
    )
    notes = [line for line in text.splitlines() if line.startswith("note: children")]
    assert notes == ([f"note: {said}"] if said else [])


def _loader_profile() -> ProfileNode:
    def loads(n: int) -> int:
        return sum(range(n))

    def load(n: int) -> int:
        return loads(n) + loads(n)

    def main() -> None:
        for _ in range(20):
            load(20_000)

    pr = cProfile.Profile()
    pr.runcall(main)
    return profile2graph(Stats(pr))[0]


def test_focus_matching_a_function_and_its_callee_counts_the_time_once() -> None:
    # GIVEN load calling loads, and a focus matching both names
    root = _loader_profile()
    load = next(n for n in root if n.func_name == "load")
    # WHEN the tree and the flame-graph paths start from the focus
    tree = call_tree(root, focus="load")
    collapsed = to_collapsed(root, focus="load", unit=1e-6)
    # THEN both start at load alone: loads is below it, its time not counted again
    assert tree.items[0].node is load and tree.total == pytest.approx(load.tall)
    weights = sum(int(line.rsplit(" ", 1)[1]) for line in collapsed.splitlines())
    assert weights == pytest.approx(load.tall * 1e6, rel=0.01, abs=5)
    assert all(line.startswith("load ") for line in collapsed.splitlines())
