"""Student's t distribution (two-sided tail, quantile) through the regularized
incomplete beta function, and the standard normal distribution."""

from __future__ import annotations

import functools
import math
import statistics

NORMAL = statistics.NormalDist()


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln_front) * _betacf(b, a, 1.0 - x) / b


def student_t_sf2(t: float, df: float) -> float:
    """Two-sided tail probability ``P(|T| >= |t|)`` of Student's t with ``df`` degrees
    (the normal tail when ``df`` is infinite)."""
    if math.isinf(df):
        return min(1.0, 2.0 * NORMAL.cdf(-abs(t)))
    if math.isinf(t):
        return 0.0
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def student_t_pdf(t: float, df: float) -> float:
    """The density of Student's t with ``df`` degrees at ``t``."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def student_t_quantile(p: float, df: float) -> float:
    """``q`` such that ``P(T <= q) = p`` for ``p`` in (0.5, 1): Newton's method from the
    Cornish-Fisher expansion (a few steps; bisection when it strays). Cached: the
    intervals of a comparison ask for few distinct levels and degrees."""
    if math.isinf(df):
        return NORMAL.inv_cdf(p)
    z = NORMAL.inv_cdf(p)
    x = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)
    for _ in range(30):
        density = student_t_pdf(x, df)
        if not (x > 0 and density > 0):
            break
        step = (0.5 * student_t_sf2(x, df) - (1.0 - p)) / density
        x += step
        if abs(step) <= 1e-13 * max(1.0, abs(x)):
            return x
    return _bisected_quantile(p, df)


def _bisected_quantile(p: float, df: float) -> float:
    lo, hi = 0.0, 1.0
    while 0.5 * student_t_sf2(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if 0.5 * student_t_sf2(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0
