"""The fitted state of counterfactual rules: everything ``fit`` computes, in one
object that the plain functions of :mod:`core.rules.engines`,
:mod:`core.rules.search` and :mod:`core.rules.sampling` take as their first
argument.

:func:`fit_state` fits the random-forest surrogate on ``(X, f(X))`` and the
Isolation Forest, and prepares what the estimators of the module doc of
:mod:`core.rules` need: the leaves of every tree as boxes (one global
numbering), the fitting rows' leaves, every split's left-going rows as a bitset
(the Projected Forest's cells), and the units (a one-hot group or a column).
:class:`FittedRules` holds it; it is never changed after ``fit`` except for
its cache of targets (``targets``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from sklearn.ensemble import IsolationForest, RandomForestClassifier, RandomForestRegressor

from core.counterfactual import continuous_outputs, output_mask
from core.errors import DataError, NoCounterfactualRuleError, QueryError
from core.model import as_ensemble
from core.model.features import as_row, feature_indices, fit_table, model_outputs
from core.rules.bitsets import _pack
from core.rules.results import RuleLevels
from core.typing import ArrayLike, Features, Row, Rows, TargetSpec

if TYPE_CHECKING:
    from core.model import TreeEnsemble

__all__ = ["FittedRules", "fit_state", "check_levels"]


@dataclass(frozen=True, eq=False)
class FittedRules:
    """What ``CounterfactualRules.fit`` computes (read only, but for the
    ``targets`` cache).

    surrogate, ensemble : the fitted scikit-learn forest and its TreeEnsemble.
    isolation, isolation_ensemble : the Isolation Forest fitted on the rows
        (plausibility, sampling) and its TreeEnsemble.
    X, y : the rows the estimates use (at most ``max_rows``, a seeded sample)
        and the audited model's outputs for them.
    feature_names : one name per column; regression : continuous outputs.
    levels : the default pi, pi_c and top_k of a query.
    random_state : seeds the row samples of the search and the sampling.
    fidelity : share of the fitting rows where the surrogate reproduces the
        model (classification), or its R^2 (regression).
    units, unit_of : the units (a one-hot group moved as one, or a column) as
        lists of columns, and the unit of every column.
    feature_usage, unit_usage : surrogate splits per column and per unit.
    leaf_lower, leaf_upper : (n_leaves, d) boxes ``lower < x <= upper`` of every
        leaf of every tree, one global numbering, contiguous per tree;
        tree_starts : the first global leaf of every tree.
    leaf_of_node : node -> global leaf (-1 for a split), over the trees' nodes
        concatenated (node ``v`` of tree ``t`` at ``node_offsets[t] + v``).
    row_leaves : (n, n_trees) global leaf of every row; leaf_counts : rows per leaf.
    words, valid : 64-bit words of a bitset over the rows; the bitset of all rows.
    node_offsets, flat : the trees concatenated for the compiled kernel (first
        node of each tree; children, features, thresholds, roots).
    split_bits : (n_nodes, words) the rows going left at every split.
    targets : cache, per target, of (mask over the rows, its bitset, per-leaf
        count of target rows); filled by :meth:`target`.
    """

    surrogate: Any
    ensemble: TreeEnsemble
    isolation: IsolationForest
    isolation_ensemble: TreeEnsemble
    X: np.ndarray
    y: np.ndarray
    feature_names: list
    regression: bool
    levels: RuleLevels
    random_state: int | None
    fidelity: float
    units: list[list[int]]
    unit_of: np.ndarray
    feature_usage: np.ndarray
    unit_usage: np.ndarray
    leaf_lower: np.ndarray
    leaf_upper: np.ndarray
    tree_starts: np.ndarray
    leaf_of_node: np.ndarray
    row_leaves: np.ndarray
    leaf_counts: np.ndarray
    words: int
    valid: np.ndarray
    node_offsets: np.ndarray
    flat: dict[str, np.ndarray]
    split_bits: np.ndarray
    targets: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------ shapes
    @property
    def n(self) -> int:
        """Rows the estimates use."""
        return len(self.X)

    @property
    def d(self) -> int:
        """Columns."""
        return self.X.shape[1]

    # ------------------------------------------------------------ queries
    def row(self, x: Row) -> np.ndarray:
        """``x`` as d finite floats (a Series read by name), else QueryError."""
        return as_row(x, self.feature_names, error=QueryError, what="x")

    def query_levels(self, pi: float | None = None, pi_c: float | None = None,
                     top_k: int | None = None) -> RuleLevels:
        """The query's levels: the given ones, else the fitted defaults."""
        lv = self.levels
        return check_levels(lv.pi if pi is None else pi, lv.pi_c if pi_c is None else pi_c,
                            lv.top_k if top_k is None else top_k)

    def target(self, target: TargetSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask over the rows, its bitset, per-leaf count of target rows)."""
        key = repr(target)
        if key not in self.targets:
            mask = output_mask(self.y, target)
            if not mask.any():
                raise NoCounterfactualRuleError(f"No fitted row has a model output in the target {target!r}.")
            pos = np.bincount(self.row_leaves.ravel(), weights=np.repeat(mask.astype(float), self.row_leaves.shape[1]),
                              minlength=len(self.leaf_counts))
            self.targets[key] = (mask, _pack(mask, self.words), pos)
        return self.targets[key]

    def features(self, spec: Features, what: str = "fixed") -> tuple[int, ...]:
        """Columns from names or indices (one name, one index, or a sequence of
        them; :func:`core.model.features.feature_indices`): an unknown name or an
        index outside ``0..d-1`` raises QueryError naming the closest features.
        None is no feature."""
        return tuple(feature_indices(self.feature_names, spec, error=QueryError, what=what))

    def columns(self, units: Sequence[int]) -> tuple[int, ...]:
        """The columns of the units, sorted."""
        return tuple(sorted(j for u in units for j in self.units[u]))

    def units_of(self, columns: Sequence[int] | np.ndarray) -> list[int]:
        """The units holding the columns, sorted."""
        return sorted({int(self.unit_of[j]) for j in columns})

    def global_leaves(self, Z: np.ndarray) -> np.ndarray:
        """(len(Z), n_trees) global leaf of every row of Z."""
        return _global_leaves(self.ensemble, self.leaf_of_node, self.node_offsets, Z)

    def full(self, S: tuple[int, ...], part: np.ndarray, fill: float) -> np.ndarray:
        """A length-d array: ``part`` on the columns S, ``fill`` elsewhere."""
        out = np.full(self.d, fill)
        out[list(S)] = part
        return out

    def left_bits(self, t: int, v: int) -> np.ndarray:
        """The rows going left at node v of tree t (a bitset)."""
        return self.split_bits[self.node_offsets[t] + v]


def check_levels(pi: float, pi_c: float, top_k: int) -> RuleLevels:
    """The levels as a RuleLevels, or QueryError when one is out of range."""
    lv = RuleLevels(float(pi), float(pi_c), int(top_k))
    if not (0 < lv.pi <= 1 and 0 < lv.pi_c <= 1):
        raise QueryError(f"pi and pi_c must lie in (0, 1]; got {lv.pi} and {lv.pi_c}.")
    if lv.top_k < 1:
        raise QueryError(f"top_k must be at least 1; got {lv.top_k}.")
    return lv


def fit_state(X: Rows, y_model: ArrayLike, feature_names: Sequence[str] | None = None, *, n_estimators: int = 20,
              max_depth: int | None = 10, levels: RuleLevels = RuleLevels(),  # noqa: B008 - frozen
              groups: Sequence[Sequence[int]] | None = None,
              random_state: int | None = None, n_workers: int | None = None, max_rows: int = 8_000) -> FittedRules:
    """Fit the surrogate forest on ``(X, y_model)`` and the Isolation Forest on
    ``X``, and prepare the estimators' tables (the parameters: those of
    :class:`core.rules.CounterfactualRules`)."""
    X, names = fit_table(X, feature_names, error=DataError, min_rows=2)
    X = np.ascontiguousarray(X)
    y = model_outputs(y_model, len(X))
    levels = check_levels(levels.pi, levels.pi_c, levels.top_k)
    n, d = X.shape
    groups = _checked_groups(groups, names)
    regression = continuous_outputs(y)
    cls = RandomForestRegressor if regression else RandomForestClassifier
    rf = cls(n_estimators=n_estimators, max_depth=max_depth, random_state=random_state, n_jobs=n_workers).fit(X, y)
    ens = as_ensemble(rf, verify=False)
    fidelity = _fidelity(rf.predict(X), y, regression)
    if n > max_rows:      # the estimates use a random sample of the rows
        keep = np.sort(np.random.default_rng(random_state).choice(n, max_rows, replace=False))
        X, y, n = X[keep], y[keep], max_rows
    words = (n + 63) // 64
    leaves = _Leaves.of(ens, d)
    node_offsets, flat, bits = _flat_trees(ens, X, words)
    Lg = _global_leaves(ens, leaves.of_node, node_offsets, X)
    units, unit_of = _units(groups, d)
    usage = ens.split_counts()
    iso = IsolationForest(contamination=0.1, random_state=random_state).fit(X)
    return FittedRules(
        surrogate=rf, ensemble=ens, isolation=iso, isolation_ensemble=as_ensemble(iso, verify=False), X=X, y=y,
        feature_names=names, regression=regression, levels=levels, random_state=random_state, fidelity=fidelity,
        units=units, unit_of=unit_of, feature_usage=usage, unit_usage=np.array([usage[u].sum() for u in units]),
        leaf_lower=leaves.lower, leaf_upper=leaves.upper, tree_starts=leaves.starts,
        leaf_of_node=leaves.of_node, row_leaves=Lg,
        leaf_counts=np.bincount(Lg.ravel(), minlength=leaves.count).astype(float), words=words,
        valid=_pack(np.ones(n, dtype=bool), words), node_offsets=node_offsets, flat=flat, split_bits=bits)


def _checked_groups(groups: Any, names: list[str]) -> list[list[int]]:
    """The one-hot groups as column indices, each column in one group at most."""
    if groups is not None and (isinstance(groups, (str, bytes)) or not isinstance(groups, (list, tuple))):
        raise QueryError(f"groups is a list of one-hot groups, each a list of columns (names or indices); got "
                         f"{type(groups).__name__}.")
    out = [feature_indices(names, g, error=QueryError, what="groups") for g in groups or []]
    twice = _in_two_groups(out, names)
    if twice:
        raise QueryError(f"groups: {twice[:5]} belong to more than one one-hot group; a column is in one group.")
    return out


def _in_two_groups(groups: list[list[int]], names: list[str]) -> list[str]:
    """The columns in more than one one-hot group (of two columns or more), by name, sorted."""
    seen = [j for g in groups if len(g) >= 2 for j in g]
    return sorted({names[j] for j in seen if seen.count(j) > 1})


def _fidelity(pred: np.ndarray, y: np.ndarray, regression: bool) -> float:
    """The surrogate's fidelity to the model's outputs on the fitting rows: R² for a regressor, else agreement."""
    if not regression:
        return float(np.mean(pred == y))
    var = float(np.var(y))
    return float(1 - np.mean((pred - y) ** 2) / var) if var > 0 else 1.0


@dataclass(frozen=True)
class _Leaves:
    """The leaves of every tree, one global numbering, contiguous per tree."""

    lower: np.ndarray           # (n_leaves, d) boxes
    upper: np.ndarray
    starts: np.ndarray          # the first global leaf of each tree
    of_node: np.ndarray         # the global leaf of each node of the trees concatenated (-1: a split)
    count: int

    @classmethod
    def of(cls, ens: TreeEnsemble, d: int) -> "_Leaves":
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
        return cls(np.vstack(los), np.vstack(his), np.asarray(starts), np.concatenate(gids), offset)


def _units(groups: list[list[int]], d: int) -> tuple[list[list[int]], np.ndarray]:
    """The units that move as one (a one-hot group, else a feature), and each feature's unit."""
    unit_of = np.arange(d)
    units: list[list[int]] = []
    grouped = set()
    for g in groups or []:
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
    return units, unit_of


