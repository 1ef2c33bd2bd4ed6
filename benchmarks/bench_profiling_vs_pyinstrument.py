"""Our cProfile call tree side by side with pyinstrument on three real workloads.

Workloads (run in this process, the same code for every tool):

- ``json``: ``json.dumps(obj, indent=2)`` of 40,000 nested records (with ``indent``,
  the pure-Python encoder runs: recursive generators ``_iterencode_list/_dict``);
- ``pandas``: ``pandas.read_csv`` of a generated CSV (1,500,000 rows) then a
  ``groupby(...).agg(...)``;
- ``ast``: ``ast.parse`` + ``ast.unparse`` of the standard library's largest modules
  (recursion-heavy: the unparser is a recursive visitor).

For each one:

- the hot paths: the workload profiled once with cProfile through our API
  (``profiling.profile``), read from our call tree (``profiling.call_tree``, the view
  people read, and its hot paths), and once with pyinstrument (``Profiler``, 1 ms interval); both
  tools' top 5 root-to-leaf hot paths are printed (the hottest first; the next ones
  branch off it where the most time goes elsewhere); then our hottest path is compared
  with pyinstrument's, both started at the workload function, built-ins and
  pyinstrument's ``[self]`` left out, consecutive repeats of a recursive function
  folded into one: ``match yes`` when ours names the same Python functions in the same
  order down to the last Python function of pyinstrument's path;
- the overhead: wall time profiled / unprofiled, medians of ``--runs`` runs, both tools
  side by side (cProfile through ``profiling.profile``, which also builds the pstats
  table; pyinstrument's ``start``/``stop`` only).

Run: ``python benchmarks/bench_profiling_vs_pyinstrument.py [--runs N] [--only NAME]``
(needs the ``bench`` extra: pyinstrument and pandas).
"""

from __future__ import annotations

import argparse
import ast
import heapq
import json
import os
import platform
import random
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from onnxrt_backend_dev.monitoring._profiling.view_tree import hot_path_leaves
from onnxrt_backend_dev.monitoring.profiling import call_tree, profile, profile2graph

Path = list[str]
SELF = "[self]"


# ---------------------------------------------------------------- workloads


def make_json_workload() -> tuple[str, Callable[[], Any]]:
    rnd = random.Random(0)
    obj = [
        {
            "id": i,
            "name": f"record-{i}",
            "score": rnd.random(),
            "tags": [f"t{rnd.randrange(50)}" for _ in range(3)],
            "owner": {"login": f"user{i % 997}", "active": i % 3 == 0, "quota": i * 7},
        }
        for i in range(40_000)
    ]

    def workload_json() -> int:
        return len(json.dumps(obj, indent=2))

    return "workload_json", workload_json


def make_pandas_workload(folder: str, rows: int = 1_500_000) -> tuple[str, Callable[[], Any]]:
    import numpy
    import pandas

    rnd = numpy.random.default_rng(1)
    path = os.path.join(folder, "data.csv")
    pandas.DataFrame(
        {
            "key": rnd.integers(0, 1000, rows),
            "city": numpy.char.add("c", rnd.integers(0, 40, rows).astype(str)),
            "value": rnd.random(rows).round(6),
            "count": rnd.integers(0, 100, rows),
        }
    ).to_csv(path, index=False)

    def workload_pandas() -> int:
        df = pandas.read_csv(path)
        agg = df.groupby(["city", "key"]).agg({"value": ["mean", "max"], "count": "sum"})
        return len(agg)

    return "workload_pandas", workload_pandas


def make_ast_workload(n_modules: int = 3) -> tuple[str, Callable[[], Any]]:
    stdlib = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(stdlib, name) for name in os.listdir(stdlib) if name.endswith(".py")]
    files.sort(key=os.path.getsize, reverse=True)
    sources = []
    for path in files[:n_modules]:
        with open(path, encoding="utf-8") as f:
            sources.append(f.read())

    def workload_ast() -> int:
        return sum(len(ast.unparse(ast.parse(src))) for src in sources)

    return "workload_ast", workload_ast


