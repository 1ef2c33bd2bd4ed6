"""Tests of onnxrt_backend_dev.monitoring.profiling: contract, robustness, exports."""

from __future__ import annotations

import cProfile
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from pstats import SortKey, Stats
from typing import Any

import pytest
from helpers import DATA as _DATA
from helpers import dump_dom, needs_browser

from onnxrt_backend_dev.monitoring.profiling import (
    FORMATS,
    PathLimits,
    ProfileNode,
    export,
    plot_profile,
    profile,
    profile2df,
    profile2graph,
    to_collapsed,
    to_html,
    to_speedscope,
)

DATA = str(_DATA)
FIXTURES = ["cprofile.prof", "profile_module.prof", "pyinstrument.prof", "yappi.prof"]
LINE_RE = re.compile(
    r"^(?P<indent> *)(?P<fct>.+?) -- +(?P<nc1>-?\d+) +(?P<nc2>-?\d+) -- "
    r"(?P<tin>\d+\.\d{5}) (?P<tall>\d+\.\d{5}) -- (?P<where>.+) \((?P<fct2>.+)\)"
    r"(?P<more> \+\+\+)?(?: -- (?P<share>\d+\.\d)%)?$"
)


class FakeStats:
    """A pstats-like object: ``stats[func] = (cc, nc, tt, ct, callers)``."""

    def __init__(self) -> None:
        self.stats: dict[tuple[str, int, str], tuple[Any, ...]] = {}

    def add(self, func: tuple[str, int, str], cc: int, nc: int, tt: float, ct: float) -> None:
        self.stats[func] = (cc, nc, tt, ct, {})

    def call(
        self,
        caller: tuple[str, int, str],
        callee: tuple[str, int, str],
        n: int,
        tt: float,
        ct: float,
    ) -> None:
        self.stats[callee][4][caller] = (n, n, tt, ct)


def f_(i: int, name: str = "f") -> tuple[str, int, str]:
    return ("prog.py", i + 1, f"{name}{i}")


def chain_stats(depth: int) -> FakeStats:
    """f0 -> f1 -> ... -> f{depth-1}, each 1 ms of own time."""
    st = FakeStats()
    for i in range(depth):
        st.add(f_(i), 1, 1, 0.001, 0.001 * (depth - i))
    for i in range(1, depth):
        st.call(f_(i - 1), f_(i), 1, 0.001, 0.001 * (depth - i))
    return st


def self_recursion_stats(depth: int) -> FakeStats:
    """main -> rec, rec -> rec depth times, as cProfile records a deep recursion."""
    st = FakeStats()
    main, rec = ("prog.py", 1, "main"), ("prog.py", 5, "rec")
    st.add(main, 1, 1, 0.0, 1.0)
    st.add(rec, 1, depth + 1, 1.0, 1.0)
    st.call(main, rec, 1, 0.00001, 1.0)
    st.stats[rec][4][rec] = (depth, 0, 0.99999, 0.99999)
    return st


# ---------------------------------------------------------------- reference example


def fct0(t: float) -> None:
    time.sleep(t)


def fct1(t: float) -> None:
    time.sleep(t)


def fct2() -> None:
    fct1(0.01)
    fct1(0.001)


def fct3() -> None:
    fct0(0.02)
    fct1(0.05)


def fct4() -> None:
    fct2()
    fct3()


@pytest.fixture(scope="module")
def reference() -> tuple[Stats, str]:
    return profile(fct4)


