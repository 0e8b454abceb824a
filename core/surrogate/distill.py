"""A tree-ensemble surrogate distilled from any model, with its fidelity measured.

The exact analyses (optimal counterfactuals, decision regions, FCCA) reason about a
:class:`core.model.TreeEnsemble`. For a model that is not one (an MLP, a kernel
SVM, an ONNX graph: a :class:`core.model.blackbox.BlackBoxModel`) they run on a
surrogate fitted to the model's own answers, the way counterfactual rules fit
their random forest on ``(X, f(X))`` (Amoukou & Brunel) and T-CREx its tree
(Bewley et al., "only black box access to the target model"):

1. the rows ``X`` (the analyst's data, codes view) are split into a fitting part
   and a held-out part (``holdout``);
2. *near the boundary*: pairs of fitting rows the model decides differently
   (each row and its nearest neighbour of another answer, in range-scaled
   units) are bisected on the segment between them (``steps`` batched calls of
   the model), which finds points on the model's decision boundary; points
   scattered around them (``spread`` of each feature's range; categories
   switched with probability 0.1) are labelled by the model. A share of them is
   held out too;
3. a LightGBM booster (categories as pandas categories, so the surrogate has the
   model's categorical features with the same codes) is fitted to the model's
   answers on the fitting rows and the boundary points, and read exactly into a
   ``TreeEnsemble`` (:func:`core.model.as_ensemble`, checked against LightGBM);
4. its *fidelity* is its agreement with the model on the held-out rows and, for a
   classifier, on the held-out boundary points (a regressor: the share of
   held-out rows within 5% of the model's output range).

Nothing found on a surrogate is claimed of the model until it is checked on it
(:mod:`core.surrogate.repair`).

A :class:`Surrogate` is a result (:class:`core.model.result.Result`, kind ``"surrogate"``):
``params``, ``elapsed``, a ``guarantee`` that says its fidelity is estimated, and
``to_json`` / ``from_json`` with its trees; :meth:`Surrogate.summary` is the few figures
the audit and the comparison record of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar

import numpy as np
import pandas as pd

from core.errors import AtlasError
from core.model import TreeEnsemble, as_ensemble
from core.model.ensemble import _replace
from core.model.guarantee import MODEL_KINDS, Guarantee
from core.model.result import Reader, Result, Writer, ensemble_from_dict, ensemble_to_dict, settings
from core.typing import ModelLike, Rows

__all__ = ["Surrogate", "distill", "decode_frame"]

#: categorical splits one category against the rest (LightGBM's one-hot splits) up to this many
#: categories: each is one test of one 0/1 column once the workspace writes categories as columns,
#: where a partition split would become a chain of tests with copies of its subtrees
MAX_CAT_TO_ONEHOT = 64


@dataclass(frozen=True, eq=False)
class Surrogate(Result):
    """A tree ensemble fitted to a model's answers, and how faithful it is.

    native : TreeEnsemble with the model's features (names, categories, codes); it
        takes the codes view (``meta["input"] == "codes"``), as the model does.
    ensemble : what the analyses read: ``native`` itself, or the view the caller made of
        it (:meth:`with_view`: categories as one-hot columns, missing values as states),
        whose rows :func:`core.model.native.model_input` turns back into the codes view.
    fidelity : share of held-out data rows on which it answers as the model.
    boundary_fidelity : the same on held-out points near the model's decision
        boundary (None for a regressor).
    n_fit : rows it was fitted on (data rows + boundary points).
    params, elapsed : how it was made, and in how many seconds.
    guarantee : ``estimated``: its fidelity is measured on held-out points, nothing is proven.

    As a result (``to_json`` / ``from_json``) it keeps its native trees and figures; the
    fitting rows and the view are not saved (a surrogate read back is its native trees,
    and a workspace applies its view again with :meth:`with_view`). Two surrogates are
    equal when their trees, figures, settings and identity are.
    """

    kind: ClassVar[str] = "surrogate"
    what: ClassVar[str] = "surrogate"

    native: TreeEnsemble
    fidelity: float
    boundary_fidelity: float | None
    n_fit: int
    params: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0
    identity: str = ""
    X_fit: np.ndarray | None = field(default=None, repr=False)
    y_fit: np.ndarray | None = field(default=None, repr=False)
    view: Callable[[TreeEnsemble], TreeEnsemble] | None = field(default=None, repr=False)
    ensemble: TreeEnsemble = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if self.ensemble is None:
            object.__setattr__(self, "ensemble", self.native if self.view is None else self.view(self.native))

    @property
    def guarantee(self) -> Guarantee:  # type: ignore[override]
        """What its agreement with the model is: an estimate on held-out points, nothing proven."""
        kind = self.params.get("model_kind")
        return Guarantee("estimated", kind if kind in MODEL_KINDS else "black_box",
                         surrogate_fidelity=self.fidelity, boundary_fidelity=self.boundary_fidelity,
                         note="The surrogate is a tree ensemble fitted to the model's answers; its agreement is "
                              "measured on held-out rows (and points near the model's decision boundary).")

    def _compared(self) -> tuple[str, ...]:
        return ("native", "fidelity", "boundary_fidelity", "n_fit", "params", "elapsed", "identity")

    def _body(self) -> dict[str, Any]:
        w = Writer().number("fidelity", self.fidelity).value("boundary_fidelity", self.boundary_fidelity)
        w.value("n_fit", int(self.n_fit)).value("identity", self.identity)
        return {**w.done(), "native": ensemble_to_dict(self.native)}

    @classmethod
    def _from_body(cls, r: Reader) -> "Surrogate":
        bf = r.get("boundary_fidelity")
        return cls(native=ensemble_from_dict(r.get("native")), fidelity=r.number("fidelity"),
                   boundary_fidelity=None if bf is None else float(bf), n_fit=int(r.get("n_fit")),
                   params=dict(r.get("params")), elapsed=r.number("elapsed"), identity=str(r.get("identity")))

    def with_view(self, view: Callable[[TreeEnsemble], TreeEnsemble]) -> "Surrogate":
        """This surrogate as the analyses read it after ``view`` (a function of the native
        surrogate, e.g. the workspace's one-hot and missing-state rewrites); a refit
        (:mod:`core.surrogate.repair`) applies the same view to the refitted trees."""
        return replace(self, view=view, ensemble=view(self.native))

    def refit(self, model: ModelLike, X_new: np.ndarray, *, weight: float = 5.0, random_state: int | None = None
              ) -> "Surrogate":
        """The surrogate fitted again with ``X_new`` (codes view, labelled by ``model``) added
        with a larger weight; the same view, the same fidelity figures (of the first fit)."""
        assert self.X_fit is not None and self.y_fit is not None
        X = np.concatenate([self.X_fit, X_new])
        y = np.concatenate([self.y_fit, _labels(model, X_new)])
        w = np.concatenate([np.ones(len(self.X_fit)), np.full(len(X_new), weight)])
        p = self.params
        seed = p["random_state"] if random_state is None else random_state
        native = _fit(model, X, y, w, p["n_estimators"], p["num_leaves"], p["learning_rate"], seed)
        return replace(self, native=native, ensemble=native if self.view is None else self.view(native),
                       X_fit=X, y_fit=y, params={**p, "refits": p.get("refits", 0) + 1})

    def summary(self) -> dict[str, Any]:
        """The figures the audit and the comparison record of it (its trees are its result's,
        :meth:`to_dict`)."""
        return {"fidelity": self.fidelity, "boundary_fidelity": self.boundary_fidelity, "n_fit": self.n_fit,
                "trees": self.ensemble.n_trees, "leaves": self.ensemble.n_leaves, "params": dict(self.params),
                "elapsed": self.elapsed}


def decode_frame(model: ModelLike, X: np.ndarray) -> pd.DataFrame:
    """Codes-view rows as a frame LightGBM fits on: numbers, and categorical features as
    pandas categories with exactly the model's categories (the missing code as NaN)."""
    cols: dict[str, Any] = {}
    for j, name in enumerate(model.feature_names):
        cats = model.categories[j]
        if cats is None:
            cols[name] = X[:, j]
        else:
            codes = X[:, j].astype(np.int64)
            cols[name] = pd.Categorical.from_codes(np.where(codes >= len(cats), -1, codes),
                                                   categories=pd.Index(list(range(len(cats)))))
    return pd.DataFrame(cols, columns=list(model.feature_names))


def _spans(X: np.ndarray, model: Any) -> np.ndarray:
    lo, hi = np.nanmin(X, axis=0), np.nanmax(X, axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    for j in range(X.shape[1]):
        if model.categories[j] is not None:
            span[j] = 1.0
    return span


def _labels(model: Any, X: np.ndarray) -> np.ndarray:
    y = model.predict(X)
    if model.is_classifier:
        classes = list(model.classes)
        index = {c: k for k, c in enumerate(classes)}
        index.update({str(c): k for k, c in enumerate(classes)})
        return np.array([index.get(v, index.get(str(v), -1)) for v in y.tolist()], dtype=np.int64)
    return np.asarray(y, dtype=np.float64)


def _boundary_points(model: Any, X: np.ndarray, y: np.ndarray, rng: np.random.Generator, n_pairs: int,
                     steps: int, spread: float, per_point: int) -> tuple[np.ndarray, np.ndarray]:
    """Points near the model's decision boundary, labelled by the model (see the module docstring)."""
    from sklearn.neighbors import NearestNeighbors

    span = _spans(X, model)
    cat = np.array([c is not None for c in model.categories])
    Z = np.nan_to_num(X / span)
    labels = np.unique(y)
    if len(labels) < 2:
        return np.empty((0, X.shape[1])), np.empty(0)
    a_idx = rng.choice(len(X), size=min(n_pairs, len(X)), replace=False)
    b_idx = np.empty_like(a_idx)
    for lab in labels:
        others = np.flatnonzero(y != lab)
        mine = np.flatnonzero(y[a_idx] == lab)
        if not len(mine) or not len(others):
            b_idx[mine] = a_idx[mine]
            continue
        nn = NearestNeighbors(n_neighbors=1).fit(Z[others])
        b_idx[mine] = others[nn.kneighbors(Z[a_idx[mine]], return_distance=False)[:, 0]]
    keep = y[a_idx] != y[b_idx]
    A, B = X[a_idx[keep]], X[b_idx[keep]]
    if not len(A):
        return np.empty((0, X.shape[1])), np.empty(0)
    ya = y[a_idx[keep]]
    switch = rng.random(A.shape)                    # where along the segment each category switches

    def at(t: np.ndarray) -> np.ndarray:
        P = A + t[:, None] * (B - A)
        P[:, cat] = np.where(switch[:, cat] < t[:, None], B[:, cat], A[:, cat])
        both_nan = np.isnan(A) | np.isnan(B)        # a missing value stays missing (on either side)
        P[both_nan] = np.where(t[:, None] < 0.5, A, B)[both_nan]
        return P

    lo, hi = np.zeros(len(A)), np.ones(len(A))
    for _ in range(steps):                          # one batched call per step
        mid = (lo + hi) / 2
        same = _labels(model, at(mid)) == ya
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    P = np.concatenate([at(lo), at(hi)])
    clouds = [P]
    for _ in range(per_point):
        Q = P + rng.normal(size=P.shape) * spread * span
        flip = rng.random(P.shape) < 0.1
        for j in np.flatnonzero(cat):
            k = len(model.categories[j])
            Q[flip[:, j], j] = rng.integers(0, k, size=int(flip[:, j].sum()))
            Q[~flip[:, j], j] = P[~flip[:, j], j]
        clouds.append(Q)
    S = np.concatenate(clouds)
    finite_lo, finite_hi = np.nanmin(X, axis=0), np.nanmax(X, axis=0)
    S = np.where(np.isnan(S), S, np.clip(S, finite_lo, finite_hi))
    return S, _labels(model, S)


def distill(model: ModelLike, X: Rows, *, holdout: float = 0.2, n_pairs: int = 2000, steps: int = 8,
            spread: float = 0.03, per_point: int = 3, n_estimators: int = 100, num_leaves: int = 15,
            learning_rate: float = 0.1, random_state: int = 0) -> Surrogate:
    """Fit a tree-ensemble surrogate to ``model``'s answers on the rows ``X`` (codes view)
    and near its decision boundary; see the module docstring.

    Parameters
    ----------
    model : a model with ``predict`` on codes-view rows (a BlackBoxModel, or any model
        of :mod:`core.model`), with ``feature_names``, ``categories``, ``task``, ``classes``.
    X : array-like of shape (n_rows, n_features), the data rows (codes view).
    holdout : share of rows (and of boundary points) kept out to measure fidelity.
    n_pairs, steps, spread, per_point : the boundary sampling (module docstring).
    n_estimators, num_leaves, learning_rate : the LightGBM surrogate's size.
    random_state : seeds every random choice; the same inputs give the same surrogate.
    """
    t0 = time.perf_counter()
    X = _checked_rows(model, X, holdout)
    rng = np.random.default_rng(random_state)
    order = rng.permutation(len(X))
    n_hold = max(1, int(round(holdout * len(X))))
    hold, fit = order[:n_hold], order[n_hold:]
    y = _labels(model, X)
    classifier = bool(model.is_classifier)
    if classifier and np.any(y < 0):
        raise AtlasError("The model answered a class it does not list among its classes.")
    if classifier:
        S, yS = _boundary_points(model, X[fit], y[fit], rng, n_pairs, steps, spread, per_point)
    else:
        S, yS = _jittered_points(model, X, X[fit], rng, n_pairs, spread)
    s_order = rng.permutation(len(S))
    s_hold = s_order[:int(round(holdout * len(S)))]
    s_fit = s_order[len(s_hold):]
    X_fit = np.concatenate([X[fit], S[s_fit]])
    y_fit = np.concatenate([y[fit], yS[s_fit]])
    if classifier and len(np.unique(y_fit)) < 2:
        raise AtlasError(_one_label(model, X, int(y_fit[0])))
    ens = _fit(model, X_fit, y_fit, None, n_estimators, num_leaves, learning_rate, random_state)
    fidelity, boundary = _fidelities(ens, X[hold], y[hold], S[s_hold], yS[s_hold], classifier, float(np.ptp(y)))
    return Surrogate(native=ens, fidelity=fidelity, boundary_fidelity=boundary, n_fit=len(X_fit),
                     params={"learner": "lightgbm", "holdout": holdout, "n_pairs": n_pairs, "steps": steps,
                             "spread": spread, "per_point": per_point, "n_estimators": n_estimators,
                             "num_leaves": num_leaves, "learning_rate": learning_rate,
                             "random_state": random_state, "rows": len(X), "boundary_points": len(S),
                             "model_kind": getattr(model, "kind", "black_box")},
                     elapsed=time.perf_counter() - t0, identity=str(getattr(model, "identity", "")),
                     X_fit=X_fit, y_fit=y_fit)


def _checked_rows(model: Any, X: Rows, holdout: float) -> np.ndarray:
    """The rows to distill on, checked: a model the library reads, at least 20 rows of its
    features, a holdout share in (0, 0.9)."""
    if not hasattr(model, "feature_names") or not hasattr(model, "categories"):
        raise AtlasError(f"distill takes a model read by the library (a core.model BlackBoxModel, TreeEnsemble or "
                         f"LinearModel), not a {type(model).__name__}: for a fitted model of your own, "
                         "core.open_workspace(model, data, target) reads it and fits its surrogate (ws.surrogate).")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(model.feature_names):
        raise AtlasError(f"Rows of shape {X.shape} given to fit a surrogate; the model takes "
                         f"{len(model.feature_names)} features.")
    if len(X) < 20:
        raise AtlasError(f"{len(X)} rows are too few to fit a surrogate of the model; give at least 20 data rows.")
    if not 0 < holdout < 0.9:
        raise AtlasError(f"holdout is {holdout}; a share between 0 and 0.9 is expected.")
    return X


def _jittered_points(model: Any, X: np.ndarray, X_fit: np.ndarray, rng: np.random.Generator, n_pairs: int,
                     spread: float) -> tuple[np.ndarray, np.ndarray]:
    """A regressor's extra points: fitting rows drawn at random, their numbers moved by
    ``spread`` of each feature's span (categories kept), and the model's answers there."""
    S = X_fit[rng.integers(0, len(X_fit), size=min(n_pairs, len(X_fit)))]
    S = S + rng.normal(size=S.shape) * spread * _spans(X, model)
    cats = [j for j, c in enumerate(model.categories) if c is not None]
    S[:, cats] = X_fit[:len(S)][:, cats]
    return S, _labels(model, S)


def _fidelities(ens: TreeEnsemble, X_hold: np.ndarray, y_hold: np.ndarray, S_hold: np.ndarray,
                yS_hold: np.ndarray, classifier: bool, y_range: float) -> tuple[float, float | None]:
    """The surrogate's fidelity on the held-out rows (a classifier's agreement, a regressor's
    share within 5% of the outputs' range) and on the held-out boundary points (classifiers)."""
    pred_hold = _surrogate_labels(ens, X_hold, classifier)
    if not classifier:
        tol = 0.05 * max(y_range, 1e-12)
        return float(np.mean(np.abs(pred_hold - y_hold) <= tol)), None
    fidelity = float(np.mean(pred_hold == y_hold))
    boundary = float(np.mean(_surrogate_labels(ens, S_hold, True) == yS_hold)) if len(S_hold) else None
    return fidelity, boundary


def _one_label(model: Any, X: np.ndarray, k: int) -> str:
    """Why a classifier that labels every row alike has nothing to explain, saying so when
    its probabilities vary nonetheless (its labels never cross its own threshold here)."""
    label = list(model.classes)[k]
    label = label.item() if isinstance(label, np.generic) else label
    try:
        p = np.asarray(model.predict_proba(X[: min(len(X), 2000)]), dtype=np.float64)[:, k]
    except (AttributeError, ValueError, IndexError):
        p = np.zeros(0)
    if p.size and np.isfinite(p).all() and float(np.ptp(p)) > 1e-9:
        return (f"The model labels every row of this data {label!r}, though its probability of {label!r} varies "
                f"from {p.min():.3g} to {p.max():.3g}: its labels never cross its decision threshold here, so "
                "there is no decision to explain on this data. If its labels should follow those probabilities, "
                "the file's rule from probabilities to labels (an ONNX graph's label output, a threshold) is not "
                "what was meant: re-export the model.")
    return f"The model gives the same answer on every row ({label!r}): there is no decision to explain."


def _fit(model: Any, X: np.ndarray, y: np.ndarray, weight: np.ndarray | None, n_estimators: int, num_leaves: int,
         learning_rate: float, random_state: int) -> TreeEnsemble:
    """A LightGBM booster fitted to the model's answers ``y`` on ``X``, read exactly."""
    import lightgbm as lgb

    booster = lgb.LGBMClassifier if model.is_classifier else lgb.LGBMRegressor
    est = booster(n_estimators=n_estimators, num_leaves=num_leaves, learning_rate=learning_rate,
                  random_state=random_state, n_jobs=1, verbose=-1, min_child_samples=5, deterministic=True,
                  force_row_wise=True, max_cat_to_onehot=MAX_CAT_TO_ONEHOT)
    est.fit(decode_frame(model, X), y, sample_weight=weight)
    try:
        read = as_ensemble(est)
    except AtlasError as exc:        # its reader speaks of an uploaded file; this booster is the library's own
        raise AtlasError("The surrogate this library fitted to the model could not be read back exactly, so "
                         "nothing is claimed from it; this is a bug, please report it with the model's kind "
                         f"and columns. (Reading the surrogate said: {exc})") from exc
    return _with_model_names(read, model)


def _with_model_names(ens: TreeEnsemble, model: Any) -> TreeEnsemble:
    """The surrogate over the model's features: its classes are the model's (LightGBM was
    fitted on class indices), its categories the model's values (fitted on codes)."""
    cats = tuple(None if c is None else tuple(c) for c in model.categories)
    if ens.categories != tuple(None if c is None else tuple(range(len(c))) for c in model.categories):
        raise AtlasError("The surrogate did not keep the model's categories; this is a bug, please report it.")
    changes: dict[str, Any] = {"categories": cats, "feature_names": tuple(model.feature_names),
                               "source": f"surrogate of {getattr(model, 'source', 'the model')}",
                               "meta": {**ens.meta, "surrogate": True, "input": "codes"}}
    if model.is_classifier:      # LightGBM saw class indices; a class the model never answered is absent
        changes["classes"] = np.asarray(model.classes)[np.asarray(ens.classes, dtype=np.int64)]
    return _replace(ens, **changes)


def _surrogate_labels(ens: TreeEnsemble, X: np.ndarray, classifier: bool) -> np.ndarray:
    out = ens.predict(X)
    if not classifier:
        return np.asarray(out, dtype=np.float64)
    assert ens.classes is not None, "a classifier's surrogate has classes"
    index = {c: k for k, c in enumerate(ens.classes.tolist())}
    return np.array([index[v] for v in out.tolist()], dtype=np.int64)
