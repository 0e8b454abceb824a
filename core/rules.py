"""Counterfactual rules: local and regional (Amoukou & Brunel, paper 000).

A random-forest surrogate ``m`` is fitted on ``(X, f(X))``, the audited
model's outputs. Its training points and leaves give two estimators:

* **CDP** (Counterfactual Decision Probability, definition "CDP", estimator
  eq. ``CDP_estimator``): ``P(f(X) in Y* | X_Sbar = x_Sbar)`` by the
  *Projected Forest*: in every tree, ``x`` is dropped down with the splits on
  ``S`` sent both ways; the training points kept are those lying in the
  intersection of the reached leaves (equivalently: they agree with ``x`` at
  every reached split on a feature outside ``S``). Per tree,
  ``w_i = 1[i kept] / #kept``; ``CDP = mean_t sum_i w_i 1[Y_i in Y*]`` over the
  trees whose cell holds at least one training point. Implemented with bitsets
  over the training points (one per split node, built on first use) and
  evaluated for every subset of one size at once: at a split on a candidate
  feature the cell is ``left & right`` for the subsets containing it and
  ``agree & child`` for the others.
* **CRP** (Counterfactual Rule Probability, eqs. ``crp_instance`` and
  ``crp_rule``) by the *Regional RF*: at a split on a feature constrained to an
  interval ``(a, b]`` the query goes left if ``b <= t``, right if ``a > t``,
  both ways otherwise (a point ``x`` is the interval ``(x-, x]``); as the
  appendix "Regional RF detailed" argues, the estimate per tree is the share of
  target outputs among the training points in the union of the reached
  leaves, averaged over trees.

Search and rules (section "Learning the Counterfactual Rules"):

* **Minimal divergent explanations** (definition "minimal_countset"): subsets
  ``S`` of the ``top_k`` features most used by the surrogate's splits, by
  increasing size; all subsets of the first size with ``CDP >= pi``.
  Immutable features are never candidates. One-hot groups count as one
  feature (all their columns move together).
* **Local-CR** (definition "local_counterfactual_rule"): the training points
  with positive projected weight and a target output give the possible leaves:
  their forest cells (intersection of their leaves in every tree) restricted
  to ``S``. Cells with ``CRP >= pi_c`` are kept and merged greedily: starting
  from the best, a touching cell is absorbed when the bounding box of the
  union keeps ``CRP >= pi_c``. Cells that cannot be merged form the
  alternatives (the union is then disconnected, or joining it would drop below
  ``pi_c``).
* **Regional-CR** (definition "regional_rule"): the same for a box ``R``,
  conditioning on ``X_Sbar in R_Sbar`` with the Regional RF (CDP of a rule is
  the Regional RF with the ``S`` splits sent both ways).
* **Counterfactual samples** (appendix listing): simulated annealing over
  training values inside the rule, maximising the Isolation Forest's
  ``decision_function``; a candidate replaces the values of every feature of
  ``S`` by those of a training row lying inside the rule on that feature. The
  listing's acceptance test ``exp(-diff / t)`` always accepts a worse move;
  here a worse move is accepted with probability ``exp(diff / t)``, the usual
  Metropolis rule, with ``t = temp / log(i + 2)``.
* **Metrics** (section "Experiments"): correctness (share of counterfactual
  samples the audited model puts in ``Y*``), plausibility (share of samples the
  Isolation Forest fitted on the data calls inliers), sparsity (mean number of
  changed columns), coverage (share of queried rows that received a rule).

Intervals are half-open like tree splits: a value ``v`` satisfies a rule on
feature ``j`` iff ``lower[j] < v <= upper[j]``.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from core.counterfactual import continuous_outputs, output_mask
from core.errors import DataError, NoCounterfactualRuleError, NotFittedError, QueryError
from core.jsonable import finite_or_none, plain
from core.ruletext import rule_text

try:  # compiled projected-forest cells (core/_projected.c); numpy does the same more slowly
    from core import _projected
except ImportError:  # pragma: no cover - the build is optional
    _projected = None

USE_COMPILED = _projected is not None

__all__ = ["CounterfactualRules", "LocalRule", "RegionalRule", "NoCounterfactualRuleError",
           "region_from_filter", "rule_metrics"]


@dataclass(frozen=True)
class Box:
    """One rule on the features of ``S``: ``lower < x <= upper``; +-inf elsewhere."""

    lower: np.ndarray
    upper: np.ndarray
    crp: float
    n_cells: int


@dataclass(frozen=True)
class LocalRule:
    """A local counterfactual rule for one row.

    features : column indices of S (the minimal divergent explanation).
    lower, upper : float arrays of length n_features, -inf / +inf outside S.
    cdp : CDP of S for the row; crp : CRP of the rule (surrogate estimates).
    divergent : False when no subset of the top_k features reached ``pi``
        (S is then the subset with the highest CDP).
    alternatives : other rules (disconnected parts of the possible leaves).
    divergent_sets : every minimal divergent explanation found, with its CDP.
    below_pi_c : no possible region reached the estimator's pi_c; the rule is the
        possible cell with the highest CRP (its ``crp`` says how likely it works).
    """

    x: np.ndarray
    target: Any
    features: tuple[int, ...]
    lower: np.ndarray
    upper: np.ndarray
    cdp: float
    crp: float
    divergent: bool
    n_cells: int
    alternatives: tuple[Box, ...] = ()
    divergent_sets: tuple[tuple[tuple[int, ...], float], ...] = ()
    time: float = 0.0
    below_pi_c: bool = False

    @property
    def constrained(self) -> tuple[int, ...]:
        """The features of S the rule bounds (the others may keep any value)."""
        return tuple(j for j in self.features if np.isfinite(self.lower[j]) or np.isfinite(self.upper[j]))

    def contains(self, X: np.ndarray) -> np.ndarray:
        """Rows whose S-values satisfy the rule (other features ignored)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return np.all((X > self.lower) & (X <= self.upper), axis=1)

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        def box(lower, upper) -> dict[str, list[float | None]]:
            return {names[j]: [finite_or_none(lower[j]), finite_or_none(upper[j])] for j in self.features}

        return {"target": plain(self.target), "features": [names[j] for j in self.features],
                "intervals": box(self.lower, self.upper),
                "cdp": self.cdp, "crp": self.crp, "divergent": self.divergent,
                "alternatives": [box(b.lower, b.upper) | {"crp": b.crp} for b in self.alternatives]}

    def to_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        return rule_text(self.features, self.lower, self.upper, names, groups)