def _global_leaves(ens: TreeEnsemble, leaf_of_node: np.ndarray, node_offsets: np.ndarray,
                   Z: np.ndarray) -> np.ndarray:
    """(len(Z), n_trees) global leaf of every row of Z: one lookup over the trees' nodes."""
    return leaf_of_node[ens.apply(Z) + node_offsets]


def _flat_trees(ens: TreeEnsemble, X: np.ndarray, words: int) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Trees concatenated for the compiled kernel, and every split's
    left-going rows as a bitset (shared with the numpy version)."""
    trees = ens.trees
    sizes = np.array([t.n_nodes for t in trees])
    off = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cl = np.concatenate([np.where(t.children_left >= 0, t.children_left + o, -1) for t, o in zip(trees, off)])
    cr = np.concatenate([np.where(t.children_right >= 0, t.children_right + o, -1) for t, o in zip(trees, off)])
    flat = dict(cl=cl.astype(np.int32), cr=cr.astype(np.int32),
                feat=np.concatenate([t.feature for t in trees]).astype(np.int32),
                thr=np.nan_to_num(np.concatenate([t.threshold for t in trees])),
                roots=off.astype(np.int64))
    bits = np.zeros((int(sizes.sum()), words), dtype=np.uint64)
    for t, o in zip(trees, off):
        internal = np.flatnonzero(t.children_left >= 0)
        if len(internal):
            go = X[:, t.feature[internal]] <= t.threshold[internal]          # (n, k)
            packed = np.packbits(go, axis=0, bitorder="little")               # (ceil(n/8), k)
            buf = np.zeros((len(internal), words * 8), dtype=np.uint8)
            buf[:, :packed.shape[0]] = packed.T
            bits[o + internal] = buf.view(np.uint64)
    return off, flat, bits