def shape(text: str) -> list[tuple[int, str, bool]]:
    out = []
    for line in text.splitlines():
        m = LINE_RE.match(line)
        assert m is not None, line
        out.append((len(m["indent"]) // 4, m["fct"].strip(), m["more"] is not None))
    return out


def test_reference_example_shape(reference: tuple[Stats, str]) -> None:
    # GIVEN the document's example WHEN rendered THEN the same tree shape and format
    root, nodes = profile2graph(reference[0], clean_text=lambda x: x.split("/")[-1])
    text = root.to_text()
    sleep = "<built-in method time.sleep>"
    assert shape(text) == [
        (0, "fct1", False),
        (1, sleep, True),
        (0, "fct4", False),
        (1, "fct2", False),
        (2, "fct1", True),
        (1, "fct3", False),
        (2, "fct0", False),
        (3, sleep, True),
        (2, "fct1", True),
        (0, sleep, False),
    ]
    first = text.splitlines()[0]
    assert first.startswith("fct1" + " " * 57 + "--  3  3 -- ")
    assert first.endswith(":fct1 (fct1)")
    assert root.func_name == "fct4"
    assert all(k == n.key for k, n in nodes.items())


def test_reference_share_is_opt_in(reference: tuple[Stats, str]) -> None:
    root, _ = profile2graph(reference[0], clean_text=lambda x: x.split("/")[-1])
    lines = root.to_text(show_share=True).splitlines()
    assert lines[1].endswith("(<built-in method time.sleep>) +++ -- 0.0%") or re.search(
        r"\(<built-in method time.sleep>\) \+\+\+ -- \d+\.\d%$", lines[1]
    )
    m = LINE_RE.match(lines[2])
    assert m is not None and float(m["tall"]) >= 0.08 and m["share"] is not None


def test_share_of_total(reference: tuple[Stats, str]) -> None:
    root, _ = profile2graph(reference[0])
    rows = root.as_dict()
    fct4_row = next(r for r in rows if r["fct"] == "fct4")
    assert 0.9 <= fct4_row["share"] <= 1.0 + 1e-9
    assert {"fct", "where", "nc1", "nc2", "tin", "tall", "indent", "ncalls"} <= set(fct4_row)
    refs = [r for r in rows if r.get("more") == "+"]
    assert len(refs) == 4


def test_profile_returns(reference: tuple[Stats, str]) -> None:
    ps, text = reference
    assert isinstance(ps, Stats) and "fct4" in text and "cumulative" in text
    res, ps2, text2 = profile(lambda: 42, return_results=True)
    assert res == 42 and isinstance(ps2, Stats) and isinstance(text2, str)
    _, df = profile(fct2, as_df=True)
    assert list(df.columns) == [  # the reference's profile keeps namefct
        "namefct",
        "file",
        "ncalls1",
        "ncalls2",
        "tin",
        "cum_tin",
        "tall",
        "cum_tall",
    ]
    assert df["cum_tall"].is_monotonic_decreasing
    df2 = profile2df(ps)
    assert list(df2.columns) == ["fct", *df.columns[1:]]
    assert isinstance(profile2df(ps, as_df=False), list)


def test_profile_rootrem_and_kwargs() -> None:
    here = os.path.dirname(__file__)
    _, text = profile(fct2, rootrem=here)
    assert here not in text
    _, text = profile(fct2, rootrem=[(here, "HERE"), "zzz"])
    assert "HERE" in text
    with pytest.raises(TypeError, match="rootrem"):
        profile(fct2, rootrem=[3])
    with pytest.raises(ValueError, match="sort must be one of"):
        profile(fct2, sort="nope")
    assert "Ordered by: internal time" in profile(fct2, sort="tottime")[1]
    ps, _ = profile(fct2, builtins=False)
    assert not any("sleep" in str(k[2]) for k in ps.stats)


def test_exception_propagates_and_profiler_released() -> None:
    class Boom(Exception):
        pass

    def bad() -> None:
        raise Boom("x")

    with pytest.raises(Boom, match="x"):
        profile(bad)
    assert sys.getprofile() is None
    if hasattr(sys, "monitoring"):
        assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is None
    profile(fct2)  # usable again


def test_other_profiler_active_is_an_error() -> None:
    sys.setprofile(lambda *a: None)
    try:
        with pytest.raises(RuntimeError, match="another profiler is already active"):
            profile(fct2)
    finally:
        sys.setprofile(None)


# ---------------------------------------------------------------- node API


def test_profile_node_api() -> None:
    a = ProfileNode("a.py", 1, "a", 1, 1, 0.1, 1.0)
    b = ProfileNode("b.py", 2, "b", 2, 2, 0.9, 0.9)
    a.add_calls_to(b, (2, 2, 0.9, 0.9))
    b.add_called_by(a)
    assert a.key == "a.py:1:a" and b.get_root() is a and a.get_root() is a
    assert [n.key for n in a] == ["a.py:1:a", "b.py:2:b"]
    assert ProfileNode.filter_node_(b)
    tiny = ProfileNode("~", 0, "<built-in method len>", 1, 1, 1e-6, 1e-6)
    assert not ProfileNode.filter_node_(tiny)
    assert ProfileNode.filter_node_(tiny, info={"nc1": 100, "nc2": 100, "tall": 1.0})
    rows = a.as_dict()
    assert [(r["fct"], r["indent"], r["ncalls"]) for r in rows] == [("a", 0, 1), ("b", 1, 0)]
    doc = a.to_json(as_str=False)
    assert isinstance(doc, dict) and len(doc["profile"]) == 1
    assert json.loads(str(a.to_json(indent=2))) == json.loads(json.dumps(doc))
    assert "a.py:1:a" in repr(a) or "'a.py'" in repr(a)


def test_sort_keys(reference: tuple[Stats, str]) -> None:
    root, _ = profile2graph(reference[0])
    for key in (SortKey.LINE, SortKey.CUMULATIVE, SortKey.TIME, "cumulative", "tottime"):
        assert root.to_text(sort_key=key)
    cum = [r["fct"] for r in root.as_dict(sort_key=SortKey.CUMULATIVE) if r["indent"] == 1]
    assert cum[:2] == ["fct3", "fct2"]
    with pytest.raises(NotImplementedError):
        root.as_dict(sort_key=SortKey.NAME)
    with pytest.raises(NotImplementedError):
        root.to_json(sort_key=SortKey.CALLS)


def test_get_root_in_a_pure_cycle() -> None:
    a = ProfileNode("x.py", 1, "a", 1, 1, 0.1, 2.0)
    b = ProfileNode("x.py", 2, "b", 1, 1, 0.1, 1.0)
    a.add_calls_to(b, (1, 1, 0.1, 1.0))
    b.add_called_by(a)
    b.add_calls_to(a, (1, 1, 0.1, 1.0))
    a.add_called_by(b)
    assert b.get_root() is a
    assert [r["fct"] for r in a.as_dict(filter_node=lambda n, info=None: True)] == ["a", "b", "a"]


# ---------------------------------------------------------------- robustness


def check_renders(root: ProfileNode, max_text: int = 1_000_000) -> str:
    def keep_all(n: ProfileNode, info: Any = None) -> bool:
        return True

    text = root.to_text(filter_node=keep_all)
    assert 0 < len(text) <= max_text
    rows = root.as_dict(filter_node=keep_all)
    assert rows
    assert json.loads(str(root.to_json(filter_node=keep_all)))["profile"]
    doc = to_speedscope(root, as_str=False)
    check_speedscope(doc, sum(n.tall for n in top_level(root)))
    assert to_collapsed(root).count("\n") >= 1
    return text


def top_level(root: ProfileNode) -> list[ProfileNode]:
    return list(root.calls_to) if root.virtual else [root]


def test_deep_chain_renders_bounded() -> None:
    # GIVEN a 3,000-deep chain of distinct functions (far beyond the recursion limit)
    root, nodes = profile2graph(chain_stats(3000))
    assert len(nodes) == 3000 and root.func_name == "f0"
    # WHEN rendered THEN text stays under 1 MB and says it folds deep levels
    text = check_renders(root)
    assert "deeper than 30 levels" in text.splitlines()[-1]
    assert "[2999] f2999" in text
    rows = root.as_dict()
    assert rows[-1]["indent"] == 2999
    doc = json.loads(str(root.to_json()))
    assert "folded" in doc


def test_self_recursion_100000() -> None:
    root, _ = profile2graph(self_recursion_stats(100_000))
    text = check_renders(root)
    assert [r[1:] for r in shape(text.replace(" -- 100.0%", ""))][:3] == [
        ("main", False),
        ("rec", True),
        ("rec", False),
    ]


REAL_DEEP_RECURSION = """
import json, sys, threading
from onnxrt_backend_dev.monitoring.profiling import profile, profile2graph, to_speedscope

def rec(n):
    return 0 if n == 0 else rec(n - 1)

def main():
    sys.setrecursionlimit(120_000)
    ps, _ = profile(lambda: rec(100_000))
    sys.setrecursionlimit(1_000)  # rendering runs at the default limit
    root, _ = profile2graph(ps)
    text = root.to_text()
    json.loads(root.to_json())
    doc = to_speedscope(root, as_str=False)
    src = "".join(f"def f{i}():\\n    return f{i + 1}()\\n" for i in range(3000))
    space = {}
    exec(compile(src + "def f3000():\\n    return 0\\n", "chain.py", "exec"), space)
    sys.setrecursionlimit(10_000)
    chain, _ = profile(space["f0"])
    sys.setrecursionlimit(1_000)
    chain_root, chain_nodes = profile2graph(chain)
    chain_text = chain_root.to_text()
    json.loads(chain_root.to_json())
    print(json.dumps({"text": text, "weights": sum(doc["profiles"][0]["weights"]),
                      "tall": root.tall, "chain_nodes": len(chain_nodes),
                      "chain_text": len(chain_text), "chain_last": chain_text[-200:]}))

threading.stack_size(512 * 1024 * 1024)  # deep Python recursion on 3.10 uses the C stack
t = threading.Thread(target=main)
t.start()
t.join()
"""


@pytest.mark.slow
def test_real_deep_recursion_and_chain() -> None:
    # GIVEN a real cProfile of a 100,000-deep recursion (in a child: it needs a large stack)
    proc = subprocess.run(
        [sys.executable, "-c", REAL_DEEP_RECURSION], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    # THEN the text names rec with its 100,001 calls, and speedscope keeps the total
    assert "100001" in res["text"] and " +++" in res["text"]
    assert res["weights"] == pytest.approx(res["tall"], rel=0.01)
    # AND a real 3,000-deep chain of distinct functions renders in under 1 MB
    assert res["chain_nodes"] >= 3001 and res["chain_text"] <= 1_000_000
    assert "deeper than 30 levels" in res["chain_last"]


def rec(n: int) -> int:
    return 0 if n == 0 else rec(n - 1)


def test_real_recursion_profile() -> None:
    ps, _ = profile(lambda: rec(800))
    root, _ = profile2graph(ps)
    check_renders(root)


def ping(n: int) -> int:
    return 0 if n <= 0 else pong(n - 1)


def pong(n: int) -> int:
    return ping(n - 1)


_budget = [0]


def cyc_a() -> None:
    _budget[0] -= 1
    if _budget[0] > 0:
        cyc_b()


def cyc_b() -> None:
    cyc_a()


def test_mutual_recursion_and_pure_cycle() -> None:
    ps, _ = profile(lambda: ping(300))
    check_renders(profile2graph(ps)[0])
    # GIVEN a profile of a where a and b call each other: no function without caller
    _budget[0] = 50
    ps, _ = profile(cyc_a)
    root, nodes = profile2graph(ps)
    text = check_renders(root)
    assert "cyc_a" in text and "cyc_b" in text
    assert nodes[root.key] is root


def test_hand_made_graph_with_disagreeing_callers_ends() -> None:
    # GIVEN a graph built by hand where T calls a, a and b call each other, but a lists
    # only b as its caller (add_called_by was not called for T): a and b each have a
    # single caller, so neither is printed at the top level
    t = ProfileNode("t.py", 1, "T", 1, 1, 0.1, 1.0)
    a = ProfileNode("t.py", 2, "a", 1, 1, 0.1, 0.5)
    b = ProfileNode("t.py", 3, "b", 1, 1, 0.1, 0.4)
    t.add_calls_to(a, (1, 1, 0.1, 0.5))
    a.add_calls_to(b, (1, 1, 0.1, 0.4))
    b.add_called_by(a)
    b.add_calls_to(a, (1, 1, 0.1, 0.3))
    a.add_called_by(b)
    # THEN each function is expanded once, met again it is a reference: the walk ends
    for options in ({}, {"hide_stdlib": True}, {"min_share": 0.01}, {"max_depth": 5}):
        lines = t.to_text(**options).splitlines()
        rows = [(len(ln) - len(ln.lstrip()), ln.split()[0], " +++" in ln) for ln in lines]
        assert rows == [(0, "T", False), (4, "a", False), (8, "b", False), (12, "a", True)]
        assert len(t.as_dict(**options)) == 4


def test_pure_cycle_beside_an_entry_point_is_shown() -> None:
    # GIVEN one profile with an entry point (main) and a cycle a <-> b that no other
    # function calls: the root is virtual, calling main and a (a's only caller is b)
    fs = FakeStats()
    main, a, b = ("m.py", 1, "main"), ("c.py", 1, "a"), ("c.py", 5, "b")
    fs.add(main, 1, 1, 0.3, 0.3)
    fs.add(a, 1, 11, 0.1, 0.6)
    fs.add(b, 10, 10, 0.2, 0.5)
    fs.call(b, a, 10, 0.05, 0.4)
    fs.call(a, b, 10, 0.2, 0.5)
    root, _ = profile2graph(fs)
    assert root.virtual and len(root.calls_to) == 2
    # THEN the cycle is printed from its entry, not lost with the virtual root
    lines = root.to_text().splitlines()
    rows = [(len(ln) - len(ln.lstrip()), ln.split()[0], " +++" in ln) for ln in lines]
    assert rows == [(0, "a", False), (4, "b", False), (8, "a", True), (0, "main", False)]
    assert [r["fct"] for r in root.as_dict() if r["indent"] == 0] == ["a", "main"]


@pytest.mark.parametrize("name", FIXTURES)
def test_profiles_from_other_tools(name: str) -> None:
    root, nodes = profile2graph(os.path.join(DATA, name))
    text = check_renders(root)
    assert "fct4" in text or "fct1" in text
    assert len(nodes) >= 5
    rows = root.as_dict()
    assert max(r["share"] for r in rows) <= 1.0 + 1e-9
    # a virtual root gathering several entry points is never shown, nor referenced
    assert all(r["indent"] > 0 for r in rows if r.get("more"))


def test_pyinstrument_negative_counts() -> None:
    root, _ = profile2graph(Stats(os.path.join(DATA, "pyinstrument.prof")))
    text = root.to_text()
    assert " -1 -1 -- " in text


def test_merge_several_profiles_and_colliding_keys() -> None:
    paths = [os.path.join(DATA, f) for f in FIXTURES[:2]]
    root, nodes = profile2graph([Stats(p) for p in paths], clean_text=os.path.basename)
    key = next(k for k in nodes if k.endswith(":fct4"))
    assert nodes[key].nc1 == 2
    check_renders(root)
    # every file collapses onto one name: keys collide and merge
    root, nodes = profile2graph(Stats(paths[0]), clean_text=lambda x: "same")
    assert any(n.nc1 >= 3 for n in nodes.values())
    check_renders(root)


def test_caller_without_entry_and_profiler_artifacts() -> None:
    st = FakeStats()
    st.add(f_(1), 2, 2, 0.1, 0.2)
    ghost = ("x.py", 3, "ghost")
    disable = ("~", 0, "<method 'disable' of '_lsprof.Profiler' objects>")
    st.stats[f_(1)][4][ghost] = (1, 1, 0.05, 0.1)
    st.stats[f_(1)][4][disable] = (1, 1, 0.05, 0.1)
    root, nodes = profile2graph(st)
    assert set(nodes) == {"prog.py:2:f1", "x.py:3:ghost"}
    assert root is nodes["x.py:3:ghost"] and root.calls_to == [nodes["prog.py:2:f1"]]
    check_renders(root)


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="ps must be"):
        profile2graph(3)
    with pytest.raises(ValueError, match="min_share"):
        profile2graph(os.path.join(DATA, FIXTURES[0]))[0].to_text(min_share=2)


# ---------------------------------------------------------------- filters


def test_filters(reference: tuple[Stats, str]) -> None:
    root, _ = profile2graph(reference[0])

    def keep(n: ProfileNode, info: Any = None) -> bool:
        return True

    def names(**o: Any) -> list[str]:
        return [r["fct"] for r in root.as_dict(filter_node=keep, **o)]

    assert all("built-in" not in n for n in names(hide_stdlib=True))
    assert "fct3" in names(hide_stdlib=True)
    assert max(r["indent"] for r in root.as_dict(max_depth=1)) == 1
    assert "fct2" not in names(min_share=0.5)  # about 10 % of the total
    focused = root.as_dict(filter_node=keep, focus="fct3")
    assert focused[0]["fct"] == "fct3" and {r["fct"] for r in focused} >= {"fct0", "fct1"}
    assert "fct4" not in {r["fct"] for r in focused}
    ss: Any = to_speedscope(root, as_str=False, hide_stdlib=True)
    assert all("built-in" not in f["name"] for f in ss["shared"]["frames"][1:])


def test_min_share_hides_top_level_rows_too() -> None:
    # GIVEN main -> a, main -> b, and util called by both a and b with 0.1 % of the time:
    # util has two callers, so it is a top-level row, referenced under a and b
    fs = FakeStats()
    m, a, b, u = ("m.py", 1, "main"), ("m.py", 5, "a"), ("m.py", 9, "b"), ("m.py", 20, "util")
    fs.add(m, 1, 1, 0.0, 1.0)
    fs.add(a, 1, 1, 0.5995, 0.6)
    fs.add(b, 1, 1, 0.3995, 0.4)
    fs.add(u, 2, 2, 0.001, 0.001)
    fs.call(m, a, 1, 0.5995, 0.6)
    fs.call(m, b, 1, 0.3995, 0.4)
    fs.call(a, u, 1, 0.0005, 0.0005)
    fs.call(b, u, 1, 0.0005, 0.0005)
    root, _ = profile2graph(fs)
    assert [r["fct"] for r in root.as_dict() if r["indent"] == 0] == ["main", "util"]
    # WHEN hiding rows below 5 % THEN util goes, at the top level as under its callers
    for key in (SortKey.LINE, SortKey.CUMULATIVE):
        rows = root.as_dict(sort_key=key, min_share=0.05)
        assert sorted(r["fct"] for r in rows) == ["a", "b", "main"]
        assert all(r["share"] >= 0.05 for r in rows)
    assert "util" not in root.to_text(min_share=0.05)
    assert "util" not in to_html(root, min_share=0.05)
    # AND a focused function below the share is hidden as well
    assert root.as_dict(focus="util", min_share=0.05) == []
    assert [r["fct"] for r in root.as_dict(focus="util")] == ["util"]


# ---------------------------------------------------------------- exports


def check_speedscope(doc: Any, total: float) -> None:
    """The required parts of speedscope's file-format-schema.json."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "seconds"
    assert isinstance(prof["name"], str) and prof["startValue"] <= prof["endValue"]
    assert len(prof["samples"]) == len(prof["weights"])
    assert all(0 <= i < len(frames) for s in prof["samples"] for i in s)
    assert sum(prof["weights"]) == pytest.approx(total, rel=0.01)


def test_speedscope(reference: tuple[Stats, str]) -> None:
    root, _ = profile2graph(reference[0])
    doc = json.loads(str(to_speedscope(root)))
    check_speedscope(doc, root.tall)
    frames = [(f["name"], f["file"], f["line"]) for f in doc["shared"]["frames"]]
    assert len(frames) == len(set(frames))
    small: Any = to_speedscope(chain_stats(3000), as_str=False, limits=PathLimits(max_items=100))
    assert len(small["profiles"][0]["samples"]) <= 100
    check_speedscope(small, 3.0)


def test_collapsed(reference: tuple[Stats, str]) -> None:
    root, _ = profile2graph(reference[0])
    text = to_collapsed(root)
    pattern = re.compile(r"^[^;\n]+(;[^;\n]+)* \d+$")
    lines = text.splitlines()
    assert lines and all(pattern.match(line) for line in lines)
    total_us = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
    assert total_us == pytest.approx(root.tall * 1e6, rel=0.01)
    assert any(line.startswith("fct4 (") and "fct3 (" in line for line in lines)


def test_export_table_and_plot(reference: tuple[Stats, str]) -> None:
    assert set(FORMATS) == {"text", "json", "html", "speedscope", "collapsed", "prof"}
    for fmt, entry in FORMATS.items():
        if entry.binary:  # prof: the raw statistics, written by the CLI, not rendered
            with pytest.raises(ValueError, match="raw statistics"):
                export(reference[0], fmt)
        else:
            assert export(reference[0], fmt)
    with pytest.raises(ValueError, match="fmt must be one of"):
        export(reference[0], "svg")
    ax = plot_profile(reference[0], top=5)
    assert len(ax.patches) == 5 and type(ax).__name__.endswith("Axes")


def test_json_keeps_rows_whose_names_collide_with_numbered_ones() -> None:
    # GIVEN main calling f, a function named "f#2" and another f, all with the same
    # figures: the second f is numbered "#2" in its container, the name of the other one
    fs = FakeStats()
    m = ("m.py", 1, "main")
    fs.add(m, 1, 1, 0.0, 0.3)
    for callee in (("m.py", 2, "f"), ("m.py", 3, "f#2"), ("n.py", 4, "f")):
        fs.add(callee, 1, 1, 0.1, 0.1)
        fs.call(m, callee, 1, 0.1, 0.1)
    root, _ = profile2graph(fs)
    doc: Any = root.to_json(as_str=False)
    # THEN no row overwrites another: the three callees are all in the JSON
    calls = doc["profile"]["1-0.30000:::main"]["calls"]
    assert [c["details"]["where"] for c in calls.values()] == ["m.py:2:f", "m.py:3:f#2", "n.py:4:f"]
    assert list(calls) == ["1-0.10000:f", "1-0.10000:f#2", "1-0.10000:f#3"]


def test_html_is_self_contained(reference: tuple[Stats, str]) -> None:
    page = to_html(reference[0], title="t <1>")
    assert "t &lt;1&gt;" in page
    assert not re.search(r"(src|href)\s*=|https?://|@import", page)
    assert '"fct3"' in page


def test_import_is_light() -> None:
    code = (
        "import sys, onnxrt_backend_dev.monitoring.profiling as p;"
        "bad = [m for m in ('pandas', 'matplotlib', 'pynvml') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---------------------------------------------------------------- the page in a browser


def shown_names(dom: str) -> list[str]:
    start = dom.index('<div id="tree">')
    return re.findall(r'<span class="fn">([^<]*)</span>', dom[start:])


@pytest.mark.slow
@needs_browser
def test_html_in_browser(reference: tuple[Stats, str], tmp_path: Path) -> None:
    # GIVEN the page of the reference example
    path = tmp_path / "tree.html"
    path.write_text(to_html(reference[0], sort_key=SortKey.LINE), encoding="utf-8")
    url = path.as_uri()
    # WHEN opened THEN the top levels show, fct3 is collapsed
    before = shown_names(dump_dom(url))
    assert "fct4" in before and "fct3" in before and "fct0" not in before
    # WHEN fct3's toggle is clicked THEN its callees appear beneath it
    after = shown_names(dump_dom(url + "#expand=fct3"))
    assert after.index("fct0") == after.index("fct3") + 1
    # WHEN searching THEN the matches are revealed and counted
    dom = dump_dom(url + "#search=fct0")
    assert "fct0" in shown_names(dom) and "1 match for" in dom
    assert re.search(r"\d+\.\d%", dom)


def test_a_builtin_calling_python_keeps_its_subtree_under_the_default_filter() -> None:
    # GIVEN a quick program run through exec (as `profile script.py` runs a script): the
    # root is a cheap built-in, which the default filter hides when it calls nothing
    code = compile("def quick():\n    return 1\n\nquick()\n", "quick_script.py", "exec")
    pr = cProfile.Profile()
    pr.enable()
    exec(code, {})
    pr.disable()
    root, nodes = profile2graph(Stats(pr))
    exec_node = next(n for n in nodes.values() if "builtins.exec" in n.func_name)
    # THEN the built-in stays, and so does what it called
    assert ProfileNode.filter_node_(exec_node)
    text = root.to_text()
    assert "builtins.exec" in text and "quick_script.py:1:quick" in text
    assert any(row["fct"] == "quick" for row in root.as_dict())


def covering_walk_roots(start: ProfileNode, reachable: list[ProfileNode]) -> set[ProfileNode]:
    """The top level as it was computed before: the start (and the entry points of a
    virtual start) and the nodes without a single caller, then the single-caller nodes
    not met going down from them through callees (a cycle of single callers) were broken
    at their most consuming node."""
    entries = set(start.calls_to) if start.virtual else set()
    roots = {n for n in reachable if len(n.called_by) != 1} | {start} | entries
    pending = {n for n in reachable if n not in roots}
    stack = [n for n in reachable if n in roots]
    while True:
        while stack:
            for child in stack.pop().calls_to:
                if child in pending:
                    pending.discard(child)
                    stack.append(child)
        left = [n for n in reachable if n in pending]
        if not left:
            return roots
        path: dict[ProfileNode, None] = {}
        node = left[0]
        while node not in path:
            path[node] = None
            node = node.called_by[0]
        cycle = list(path)
        best = max(cycle[cycle.index(node) :], key=lambda n: n.tall)
        roots.add(best)
        pending.discard(best)
        stack.append(best)


def random_graph(rnd: Any, size: int, consistent: bool) -> list[ProfileNode]:
    """Nodes with mostly single callers, cycles among them; an inconsistent graph lists
    some callers that do not call, or misses some that do, as hand-made graphs may."""
    nodes = [ProfileNode("r.py", i, f"g{i}", 1, 1, 0.1, rnd.random()) for i in range(size)]
    for i, callee in enumerate(nodes):
        for _ in range(rnd.choice([0, 1, 1, 1, 1, 2, 3]) if i else 0):
            caller = rnd.choice(nodes)
            if consistent or rnd.random() < 0.8:
                caller.add_calls_to(callee, (1, 1, 0.1, 0.1))
            if consistent or rnd.random() < 0.8:
                callee.add_called_by(caller)
    return nodes


def test_top_level_needs_no_walk_over_the_edges() -> None:
    import random

    from onnxrt_backend_dev.monitoring._profiling.model import reachable_nodes
    from onnxrt_backend_dev.monitoring._profiling.view_reference import _tree_roots

    rnd = random.Random(5)
    for trial in range(300):
        nodes = random_graph(rnd, rnd.randint(1, 40), consistent=trial % 2 == 0)
        starts = [nodes[0], rnd.choice(nodes)]
        virtual = ProfileNode("", 0, "<all>", 1, 1, 0.0, 1.0, library=False)
        virtual.virtual = True
        for n in rnd.sample(nodes, min(3, len(nodes))):
            virtual.add_calls_to(n, (1, 1, 0.0, n.tall))
        for start in [*starts, virtual]:
            reachable = reachable_nodes(start)
            top = _tree_roots(start, reachable)
            assert set(top) == covering_walk_roots(start, reachable)
            assert top == [n for n in reachable if n in set(top)]
