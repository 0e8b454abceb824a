"""T-CREx's fit as first written (commit fbed3c5): the oracle the faster fit of
:mod:`core.tcrex` is checked against (``tests/test_tcrex_speed.py``) and the
reference ``bench/tcrex.py`` times it against. ``TCRExV1`` only replaces the fitting
steps a-e; explanations, text and exports are ``TCREx``'s own."""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np

from core.counterfactual import continuous_outputs, output_mask
from core.ensemble import node_boxes
from core.errors import DataError, GridTooLargeError, NoValidRuleError, QueryError
from core.tcrex import Metarule, Rule, TCREx

__all__ = ["TCRExV1"]


class TCRExV1(TCREx):
    """``TCREx`` with the first version of ``fit`` (same parameters, same attributes)."""

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y_model: Any, target: Any, feature_names: Sequence[str] | None = None) -> "TCREx":
        t0 = time.perf_counter()
        X = np.asarray(X, dtype=float)
        y = np.asarray(y_model)
        if X.ndim != 2 or len(X) != len(y) or len(X) == 0:
            raise DataError(f"X has shape {X.shape} and y_model {y.shape}; expected (n, d) and (n,) with n > 0.")
        if not 0 < self.rho <= 1 or not 0 < self.tau <= 1:
            raise QueryError("rho and tau must lie in (0, 1].")
        n, d = X.shape
        self.n_features_in_ = d
        self.feature_names_ = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
        self.target_ = target
        self.groups_ = [list(g) for g in (self.groups or []) if len(g) >= 2]
        mask = output_mask(y, target)
        if not mask.any():
            raise NoValidRuleError(f"No fitting point has a model output in the target {target!r}.")
        lower, upper = self._candidates(X, y, n, d)                      # step a
        lower, upper = self._categorical_fix(lower, upper)
        inside = np.all((X[None, :, :] > lower[:, None, :]) & (X[None, :, :] <= upper[:, None, :]), axis=2) \
            if len(lower) * n * d <= 5e7 else self._contains_chunked(X, lower, upper)
        count = inside.sum(axis=1)
        acc = np.where(count > 0, (inside & mask[None, :]).sum(axis=1) / np.maximum(count, 1), 0.0)
        feas = count / n
        valid = (acc >= self.tau) & (feas >= self.rho - 1e-12)           # step b, eq. 2
        if not valid.any():
            raise NoValidRuleError(
                f"No rule reaches accuracy {self.tau} with at least {self.rho:.0%} of the data for target "
                f"{target!r}; lower tau or rho.")
        idx = np.flatnonzero(valid)
        lo_v, hi_v = lower[idx], upper[idx]
        keep = self._maximal(lo_v, hi_v)                                  # eqs. 11-12
        order = idx[keep]
        self.rules_ = [Rule(lower[i].copy(), upper[i].copy(), float(acc[i]), float(feas[i])) for i in order]
        try:
            self._build_metarules(d)                                      # steps c-e
        except Exception:
            del self.rules_  # never half fitted
            raise
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _candidates(self, X, y, n, d):
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        leaf = max(1, math.ceil(self.rho * n))
        regression = continuous_outputs(y)
        if self.n_trees == 1:
            cls = DecisionTreeRegressor if regression else DecisionTreeClassifier
            trees = [cls(min_samples_leaf=leaf, random_state=self.random_state).fit(X, y)]
        else:
            cls = RandomForestRegressor if regression else RandomForestClassifier
            trees = cls(self.n_trees, min_samples_leaf=leaf, random_state=self.random_state).fit(X, y).estimators_
        boxes = [node_boxes(t.tree_.children_left, t.tree_.children_right, t.tree_.feature, t.tree_.threshold, d)
                 for t in trees]
        lower = np.vstack([b[0] for b in boxes])
        upper = np.vstack([b[1] for b in boxes])
        # the same box from different trees is one candidate
        key = np.hstack([lower, upper])
        _, first = np.unique(key, axis=0, return_index=True)
        first = np.sort(first)
        return lower[first], upper[first]

    def _categorical_fix(self, lower, upper):
        """Appendix A: clear cold bounds beside a hot one; all-but-one-cold -> one-hot."""
        for g in self.groups_:
            g = np.asarray(g)
            hot = lower[:, g] >= 0.5 - 1e-12          # column > 0.5 (a split at 0.5 or any threshold in [0,1))
            cold = upper[:, g] < 1.0                   # column <= t < 1: must be 0
            lower[:, g] = np.where(hot, 0.5, -np.inf)
            upper[:, g] = np.where(cold & ~hot.any(axis=1, keepdims=True), 0.5, np.inf)
            one_left = (cold.sum(axis=1) == len(g) - 1) & ~hot.any(axis=1)
            for r in np.flatnonzero(one_left):
                j = g[~cold[r]][0]
                lower[r, g] = -np.inf
                upper[r, g] = np.inf
                lower[r, j] = 0.5
        return lower, upper

    def _contains_chunked(self, X, lower, upper):
        out = np.zeros((len(lower), len(X)), dtype=bool)
        for s in range(0, len(lower), 64):
            out[s:s + 64] = np.all((X[None, :, :] > lower[s:s + 64, None, :])
                                   & (X[None, :, :] <= upper[s:s + 64, None, :]), axis=2)
        return out

    def _maximal(self, lo, hi):
        """Rules that are no strict subset of another valid rule (eq. 12; appendix A's u-hat)."""
        hi_hat = hi.copy()
        for g in self.groups_:
            g = np.asarray(g)
            one_hot = np.isfinite(lo[:, g]).any(axis=1)
            sub = hi_hat[:, g]
            sub[one_hot] = np.where(np.isfinite(lo[np.ix_(one_hot, g)]), sub[one_hot], 0.5)
            hi_hat[:, g] = sub
        le_lo = np.all(lo[None, :, :] <= lo[:, None, :], axis=2)      # [i, j]: l_j <= l_i
        le_hi = np.all(hi_hat[:, None, :] <= hi_hat[None, :, :], axis=2)  # [i, j]: u_i <= u_j
        same = np.all(lo[:, None, :] == lo[None, :, :], axis=2) & np.all(hi_hat[:, None, :] == hi_hat[None, :, :],
                                                                           axis=2)
        strict_subset = le_lo & le_hi & ~same
        return ~strict_subset.any(axis=1)

    # ------------------------------------------------------------- grid etc.
    def _build_metarules(self, d):
        from sklearn.tree import DecisionTreeClassifier

        R = len(self.rules_)
        L = np.array([r.lower for r in self.rules_])
        U = np.array([r.upper for r in self.rules_])
        feas = np.array([r.feasibility for r in self.rules_])
        grid = []
        for j in range(d):                                             # step c, eq. 13
            b = np.concatenate([L[:, j], U[:, j]])
            grid.append(np.unique(b[np.isfinite(b)]))
        self.grid_ = grid
        sizes = [g.size + 1 for g in grid]
        n_cells = int(np.prod(np.array(sizes, dtype=float)))
        if n_cells > self.max_cells:
            raise GridTooLargeError(
                f"The grid would have {n_cells:,} cells (limit {self.max_cells:,}); raise tau or rho to get "
                "fewer rules, or raise max_cells.")
        # per feature and interval: is the interval inside rule r? (interval k = (g[k-1], g[k]])
        inside = []
        for j in range(d):
            g = grid[j]
            a = np.concatenate([[-np.inf], g])
            b = np.concatenate([g, [np.inf]])
            inside.append((a[:, None] >= L[None, :, j]) & (b[:, None] <= U[None, :, j]))  # (k_j, R)
        cells = np.empty((n_cells, d), dtype=np.int64)  # every combination (no 32-dimension limit)
        rest = np.arange(n_cells, dtype=np.int64)
        for j in range(d - 1, -1, -1):
            cells[:, j] = rest % sizes[j]
            rest //= sizes[j]
        cells = self._possible_cells(cells)                            # appendix A: skip impossible cells
        changes = np.zeros((len(cells), R))
        for j in range(d):
            changes += ~inside[j][cells[:, j]]
        cost = changes - feas[None, :]                                 # eqs. 9-10
        best = np.argmin(cost, axis=1)                                 # ties: first rule
        self.n_cells_ = len(cells)
        tree = DecisionTreeClassifier(random_state=0).fit(cells, best)  # step e, to purity on cells
        self._inside = inside
        self._from_sklearn_tree(tree.tree_, cells, best, inside)

    def _possible_cells(self, cells):
        if not self.groups_:
            return cells
        ok = np.ones(len(cells), dtype=bool)
        for g in self.groups_:
            hot = np.zeros(len(cells), dtype=int)
            for j in g:
                gj = self.grid_[j]
                if gj.size == 0:
                    continue
                k_half = int(np.searchsorted(gj, 0.5, side="left"))  # cells above 0.5 hold the value 1
                hot += cells[:, j] > k_half
            ok &= hot <= 1
        return cells[ok]

    def _from_sklearn_tree(self, tr, cells, best, inside):
        """Metarule tree with thresholds mapped from grid coordinates to grid bounds."""
        n = tr.node_count
        feat = np.where(tr.children_left < 0, -1, tr.feature).astype(np.int64)
        thr = np.full(n, np.nan)
        for i in np.flatnonzero(feat >= 0):
            k = int(math.floor(tr.threshold[i]))  # cell index <= k  <=>  x <= grid[k]
            thr[i] = self.grid_[feat[i]][k]
        rule = np.full(n, -1)
        leaves = np.flatnonzero(feat < 0)
        rule[leaves] = tr.value[leaves, 0, :].argmax(axis=1)
        classes = np.unique(best)
        rule[leaves] = classes[rule[leaves]]
        self.metarule_tree_ = {"feature": feat, "threshold": thr, "left": tr.children_left.astype(np.int64),
                               "right": tr.children_right.astype(np.int64), "rule": rule}
        d = self.n_features_in_
        lo = np.full((n, d), -np.inf)
        hi = np.full((n, d), np.inf)
        klo = np.zeros((n, d), dtype=int)
        khi = np.array([[g.size for g in self.grid_]] * n)
        for i in range(n):
            left, right = tr.children_left[i], tr.children_right[i]
            if left < 0:
                continue
            f = feat[i]
            k = int(math.floor(tr.threshold[i]))
            for c in (left, right):
                lo[c], hi[c], klo[c], khi[c] = lo[i], hi[i], klo[i], khi[i]
            hi[left, f], khi[left, f] = thr[i], k
            lo[right, f], klo[right, f] = thr[i], k + 1
        metas = []
        for i in leaves:
            r = int(rule[i])
            worst = sum(int(not inside[j][klo[i, j]:khi[i, j] + 1, r].all()) for j in range(d))
            metas.append(Metarule(lo[i], hi[i], r, worst, int(i)))
        self.metarules_ = metas
