"""FCCA's result: the counterfactual pairs and thresholds, and all that is read from them at a level Q.

:class:`FCCAResult` is what :func:`core.compression.fcca` returns (phases 1-2). Q is
applied here, without recomputing a counterfactual: the thresholds kept at
``F_Q`` (eq. 12), the binary columns ``b_it = [x_ij > t]``, the compression
and inconsistency rates (eq. 15), their curves over Q, the surrogate tree on
the binary columns (:mod:`core.compression.tree`), the threshold heatmap and the
exports; :func:`explain_flat_curves` says in words why a curve stays flat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Sequence

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from core.compression.tree import TreeFit, fit_binary_tree
from core.errors import FCCAError
from core.model import Guarantee, TreeEnsemble
from core.model.result import (
    Reader,
    Result,
    Writer,
    ensemble_from_dict,
    ensemble_to_dict,
    frame_from_dict,
    frame_to_dict,
    settings,
)
from core.shown import bound_text
from core.typing import ArrayLike, Rows

__all__ = ["FCCAResult", "explain_flat_curves"]

_Q_TOL = 1e-12   # Q compared with a share k / n: a level typed as 0.7 keeps the share 21/30


def _precision(v: float, digits: int) -> int:
    """Significant digits for ``v``: ``digits``, or the integer part and one more."""
    return digits if not v else min(17, max(digits, int(np.floor(np.log10(abs(v)))) + 2))


def _labels(values: np.ndarray) -> list[str]:
    """Short labels for distinct thresholds of one feature: the fewest
    significant digits (at least 6, and every digit of the integer part)
    that keep them distinct, rounded down (:func:`core.shown.bound_text`: a
    column ``name>label`` is 0 for the label itself, as for the exact
    threshold); exponent notation for tiny or huge values."""
    values = np.asarray(values, dtype=float)
    for digits in range(6, 18):
        out = [bound_text(v, grouping=False, digits=_precision(v, digits)) for v in values]
        if len(set(out)) == len(out):
            return out
    return [repr(float(v)) for v in values]


# ---------------------------------------------------------------- the result
@dataclass(frozen=True, eq=False)
class FCCAResult(Result):
    """Counterfactual pairs, thresholds and everything needed to discretise; a
    :class:`core.model.result.Result`: ``params``, ``elapsed`` (the total of ``timings``)
    and ``guarantee`` (``proven_optimal`` when every pair was proven optimal, else
    ``time_limited``; the thresholds are read exactly off the pairs). On a model that is
    not a tree ensemble the pairs are its surrogate's: the guarantee is then ``estimated``
    through the surrogate, with its fidelity, and says how many the model itself accepts.

    Attributes
    ----------
    feature_names : list of str
    X, y : the rows and labels given to :func:`core.compression.fcca`; ``pred`` the model's labels.
    rows : indices (into X) of the rows of M whose counterfactual was found.
    x0, x_ce : arrays (len(rows), n_features): the pairs, in original units;
        ``costs`` their optimal costs (eq. 2).
    pair_thresholds : list of (row, feature index, threshold) from the pairs.
    thresholds : DataFrame indexed by ``feature`` with columns ``threshold``
        and ``count`` (the multiplicity pi_t), sorted by feature order then value.
    eps : per-feature tolerances used.
    statuses : count of solver statuses over M; ``params`` and ``timings``.
    model_kind : what the model is (``"tree_ensemble"``: ``ensemble`` is the model itself).
    surrogate_fidelity, boundary_fidelity : when ``ensemble`` is a surrogate of the model,
        its agreement with it on held-out rows and near its decision boundary.
    valid_on_model : per pair (aligned with ``rows``), does the model itself give the
        counterfactual the class it was found for; None when not checked.
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
    model_kind: str = "tree_ensemble"
    surrogate_fidelity: float | None = None
    boundary_fidelity: float | None = None
    valid_on_model: np.ndarray | None = None

    kind: ClassVar[str] = "fcca"
    what: ClassVar[str] = "FCCA result"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))

    @property
    def elapsed(self) -> float:  # type: ignore[override]
        total = self.timings.get("total")
        return math.nan if total is None else float(total)

    @property
    def via_surrogate(self) -> bool:
        """Are the pairs and thresholds a surrogate's (the model is not the ensemble solved)?"""
        return self.model_kind != "tree_ensemble" or self.surrogate_fidelity is not None

    def _not_reached(self) -> str:
        """The sentence on the rows the run's time limit left out ("" when none)."""
        k = self.statuses.get("not reached", 0)
        return (f" {k:,} rows of M were not reached within the run's time limit "
                f"({self.params.get('run_time_limit')} s) and are left out." if k else "")

    @property
    def guarantee(self) -> Guarantee:  # type: ignore[override]
        n = sum(v for k, v in self.statuses.items() if k not in ("not reached", "not run"))    # searches run
        proven = self.statuses.get("optimal", 0) + self.statuses.get("infeasible", 0)
        if self.via_surrogate:
            g = self._surrogate_guarantee(n, proven)
        elif proven == n and not self.cancelled:
            g = Guarantee("proven_optimal", note=f"Each of the {n:,} counterfactual searches is proven (an optimal "
                          "pair, or none exists); the thresholds are read exactly off the pairs."
                          + self._not_reached())
        else:
            g = Guarantee("time_limited", note=(
                f"{proven:,} of the {n:,} counterfactual searches were proven (an optimal pair, or none exists)"
                + (" (the run was cancelled)" if self.cancelled else "")
                + "; the others give the best point found in time, or none. The thresholds are read exactly "
                "off the pairs." + self._not_reached()))
        return replace(g, note=g.note + self._constraints_note()) if self.params.get("constraints") else g

    def _constraints_note(self) -> str:
        """Under constraints between features: that every pair keeps them, and the rows they preclude."""
        texts = list(self.params.get("constraints") or [])
        k = self.statuses.get("infeasible", 0)
        return (f" Every counterfactual keeps the {len(texts)} constraint{'s' * (len(texts) != 1)} between features "
                f"({'; '.join(texts)})" + (f"; {k:,} rows of M have none under them (precluded)." if k else "."))

    def _surrogate_guarantee(self, n: int, proven: int) -> Guarantee:
        """Estimated through the surrogate: what was optimal for it, and what the model accepts."""
        note = (f"The counterfactuals are the surrogate's ({proven:,} of the {n:,} searches proven optimal for it) and "
                "every threshold is one of its splits, not read off the model")
        if self.valid_on_model is not None and len(self.valid_on_model):
            ok, k = int(np.sum(self.valid_on_model)), len(self.valid_on_model)
            note += (f"; checked on the model itself, {ok:,} of the {k:,} counterfactuals ({ok / k:.1%}) reach the "
                     "class they were found for, and each threshold says how many of its pairs do")
        note += "." + self._not_reached()
        return Guarantee("estimated", self.model_kind, surrogate_fidelity=self.surrogate_fidelity,  # type: ignore[arg-type]
                         boundary_fidelity=self.boundary_fidelity, note=note)

    def _body(self) -> dict[str, Any]:
        w = Writer().value("feature_names", list(self.feature_names)).array("X", self.X)
        w.array("y", self.y).value("y_dtype", str(np.asarray(self.y).dtype))
        w.array("pred", self.pred).value("pred_dtype", str(np.asarray(self.pred).dtype))
        w.array("rows", self.rows).array("x0", self.x0).array("x_ce", self.x_ce).array("costs", self.costs, math.inf)
        w.value("pair_thresholds", [[int(i), int(j), float(t)] for i, j, t in self.pair_thresholds])
        w.value("thresholds", frame_to_dict(self.thresholds)).array("eps", self.eps)
        w.value("statuses", {str(k): int(v) for k, v in self.statuses.items()}).numbers("timings", self.timings)
        w.value("n_candidates", int(self.n_candidates)).value("cancelled", bool(self.cancelled))
        w.value("model_kind", self.model_kind).value("surrogate_fidelity", self.surrogate_fidelity)
        w.value("boundary_fidelity", self.boundary_fidelity)
        w.value("valid_on_model", None if self.valid_on_model is None else [bool(v) for v in self.valid_on_model])
        return w.value("ensemble", None if self.ensemble is None else ensemble_to_dict(self.ensemble)).done()

    @classmethod
    def _from_body(cls, r: Reader) -> "FCCAResult":
        def labels(key: str) -> np.ndarray:
            dtype = np.dtype(str(r.get(f"{key}_dtype", "object")))
            return np.asarray(r.get(key), dtype=dtype if dtype.kind in "biufU" else object)

        ens = r.get("ensemble", None)
        checked = r.get("valid_on_model", None)           # absent: saved before the check, or on a tree ensemble
        return cls([str(n) for n in r.get("feature_names")], r.array("X"), labels("y"), labels("pred"),
                   r.array("rows", dtype=np.int64), r.array("x0"), r.array("x_ce"), r.array("costs", math.inf),
                   [(int(i), int(j), float(t)) for i, j, t in r.get("pair_thresholds")],
                   frame_from_dict(r.get("thresholds")), r.array("eps"),
                   {str(k): int(v) for k, v in r.get("statuses").items()}, dict(r.get("params")),
                   r.numbers("timings"), int(r.get("n_candidates")), bool(r.get("cancelled")),
                   None if ens is None else ensemble_from_dict(ens), str(r.get("model_kind", "tree_ensemble")),
                   r.get("surrogate_fidelity", None), r.get("boundary_fidelity", None),
                   None if checked is None else np.asarray(checked, dtype=bool))

    # ---- selection
    def _check_q(self, Q: float) -> float:
        Q = float(Q)
        if not 0.0 <= Q <= 1.0:
            raise FCCAError(f"Q is a quantile level in [0, 1]; got {Q}.")
        return Q

    def _cdf(self) -> np.ndarray:
        """Per threshold (aligned with ``thresholds``), the share of thresholds
        counted at most as often as it: the distribution function of the
        multiplicities at its own count."""
        counts = self.thresholds["count"].to_numpy()
        return np.searchsorted(np.sort(counts), counts, side="right") / max(counts.size, 1)

    def level(self, Q: float) -> float:
        """F_Q: the Q-quantile of the distribution of the multiplicities, the
        smallest count ``c`` with at least a share Q of the thresholds counted
        ``<= c`` (the inverse of their distribution function, so always a count
        some threshold has; inf when there is no threshold)."""
        Q = self._check_q(Q)
        counts = self.thresholds["count"].to_numpy()
        keep = self._cdf() >= Q - _Q_TOL
        return float(counts[keep].min()) if keep.any() else np.inf

    def kept(self, Q: float) -> np.ndarray:
        """Mask over ``thresholds``: kept at level Q (``count >= F_Q``; every
        threshold whose count ties with F_Q is kept)."""
        return self.thresholds["count"].to_numpy() >= self.level(Q)

    def select(self, Q: float) -> pd.DataFrame:
        """The thresholds kept at level Q."""
        return self.thresholds[self.kept(Q)]

    def max_q(self) -> pd.Series:
        """For each threshold (aligned with ``thresholds``), the highest Q at
        which it is kept: the share of thresholds counted at most as often as
        it (``#{counts <= its count} / n``), since ``count >= F_Q`` exactly
        when that share is at least Q."""
        return pd.Series(self._cdf(), index=self.thresholds.index, name="max_q")

    # ---- discretisation
    def _matrix(self, X: Rows) -> np.ndarray:
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

    def discretize(self, X: Rows | None = None, Q: float = 0.0) -> pd.DataFrame:
        """Binary columns ``name>t`` (1 when the value is above t) for the
        thresholds kept at Q, in feature order then increasing t (eq. 12)."""
        A = self.X if X is None else self._matrix(X)
        keep = self.kept(Q)
        names, ts = self.thresholds.index.to_numpy()[keep], self.thresholds["threshold"].to_numpy()[keep]
        cols = {f"{name}>{lab}": (A[:, self.feature_names.index(name)] > t).astype(np.int8)
                for name, t, lab in zip(names, ts, self.labels()[keep])}
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(cols, index=index)

    def _cells(self, Q: float, X: Rows | None = None) -> np.ndarray:
        B = self.discretize(X, Q).to_numpy()
        if B.shape[1] == 0:
            return np.zeros(B.shape[0], dtype=int)
        return np.unique(B, axis=0, return_inverse=True)[1].ravel()

    def compression_rate(self, Q: float, X: Rows | None = None) -> float:
        """eta = 1 - (distinct discretised rows) / rows."""
        cells = self._cells(Q, X)
        return 1.0 - np.unique(cells).size / max(cells.size, 1)

    def inconsistency_rate(self, Q: float, X: Rows | None = None, y: ArrayLike | None = None) -> float:
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
        levels = [float(q) for q in (np.round(np.linspace(0, 1, 21), 4) if qs is None else qs)]
        rows = []
        for q in levels:
            sel = self.select(q)
            rows.append({"Q": float(q), "thresholds": len(sel), "features": sel.index.nunique(),
                         "compression": self.compression_rate(q), "inconsistency": self.inconsistency_rate(q)})
        return pd.DataFrame(rows)

    # ---- surrogate tree
    def fit_tree(self, Q: float = 0.0, max_depth: int = 3, method: str = "cart", *, X_test: Rows | None = None,
                 y_test: ArrayLike | None = None, test_size: float = 0.25, random_state: int = 0,
                 time_limit: float = 60.0) -> TreeFit:
        """A tree of depth <= max_depth on the columns kept at Q.

        Trained on the rows given to :func:`core.compression.fcca` (without ``X_test``: on a
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
        tree = fit_binary_tree(B_tr, y_tr, columns, Q, method=method, max_depth=max_depth,
                               random_state=random_state, time_limit=time_limit)
        return tree.scored(B_te, y_te, p_te)

    def _split(self, test_size: float, random_state: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.X)
        idx = np.arange(n)
        if not 0 < test_size < 1 or n < 4:
            return idx, idx[:0]
        strat = pd.Series(self.y).astype(str).to_numpy()
        _, counts = np.unique(strat, return_counts=True)
        return train_test_split(idx, test_size=test_size, random_state=random_state,
                                stratify=strat if counts.min() >= 2 else None)

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
        columns = ["row", "feature", "x0", "x_ce", "threshold", "cost"]
        checked = self.valid_on_model
        for row, j, t in self.pair_thresholds:
            i = pos[row]
            rec = {"row": row, "feature": self.feature_names[j], "x0": self.x0[i, j],
                   "x_ce": self.x_ce[i, j], "threshold": t, "cost": self.costs[i]}
            if checked is not None:
                rec["valid on the model"] = bool(checked[i])
            recs.append(rec)
        return pd.DataFrame(recs, columns=columns + ([] if checked is None else ["valid on the model"]))

    def summary(self) -> dict[str, Any]:
        return {"candidates (M)": self.n_candidates, "counterfactuals found": int(len(self.rows)),
                "thresholds": int(len(self.thresholds)), "features with thresholds":
                int(self.thresholds.index.nunique()), "statuses": dict(self.statuses),
                "time (s)": round(self.elapsed, 3)}



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
