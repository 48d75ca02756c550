"""Order statistics over timed runs, and the ratios between arms. Pure Python."""

from __future__ import annotations

import statistics
from typing import Optional, Sequence


def median(values: Sequence[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def iqr(values: Sequence[float]) -> Optional[float]:
    """Interquartile range (Q3 - Q1, inclusive method so that 2-3 runs still give one)."""
    if not values:
        return None
    if len(values) == 1:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


# A steady-state figure whose spread (IQR) is more than this fraction of its median is flagged
# "unstable": the machine was busy or the timing is dominated by noise, and the median (and
# any ratio built on it) is no fact to act on. A quarter: two arms whose medians differ by
# less than that cannot be told apart on such timings.
UNSTABLE_IQR_RATIO = 0.25


def unstable_reason(median_value: Optional[float], iqr_value: Optional[float],
                    threshold: float = UNSTABLE_IQR_RATIO) -> str:
    """Why :func:`unstable` said so, in figures ("" when it did not)."""
    if not unstable(median_value, iqr_value, threshold):
        return ""
    assert median_value is not None and iqr_value is not None
    share = f"{iqr_value / median_value:.0%} of" if median_value > 0 else "a spread around"
    return f"IQR {iqr_value:.3f} ms is {share} the median {median_value:.3f} ms (above {threshold:.0%})"


def unstable(median_value: Optional[float], iqr_value: Optional[float],
             threshold: float = UNSTABLE_IQR_RATIO) -> bool:
    """The IQR is more than ``threshold`` times the median (a median of 0 with any spread
    too); False when either is missing."""
    if median_value is None or iqr_value is None:
        return False
    if median_value <= 0:
        return iqr_value > 0
    return iqr_value / median_value > threshold


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    """``numerator / denominator``; None when either side is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


# A mended program is "slower" only when its median is more than this fraction above the
# original's: below it, a difference within one run is as likely the machine as the code
# (two workers, two compilations, one box).
SLOWER_TOLERANCE = 0.05


def slower(median_a: Optional[float], iqr_a: Optional[float], median_b: Optional[float],
           iqr_b: Optional[float], tolerance: float = SLOWER_TOLERANCE) -> Optional[bool]:
    """Is A slower than B beyond noise? True when A's median is above B's by more than
    ``tolerance`` of B's median AND by more than half the two IQRs together (their
    interquartile boxes, centred on the medians, do not overlap): wide spreads ask for a
    wider gap, so a clear slowdown shows even on a busy machine. False when it is not, and
    the timings are stable or A is as clearly faster. None when it cannot be told: a figure
    is missing, or the gap is within the noise of an unstable side (:func:`unstable`)."""
    if None in (median_a, iqr_a, median_b, iqr_b) or median_a <= 0 or median_b <= 0:
        return None

    def beyond(m1: float, i1: float, m2: float, i2: float) -> bool:
        gap = m1 - m2
        return gap > tolerance * m2 and gap > (i1 + i2) / 2

    if beyond(median_a, iqr_a, median_b, iqr_b):
        return True
    if beyond(median_b, iqr_b, median_a, iqr_a) or not (unstable(median_a, iqr_a) or unstable(median_b, iqr_b)):
        return False
    return None
