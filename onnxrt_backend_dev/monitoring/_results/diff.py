"""The comparison of two profiles (cProfile or sampled) or two ``run`` results: absolute
times, inclusive and own, per function and per call path, against one run-wide factor.

**The figures**, in seconds per run: each function's own and inclusive time, each call
path's inclusive time (a stack prefix for a sampled profile or a run's tree, caller →
callee for cProfile). Never a share of the run: when one function grows every other
share shrinks, and unchanged functions were called "significantly better" (33 of 44).

**The run-wide factor.** The machine's load or clock moves every figure of a run
together. It is estimated over the run's disjoint pieces (a sampled profile's stacks,
else the functions' own times), in two steps a changed function cannot drag: each run's
factor within its side (each piece centred on its side's median, the run's factor the
biweight mean of its pieces' deviations, :mod:`.._stats.robust`), then the shift between
the sides (the pieces' own shifts weighted by precision, none above a quarter of the
weight, combined by the biweight: one function of 40 % of the run made 25 % faster moved
the others by -9.9 % with a pooled weighted median). Every figure is compared with the
factors of the pieces it does not hold, the shift's variance added to its test; one
holding more than :data:`MOST_OF_RUN` is judged by the run's time.

**The test.** Yuen's test of the logs (20 % trimmed at each end: a run the sampler got
wrong moves nothing; half a sample added to counted figures), each side's variance
moderated by a prior fitted over all the figures against their share (worth 4 degrees:
with 5 runs a side the plain test needs t > 5 for p < 1e-3), testing "the change is
within ``min_change``" (a steady 0.5 % from code moved in memory is no change). A single
run a side is tested on its counts (sampled figures only, plus a 3 % spread it cannot
show) as weaker evidence; cProfile's figures of one run are shown, not tested.

**The correction.** Holm over every test as one family, each weighted by the square
root of its share. Each quantity is tested once: an inclusive time equal to the own
time or to its only path's, or a path whose only callee path holds all its time, shows
the test of the figure it is the same as.

**Where the change starts.** A significant path whose callees' significant paths carry
half its change or more, the same way, is *explained*; the others are *origins*, shown
with the callers whose own change is at least half of theirs (``f07 → spin +40 %``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import ResultFormatError
from .._format import one_line
from .._stats.counts import count_ratio_test
from .._stats.multiple import holm, median
from .._stats.robust import biweight_location
from .._stats.welch import (
    moderated_log_test,
    trimmed_mean_and_variance,
    welch_difference,
)
from .change import BETTER, EXPLAINED, GROWTH, INCLUSIVE, ORIGIN, OWN, PATH, WORSE, Change, Settings
from .decide import Shift, judge
from .keys import Key, place
from .tables import EDGES, NO_PATHS, STACKS, SideTable, located, medians, union

MIN_SHARE = 0.001
MIN_CHANGE = 0.02
# A sampled figure is tested when a side has this many samples a run (median).
MIN_SAMPLES = 4.0
PRIOR_DF = 4.0
# Fewer functions than this and the run-wide factor is not estimated (taken as 1).
MIN_REFERENCE = 5
# The factor is estimated over at most this many pieces, the largest.
MAX_PIECES = 500
MAX_REFERENCE_WEIGHT = 0.25
# A figure holding more of the run than this is judged by the run's time.
MOST_OF_RUN = 0.9
MOST = "most of the run: judged by the run's time"
# The biweight's tuning constant for the shift between the sides: tighter than Tukey's
# 4.685, so that a piece changed by 25 % is left out even when each piece's noise is
# large (a 4 ms tick: unchanged functions moved by 1.7 % at 4.685, 0.9 % at 3.5).
SHIFT_C = 3.5
# Yuen's trimming: the runs a side left out at each end of a figure's mean.
TRIM = 0.2
MIN_LOG_VARIANCE = 1e-5
# The run-to-run spread (3 %) a single run a side cannot show, added to its counts.
SINGLE_RUN_VARIANCE = 0.03**2
# A callee carrying half a path's change explains it; a caller whose relative change is
# half the origin's joins the origin's chain.
CARRIED = 0.5
CHAIN = 0.5
MAX_CHAIN = 8
# The longest chain of figures that are the same as the next followed to a tested one.
MAX_SAME = 64
# Below this memory growth a function's figure is the allocator's (pymalloc takes arenas
# of 1 MiB from the system), not what the function allocated.
MIN_GROWTH = float(2**20)


@dataclass
class _Item:
    """One figure of both sides: its values per run, medians and shares, its logs
    after the run-wide factor and its test."""

    family: str
    key: Any
    xs: list[float] | None
    ys: list[float] | None
    a: dict[str, float]
    b: dict[str, float]
    note: str = ""
    raw_a: list[float] = field(default_factory=list)
    raw_b: list[float] = field(default_factory=list)
    la: list[float] = field(default_factory=list)
    lb: list[float] = field(default_factory=list)
    shift_variance: float = 0.0
    # The figure this one is the same as (tested in its place), None when none.
    same: _Item | None = None
    test: tuple[float, float, float, float] | None = None
    p_adjusted: float | None = None
    significant: bool = False
    weaker: bool = False

    @property
    def tested(self) -> bool:
        return not self.note

    @property
    def share(self) -> float:
        return (self.a["share"] + self.b["share"]) / 2

    @property
    def delta(self) -> float:
        """The change in seconds of A's scale (after the factor)."""
        return self.a["time"] * (self.test[0] if self.test else 0.0)

    @property
    def sign(self) -> int:
        return 0 if not self.test else (1 if self.test[0] > 0 else -1)


