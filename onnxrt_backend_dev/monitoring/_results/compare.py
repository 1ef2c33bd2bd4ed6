"""The comparison of two saved results (A the baseline, B the new one).

* timings: each statement's seconds per execution, Mann-Whitney's test and the exact
  Hodges-Lehmann interval of the ratio (``_timing.stats.compare_samples``), **over the
  processes that timed it**: one figure per process (its median batch), so a timing
  needs two processes a side (``time --processes N``) to be judged. The batches of one
  process are not independent evidence about another process: two ``time --save`` of
  the same statement, one after the other on a busy machine, differed by -31 % to
  +56 % here, each "significant" over its batches (see :func:`_timing`);
* memory: each channel's peak over the runs, the same test;
* profiles, **per function**: the figure tested is the function's *share* of its run's
  own time (own time / the run's total), not its absolute time: the machine's speed moves
  every function of a run together (absolute own times vary 9-18 % from run to run here,
  shares 3.5-6 %), and the share cancels that common factor. Each function whose share is
  at least ``min_share`` on one side and never zero is tested (Mann-Whitney, the
  Hodges-Lehmann interval of the share ratio); the p-values of that family are corrected
  with Holm's step-down method, which bounds the chance of *any* false alarm (the
  family-wise error) at ``alpha`` whatever the dependence between the tests. Shares are
  dependent (they sum to 1), which Benjamini-Hochberg's false discovery rate does not
  cover in general, and a CI gate wants "no false alarm" more than "few". Holm's method
  is weighted (:func:`precision_weights`): each function weighs its share (the mean of
  A's and B's) over the variance of its log share in the runs of A and B pooled, both
  blind to which run is A's: a function holding 5 % of the run whose runs agree is
  tested at about 9 % of ``alpha`` rather than ``alpha`` / 200, so the functions that
  matter and can show a change keep their power, and the hundreds of small, noisy ones
  cost it little. The run's wall time is tested on its own, outside the family;
* ``run`` results (the one report, ``run --repeat``): the run's wall time and exact peak,
  each function's share of the sampled own time (as a profile's) and its memory growth
  while it ran (callees included), all in one Holm family whose three parts weigh a
  third each (see :func:`_run`).

A positive ``change`` is always "B is worse" (more time, a larger share, a higher peak);
``ci_low``/``ci_high`` bound it at ``confidence`` (per function, not corrected). With a
single run on a side nothing is tested: the figures are shown, and the comparison says it
cannot judge significance.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import operator
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import ResultFormatError
from .._gc import gc_paused
from .._timing.stats import Comparison, compare_samples
from .._validate import check_bool, check_number
from .columns import Columns, medians, run_count

CORRECTION = "holm"
_NORMAL = statistics.NormalDist()
# Up to this many pairwise differences, one sort of them all is the faster way.
_SMALL_PRODUCT = 2500
# Below this many runs a side, Mann-Whitney's normal approximation is rough.
FEW_RUNS = 8
# Functions below this share of the run on both sides are shown, not tested: their
# timings sit at the clock's resolution and each test costs power to the others.
MIN_SHARE = 0.001
# Holm's weights divide by the variance of a function's log share over the runs: never
# by less than this (a 1 % spread), so that a function whose runs all agree to the
# clock's resolution does not take all of alpha.
MIN_LOG_VARIANCE = 1e-4


@dataclass(frozen=True)
class Change:
    """One compared figure: a function of a profile, a timed statement, a memory channel
    or the run's wall time.

    :param section: ``timing``, ``memory`` or ``profile``
    :param function: the function (or statement, channel, ``wall time``)
    :param file: the function's file, None for other figures
    :param line: its first line, None for other figures
    :param figure: what was tested: ``time``, ``peak``, ``share`` or ``wall``
    :param a: figures of A (means over its runs)
    :param b: figures of B
    :param change: relative change of the tested figure, ``B / A - 1`` (None if A is 0)
    :param ci_low: lower bound of ``change``'s interval, None when not tested
    :param ci_high: upper bound
    :param p_value: the test's p-value, None when not tested
    :param p_adjusted: corrected for the family (Holm), None when not tested
    :param significant: ``p_adjusted < alpha``
    :param tested: whether a test was made
    :param note: why it was not tested, or a remark
    """

    section: str
    function: str
    file: str | None
    line: int | None
    figure: str
    a: dict[str, float]
    b: dict[str, float]
    change: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    significant: bool = False
    tested: bool = False
    note: str = ""

    @property
    def impact(self) -> float:
        """How much it matters, for sorting: share points moved for a function, the
        relative change otherwise."""
        if "growth_share" in self.a:  # a function's memory growth (run results)
            # its relative change, weighted by how much of the program's rise it holds
            held = (self.a.get("growth_share", 0.0) + self.b.get("growth_share", 0.0)) / 2
            return abs(self.change or 0.0) * held
        if "share" in self.a:  # a function, tested on its share or paired on its time
            return abs(self.b.get("share", 0.0) - self.a.get("share", 0.0))
        return abs(self.change or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        # The fields in their declared order (a copy of __dict__: 20,000 of them at once).
        d = dict(self.__dict__)
        d["a"], d["b"] = dict(self.a), dict(self.b)
        return d


@dataclass(frozen=True)
class ResultComparison:
    """The comparison of two results.

    :param kind: the results' kind
    :param names: what to call A and B (their files)
    :param changes: every compared figure
    :param judged: False when a side has a single run: nothing could be tested
    :param notes: what the reader must know (few runs, functions left untested...)
    :param alpha: the significance level of the corrected tests
    :param confidence: the level of the intervals
    :param runs: runs (or batches) on each side
    """

    kind: str
    names: tuple[str, str]
    changes: tuple[Change, ...]
    judged: bool
    notes: tuple[str, ...] = ()
    alpha: float = 0.05
    confidence: float = 0.95
    runs: tuple[int, int] = (0, 0)
    correction: str = field(default=CORRECTION)

    def ordered(self) -> list[Change]:
        """Significant changes first, then tested ones, each by size (impact)."""
        return list(self._order)

    @functools.cached_property
    def _order(self) -> tuple[Change, ...]:
        # Sorted once: the renderers and the gate all read it (20,000 rows).
        keyed = [
            (not c.significant, not c.tested, -c.impact, i) for i, c in enumerate(self.changes)
        ]
        keyed.sort()
        return tuple(self.changes[k[3]] for k in keyed)

    def regressions(self, above: float) -> list[Change]:
        """Significant changes for the worse larger than ``above`` (0.05 for 5 %). A
        function's share also rises when *another* function gets faster; so a share
        counts only when the function's own median time grew beyond ``above`` too.

        :param above: the threshold, a fraction
        :return: the changes, ordered
        """
        check_number("above", above, minimum=0)
        return [c for c in self.ordered() if _is_regression(c, above)]

    def to_dict(self, entries: bool = True) -> dict[str, Any]:
        """JSON-ready: the settings, the notes and one entry per change, ordered.

        :param entries: include the entries (a renderer may encode them one by one)
        """
        head = {
            "kind": self.kind,
            "a": self.names[0],
            "b": self.names[1],
            "judged": self.judged,
            "runs": list(self.runs),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "correction": self.correction,
            "notes": list(self.notes),
        }
        if entries:
            head["entries"] = [c.to_dict() for c in self.ordered()]
        return head


def _is_regression(c: Change, above: float) -> bool:
    if not c.significant or c.change is None or c.change <= above:
        return False
    if c.figure == "share":
        return c.b.get("time", 0.0) > c.a.get("time", 0.0) * (1 + above)
    return True


def holm(p_values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given), weighted as Holm (1979)
    allows: hypothesis ``i`` is tested at ``alpha * w_i / (sum of the weights left)``.
    The family-wise error stays at most ``alpha`` for any positive weights chosen without
    looking at the differences; equal weights give the classic method.

    :param p_values: the raw p-values of one family
    :param weights: positive weights, all 1 when None
    :return: adjusted p-values, ``p_adj < alpha`` rejecting at family-wise level ``alpha``
    """
    m = len(p_values)
    w = [1.0] * m if weights is None else [float(x) for x in weights]
    order = sorted(range(m), key=lambda i: p_values[i] / w[i])
    adjusted = [1.0] * m
    remaining = math.fsum(w)
    running = 0.0
    for i in order:
        running = max(running, min(1.0, p_values[i] * remaining / w[i]))
        adjusted[i] = running
        remaining = max(remaining - w[i], 0.0)
    return adjusted


