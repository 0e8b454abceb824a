"""The one box type: ``lower < x <= upper`` on every feature.

Every region an analysis reports is such a box with its own extra fields: an
exact pure region (:class:`core.regions.Region`), a T-CREx rule and metarule
(:class:`core.tcrex.Rule`, :class:`core.tcrex.Metarule`), a counterfactual
rule's alternative (:class:`core.rules.results.Box`). A bound of ``-inf`` /
``+inf`` leaves its feature free. The inequality sides are the split rule's
(:mod:`core.model`: left iff ``x <= threshold``), so a box read off a tree's
path holds exactly the rows the path holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Box"]


@dataclass(frozen=True)
class Box:
    """``lower < x <= upper`` on every feature.

    Parameters
    ----------
    lower, upper : ndarray of shape (n_features,)
        Bounds; ``-inf`` / ``+inf`` where a feature is not bounded.

    Examples
    --------
    >>> import numpy as np
    >>> b = Box(np.array([0.0, -np.inf]), np.array([1.0, np.inf]))
    >>> b.contains(np.array([[0.5, 7.0], [0.0, 7.0]])).tolist()
    [True, False]
    >>> b.complexity, b.bounded
    (2, (0,))
    """

    lower: np.ndarray
    upper: np.ndarray

    def contains(self, X: np.ndarray) -> np.ndarray:
        """Mask of the rows of ``X`` (n, n_features) inside the box; one row gives shape (1,)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return np.all((X > self.lower) & (X <= self.upper), axis=1)

    @property
    def complexity(self) -> int:
        """Number of finite bounds."""
        return int(np.isfinite(self.lower).sum() + np.isfinite(self.upper).sum())

    @property
    def bounded(self) -> tuple[int, ...]:
        """The features the box bounds on either side."""
        return tuple(int(j) for j in np.flatnonzero(np.isfinite(self.lower) | np.isfinite(self.upper)))
