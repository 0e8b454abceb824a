"""Group statistics for the recourse audit: bootstrap intervals, permutation
tests of a gap between two groups, and Holm's correction.

* Bootstrap (percentile) interval of a statistic of one group: resample the
  group's rows with replacement ``n_boot`` times. For a gap ``stat(a) -
  stat(b)`` each group is resampled independently.
* Wilson score interval of a share of rows (0/1 values; Wilson 1927): the
  bootstrap of a share of 0 or of 1 is a single point (2 rows out of 2 read
  [100%, 100%]), where Wilson's interval stays honest for a small group
  (2 of 2: [34.2%, 100%]); Brown, Cai & DasGupta (2001) recommend it for
  small ``n``.
* Permutation test of ``H0: the group label does not matter`` for the gap
  ``stat(a) - stat(b)``: the labels of the pooled rows of a and b are
  shuffled ``n_perm`` times; two-sided p-value
  ``(1 + #{|gap*| >= |gap|}) / (1 + n_perm)`` (exact under exchangeability,
  never 0).
* Holm-Bonferroni over all the tests of an audit controls the family-wise
  error rate at ``alpha``.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np

__all__ = ["STATS", "bootstrap_ci", "share_ci", "is_share", "gap_ci", "permutation_p", "holm"]

STATS: dict[str, Callable[[np.ndarray], float]] = {
    "mean": lambda v: float(np.mean(v)) if len(v) else float("nan"),
    "median": lambda v: float(np.median(v)) if len(v) else float("nan"),
}


def _stat_rows(V: np.ndarray, stat: str) -> np.ndarray:
    """The statistic of each row of a (n_boot, n) array."""
    return V.mean(axis=1) if stat == "mean" else np.median(V, axis=1)


def bootstrap_ci(values: np.ndarray, stat: str = "mean", n_boot: int = 1000, level: float = 0.95,
                 rng: np.random.Generator | None = None) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over ``values``."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(0) if rng is None else rng
    draws = _stat_rows(v[rng.integers(0, v.size, (n_boot, v.size))], stat)
    a = (1 - level) / 2
    return float(np.quantile(draws, a)), float(np.quantile(draws, 1 - a))


def is_share(values: np.ndarray) -> bool:
    """Whether ``values`` are 0/1 flags of rows (their mean a share), at least one of them."""
    v = np.asarray(values, dtype=float)
    return bool(v.size) and bool(np.isin(v, (0.0, 1.0)).all())


def share_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the share of ones among 0/1 ``values``; NaN for no value.
    With ``p`` the share of ``n`` rows and ``z`` the normal quantile of ``level``:
    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``."""
    v = np.asarray(values, dtype=float)
    n = v.size
    if n == 0:
        return float("nan"), float("nan")
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = float(v.mean())
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def gap_ci(a: np.ndarray, b: np.ndarray, stat: str = "mean", n_boot: int = 1000, level: float = 0.95,
           rng: np.random.Generator | None = None) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(a) - stat(b)``, groups resampled independently."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2 or b.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(0) if rng is None else rng
    da = _stat_rows(a[rng.integers(0, a.size, (n_boot, a.size))], stat)
    db = _stat_rows(b[rng.integers(0, b.size, (n_boot, b.size))], stat)
    q = (1 - level) / 2
    d = da - db
    return float(np.quantile(d, q)), float(np.quantile(d, 1 - q))


def permutation_p(a: np.ndarray, b: np.ndarray, stat: str = "mean", n_perm: int = 2000,
                  rng: np.random.Generator | None = None) -> float:
    """Two-sided permutation p-value of ``stat(a) - stat(b)``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        return float("nan")
    rng = np.random.default_rng(0) if rng is None else rng
    pooled = np.concatenate([a, b])
    observed = abs(STATS[stat](a) - STATS[stat](b))
    n, na = pooled.size, a.size
    hits = 0
    step = max(1, int(2e6 // n))          # permutations per block, bounded memory
    done = 0
    while done < n_perm:
        k = min(step, n_perm - done)
        idx = np.argsort(rng.random((k, n)), axis=1)
        P = pooled[idx]
        gaps = np.abs(_stat_rows(P[:, :na], stat) - _stat_rows(P[:, na:], stat))
        hits += int(np.sum(gaps >= observed - 1e-12 * max(1.0, observed)))
        done += k
    return (1 + hits) / (1 + n_perm)


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok])]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out
