"""A fake clock for the timing tests: the statement under test advances it, so every
figure is exact and no test depends on the speed of the machine."""

from __future__ import annotations

from collections.abc import Callable, Iterator


class FakeClock:
    """A clock that only moves when told: the statement under test advances it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def costing(self, seconds: float) -> Callable[[], None]:
        """A statement that takes ``seconds`` on this clock."""
        return lambda: self.advance(seconds)

    def costing_each(self, costs: Iterator[float]) -> Callable[[], None]:
        """A statement whose successive executions take ``next(costs)`` seconds."""
        return lambda: self.advance(next(costs))