class _Pair:
    """Both sides and what their figures share: the interval, whether counted."""

    def __init__(self, sa: SideTable, sb: SideTable, settings: Settings) -> None:
        self.sa, self.sb, self.settings = sa, sb, settings
        self.counted = sa.counted and sb.counted
        self.rate = min(sa.rate, sb.rate) if self.counted else 0.0
        # Half a sample, in seconds: the log of a count that may be zero.
        self.offset = 0.5 / self.rate if self.counted and self.rate > 0 else 0.0
        self.total_a, self.total_b = median(sa.totals()), median(sb.totals())
        self.single = sa.runs < 2 or sb.runs < 2
        self._medians: dict[int, dict[Any, float]] = {}

    def medians(self, rows: dict[Any, list[float]]) -> dict[Any, float]:
        """Each row's median over the runs, computed once a table (in bulk)."""
        found = self._medians.get(id(rows))
        if found is None:
            found = self._medians[id(rows)] = medians(rows)
        return found

    def figures(self, median: float | None, total: float) -> dict[str, float]:
        if median is None:
            return {"time": 0.0, "share": 0.0}
        return {"time": median, "share": median / total if total > 0 else 0.0}

    def why_untested(self, xs: list[float] | None, ys: list[float] | None, small: bool) -> str:
        if xs is None or ys is None:
            return "only in B" if xs is None else "only in A"
        if small:
            return f"below the {self.settings.min_share:.1%} share tested"
        if self.counted:
            samples = max(median(xs), median(ys)) * self.rate
            if samples < MIN_SAMPLES:
                return f"under {MIN_SAMPLES:g} samples a run"
        elif min(xs) <= 0 or min(ys) <= 0:
            return "no time measured in some runs"
        if self.single and not self.counted:
            return "a single run on a side: significance not judged"
        return ""


def _items(
    family: str,
    rows_a: dict[Any, list[float]],
    rows_b: dict[Any, list[float]],
    pair: _Pair,
) -> list[_Item]:
    """The figures of a family at or above the share tested on a side (those under it are
    shown by :func:`_small_changes`; a large profile has hundreds of thousands of paths)."""
    items = []
    med_a, med_b = pair.medians(rows_a), pair.medians(rows_b)
    least_a = pair.settings.min_share * pair.total_a
    least_b = pair.settings.min_share * pair.total_b
    for key in union(rows_a, rows_b):
        if med_a.get(key, 0.0) < least_a and med_b.get(key, 0.0) < least_b:
            continue
        xs, ys = rows_a.get(key), rows_b.get(key)
        a, b = (
            pair.figures(med_a.get(key), pair.total_a),
            pair.figures(med_b.get(key), pair.total_b),
        )
        small = max(a["share"], b["share"]) < pair.settings.min_share
        item = _Item(family, key, xs, ys, a, b, pair.why_untested(xs, ys, small))
        if item.tested and xs is not None and ys is not None:
            item.raw_a = [math.log(x + pair.offset) for x in xs]
            item.raw_b = [math.log(y + pair.offset) for y in ys]
        items.append(item)
    return items


def _capped(weights: Sequence[float]) -> list[float]:
    """No weight above :data:`MAX_REFERENCE_WEIGHT` of the total (one pass, then the
    total of the others: enough for a median)."""
    cap = MAX_REFERENCE_WEIGHT * math.fsum(weights)
    return [min(w, cap) for w in weights]


