"""The counterfactual-rules estimator: the surrogate forest and its fitted state;
the estimators, the search and the sampling are mixed in from their modules."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from sklearn.ensemble import IsolationForest, RandomForestClassifier, RandomForestRegressor

from core.counterfactual import continuous_outputs, output_mask
from core.errors import DataError, NoCounterfactualRuleError, NotFittedError, QueryError
from core.model import as_ensemble
from core.rules.bitsets import _pack
from core.rules.engines import _Estimators
from core.rules.results import RuleLevels
from core.rules.sampling import _Sampling
from core.rules.search import _RuleSearch


class CounterfactualRules(_Estimators, _RuleSearch, _Sampling):
    """Local and regional counterfactual rules from a random-forest surrogate.

    Parameters
    ----------
    n_estimators, max_depth : the surrogate forest (paper: 20 trees, depth 10).
    pi : CDP level of a divergent explanation; pi_c : CRP level of a rule.
    top_k : the search for S runs over the top_k features most used by the
        surrogate's splits.
    groups : one-hot groups as lists of column indices (moved together).
    random_state : seeds the surrogate, the Isolation Forest and sampling.
    max_rows : the surrogate is fitted on every row, but CDP, CRP and the
        samples use at most this many rows (a seeded sample): the cell
        computations scale with it. Measured on Adult (34k training rows):
        8,000 rows gave the same correctness / plausibility as all rows
        (1.0 / 0.95 on 40 rows) at 0.20 s instead of 0.56 s per rule.

    Attributes (after ``fit``)
    --------------------------
    surrogate_ : the fitted scikit-learn forest; ensemble_ : its TreeEnsemble.
    isolation_ : the Isolation Forest fitted on X (plausibility, sampling).
    feature_usage_ : number of surrogate splits per column.
    fidelity_ : share of the fitting rows where the surrogate reproduces the
        model's output (classification) or R^2 (regression).
    fit_time_ : seconds.
    """

    def __init__(self, n_estimators: int = 20, max_depth: int | None = 10, pi: float = 0.9, pi_c: float = 0.9,
                 top_k: int = 10, groups: Sequence[Sequence[int]] | None = None, random_state: int | None = None,
                 n_jobs: int | None = None, max_rows: int = 8_000):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.pi = pi
        self.pi_c = pi_c
        self.top_k = top_k
        self.groups = groups
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.max_rows = max_rows

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y_model: Any, feature_names: Sequence[str] | None = None) -> "CounterfactualRules":
        t0 = time.perf_counter()
        X = np.ascontiguousarray(X, dtype=float)
        y = np.asarray(y_model)
        if X.ndim != 2 or len(X) != len(y) or len(X) < 2:
            raise DataError(f"X has shape {X.shape} and y_model {y.shape}; expected (n, d) and (n,) with n >= 2.")
        if not np.all(np.isfinite(X)):
            raise DataError("X has missing or infinite values; clean or impute them before fitting.")
        self._levels(None, None, None)                    # the defaults must be valid levels
        n, d = X.shape
        self.n_features_in_ = d
        self.feature_names_ = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
        self.regression_ = continuous_outputs(y)
        cls = RandomForestRegressor if self.regression_ else RandomForestClassifier
        rf = cls(n_estimators=self.n_estimators, max_depth=self.max_depth, random_state=self.random_state,
                 n_jobs=self.n_jobs).fit(X, y)
        self.surrogate_ = rf
        self.ensemble_ = ens = as_ensemble(rf, verify=False)
        pred = rf.predict(X)
        if self.regression_:
            var = float(np.var(y))
            self.fidelity_ = float(1 - np.mean((pred - y) ** 2) / var) if var > 0 else 1.0
        else:
            self.fidelity_ = float(np.mean(pred == y))
        if n > self.max_rows:      # the estimates use a random sample of the rows
            keep = np.sort(np.random.default_rng(self.random_state).choice(n, self.max_rows, replace=False))
            X, y, n = X[keep], y[keep], self.max_rows
        self.X_, self.y_ = X, y
        self._n = n
        self._words = (n + 63) // 64
        self._valid = _pack(np.ones(n, dtype=bool), self._words)
        # leaves of every tree, one global numbering, contiguous per tree
        los, his, gids, starts = [], [], [], []
        offset = 0
        for tree in ens.trees:
            leaves, lo, hi = tree.leaf_boxes(d)
            gid = np.full(tree.n_nodes, -1, dtype=np.int64)
            gid[leaves] = offset + np.arange(len(leaves))
            starts.append(offset)
            offset += len(leaves)
            los.append(lo)
            his.append(hi)
            gids.append(gid)
        self._LO, self._HI = np.vstack(los), np.vstack(his)
        self._starts = np.asarray(starts)
        nodes = ens.apply(X)
        self._gid = gids
        self._Lg = np.stack([gids[t][nodes[:, t]] for t in range(ens.n_trees)], axis=1)
        self._cnt = np.bincount(self._Lg.ravel(), minlength=offset).astype(float)
        # units: one-hot groups move as one
        unit_of = np.arange(d)
        units: list[list[int]] = []
        grouped = set()
        for g in self.groups or []:
            g = sorted(int(j) for j in g)
            if len(g) >= 2:
                for j in g:
                    unit_of[j] = len(units)
                    grouped.add(j)
                units.append(g)
        for j in range(d):
            if j not in grouped:
                unit_of[j] = len(units)
                units.append([j])
        self._units, self._unit_of = units, unit_of
        usage = ens.split_counts()
        self.feature_usage_ = usage
        self._unit_usage = np.array([usage[u].sum() for u in units])
        iso = IsolationForest(contamination=0.1, random_state=self.random_state).fit(X)
        self.isolation_ = iso
        self._iso = as_ensemble(iso, verify=False)
        self._build_flat()
        self._ybits: dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.fit_time_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------ internals
    def _build_flat(self) -> None:
        """Trees concatenated for the compiled kernel, and every split's
        left-going rows as a bitset (shared with the numpy version)."""
        trees = self.ensemble_.trees
        sizes = np.array([t.n_nodes for t in trees])
        off = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self._node_off = off
        cl = np.concatenate([np.where(t.children_left >= 0, t.children_left + o, -1) for t, o in zip(trees, off)])
        cr = np.concatenate([np.where(t.children_right >= 0, t.children_right + o, -1) for t, o in zip(trees, off)])
        self._flat = dict(cl=cl.astype(np.int32), cr=cr.astype(np.int32),
                          feat=np.concatenate([t.feature for t in trees]).astype(np.int32),
                          thr=np.nan_to_num(np.concatenate([t.threshold for t in trees])),
                          roots=off.astype(np.int64))
        bits = np.zeros((int(sizes.sum()), self._words), dtype=np.uint64)
        for t, o in zip(trees, off):
            internal = np.flatnonzero(t.children_left >= 0)
            if len(internal):
                go = self.X_[:, t.feature[internal]] <= t.threshold[internal]          # (n, k)
                packed = np.packbits(go, axis=0, bitorder="little")                     # (ceil(n/8), k)
                buf = np.zeros((len(internal), self._words * 8), dtype=np.uint8)
                buf[:, :packed.shape[0]] = packed.T
                bits[o + internal] = buf.view(np.uint64)
        self._bits = bits

    def _check_fitted(self) -> None:
        if not hasattr(self, "ensemble_"):
            raise NotFittedError("CounterfactualRules is not fitted; call fit(X, y_model) first.")

    def _row(self, x: Any) -> np.ndarray:
        self._check_fitted()
        x = np.asarray(x, dtype=float).ravel()
        if x.shape != (self.n_features_in_,) or not np.all(np.isfinite(x)):
            raise QueryError(f"x must be {self.n_features_in_} finite numbers; got shape {x.shape}.")
        return x

    def _target(self, target: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask over fitted rows, its bitset, per-leaf count of target rows)."""
        key = repr(target)
        if key not in self._ybits:
            mask = output_mask(self.y_, target)
            if not mask.any():
                raise NoCounterfactualRuleError(f"No fitted row has a model output in the target {target!r}.")
            pos = np.bincount(self._Lg.ravel(), weights=np.repeat(mask.astype(float), self._Lg.shape[1]),
                              minlength=len(self._cnt))
            self._ybits[key] = (mask, _pack(mask, self._words), pos)
        return self._ybits[key]

    def _left_bits(self, t: int, v: int) -> np.ndarray:
        return self._bits[self._node_off[t] + v]

    def _levels(self, pi: float | None, pi_c: float | None, top_k: int | None) -> "RuleLevels":
        """The query's levels: the given ones, else the estimator's defaults."""
        lv = RuleLevels(float(self.pi if pi is None else pi), float(self.pi_c if pi_c is None else pi_c),
                        int(self.top_k if top_k is None else top_k))
        if not (0 < lv.pi <= 1 and 0 < lv.pi_c <= 1):
            raise QueryError(f"pi and pi_c must lie in (0, 1]; got {lv.pi} and {lv.pi_c}.")
        if lv.top_k < 1:
            raise QueryError(f"top_k must be at least 1; got {lv.top_k}.")
        return lv

    def candidate_units(self, fixed: Sequence[int] = (), top_k: int | None = None) -> list[int]:
        """The top_k actionable units (one-hot groups or columns) by split usage."""
        self._check_fitted()
        top_k = self._levels(None, None, top_k).top_k
        frozen = {int(self._unit_of[j]) for j in fixed}
        order = [u for u in np.argsort(-self._unit_usage, kind="stable")
                 if u not in frozen and self._unit_usage[u] > 0]
        return [int(u) for u in order[:top_k]]

    def _columns(self, units: Sequence[int]) -> tuple[int, ...]:
        return tuple(sorted(j for u in units for j in self._units[u]))

    def _global_leaves(self, Z: np.ndarray) -> np.ndarray:
        nodes = self.ensemble_.apply(Z)
        return np.stack([self._gid[t][nodes[:, t]] for t in range(nodes.shape[1])], axis=1)

    def _full(self, S: tuple[int, ...], part: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(self.n_features_in_, fill)
        out[list(S)] = part
        return out

    def inlier(self, X: np.ndarray) -> np.ndarray:
        """The Isolation Forest's inlier verdict (decision_function >= 0)."""
        self._check_fitted()
        return self._iso.decision_function(np.atleast_2d(X)) >= 0
