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


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    """``numerator / denominator``; None when either side is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