class _SideFactors:
    """How much faster or slower each run of one side was than its typical run, a robust
    mean over the pieces (``rows``: each one's logs per run, ``floor``: its least
    variance). Nothing changes within a side: no piece can drag it."""

    def __init__(self, rows: Sequence[Sequence[float]], floor: Sequence[float]) -> None:
        self.runs = len(rows[0]) if rows else 0
        self.centres = [median(row) for row in rows]
        self.devs = [[x - c for x in row] for row, c in zip(rows, self.centres, strict=True)]
        self.floor = [max(f, MIN_LOG_VARIANCE) for f in floor]
        # Twice: the pieces' residual spread, once the run's factor is out of it, weighs
        # them the second time.
        self._fit([1.0 / f for f in self.floor])
        self._fit([1.0 / v for _, v in self.levels()])

    def _fit(self, precisions: list[float]) -> None:
        self.fits = [
            biweight_location([d[r] for d in self.devs], precisions) for r in range(self.runs)
        ]
        self.totals = [math.fsum(fit.weights) for fit in self.fits]

    def levels(self) -> list[tuple[float, float]]:
        """Each piece's level (its trimmed mean log once each run's factor is out) and
        its variance from run to run (never below its floor)."""
        out = []
        factors = self.factors()
        for centre, dev, floor in zip(self.centres, self.devs, self.floor, strict=True):
            res = [d - f for d, f in zip(dev, factors, strict=True)]
            level, var, _ = trimmed_mean_and_variance(res, TRIM)
            out.append((centre + level, max(var, floor)))
        return out

    def factors(self, left_out: Sequence[int] = ()) -> list[float]:
        """Each run's log factor over the pieces not ``left_out`` (those a figure holds),
        their median 0: the side's level is its pieces', whichever they are."""
        out = []
        for r, (fit, total) in enumerate(zip(self.fits, self.totals, strict=True)):
            gone = math.fsum(fit.weights[j] for j in left_out)
            if total - gone <= 0:
                out.append(fit.value)
                continue
            removed = math.fsum(fit.weights[j] * self.devs[j][r] for j in left_out)
            out.append((fit.value * total - removed) / (total - gone))
        # Centred on their median: a run the sampler missed (no sample at all) has a
        # factor of -5 and must not move the others'.
        mid = median(out)
        return [f - mid for f in out]


class _Shift:
    """The log shift of B's typical run against A's: a robust mean of the pieces' own
    shifts (each run's factor out), weighed by precision, none above a quarter of the
    weight, ``extra`` added to each piece's variance (what one run a side cannot show).
    A piece that changed weighs nothing; the shift's variance goes into every test."""

    def __init__(self, sides: tuple[_SideFactors, _SideFactors], extra: float) -> None:
        na, nb = sides[0].runs, sides[1].runs
        self.shifts, self.variances = [], []
        for (la, va), (lb, vb) in zip(sides[0].levels(), sides[1].levels(), strict=True):
            self.shifts.append(lb - la)
            self.variances.append(va / na + vb / nb + extra)
        precisions = [1.0 / v for v in self.variances]
        self.fit = biweight_location(self.shifts, precisions, _capped(precisions), SHIFT_C)
        w = self.fit.weights
        self.total = math.fsum(w)
        self.spread = math.fsum(x * x * v for x, v in zip(w, self.variances, strict=True))

    def value(self, left_out: Sequence[int] = ()) -> tuple[float, float]:
        """``(shift, variance)`` over the pieces not ``left_out``."""
        w, scale = self.fit.weights, self.fit.scale
        gone = math.fsum(w[j] for j in left_out)
        total = self.total - gone
        if total <= 0:
            return self.fit.value, self.fit.variance(self.variances)
        removed = math.fsum(w[j] * self.shifts[j] for j in left_out)
        spread = self.spread - math.fsum(w[j] * w[j] * self.variances[j] for j in left_out)
        shift = (self.fit.value * self.total - removed) / total
        return shift, scale * scale * max(spread, 0.0) / (total * total)


def _floor(pair: _Pair, side: list[float] | None) -> float:
    """A piece's least variance of its log figure: its Poisson part (counted figures)."""
    if not (pair.counted and pair.rate > 0 and side):
        return MIN_LOG_VARIANCE
    return 1.0 / max(median(side) * pair.rate, 0.5)


class _Factors:
    """The run-wide factors of both sides over the ``reference`` pieces: each run's
    within its side, and the shift between the sides."""

    def __init__(self, reference: list[_Item], pair: _Pair) -> None:
        self.sides = (
            _SideFactors([it.raw_a for it in reference], [_floor(pair, it.xs) for it in reference]),
            _SideFactors([it.raw_b for it in reference], [_floor(pair, it.ys) for it in reference]),
        )
        self.shift = _Shift(self.sides, SINGLE_RUN_VARIANCE if pair.single else 0.0)

    def of(self, left_out: Sequence[int]) -> tuple[list[float], list[float], float, float]:
        """``(A's log factors, B's with the shift, shift, its variance)`` of a figure,
        over the pieces it does not hold (not ``left_out``)."""
        shift, var = self.shift.value(left_out)
        fa = self.sides[0].factors(left_out)
        fb = [f + shift for f in self.sides[1].factors(left_out)]
        return fa, fb, shift, var


