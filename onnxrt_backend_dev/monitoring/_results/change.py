"""What a comparison finds, figure by figure (:class:`Change`), and the settings every
section of it reads (:class:`Settings`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# Figures of a profile, per function and per call path.
OWN, INCLUSIVE, PATH, GROWTH = "own", "inclusive", "path", "growth"
# A function's calls to the allocators, counted by valgrind.
ALLOCS = "allocs"
BYTES = "bytes"  # allocated bytes, counted (``--count-bytes``)
# A significant path's role: where the change starts, or a caller it only runs through.
ORIGIN, EXPLAINED = "origin", "explained"
WORSE, BETTER = "worse", "better"


@dataclass(frozen=True)
class Change:
    """One compared figure: a function's or path's time, a memory growth, a statement, a
    channel's peak, a run's time.

    :param section: ``timing``, ``memory``, ``profile`` or ``run``
    :param function: the function's name, the statement, the channel or the headline
    :param file: the function's file, None for other figures
    :param line: its first line, None for other figures
    :param figure: what was tested (``own``, ``inclusive``, ``path``, ``growth``,
        ``time``, ``peak``, ``wall``, ``cpu``)
    :param a: A's figures (medians over its runs: ``time``, ``share``, ``growth``...)
    :param b: B's figures
    :param change: ``B / A - 1`` (after the run-wide factor; a growth over A's rise),
        None when A is 0
    :param ci_low: lower bound of its interval, None when not tested
    :param ci_high: upper bound
    :param p_value: the test's p-value, None when not tested
    :param p_adjusted: Holm-corrected for the family, None when not tested
    :param significant: ``p_adjusted < alpha``
    :param tested: whether a test was made
    :param note: why it was not tested, or a remark
    :param path: a call path's functions as shown, outermost first
    :param role: a significant path's role, ``origin`` or ``explained``
    :param chain: how many of ``path``'s last functions one line shows
    :param shown: an origin's functions to show, where the change starts down to where
        it is carried
    :param verdict: ``worse`` or ``better`` when listed, else ``""``
    :param weaker: judged on weaker evidence (one process or one run a side)
    :param places: ``path`` as ``file:line:name`` (names repeat: every ``<module>``)
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

        :param fields: the fields changed
        """
        return dataclasses.replace(self, **fields)

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
    :param min_share: figures under this share of the run on both sides are not tested
    :param min_change: changes of a profile's figures within this fraction are negligible
    :param clock: ``cpu`` or ``wall`` for sampled figures, None for each result's own
    :param notes: what the reader must know, filled by the sections
    :param judged: False when a headline figure had a single value on a side
    :param factor: how much B's whole run moved, None when not estimated
    :param reference: the pieces of the run the factor was estimated over
    :param names: what to call A and B in messages
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
