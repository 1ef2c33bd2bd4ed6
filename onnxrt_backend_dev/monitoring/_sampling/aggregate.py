"""Folds the ticks into per-stack figures as they come, in bounded memory.

Standard library only: the flight recorder (another process) runs it too.

At each tick the RSS change since the previous tick is credited to the stack running at
this tick. Growth up to the peak is kept apart: what was credited since the last new peak
waits in ``pending`` and joins ``to_peak`` when a higher peak comes. The peak itself comes
from the high-water mark (exact, even for a spike shorter than a tick); its excess over
the RSS of the tick that saw it rise is credited to the stack running at that tick,
which is the code that built it: the tick's handler runs right after the call that
allocated returns (a C call holding the GIL included).
"""

from __future__ import annotations

import array

from .._errors import BadData, BadValue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._stacks.frames import SampledFrame

NO_STACK = -1
# A new peak moves the peak's moment only when it passes the dated one by this much (or
# 1 % of the growth): a plateau gaining a few pages later is still dated from its start.
PEAK_TOLERANCE = 2**20
# A rise smaller than this is noise (the interpreter's own pages), not "allocating".
RISE_NOISE = 64 * 2**10
DEFAULT_MAX_POINTS = 20_000


class Aggregator:
    """The running figures of one process.

    :param max_points: timeline points kept at most (halved beyond, stride doubled)
    :param tolerance: see ``PEAK_TOLERANCE``
    :param attached: the process ran before its first tick (``--pid``): the high-water
        mark of that tick is its past (kept as ``before``), not a peak of what is observed
    """

    def __init__(
        self,
        max_points: int = DEFAULT_MAX_POINTS,
        tolerance: float = PEAK_TOLERANCE,
        attached: bool = False,
    ) -> None:
        if max_points < 2:
            raise BadValue(f"max_points must be >= 2, got {max_points!r}")
        self.max_points = max_points
        self.tolerance = tolerance
        self.stacks: dict[int, tuple[SampledFrame, ...]] = {}
        self.count: dict[int, int] = {}
        # Seconds per stack: each tick stands for the time since the previous one (a
        # long C call delays the tick, it does not lose its time).
        self.seconds: dict[int, float] = {}
        self.net: dict[int, float] = {}
        self.pending: dict[int, float] = {}
        self.to_peak: dict[int, float] = {}
        self.highest: dict[int, float] = {}
        self.n = 0
        self.dropped = 0
        self.first_t = self.last_t = 0.0
        self.first_rss = self.last_rss = 0.0
        self.last_hwm = 0.0
        self.attached = attached
        self.before = 0.0  # the high-water mark at an attach: reached before it
        self.peak = 0.0
        self.peak_t = 0.0
        self.peak_rss = 0.0  # the RSS of the tick that dated the peak
        self.peak_sid = NO_STACK
        self.dated = 0.0
        self.last_rise_sid = NO_STACK
        self.last_sid = NO_STACK
        self.times = array.array("d")
        self.rss = array.array("d")
        self.sids = array.array("q")
        self.stride = 1
        self._skip = 0

    def add_stack(self, sid: int, frames: Sequence[SampledFrame]) -> None:
        """Declares a stack (outermost frame first) before ticks refer to it."""
        self.stacks[sid] = tuple(frames)

    def add_tick(self, t: float, rss: float, hwm: float, sid: int, high: float = 0.0) -> None:
        """Adds one tick.

        :param t: seconds (``time.monotonic``)
        :param rss: the RSS now, bytes
        :param hwm: the high-water mark now, bytes (0 if unknown)
        :param sid: the stack running, ``NO_STACK`` if unknown
        :param high: the highest memory since the previous tick where it is known apart
            from the high-water mark (the spy resets the mark at each tick), else 0
        """
        if self.n == 0 and self.attached:
            self.before = self.last_hwm = hwm
        rose = hwm > self.last_hwm
        level = max(rss, hwm if rose else 0.0, high)
        if self.n == 0:
            self.first_t, self.first_rss = t, rss
            self.last_rss = rss
            self._date_peak(t, rss, level, sid)
        delta = rss - self.last_rss
        self.count[sid] = self.count.get(sid, 0) + 1
        self.seconds[sid] = self.seconds.get(sid, 0.0) + (t - self.last_t if self.n else 0.0)
        self.net[sid] = self.net.get(sid, 0.0) + delta
        self.pending[sid] = self.pending.get(sid, 0.0) + delta
        if level > self.highest.get(sid, -1.0):
            self.highest[sid] = level
        if level > self.peak:
            self.peak = level
            if level > self.dated + self._tolerance():
                self._date_peak(t, rss, level, sid)
        rising = delta > RISE_NOISE or (rose and hwm - self.last_hwm > RISE_NOISE)
        if rising and sid != NO_STACK:  # outside the program: not what it allocated
            self.last_rise_sid = sid
        self.last_t, self.last_rss, self.last_sid = t, rss, sid
        self.last_hwm = max(self.last_hwm, hwm)
        self.n += 1
        self._keep(t, rss, sid)

    def _tolerance(self) -> float:
        return min(self.tolerance, 0.01 * max(self.dated - self.first_rss, 0.0))

    def _date_peak(self, t: float, rss: float, level: float, sid: int) -> None:
        for key, value in self.pending.items():
            self.to_peak[key] = self.to_peak.get(key, 0.0) + value
        self.pending.clear()
        self.peak_t, self.peak_rss, self.peak_sid, self.dated = t, rss, sid, level
        self.peak = max(self.peak, level)

    def _keep(self, t: float, rss: float, sid: int) -> None:
        if self._skip:
            self._skip -= 1
            return
        self._skip = self.stride - 1
        self.times.append(t)
        self.rss.append(rss)
        self.sids.append(sid)
        if len(self.times) >= self.max_points:
            self.times, self.rss, self.sids = self.times[::2], self.rss[::2], self.sids[::2]
            self.stride *= 2
            self._skip = self.stride - 1

    def raise_peak(self, value: float) -> None:
        """Takes an exact peak known from outside (the spy, ``wait4``'s ``ru_maxrss``);
        its excess is credited as the peak's, to the stack that dated it."""
        self.peak = max(self.peak, value)

    def composition(self) -> dict[int, float]:
        """Growth from the first tick to the peak per stack: adds up to
        ``peak - first_rss`` (the peak's excess over its tick goes to that tick's stack)."""
        parts = dict(self.to_peak)
        if self.n:
            parts[self.peak_sid] = parts.get(self.peak_sid, 0.0) + self.peak - self.peak_rss
        return parts