def _apply_factors(
    items: list[_Item], pieces: list[_Item], pair: _Pair, settings: Settings
) -> None:
    """Takes each run's factor and the shift between the sides out of every figure,
    estimated over the pieces of the runs it does not hold."""
    reference = [it for it in pieces if it.tested]
    if len(reference) > MAX_PIECES:  # the largest carry the run's factor; the cost stays
        reference.sort(key=lambda it: -(it.a["time"] + it.b["time"]))
        reference = reference[:MAX_PIECES]
    settings.reference = len(reference)
    if len(reference) < MIN_REFERENCE:
        settings.notes.append(
            f"fewer than {MIN_REFERENCE} parts of the run to estimate the run-wide factor "
            "from: figures compared as they are"
        )
        for it in items:
            it.la, it.lb = list(it.raw_a), list(it.raw_b)
        return
    factors = _Factors(reference, pair)
    settings.factor = math.expm1(factors.shift.fit.value)
    held = _Held([it.key for it in reference])
    cache: dict[frozenset[int], tuple[list[float], list[float], float, float]] = {}
    for it in items:
        if not it.tested:
            continue
        if it.share > MOST_OF_RUN:
            # What is left of the run cannot tell its change from the machine's: the
            # run's time (the headline) judges it.
            it.note = MOST
            continue
        # The factors of the other pieces: a figure's own change never moves them.
        own = held.by(it)
        found = cache.get(own)
        if found is None:
            found = cache[own] = factors.of(sorted(own))
        fa, fb, _, it.shift_variance = found
        it.la = [x - f for x, f in zip(it.raw_a, fa, strict=True)]
        it.lb = [x - f for x, f in zip(it.raw_b, fb, strict=True)]


class _Held:
    """Which pieces of the run (stacks, or functions' own times) each figure holds,
    indexed in one pass: a comparison of 20,000 functions asks 60,000 times."""

    def __init__(self, pieces: Sequence[Any]) -> None:
        self.ending: dict[Any, list[int]] = {}
        self.holding: dict[Any, list[int]] = {}
        self.starting: dict[Any, list[int]] = {}
        self.stacks = False
        for j, piece in enumerate(pieces):
            if not (piece and isinstance(piece[0], tuple)):
                self.ending.setdefault(piece, []).append(j)
                continue
            self.stacks = True
            self.ending.setdefault(piece[-1], []).append(j)
            for key in dict.fromkeys(piece):  # once each, in a recursion
                self.holding.setdefault(key, []).append(j)
            for depth in range(1, len(piece) + 1):
                self.starting.setdefault(piece[:depth], []).append(j)

    def by(self, it: _Item) -> frozenset[int]:
        """The indices of the pieces the figure of ``it`` holds."""
        if not self.stacks:
            found = self.ending.get(it.key[-1] if it.family == PATH else it.key, ())
        elif it.family == OWN:
            found = self.ending.get(it.key, ())
        elif it.family == INCLUSIVE:
            found = self.holding.get(it.key, ())
        else:
            found = self.starting.get(it.key, ())
        return frozenset(found)


def _fit_prior(
    shares: Sequence[float], variances: Sequence[float], df: float
) -> Callable[[float], float] | None:
    """The prior variance of a log figure by its share, ``exp(intercept + slope log
    share)``, fitted over the tested figures (least squares of the logs), corrected for
    the bias of the log of a variance estimated over ``df`` degrees (``E log(chi2_k / k)
    = -1/k - 1/(3 k^2)``); None with fewer than 8 figures."""
    pts = [
        (math.log(max(s, 1e-9)), math.log(v))
        for s, v in zip(shares, variances, strict=True)
        if v > 0
    ]
    if len(pts) < 8 or df <= 0:
        return None
    mx = math.fsum(p[0] for p in pts) / len(pts)
    my = math.fsum(p[1] for p in pts) / len(pts)
    sxx = math.fsum((p[0] - mx) ** 2 for p in pts)
    sxy = math.fsum((p[0] - mx) * (p[1] - my) for p in pts)
    slope = min(max(sxy / sxx if sxx > 0 else 0.0, -2.0), 1.0)
    intercept = my - slope * mx + (1 / df + 1 / (3 * df * df))  # the bias
    return lambda share: max(
        math.exp(intercept + slope * math.log(max(share, 1e-9))), MIN_LOG_VARIANCE
    )


def _pooled(it: _Item) -> float:
    _, va, dfa = trimmed_mean_and_variance(it.la, TRIM)
    _, vb, dfb = trimmed_mean_and_variance(it.lb, TRIM)
    return (dfa * va + dfb * vb) / max(dfa + dfb, 1)