@dataclass(frozen=True)
class RegionalRule:
    """A regional counterfactual rule for the box ``region_lower < x <= region_upper``.

    coverage : share of the fitted rows inside the region; n_rows their count.
    The rule fields are those of :class:`LocalRule`; ``features`` is empty and
    ``note`` says why when no rule was found.
    """

    region_lower: np.ndarray
    region_upper: np.ndarray
    target: Any
    coverage: float
    n_rows: int
    features: tuple[int, ...] = ()
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    cdp: float = 0.0
    crp: float = 0.0
    divergent: bool = False
    alternatives: tuple[Box, ...] = ()
    note: str = ""

    @property
    def found(self) -> bool:
        return self.lower is not None

    def region_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        cols = [j for j in range(len(self.region_lower))
                if np.isfinite(self.region_lower[j]) or np.isfinite(self.region_upper[j])]
        return rule_text(cols, self.region_lower, self.region_upper, names, groups) or "all rows"

    def to_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        return rule_text(self.features, self.lower, self.upper, names, groups) if self.found else ""


# --------------------------------------------------------------------- helpers
def _pack(mask: np.ndarray, words: int) -> np.ndarray:
    b = np.packbits(mask, bitorder="little")
    out = np.zeros(words * 8, dtype=np.uint8)
    out[:b.size] = b
    return out.view(np.uint64)


