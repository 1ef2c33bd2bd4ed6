"""The report's allocations section (:class:`.model.Allocations`): views of the
estimates of sampled allocations, columns keyed on the run's stack ids
(:class:`.._alloc.report.AllocFacts`), all made by one walk over them (:func:`_walk`):
by line (each allocation credited to the innermost user line of its stack, the native
calls it made included), the leak candidates, the temporary allocations, the line
holding the most at the peak, and the icicle of what is live at the peak, folded at the
the one share of every tree (:data:`.._sampling.view.FOLD_SHARE`).

Every walk over stacks and the icicle uses loops and explicit stacks, never recursion.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .._alloc.estimate import NO_STACK, SiteEstimate, half_width
from .._alloc.report import AllocFacts
from .._observe.pools import library_label
from .._sampling.view import FOLD_SHARE, Row, source_line, visible_rows
from .._stacks.frames import SampledFrame, is_library_path
from .build import _line_of, _site, package_of
from .model import Allocations, AllocLine, AllocNode, Site

MAX_ROWS = 15
MAX_NODES = 2000
LEAK_SHARE = 0.01  # a leak candidate holds at least this share of the peak at the end
NO_FRAME = Site("(no Python frame)", "", 0, True)
_IMPORTS = ("<frozen importlib._bootstrap", "importlib/_bootstrap")


def _stack(facts: AllocFacts, sid: int) -> Sequence[SampledFrame]:
    return facts.stacks[sid] if 0 <= sid < len(facts.stacks) else ()


def _leak_site(frames: Sequence[SampledFrame], site: SiteEstimate) -> bool:
    """Whether a site's bytes still live at the end can make a leak: a line of the
    program's allocated them (not the interpreter's start, nor a library's own thread,
    nor an import)."""
    if not site.live_end:
        return False
    if any(f.file.startswith(_IMPORTS) or _IMPORTS[1] in f.file for f in frames):
        return False
    return any(not is_library_path(f.file) and not f.file.startswith("<") for f in frames)


class _Line:  # not a dataclass: its methods would be compiled at every run's start
    """One line's sums over its sites, its native libraries, its heaviest site."""

    __slots__ = ("called", "called_bytes", "figures", "held", "libs", "samples")

    def __init__(self) -> None:
        # The sums of the sites' figures: SiteEstimate's from live_peak on, in its order.
        self.figures, self.samples, self.called, self.called_bytes = [0.0] * 10, 0, "", -1.0
        self.held = (-1.0, NO_STACK)  # the heaviest site at the peak: bytes, stack id
        self.libs: defaultdict[str, float] = defaultdict(float)

    def add(self, site: SiteEstimate, called: str, library: str) -> None:
        """Adds a site of this line: what its stack called, its native library's label."""
        for i, v in enumerate(site[2:]):
            self.figures[i] += v
        self.samples += site.samples
        weight = max(site.live_peak, site.allocated)
        if called and weight > self.called_bytes:
            self.called, self.called_bytes = called, weight
        if library:
            self.libs[library] += weight
        if site.live_peak > self.held[0]:
            self.held = (site.live_peak, site.key[0])


_LineKey = tuple[str, str, int]
_Table = dict[_LineKey | None, _Line]


def _text(file: str, line: int) -> str:
    return source_line(file, line, 120) if not file.startswith("<") else ""


def _row(key: _LineKey | None, line: _Line) -> AllocLine:
    f = line.figures
    if key is None:
        site, source = NO_FRAME, ""
    else:
        function, file, number = key
        site = Site(function, file, number, is_library_path(file))
        source = _text(file, number) if file else ""
    native = max(line.libs, key=lambda k: line.libs[k]) if line.libs else ""
    return AllocLine(site, f[0], half_width(f[1]), f[2], half_width(f[3]), f[4], f[5], f[7],
                     f[8], half_width(f[9]), line.samples, line.called, native, source)  # fmt: skip


def _top(rows: list[AllocLine], key: str, floor: float = 0.0) -> tuple[AllocLine, ...]:
    chosen = [r for r in rows if getattr(r, key) > floor]
    chosen.sort(key=lambda r: -float(getattr(r, key)))
    return tuple(chosen[:MAX_ROWS])


def _leaks(facts: AllocFacts, leaks: _Table) -> tuple[AllocLine, ...]:
    """Lines still holding at the end more than 1 % of the peak, beyond their error bar
    (a single sampled small allocation is no evidence). What imports allocated is left
    out (a module's state, kept on purpose), and so is what no line of the program
    allocated (the interpreter's start, native threads): a candidate is a line."""
    rows = [_row(k, v) for k, v in leaks.items()]
    return _top(
        [r for r in rows if r.live_end > r.live_end_err], "live_end", LEAK_SHARE * facts.peak
    )


_Hidden = dict[Row, dict[tuple[str, str], str]]  # a box's folded frames: their packages


