"""Many tests at once: Holm's step-down correction (weighted as Holm allows) and the
weighted median the comparisons estimate a run's common factor with."""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm(p_values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """Holm's step-down adjusted p-values, in order, weighted as Holm (1979) allows
    (hypothesis ``i`` tested at ``alpha w_i / (the weights left)``: the family-wise error
    stays under ``alpha`` for weights chosen blind to the differences).

    :param p_values: the raw p-values of one family
    :param weights: positive weights, all 1 when None
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


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value below and above which half the weight lies (0.0 when empty).

    :param values: the values
    :param weights: their positive weights
    """
    order = sorted(range(len(values)), key=values.__getitem__)
    half = math.fsum(weights) / 2
    acc = 0.0
    for i in order:
        acc += weights[i]
        if acc >= half:
            return float(values[i])
    return 0.0


def median(values: Sequence[float]) -> float:
    """The median (of the two middle values for an even count; 0.0 when empty).

    :param values: the values
    """
    s = sorted(values)
    n = len(s)
    if not n:
        return 0.0
    return float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