def _unpack(bits: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(bits.view(np.uint8), bitorder="little")[:n].astype(bool)


def _popcount(bits: np.ndarray) -> np.ndarray:
    return np.bitwise_count(bits).sum(axis=-1, dtype=np.int64)


def _below(v: np.ndarray) -> np.ndarray:
    """The point ``v`` as the half-open interval ``(below(v), v]``."""
    return np.nextafter(v, -np.inf)


def region_from_filter(text: str, feature_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A box from a filter such as ``"Age >= 30 and Income < 5e4"``: ``(lower, upper)``
    with ``lower < x <= upper`` (the grammar and its errors: :mod:`core.filters`)."""
    from core.filters import parse_filter

    return parse_filter(text, feature_names)


def rule_metrics(X: np.ndarray, X_cf: np.ndarray, in_target: np.ndarray, inlier: np.ndarray,
                 found: np.ndarray) -> dict[str, float]:
    """The paper's correctness, plausibility, sparsity and coverage.

    X, X_cf : queried rows and their counterfactual samples (rows without a
    rule are ignored except in coverage); in_target : the audited model's
    output of each sample is in Y*; inlier : the Isolation Forest calls it an
    inlier; found : a rule and a sample exist for the row.
    """
    found = np.asarray(found, dtype=bool)
    k = int(found.sum())
    if k == 0:
        return {"correctness": float("nan"), "plausibility": float("nan"), "sparsity": float("nan"),
                "coverage": 0.0, "n": int(len(found))}
    changed = (np.asarray(X)[found] != np.asarray(X_cf)[found]).sum(axis=1)
    return {"correctness": float(np.mean(np.asarray(in_target)[found])),
            "plausibility": float(np.mean(np.asarray(inlier)[found])),
            "sparsity": float(changed.mean()), "coverage": k / len(found), "n": int(len(found))}


# ------------------------------------------------------------------ estimator
@dataclass(frozen=True)
class RuleLevels:
    """A query's levels: pi (CDP of a divergent set), pi_c (CRP of a rule), and
    the number of most-used features searched (top_k)."""

    pi: float = 0.9
    pi_c: float = 0.9
    top_k: int = 10


class CounterfactualRules:
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
        from sklearn.ensemble import IsolationForest, RandomForestClassifier, RandomForestRegressor

        from core.ensemble import from_model

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
        self.ensemble_ = ens = from_model(rf, verify=False)
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
        self._iso = from_model(iso, verify=False)
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

    def _counts(self, x: np.ndarray, free: np.ndarray, target: Any = None, weights: bool = False):
        """Compiled projected-forest cells: (cnt, pos) of shape (M, T) for the
        boolean column masks ``free`` (M, d) (pos counts target rows; 0 without
        a target), and the weights of the rows for one subset."""
        if target is None:
            ybool, ybits = np.zeros(self._n, dtype=np.uint8), np.zeros(self._words, dtype=np.uint64)
        else:
            mask, ybits, _ = self._target(target)
            ybool = mask.astype(np.uint8)
        fl = self._flat
        m, T = len(free), self.ensemble_.n_trees
        cnt = np.zeros((m, T), dtype=np.int64)
        pos = np.zeros((m, T), dtype=np.int64)
        w = np.zeros(self._n) if weights else None
        free = np.ascontiguousarray(free, dtype=np.uint8)
        x = np.ascontiguousarray(x)

        def run(a: int, b: int) -> None:
            _projected.counts(fl["cl"], fl["cr"], fl["feat"], fl["thr"], fl["roots"], x, free[a:b], self.X_,
                              ybool, self._bits, self._valid, ybits, cnt[a:b], pos[a:b], w,
                              self.n_features_in_, self._words)

        if m >= 32 and not weights:      # the kernel releases the GIL: two threads
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(2) as ex:
                list(ex.map(lambda ab: run(*ab), [(0, m // 2), (m // 2, m)]))
        else:
            run(0, m)
        return cnt, pos, w

    @staticmethod
    def _mean_share(cnt: np.ndarray, pos: np.ndarray) -> np.ndarray:
        ok = cnt > 0
        used = ok.sum(axis=1)
        share = np.where(ok, pos / np.maximum(cnt, 1), 0.0).sum(axis=1)
        return np.where(used > 0, share / np.maximum(used, 1), 0.0)

    def _free_columns(self, cand: Sequence[int], subsets: np.ndarray) -> np.ndarray:
        free = np.zeros((len(subsets), self.n_features_in_), dtype=bool)
        for k, u in enumerate(cand):
            free[np.ix_(subsets[:, k], self._units[u])] = True
        return free

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

    def _cells(self, x: np.ndarray, cand: Sequence[int], subsets: np.ndarray, level: int) -> list[Any]:
        """Projected-forest cells of ``x`` per tree for every subset (rows of
        ``subsets``, bool over ``cand``): an array (M, words), (words,) when the
        same for all subsets, or None for all rows.

        A node reached only when the candidate units ``need`` are free matters
        only to the subsets containing ``need``: results are kept on those
        subsets alone, so the work follows the (node, subset) pairs that exist.
        """
        pos = np.full(len(self._units), -1)
        pos[list(cand)] = np.arange(len(cand))
        upos = pos[self._unit_of]
        m = len(subsets)
        smask = (subsets.astype(np.int64) << np.arange(subsets.shape[1])).sum(axis=1) if m else np.zeros(0, int)
        index: dict[int, np.ndarray] = {0: np.arange(m)}
        where: dict[tuple[int, int], np.ndarray] = {}

        def idx(need: int) -> np.ndarray:
            got = index.get(need)
            if got is None:
                got = index[need] = np.flatnonzero((smask & need) == need)
            return got

        out = []
        for t, tree in enumerate(self.ensemble_.trees):
            cl, cr, ft, th = tree.children_left, tree.children_right, tree.feature, tree.threshold

            def ev(v: int, need: int) -> Any:
                if cl[v] < 0:
                    return None
                f = ft[v]
                left = x[f] <= th[v]
                cx, co = (cl[v], cr[v]) if left else (cr[v], cl[v])
                bits = self._left_bits(t, v)
                agree = bits if left else ~bits
                rx = ev(cx, need)
                fixed = agree if rx is None else agree & rx
                c = upos[f]
                if c < 0:
                    return fixed
                nn = need | (1 << int(c))
                if nn.bit_count() > level:
                    return fixed          # no subset of this size frees this split here
                sub = idx(nn)
                if not len(sub):
                    return fixed
                ro = ev(co, nn)
                key = (need, int(c))
                at = where.get(key)
                if at is None:
                    at = where[key] = np.searchsorted(idx(need), sub)
                rxs = rx if rx is None or rx.ndim == 1 else rx[at]
                free = rxs if ro is None else (ro if rxs is None else rxs & ro)
                if free is None:
                    free = self._valid
                full = len(idx(need))
                res = np.empty((full, self._words), dtype=np.uint64)
                res[:] = fixed
                res[at] = free
                return res

            out.append(ev(0, 0))
        return out

    def _cdp_from_cells(self, cells: list[Any], ybits: np.ndarray, m: int) -> np.ndarray:
        num = np.zeros(m)
        used = np.zeros(m)
        for c in cells:
            c = self._valid if c is None else c & self._valid
            cnt = np.broadcast_to(_popcount(c), (m,))
            pos = np.broadcast_to(_popcount(c & ybits), (m,))
            ok = cnt > 0
            num += np.where(ok, pos / np.maximum(cnt, 1), 0.0)
            used += ok
        return np.where(used > 0, num / np.maximum(used, 1), 0.0)

    def _search(self, cdp_of: Callable[[np.ndarray, int], np.ndarray], cand: list[int], pi: float, keep: int = 10):
        """Subsets of ``cand`` by increasing size; stop at the first size with
        CDP >= pi and return all of them (the minimal divergent explanations),
        best first, with True. When no subset reaches pi: the ``keep`` subsets
        with the highest CDP, smallest first, and False."""
        seen: list[tuple[float, int, tuple[int, ...]]] = []
        for s in range(1, len(cand) + 1):
            combos = list(itertools.combinations(range(len(cand)), s))
            subsets = np.zeros((len(combos), len(cand)), dtype=bool)
            for i, cmb in enumerate(combos):
                subsets[i, list(cmb)] = True
            cdp = cdp_of(subsets, s)
            hits = np.flatnonzero(cdp >= pi - 1e-12)
            if len(hits):
                found = sorted(((tuple(cand[k] for k in combos[h]), float(cdp[h])) for h in hits),
                               key=lambda p: -p[1])
                return found, True
            top = np.argsort(-cdp, kind="stable")[:keep]
            seen.extend((float(cdp[i]), s, tuple(cand[k] for k in combos[i])) for i in top)
        seen.sort(key=lambda p: (-p[0], p[1]))
        top = sorted(seen[:keep], key=lambda p: (p[1], -p[0]))    # the sparsest of the best first
        return [(u, c) for c, _, u in top], False

    # ---------------------------------------------------------- probabilities
    def cdp(self, x: Any, S: Sequence[int], target: Any) -> float:
        """CDP_S(Y*; x) = P(f(X) in Y* | X_Sbar = x_Sbar) by the Projected Forest.
        ``S``: column indices (a one-hot group is freed whole if any of its columns is in S)."""
        self._check_fitted()
        x = self._row(x)
        units = sorted({int(self._unit_of[j]) for j in S})
        _, ybits, _ = self._target(target)
        sub = np.ones((1, len(units)), dtype=bool)
        if USE_COMPILED:
            cnt, pos, _ = self._counts(x, self._free_columns(units, sub), target)
            return float(self._mean_share(cnt, pos)[0])
        cells = self._cells(x, units, sub, len(units))
        return float(self._cdp_from_cells(cells, ybits, 1)[0])

    def projected_weights(self, x: Any, S: Sequence[int]) -> np.ndarray:
        """Projected Forest weights ``w_i(x_Sbar)`` of the fitted rows (sum 1,
        or all 0 when no tree's cell holds a fitted row)."""
        self._check_fitted()
        x = self._row(x)
        units = sorted({int(self._unit_of[j]) for j in S})
        sub = np.ones((1, len(units)), dtype=bool)
        if USE_COMPILED:
            cnt, _, w = self._counts(x, self._free_columns(units, sub), weights=True)
            used = int((cnt > 0).sum())
            return w / used if used else w
        cells = self._cells(x, units, sub, len(units))
        w = np.zeros(self._n)
        used = 0
        for c in cells:
            c = self._valid if c is None else (c & self._valid).reshape(-1)
            keep = _unpack(c, self._n)
            if keep.any():
                w[keep] += 1.0 / keep.sum()
                used += 1
        return w / used if used else w

    def _crp_batch(self, qlo: np.ndarray, qhi: np.ndarray, pos: np.ndarray,
                   base: np.ndarray | None = None, dims: np.ndarray | None = None) -> np.ndarray:
        """Regional-RF CRP of query boxes (Q, len(dims)) on the columns ``dims``,
        only the leaves in ``base`` (all when None) being candidates."""
        return self._crp_fn(pos, base, dims)(qlo, qhi)

    def _crp_fn(self, pos: np.ndarray, base: np.ndarray | None, dims: np.ndarray
                ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """``_crp_batch`` with the leaves, their bounds and counts prepared once."""
        leaves = np.arange(len(self._cnt)) if base is None else np.flatnonzero(base)
        tree_of = np.searchsorted(self._starts, leaves, side="right") - 1
        onehot = np.zeros((len(leaves), len(self._starts)))
        onehot[np.arange(len(leaves)), tree_of] = 1.0
        cnt_l, pos_l = onehot * self._cnt[leaves, None], onehot * pos[leaves, None]
        LO, HI = self._LO[np.ix_(leaves, dims)], self._HI[np.ix_(leaves, dims)]
        step = max(1, int(2e7 // max(1, LO.size)))

        def crp(qlo: np.ndarray, qhi: np.ndarray) -> np.ndarray:
            out = np.empty(qlo.shape[0])
            for a in range(0, qlo.shape[0], step):
                lo, hi = qlo[a:a + step], qhi[a:a + step]
                reach = np.all((lo[:, None, :] < HI[None]) & (hi[:, None, :] > LO[None]), axis=2).astype(float)
                out[a:a + step] = self._mean_share(reach @ cnt_l, reach @ pos_l)
            return out

        return crp

    def _crp_from_reach(self, reach: np.ndarray, pos: np.ndarray) -> np.ndarray:
        cnt_t = np.add.reduceat(reach * self._cnt[None, :], self._starts, axis=1)
        pos_t = np.add.reduceat(reach * pos[None, :], self._starts, axis=1)
        return self._mean_share(cnt_t, pos_t)

    def crp(self, x: Any, lower: np.ndarray, upper: np.ndarray, target: Any,
            S: Sequence[int] | None = None) -> float:
        """CRP: P(f(X) in Y* | X_S in (lower, upper], X_Sbar = x_Sbar) by the
        Regional RF; S defaults to the columns with a finite bound."""
        self._check_fitted()
        x = self._row(x)
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        inS = np.isfinite(lower) | np.isfinite(upper)
        if S is not None:
            inS = np.isin(np.arange(len(x)), list(S))
        qlo = np.where(inS, lower, _below(x))
        qhi = np.where(inS, upper, x)
        _, _, pos = self._target(target)
        return float(self._crp_batch(qlo[None], qhi[None], pos, dims=np.arange(len(x)))[0])

    def regional_crp(self, region_lower: np.ndarray, region_upper: np.ndarray, target: Any,
                     lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> float:
        """P(f(X) in Y* | X_S in rule, X_Sbar in region_Sbar); without a rule,
        P(f(X) in Y* | X in region)."""
        self._check_fitted()
        qlo, qhi = np.asarray(region_lower, float).copy(), np.asarray(region_upper, float).copy()
        if lower is not None:
            S = np.isfinite(lower) | np.isfinite(upper)
            qlo[S], qhi[S] = np.asarray(lower)[S], np.asarray(upper)[S]
        _, _, pos = self._target(target)
        return float(self._crp_batch(qlo[None], qhi[None], pos, dims=np.arange(len(qlo)))[0])

    # --------------------------------------------------------------- search
    def minimal_divergent_explanations(self, x: Any, target: Any, fixed: Sequence[int] = (), *,
                                       pi: float | None = None, top_k: int | None = None
                                       ) -> list[tuple[tuple[int, ...], float]]:
        """All minimal S (column tuples) with CDP >= pi among the top_k
        actionable features, best first, with their CDP; [] if none."""
        found, ok = self._local_search(self._row(x), target, fixed, self._levels(pi, None, top_k))
        return [(self._columns(u), c) for u, c in found] if ok else []

    def _local_search(self, x: np.ndarray, target: Any, fixed: Sequence[int], lv: "RuleLevels"):
        self._check_fitted()
        _, ybits, _ = self._target(target)
        cand = self.candidate_units(fixed, lv.top_k)
        if not cand:
            raise NoCounterfactualRuleError("No feature can change: every feature the surrogate uses is "
                                            "immutable (fixed).")

        def cdp_of(subsets: np.ndarray, level: int) -> np.ndarray:
            if USE_COMPILED:
                cnt, pos, _ = self._counts(x, self._free_columns(cand, subsets), target)
                return self._mean_share(cnt, pos)
            return self._cdp_from_cells(self._cells(x, cand, subsets, level), ybits, len(subsets))

        return self._search(cdp_of, cand, lv.pi)

    def _global_leaves(self, Z: np.ndarray) -> np.ndarray:
        nodes = self.ensemble_.apply(Z)
        return np.stack([self._gid[t][nodes[:, t]] for t in range(nodes.shape[1])], axis=1)

    def _possible_cells(self, rows: np.ndarray, S: tuple[int, ...], x: np.ndarray | None = None,
                        pos: np.ndarray | None = None, limit: int = 2000
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Candidate boxes on the columns ``S``: for each row, the forest cell
        (intersection over trees of the leaves) of the hybrid point taking the
        row's values on ``S`` and ``x``'s elsewhere, restricted to ``S``;
        deduplicated, with the number of rows behind each (at most ``limit``
        rows, a seeded sample beyond). Without ``x``, the rows' own cells
        (regional rules). With ``x`` and ``pos``, also each cell's CRP: the box
        with ``x`` on the other columns reaches exactly the hybrid's leaf in
        every tree (any other leaf holding ``x`` there is disjoint from it on
        ``S``), so the Regional RF estimate is the mean of those leaves' shares."""
        if len(rows) > limit:
            rows = np.sort(np.random.default_rng(self.random_state).choice(rows, limit, replace=False))
        Z = self.X_[rows].copy()
        if x is not None:
            rest = np.setdiff1d(np.arange(self.n_features_in_), S)
            Z[:, rest] = x[rest]
        g = self._global_leaves(Z) if x is not None else self._Lg[rows]
        lo = self._LO[g][:, :, S].max(axis=1)
        hi = self._HI[g][:, :, S].min(axis=1)
        key, first, mass = np.unique(np.hstack([lo, hi]), axis=0, return_index=True, return_counts=True)
        k = len(S)
        crp = None
        if x is not None and pos is not None:
            gg = g[first]
            crp = np.mean(pos[gg] / np.maximum(self._cnt[gg], 1), axis=1)
        return key[:, :k], key[:, k:], mass.astype(float), crp

    def _merge(self, lo: np.ndarray, hi: np.ndarray, crp: np.ndarray, mass: np.ndarray,
               crp_of: Callable[[np.ndarray, np.ndarray], np.ndarray], pi_c: float,
               xs: np.ndarray | None = None, max_cells: int = 200) -> list[Box]:
        """Greedy merging of possible cells (see the module docstring); with
        ``xs``, a merged box must not contain the row's own values on S."""
        order = np.lexsort((-mass, -crp))[:max_cells]
        remaining = list(order)
        comps: list[tuple[np.ndarray, np.ndarray, float, int]] = []
        while remaining:
            seed = remaining.pop(0)
            clo, chi, ccrp, merged = lo[seed].copy(), hi[seed].copy(), float(crp[seed]), 1
            while remaining:
                rem = np.asarray(remaining)
                inside = np.all((lo[rem] >= clo) & (hi[rem] <= chi), axis=1)
                if inside.any():
                    merged += int(inside.sum())
                    remaining = [r for r, i in zip(remaining, inside) if not i]
                    rem = rem[~inside]
                    if not len(rem):
                        break
                touch = np.all((lo[rem] <= chi) & (hi[rem] >= clo), axis=1)
                cands = rem[touch]
                if not len(cands):
                    break
                nlo, nhi = np.minimum(clo, lo[cands]), np.maximum(chi, hi[cands])
                c = crp_of(nlo, nhi)
                good = c >= pi_c - 1e-12
                if xs is not None:
                    good &= ~np.all((xs > nlo) & (xs <= nhi), axis=1)
                ok = np.flatnonzero(good)
                if not len(ok):
                    break
                b = ok[np.argmax(c[ok])]
                clo, chi, ccrp, merged = nlo[b], nhi[b], float(c[b]), merged + 1
                remaining.remove(cands[b])
            comps.append((clo, chi, ccrp, merged))
        comps.sort(key=lambda c: (-c[3], -c[2]))
        return [Box(a, b, c, m) for a, b, c, m in comps]

    def _full(self, S: tuple[int, ...], part: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(self.n_features_in_, fill)
        out[list(S)] = part
        return out

    # ----------------------------------------------------------------- rules
    def _local_cells(self, x: np.ndarray, S: tuple[int, ...], mask: np.ndarray, pos: np.ndarray, pi_c: float):
        """Possible cells for ``x`` on ``S`` and their CRP, and whether one reaches
        pi_c; when none does, the candidate set with the highest CRP (None when
        there is no possible cell at all)."""
        w = self.projected_weights(x, S)
        Sarr = np.asarray(S)
        rest = np.setdiff1d(np.arange(self.n_features_in_), Sarr)
        base = np.all((self._LO[:, rest] < x[rest]) & (x[rest] <= self._HI[:, rest]), axis=1)

        crp_of = self._crp_fn(pos, base, Sarr)

        # the paper's possible leaves come from the target rows with positive
        # projected weight; when none of them gives a rule, from every target row
        best = None
        for rows in (np.flatnonzero((w > 0) & mask), np.flatnonzero(mask)):
            if not len(rows):
                continue
            lo, hi, mass, crp = self._possible_cells(rows, S, x=x, pos=pos)
            xs = x[Sarr]
            crp = np.where(np.all((xs > lo) & (xs <= hi), axis=1), 0.0, crp)   # x's own cell is no recourse
            cells = (lo, hi, crp, mass, crp_of)
            if np.any(crp >= pi_c - 1e-12):
                return cells, True
            if best is None or crp.max() > best[2].max():
                best = cells
        return best, False

    def local_rule(self, x: Any, target: Any, fixed: Sequence[int] = (), *, pi: float | None = None,
                   pi_c: float | None = None, top_k: int | None = None) -> LocalRule:
        """The local counterfactual rule of ``x`` for ``target`` (a class,
        ``("other", c)``, or an interval ``(lo, hi)`` of outputs).

        When no possible region reaches pi_c, the rule is the possible cell with
        the highest CRP, flagged ``below_pi_c`` (the paper's protocol gives every
        row a rule and reports its CRP). Raises NoCounterfactualRuleError only when
        there is no possible cell with a positive CRP at all. ``pi``, ``pi_c`` and
        ``top_k`` default to the estimator's."""
        t0 = time.perf_counter()
        x = self._row(x)
        lv = self._levels(pi, pi_c, top_k)
        found, divergent = self._local_search(x, target, fixed, lv)
        if not found:
            raise NoCounterfactualRuleError("No subset of the actionable features changes the surrogate's output.")
        mask, _, pos = self._target(target)
        fallback = None
        for units, cdp in found:            # the best explanation that yields a rule
            S = self._columns(units)
            cells, reached = self._local_cells(x, S, mask, pos, lv.pi_c)
            if reached:
                break
            if cells is not None and (fallback is None or cells[2].max() > fallback[1][2].max()):
                fallback = (S, cells, cdp)
        else:
            if fallback is None or fallback[1][2].max() <= 0:
                names = [self.feature_names_[j] for j in self._columns(found[0][0])]
                raise NoCounterfactualRuleError(
                    f"No region on {names} leads to the target ({len(found)} feature set(s) tried); "
                    "allow more features to change.")
            S, cells, cdp = fallback
        lo, hi, crp, mass, crp_of = cells
        sarr = np.asarray(S)
        if reached:
            keep = crp >= lv.pi_c - 1e-12
            boxes = self._merge(lo[keep], hi[keep], crp[keep], mass[keep], crp_of, lv.pi_c, xs=x[sarr])
        else:                               # below pi_c: the best cells themselves, unmerged
            order = np.lexsort((-mass, -crp))[:5]
            boxes = [Box(lo[i], hi[i], float(crp[i]), 1) for i in order if crp[i] > 0]
        full = [Box(self._full(S, b.lower, -np.inf), self._full(S, b.upper, np.inf), b.crp, b.n_cells)
                for b in boxes]
        sets = tuple((self._columns(u), c) for u, c in found) if divergent else ()
        return LocalRule(x=x, target=target, features=S, lower=full[0].lower, upper=full[0].upper, cdp=cdp,
                         crp=full[0].crp, divergent=divergent, n_cells=full[0].n_cells,
                         alternatives=tuple(full[1:]), divergent_sets=sets, time=time.perf_counter() - t0,
                         below_pi_c=not reached)

    def regional_rules(self, regions: Sequence[Any], target: Any, fixed: Sequence[int] = (), *,
                       pi: float | None = None, pi_c: float | None = None, top_k: int | None = None
                       ) -> list[RegionalRule]:
        """A regional counterfactual rule for each region: a ``(lower, upper)``
        pair of arrays (``lower < x <= upper``) or an object with ``lower`` and
        ``upper`` (a T-CREx rule or metarule, a leaf box)."""
        self._check_fitted()
        lv = self._levels(pi, pi_c, top_k)
        mask, _, pos = self._target(target)
        cand = self.candidate_units(fixed, lv.top_k)
        d = self.n_features_in_
        out = []
        for reg in regions:
            rlo, rhi = (reg.lower, reg.upper) if hasattr(reg, "lower") else reg
            rlo, rhi = np.asarray(rlo, float), np.asarray(rhi, float)
            if rlo.shape != (d,) or rhi.shape != (d,):
                raise QueryError(f"A region needs lower and upper arrays of length {d}.")
            inside = np.all((self.X_ > rlo) & (self.X_ <= rhi), axis=1)
            base = dict(region_lower=rlo, region_upper=rhi, target=target, coverage=float(inside.mean()),
                        n_rows=int(inside.sum()))
            if not inside.any():
                out.append(RegionalRule(**base, note="No fitted row lies in this region."))
                continue
            if not cand:
                out.append(RegionalRule(**base, note="No feature can change."))
                continue
            ovl = (rlo[None, :] < self._HI) & (rhi[None, :] > self._LO)        # (Nl, d)
            pos_of_unit = np.full(len(self._units), -1)
            pos_of_unit[cand] = np.arange(len(cand))
            colpos = pos_of_unit[self._unit_of]
            blocked = np.any(~ovl[:, colpos < 0], axis=1)
            badbits = np.zeros(len(ovl), dtype=np.int64)
            for j in np.flatnonzero(colpos >= 0):
                badbits |= np.where(~ovl[:, j], 1 << int(colpos[j]), 0)

            def cdp_of(subsets: np.ndarray, level: int) -> np.ndarray:
                smask = (subsets.astype(np.int64) << np.arange(subsets.shape[1])).sum(axis=1)
                reach = ((badbits[None, :] & ~smask[:, None]) == 0) & ~blocked[None, :]
                return self._crp_from_reach(reach, pos)

            found, divergent = self._search(cdp_of, cand, lv.pi)
            if not found:
                out.append(RegionalRule(**base, note="No subset of the actionable features changes the output."))
                continue
            got, best = None, 0.0
            for units, cdp in found:        # the best explanation that yields a rule
                S = self._columns(units)
                Sarr = np.asarray(S)
                rest = np.setdiff1d(np.arange(d), Sarr)
                crp_of = self._crp_fn(pos, np.all(ovl[:, rest], axis=1), Sarr)
                compatible = np.all((self.X_[:, rest] > rlo[rest]) & (self.X_[:, rest] <= rhi[rest]), axis=1)
                for rows in (np.flatnonzero(compatible & mask), np.flatnonzero(mask)):
                    if not len(rows):
                        continue
                    lo, hi, mass, _ = self._possible_cells(rows, S)
                    crp = crp_of(lo, hi)
                    best = max(best, float(crp.max()))
                    if np.any(crp >= lv.pi_c - 1e-12):
                        got = (S, cdp, lo, hi, mass, crp, crp_of)
                        break
                if got:
                    break
            if got is None:
                out.append(RegionalRule(**base, cdp=found[0][1], divergent=divergent,
                                        note=f"No rule reaches probability {lv.pi_c} (best {best:.2f}); "
                                             "lower pi_c or allow more features to change."))
                continue
            S, cdp, lo, hi, mass, crp, crp_of = got
            keep = crp >= lv.pi_c - 1e-12
            boxes = self._merge(lo[keep], hi[keep], crp[keep], mass[keep], crp_of, lv.pi_c)
            full = [Box(self._full(S, b.lower, -np.inf), self._full(S, b.upper, np.inf), b.crp, b.n_cells)
                    for b in boxes]
            out.append(RegionalRule(**base, features=S, lower=full[0].lower, upper=full[0].upper, cdp=cdp,
                                    crp=full[0].crp, divergent=divergent, alternatives=tuple(full[1:])))
        return out

    def propose_regions(self, target: Any, max_depth: int = 3, min_share: float = 0.02
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Sub-populations needing recourse: the leaves of a shallow tree on the
        model's outputs where most rows are not in the target, largest first."""
        from sklearn.tree import DecisionTreeClassifier

        from core.ensemble import node_boxes

        self._check_fitted()
        mask, _, _ = self._target(target)
        leaf = max(1, math.ceil(min_share * self._n))
        tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=leaf,
                                      random_state=self.random_state).fit(self.X_, mask)
        t = tree.tree_
        lo, hi = node_boxes(t.children_left, t.children_right, t.feature, t.threshold, self.n_features_in_)
        leaves = np.flatnonzero(t.children_left < 0)
        ids = tree.apply(self.X_)
        out = []
        for lf in leaves:
            rows = ids == lf
            if rows.any() and mask[rows].mean() < 0.5:
                out.append((rows.sum(), lo[lf], hi[lf]))
        out.sort(key=lambda r: -r[0])
        return [(a, b) for _, a, b in out]

    # -------------------------------------------------------------- sampling
    def sample_counterfactuals(self, x: Any, rule: Any, n: int = 5, *, batch: int = 100, max_iter: int = 100,
                               temp: float = 1.0, patience: int = 20, random_state: int | None = None
                               ) -> np.ndarray:
        """Up to ``n`` distinct points ``(z_S, x_Sbar)`` with ``z_S`` inside the
        rule, the most plausible found by simulated annealing (appendix), best
        first: shape (k, n_features), k <= n (fewer when the training values
        inside the rule allow fewer combinations). Only the features the rule
        bounds change. The energy is the Isolation Forest's decision_function,
        and a candidate the surrogate does not put in the rule's target (when
        the rule has one) ranks below every candidate it does: a rule holds
        with probability CRP, and its samples should land where it holds."""
        self._check_fitted()
        x = self._row(x)
        lower, upper = np.asarray(rule.lower, float), np.asarray(rule.upper, float)
        S = np.flatnonzero(np.isfinite(lower) | np.isfinite(upper))
        if not len(S):
            return x[None].copy()
        rng = np.random.default_rng(self.random_state if random_state is None else random_state)
        units = sorted({int(self._unit_of[j]) for j in S})
        pools = []
        for u in units:
            cols = self._units[u]
            ok = np.all((self.X_[:, cols] > lower[cols]) & (self.X_[:, cols] <= upper[cols]), axis=1)
            rows = np.flatnonzero(ok)
            if not len(rows):
                names = [self.feature_names_[j] for j in cols]
                raise NoCounterfactualRuleError(f"No observed value of {names} lies inside the rule; cannot sample.")
            pools.append((cols, rows))

        def generate(cur: np.ndarray, k: int) -> np.ndarray:
            cand = np.repeat(cur[None], k, axis=0)
            for cols, rows in pools:
                pick = rows[rng.integers(0, len(rows), size=k)]
                cand[:, cols] = self.X_[np.ix_(pick, cols)]
            return cand

        target = getattr(rule, "target", None)

        def score(C: np.ndarray) -> np.ndarray:
            s = self._iso.decision_function(C)
            if target is not None:
                s = s - 2.0 * ~output_mask(self.ensemble_.predict(C), target)
            return s

        seen: dict[bytes, tuple[float, np.ndarray]] = {}

        def remember(C: np.ndarray, s: np.ndarray) -> None:
            for row, v in zip(C, s):
                seen.setdefault(row.tobytes(), (float(v), row))

        cur = generate(x, 1)[0]
        cur_s = float(score(cur[None])[0])
        remember(cur[None], [cur_s])
        best_s, stall = cur_s, 0
        for i in range(max_iter):
            C = generate(cur, batch)
            s = score(C)
            remember(C, s)
            k = int(np.argmax(s))
            if s[k] > best_s:
                best_s, stall = float(s[k]), 0
            else:
                stall += 1
            if best_s > 0 and stall > patience and len(seen) >= n:
                break
            diff = float(s[k]) - cur_s
            t = temp / math.log(i + 2)
            if diff > 0 or rng.random() < math.exp(diff / t):
                cur, cur_s = C[k], float(s[k])
        ranked = sorted(seen.values(), key=lambda p: -p[0])[:n]
        return np.array([r for _, r in ranked])

    def inlier(self, X: np.ndarray) -> np.ndarray:
        """The Isolation Forest's inlier verdict (decision_function >= 0)."""
        self._check_fitted()
        return self._iso.decision_function(np.atleast_2d(X)) >= 0

    # -------------------------------------------------------------- metrics
    def evaluate(self, X: Any, predict: Callable[[np.ndarray], np.ndarray], target_of: Callable[[Any], Any],
                 fixed: Sequence[int] = (), progress: Callable[[int, int], None] | None = None, *,
                 pi: float | None = None, pi_c: float | None = None, top_k: int | None = None
                 ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """Local rules for the rows of ``X``, one sample each, and the paper's
        metrics; ``predict`` is the audited model, ``target_of(y)`` the target
        for a row whose model output is ``y``. Returns (metrics, per-row records)."""
        X = np.asarray(X, dtype=float)
        y = np.asarray(predict(X))
        X_cf = X.copy()
        in_t = np.zeros(len(X), dtype=bool)
        inl = np.zeros(len(X), dtype=bool)
        found = np.zeros(len(X), dtype=bool)
        records = []
        for i, x in enumerate(X):
            tgt = target_of(y[i])
            rec: dict[str, Any] = {"row": i, "target": tgt}
            try:
                rule = self.local_rule(x, tgt, fixed, pi=pi, pi_c=pi_c, top_k=top_k)
                z = self.sample_counterfactuals(x, rule, n=1)[0]
            except NoCounterfactualRuleError as e:
                rec["note"] = str(e)
            else:
                X_cf[i], found[i] = z, True
                out = np.asarray(predict(z[None]))
                in_t[i] = bool(output_mask(out, tgt)[0])
                inl[i] = bool(self.inlier(z)[0])
                rec.update(size=len(rule.features), changed=int(np.sum(z != x)), cdp=rule.cdp, crp=rule.crp,
                           time=rule.time, correct=bool(in_t[i]), inlier=bool(inl[i]), below_pi_c=rule.below_pi_c)
            records.append(rec)
            if progress:
                progress(i + 1, len(X))
        return rule_metrics(X, X_cf, in_t, inl, found), records