def _test_items(items: list[_Item], pair: _Pair, settings: Settings) -> None:
    tested = [it for it in items if it.tested]
    prior = None
    runs = (pair.sa.runs, pair.sb.runs)
    if not pair.single:
        df = sum(trimmed_mean_and_variance([0.0] * n, TRIM)[2] for n in runs)
        prior = _fit_prior([it.share for it in tested], [_pooled(it) for it in tested], df)
    margin = settings.min_change
    for it in tested:
        if pair.single:
            # Each side's samples added up over its runs, each run's factor averaged.
            count_a = sum(it.xs or ()) * pair.rate
            count_b = sum(it.ys or ()) * pair.rate
            factor = _mean_diff(it.raw_b, it.lb) - _mean_diff(it.raw_a, it.la)
            it.test = count_ratio_test(
                count_a, count_b, factor, SINGLE_RUN_VARIANCE + it.shift_variance,
                settings.confidence, margin,
                (len(it.la), len(it.lb)),
            )  # fmt: skip
            it.weaker = True
            # A's mean run; the half sample is spread over its runs.
            _shown(it, math.fsum(it.xs or ()) / len(it.la), pair.offset / len(it.la))
            continue
        var, df0 = (prior(it.share), PRIOR_DF) if prior is not None else (0.0, 0.0)
        floors = (_floor(pair, it.xs), _floor(pair, it.ys))
        t = moderated_log_test(
            it.la, it.lb, settings.confidence, var, df0, margin, it.shift_variance, TRIM,
            floors if pair.counted else (0.0, 0.0),
        )  # fmt: skip
        it.test = (t.change, t.low, t.high, t.p_value)
        level = trimmed_mean_and_variance(it.la, TRIM)[0]
        _shown(it, math.exp(level) - pair.offset, pair.offset)


def _shown(it: _Item, a: float, offset: float) -> None:
    """The figures a test compared, as the rows show them: A's typical time (the
    geometric mean of its runs, factors out) and B's at A's run speed; the test's ratio,
    of the times plus half a sample, scaled by ``1 + offset / A`` to be theirs."""
    if it.test is None or a <= 0:
        return
    scale = 1 + offset / a
    change, low, high, p = it.test
    it.test = (change * scale, low * scale, high * scale, p)
    it.a["typical"], it.b["typical"] = a, a * (1 + change * scale)


def _mean_diff(xs: Sequence[float], ys: Sequence[float]) -> float:
    return math.fsum(x - y for x, y in zip(xs, ys, strict=True)) / len(xs)


def _correct(families: Sequence[list[_Item]], alpha: float) -> None:
    """Holm over every tested figure as one family, each weighted by the square root of
    its share: a path of 5 % of the run is tested at a fifth of the level of the whole,
    not a twentieth, and hundreds of small figures cost the large ones little."""
    where = [it for fam in families for it in fam if it.test is not None]
    weights = [math.sqrt(max(it.share, 1e-12)) for it in where]
    adjusted = holm([it.test[3] for it in where if it.test is not None], weights)
    for it, p in zip(where, adjusted, strict=True):
        it.p_adjusted = p
        it.significant = p < alpha


class _Paths:
    """The call paths' graph: children and parents of each path, by kind."""

    def __init__(self, items: list[_Item], kind: str) -> None:
        self.kind = kind
        self.by_key = {it.key: it for it in items}
        self.children: dict[Any, list[_Item]] = {}
        self.parents: dict[Any, list[_Item]] = {}
        ends: dict[Key, list[_Item]] = {}
        if kind == EDGES:
            for it in items:
                ends.setdefault(it.key[0], []).append(it)
        for it in items:
            if kind == STACKS and len(it.key) > 1 and it.key[:-1] in self.by_key:
                parent = self.by_key[it.key[:-1]]
                self.children.setdefault(parent.key, []).append(it)
                self.parents[it.key] = [parent]
            elif kind == EDGES:
                kids = ends.get(it.key[1], [])
                self.children[it.key] = kids
                for kid in kids:
                    self.parents.setdefault(kid.key, []).append(it)

    def _tested_child(self, child: _Item) -> _Item:
        """The child, or for a path not tested again (its only callee's path holds all
        its time), that callee's path, down to a tested one."""
        while child.note == SAME_AS_CALLEE and len(self.children.get(child.key, ())) == 1:
            child = self.children[child.key][0]
        return child

    def explained(self, it: _Item) -> bool:
        kids = [self._tested_child(c) for c in self.children.get(it.key, ())]
        carried = sum(c.delta for c in kids if c.significant and c.sign == it.sign)
        return abs(carried) >= CARRIED * abs(it.delta) > 0

    def chain(self, origin: _Item, explained: set[Any]) -> list[_Item]:
        """The origin and the callers its change runs through, outermost first."""
        chain = [origin]
        rel = abs(origin.test[0]) if origin.test else 0.0
        while len(chain) < MAX_CHAIN:
            ups = [
                q
                for q in self.parents.get(chain[0].key, ())
                if q not in chain
                and ((q.key in explained and q.sign == origin.sign) or q.note == SAME_AS_CALLEE)
            ]
            if not ups:
                break
            best = max(ups, key=lambda q: abs(q.a["time"]))
            if best.test is not None and abs(best.test[0]) < CHAIN * rel:
                break
            chain.insert(0, best)
        return chain

    def shown(self, chain: list[_Item]) -> tuple[Key, ...]:
        """The functions an origin's row shows: the end of each path of its chain, with
        the caller of the first when the chain is one path long."""
        first = chain[0].key
        ends = tuple(it.key[-1] for it in chain)
        caller = first[-2] if len(first) > 1 else None
        return (caller, *ends) if caller is not None and len(chain) == 1 else ends


