"""The comparison of two saved results (A the baseline, B the new one), and its verdict.

* timings: each statement's seconds per execution over the processes that timed it
  (their median batches) with two or more a side, else over its batches as *weaker
  evidence*, never passed in silence (:mod:`.decide`);
* memory: each channel's peak over the runs;
* profiles and ``run`` results: times per function and call path against a run-wide
  factor, and where each change starts (:mod:`.diff`);
* reports: each part they share.

A positive ``change`` is always "B is worse". The verdict
(:meth:`ResultComparison.verdict`) at a threshold: 1 for a significant regression beyond
it (a function and its paths one finding); 3 undecided (a headline figure whose interval
reaches beyond it, or a function or path significant alone but not once corrected,
:func:`_suggestive`); 0 otherwise. Two pytest sessions are compared after the machine's
shift between them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import ResultFormatError
from .._gc import gc_paused
from .._stats.multiple import holm, median
from .._validate import check_number
from . import counted
from .change import EXPLAINED, INCLUSIVE, OWN, PATH, WORSE, Change, Settings
from .counted import counter_of
from .decide import (
    REGRESSED,
    UNDECIDED,
    Shift,
    gate,
    machine_shift,
    per_execution,
    reference_ratio,
)
from .diff import MIN_CHANGE, MIN_SHARE, headline_change, profile_changes
from .tables import side_table

CORRECTION = "holm"
# Below this many runs a side, the tests are weak (and a rank test cannot reach small
# p-values).
FEW_RUNS = 5
EXIT_PASS, EXIT_REGRESSED, EXIT_UNDECIDED = 0, 1, 3
# A function or path above the threshold, significant alone, whose corrected p-value is
# under this keeps the gate undecided: measured on seeded profiles, identical programs
# are then undecided in 2 to 4 of 40 comparisons (20 runs a side), a 20-caller program
# whose f07 → spin is 40 % slower on 5 samples a run named or undecided in 22 of 40.
SUGGESTIVE = 0.5
ONE_PROCESS = "one process on a side: its batches judged, weaker evidence (time --processes N)"


@dataclass(frozen=True)
class Verdict:
    """What the comparison says about a threshold, first line of every rendering.

    :param state: ``regressed``, ``undecided``, ``improved`` or ``unchanged``
    :param exit_code: 1, 3 or 0
    :param text: one line
    :param regressions: the significant changes for the worse beyond it, one per
        function (where its change starts, else its own time) and headline
    :param runs_needed: runs a side that would decide the first, None when unknown
    """

    state: str
    exit_code: int
    text: str
    regressions: tuple[Change, ...] = ()
    runs_needed: int | None = None


def label(c: Change) -> str:
    """How a change is named in one line: ``f07 → spin``, ``spin (prog.py:3)``,
    ``wall time``, ``memory: build (prog.py:10)``.

    :param c: the change
    """
    from .keys import display_name

    if c.file is None:
        if c.section == "memory":  # a channel's peak: the process's (cpu) or a device's
            return "peak memory" if c.function == "cpu" else f"peak memory: {c.function}"
        return c.function
    if c.figure == "path":
        if c.shown:
            return " → ".join(c.shown)
        shown = c.path[-c.chain :] if c.chain else c.path
        return ("… → " if len(shown) < len(c.path) else "") + " → ".join(shown)
    name = display_name(c.file, c.line or 0, c.function)
    prefix = {"growth": "memory: ", "allocs": "allocations: ", "bytes": "bytes: "}.get(c.figure, "")
    return prefix + name


@dataclass(frozen=True)
class ResultComparison:
    """The comparison of two results.

    :param kind: the results' kind
    :param names: what to call A and B (their files)
    :param changes: every compared figure
    :param judged: False when a headline figure had a single value on a side
    :param notes: what the reader must know
    :param alpha: the significance level of the corrected tests
    :param confidence: the level of the intervals
    :param runs: runs (processes for a timing) on each side
    :param correction: the correction of the family (``holm``)
    :param factor: how much B's whole run moved, None when not estimated
    :param min_change: the change deemed negligible for a profile's figures
    :param warnings: differences between the two environments
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
    factor: float | None = None
    min_change: float = MIN_CHANGE
    warnings: tuple[str, ...] = ()

    def ordered(self) -> list[Change]:
        """Headlines first, then the listed changes, then significant, then tested ones,
        each by impact."""
        return list(self._order)

    @functools.cached_property
    def _order(self) -> tuple[Change, ...]:
        keyed = [
            (c.file is not None, not c.verdict, not c.significant, not c.tested, -c.impact, i)
            for i, c in enumerate(self.changes)
        ]
        keyed.sort()
        return tuple(self.changes[k[-1]] for k in keyed)

    def headlines(self) -> list[Change]:
        """The figures of the whole: the run's time and peak, the statements, the
        channels."""
        return [c for c in self.ordered() if c.file is None]

    def regressions(self, above: float) -> list[Change]:
        """Significant changes for the worse beyond ``above``: the headline figures and
        the changes listed as worse, never a caller the change only runs through.

        :param above: the threshold, a fraction (0.05 for 5 %)
        """
        check_number("above", above, minimum=0)
        return [c for c in self._worse(above) if not _one_run(c)]

    def _worse(self, above: float) -> list[Change]:
        return [
            c
            for c in self.ordered()
            if c.verdict == WORSE and c.significant and c.change is not None and c.change > above
        ]

    def verdict(self, above: float) -> Verdict:
        """The gate's answer at a threshold (see the module's description).

        :param above: the threshold, a fraction
        """
        found = self.regressions(above)
        if found:
            findings = _one_per_function(found)
            # Where a change starts first (it names the code), then the whole run's figures.
            named = sorted(findings, key=lambda c: (c.file is None, -c.impact))
            listed = "; ".join(
                f"{label(c)} {format_change(c)}" + (" (weaker evidence)" if c.weaker else "")
                for c in named[:3]
            )
            more = f"; {len(findings) - 3} more" if len(findings) > 3 else ""
            return Verdict(
                REGRESSED, EXIT_REGRESSED,
                f"B is worse: {len(findings)} significant regression(s) above "
                f"{_threshold(above)}: {listed}{more}",
                tuple(named),
            )  # fmt: skip
        one_run = [c for c in self._worse(above) if _one_run(c)]
        if one_run:  # a single run's counts: the spread between runs is not known
            c = one_run[0]
            return Verdict(
                UNDECIDED, EXIT_UNDECIDED,
                f"undecided: {label(c)} {format_change(c)} is above {_threshold(above)} in a "
                f"single run a side, which cannot tell it from the spread between runs "
                f"(profile --repeat 5 --save, or compare --a/--b)",
            )  # fmt: skip
        undecided = self._undecided(above)
        if undecided:
            c, runs, why = undecided[0]
            more = f"; about {runs} runs a side would decide it" if runs else ""
            return Verdict(
                UNDECIDED, EXIT_UNDECIDED,
                f"undecided: {label(c)} {format_change(c)} may be above {_threshold(above)}: the "
                f"evidence cannot decide it ({why}){more}",
                runs_needed=runs,
            )  # fmt: skip
        return Verdict("unchanged", EXIT_PASS, self._pass_text(above))

    def _undecided(self, above: float) -> list[tuple[Change, int | None, str]]:
        """The figures the evidence cannot decide at the threshold: a headline figure
        whose interval (untested, estimate) reaches above it, and :func:`_suggestive`
        ones."""
        out = []
        for c in self.headlines():
            state, runs = gate(_decision_of(c), above, self.alpha)
            if state == UNDECIDED:
                why = c.note or (
                    "its interval reaches above the threshold"
                    if c.change is not None and c.change <= above
                    else "not significant"
                )
                out.append((c, runs, why))
        # A path first: it names the caller (f07 → spin).
        for c in sorted(self.ordered(), key=lambda c: c.figure != PATH):
            if c.file is not None and _suggestive(c, above, self.alpha):
                out.append((c, None, f"p = {c.p_value:.2g} alone, {c.p_adjusted:.2g} once "
                           "corrected for the figures compared"))  # fmt: skip
        return out

    def _pass_text(self, above: float) -> str:
        better = _one_per_function([c for c in self.ordered() if c.verdict == "better"])
        worse = _one_per_function([c for c in self.ordered() if c.verdict == WORSE])
        heads = "; ".join(f"{label(c)} {format_change(c)}" for c in self.headlines()[:2])
        text = f"no significant regression above {_threshold(above)}"
        text += f" ({heads})" if heads else ""
        if worse:
            text += f"; {len(worse)} significantly worse below it"
        if better:
            text += f"; {len(better)} better"
        return text

    def to_dict(self) -> dict[str, Any]:
        """The settings and the notes, JSON-ready (the renderer encodes the entries one by
        one)."""
        return {
            "kind": self.kind,
            "a": self.names[0],
            "b": self.names[1],
            "judged": self.judged,
            "runs": list(self.runs),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "correction": self.correction,
            "factor": self.factor,
            "min_change": self.min_change,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def _threshold(above: float) -> str:
    return f"{above * 100:g} %"


def _suggestive(c: Change, above: float, alpha: float) -> bool:
    """Whether a function's or path's figure is above the threshold with evidence that
    does not decide it: tested, significant on its own (p < ``alpha``) but not once
    corrected for the family, its corrected p-value under :data:`SUGGESTIVE` (a change
    where a change only runs through is not one). Among 1,900 figures of a large profile
    some are significant on their own by chance; their corrected p-value is 1."""
    return (
        c.tested
        and not c.note  # not a figure shown with the test of another it is the same as
        and not c.significant
        and c.role != EXPLAINED
        and c.figure in (OWN, INCLUSIVE, PATH)
        and c.change is not None
        and c.change > above
        and c.p_value is not None
        and c.p_value < alpha
        and c.p_adjusted is not None
        and c.p_adjusted < SUGGESTIVE
    )


def _one_per_function(changes: Sequence[Change]) -> list[Change]:
    """One finding per function: its own time, its inclusive time and the paths ending
    at it are one regression (``b`` and ``main → b``), shown by the first (a path where
    a change starts before the function's own time: it names the caller)."""
    seen: dict[Any, Change] = {}
    for c in sorted(changes, key=lambda c: (c.figure != PATH, c.figure != OWN)):
        key = (c.file, c.line, c.function) if c.file is not None else (c.function, c.figure)
        seen.setdefault(key, c)
    kept = {id(c) for c in seen.values()}
    return [c for c in changes if id(c) in kept]


def format_change(c: Change) -> str:
    """``+12.3 % ± 2.1`` for an interval symmetric about the change, ``+12.3 % [+4.0,
    +21.9]`` otherwise, ``+12.3 %`` untested, ``new`` for a figure only in B.

    :param c: the change
    """
    if c.change is None:
        return "new" if c.note == "only in B" else "n/a"
    text = f"{c.change * 100:+.1f} %"
    if c.tested and c.ci_low is not None and c.ci_high is not None:
        below, above = f"{(c.change - c.ci_low) * 100:.1f}", f"{(c.ci_high - c.change) * 100:.1f}"
        if below == above:
            text += f" ± {below}"
        else:
            text += f" [{c.ci_low * 100:+.1f}, {c.ci_high * 100:+.1f}]"
    return text


def _one_run(c: Change) -> bool:
    """A function's or path's change on a single run a side never decides a regression:
    two runs differ more than their counts say (+89 % on a function of one script)."""
    return c.weaker and c.file is not None


def _decision_of(c: Change) -> Any:
    from .decide import Decision

    return Decision(
        c.change, c.ci_low, c.ci_high, c.p_value, c.significant, c.tested, c.weaker,
        note=c.note, log_variance=c.a.get("log_variance"),
    )  # fmt: skip


def _pair_series(sa: list[dict[str, Any]], sb: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Series of the same name, or the only one of each side."""
    if len(sa) == 1 and len(sb) == 1:
        return [(sa[0], sb[0])]
    by_name = {s["name"]: s for s in sb}
    return [(s, by_name[s["name"]]) for s in sa if s["name"] in by_name]


def process_medians(series: Mapping[str, Any], samples: Sequence[float]) -> list[float]:
    """The median seconds per execution of each process of a series, in order.

    :param series: the series (its ``processes``, if any)
    :param samples: its seconds per execution, batch by batch
    """
    out, start = [], 0
    for count in series.get("processes", [len(samples)]):
        out.append(median(samples[start : start + count]))
        start += count
    return out


def _series_clock(series: Mapping[str, Any]) -> str:
    """A series' ``clock`` (the pytest plugin's), or its summary's (``time --clock``),
    ``wall`` when neither says."""
    summary = series.get("summary")
    clock = series.get("clock") or (summary.get("clock") if isinstance(summary, Mapping) else None)
    return "cpu" if clock == "cpu" else "wall"


def timing_change(
    sa: Mapping[str, Any], sb: Mapping[str, Any], settings: Settings, shift: Shift | None = None
) -> Change:
    """One statement's change: over its processes, or with a single process a side its
    batches (weaker evidence).

    :param sa: A's series
    :param sb: B's series
    :param settings: the settings
    :param shift: the machine's shift between the sessions, taken out of B's times
    """
    if counter_of(sa) or counter_of(sb):
        return counted.timing_change(sa, sb, settings)
    clocks = (_series_clock(sa), _series_clock(sb))
    if clocks[0] != clocks[1]:
        raise ResultFormatError(
            f"{sb['name']!r} was timed with the {clocks[0]} clock in A and the {clocks[1]} "
            "clock in B: not comparable"
        )
    samples_a, samples_b = per_execution(sa), per_execution(sb)
    xs, ys = process_medians(sa, samples_a), process_medians(sb, samples_b)
    weaker = len(xs) < 2 or len(ys) < 2
    if weaker:
        xs, ys = samples_a, samples_b
    c = headline_change(
        "timing", sb["name"], "time", xs, ys, settings, weaker, clocks[0], shift=shift
    )
    for figures, series, batches in ((c.a, sa, samples_a), (c.b, sb, samples_b)):
        figures["median"] = figures.pop("time")
        figures["processes"] = float(len(process_medians(series, batches)))
        figures["batches"] = float(len(batches))
        if isinstance(series.get("stolen"), (int, float)):
            figures["stolen"] = float(series["stolen"])
    if weaker and c.tested:
        c = c.replace(note=ONE_PROCESS)
    return c


def _family(changes: list[Change], alpha: float) -> list[Change]:
    tested = [i for i, c in enumerate(changes) if c.tested and c.p_value is not None]
    adjusted = holm([changes[i].p_value or 0.0 for i in tested])
    for i, p in zip(tested, adjusted, strict=True):
        c = changes[i]
        verdict = (WORSE if (c.change or 0) > 0 else "better") if p < alpha else ""
        changes[i] = c.replace(p_adjusted=p, significant=p < alpha, verdict=verdict)
    return changes


def _timing(da: Mapping[str, Any], db: Mapping[str, Any], settings: Settings) -> list[Change]:
    pairs = _pair_series(da["series"], db["series"])
    if not pairs:
        raise ResultFormatError("the two timings share no statement name")
    shifts = {}
    for clock in {_series_clock(sa) for sa, _ in pairs}:
        ratios = [reference_ratio(sa, sb) for sa, sb in pairs if _series_clock(sa) == clock]
        shifts[clock] = machine_shift([r for r in ratios if r is not None])
        if shifts[clock].references:
            settings.notes.append(
                f"the machine was {math.expm1(shifts[clock].value):+.1%} slower in B's session "
                f"than in A's on the {clock} clock (the reference work beside "
                f"{shifts[clock].references} statement(s)): taken out of B's times"
            )
    changes = [
        timing_change(sa, sb, settings, shifts[_series_clock(sa)].with_stolen(sa, sb))
        for sa, sb in pairs
    ]
    if any(c.a.get("stolen") is not None for c in changes):
        settings.notes.append(
            "on the wall clock, the share of each statement's time other programs took (its "
            "thread waiting for a CPU) in each session: taken out of B's times"
        )
    return _family(changes, settings.alpha)


def _memory(da: Mapping[str, Any], db: Mapping[str, Any], settings: Settings) -> list[Change]:
    changes = []
    for name, runs_a in da["channels"].items():
        runs_b = db["channels"].get(name)
        if runs_b is None:
            continue
        xs = [float(r["peak"]) for r in runs_a]
        ys = [float(r["peak"]) for r in runs_b]
        changes.append(headline_change("memory", name, "peak", xs, ys, settings))
    if not changes:
        raise ResultFormatError("the two memory results share no channel")
    return _family(changes, settings.alpha)


def _profile(
    da: Mapping[str, Any], db: Mapping[str, Any], settings: Settings, section: str = "profile"
) -> list[Change]:
    """Two profile tables: a profile's, or a run's (``section``)."""
    if counter_of(da) or counter_of(db):
        return counted.profile_changes(da, db, settings, section)
    sa, sb = side_table(section, da, settings.clock), side_table(section, db, settings.clock)
    if sa.clock != sb.clock and section == "run":  # a side lacks CPU times: both on the wall
        settings.notes.append("a side has no CPU times: both compared on the wall clock")
        sa, sb = side_table(section, da, "wall"), side_table(section, db, "wall")
    return profile_changes(sa, sb, settings, section)


_run: Callable[..., list[Change]] = functools.partial(_profile, section="run")
_SECTIONS = {"timing": _timing, "memory": _memory, "profile": _profile, "run": _run}
# The parts a report may hold (a run result is a kind of its own, never a part).
_REPORT_PARTS = ("timing", "memory", "profile")


def _runs(kind: str, data: Mapping[str, Any]) -> int:
    if kind == "timing":  # its runs are the processes that timed it
        return min(len(s.get("processes", [0])) for s in data["series"])
    if kind == "memory":
        return min(len(runs) for runs in data["channels"].values())
    if kind in ("profile", "run"):
        return len(data["wall"])
    return min(_runs(k, data[k]) for k in _REPORT_PARTS if k in data)


# What differs between two environments and is worth a warning (not a refusal).
_ENVIRONMENT = (("python", "Python"), ("implementation", "implementation"),
                ("machine", "machine"), ("cpu", "CPU"))  # fmt: skip


def environment_warnings(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """One line per difference between two results' environments that makes their times
    less comparable (Python, implementation, machine, CPU).

    :param a: A's document
    :param b: B's document
    """
    ea, eb = a.get("environment") or {}, b.get("environment") or {}
    found = []
    for key, what in _ENVIRONMENT:
        x, y = ea.get(key), eb.get(key)
        if isinstance(x, str) and isinstance(y, str) and x and y and x != y:
            found.append(
                f"A and B ran on different {what}s ({x!r} and {y!r}): times may differ for "
                "that alone"
            )
    return found


def compare_results(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    names: tuple[str, str] = ("A", "B"),
    alpha: float = 0.05,
    confidence: float = 0.95,
    min_share: float = MIN_SHARE,
    min_change: float = MIN_CHANGE,
    clock: str | None = None,
) -> ResultComparison:
    """Compares two results (loaded with ``load_result`` or built with ``make_result``).

    :param a: the baseline
    :param b: the new result
    :param names: what to call them in messages (their files)
    :param alpha: significance level, after Holm's correction
    :param confidence: level of the intervals
    :param min_share: a profile's figures under this share on both sides are not tested
    :param min_change: changes of a profile's figures within this fraction are negligible
    :param clock: ``cpu`` or ``wall`` for sampled profiles, each result's own when None
    :raises ResultFormatError: different kinds, clocks or profilers, or nothing shared
    """
    check_number("alpha", alpha, above=0, maximum=0.5)
    check_number("confidence", confidence, above=0, maximum=0.9999)
    check_number("min_share", min_share, minimum=0, maximum=1)
    check_number("min_change", min_change, minimum=0, maximum=1)
    if a["kind"] != b["kind"]:
        raise ResultFormatError(
            f"cannot compare {names[0]!r}, a {a['kind']} result, with {names[1]!r}, a "
            f"{b['kind']} result: give two results of the same kind"
        )
    kind = a["kind"]
    settings = Settings(confidence, alpha, min_share, min_change, clock, names=names)
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
    if not any(c.a.get("counted") for c in changes):  # one counted run a side decides
        _add_run_notes(settings, runs, kind)
    return ResultComparison(
        kind, names, tuple(changes), settings.judged, tuple(settings.notes), alpha, confidence,
        runs, factor=settings.factor, min_change=min_change,
        warnings=tuple(environment_warnings(a, b)),
    )  # fmt: skip


def _add_run_notes(settings: Settings, runs: tuple[int, int], kind: str) -> None:
    what, how = (
        ("processes", "time --processes N")
        if kind == "timing"
        else ("runs", "--repeat N, or compare --a/--b")
    )
    if min(runs) < 2:
        settings.notes.insert(
            0,
            f"{what}: {runs[0]} in A, {runs[1]} in B: a single one on a side is weaker "
            f"evidence, judged where it can be and never passed in silence ({how})",
        )
    elif min(runs) < FEW_RUNS:
        settings.notes.insert(
            0, f"{what}: {runs[0]} in A, {runs[1]} in B: below {FEW_RUNS} a side the tests are weak"
        )