# ---------------------------------------------------------------- trees and hot paths


class Trie:
    """A call tree keyed by function name: inclusive weight per node, own weight as a
    ``[self]`` child (so that a path stops where a function's own time is the largest
    part, as pyinstrument's tree does)."""

    def __init__(self) -> None:
        self.weight = 0.0
        self.children: dict[str, Trie] = {}

    def child(self, name: str) -> Trie:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Trie()
        return node


def hot_paths(root: Trie, count: int = 5) -> list[tuple[Path, float]]:
    """The ``count`` hottest root-to-leaf paths: the first follows the heaviest child
    from the root down; each next one branches off an earlier path at the heaviest
    child not taken yet (best first, no recursion).

    :return: ``(names, weight)`` where weight is that of the path's last branch point
    """
    out: list[tuple[Path, float]] = []
    tie = 0
    heap: list[tuple[float, int, Path, Trie]] = [(-root.weight, tie, [], root)]
    while heap and len(out) < count:
        neg, _, prefix, node = heapq.heappop(heap)
        path = list(prefix)
        while node.children:
            ranked = sorted(node.children.items(), key=lambda kv: -kv[1].weight)
            for name, other in ranked[1:]:
                tie += 1
                heapq.heappush(heap, (-other.weight, tie, [*path, name], other))
            name, node = ranked[0]
            path.append(name)
        out.append((path, -neg))
    return out


def our_hot_paths(ps: Any, count: int = 5) -> list[tuple[Path, float]]:
    """Our top hot paths, read from the call tree people read (the default view of the
    ``profile`` command, of the HTML page and of ``%%profile_tree``): ``call_tree`` of
    ``profile2graph(ps)`` with its defaults, then its ``hot_paths`` (the first follows
    the hottest child at each step, the next ones branch off the earlier ones).

    :param ps: the :class:`pstats.Stats` of the workload
    :param count: number of paths
    :return: ``(function names, weight in seconds)``, the weight being that of the
        row where the path leaves the earlier ones (the root's for the first)
    """
    tree = call_tree(profile2graph(ps)[0])
    items = tree.items
    out: list[tuple[Path, float]] = []
    taken: set[int] = set()
    for names, leaf in hot_path_leaves(tree, count):
        chain, i = [], leaf
        while i >= 0:
            chain.append(i)
            i = items[i].parent
        chain.reverse()
        fork = next((j for j in chain if j not in taken), chain[-1])
        taken.update(chain)
        out.append((names, items[fork].time))
    return out


def pyinstrument_hot_paths(session: Any, count: int = 5) -> list[tuple[Path, float]]:
    """pyinstrument's top hot paths, from its frame tree (siblings of the same function
    merged)."""
    trie = Trie()
    root = session.root_frame()
    stack = [(root, trie)] if root is not None else []
    while stack:
        frame, parent = stack.pop()
        name = frame.function
        if frame.file_path == "<built-in>":
            name = f"<built-in> {name}"
        elif frame.is_synthetic:
            name = SELF
        node = parent.child(name)
        node.weight += frame.time if not frame.children else 0.0
        stack.extend((c, node) for c in frame.children)
    _sum_up(trie)
    return hot_paths(trie, count)


def _sum_up(root: Trie) -> None:
    """Inclusive weights from the leaves' own (post-order, explicit stack)."""
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children.values())
    for node in reversed(order):
        node.weight += sum(c.weight for c in node.children.values())


def normalized(path: Sequence[str], entry: str) -> Path:
    """From the workload function down, built-ins and ``[self]`` left out, consecutive
    repeats folded."""
    if entry in path:
        path = path[path.index(entry) :]
    out: Path = []
    for name in path:
        if name == SELF or name.startswith("<built-in>") or name.startswith("<method "):
            continue
        if not out or out[-1] != name:
            out.append(name)
    return out


# ---------------------------------------------------------------- measures