def _attribute(paths: list[_Item], kind: str) -> dict[Any, tuple[str, tuple[Key, ...]]]:
    """Each significant path's role, and the functions an origin's row shows."""
    graph = _Paths(paths, kind)
    significant = [it for it in paths if it.significant and it.sign]
    explained = {it.key for it in significant if graph.explained(it)}
    roles: dict[Any, tuple[str, tuple[Key, ...]]] = {}
    for it in significant:
        if it.key in explained:
            roles[it.key] = (EXPLAINED, ())
        else:
            roles[it.key] = (ORIGIN, graph.shown(graph.chain(it, explained)))
    return roles


def _change(it: _Item, section: str, pair: _Pair, verdict: str = "") -> Change:
    """A figure's change; one the same as a tested figure (its only path...) shows that
    figure's test, once in the family."""
    key = it.key[-1] if it.family == PATH else it.key
    file, line, name = located(key, pair.sa, pair.sb)
    path: tuple[str, ...] = ()
    places: tuple[str, ...] = ()
    if it.family == PATH:
        named = [located(k, pair.sa, pair.sb) for k in it.key]
        path = tuple(one_line(n[2]) for n in named)
        places = tuple(place(*n) for n in named)
    src = _tested_as(it)
    t: tuple[float | None, ...] = src.test or (None, None, None, None)
    a, b = it.a, it.b
    if src.test is None and it.a["time"] > 0:  # shown after the run-wide factor too
        t = (_untested(it.a, it.b, pair.settings.factor), None, None, None)
    elif src is not it and "typical" in src.a:
        a, b = {**it.a, "typical": src.a["typical"]}, {**it.b, "typical": src.b["typical"]}
    return Change(
        section, name, file, line, it.family, a, b, t[0], t[1], t[2], t[3],
        src.p_adjusted, src.significant, src.test is not None, it.note,
        path=path, chain=min(len(path), 3), verdict=verdict, weaker=src.weaker,
        places=places,
    )  # fmt: skip


def _untested(a: dict[str, float], b: dict[str, float], factor: float | None) -> float:
    """An untested figure's change, after the run-wide factor when one was taken out
    (B's time at A's run speed is then shown beside A's)."""
    if factor is not None:
        a["typical"], b["typical"] = a["time"], b["time"] / (1 + factor)
        return b["typical"] / a["typical"] - 1
    return b["time"] / a["time"] - 1


def _verdict(it: _Item) -> str:
    return (WORSE if it.sign > 0 else BETTER) if it.significant and it.sign else ""


def _path_changes(paths: list[_Item], kind: str, section: str, pair: _Pair) -> list[Change]:
    roles = _attribute(paths, kind)
    changes = []
    for it in paths:
        c = _change(it, section, pair)
        role, shown = roles.get(it.key, ("", ()))
        if role == ORIGIN:
            names = tuple(one_line(located(k, pair.sa, pair.sb)[2]) for k in shown)
            c = c.replace(role=role, shown=names, verdict=_verdict(it))
        elif role == EXPLAINED:
            c = c.replace(role=role)
        changes.append(c)
    return changes


def _check_comparable(sa: SideTable, sb: SideTable, names: tuple[str, str]) -> None:
    a, b = (one_line(n[:200]) for n in names)
    if sa.profiler != sb.profiler and "cprofile" in (sa.profiler, sb.profiler):
        raise ResultFormatError(
            f"{a} was profiled with {_what(sa.profiler)}, {b} with {_what(sb.profiler)}: "
            "their times are not comparable (profile both the same way)"
        )
    if sa.clock != sb.clock:
        raise ResultFormatError(
            f"{a} was measured with the {sa.clock} clock, {b} with the {sb.clock} clock: "
            "their times are not comparable"
        )


def _what(profiler: str) -> str:
    return {"cprofile": "cProfile", "sampled": "the sampler", "ticks": "run's ticks"}.get(
        profiler, profiler
    )


