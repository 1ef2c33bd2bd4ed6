"""What a comparison finds, figure by figure (:class:`Change`), and the settings every
section of it reads (:class:`Settings`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Figures of a profile, per function and per call path.
OWN, INCLUSIVE, PATH, GROWTH = "own", "inclusive", "path", "growth"
# A function's calls to the allocators, counted by valgrind.
ALLOCS = "allocs"
BYTES = "bytes"  # allocated bytes, counted (``--count-bytes``)
# The roles of a call path whose change is significant: where the change starts, or a
# caller the change only runs through (its callee carries it).
ORIGIN, EXPLAINED = "origin", "explained"
WORSE, BETTER = "worse", "better"


@dataclass(frozen=True)
class Change:
    """One compared figure: a function's own or inclusive time, a call path's inclusive
    time, a function's memory growth, a timed statement, a memory channel's peak, a
    run's time.

    :param section: ``timing``, ``memory``, ``profile`` or ``run``
    :param function: the function (its name), the statement, the channel or
        ``wall time``, ``CPU time``, ``peak memory``
    :param file: the function's file, None for other figures
    :param line: its first line, None for other figures
    :param figure: what was tested: ``own``, ``inclusive``, ``path``, ``growth``,
        ``time``, ``peak``, ``wall``, ``cpu``
    :param a: figures of A (medians over its runs: ``time`` seconds, ``share`` of the
        run, ``growth`` bytes...)
    :param b: figures of B
    :param change: relative change, ``B / A - 1``, after the run-wide factor for the
        figures of a profile; for a memory growth, ``(B - A) / A's rise``; None when A
        is 0
    :param ci_low: lower bound of ``change``'s interval, None when not tested
    :param ci_high: upper bound
    :param p_value: the test's p-value, None when not tested
    :param p_adjusted: corrected for the family (Holm), None when not tested
    :param significant: ``p_adjusted < alpha``
    :param tested: whether a test was made
    :param note: why it was not tested, or a remark
    :param path: a call path's functions (names as shown), outermost first
    :param role: a significant path's role, ``origin`` or ``explained``
    :param chain: how many of ``path``'s last functions to show in one line
    :param shown: an origin's functions to show: where the change starts (with its
        caller when it is one path long) down to the function that carries it
    :param verdict: ``worse`` or ``better`` when listed as a change, else ``""``
    :param weaker: judged on weaker evidence (the batches of one process, the counts of
        one run a side)
    :param places: a call path's functions as ``file:line:name``, one per name of
        ``path`` (two functions may share a name: every module's ``<module>``)
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
    path: tuple[str, ...] = ()
    role: str = ""
    chain: int = 0
    shown: tuple[str, ...] = ()
    verdict: str = ""
    weaker: bool = False
    places: tuple[str, ...] = ()

    @property
    def impact(self) -> float:
        """How much it matters, for sorting: the share of the run it moved for a
        function or a path (its relative change times its share), the relative change
        otherwise."""
        share = (self.a.get("share", 0.0) + self.b.get("share", 0.0)) / 2
        if "share" in self.a:
            return abs(self.change or 0.0) * max(share, 1e-12)
        return abs(self.change or 0.0)

    def replace(self, **fields: Any) -> Change:
        """A copy with some fields changed.

        :param fields: the fields
        :return: the copy
        """
        values = dict(self.__dict__)
        values.update(fields)
        return Change(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        d = dict(self.__dict__)
        d["a"], d["b"] = dict(self.a), dict(self.b)
        d["path"], d["shown"] = list(self.path), list(self.shown)
        d["places"] = list(self.places)
        return d


@dataclass
class Settings:
    """What every section of a comparison reads, and the notes it adds.

    :param confidence: level of the intervals
    :param alpha: significance level, after Holm's correction
    :param min_share: figures under this share of the run on both sides are shown, not
        tested
    :param min_change: changes within this fraction are negligible: a profile's figure is
        significant only when its change is beyond it
    :param clock: ``cpu`` or ``wall`` for sampled figures, None for each result's own
    :param notes: what the reader must know, filled by the sections
    :param judged: False when a headline figure had a single value on a side
    :param factor: how much the whole run moved (B against A), None when not estimated
    :param reference: the pieces of the run the factor was estimated over
    :param names: what to call A and B in messages (their files)
    """

    confidence: float
    alpha: float
    min_share: float
    min_change: float = 0.02
    clock: str | None = None
    notes: list[str] = field(default_factory=list)
    judged: bool = True
    factor: float | None = None
    reference: int = 0
    names: tuple[str, str] = ("A", "B")