# What :meth:`Aggregator.to_state` keeps: plain attributes, per-stack tables, series.
_SCALARS = ("n", "dropped", "first_t", "last_t", "first_rss", "last_rss", "last_hwm", "before",
            "peak", "peak_t", "peak_rss", "peak_sid", "dated", "last_rise_sid", "last_sid",
            "stride", "max_points", "tolerance")  # fmt: skip
_TABLES = ("count", "seconds", "net", "pending", "to_peak", "highest")


def to_state(agg: Aggregator) -> dict[str, object]:
    """An aggregator as plain values (it crosses a pipe: the observer of a block runs in
    another process); the stacks are not included (the receiver declares them).

    :param agg: the aggregator
    """
    state: dict[str, object] = {name: getattr(agg, name) for name in _SCALARS}
    for name in _TABLES:
        state[name] = dict(getattr(agg, name))
    for name in ("times", "rss", "sids"):
        state[name] = getattr(agg, name).tobytes()
    return state


def from_state(state: dict[str, object]) -> Aggregator:
    """An aggregator from :func:`to_state` (untrusted: wrong types raise BadData).

    :param state: the state
    :return: the aggregator, without stacks
    """
    agg = Aggregator(max_points=int(state.get("max_points", DEFAULT_MAX_POINTS)))  # type: ignore[call-overload]
    for name in _SCALARS:
        value = state.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise BadData(f"aggregator state: {name} is not a number")
        setattr(agg, name, type(getattr(agg, name))(value))
    for name in _TABLES:
        table = state.get(name)
        if not isinstance(table, dict):
            raise BadData(f"aggregator state: {name} is not a table")
        setattr(agg, name, {int(k): float(v) for k, v in table.items()})
    agg.count = {k: int(v) for k, v in agg.count.items()}
    for name, code in (("times", "d"), ("rss", "d"), ("sids", "q")):
        raw = state.get(name)
        if not isinstance(raw, bytes):
            raise BadData(f"aggregator state: {name} is not bytes")
        buffer = array.array(code)
        buffer.frombytes(raw[: len(raw) // 8 * 8])
        setattr(agg, name, buffer)
    return agg