def _relative(cmp: Comparison) -> tuple[float, float, float]:
    """``B / A - 1`` and its interval, from a comparison whose speedup is ``A / B``."""
    return 1 / cmp.speedup - 1, 1 / cmp.ci_high - 1, 1 / cmp.ci_low - 1


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else 0.0


def _ratio_change(a: float, b: float) -> float | None:
    return b / a - 1 if a > 0 else None


def small_sample_test(
    xs: Sequence[float], ys: Sequence[float], confidence: float
) -> tuple[float, float, float, float]:
    """What ``compare_samples`` computes (Mann-Whitney's p-value with its tie and
    continuity corrections, the Hodges-Lehmann ratio and its interval), from one sorted
    list of the ``n m`` log differences: for the few runs of a profile (400 differences
    at 20 a side) this is much faster than its selection, made for 10,000 batches, and
    a profile of 20,000 functions may run 20,000 tests.

    :param xs: positive figures of A
    :param ys: positive figures of B
    :param confidence: level of the interval
    :return: ``(B / A - 1, low, high, p-value)``
    """
    n, m = len(xs), len(ys)
    la = [math.log(x) for x in xs]
    lb = [math.log(y) for y in ys]
    diffs = sorted([a - b for a in la for b in lb])
    nm = n * m
    # Mann-Whitney's U of A: pairs where A is larger, ties counted half.
    below, upto = bisect.bisect_left(diffs, 0.0), bisect.bisect_right(diffs, 0.0)
    u_a = nm - upto + 0.5 * (upto - below)
    ties = sum(c**3 - c for c in Counter([*xs, *ys]).values())
    total = n + m
    var = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if var <= 0:
        p = 1.0
    else:
        z = (abs(u_a - nm / 2.0) - 0.5) / math.sqrt(var)
        p = min(1.0, 2.0 * _NORMAL.cdf(-max(z, 0.0)))
    q = _NORMAL.inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(nm / 2.0 - q * math.sqrt(n * m * (n + m + 1) / 12.0))
    k = min(max(k, 0), (nm - 1) // 2)
    median = diffs[nm // 2] if nm % 2 else (diffs[nm // 2 - 1] + diffs[nm // 2]) / 2
    # diffs are log(A / B): B / A - 1 is exp(-d) - 1, and the bounds swap.
    return math.exp(-median) - 1, math.exp(-diffs[nm - 1 - k]) - 1, math.exp(-diffs[k]) - 1, p


def signed_rank_test(d: Sequence[float], confidence: float) -> tuple[float, float, float, float]:
    """Wilcoxon's signed-rank test of paired log ratios ``d`` (``log(B / A)`` per pair),
    with the Hodges-Lehmann estimate (the median of the Walsh averages) and its interval:
    the paired counterpart of :func:`small_sample_test`.

    :param d: one log ratio per pair of runs
    :param confidence: level of the interval
    :return: ``(B / A - 1, low, high, p-value)``
    """
    n = len(d)
    walsh = sorted([(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)])
    nw = len(walsh)
    # The signed-rank statistic is the number of positive Walsh averages (ties half).
    below, upto = bisect.bisect_left(walsh, 0.0), bisect.bisect_right(walsh, 0.0)
    t_plus = nw - upto + 0.5 * (upto - below)
    ties = sum(c**3 - c for c in Counter(abs(x) for x in d if x != 0).values())
    var = n * (n + 1) * (2 * n + 1) / 24.0 - ties / 48.0
    if var <= 0:
        p = 1.0
    else:
        z = (abs(t_plus - nw / 2.0) - 0.5) / math.sqrt(var)
        p = min(1.0, 2.0 * _NORMAL.cdf(-max(z, 0.0)))
    q = _NORMAL.inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(nw / 2.0 - q * math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0))
    k = min(max(k, 0), (nw - 1) // 2)
    median = walsh[nw // 2] if nw % 2 else (walsh[nw // 2 - 1] + walsh[nw // 2]) / 2
    return math.exp(median) - 1, math.exp(walsh[k]) - 1, math.exp(walsh[nw - 1 - k]) - 1, p


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value below and above which half the weight lies.

    :param values: the values
    :param weights: their positive weights
    :return: the weighted median (0.0 when empty)
    """
    order = sorted(range(len(values)), key=values.__getitem__)
    half = math.fsum(weights) / 2
    acc = 0.0
    for i in order:
        acc += weights[i]
        if acc >= half:
            return float(values[i])
    return 0.0


def _tested(
    base: Change, xs: Sequence[float], ys: Sequence[float], confidence: float, alpha: float
) -> Change:
    if len(xs) * len(ys) <= _SMALL_PRODUCT:
        change, low, high, p = small_sample_test(xs, ys, confidence)
    else:
        cmp = compare_samples(xs, ys, confidence, alpha)
        change, low, high = _relative(cmp)
        p = cmp.p_value
    return _replace(base, change=change, ci_low=low, ci_high=high, p_value=p, tested=True)


def _replace(entry: Change, **fields: Any) -> Change:
    values = dict(entry.__dict__)
    values.update(fields)
    return Change(**values)


def _family(
    changes: list[Change],
    alpha: float,
    weighted: bool = False,
    weights: Mapping[int, float] | None = None,
) -> list[Change]:
    """Corrects the tested changes of one family with Holm's method; ``weighted``: each
    function weighs its share of the run, the mean of A's and B's (which does not depend
    on which side is which), so that the time that matters gets the power; ``weights``
    (index in ``changes`` -> weight, see :func:`precision_weights`) replaces them."""
    tested = [i for i, c in enumerate(changes) if c.tested and c.p_value is not None]
    chosen = None
    if weights is not None:
        chosen = [weights.get(i, 1e-12) for i in tested]
    elif weighted:
        chosen = [(changes[i].a["share"] + changes[i].b["share"]) / 2 or 1e-12 for i in tested]
    adjusted = holm([changes[i].p_value or 0.0 for i in tested], chosen)
    for i, p in zip(tested, adjusted, strict=True):
        changes[i] = _replace(changes[i], p_adjusted=p, significant=p < alpha)
    return changes


def _log_variance(values: Sequence[float]) -> float:
    """The variance of the logs of positive values (fsum: no Fraction arithmetic)."""
    logs = [math.log(x) for x in values]
    mean = math.fsum(logs) / len(logs)
    return math.fsum([(x - mean) ** 2 for x in logs]) / len(logs)


def precision_weights(
    keys: Sequence[tuple[str, str, int]], functions: Sequence[Change], sa: _Side, sb: _Side
) -> dict[int, float]:
    """Holm's weight of each tested function: its share of the run (where the time is)
    times the precision of its runs, one over the variance of the log of its share over
    the runs of A and B pooled (how small a change its runs can show), floored at a 1 %
    spread (:data:`MIN_LOG_VARIANCE`). Both are blind to which run is A's and which B's:
    under the null hypothesis the runs are exchangeable, and a rank test's p-value
    depends only on which runs are A's, so the weights carry nothing of the difference
    and Holm's bound on the family-wise error holds (as in independent hypothesis
    weighting). A function whose runs agree gets more of alpha than one as large whose
    runs scatter, which could not show a 10 % change anyway.

    :param keys: the matching key of each entry of ``functions``
    :param functions: the functions' changes, tested or not
    :param sa: A's figures
    :param sb: B's figures
    :return: index in ``functions`` -> weight, for the tested ones
    """
    weights = {}
    for i, (key, c) in enumerate(zip(keys, functions, strict=True)):
        if c.tested:
            pooled = [*sa.shares_of(key), *sb.shares_of(key)]
            share = (c.a["share"] + c.b["share"]) / 2 or 1e-12
            weights[i] = share / max(_log_variance(pooled), MIN_LOG_VARIANCE)
    return weights


def _samples(series: Mapping[str, Any]) -> list[float]:
    return [t / n for t, n in zip(series["times"], series["sizes"], strict=True)]


def _pair_series(sa: list[dict[str, Any]], sb: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Series of the same name, or the only one of each side."""
    if len(sa) == 1 and len(sb) == 1:
        return [(sa[0], sb[0])]
    by_name = {s["name"]: s for s in sb}
    return [(s, by_name[s["name"]]) for s in sa if s["name"] in by_name]


@dataclass
class _Settings:
    confidence: float
    alpha: float
    min_share: float
    notes: list[str] = field(default_factory=list)
    judged: bool = True
    paired: bool = False
    robust: bool = False


def _compare_figure(
    base: Change, xs: Sequence[float], ys: Sequence[float], settings: _Settings
) -> Change:
    """Tests two series of positive figures, or shows them when a side has one."""
    if len(xs) < 2 or len(ys) < 2:
        settings.judged = False
        return _replace(base, note="a single run on a side: significance not judged")
    if min(min(xs), min(ys)) <= 0:
        return _replace(base, note="a figure of zero: no ratio to test")
    return _tested(base, xs, ys, settings.confidence, settings.alpha)


def _timing(da: Mapping[str, Any], db: Mapping[str, Any], settings: _Settings) -> list[Change]:
    pairs = _pair_series(da["series"], db["series"])
    if not pairs:
        raise ResultFormatError("the two timings share no statement name")
    changes = []
    for sa, sb in pairs:
        # The unit of replication is the process: its batches share its memory layout,
        # hash seeds and the load of the moment, and say nothing of another process.
        samples_a, samples_b = _samples(sa), _samples(sb)
        xs, ys = _process_medians(sa, samples_a), _process_medians(sb, samples_b)
        a, b = _timing_figures(samples_a, xs), _timing_figures(samples_b, ys)
        base = Change(
            "timing", sb["name"], None, None, "time", a, b, _ratio_change(a["median"], b["median"])
        )
        if len(xs) < 2 or len(ys) < 2:
            settings.judged = False
            changes.append(_replace(base, note=ONE_PROCESS))
        else:
            changes.append(_compare_figure(base, xs, ys, settings))
    return _family(changes, settings.alpha)


# Its batches do not measure how two processes differ.
ONE_PROCESS = "one process on a side: not judged (time --processes N)"


def _process_medians(series: Mapping[str, Any], samples: Sequence[float]) -> list[float]:
    """The median seconds per execution of each process of a series, in order.

    :param series: the series (its ``processes``, if any)
    :param samples: its seconds per execution, batch by batch
    """
    medians, start = [], 0
    for count in series.get("processes", [len(samples)]):
        medians.append(_median(samples[start : start + count]))
        start += count
    return medians


def _timing_figures(samples: Sequence[float], per_process: Sequence[float]) -> dict[str, float]:
    """A side's figures: the median over its processes, the mean over its batches, its
    batches and processes."""
    return {
        "median": _median(per_process),
        "mean": _mean(samples),
        "n": float(len(samples)),
        "processes": float(len(per_process)),
    }


def _median(xs: Sequence[float]) -> float:
    if len(xs) == 1:
        return float(xs[0])
    s = sorted(xs)
    n = len(s)
    return 0.0 if not n else (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)


def _memory(da: Mapping[str, Any], db: Mapping[str, Any], settings: _Settings) -> list[Change]:
    changes = []
    for name, runs_a in da["channels"].items():
        runs_b = db["channels"].get(name)
        if runs_b is None:
            continue
        xs = [float(r["peak"]) for r in runs_a]
        ys = [float(r["peak"]) for r in runs_b]
        a = {"peak": _mean(xs), "begin": _mean([r["begin"] for r in runs_a]), "n": float(len(xs))}
        b = {"peak": _mean(ys), "begin": _mean([r["begin"] for r in runs_b]), "n": float(len(ys))}
        base = Change("memory", name, None, None, "peak", a, b, _ratio_change(a["peak"], b["peak"]))
        changes.append(_compare_figure(base, xs, ys, settings))
    if not changes:
        raise ResultFormatError("the two memory results share no channel")
    return _family(changes, settings.alpha)


def match_keys(functions: Sequence[Sequence[Any]], main: str | None) -> list[tuple[str, str, int]]:
    """The key matching a function across two profiles: its file (``<main>`` for the
    program's script, so that ``old.py`` and ``new.py`` match), its name and its rank
    among the functions of that name in that file by line; not its line, which moves
    whenever the code above it changes.

    :param functions: ``[file, line, name]`` of one profile
    :param main: the program's script, None when unknown
    :return: one key per function, in order
    """
    # Sorted as tuples (file, name, line, index), compared in C: no key function.
    files = list(map(operator.itemgetter(0), functions))
    names = list(map(operator.itemgetter(2), functions))
    lines = map(operator.itemgetter(1), functions)
    order = sorted(zip(files, names, lines, range(len(functions)), strict=True))
    keys: list[tuple[str, str, int]] = [("", "", 0)] * len(functions)
    seen: dict[tuple[str, str], int] = {}
    for file, name, _, i in order:
        file = "<main>" if main is not None and file == main else file
        rank = seen.get((file, name), 0)
        seen[(file, name)] = rank + 1
        keys[i] = (file, name, rank)
    return keys


class _Side:
    """One profile's figures per function, computed in bulk (:mod:`.columns`): medians
    over the runs for every function, rows over the runs for those tested."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        table = Columns(data)
        self.table = table
        self.n = table.runs
        self.functions: list[tuple[str, int, str]] = list(map(tuple, table.functions))
        self.keys = match_keys(self.functions, data.get("main"))
        self.index = dict(zip(self.keys, range(len(self.keys)), strict=True))
        self.walls = table.walls
        self.shares = table.shares()
        # Medians (as the Hodges-Lehmann estimate, robust to a run the machine slowed).
        n, per_second = self.n, table.per_second
        self.medians = {
            "share": medians(self.shares, n),
            "time": medians(table.own, n, per_second),
            "cumulative": medians(table.cumulative, n, per_second),
            "calls": medians(table.calls, n, constant=True),
        }
        if table.memory is not None:
            self.medians["memory"] = medians(table.memory, n)
        # One dictionary of figures per function, built in C (map, zip) for 20,000.
        names = itertools.repeat(tuple(self.medians))
        self.rows = list(map(dict, map(zip, names, zip(*self.medians.values(), strict=True))))

    @functools.cached_property
    def keys_at(self) -> dict[tuple[str, int, str], list[tuple[str, str, int]]]:
        """The keys of the functions at each ``(file, line, name)``: what the designs
        that re-test a change read back (only for the tested few)."""
        keys_at: dict[tuple[str, int, str], list[tuple[str, str, int]]] = {}
        for f, k in zip(self.functions, self.keys, strict=True):
            keys_at.setdefault(f, []).append(k)
        return keys_at

    def where(self, key: tuple[str, str, int]) -> tuple[str, int, str] | None:
        """``(file, line, name)`` of the function of that key, None if absent."""
        i = self.index.get(key)
        return None if i is None else self.functions[i]

    def figures(self, key: tuple[str, str, int]) -> dict[str, float] | None:
        """Medians of the function's figures over the runs, None if absent (the
        function's own dictionary: asked once per function)."""
        i = self.index.get(key)
        return None if i is None else self.rows[i]

    def shares_of(self, key: tuple[str, str, int]) -> Sequence[float]:
        """The function's share of each run (a present function)."""
        return self.table.row(self.shares, self.index[key])

    def own_of(self, key: tuple[str, str, int]) -> Sequence[float]:
        """The function's own time in each run (a present function), in the unit of the
        file (ratios and logs of ratios do not depend on it)."""
        return self.table.row(self.table.own, self.index[key])


_ABSENT = {"share": 0.0, "time": 0.0, "cumulative": 0.0, "calls": 0.0}


def _function_change(
    key: tuple[str, str, int], sa: _Side, sb: _Side, settings: _Settings
) -> Change:
    a, b = sa.figures(key), sb.figures(key)
    file, line, name = sb.where(key) or sa.where(key) or ("", 0, "")
    a, b = a or dict(_ABSENT), b or dict(_ABSENT)
    change = _ratio_change(a["share"], b["share"])
    note = _untested_why(key, a, b, sa, sb, settings)
    if note:  # built once: 20,000 of them in a large profile
        return Change("profile", name, file, line, "share", a, b, change, note=note)
    base = Change("profile", name, file, line, "share", a, b, change)
    xs, ys = sa.shares_of(key), sb.shares_of(key)
    return _tested(base, xs, ys, settings.confidence, settings.alpha)


def _untested_why(
    key: tuple[str, str, int],
    a: dict[str, float],
    b: dict[str, float],
    sa: _Side,
    sb: _Side,
    settings: _Settings,
) -> str:
    """Why a function is shown and not tested, empty when it is tested."""
    if key not in sa.index or key not in sb.index:
        return "only in B" if key not in sa.index else "only in A"
    if max(a["share"], b["share"]) < settings.min_share:
        return f"below the {settings.min_share:.1%} share tested"
    if min(sa.own_of(key)) <= 0 or min(sb.own_of(key)) <= 0:
        return "no time measured in some runs"
    if not settings.judged:
        return "a single run on a side: significance not judged"
    return ""


def _profile(da: Mapping[str, Any], db: Mapping[str, Any], settings: _Settings) -> list[Change]:
    timers = (da.get("timer", "wall"), db.get("timer", "wall"))
    if timers[0] != timers[1]:
        raise ResultFormatError(
            f"A was profiled with the {timers[0]} clock, B with the {timers[1]} clock: "
            "their times are not comparable"
        )
    sa, sb = _Side(da), _Side(db)
    if sa.n < 2 or sb.n < 2:
        settings.judged = False
    wall = Change(
        "profile", "wall time", None, None, "wall",
        {"wall": _mean(sa.walls), "n": float(sa.n)},
        {"wall": _mean(sb.walls), "n": float(sb.n)},
        _ratio_change(_mean(sa.walls), _mean(sb.walls)),
    )  # fmt: skip
    changes = _family([_compare_figure(wall, sa.walls, sb.walls, settings)], settings.alpha)
    keys = list(sa.keys) + [k for k in sb.keys if k not in sa.index]
    functions = [_function_change(k, sa, sb, settings) for k in keys]
    paired = settings.paired and settings.judged and sa.n == sb.n
    if settings.paired and not paired and settings.judged:
        settings.notes.append(f"not paired: {sa.n} runs in A, {sb.n} in B")
    if paired:
        functions = _paired_functions(functions, sa, sb, settings)
    elif settings.robust and settings.judged:
        functions = _robust_functions(functions, sa, sb, settings)
    functions = _family(
        functions, settings.alpha, weights=precision_weights(keys, functions, sa, sb)
    )
    tested = sum(c.tested for c in functions)
    if settings.judged:
        how = (
            "paired runs (A and B run one after the other): each function's log ratio B / A "
            "per pair, less the pair's share-weighted median over the functions tested, by "
            "Wilcoxon's signed-rank test"
            if paired
            else "each function's own time divided by its run's common factor (the "
            "share-weighted median over the functions tested of their time relative to "
            "their median), by Mann-Whitney"
            if settings.robust
            else "each function's share of its run, by Mann-Whitney"
        )
        settings.notes.append(
            f"{tested} of {len(functions)} functions tested (share >= {settings.min_share:.1%}"
            f", time in every run): {how}; Holm-corrected at alpha {settings.alpha:g}, each "
            "function weighted by its share over the variance of its log share (A and B "
            "pooled)"
        )
    return changes + functions


def _paired_functions(
    functions: list[Change], sa: _Side, sb: _Side, settings: _Settings
) -> list[Change]:
    """Re-tests the tested functions pair by pair: in pair ``r`` the log ratio of each
    function's own time, ``log(B_r / A_r)``, less the pair's common factor, the median of
    those ratios over the functions weighted by share. The common factor (the machine's
    speed during the pair) is estimated from all the functions, so one function made
    slower barely moves it: the others stay centred on 0, where shares would all shift
    down by the slowed function's gain; and a drift of the machine between pairs cancels
    within each pair."""
    tested = [i for i, c in enumerate(functions) if c.tested]
    if not tested:
        return functions
    logs = []
    for i in tested:
        key = _key_of(functions[i], sa, sb)
        xa, xb = sa.own_of(key), sb.own_of(key)
        logs.append([math.log(b / a) for a, b in zip(xa, xb, strict=True)])
    weights = [(functions[i].a["share"] + functions[i].b["share"]) / 2 or 1e-12 for i in tested]
    common = [weighted_median([row[r] for row in logs], weights) for r in range(sa.n)]
    for i, row in zip(tested, logs, strict=True):
        d = [x - c for x, c in zip(row, common, strict=True)]
        change, low, high, p = signed_rank_test(d, settings.confidence)
        functions[i] = _replace(
            functions[i], change=change, ci_low=low, ci_high=high, p_value=p, figure="time"
        )
    return functions


def _robust_functions(
    functions: list[Change], sa: _Side, sb: _Side, settings: _Settings
) -> list[Change]:
    """Re-tests the tested functions on their own time divided by their run's *common
    factor*: the share-weighted median, over the functions tested, of ``log(own /
    the function's median own time over all runs)``. It cancels the machine's speed of
    the run, as the share does, but one function made slower does not move it, so the
    other functions stay centred where their shares would all fall by its gain; the test
    stays Mann-Whitney on all the runs of both sides (its power at 20 a side)."""
    tested = [i for i, c in enumerate(functions) if c.tested]
    if not tested:
        return functions
    rows = []
    for i in tested:
        key = _key_of(functions[i], sa, sb)
        la = [math.log(x) for x in sa.own_of(key)]
        lb = [math.log(x) for x in sb.own_of(key)]
        ref = _median(la + lb)
        rows.append(([x - ref for x in la], [x - ref for x in lb]))
    weights = [(functions[i].a["share"] + functions[i].b["share"]) / 2 or 1e-12 for i in tested]
    common_a = [weighted_median([r[0][j] for r in rows], weights) for j in range(sa.n)]
    common_b = [weighted_median([r[1][j] for r in rows], weights) for j in range(sb.n)]
    for i, (la, lb) in zip(tested, rows, strict=True):
        xs = [math.exp(x - c) for x, c in zip(la, common_a, strict=True)]
        ys = [math.exp(x - c) for x, c in zip(lb, common_b, strict=True)]
        change, low, high, p = small_sample_test(xs, ys, settings.confidence)
        functions[i] = _replace(
            functions[i], change=change, ci_low=low, ci_high=high, p_value=p, figure="time"
        )
    return functions


def _key_of(c: Change, sa: _Side, sb: _Side) -> tuple[str, str, int]:
    """The matching key of a tested function (present on both sides)."""
    for side in (sb, sa):
        for key in side.keys_at.get((c.file or "", c.line or 0, c.function), ()):
            if key in sa.index and key in sb.index:
                return key
    raise ResultFormatError(f"function {c.function!r} lost between A and B")


# Below this memory growth a function's figure is the allocator's (pymalloc takes arenas
# of 1 MiB from the system), not what the function allocated: shown, not tested.
MIN_GROWTH = float(2**20)


def _has_cpu(data: Mapping[str, Any]) -> bool:
    """Whether every run of a ``run`` result has the sampler's CPU time per function."""
    return all("own_cpu" in r and math.fsum(r["own_cpu"]) > 0 for r in data["runs"])


class _RunSide:
    """One ``run`` result's figures per function: columns over the runs; ``cpu``: the
    own time is the sampler's CPU time (else its wall time)."""

    def __init__(self, data: Mapping[str, Any], cpu: bool = False) -> None:
        runs = data["runs"]
        own_key = "own_cpu" if cpu else "own"
        self.n = len(runs)
        self.functions = [(f[0], f[1], f[2]) for f in data["functions"]]
        self.keys = match_keys(self.functions, data.get("main"))
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.walls = [float(r["wall"]) for r in runs]
        self.peaks = [float(r["peak"]) for r in runs]
        self.failed = sum(1 for r in runs if r.get("exit", 0) != 0)
        totals = [math.fsum(r[own_key]) for r in runs]
        self.totals = [t if t > 0 else 1.0 for t in totals]
        self.own = list(zip(*(r[own_key] for r in runs), strict=True))
        self.cumulative = list(zip(*(r["cumulative"] for r in runs), strict=True))
        self.growth = list(zip(*(r["growth"] for r in runs), strict=True))
        # The program's rise: a function's growth is its share of it.
        rise = _median([float(r["peak"]) - float(r["start"]) for r in runs])
        self.rise = rise if rise > 0 else 1.0

    def where(self, key: tuple[str, str, int]) -> tuple[str, int, str] | None:
        """``(file, line, name)`` of the function of that key, None if absent."""
        i = self.index.get(key)
        return None if i is None else self.functions[i]

    def time_figures(self, key: tuple[str, str, int]) -> tuple[dict[str, float], list[float]]:
        """The function's median share of the run's own time, its median own and
        cumulative seconds, and its share in each run."""
        i = self.index.get(key)
        if i is None:
            return {"share": 0.0, "time": 0.0, "cumulative": 0.0}, []
        shares = [x / t for x, t in zip(self.own[i], self.totals, strict=True)]
        figures = {
            "share": _median(shares),
            "time": _median(self.own[i]),
            "cumulative": _median(self.cumulative[i]),
        }
        return figures, shares

    def growth_figures(self, key: tuple[str, str, int]) -> tuple[dict[str, float], list[float]]:
        """The function's median growth while it ran (bytes) and its share of the
        program's rise (peak - start), and its growth in each run."""
        i = self.index.get(key)
        if i is None:
            return {"growth": 0.0, "growth_share": 0.0}, []
        growth = [float(x) for x in self.growth[i]]
        median = _median(growth)
        return {"growth": median, "growth_share": max(median, 0.0) / self.rise}, growth


def _run_untested(
    base: Change, xs: Sequence[float], ys: Sequence[float], small: bool, settings: _Settings
) -> Change | None:
    """Why a function's figure is not tested, as the entry to show; None to test it."""
    if not xs or not ys:
        return _replace(base, note="only in B" if not xs else "only in A")
    if small:
        return _replace(base, note="too small to test")
    if min(xs) <= 0 or min(ys) <= 0:
        return _replace(base, note="not above zero in every run")
    if not settings.judged:
        return _replace(base, note="a single run on a side: significance not judged")
    return None


def _run_function(
    key: tuple[str, str, int], sa: _RunSide, sb: _RunSide, settings: _Settings
) -> tuple[Change, Change]:
    """A function's time entry (its share of the run's own time, as a profile's) and its
    memory entry (its growth while it ran, callees included: the ticks see an allocation
    after it, often in the code the function calls next), each tested where both sides
    measured enough of it."""
    file, line, name = sb.where(key) or sa.where(key) or ("", 0, "")
    a, xs = sa.time_figures(key)
    b, ys = sb.time_figures(key)
    base = Change("run", name, file, line, "share", a, b, _ratio_change(a["share"], b["share"]))
    small = max(a["share"], b["share"]) < settings.min_share
    time = _run_untested(base, xs, ys, small, settings)
    time = time or _tested(base, xs, ys, settings.confidence, settings.alpha)
    ga, gx = sa.growth_figures(key)
    gb, gy = sb.growth_figures(key)
    base = Change(
        "run", name, file, line, "growth", ga, gb, _ratio_change(ga["growth"], gb["growth"])
    )
    small = max(ga["growth"], gb["growth"]) < MIN_GROWTH or (
        max(ga["growth_share"], gb["growth_share"]) < settings.min_share
    )
    memory = _run_untested(base, gx, gy, small, settings)
    memory = memory or _tested(base, gx, gy, settings.confidence, settings.alpha)
    return time, memory


def _joint_family(families: Sequence[tuple[list[Change], str | None]], alpha: float) -> None:
    """Holm's correction of several families as one, in place: within a family each test
    weighs the mean of A's and B's figure ``weight`` (equal weights when None), each
    family's weights scaled to add up to 1, so that every family starts at an equal part
    of ``alpha`` and the chance of any false alarm in all of them stays at most
    ``alpha``."""
    where: list[tuple[list[Change], int]] = []
    weights: list[float] = []
    for changes, weight in families:
        tested = [i for i, c in enumerate(changes) if c.tested and c.p_value is not None]
        raw = [
            1.0 if weight is None else (changes[i].a[weight] + changes[i].b[weight]) / 2 or 1e-12
            for i in tested
        ]
        total = math.fsum(raw) or 1.0
        where.extend((changes, i) for i in tested)
        weights.extend(w / total for w in raw)
    adjusted = holm([changes[i].p_value or 0.0 for changes, i in where], weights)
    for (changes, i), p in zip(where, adjusted, strict=True):
        changes[i] = _replace(changes[i], p_adjusted=p, significant=p < alpha)


def _run(da: Mapping[str, Any], db: Mapping[str, Any], settings: _Settings) -> list[Change]:
    """The ``run`` results: the run's wall time and peak, each function's share of the
    sampled own time and its memory growth, in one Holm-corrected family of three equal
    parts (see :func:`_joint_family`), the functions weighted by their share of the time
    and of the program's rise."""
    cpu = _has_cpu(da) and _has_cpu(db)
    sa, sb = _RunSide(da, cpu), _RunSide(db, cpu)
    overall = []
    for what, figure, xs, ys in (
        ("wall time", "wall", sa.walls, sb.walls),
        ("peak memory", "peak", sa.peaks, sb.peaks),
    ):
        a, b = (
            {figure: _median(xs), "n": float(len(xs))},
            {figure: _median(ys), "n": float(len(ys))},
        )
        base = Change("run", what, None, None, figure, a, b, _ratio_change(a[figure], b[figure]))
        overall.append(_compare_figure(base, xs, ys, settings))
    keys = list(sa.keys) + [k for k in sb.keys if k not in sa.index]
    pairs = [_run_function(k, sa, sb, settings) for k in keys]
    times, growths = [p[0] for p in pairs], [p[1] for p in pairs]
    _joint_family([(overall, None), (times, "share"), (growths, "growth_share")], settings.alpha)
    for side, runs in (("A", sa), ("B", sb)):
        if runs.failed:
            settings.notes.append(f"{side}: {runs.failed} of {runs.n} runs did not exit with 0")
    if settings.judged:
        settings.notes.append(
            f"{sum(c.tested for c in times)} of {len(times)} functions tested on their share "
            f"of the sampled own {'CPU' if cpu else 'wall'} time (share >= "
            f"{settings.min_share:.1%}, time in every run), "
            f"{sum(c.tested for c in growths)} on their memory growth while they ran, callees "
            f"included (>= {MIN_GROWTH / 2**20:g} MiB and >= {settings.min_share:.1%} of the "
            "program's rise, above zero in every run), by Mann-Whitney; Holm-corrected at alpha "
            f"{settings.alpha:g} over all of them, the run's wall time and peak, the time "
            "shares and the memory growths each a third of the weight, each function "
            "weighted by its share of the time or of the rise"
        )
    return overall + times + growths


_SECTIONS = {"timing": _timing, "memory": _memory, "profile": _profile, "run": _run}
# The parts a report may hold (a run result is a kind of its own, never a part).
_REPORT_PARTS = ("timing", "memory", "profile")


def _runs(kind: str, data: Mapping[str, Any]) -> int:
    if kind == "timing":  # its runs are the processes that timed it
        return min(len(s.get("processes", [0])) for s in data["series"])
    if kind == "memory":
        return min(len(runs) for runs in data["channels"].values())
    if kind == "profile":
        return run_count(data)
    if kind == "run":
        return len(data["runs"])
    return min(_runs(k, data[k]) for k in _REPORT_PARTS if k in data)


def compare_results(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    names: tuple[str, str] = ("A", "B"),
    alpha: float = 0.05,
    confidence: float = 0.95,
    min_share: float = MIN_SHARE,
    paired: bool = False,
    robust: bool = False,
) -> ResultComparison:
    """Compares two results (loaded with ``load_result`` or built with ``make_result``).

    :param a: the baseline
    :param b: the new result
    :param names: what to call them in messages (their files)
    :param alpha: significance level, after Holm's correction
    :param confidence: level of the intervals
    :param min_share: functions below this share of the run (of its rise, for a ``run``
        result's memory growth) on both sides are not tested
    :param paired: run ``i`` of A and run ``i`` of B ran one after the other (``compare
        --a/--b`` interleaves them): profiles are then tested pair by pair (see
        :func:`_paired_functions`); ignored when the sides hold different numbers of runs
    :param robust: test each function's own time over its run's common factor (see
        :func:`_robust_functions`) rather than its share
    :return: the comparison
    :raises ResultFormatError: the results are of different kinds or share nothing
    """
    check_number("alpha", alpha, above=0, maximum=0.5)
    check_number("confidence", confidence, above=0, maximum=0.9999)
    check_number("min_share", min_share, minimum=0, maximum=1)
    if a["kind"] != b["kind"]:
        raise ResultFormatError(
            f"cannot compare {names[0]!r}, a {a['kind']} result, with {names[1]!r}, a "
            f"{b['kind']} result: give two results of the same kind"
        )
    kind = a["kind"]
    check_bool("paired", paired)
    check_bool("robust", robust)
    settings = _Settings(confidence, alpha, min_share, paired=paired, robust=robust)
    sections = (
        [k for k in _REPORT_PARTS if k in a["data"] and k in b["data"]]
        if kind == "report"
        else [kind]
    )
    if not sections:
        raise ResultFormatError(f"the reports {names[0]!r} and {names[1]!r} share no part")
    da = {kind: a["data"]} if kind != "report" else a["data"]
    db = {kind: b["data"]} if kind != "report" else b["data"]
    changes: list[Change] = []
    with gc_paused():  # a change and its figures per function: 20,000 that all survive
        for section in sections:
            changes.extend(_SECTIONS[section](da[section], db[section], settings))
    runs = (_runs(kind, a["data"]), _runs(kind, b["data"]))
    _add_run_notes(settings, runs, kind)
    return ResultComparison(
        kind, names, tuple(changes), settings.judged, tuple(settings.notes), alpha, confidence, runs
    )


def _add_run_notes(settings: _Settings, runs: tuple[int, int], kind: str) -> None:
    what, one, how = (
        ("processes", "process", "time --processes N times in N processes")
        if kind == "timing"
        else ("runs", "run", "compare --a/--b runs each side --repeat times")
    )
    if not settings.judged:
        settings.notes.insert(
            0,
            f"{what}: {runs[0]} in A, {runs[1]} in B: with a single {one} on a side, "
            f"significance cannot be judged ({how})",
        )
    elif min(runs) < FEW_RUNS:
        settings.notes.insert(
            0, f"{what}: {runs[0]} in A, {runs[1]} in B: below {FEW_RUNS} a side the tests are weak"
        )