def _headline(sa: SideTable, sb: SideTable, section: str, settings: Settings) -> Change:
    """The run's time: its CPU time on the CPU clock (steadier beside other programs),
    its wall time otherwise."""
    if sa.clock == "cpu":
        what, figure, xs, ys = "CPU time", "cpu", sa.totals(), sb.totals()
    else:
        what, figure, xs, ys = "wall time", "wall", sa.walls, sb.walls
    return headline_change(section, what, figure, xs, ys, settings)


def headline_change(
    section: str,
    what: str,
    figure: str,
    xs: Sequence[float],
    ys: Sequence[float],
    settings: Settings,
    weaker: bool = False,
    clock: str = "wall",
    shift: Shift | None = None,
) -> Change:
    """A headline figure (a run's time, a peak, a statement) judged on its own
    (:func:`.decide.judge`).

    :param section: the comparison's section
    :param what: what to call it
    :param figure: its figure's name
    :param xs: A's values
    :param ys: B's values
    :param settings: the settings
    :param weaker: the values are the batches of one process a side
    :param clock: the clock of the values (``wall`` or ``cpu``)
    :param shift: the machine's shift between the sessions, taken out of ``ys``
    """
    d = judge(xs, ys, settings.alpha, settings.confidence, weaker, clock, shift=shift)
    a = {figure: median(xs), "n": float(len(xs))}
    b = {figure: median(ys), "n": float(len(ys))}
    if d.log_variance is not None:
        a["log_variance"] = b["log_variance"] = d.log_variance
    if not d.tested and (len(xs) < 2 or len(ys) < 2):
        settings.judged = False
    return Change(
        section, what, None, None, figure, a, b, d.change, d.low, d.high, d.p_value,
        d.p_value, d.significant, d.tested, d.note,
        verdict=(WORSE if (d.change or 0) > 0 else BETTER) if d.significant else "",
        weaker=d.weaker,
    )  # fmt: skip


def _growth_items(sa: SideTable, sb: SideTable, settings: Settings) -> list[_Item]:
    """Each function's memory growth while it ran, tested on its difference over A's
    rise (peak - start): 2 MiB more in a callback is +1 % of a 200 MiB program, not
    +24,116 %."""
    items = []
    for key in union(sa.growth, sb.growth):
        xs, ys = sa.growth.get(key), sb.growth.get(key)
        a = {"growth": median(xs or [0.0]), "rise": sa.rise}
        b = {"growth": median(ys or [0.0]), "rise": sb.rise}
        a["share"], b["share"] = abs(a["growth"]) / sa.rise, abs(b["growth"]) / sb.rise
        a["time"], b["time"] = a["growth"], b["growth"]
        item = _Item(GROWTH, key, xs, ys, a, b)
        big = max(abs(a["growth"]), abs(b["growth"]))
        if xs is None or ys is None:
            item.note = "only in B" if xs is None else "only in A"
        elif big < MIN_GROWTH or max(a["share"], b["share"]) < settings.min_share:
            item.note = "too small to test"
        elif len(xs) < 2 or len(ys) < 2:
            item.note = "a single run on a side: significance not judged"
        else:
            d, low, high, p = welch_difference(
                xs, ys, settings.confidence, settings.min_change * sa.rise
            )
            item.test = (d / sa.rise, low / sa.rise, high / sa.rise, p)
        items.append(item)
    return items


def _growth_change(it: _Item, pair: _Pair) -> Change:
    file, line, name = located(it.key, pair.sa, pair.sb)
    untested = ((it.b["growth"] - it.a["growth"]) / max(it.a["rise"], 1.0), None, None, None)
    change, low, high, p = it.test or untested
    return Change(
        "run", name, file, line, GROWTH, it.a, it.b, change, low, high, p,
        it.p_adjusted, it.significant, it.test is not None, it.note, verdict=_verdict(it),
    )  # fmt: skip


