"""T-CREx's rule membership as first written (before commit 9e087d1): every fitting
row compared with both bounds of every feature of every candidate box. The faster
membership of :mod:`core.tcrex` (each box's finite bounds only, each comparison
once for all boxes) is checked against it (``tests/analyses/test_tcrex_speed.py``: the same
rules, grid, metarule tree, explanations, text and JSON), and ``bench/tcrex.py``
times the fit against it. ``TCRExV1`` replaces that one step; everything else is
``TCREx``'s own, so the two differ only where the speed-up did."""

from __future__ import annotations

import numpy as np

from core.tcrex import TCREx

__all__ = ["TCRExV1"]


class TCRExV1(TCREx):
    """``TCREx`` with the first version of the membership step (step b's counts)."""

    @staticmethod
    def _contains(X, lower, upper):
        if len(lower) * len(X) * X.shape[1] <= 5e7:
            return np.all((X[None, :, :] > lower[:, None, :]) & (X[None, :, :] <= upper[:, None, :]), axis=2)
        out = np.zeros((len(lower), len(X)), dtype=bool)
        for s in range(0, len(lower), 64):
            out[s:s + 64] = np.all((X[None, :, :] > lower[s:s + 64, None, :])
                                   & (X[None, :, :] <= upper[s:s + 64, None, :]), axis=2)
        return out
