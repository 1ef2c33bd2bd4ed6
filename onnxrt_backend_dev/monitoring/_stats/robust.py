"""A location a few values cannot drag: Tukey's biweight M-estimate of a weighted mean,
from the weighted median, each value standardised by its precision. The run-wide factor
of a comparison: the unchanged pieces of a run agree on it within their noise, a changed
one stands apart and weighs nothing. The scale (the spread beyond the precisions, from
the median absolute deviation) is never below 1: values are at least that noisy.
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
    :param weights: each value's weight times its biweight (0: rejected)
    :param scale: the spread of the standardised values (>= 1)
    """

    value: float
    weights: tuple[float, ...]
    scale: float

    def variance(self, variances: Sequence[float], left_out: Sequence[int] = ()) -> float:
        """The variance of the weighted mean (each value's times the scale squared)
        without the values ``left_out``.

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
) -> Location:
    """Tukey's biweight location of ``values``: each residual standardised by its
    precision and the scale (``z = (x - m) sqrt(p) / scale``) weighs ``(1 - (z / c)^2)^2``
    inside ``c``, 0 beyond, times its weight; iterated from the weighted median.

    :param values: the values
    :param precisions: one over each value's variance, > 0
    :param weights: each value's weight (the precisions when None; capped by a caller
        so that no value weighs too much)
    :param c: the tuning constant
    :return: the location (0.0 with no value)
    """
    n = len(values)
    if n == 0:
        return Location(0.0, (), 1.0)
    w = list(precisions if weights is None else weights)
    roots = [math.sqrt(max(p, 0.0)) for p in precisions]
    m = weighted_median(values, w)
    # The scale once, about the median (not iterated).
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
