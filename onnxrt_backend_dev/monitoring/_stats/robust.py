"""A location that a few values cannot drag: Tukey's biweight M-estimate of a weighted
mean, started from the weighted median, each value standardised by its own precision.

What the comparisons estimate a run-wide factor with: the pieces of a run (functions,
stacks) that did not change agree on it within their noise, one that changed stands
apart and gets no weight, however large it is. The values' spread beyond what their
precisions say (the scale) is estimated from the median absolute deviation and never
taken below 1: the values are at least as noisy as their precisions say.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .multiple import median, weighted_median

# Tukey's tuning constant: 95 % efficiency at the normal distribution.
BIWEIGHT_C = 4.685
# The median absolute deviation of a standard normal distribution, inverted.
MAD_TO_SD = 1.4826
_ITERATIONS = 50
_TOLERANCE = 1e-10


@dataclass(frozen=True)
class Location:
    """A robust location and what it weighed.

    :param value: the estimate
    :param weights: each value's final weight in the mean (its weight times its
        biweight, 0 for a value rejected)
    :param scale: the spread of the standardised values (>= 1)
    """

    value: float
    weights: tuple[float, ...]
    scale: float

    def variance(self, variances: Sequence[float], left_out: Sequence[int] = ()) -> float:
        """The variance of the weighted mean, each value of variance ``variances[i]``
        times the scale squared, with the values ``left_out`` removed.

        :param variances: each value's variance
        :param left_out: indices of the values left out
        :return: the variance (infinite when no weight is left)
        """
        out = set(left_out)
        w = [x for i, x in enumerate(self.weights) if i not in out]
        v = [x for i, x in enumerate(variances) if i not in out]
        total = math.fsum(w)
        if total <= 0:
            return math.inf
        spread = math.fsum(x * x * y for x, y in zip(w, v, strict=True))
        return self.scale**2 * spread / (total * total)


def biweight_location(
    values: Sequence[float],
    precisions: Sequence[float],
    weights: Sequence[float] | None = None,
    c: float = BIWEIGHT_C,
    scale: float | None = None,
) -> Location:
    """Tukey's biweight location of ``values``.

    Each value's residual is standardised by its precision (``(x - m) sqrt(p)``) and
    the scale (the median absolute deviation of the standardised residuals about the
    weighted median, at least 1); its biweight is ``(1 - (z / c)^2)^2`` inside ``c``, 0
    beyond; the estimate is the mean weighted by ``weights`` times the biweights,
    iterated from the weighted median.

    :param values: the values
    :param precisions: one over each value's variance, > 0
    :param weights: each value's weight in the mean (the precisions when None; a
        caller may cap them so that no single value weighs too much)
    :param c: the tuning constant
    :param scale: the spread of the standardised values when known (estimated when
        None)
    :return: the location (0.0 with no value)
    """
    n = len(values)
    if n == 0:
        return Location(0.0, (), 1.0)
    w = list(precisions if weights is None else weights)
    roots = [math.sqrt(max(p, 0.0)) for p in precisions]
    m = weighted_median(values, w)
    if scale is None:  # once, about the median (the scale is not iterated)
        z = [abs(x - m) * r for x, r in zip(values, roots, strict=True)]
        scale = max(1.0, MAD_TO_SD * median(z))
    final = list(w)
    for _ in range(_ITERATIONS):
        width = c * scale
        final = []
        for x, r, wi in zip(values, roots, w, strict=True):
            u = (x - m) * r / width
            final.append(wi * (1 - u * u) ** 2 if -1 < u < 1 else 0.0)
        total = math.fsum(final)
        if total <= 0:
            break
        new = math.fsum(f * x for f, x in zip(final, values, strict=True)) / total
        done = abs(new - m) <= _TOLERANCE * max(1.0, abs(m))
        m = new
        if done:
            break
    return Location(m, tuple(final), scale)
