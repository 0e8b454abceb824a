"""FCCA: supervised feature compression by counterfactual analysis.

Piccialli, Romero Morales and Salvatore, "Supervised feature compression based
on counterfactual analysis", EJOR 2023; Algorithm 1, in three phases.

1. *Counterfactuals.* The rows of M (eq. 13) are those the model classifies
   correctly, ``f(x_i) = y_i``, with the probability of that class in
   ``[p0, p1]``. Each gets its optimal counterfactual, problem (2)-(7), with
   cost ``lambda0 * l0 + lambda1 * l1 + lambda2 * l2^2`` on features scaled to
   [0, 1] (eq. 2: our cost model with the schema's ranges as scales), solved
   exactly by :func:`core.optimal.optimal_counterfactual` and run over rows by
   :func:`core.batch.map_rows`. The problem (2)-(7) has no actionability, so
   every feature is free here whatever the schema says; the schema gives
   kinds (integer, binary, one-hot) and ranges.
2. *Thresholds* (eqs. 10-11). For each pair ``(x0, xCE)`` and each feature
   with ``|x0_j - xCE_j| > eps_j`` the paper takes
   ``t_j = xCE_j + eps_j * sign(x0_j - xCE_j)``. Its MILP puts ``xCE_j``
   ``eps_j`` beyond the split it crosses (constraints 3-4), so ``t_j`` is that
   split of the model. :mod:`core.optimal` returns the infimum point instead
   (on the split, or 1e-6 of the range past it), so we take that split
   directly: the model's split level on feature ``j`` between ``x0_j`` and
   ``xCE_j`` nearest to ``xCE_j`` (the paper's formula on our point is the
   fallback when no split lies between them). Equal splits from different
   pairs are one threshold; its multiplicity ``pi_t`` counts the pairs.
   ``eps_j`` defaults to the smallest gap between consecutive distinct
   observed values of feature ``j``, as in the paper.
3. *Discretisation* (eq. 12 and Phase 3). ``F_Q`` is the Q-quantile of the
   multiplicities (numpy's default linear interpolation); the thresholds with
   ``pi_t >= F_Q`` are kept; ``b_it = [x_ij > t]``; features with no kept
   threshold are dropped. Compression rate ``eta = 1 - distinct rows / rows``;
   inconsistency rate (eq. 15) ``delta = sum over cells of (cell size - count
   of its majority label) / rows``, which is ``min(|Omega^0|, |Omega^1|)`` per
   cell for two classes.

The surrogate is a tree of depth <= 3 on the binary columns: CART
(scikit-learn) or GOSDT (Lin et al. 2020, the paper's optimal sparse tree,
regularisation ``10 / n_train`` as in section 4.1) when the ``gosdt`` package
is installed.

Multiclass models are handled one-vs-rest: a row's counterfactual leaves its
class for the cheapest other class (each other class is solved and the
cheapest kept), and the probability filter uses the probability of the
row's class. Regressors and anomaly detectors are refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from core.batch import map_rows
from core.cells import feature_levels
from core.dot import label as dot_label
from core.ensemble import TreeEnsemble, from_model
from core.errors import FCCAError
from core.schema import infer_schema
from core.settings import with_overrides

__all__ = ["fcca", "FCCAResult", "TreeFit", "FCCAError", "default_eps", "gosdt_available"]


def gosdt_available() -> bool:
    try:
        import gosdt  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not usable"
        return False
    return True


def default_eps(X: np.ndarray) -> np.ndarray:
    """Per feature, the smallest gap between consecutive distinct values (1 for a constant column)."""
    X = np.asarray(X, dtype=float)
    eps = np.ones(X.shape[1])
    for j in range(X.shape[1]):
        u = np.unique(X[:, j][np.isfinite(X[:, j])])
        if u.size >= 2:
            eps[j] = float(np.min(np.diff(u)))
    return eps


def _precision(v: float, digits: int) -> int:
    """Significant digits for ``v``: ``digits``, or the integer part and one more."""
    return digits if not v else min(17, max(digits, int(np.floor(np.log10(abs(v)))) + 2))


def _labels(values: np.ndarray) -> list[str]:
    """Short labels for distinct thresholds of one feature: the fewest
    significant digits (at least 6, and every digit of the integer part)
    that keep them distinct; exponent notation for tiny or huge values."""
    values = np.asarray(values, dtype=float)
    for digits in range(6, 18):
        out = [f"{v:.{_precision(v, digits)}g}" for v in values]
        if len(set(out)) == len(out):
            return out
    return [repr(float(v)) for v in values]


# ------------------------------------------------------------------ the tree
@dataclass(frozen=True)
class TreeFit:
    """A depth-limited tree on the binary columns of a discretisation.

    Nodes are stored flat: ``feature[k]`` is the binary column tested at node
    ``k`` (-1 at a leaf); rows with value 1 (``x > t``) go to ``right[k]``,
    the others to ``left[k]``; ``label[k]`` is the class predicted at a leaf
    and ``n[k]`` the number of training rows reaching node ``k``.
    """

    method: str
    columns: list[str]
    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    label: np.ndarray
    n: np.ndarray
    Q: float
    accuracy: float = float("nan")       # held-out agreement with the labels
    fidelity: float = float("nan")       # held-out agreement with the model
    train_accuracy: float = float("nan")
    n_train: int = 0
    n_test: int = 0
    fit_time: float = 0.0
    note: str = ""

    @property
    def depth(self) -> int:
        def d(k: int) -> int:
            return 0 if self.feature[k] < 0 else 1 + max(d(self.left[k]), d(self.right[k]))
        return d(0)

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.feature < 0))

    def predict(self, B: np.ndarray | pd.DataFrame) -> np.ndarray:
        """Labels for binary rows (columns as ``columns``)."""
        B = np.asarray(B[self.columns] if isinstance(B, pd.DataFrame) else B)
        node = np.zeros(len(B), dtype=int)
        for _ in range(len(self.feature)):
            inner = self.feature[node] >= 0
            if not inner.any():
                break
            idx = np.flatnonzero(inner)
            go_right = B[idx, self.feature[node[idx]]] > 0
            node[idx] = np.where(go_right, self.right[node[idx]], self.left[node[idx]])
        return self.label[node]

    def to_text(self) -> str:
        lines: list[str] = []

        def walk(k: int, indent: str) -> None:
            if self.feature[k] < 0:
                lines.append(f"{indent}predict {self.label[k]}  ({self.n[k]} rows)")
                return
            col = self.columns[self.feature[k]]
            lines.append(f"{indent}if {col}:")
            walk(self.right[k], indent + "    ")
            lines.append(f"{indent}else:  # not {col}")
            walk(self.left[k], indent + "    ")
        walk(0, "")
        return "\n".join(lines)

    def to_graphviz(self) -> str:
        out = ["digraph fcca_tree {", 'node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
               'edge [fontname="Helvetica", fontsize=10];']
        for k in range(len(self.feature)):
            if self.feature[k] < 0:
                out.append(f'n{k} [label="{dot_label(self.label[k])}\\n{self.n[k]} rows", fillcolor="#e8f1fb"];')
            else:
                col = dot_label(self.columns[self.feature[k]])
                out.append(f'n{k} [label="{col} ?\\n{self.n[k]} rows", fillcolor="#f6f6f6"];')
                out.append(f'n{k} -> n{self.right[k]} [label="yes"];')
                out.append(f'n{k} -> n{self.left[k]} [label="no"];')
        out.append("}")
        return "\n".join(out)


def _tree_from_sklearn(clf: Any, columns: list[str], method: str, Q: float) -> TreeFit:
    t = clf.tree_
    leaf = t.children_left < 0
    feature = np.where(leaf, -1, t.feature).astype(int)
    # binary columns split at 0.5: the left child holds 0 (x <= t), the right 1 (x > t)
    label = clf.classes_[np.argmax(t.value[:, 0, :], axis=1)]
    return TreeFit(method, columns, feature, t.children_left.astype(int), t.children_right.astype(int), label,
                   t.n_node_samples.astype(int), Q)


def _tree_from_gosdt(root: Any, classes: np.ndarray, columns: list[str], B: np.ndarray, Q: float) -> TreeFit:
    feature: list[int] = []
    left: list[int] = []
    right: list[int] = []
    label: list[Any] = []
    n: list[int] = []

    def add(node: Any, rows: np.ndarray) -> int:
        k = len(feature)
        feature.append(-1)
        left.append(-1)
        right.append(-1)
        label.append(None)
        n.append(int(rows.sum()))
        if hasattr(node, "prediction"):
            label[k] = classes[node.prediction]
            return k
        j = int(node.feature)
        feature[k] = j
        ones = B[:, j] > 0
        # GOSDT sends rows whose column is true to its left child
        right[k] = add(node.left_child, rows & ones)
        left[k] = add(node.right_child, rows & ~ones)
        return k

    add(root, np.ones(len(B), dtype=bool))
    return TreeFit("gosdt", columns, np.array(feature), np.array(left), np.array(right), np.array(label, dtype=object),
                   np.array(n), Q)


# ---------------------------------------------------------------- the result
@dataclass(frozen=True)
class FCCAResult:
    """Counterfactual pairs, thresholds and everything needed to discretise.

    Attributes
    ----------
    feature_names : list of str
    X, y : the rows and labels given to :func:`fcca`; ``pred`` the model's labels.
    rows : indices (into X) of the rows of M whose counterfactual was found.
    x0, x_ce : arrays (len(rows), n_features): the pairs, in original units;
        ``costs`` their optimal costs (eq. 2).
    pair_thresholds : list of (row, feature index, threshold) from the pairs.
    thresholds : DataFrame indexed by ``feature`` with columns ``threshold``
        and ``count`` (the multiplicity pi_t), sorted by feature order then value.
    eps : per-feature tolerances used.
    statuses : count of solver statuses over M; ``params`` and ``timings``.
    """

    feature_names: list[str]
    X: np.ndarray
    y: np.ndarray
    pred: np.ndarray
    rows: np.ndarray
    x0: np.ndarray
    x_ce: np.ndarray
    costs: np.ndarray
    pair_thresholds: list[tuple[int, int, float]]
    thresholds: pd.DataFrame
    eps: np.ndarray
    statuses: dict[str, int]
    params: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    n_candidates: int = 0
    cancelled: bool = False
    ensemble: TreeEnsemble | None = None

    # ---- selection
    def _check_q(self, Q: float) -> float:
        Q = float(Q)
        if not 0.0 <= Q <= 1.0:
            raise FCCAError(f"Q is a quantile level in [0, 1]; got {Q}.")
        return Q

    def level(self, Q: float) -> float:
        """F_Q: the Q-quantile of the multiplicities."""
        Q = self._check_q(Q)
        counts = self.thresholds["count"].to_numpy()
        return float(np.quantile(counts, Q)) if counts.size else np.inf

    def kept(self, Q: float) -> np.ndarray:
        """Mask over ``thresholds``: kept at level Q (``count >= F_Q``)."""
        return self.thresholds["count"].to_numpy() >= self.level(Q)

    def select(self, Q: float) -> pd.DataFrame:
        """The thresholds kept at level Q."""
        return self.thresholds[self.kept(Q)]

    def max_q(self) -> pd.Series:
        """For each threshold (aligned with ``thresholds``), the highest Q at
        which it is kept: with the sorted multiplicities ``s`` (n of them),
        ``(#{s <= count} - 1) / (n - 1)`` (1 when n = 1), exact for linear
        interpolation."""
        counts = self.thresholds["count"].to_numpy()
        n = counts.size
        if n <= 1:
            return pd.Series(np.ones(n), index=self.thresholds.index, name="max_q")
        s = np.sort(counts)
        k = np.searchsorted(s, counts, side="right") - 1
        return pd.Series(k / (n - 1), index=self.thresholds.index, name="max_q")

    # ---- discretisation
    def _matrix(self, X: Any) -> np.ndarray:
        if isinstance(X, pd.DataFrame):
            missing = [c for c in self.feature_names if c not in X.columns]
            if missing:
                raise FCCAError(f"Columns {missing[:5]} are missing from the rows to discretise.")
            return X[self.feature_names].to_numpy(dtype=float)
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if X.shape[1] != len(self.feature_names):
            raise FCCAError(f"Rows have {X.shape[1]} columns; the model has {len(self.feature_names)} features.")
        return X

    def labels(self) -> np.ndarray:
        """A short label per threshold (aligned with ``thresholds``), distinct
        within its feature; the same at every Q."""
        names, ts = self.thresholds.index.to_numpy(), self.thresholds["threshold"].to_numpy()
        out = np.empty(len(ts), dtype=object)
        for name in pd.unique(names):
            mask = names == name
            out[mask] = _labels(ts[mask])
        return out

    def discretize(self, X: Any = None, Q: float = 0.0) -> pd.DataFrame:
        """Binary columns ``name>t`` (1 when the value is above t) for the
        thresholds kept at Q, in feature order then increasing t (eq. 12)."""
        A = self.X if X is None else self._matrix(X)
        keep = self.kept(Q)
        names, ts = self.thresholds.index.to_numpy()[keep], self.thresholds["threshold"].to_numpy()[keep]
        cols = {f"{name}>{lab}": (A[:, self.feature_names.index(name)] > t).astype(np.int8)
                for name, t, lab in zip(names, ts, self.labels()[keep])}
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(cols, index=index)

    def _cells(self, Q: float, X: Any = None) -> np.ndarray:
        B = self.discretize(X, Q).to_numpy()
        if B.shape[1] == 0:
            return np.zeros(B.shape[0], dtype=int)
        return np.unique(B, axis=0, return_inverse=True)[1].ravel()

    def compression_rate(self, Q: float, X: Any = None) -> float:
        """eta = 1 - (distinct discretised rows) / rows."""
        cells = self._cells(Q, X)
        return 1.0 - np.unique(cells).size / max(cells.size, 1)

    def inconsistency_rate(self, Q: float, X: Any = None, y: Any = None) -> float:
        """delta (eq. 15): rows not in their cell's majority label, over rows."""
        cells = self._cells(Q, X)
        labels = self.y if y is None else np.asarray(y)
        if labels.shape[0] != cells.shape[0]:
            raise FCCAError(f"{labels.shape[0]} labels for {cells.shape[0]} rows.")
        frame = pd.DataFrame({"cell": cells, "y": pd.Series(labels).astype(str).to_numpy()})
        counts = frame.groupby(["cell", "y"]).size()
        majority = counts.groupby(level=0).max().sum()
        return float((cells.size - majority) / max(cells.size, 1))

    def curves(self, qs: Sequence[float] | None = None) -> pd.DataFrame:
        """Per Q: thresholds and features kept, compression and inconsistency rates."""
        qs = np.round(np.linspace(0, 1, 21), 4) if qs is None else qs
        rows = []
        for q in qs:
            sel = self.select(q)
            rows.append({"Q": float(q), "thresholds": len(sel), "features": sel.index.nunique(),
                         "compression": self.compression_rate(q), "inconsistency": self.inconsistency_rate(q)})
        return pd.DataFrame(rows)

    # ---- surrogate tree
    def fit_tree(self, Q: float = 0.0, max_depth: int = 3, method: str = "cart", *, X_test: Any = None,
                 y_test: Any = None, test_size: float = 0.25, random_state: int = 0,
                 time_limit: float = 60.0) -> TreeFit:
        """A tree of depth <= max_depth on the columns kept at Q.

        Trained on the rows given to :func:`fcca` (without ``X_test``: on a
        stratified ``1 - test_size`` of them) and measured on the held-out rows:
        ``accuracy`` against the labels, ``fidelity`` against the model.
        ``method``: "cart", "gosdt" (optimal sparse tree; falls back to CART
        with a note when the package is missing) or "auto" (GOSDT if installed).
        """
        if method not in ("cart", "gosdt", "auto"):
            raise FCCAError(f"Unknown tree method {method!r}; use 'cart', 'gosdt' or 'auto'.")
        if max_depth < 1:
            raise FCCAError("max_depth must be at least 1.")
        B_all = self.discretize(None, Q)
        columns = list(B_all.columns)
        if X_test is None:
            tr, te = self._split(test_size, random_state)
            B_tr, y_tr = B_all.to_numpy()[tr], self.y[tr]
            B_te, y_te, p_te = B_all.to_numpy()[te], self.y[te], self.pred[te]
        else:
            B_tr, y_tr = B_all.to_numpy(), self.y
            Xt = self._matrix(X_test)
            B_te = self.discretize(Xt, Q).to_numpy()
            y_te = self.y[:0] if y_test is None else np.asarray(y_test)
            p_te = self.ensemble.predict(Xt) if self.ensemble is not None else self.pred[:0]
        notes: list[str] = []
        use = "cart" if method == "cart" or not gosdt_available() else "gosdt"
        if method == "gosdt" and use == "cart":
            notes.append("GOSDT is not installed (pip install gosdt); CART was used instead.")
        t0 = time.perf_counter()
        if B_tr.shape[1] == 0 or np.unique(y_tr.astype(str)).size < 2:
            values, counts = np.unique(y_tr, return_counts=True)
            tree = TreeFit(use, columns, np.array([-1]), np.array([-1]), np.array([-1]),
                           np.array([values[np.argmax(counts)]], dtype=object), np.array([len(y_tr)]), Q)
            notes.append("Nothing to split on at this Q: the tree is a single leaf.")
        elif use == "gosdt":
            tree, extra = self._fit_gosdt(B_tr, y_tr, columns, max_depth, Q, time_limit)
            notes.append(extra)
        else:
            from sklearn.tree import DecisionTreeClassifier

            clf = DecisionTreeClassifier(max_depth=max_depth, random_state=random_state).fit(B_tr, y_tr)
            tree = _tree_from_sklearn(clf, columns, "cart", Q)
        scores = dict(fit_time=time.perf_counter() - t0, note=" ".join(n for n in notes if n),
                      n_train=len(B_tr), n_test=len(B_te),
                      train_accuracy=float(np.mean(_same(tree.predict(B_tr), y_tr))))
        if len(B_te):
            out = tree.predict(B_te)
            if len(y_te):
                scores["accuracy"] = float(np.mean(_same(out, y_te)))
            if len(p_te):
                scores["fidelity"] = float(np.mean(_same(out, p_te)))
        return replace(tree, **scores)

    def _split(self, test_size: float, random_state: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.X)
        idx = np.arange(n)
        if not 0 < test_size < 1 or n < 4:
            return idx, idx[:0]
        from sklearn.model_selection import train_test_split

        strat = pd.Series(self.y).astype(str).to_numpy()
        _, counts = np.unique(strat, return_counts=True)
        return train_test_split(idx, test_size=test_size, random_state=random_state,
                                stratify=strat if counts.min() >= 2 else None)

    def _fit_gosdt(self, B: np.ndarray, y: np.ndarray, columns: list[str], max_depth: int, Q: float,
                   time_limit: float) -> tuple[TreeFit, str]:
        from gosdt import GOSDTClassifier

        classes, yi = np.unique(pd.Series(y).astype(str).to_numpy(), return_inverse=True)
        originals = np.array([y[np.flatnonzero(yi == k)[0]] for k in range(len(classes))], dtype=object)
        clf = GOSDTClassifier(regularization=max(10.0 / len(B), 1e-4), allow_small_reg=True,
                              depth_budget=max_depth + 1, time_limit=max(1, int(time_limit)), worker_limit=1)
        clf.fit(pd.DataFrame(B, columns=[f"c{k}" for k in range(B.shape[1])]), yi)
        tree = _tree_from_gosdt(clf.trees_[0].tree, originals, columns, B, Q)
        status = str(getattr(getattr(clf, "result_", None), "status", ""))
        extra = "" if "CONVERGED" in status or not status else f"GOSDT stopped with status {status.split('.')[-1]}."
        return tree, extra

    # ---- views and exports
    def heatmap(self, n_bins: int = 20) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The paper's threshold heatmap (figures 7-14): features x value
        intervals (the feature's observed range cut in ``n_bins`` equal parts),
        each cell the highest Q at which a threshold inside it is kept (NaN:
        no threshold). Returns (levels, hover text)."""
        mq = self.max_q().to_numpy()
        all_labels = self.labels()
        names = [f for f in self.feature_names if f in set(self.thresholds.index)]
        levels = np.full((len(names), n_bins), np.nan)
        text = np.full((len(names), n_bins), "", dtype=object)
        lo, hi = np.nanmin(self.X, axis=0), np.nanmax(self.X, axis=0)
        cols = [f"{k / n_bins:.2f}-{(k + 1) / n_bins:.2f}" for k in range(n_bins)]
        for r, name in enumerate(names):
            j = self.feature_names.index(name)
            span = (hi[j] - lo[j]) or 1.0
            mask = (self.thresholds.index == name)
            ts, cs, qs = self.thresholds["threshold"].to_numpy()[mask], self.thresholds["count"].to_numpy()[mask], mq[mask]
            labs = all_labels[mask]                            # as in the discretised columns' names
            b = np.clip(np.floor((ts - lo[j]) / span * n_bins), 0, n_bins - 1).astype(int)
            for k in np.unique(b):
                m = b == k
                levels[r, k] = qs[m].max()
                text[r, k] = "<br>".join(f"{name} > {lab}: {c} pairs, kept up to Q={q:.2f}"
                                         for lab, c, q in zip(labs[m], cs[m], qs[m]))
        return pd.DataFrame(levels, index=names, columns=cols), pd.DataFrame(text, index=names, columns=cols)

    def pairs_frame(self) -> pd.DataFrame:
        """The counterfactual pairs, one row per changed feature, for export."""
        recs = []
        pos = {int(r): i for i, r in enumerate(self.rows)}
        for row, j, t in self.pair_thresholds:
            i = pos[row]
            recs.append({"row": row, "feature": self.feature_names[j], "x0": self.x0[i, j],
                         "x_ce": self.x_ce[i, j], "threshold": t, "cost": self.costs[i]})
        return pd.DataFrame(recs, columns=["row", "feature", "x0", "x_ce", "threshold", "cost"])

    def summary(self) -> dict[str, Any]:
        return {"candidates (M)": self.n_candidates, "counterfactuals found": int(len(self.rows)),
                "thresholds": int(len(self.thresholds)), "features with thresholds":
                int(self.thresholds.index.nunique()), "statuses": dict(self.statuses),
                "time (s)": round(self.timings.get("total", 0.0), 3)}


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    try:
        return a.astype(b.dtype) == b
    except (TypeError, ValueError):
        return a.astype(str) == b.astype(str)


# ---------------------------------------------------------------- phase 1-2
def _one_row(item: tuple[np.ndarray, list[Any]], ensemble: TreeEnsemble, kwargs: dict[str, Any]):
    """The cheapest counterfactual of ``x`` over its target classes (one-vs-rest)."""
    from core.optimal import optimal_counterfactual

    x, targets = item
    results = [optimal_counterfactual(ensemble, x, t, **kwargs) for t in targets]
    found = [r for r in results if r.found]
    return min(found, key=lambda r: r.cost) if found else results[0]


def _crossed(levels: np.ndarray, a: float, b: float) -> float | None:
    """The split level between ``a`` (query) and ``b`` (counterfactual) nearest ``b``
    (splits send ``x <= level`` left)."""
    if b < a:   # moved down: levels with b <= L < a; nearest b is the smallest
        k = np.searchsorted(levels, b, side="left")
        return float(levels[k]) if k < levels.size and levels[k] < a else None
    k = np.searchsorted(levels, b, side="left") - 1   # moved up: a <= L < b; nearest b is the largest
    return float(levels[k]) if k >= 0 and levels[k] >= a else None


@dataclass(frozen=True)
class FCCASettings:
    """FCCA's settings that change its answer (any may also be given to :func:`fcca` as a keyword).

    p0, p1 : bounds on the probability of the row's class for rows in M.
    lambda0, lambda1, lambda2 : weights of l0, l1 and squared l2 (eq. 2) on
        features scaled to [0, 1] by the schema's ranges.
    eps : per-feature tolerance (array or dict name -> value); default: the
        smallest gap between consecutive observed values.
    max_points : keep at most this many rows of M (an even spread), or all.
    time_limit : seconds per counterfactual; a row without a valid
        counterfactual in time is left out (``statuses`` counts it).
    """

    p0: float = 0.5
    p1: float = 1.0
    lambda0: float = 0.1
    lambda1: float = 1.0
    lambda2: float = 0.0
    eps: Any = None
    max_points: int | None = None
    time_limit: float = 10.0


def fcca(ensemble: Any, X: Any, y: Any, *, settings: FCCASettings | None = None, schema: Any = None,
         n_jobs: int = -1, scheduler: Any = None, progress: Callable[[int, int], None] | None = None,
         should_stop: Callable[[], bool] | None = None, **overrides: Any) -> FCCAResult:
    """Run FCCA's phases 1-2 (see the module docstring); Q is applied later.

    Parameters
    ----------
    ensemble : TreeEnsemble or a supported classifier.
    X : array or DataFrame (n_samples, n_features): the training rows.
    y : labels of X, required: the true labels (the paper: M holds the rows the
        model classifies correctly), or the model's own predictions to describe
        the model alone.
    settings : an :class:`FCCASettings`; any of its fields may also be given as a
        keyword (``p1=0.7``), which overrides it.
    schema : core.schema.Schema for kinds and ranges; inferred from X if None.
    n_jobs, scheduler : processes for the counterfactuals (-1: all cores), or a
        Dask scheduler address or Client to run them on (core.batch).
    progress : called as progress(done, total).
    should_stop : polled between rows; True stops early (``cancelled``).
    """
    t_start = time.perf_counter()
    (s,) = with_overrides(overrides, FCCAError, "FCCA", settings or FCCASettings())
    ens = ensemble if isinstance(ensemble, TreeEnsemble) else from_model(ensemble)
    if not ens.is_classifier:
        raise FCCAError(f"FCCA explains a classifier's decisions; this model is a {ens.task} model.")
    names = list(ens.feature_names)
    frame = _frame(X, names)
    A = frame.to_numpy(dtype=float)
    y = np.asarray(y)
    if y.shape[0] != len(A):
        raise FCCAError(f"{y.shape[0]} labels for {len(A)} rows.")
    eps_arr = _check_settings(s, ens, A)
    if schema is None:
        schema = infer_schema(frame, protected=[])
    elif schema.names != names:
        raise FCCAError("The schema's features do not match the model's features.")
    free = schema
    for f in schema.features:
        if f.actionability != "free":
            free = free.with_updates(f.name, actionability="free")

    pred = ens.predict(A)
    cand, n_candidates = _select(ens, A, y, pred, s)
    t_select = time.perf_counter()
    norm = {"l0": float(s.lambda0), "l1": float(s.lambda1), "l2": float(s.lambda2)}
    kwargs = dict(schema=free, norm=norm, time_limit=float(s.time_limit), X_ref=A, warm=True,
                  n_workers=1 if (n_jobs != 1 or scheduler) else 2)
    others = {c: [o for o in ens.classes if o != c] for c in ens.classes}
    items = [(A[i], others[pred[i]]) for i in cand]
    results = map_rows(partial(_one_row, ensemble=ens, kwargs=kwargs), items, n_jobs=n_jobs, chunk_size="auto",
                       progress=progress, should_stop=should_stop, scheduler=scheduler)
    t_cf = time.perf_counter()

    levels = feature_levels(ens, [f.kind for f in schema.features])   # the splits a counterfactual can cross
    statuses: dict[str, int] = {}
    rows, x0s, xces, costs, pair_t = [], [], [], [], []
    for i, res in zip(cand, results):
        st = "not run" if res is None else res.status
        statuses[st] = statuses.get(st, 0) + 1
        if res is None or not res.found:
            continue
        x0, xc = A[i], np.asarray(res.x, dtype=float)
        rows.append(int(i))
        costs.append(float(res.cost))
        x0s.append(x0)
        xces.append(xc)
        pair_t.extend((int(i), j, t) for j, t in _pair_thresholds(levels, x0, xc, eps_arr))
    if not rows:
        raise FCCAError(f"No counterfactual was found for the {cand.size} selected rows "
                        f"(statuses: {statuses}); raise the time limit.")
    t_end = time.perf_counter()
    params = {"p0": s.p0, "p1": s.p1, "lambda0": s.lambda0, "lambda1": s.lambda1, "lambda2": s.lambda2,
              "max_points": s.max_points, "time_limit": s.time_limit, "n_jobs": n_jobs}
    timings = {"select": t_select - t_start, "counterfactuals": t_cf - t_select, "thresholds": t_end - t_cf,
               "total": t_end - t_start}
    return FCCAResult(names, A, y, pred, np.array(rows, dtype=int), np.array(x0s), np.array(xces),
                      np.array(costs), pair_t, _threshold_table(pair_t, names), eps_arr, statuses, params, timings,
                      n_candidates, any(r is None for r in results), ens)


def _frame(X: Any, names: list[str]) -> pd.DataFrame:
    """X as a frame in the model's feature order, checked."""
    if isinstance(X, pd.DataFrame):
        missing = [c for c in names if c not in X.columns]
        if missing:
            raise FCCAError(f"Columns {missing[:5]} of the model are missing from X.")
        frame = X[names]
    else:
        arr = np.atleast_2d(np.asarray(X, dtype=float))
        if arr.shape[1] != len(names):
            raise FCCAError(f"X has {arr.shape[1]} columns; the model has {len(names)} features.")
        frame = pd.DataFrame(arr, columns=names)
    A = frame.to_numpy(dtype=float)
    if len(A) == 0:
        raise FCCAError("X has no rows.")
    if not np.all(np.isfinite(A)):
        raise FCCAError("X holds missing or infinite values; drop or fill them first.")
    return frame


def _check_settings(s: FCCASettings, ens: TreeEnsemble, A: np.ndarray) -> np.ndarray:
    """Validate the settings; the per-feature eps."""
    if not (0.0 <= s.p0 <= s.p1 <= 1.0):
        raise FCCAError(f"Need 0 <= p0 <= p1 <= 1; got p0={s.p0}, p1={s.p1}.")
    if min(s.lambda0, s.lambda1, s.lambda2) < 0 or s.lambda0 + s.lambda1 + s.lambda2 <= 0:
        raise FCCAError("lambda0, lambda1 and lambda2 must be >= 0 and not all zero.")
    if s.eps is None:
        eps_arr = default_eps(A)
    elif isinstance(s.eps, dict):
        eps_arr = default_eps(A)
        for k, v in s.eps.items():
            eps_arr[ens.feature_index(k)] = float(v)
    else:
        eps_arr = np.broadcast_to(np.asarray(s.eps, dtype=float), (ens.n_features,)).copy()
    if np.any(~np.isfinite(eps_arr)) or np.any(eps_arr < 0):
        raise FCCAError("eps must be finite and >= 0.")
    return eps_arr


def _select(ens: TreeEnsemble, A: np.ndarray, y: np.ndarray, pred: np.ndarray, s: FCCASettings
            ) -> tuple[np.ndarray, int]:
    """The rows of M (classified correctly with probability in [p0, p1]), at most
    ``max_points`` of them evenly spread, and how many there were."""
    cls_pos = {c: i for i, c in enumerate(ens.classes)}
    own = ens.predict_proba(A)[np.arange(len(A)), [cls_pos[p] for p in pred]]   # probability of the row's class
    cand = np.flatnonzero(_same(pred, y) & (own >= s.p0 - 1e-12) & (own <= s.p1 + 1e-12))
    n_candidates = int(cand.size)
    if s.max_points is not None and cand.size > s.max_points:
        cand = cand[np.unique(np.linspace(0, cand.size - 1, int(s.max_points)).round().astype(int))]
    if cand.size == 0:
        raise FCCAError(f"No row is classified correctly with probability in [{s.p0}, {s.p1}]: "
                        "widen [p0, p1] or check that the labels match the model's classes.")
    return cand, n_candidates


def _pair_thresholds(levels: list[np.ndarray], x0: np.ndarray, xc: np.ndarray, eps: np.ndarray):
    """(feature, threshold) for each feature the counterfactual changed: the model
    split it crossed, or the paper's xCE + eps * sign(x0 - xCE) when none was."""
    for j in np.flatnonzero(x0 != xc):
        t = _crossed(levels[j], x0[j], xc[j])
        if t is None:
            if abs(x0[j] - xc[j]) <= eps[j]:
                continue
            t = float(xc[j] + eps[j] * np.sign(x0[j] - xc[j]))
        yield int(j), t


def _threshold_table(pair_t: list[tuple[int, int, float]], names: list[str]) -> pd.DataFrame:
    """Thresholds with their counts, indexed by feature, sorted."""
    if not pair_t:
        return pd.DataFrame({"threshold": np.array([], dtype=float), "count": np.array([], dtype=int)},
                            index=pd.Index([], name="feature", dtype=object))
    tab = pd.DataFrame(pair_t, columns=["row", "j", "threshold"])
    tab = tab.groupby(["j", "threshold"]).size().rename("count").reset_index().sort_values(["j", "threshold"])
    return pd.DataFrame({"threshold": tab["threshold"].to_numpy(dtype=float),
                         "count": tab["count"].to_numpy(dtype=int)},
                        index=pd.Index([names[j] for j in tab["j"]], name="feature"))


def explain_flat_curves(res: FCCAResult, curves: pd.DataFrame) -> str | None:
    """Why a curve over Q stays flat while the thresholds kept change, in words (None
    when nothing is flat). Flat curves are right, not a fault, when dropping a threshold
    does not change what the curve measures on these rows:

    * two thresholds of a feature with no row between them split the rows the same
      way, so the cells (compression) cannot change;
    * a threshold whose two sides have the same majority label merges cells without
      adding a row outside its majority (inconsistency, and the tree's accuracy
      and fidelity, which can reach the same partition, stay put);
    * all counterfactuals crossing one feature make every threshold one of its cuts.
    """
    if len(curves) < 2 or curves["thresholds"].nunique() < 2:
        return None
    flat = [c for c in ("compression", "inconsistency", "tree accuracy", "tree fidelity")
            if c in curves and np.ptp(curves[c].to_numpy(dtype=float)) < 1e-12]
    if not flat:
        return None
    th = res.thresholds
    same_split, features = 0, th.index.unique()
    for name in features:
        v = np.sort(res.X[:, res.feature_names.index(name)])
        ts = np.sort(th.loc[[name], "threshold"].to_numpy())
        sides = np.searchsorted(v, ts, side="right")          # rows at or below each threshold
        same_split += int(np.sum(np.diff(sides) == 0))
    lo, hi = int(curves["thresholds"].min()), int(curves["thresholds"].max())
    parts = [f"{' and '.join(flat)} stay{'s' if len(flat) == 1 else ''} the same while the thresholds kept go "
             f"from {hi} to {lo}. This is expected here:"]
    if len(features) == 1:
        parts.append(f"every counterfactual crosses the one feature {features[0]!r}, so all thresholds are cuts of it;")
    if same_split:
        parts.append(f"{same_split} threshold(s) split these rows exactly as a neighbouring one does (no row lies "
                     "between them: a low-cardinality or binary feature), so dropping them changes no cell;")
    if "inconsistency" in flat:   # merging cells keeps the inconsistency iff they share their majority label
        parts.append("the thresholds dropped separate cells with the same majority decision of the model, so "
                     "merging them leaves the inconsistency (and what a tree can learn) unchanged.")
    return " ".join(parts)
