"""Unbiased estimates, with error bars, from allocations sampled by bytes.

The shim samples as a Poisson process over the bytes allocated (exponential gaps of mean
``m`` bytes, per thread): an allocation of ``s`` bytes is sampled with probability
``p(s) = 1 - exp(-s / m)``, independently of every other allocation. Each sampled
allocation then stands for ``s / p(s)`` bytes (the Horvitz-Thompson weight): the sum of
the weights of the sampled allocations of any set fixed in advance (a line's
allocations live at the peak, those allocated by a stack...) is an unbiased estimate of
that set's bytes, whatever the sizes. It is better than giving each sample ``m`` bytes
(the other classic choice): an allocation much bigger than ``m`` is always sampled and
then counts exactly its size, with no error at all; only small allocations carry the
sampling error. The variance of the estimate of a set is ``sum s^2 (1 - p) / p`` over
the set, estimated without bias by ``sum s^2 (1 - p) / p^2`` over its sampled members:
the error bars are 1.96 of its square root (95 % under the normal approximation, good
once a set has a dozen samples; a set with one sample has a wide bar, and a set with
none shows 0 with none).

The peak is the moment of the highest exact live total (the shim's counters: every
allocation counted, not sampled); what was live then is the set of sampled allocations
made before it and freed after it. Only those and the ones live now are kept: a sample
freed before the best peak so far can be in no later peak (the later peaks come after
its free). Everything else is folded into running sums as the records come, so the
estimator's memory is bounded by the samples live at the peak and now.

Pure: records in, figures out; the unit tests feed it synthetic streams.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import NamedTuple

from .._errors import BadValue

Z95 = 1.959963984540054
NO_STACK = -1  # the stack id of an allocation made without a Python frame


def inclusion(size: float, mean: float) -> float:
    """The chance that an allocation of ``size`` bytes is sampled, with ``mean`` bytes
    between two samples on average (1 for every allocation recorded: ``mean`` <= 1).

    :param size: bytes
    :param mean: bytes
    """
    if mean <= 1.0:
        return 1.0
    return -math.expm1(-size / mean) if size > 0 else 0.0


def weight(size: float, mean: float) -> tuple[float, float]:
    """What a sampled allocation stands for: ``(bytes, variance term)`` (see the module).

    :param size: its bytes
    :param mean: bytes between two samples on average
    """
    p = inclusion(size, mean)
    if p <= 0.0:
        return 0.0, 0.0
    return size / p, size * size * (1.0 - p) / (p * p)


def half_width(variance: float) -> float:
    """The 95 % error bar of an estimate of this variance."""
    return Z95 * math.sqrt(max(variance, 0.0))


class _Sample(NamedTuple):
    """A sampled allocation: what it stands for, and when and by which thread it was made."""

    key: tuple[int, int]
    weight: float
    var: float
    calls: float  # the allocations it stands for
    seq: int
    tid: int
    nallocs: int
    final: bool


class _Sums:
    """Running sums of one site: allocated and temporary bytes (estimates)."""

    __slots__ = ("allocated", "allocated_var", "count", "samples", "temp_count", "temp_var",
                 "temporary")  # fmt: skip

    def __init__(self) -> None:
        self.samples = 0
        self.allocated = self.allocated_var = self.count = 0.0
        self.temporary = self.temp_var = self.temp_count = 0.0


class SiteEstimate(NamedTuple):
    """The estimates of one site: a stack (``NO_STACK`` without a Python frame) and the
    native library that called the allocator. Bytes; each ``*_var`` is the estimate's
    variance (see :func:`half_width`).

    :param key: ``(stack id, library id)``
    :param samples: sampled allocations
    :param live_peak: bytes live at the peak
    :param allocated: bytes allocated over the run
    :param count: allocations made over the run
    :param temporary: bytes of allocations freed with at most ``threshold`` other
        allocations of their thread in between (memray's temporary allocations)
    :param temporary_count: how many
    :param live_end: bytes still live at the end (freed only by the interpreter's
        finalization, or never)
    """

    key: tuple[int, int]
    samples: int
    live_peak: float
    live_peak_var: float
    allocated: float
    allocated_var: float
    count: float  # type: ignore[assignment]  # tuple.count shadowed: not called
    temporary: float
    temporary_var: float
    temporary_count: float
    live_end: float
    live_end_var: float


class Estimates(NamedTuple):
    """What the samples say.

    :param mean: bytes between two samples on average
    :param samples: sampled allocations
    :param peak: the exact live bytes at the peak (the shim's count), 0 if unknown
    :param peak_time: when, on the records' clock (seconds), -1 if unknown
    :param live_peak: the estimate of the bytes live at the peak, from the samples
    :param live_peak_var: its variance
    :param sites: per site, those with at least one sample
    :param unmatched: frees of sampled addresses whose allocation was not seen
    """

    mean: float
    samples: int
    peak: float
    peak_time: float
    live_peak: float
    live_peak_var: float
    sites: tuple[SiteEstimate, ...]
    unmatched: int = 0


class Estimator:
    """Folds the records of sampled allocations, their frees and the peaks, in order.

    :param mean: bytes between two samples on average (the shim's setting)
    :param threshold: an allocation is temporary when at most this many other
        allocations of its thread came before its free (memray's
        ``--temporary-allocation-threshold``, 1 as its ``--temporary-allocations``)
    """

    def __init__(self, mean: float, threshold: int = 1) -> None:
        if threshold < 0:
            raise BadValue(f"threshold must be >= 0, got {threshold}")
        self.mean = float(mean)
        self.threshold = threshold
        self.live: dict[int, _Sample] = {}  # address -> sample
        self.sums: defaultdict[tuple[int, int], _Sums] = defaultdict(_Sums)
        self.best_live = -1.0
        self.best_seq = -1
        self.best_t = -1.0
        self.at_peak_freed: list[_Sample] = []  # live at the best peak, freed since
        self.final_freed: list[_Sample] = []  # freed by the interpreter's finalization
        self.samples = 0
        self.unmatched = 0

    def alloc(
        self, seq: int, t: float, key: tuple[int, int], size: int, address: int, tid: int = 0,
        nallocs: int = 0, final: bool = False,
    ) -> None:  # fmt: skip
        """A sampled allocation.

        :param seq: its place in the order of events
        :param t: its time, seconds
        :param key: ``(stack id, library id)``
        :param size: bytes
        :param address: where
        :param tid: its thread
        :param nallocs: the allocations its thread had made, itself included
        :param final: made during the interpreter's finalization
        """
        p = inclusion(size, self.mean)
        stands_for, var = weight(size, self.mean)
        calls = 1.0 / p if p > 0 else 0.0
        sample = _Sample(key, stands_for, var, calls, seq, tid, nallocs, final)
        old = self.live.pop(address, None)
        if old is not None:  # its free was not seen (lost): it ends here
            self._ended(old, seq)
        self.live[address] = sample
        sums = self.sums[key]
        sums.samples += 1
        sums.allocated += sample.weight
        sums.allocated_var += sample.var
        sums.count += sample.calls
        self.samples += 1

    def free(
        self, seq: int, t: float, address: int, tid: int = 0, nallocs: int = 0,
        final: bool = False,
    ) -> None:  # fmt: skip
        """The free of a sampled allocation.

        :param seq: its place in the order of events
        :param t: its time, seconds
        :param address: the allocation's address
        :param tid: the thread freeing it
        :param nallocs: the allocations that thread had made
        :param final: freed during the interpreter's finalization (still live at the
            end of the program's own code)
        """
        sample = self.live.pop(address, None)
        if sample is None:
            self.unmatched += 1
            return
        if tid == sample.tid and nallocs - sample.nallocs <= self.threshold:
            sums = self.sums[sample.key]
            sums.temporary += sample.weight
            sums.temp_var += sample.var
            sums.temp_count += sample.calls
        if final and not sample.final:
            self.final_freed.append(sample)
        self._ended(sample, seq)

    def _ended(self, sample: _Sample, seq: int) -> None:
        if sample.seq < self.best_seq < seq:
            self.at_peak_freed.append(sample)

    def peak(self, seq: int, t: float, live: float) -> None:
        """The process's exact live bytes at a moment (a new peak, when higher than any
        before): what is live now is what is live at the peak.

        :param seq: its place in the order of events
        :param t: its time, seconds
        :param live: bytes
        """
        if live <= self.best_live:
            return
        self.best_live, self.best_seq, self.best_t = float(live), seq, t
        self.at_peak_freed = []

    def estimates(self) -> Estimates:
        """The figures now (the estimator can go on after)."""
        peak: dict[tuple[int, int], list[float]] = {}
        end: dict[tuple[int, int], list[float]] = {}
        at_peak = [*self.at_peak_freed, *(s for s in self.live.values() if s.seq < self.best_seq)]
        for sample in at_peak:
            _add(peak, sample)
        for sample in (*self.live.values(), *self.final_freed):
            if not sample.final:
                _add(end, sample)
        sites = []
        total = total_var = 0.0
        for key, sums in self.sums.items():
            lp = peak.get(key, [0.0, 0.0])
            le = end.get(key, [0.0, 0.0])
            total += lp[0]
            total_var += lp[1]
            sites.append(
                SiteEstimate(
                    key=key, samples=sums.samples, live_peak=lp[0], live_peak_var=lp[1],
                    allocated=sums.allocated, allocated_var=sums.allocated_var,
                    count=sums.count, temporary=sums.temporary, temporary_var=sums.temp_var,
                    temporary_count=sums.temp_count, live_end=le[0], live_end_var=le[1],
                )
            )  # fmt: skip
        sites.sort(key=lambda s: (-s.live_peak, -s.allocated))
        return Estimates(self.mean, self.samples, max(self.best_live, 0.0), self.best_t, total,
                         total_var, tuple(sites), self.unmatched)  # fmt: skip


def _add(into: dict[tuple[int, int], list[float]], sample: _Sample) -> None:
    row = into.setdefault(sample.key, [0.0, 0.0])
    row[0] += sample.weight
    row[1] += sample.var