def profile_changes(sa: SideTable, sb: SideTable, settings: Settings, section: str) -> list[Change]:
    """Compares two sides (see the module's description): the headline(s), then every
    function's and path's change.

    :param sa: A's table
    :param sb: B's table
    :param settings: the settings (its notes and factor are filled)
    :param section: ``profile`` or ``run``
    :raises ResultFormatError: the sides were measured in ways not comparable
    """
    _check_comparable(sa, sb, settings.names)
    pair = _Pair(sa, sb, settings)
    own = _items(OWN, sa.own, sb.own, pair)
    inclusive = _items(INCLUSIVE, sa.inclusive, sb.inclusive, pair)
    kind = sa.path_kind if sa.path_kind == sb.path_kind else NO_PATHS
    paths = _items(PATH, sa.paths, sb.paths, pair) if kind != NO_PATHS else []
    _deduplicate(own, inclusive, paths, kind)
    everything = own + inclusive + paths
    pieces = (
        own
        if sa.pieces is sa.own and sb.pieces is sb.own
        else _items("piece", sa.pieces, sb.pieces, pair)
    )
    _apply_factors(everything, pieces, pair, settings)
    _test_items(everything, pair, settings)
    growth = _growth_items(sa, sb, settings) if sa.growth and sb.growth else []
    _correct([own, inclusive, paths, growth], settings.alpha)
    heads = [_headline(sa, sb, section, settings)]
    if section == "run":
        heads.append(headline_change(section, "peak memory", "peak", sa.peaks, sb.peaks, settings))
    changes = heads + [_change(it, section, pair, _verdict(it)) for it in own]
    changes += [_change(it, section, pair) for it in inclusive]
    changes += _path_changes(paths, kind, section, pair)
    changes += [_growth_change(it, pair) for it in growth]
    # Every function has its own time's entry; its inclusive time's only from the share
    # tested (the own entry already says a function is only in A or B).
    changes += _small_changes(OWN, sa.own, sb.own, {it.key for it in own}, pair, section)
    _notes(settings, pair, kind)
    return changes


def _small_changes(
    family: str,
    rows_a: dict[Any, list[float]],
    rows_b: dict[Any, list[float]],
    done: set[Any],
    pair: _Pair,
    section: str,
) -> list[Change]:
    """The functions under the share tested or on one side only, shown, not tested: in
    one pass, they are most of a large profile (19,000 of 20,000 functions)."""
    med_a, med_b = pair.medians(rows_a), pair.medians(rows_b)
    out = []
    for key in union(rows_a, rows_b):
        if key in done:
            continue
        a = pair.figures(med_a.get(key), pair.total_a)
        b = pair.figures(med_b.get(key), pair.total_b)
        note = pair.why_untested(rows_a.get(key), rows_b.get(key), small=True)
        ratio = _untested(a, b, pair.settings.factor) if a["time"] > 0 else None
        file, line, name = located(key, pair.sa, pair.sb)
        out.append(Change(section, name, file, line, family, a, b, ratio, note=note))
    return out


# A figure holding this much of another's time on both sides is the same figure.
SAME = 0.98
SAME_AS_CALLEE = "the same as its only callee's path"


def _same(it: _Item, other: _Item) -> bool:
    return all(
        o and x >= SAME * o
        for x, o in ((it.a["time"], other.a["time"]), (it.b["time"], other.b["time"]))
    )


def _deduplicate(own: list[_Item], inclusive: list[_Item], paths: list[_Item], kind: str) -> None:
    """Tests each quantity once: an inclusive time that is the function's own time or
    its only path's, or a path whose only callee path holds all its time (``<module> →
    main``), is not tested again."""
    own_of = {it.key: it for it in own}
    ending: dict[Any, list[_Item]] = {}
    children: dict[Any, list[_Item]] = {}
    for it in paths:
        ending.setdefault(it.key[-1], []).append(it)
        if kind == STACKS and len(it.key) > 1:
            children.setdefault(it.key[:-1], []).append(it)
    for it in inclusive:
        if not it.tested:
            continue
        mine = own_of.get(it.key)
        ends = ending.get(it.key, [])
        if mine is not None and mine.tested and _same(mine, it):
            it.note, it.same = "the same as its own time (it calls nothing that takes time)", mine
        elif kind != NO_PATHS and len(ends) == 1 and ends[0].tested:
            it.note, it.same = "the same as its only call path", ends[0]
    for it in paths:
        kids = children.get(it.key, [])
        if it.tested and len(kids) == 1 and kids[0].tested and _same(kids[0], it):
            it.note, it.same = SAME_AS_CALLEE, kids[0]


def _tested_as(it: _Item) -> _Item:
    """The figure whose test stands for this one: itself, or the tested one down the
    chain of the figures it is the same as."""
    found = it
    for _ in range(MAX_SAME):
        if found.test is not None or found.same is None:
            break
        found = found.same
    return found if found.test is not None else it


def _notes(settings: Settings, pair: _Pair, kind: str) -> None:
    if kind == NO_PATHS:
        settings.notes.append(
            "no call paths on both sides (a result saved before version 3): functions only"
        )
    if pair.single and pair.counted:
        settings.notes.append(
            "a single run on a side: each figure tested on its samples (Poisson, plus a 3 % "
            "spread between runs that one run cannot show): weaker evidence"
        )
    if settings.factor is not None:
        settings.notes.append(
            f"B's run as a whole moved {settings.factor:+.1%} against A's (a robust mean "
            f"over {settings.reference} parts of the run, those that changed left out): "
            "B's figures are compared at A's run speed"
        )
    for side, table in (("A", pair.sa), ("B", pair.sb)):
        if table.failed:
            settings.notes.append(
                f"{side}: {table.failed} of {table.runs} runs did not exit with 0"
            )
