"""Renders a corpus of profiles in every export format, sort key and filter option, and
writes one SHA-256 per render: the before/after proof that a restructuring of
``monitoring/_profiling/`` changes no output.

Views: the reference's forest (text, rows, JSON, HTML) and the call tree (text by each
of its orders, every row, HTML), speedscope and collapsed stacks.

Profiles: ``tests/data/*.prof``, a synthetic 300-function profile (as
``benchmarks/bench_profiling.py`` builds them, also one 20,000-function render per
format), random graphs with built-ins, library frames, recursion and cycles, a 60-deep
chain and a self recursion. Only the public API is used, so the script runs on any
version of the code.

Run: ``python tools/render_corpus.py OUT.sha256 [--dump DIR]``, then compare two hash
files with ``python tools/render_corpus.py --compare A.sha256 B.sha256``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pstats import Stats
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_profiling import synthetic_stats  # noqa: E402

from onnxrt_backend_dev.monitoring.profiling import (  # noqa: E402
    ProfileNode,
    profile2graph,
    to_collapsed,
    to_html,
    to_speedscope,
    to_tree_text,
)

SORTS = ("line", "cumulative", "time", "cumtime", "tottime")
TREE_SORTS = ("cumulative", "time", "line")


class _Stats:
    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats


def random_stats(seed: int, n: int = 60) -> _Stats:
    """A random graph: some built-ins (``~``), some standard-library frames, recursion
    (self edges) and back edges (cycles)."""
    rnd = random.Random(seed)
    stdlib = sysconfig.get_paths()["stdlib"]
    keys = []
    for i in range(n):
        kind = rnd.random()
        if kind < 0.15:
            keys.append(("~", 0, f"<built-in method m{i}>"))
        elif kind < 0.3:
            keys.append((f"{stdlib}/json/mod{i % 5}.py", i, f"lib_{i}"))
        else:
            keys.append((f"/app/prog{i % 7}.py", 3 * i + 1, f"f_{i}"))
    callers: list[dict[int, tuple[int, int, float, float]]] = [{} for _ in range(n)]
    for i in range(1, n):
        for c in rnd.sample(range(i), min(i, rnd.randint(1, 3))):
            k = rnd.randint(1, 20)
            t = rnd.uniform(1e-6, 5e-3)
            callers[i][c] = (k, k, t / 2, t)
    for _ in range(n // 10):  # back edges and self recursion
        a = rnd.randrange(n)
        b = rnd.randrange(a + 1) if rnd.random() < 0.5 else a
        k = rnd.randint(1, 30)
        callers[b][a] = (k, 0, 1e-5, rnd.uniform(0, 1e-3))
    stats: dict[Any, Any] = {}
    for i, key in enumerate(keys):
        edges = {keys[c]: v for c, v in callers[i].items()}
        nc = sum(v[0] for v in edges.values()) or 1
        tall = sum(v[3] for v in edges.values()) or rnd.uniform(1e-4, 1e-2)
        stats[key] = (nc, nc + rnd.randint(0, 3), tall / 3, tall, edges)
    return _Stats(stats)


def chain(depth: int) -> _Stats:
    stats: dict[Any, Any] = {}
    for i in range(depth):
        f = ("prog.py", i + 1, f"f{i}")
        edges = {("prog.py", i, f"f{i - 1}"): (1, 1, 0.001, 0.001 * (depth - i))} if i else {}
        stats[f] = (1, 1, 0.001, 0.001 * (depth - i), edges)
    return _Stats(stats)


def self_recursion(depth: int) -> _Stats:
    main, rec = ("prog.py", 1, "main"), ("prog.py", 5, "rec")
    return _Stats(
        {
            main: (1, 1, 0.0, 1.0, {}),
            rec: (1, depth + 1, 1.0, 1.0, {main: (1, 1, 1e-5, 1.0), rec: (depth, 0, 0.99, 0.99)}),
        }
    )


def profiles() -> Iterator[tuple[str, Any]]:
    data = os.path.join(ROOT, "tests", "data")
    for name in sorted(os.listdir(data)):
        if name.endswith(".prof"):
            yield name, Stats(os.path.join(data, name))
    yield "synthetic300", _Stats(synthetic_stats(300))
    for seed in range(4):
        yield f"random{seed}", random_stats(seed)
    yield "chain60", chain(60)
    yield "selfrec", self_recursion(1000)


def focus_name(nodes: dict[str, ProfileNode]) -> str:
    """A function name to focus on: the third most consuming."""
    ordered = sorted(nodes.values(), key=lambda n: (-n.tall, n.key))
    return ordered[min(2, len(ordered) - 1)].func_name


def option_sets(focus: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("default", {}),
        ("hide_stdlib", {"hide_stdlib": True}),
        ("min_share", {"min_share": 0.05}),
        ("max_depth", {"max_depth": 2}),
        ("focus", {"focus": focus}),
        ("all", {"hide_stdlib": True, "min_share": 0.01, "max_depth": 3}),
    ]


def keep_all(node: ProfileNode, info: Any = None) -> bool:
    return True


def renders(root: ProfileNode, focus: str) -> Iterator[tuple[str, Callable[[], Any]]]:
    for oname, o in option_sets(focus):
        for sort in SORTS:
            p = f"{oname}/{sort}"
            yield f"text/{p}", lambda o=o, s=sort: root.to_text(sort_key=s, **o)
            yield (
                f"text_noshare/{p}",
                lambda o=o, s=sort: root.to_text(sort_key=s, show_share=False, **o),
            )
            yield f"rows/{p}", lambda o=o, s=sort: root.as_dict(sort_key=s, **o)
            yield f"json/{p}", lambda o=o, s=sort: root.to_json(sort_key=s, **o)
            yield f"html/{p}", lambda o=o, s=sort: to_html(root, sort_key=s, **o)
        for sort in TREE_SORTS:
            yield f"tree/{oname}/{sort}", lambda o=o, s=sort: to_tree_text(root, sort_key=s, **o)
        yield f"tree_all/{oname}", lambda o=o: to_tree_text(root, fold_share=0.0, **o)
        yield f"tree_html/{oname}", lambda o=o: to_html(root, view="tree", **o)
        yield f"speedscope/{oname}", lambda o=o: to_speedscope(root, **o)
        yield f"collapsed/{oname}", lambda o=o: to_collapsed(root, **o)
    yield "text_keepall/line", lambda: root.to_text(filter_node=keep_all)
    yield "text_width20/line", lambda: root.to_text(fct_width=20, max_indent=5)
    yield "json_indent5/line", lambda: root.to_json(max_indent=5, indent=1)


# Profiles of the ``profile`` module name code objects by their address, new at each load.
_ADDRESS = re.compile(rb" at 0x[0-9a-f]+")


def as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(value, sort_keys=False).encode("utf-8")
    return _ADDRESS.sub(b" at 0x?", data)


def corpus() -> Iterator[tuple[str, bytes]]:
    for pname, ps in profiles():
        root, nodes = profile2graph(ps)
        for name, fct in renders(root, focus_name(nodes)):
            yield f"{pname}/{name}", as_bytes(fct())
    big, _ = profile2graph(_Stats(synthetic_stats(20_000)))
    yield "synthetic20000/text/line", as_bytes(big.to_text())
    yield "synthetic20000/text/cumulative", as_bytes(big.to_text(sort_key="cumulative"))
    yield "synthetic20000/speedscope", as_bytes(to_speedscope(big))
    yield "synthetic20000/collapsed", as_bytes(to_collapsed(big))


def compare(a: str, b: str) -> int:
    def load(path: str) -> dict[str, str]:
        with open(path, encoding="utf-8") as f:
            return dict(line.split(" ", 1)[::-1] for line in f.read().splitlines())

    before, after = load(a), load(b)
    same = [k for k in before if after.get(k) == before[k]]
    differ = sorted(k for k in before if k in after and after[k] != before[k])
    missing = sorted(set(before) ^ set(after))
    print(f"{len(same)} identical, {len(differ)} differ, {len(missing)} only in one file")
    for k in differ[:50]:
        print(f"differs: {k}")
    for k in missing[:20]:
        print(f"only in one: {k}")
    return 0 if not differ and not missing else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", help="hash file to write")
    parser.add_argument("--dump", metavar="DIR", help="also write every render to DIR")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare hash files")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.output:
        parser.error("give the hash file to write, or --compare A B")
    lines = []
    for name, data in corpus():
        lines.append(f"{hashlib.sha256(data).hexdigest()} {name}")
        if args.dump:
            path = os.path.join(args.dump, name.replace("/", "__"))
            os.makedirs(args.dump, exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} renders hashed into {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