def _walk(facts: AllocFacts, icicle: bool = True) -> tuple[_Table, _Table, Row, _Hidden]:
    """One walk over the sites makes every view: each line's sums, those of the leak
    sites (:func:`_leak_site`) and, with ``icicle``, the tree of what is live at the peak
    and the frames folded into its boxes."""
    lines: _Table = {}
    leaks: _Table = {}
    root = Row("", "", 0, "root")
    hidden: _Hidden = defaultdict(dict)
    for site in facts.sites:
        sid, lid = site.key
        frames = _stack(facts, sid)
        key, called = _line_of(frames)
        library = library_label(facts.libraries[lid]) if 0 <= lid < len(facts.libraries) else ""
        lines.setdefault(key, _Line()).add(site, called, library)
        if _leak_site(frames, site):
            leaks.setdefault(key, _Line()).add(site, called, library)
        if icicle and site.live_peak > 0:
            _grow(root, hidden, site, frames, library)
    return lines, leaks, root, hidden


def _grow(
    root: Row, hidden: _Hidden, site: SiteEstimate, frames: Sequence[SampledFrame], library: str
) -> None:
    """Adds a site along its boxes (its frames, then its native library's), a library
    frame called by a library frame folded into it: its bytes in the rows' time column,
    their variance in the CPU one (``N more`` rows add both up)."""
    boxes = [(s, s.library) for s in map(_site, frames)] or [(NO_FRAME, False)]
    if library:
        boxes.append((Site(f"[{library}]", "", 0, True), False))
    node, previous_library = root, False
    root.wall += site.live_peak
    root.cpu += site.live_peak_var
    for box, is_library in boxes:
        if is_library and previous_library:
            hidden[node][box.function, box.file] = package_of(box.file)
            continue
        key = (box.function, box.file, box.line, "library" if box.library else "user")
        child = node.children.get(key)
        if child is None:
            child = node.children[key] = Row(*key)
        child.wall += site.live_peak
        child.cpu += site.live_peak_var
        node, previous_library = child, is_library


def _nodes(root: Row, hidden: _Hidden, peak: float) -> list[AllocNode]:
    """The icicle in pre-order, heaviest first, through the views' one fold: small boxes
    fold into one ``N more`` box per parent, kept however small (the roots never fold)."""
    out: list[AllocNode] = []
    parents = [-1]  # per depth, the index of the box the next one at that depth is under
    root.wall = max(peak, root.wall)  # the report's one share of the peak: its tree's too
    for depth, row, _ in visible_rows(root, FOLD_SHARE, min_more=0.0, fold_top=False):
        if row is root:
            continue
        if len(out) >= MAX_NODES:
            break
        del parents[depth:]
        site = Site(row.label, row.file, row.line, row.kind == "library")
        source = _text(site.file, site.line) if site.file and not site.library else ""
        text = _hidden(hidden.get(row, {}))
        out.append(AllocNode(parents[-1], depth - 1, site, row.wall, half_width(row.cpu), text,
                             source))  # fmt: skip
        parents.append(len(out) - 1)
    return out


def _hidden(frames: dict[tuple[str, str], str]) -> str:
    if not frames:
        return ""
    return f"{len(frames)} frames hidden ({', '.join(sorted(set(frames.values())))})"


def build_allocations(facts: AllocFacts) -> Allocations:
    """The report's allocations section.

    :param facts: what the tracking knows
    :return: the section
    """
    lines, leaks, root, hidden = _walk(facts)
    rows = [_row(k, v) for k, v in lines.items()]
    live = sum(s.live_peak for s in facts.sites)
    live_var = sum(s.live_peak_var for s in facts.sites)
    notes = list(facts.notes)
    if facts.lost:
        notes.append(
            f"{facts.lost} allocation records were lost (the program allocated faster "
            "than they were read): the estimates miss their allocations"
        )
    return Allocations(
        mean=facts.mean,
        samples=facts.samples,
        peak=facts.peak,
        peak_time=facts.peak_time,
        live_peak=live,
        live_peak_err=half_width(live_var),
        allocated=facts.allocated,
        count=facts.count,
        lines=_top(rows, "live_peak"),
        flame=tuple(_nodes(root, hidden, facts.peak)),
        leaks=_leaks(facts, leaks),
        temporaries=_top(rows, "temporary"),
        allocating=_top(rows, "allocated"),
        lost=facts.lost,
        notes=tuple(notes),
    )


def peak_place(facts: AllocFacts) -> tuple[Site, str, tuple[Site, ...]] | None:
    """The user line holding the most bytes at the peak, the library function it called
    and the stack of its heaviest site (outermost first); None when no Python line holds
    anything at the peak.

    :param facts: what the tracking knows
    """
    lines = _walk(facts, icicle=False)[0]
    held = [(v.figures[0], k) for k, v in lines.items() if k is not None and v.figures[0] > 0]
    if not held:
        return None
    _, best = max(held)
    line = lines[best]
    site = Site(*best, is_library_path(best[1]))
    return site, line.called, tuple(_site(f) for f in _stack(facts, line.held[1]))