def _wall(fct: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fct()
    return time.perf_counter() - t0


def _with_pyinstrument(fct: Callable[[], Any]) -> tuple[float, Any]:
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001)
    t0 = time.perf_counter()
    profiler.start()
    try:
        fct()
    finally:
        profiler.stop()
    return time.perf_counter() - t0, profiler.last_session


def _with_cprofile(fct: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    ps = profile(fct)[0]
    return time.perf_counter() - t0, ps


def _fmt(path: Sequence[str]) -> str:
    return " > ".join(path) if path else "(empty)"


def bench(name: str, entry: str, fct: Callable[[], Any], runs: int) -> dict[str, Any]:
    fct()  # warm-up: imports, caches
    plain, ours, pyi = [], [], []
    ps = session = None
    for _ in range(runs):  # interleaved, so that a busy minute hits every tool
        plain.append(_wall(fct))
        t, ps = _with_cprofile(fct)
        ours.append(t)
        t, session = _with_pyinstrument(fct)
        pyi.append(t)
    ours_paths = our_hot_paths(ps)
    pyi_paths = pyinstrument_hot_paths(session)
    print(f"## {name}")
    base, t_ours, t_pyi = (statistics.median(v) for v in (plain, ours, pyi))
    print(
        f"wall unprofiled {base:.3f} s | cProfile (ours) {t_ours:.3f} s = {t_ours / base:.2f}x"
        f" | pyinstrument {t_pyi:.3f} s = {t_pyi / base:.2f}x  (medians of {runs})"
    )
    for tool, paths in (("ours", ours_paths), ("pyinstrument", pyi_paths)):
        total = paths[0][1] if paths else 0.0
        print(f"top 5 hot paths, {tool} (from {entry}, built-ins and [self] left out):")
        for i, (path, weight) in enumerate(paths, 1):
            share = 100 * weight / total if total else 0.0
            leaf = f"  (leaf: {path[-1]})" if path[-1:] != normalized(path, entry)[-1:] else ""
            print(f"  {i}. [{share:5.1f} %] {_fmt(normalized(path, entry))}{leaf}")
    ours_hot = normalized(ours_paths[0][0], entry) if ours_paths else []
    pyi_hot = normalized(pyi_paths[0][0], entry) if pyi_paths else []
    match = bool(pyi_hot) and ours_hot[: len(pyi_hot)] == pyi_hot
    same = 0
    while same < min(len(ours_hot), len(pyi_hot)) and ours_hot[same] == pyi_hot[same]:
        same += 1
    print(f"hottest, ours:         {_fmt(ours_hot)}")
    print(f"hottest, pyinstrument: {_fmt(pyi_hot)}")
    print(
        f"match: {'yes' if match else 'no'} (the first {same} of pyinstrument's "
        f"{len(pyi_hot)} functions agree; ours has {len(ours_hot)})"
    )
    print()
    return {
        "name": name,
        "match": match,
        "agree": f"{same}/{len(pyi_hot)}",
        "overhead_ours": t_ours / base,
        "overhead_pyinstrument": t_pyi / base,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per tool (3)")
    parser.add_argument("--only", choices=["json", "pandas", "ast"], default=None)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    start = time.perf_counter()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# bench_profiling_vs_pyinstrument  {now}")
    print(
        f"# {platform.platform()}, python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    results = []
    with tempfile.TemporaryDirectory() as folder:
        makers: dict[str, Callable[[], tuple[str, Callable[[], Any]]]] = {
            "json": make_json_workload,
            "pandas": lambda: make_pandas_workload(folder),
            "ast": make_ast_workload,
        }
        for name, make in makers.items():
            if args.only and name != args.only:
                continue
            entry, fct = make()
            results.append(bench(name, entry, fct, args.runs))
    print("# summary")
    for r in results:
        print(
            f"{r['name']:<7} match {'yes' if r['match'] else 'no ':<3} ({r['agree']:>5})  "
            "overhead: cProfile (ours) "
            f"{r['overhead_ours']:.2f}x, pyinstrument {r['overhead_pyinstrument']:.2f}x"
        )
    print(f"# total {time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
