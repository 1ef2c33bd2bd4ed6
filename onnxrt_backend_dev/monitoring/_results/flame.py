"""The differential flame graph of a comparison: B's call paths as an icicle (each box as
wide as its path's time in B), coloured by its *significant* change (red worse, blue
better, grey unchanged, pale untested), outlined where a change starts. cProfile's
edges are expanded into a tree from its roots, each callee's box the share of its
caller's box the edge holds of the caller's inclusive time. Explicit stacks, no
recursion; boxes under 0.2 % of the width and rows past 60 left out; no script.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._format import format_count, one_line
from .change import INCLUSIVE, ORIGIN, PATH, Change
from .compare import format_change
from .keys import place

MIN_WIDTH = 0.002
MAX_DEPTH = 60
MAX_BOXES = 4000
ROW = 17  # pixels


@dataclass
class _Node:
    name: str
    time: float = 0.0
    change: Change | None = None
    children: dict[str, _Node] = field(default_factory=dict)


def _stack_tree(paths: Sequence[Change]) -> _Node:
    root = _Node("")
    for c in sorted(paths, key=lambda c: len(c.path)):
        node = root
        for name in c.path[:-1]:
            node = node.children.setdefault(name, _Node(name))
        leaf = node.children.setdefault(c.path[-1], _Node(c.path[-1]))
        leaf.time += c.b.get("time", 0.0)
        if leaf.change is None or leaf.change.role != ORIGIN:
            leaf.change = c
    return root


def _edge_tree(paths: Sequence[Change], inclusive: dict[str, float]) -> _Node:
    """cProfile's (or callgrind's) edges expanded into a tree from the functions no edge
    calls; a function is its place (``file:line:name``) where the edges have them, as
    two functions may share a name (every module's ``<module>``)."""
    out: dict[str, list[tuple[str, str, Change]]] = {}
    called = set()
    for c in paths:
        ids = _ids(c)
        out.setdefault(ids[0], []).append((ids[1], c.path[1], c))
        called.add(ids[1])
    names = {_ids(c)[0]: c.path[0] for c in paths}
    root = _Node("")
    todo: list[tuple[_Node, tuple[str, ...], float]] = []
    for caller in out:
        if caller not in called:
            node = root.children.setdefault(
                caller, _Node(names.get(caller, caller), inclusive.get(caller, 0.0))
            )
            todo.append((node, (caller,), node.time))
    boxes = 0
    while todo and boxes < MAX_BOXES:
        node, path, time = todo.pop()
        total = inclusive.get(path[-1], 0.0)
        for callee, name, c in out.get(path[-1], ()):
            if callee in path or total <= 0 or len(path) >= MAX_DEPTH:
                continue
            share = min(c.b.get("time", 0.0) / total, 1.0)
            child = node.children.setdefault(callee, _Node(name, change=c))
            child.time += time * share
            boxes += 1
            todo.append((child, (*path, callee), time * share))
    return root


def _ids(c: Change) -> tuple[str, ...]:
    return c.places if len(c.places) == len(c.path) else c.path


def _coloured_by(node: _Node) -> Change | None:
    """The change that colours a box: its own, or, for a path holding the same time as
    its only callee's (not tested again), that callee's."""
    while (
        node.change is not None
        and node.change.note.startswith("the same as its only callee")
        and len(node.children) == 1
    ):
        node = next(iter(node.children.values()))
    return node.change


def _colour(c: Change | None) -> str:
    if c is None or not c.tested:
        return "#f1efe9"
    if not c.significant or c.change is None:
        return "#dcd8cf"
    strength = min(abs(c.change), 1.0) ** 0.5
    if c.change > 0:
        return f"hsl(2,{60 + 30 * strength:.0f}%,{80 - 35 * strength:.0f}%)"
    return f"hsl(215,{55 + 30 * strength:.0f}%,{82 - 35 * strength:.0f}%)"


def _title(node: _Node, path: tuple[str, ...]) -> str:
    c = node.change
    text = " → ".join(path[-4:])
    if c is None:
        return text
    sig = "significant" if c.significant else ("not significant" if c.tested else c.note)
    # The figures compared (B's at A's run speed), from which the change is computed.
    a, b = c.a.get("typical", c.a.get("time", 0.0)), c.b.get("typical", c.b.get("time", 0.0))
    if c.b.get("counted"):  # instructions, not seconds
        return f"{text}\n{format_change(c)} ({sig}); A {format_count(a)}, B {format_count(b)}"
    return f"{text}\n{format_change(c)} ({sig}); A {a * 1e3:.2f} ms, B {b * 1e3:.2f} ms"


def _boxes(root: _Node) -> list[str]:
    total = sum(child.time for child in root.children.values())
    if total <= 0:
        return []
    boxes: list[str] = []
    todo: list[tuple[_Node, float, int, tuple[str, ...]]] = [
        (child, 0.0, 0, (child.name,)) for child in root.children.values()
    ]
    todo.reverse()
    starts = {0: 0.0}
    while todo and len(boxes) < MAX_BOXES:
        node, x, depth, path = todo.pop()
        width = node.time / total
        if width < MIN_WIDTH or depth >= MAX_DEPTH:
            continue
        x = max(x, starts.get(depth, 0.0))
        starts[depth] = x + width
        style = (
            f"left:{x * 100:.3f}%;width:{width * 100:.3f}%;top:{depth * ROW}px;"
            f"background:{_colour(_coloured_by(node))}"
        )
        origin = " origin" if node.change is not None and node.change.role == ORIGIN else ""
        title = html.escape(one_line(_title(node, path)), quote=True)
        boxes.append(
            f'<div class="fb{origin}" style="{style}" title="{title}">'
            f"{html.escape(one_line(node.name))}</div>"
        )
        kids = sorted(node.children.values(), key=lambda n: -n.time)
        offset = x
        pending: list[tuple[_Node, float, int, tuple[str, ...]]] = []
        for kid in kids:
            pending.append((kid, offset, depth + 1, (*path, kid.name)))
            offset += kid.time / total
        todo.extend(reversed(pending))
    return boxes


_STYLE = (
    ".flame{position:relative;font:11px monospace;overflow:hidden;border:1px solid #ddd}"
    ".fb{position:absolute;height:16px;line-height:16px;overflow:hidden;white-space:nowrap;"
    "box-sizing:border-box;border-right:1px solid #fff;padding-left:2px;color:#111}"
    ".fb.origin{outline:2px solid #111;outline-offset:-2px;font-weight:bold;z-index:1}"
    ".fkey span{display:inline-block;padding:1px 8px;margin-right:6px}"
)


def flame_html(cmp: object) -> str:
    """The flame graph of a comparison's call paths as an HTML fragment (its own style
    inside), empty when the comparison has no paths.

    :param cmp: a ``ResultComparison``
    """
    changes: Sequence[Change] = getattr(cmp, "changes", ())
    paths = [c for c in changes if c.figure == PATH and c.path]
    if not paths:
        return ""
    if any(len(c.path) == 1 for c in paths):
        root = _stack_tree(paths)
    else:
        keyed = any(c.places for c in paths)
        inclusive = {
            (
                place(c.file or "", c.line or 0, c.function) if keyed else one_line(c.function)
            ): c.b.get("time", 0.0)
            for c in changes
            if c.figure == INCLUSIVE
        }
        root = _edge_tree(paths, inclusive)
    what = "instructions" if any(c.b.get("counted") for c in paths) else "time"
    boxes = _boxes(root)
    if not boxes:
        return ""
    depth = 1 + max(int(b.split("top:")[1].split("px")[0]) for b in boxes) // ROW
    key = (
        "<p class='fkey'><span style='background:hsl(2,90%,45%);color:#fff'>slower</span>"
        "<span style='background:hsl(215,85%,47%);color:#fff'>faster</span>"
        "<span style='background:#dcd8cf'>no significant change</span>"
        "<span style='background:#f1efe9'>not tested</span>"
        "<span style='outline:2px solid #111'>where a change starts</span></p>"
    )
    return (
        f"<style>{_STYLE}</style><h2>Call paths of B (width: {what} in B; colour: "
        f"significant change)</h2>{key}<div class='flame' style='height:{depth * ROW + 2}px'>"
        + "".join(boxes)
        + "</div>"
    )
