"""What every counterfactual method shares: the cost model, the target, the result.

Cost (OCEAN section 3.3, eqs. 28-32, on one scale for every feature)
--------------------------------------------------------------------
For a query ``x_hat`` and a candidate ``x``, feature ``j`` contributes::

    c_j(x) = w_j^s * (l0 * [x_j != x_hat_j] + l1 * D_j + l2 * D_j**2),
    D_j = |x_j - x_hat_j| / span_j

where ``s`` is the direction of the move (``w^-`` to decrease, ``w^+`` to
increase: the asymmetric weights of eqs. 30-32), ``span_j`` is the feature's
range in the schema (1 without a schema: raw units), and ``(l0, l1, l2)`` is
the norm: ``"l0"`` = (1, 0, 0), ``"l1"`` = (0, 1, 0), ``"l2"`` = (0, 0, 1)
(squared Euclidean), or a dict such as FCCA's ``{"l0": 0.1, "l1": 1}``.
A one-hot group (schema kind "one-hot", two or more columns) is one
feature: each of its columns counts half, so switching category costs
``w * (l0 + l1 + l2)`` once, as OCEAN's categorical cost (eq. 29, one cost per
category reached) and the authors' package (oceanpy) do.

``"linf"`` is the L-infinity cost: the *largest* of the features' weighted,
range-scaled changes ``w_j^s * D_j`` instead of their sum (the robustness
radius of Veritas and Kantchelian et al.); a category switch costs ``w``
(its two columns are not halved: the largest of them counts). It is solved on
tree ensembles by the optimal counterfactual's CP-SAT model and box search
(:mod:`core.solvers.boxsearch`); the other methods refuse it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence, SupportsFloat, cast

import numpy as np

from core.errors import QueryError
from core.model import Guarantee, TreeEnsemble, as_ensemble
from core.model.features import feature_index, names_text
from core.model.guarantee import ModelKind
from core.model.missing import indicator_of
from core.model.result import Reader, Result, Writer, older_name, settings
from core.shown import approx_text, number_text
from core.typing import ArrayLike, Label, Norm, TargetSpec, Weights

if TYPE_CHECKING:
    from core.schema import Schema

__all__ = ["output_mask", "continuous_outputs", "CostModel", "Target", "CounterfactualResult", "Change",
           "make_cost_model", "make_target", "default_target", "favourable_default", "at_target", "already_at_target"]

STATUSES = ("optimal", "feasible", "infeasible", "time_limit", "stopped", "error")


@dataclass(frozen=True)
class CostModel:
    """Separable, asymmetric cost; see the module docstring.

    l0, l1, l2 : floats, the mix of the norms.
    w_down, w_up : ndarrays of shape (n_features,), weights to decrease / increase.
    span : ndarray of shape (n_features,), the scale of each feature.
    """

    l0: float
    l1: float
    l2: float
    w_down: np.ndarray
    w_up: np.ndarray
    span: np.ndarray
    combine: str = "sum"     # "max": the L-infinity cost, the largest feature cost (norm "linf")

    def feature_costs(self, x_hat: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Per-feature costs, shape (n_samples, n_features)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return self._formula(X - x_hat, self.span, self.w_down, self.w_up)

    def feature_cost(self, j: int, x_hat_j: float, values: np.ndarray) -> np.ndarray:
        """Cost of moving feature ``j`` from ``x_hat_j`` to each of ``values`` (the
        same formula as :meth:`feature_costs`, on one feature)."""
        return self._formula(np.asarray(values, dtype=float) - x_hat_j, self.span[j], self.w_down[j], self.w_up[j])

    def _formula(self, diff: np.ndarray, span: Any, w_down: Any, w_up: Any) -> np.ndarray:
        """The cost of the module docstring: w (l0 [diff != 0] + l1 |diff|/span + l2 (diff/span)^2)."""
        D = np.abs(diff) / span
        w = np.where(diff < 0, w_down, w_up)
        return w * (self.l0 * (diff != 0) + self.l1 * D + self.l2 * D * D)

    def cost(self, x_hat: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Total cost of each row, shape (n_samples,)."""
        return self.total(self.feature_costs(x_hat, X), axis=1)

    def total(self, per_feature: np.ndarray, axis: int = -1) -> np.ndarray:
        """The per-feature costs combined: their sum, or their largest for "linf"."""
        per_feature = np.asarray(per_feature, dtype=float)
        if self.combine == "max":
            return per_feature.max(axis=axis, initial=0.0)
        return per_feature.sum(axis=axis)

    def describe(self) -> str:
        if self.combine == "max":
            return "linf"
        parts = [f"{v:g}·{n}" for n, v in (("l0", self.l0), ("l1", self.l1), ("l2", self.l2)) if v]
        return " + ".join(parts) or "0"


def _per_feature(ens: TreeEnsemble, value: Any, default: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Weights given as None, a number, an array (d,) or (d, 2), or a dict name -> w or (down, up)."""
    down, up = default.copy(), default.copy()
    if value is None:
        return down, up
    if isinstance(value, Mapping):
        _weights_by_name(ens, value, down, up, name)
    else:
        down, up = _weights_array(ens, value, down, up, name)
    if np.any(~np.isfinite(down)) or np.any(~np.isfinite(up)) or np.any(down < 0) or np.any(up < 0):
        raise QueryError(f"{name} must be finite and >= 0.")
    return down, up


def _weights_by_name(ens: TreeEnsemble, value: Mapping[Any, Any], down: np.ndarray, up: np.ndarray,
                     name: str) -> None:
    """In place: the weights of a dict feature -> w or (down, up)."""
    for k, v in value.items():
        j = feature_index(ens.feature_names, k, error=QueryError, what=name)
        try:
            if np.ndim(v) == 0:
                down[j] = up[j] = float(v)
            else:
                down[j], up[j] = (float(t) for t in v)
        except (TypeError, ValueError):
            raise QueryError(f"{name}: the weight of {ens.feature_names[j]!r} is a number, or a pair (decrease, "
                             f"increase) of numbers; got {v!r}.") from None


def _weights_array(ens: TreeEnsemble, value: Any, down: np.ndarray, up: np.ndarray,
                   name: str) -> tuple[np.ndarray, np.ndarray]:
    """The weights of a number (for all), an array (d,) or (d, 2) (decrease, increase)."""
    d = ens.n_features
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise QueryError(f"{name} is a number, an array of {d} numbers (or ({d}, 2): decrease, increase), or a "
                         f"dict feature -> weight; got {type(value).__name__} {value!r:.60}.") from None
    if arr.ndim == 0:
        down[:] = up[:] = float(arr)
        return down, up
    if arr.shape == (d,):
        return arr.copy(), arr.copy()
    if arr.shape == (d, 2):
        return arr[:, 0].copy(), arr[:, 1].copy()
    raise QueryError(f"{name} has shape {arr.shape}; expected ({d},) or ({d}, 2) for (decrease, increase).")


def make_cost_model(ens: TreeEnsemble, norm: Norm = "l1", weights: Weights = None, schema: Schema | None = None) -> CostModel:
    """Build the cost model from a norm name or mix, weights and an optional schema."""
    l0, l1, l2 = _norm_mix(norm)
    d = ens.n_features
    if schema is not None:
        check_schema(ens, schema, QueryError)
        arr = schema.arrays()
        span, base_w = arr["span"], arr["weight"]
    else:
        span, base_w = np.ones(d), np.ones(d)
    down, up = _per_feature(ens, weights, base_w, "weights")
    linf = isinstance(norm, str) and norm == "linf"
    if schema is not None and not linf:  # a category switch changes two columns: each counts half
        _halve_groups(schema, down, up)
    return CostModel(l0, l1, l2, down, up, span, combine="max" if linf else "sum")


#: the weights (l0, l1, l2) of each norm named
_MIXES = {"l0": (1.0, 0.0, 0.0), "l1": (0.0, 1.0, 0.0), "l2": (0.0, 0.0, 1.0), "linf": (0.0, 1.0, 0.0)}


def _norm_mix(norm: Any) -> tuple[float, float, float]:
    """The weights (l0, l1, l2) of a norm named, or of a dict of them (each >= 0, not all zero)."""
    if isinstance(norm, str):
        if norm not in _MIXES:
            raise QueryError(f"Unknown norm {norm!r}; use 'l0', 'l1', 'l2', 'linf' or a dict like "
                             "{'l0': 0.1, 'l1': 1}.")
        return _MIXES[norm]
    if not isinstance(norm, Mapping):
        raise QueryError(f"norm must be a string or a dict, got {type(norm).__name__}.")
    bad = set(norm) - set(_MIXES)
    if bad:
        raise QueryError(f"Unknown norm keys {sorted(bad)}; use 'l0', 'l1' and 'l2'.")
    l0, l1, l2 = (float(norm.get(k, 0.0)) for k in ("l0", "l1", "l2"))
    if min(l0, l1, l2) < 0 or l0 + l1 + l2 <= 0:
        raise QueryError("Norm weights must be >= 0 and not all zero.")
    return l0, l1, l2


def _halve_groups(schema: Schema, down: np.ndarray, up: np.ndarray) -> None:
    """In place: the weights of each one-hot group's columns halved (a switch changes two of them)."""
    for cols in schema.groups().values():
        if len(cols) >= 2:
            down[cols] *= 0.5
            up[cols] *= 0.5


def check_schema(ens: TreeEnsemble, schema: object, error: type[Exception] = QueryError) -> None:
    """``schema`` must be a :class:`core.schema.Schema` of the model's features, in
    order; else ``error`` says which features differ and how to get one that fits."""
    from core.schema import Schema

    if schema is None:
        return
    if not isinstance(schema, Schema):
        raise error(f"schema must be a core.schema.Schema (e.g. infer_schema(table)); got {type(schema).__name__}.")
    names = list(ens.feature_names)
    if schema.names == names:
        return
    what = _schema_difference(names, list(schema.names))
    raise error(f"The schema's features do not match the model's features ({what}). Infer the schema from a "
                "table in the model's feature order: infer_schema(X[list(ensemble.feature_names)]).")


def _schema_difference(names: list[str], described: list[str]) -> str:
    """How the schema's features differ from the model's: those it lacks, those it adds, or their order."""
    lacks = [n for n in names if n not in described]
    extra = [n for n in described if n not in names]
    if not (lacks or extra):
        return "the same features in another order"
    parts = []
    if lacks:
        parts.append(f"the schema lacks {names_text(lacks, 5)}")
    if extra:
        parts.append(f"it has {names_text(extra, 5)} the model does not read")
    return "; ".join(parts)


@dataclass(frozen=True)
class Target:
    """The outcome sought: a class index (classifiers) or an interval (regressors)."""

    kind: str                 # "class" or "interval"
    class_index: int = -1
    label: Any = None
    lo: float = -np.inf
    hi: float = np.inf
    margin: float | None = None   # confident recourse: the class's probability must be at least this

    def holds(self, ens: TreeEnsemble, X: np.ndarray) -> np.ndarray:
        """Does the ensemble's output on each row meet the target (and, with a
        ``margin``, give the class at least that probability)? Shape (n_samples,)."""
        if self.kind == "class":
            ok = ens.predict(X) == self.label
            if self.margin is not None:
                ok &= ens.predict_proba(X)[:, self.class_index] >= self.margin - 1e-12
            return ok
        v = ens.predict(X)
        return (v >= self.lo) & (v <= self.hi)

    def describe(self) -> str:
        if self.kind == "class":
            sure = f" with probability at least {self.margin:g}" if self.margin is not None else ""
            return f"class {self.label!r}{sure}"
        return f"prediction in [{self.lo:g}, {self.hi:g}]"


def check_time_limit(time_limit: SupportsFloat | str) -> float:
    """A solver time limit in seconds: a finite positive number (NaN would never expire)."""
    try:
        t = float(time_limit)
    except (TypeError, ValueError):
        raise QueryError(f"The time limit must be a number of seconds; got {time_limit!r}.") from None
    if not (t > 0 and t != float("inf")):
        raise QueryError(f"The time limit must be a positive, finite number of seconds; got {time_limit!r}.")
    return t


def make_target(ens: TreeEnsemble, target: TargetSpec, margin: float | None = None) -> Target:
    """The target of a query on ``ens``; ``margin``: a classifier's probability for
    the class must be at least this (confident recourse, away from the decision
    boundary). A margin is exact for forests (mean leaf probabilities) and for
    binary boosting (a bound on the margin); a multiclass boosting model's
    softmax is refused (no exact linear form)."""
    if margin is not None:
        margin = _checked_margin(ens, margin)
    if ens.task == "classification":
        return _class_target(ens, target, margin)
    if ens.task == "regression":
        return _interval_target(target)
    raise QueryError("Counterfactuals need a classifier or a regressor, not an anomaly detector.")


def _checked_margin(ens: TreeEnsemble, margin: Any) -> float:
    """A probability margin, checked: a number in (0, 1), for a classifier whose probability is exact."""
    try:
        value = float(margin)
    except (TypeError, ValueError):
        raise QueryError(f"The margin is a probability between 0 and 1; got {margin!r}.") from None
    if not 0 < value < 1:
        raise QueryError(f"The margin is a probability strictly between 0 and 1; got {value!r}.")
    if ens.task != "classification":
        raise QueryError("A probability margin is for classifiers; a regressor's target is already an interval.")
    if ens.link == "softmax":
        raise QueryError("A probability margin is not available for a multiclass boosting model (its softmax "
                         "has no exact linear form); use a forest or a binary model, or no margin.")
    return value


def _class_target(ens: TreeEnsemble, target: TargetSpec, margin: float | None) -> Target:
    """A classifier's target: one of its classes (as the label, or as it is written)."""
    labels = _classes(ens)
    if isinstance(target, (tuple, list, np.ndarray, dict, set)):
        raise QueryError(f"A classifier's target is one of its classes {labels}, not an interval or a list "
                         f"(got {target!r}); intervals are for regressors.")
    matches = [i for i, c in enumerate(labels) if c == target or str(c) == str(target)]
    if not matches:
        raise QueryError(f"Unknown target class {target!r}; the model's classes are {labels}.")
    return Target("class", class_index=matches[0], label=labels[matches[0]], margin=margin)


def _interval_target(target: TargetSpec) -> Target:
    """A regressor's target: an interval ``(lo, hi)`` of numbers, not NaN, not upside down."""
    try:
        lo, hi = (float(v) for v in cast(Sequence[float], target))
    except (TypeError, ValueError):
        raise QueryError(f"A regression target is an interval (lo, hi) of predicted values, e.g. (2.0, 3.5); "
                         f"got {target!r}.") from None
    if np.isnan(lo) or np.isnan(hi):
        raise QueryError(f"Target interval ({lo}, {hi}) has a NaN bound; give numbers (-inf or inf for no "
                         "bound).")
    if not lo <= hi:
        raise QueryError(f"Target interval ({lo}, {hi}) is upside down: lo must be <= hi; did you mean "
                         f"({hi}, {lo})?")
    return Target("interval", lo=lo, hi=hi)


def at_target(ens: TreeEnsemble, target: TargetSpec, predictions: ArrayLike) -> np.ndarray:
    """Mask of the predictions (``ens.predict`` outputs) that already meet ``target``:
    the class itself, or a value inside a regressor's interval ``(lo, hi)``.
"""
    tgt = make_target(ens, target)
    p = np.asarray(predictions)
    if tgt.kind == "class":            # the label as predicted, or as written (1 and "1" alike)
        return np.asarray(p == tgt.label, dtype=bool) | (p.astype(str) == str(tgt.label))
    p = p.astype(float)
    return (p >= tgt.lo) & (p <= tgt.hi)


def already_at_target(ens: TreeEnsemble, prediction: Label, target: TargetSpec) -> bool:
    """Does one row's prediction already meet ``target`` (nothing to change)?

    Parameters
    ----------
    ens : TreeEnsemble.
    prediction : one output of ``ens.predict`` (a class label, or a value).
    target : a class label, or ``(lo, hi)`` for a regressor.


    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from core import already_at_target, from_model
    >>> X = np.arange(20.0).reshape(-1, 1)
    >>> ens = from_model(RandomForestRegressor(3, max_depth=2, random_state=0).fit(X, X[:, 0]))
    >>> already_at_target(ens, 5.0, (4.0, 6.0)), already_at_target(ens, 7.0, (4.0, 6.0))
    (True, False)
    """
    ens = _ensemble(ens)
    if np.asarray(prediction, dtype=object).ndim != 0 or isinstance(prediction, Mapping):
        raise QueryError(f"prediction is one output of ens.predict (a class label or a value); got "
                         f"{type(prediction).__name__} {prediction!r:.60}.")
    return bool(at_target(ens, target, np.asarray([prediction]))[0])


def rows_to_move(ens: TreeEnsemble, target: TargetSpec, predictions: ArrayLike, limit: int | None = None) -> np.ndarray:
    """Indices of the rows whose prediction does not meet ``target`` yet (the rows an
    audit, a comparison or rules of recourse are for), in the data's order; the first
    ``limit`` of them when given.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from core import from_model
    >>> from core.counterfactual import rows_to_move
    >>> X = np.arange(20.0).reshape(-1, 1)
    >>> ens = from_model(RandomForestRegressor(3, max_depth=2, random_state=0).fit(X, X[:, 0]))
    >>> rows_to_move(ens, (4.0, 6.0), [1.0, 5.0, 7.0, 2.0]).tolist(), rows_to_move(ens, (4.0, 6.0), [1.0, 5.0, 7.0], 1)
    ([0, 2, 3], array([0]))
    """
    rows = np.flatnonzero(~at_target(_ensemble(ens), target, predictions))
    return rows if limit is None else rows[:limit]


def rows_at(ens: TreeEnsemble, target: TargetSpec, predictions: ArrayLike, limit: int | None = None) -> np.ndarray:
    """Indices of the rows whose prediction already meets ``target``, in the data's
    order; the first ``limit`` of them when given (e.g. the rows predicted as a class)."""
    rows = np.flatnonzero(at_target(_ensemble(ens), target, predictions))
    return rows if limit is None else rows[:limit]


def most_common_outcome(ens: TreeEnsemble, predictions: ArrayLike) -> Label | None:
    """A classifier's most common predicted class (ties: the smallest), where an
    analysis of sub-populations starts its target from (another class); None for a
    regressor, whose default target is read from all its predictions."""
    if not _ensemble(ens).is_classifier:
        return None
    values, counts = np.unique(np.asarray(predictions), return_counts=True)
    return values[int(np.argmax(counts))]


def _classes(ens: TreeEnsemble) -> list[Any]:
    """A classifier's classes, in the ensemble's order (none for a regressor)."""
    return [] if ens.classes is None else list(ens.classes)


def _ensemble(ens: Any) -> TreeEnsemble:
    """A TreeEnsemble, or a supported model converted; else a QueryError."""
    if ens is None or isinstance(ens, (str, bytes, np.ndarray, list, tuple, Mapping)):
        raise QueryError(f"ens is a TreeEnsemble (core.from_model(model)) or a fitted model; got "
                         f"{type(ens).__name__}.")
    return as_ensemble(ens)


def _regression_outputs(predictions: Any) -> np.ndarray:
    try:
        pred = np.asarray(predictions, dtype=float).ravel()
    except (TypeError, ValueError):
        raise QueryError(f"predictions are the regressor's outputs on the data (numbers, ens.predict(X)); got "
                         f"{type(predictions).__name__} {predictions!r:.60}.") from None
    pred = pred[np.isfinite(pred)]
    if pred.size == 0:
        raise QueryError("predictions are empty (or not finite): a regressor's default target is read from its "
                         "outputs on the data; give ens.predict(X) for some rows.")
    return pred


def favourable_default(ens: TreeEnsemble, predictions: ArrayLike, *, above: bool = True) -> TargetSpec:
    """The outcome an analysis of many rows (an audit, a comparison, rules of recourse,
    a batch) calls favourable until the analyst says otherwise, one definition for every
    page: a classifier's last class (a binary model's positive class); for a regressor,
    a prediction at least the median of ``predictions``, ``(median, inf)``
    (``above=False``: at most it, ``(-inf, median)``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from core.counterfactual import favourable_default
    >>> from core import from_model
    >>> X = np.arange(20.0).reshape(-1, 1)
    >>> ens = from_model(RandomForestRegressor(3, max_depth=2, random_state=0).fit(X, X[:, 0]))
    >>> favourable_default(ens, [1.0, 2.0, 3.0]), favourable_default(ens, [1.0, 2.0, 3.0], above=False)
    ((2.0, inf), (-inf, 2.0))
    """
    ens = _ensemble(ens)
    if ens.task == "classification":
        return _classes(ens)[-1]
    if ens.task != "regression":
        raise QueryError("A target is an outcome of a classifier or a regressor, not of an anomaly detector.")
    med = float(np.median(_regression_outputs(predictions)))
    return (med, math.inf) if above else (-math.inf, med)


def default_target(ens: TreeEnsemble, predictions: ArrayLike, row_prediction: Label | None = None) -> TargetSpec:
    """An outcome the row does not have, the default an analyst starts from: a
    classifier's first class other than ``row_prediction`` (for many rows at once,
    ``row_prediction`` None: the favourable class of :func:`favourable_default`);
    for a regressor, the upper quartile of ``predictions`` ``(q75, max)`` for a
    row below the median (or for many rows: ``row_prediction`` None), the lower
    quartile ``(min, q25)`` otherwise.

    Parameters
    ----------
    ens : TreeEnsemble.
    predictions : array-like, ``ens.predict`` on the data's rows.
    row_prediction : the row's own prediction, or None (many rows at once).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import already_at_target, default_target, from_model
    >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
    >>> ens = from_model(RandomForestClassifier(3, max_depth=2, random_state=0).fit(X, y))
    >>> t = default_target(ens, ens.predict(X), row_prediction=0)
    >>> int(t), already_at_target(ens, 0, t), already_at_target(ens, 1, t)
    (1, False, True)
    """
    ens = _ensemble(ens)
    if ens.task == "classification":
        return _other_class(_classes(ens), row_prediction)
    if ens.task != "regression":
        raise QueryError("A target is an outcome of a classifier or a regressor, not of an anomaly detector.")
    pred = _regression_outputs(predictions)
    if row_prediction is not None:
        row_prediction = _predicted_value(row_prediction)
    lo, med, hi = (float(v) for v in np.quantile(pred, [0.25, 0.5, 0.75]))
    below = row_prediction is None or float(row_prediction) < med
    return (hi, float(np.max(pred))) if below else (float(np.min(pred)), lo)


def _other_class(classes: list[Any], row_prediction: Label | None) -> Any:
    """A classifier's default target: the first class other than the row's (as a label or as
    written), or, for many rows at once, the last class."""
    if row_prediction is None:
        return classes[-1]
    return next((c for c in classes if not (c == row_prediction or str(c) == str(row_prediction))), classes[0])


def _predicted_value(row_prediction: Any) -> float:
    """A row's predicted value, as a number."""
    try:
        return float(cast(SupportsFloat, row_prediction))
    except (TypeError, ValueError):
        raise QueryError(f"row_prediction is the row's predicted value (a number) or None; got "
                         f"{row_prediction!r:.60}.") from None


@dataclass(frozen=True)
class Change:
    """One feature's move. ``before``/``after`` are the exact values (category
    codes for a categorical feature; NaN for a missing value); ``labels`` the
    category names, if any."""

    feature: str
    before: float
    after: float
    labels: tuple[str, str] | None = None

    def texts(self) -> tuple[str, str]:
        """Before and after as shown: category names, or numbers: the value before
        to 6 significant digits (for reading), the value after in full
        (:func:`core.shown.number_text`: the shown number is the checked one)."""
        return self.labels or (approx_text(self.before, 6), number_text(self.after))

    def __str__(self) -> str:
        """``feature: before → after``: the one way a change reads."""
        a, b = self.texts()
        return f"{self.feature}: {a} → {b}"


def describe_changes(changes: Sequence[Change], sep: str = "; ") -> str:
    """The changes of a counterfactual as one line (pages, tables and exports alike)."""
    return sep.join(str(c) for c in changes)


@dataclass(frozen=True, eq=False)
class CounterfactualResult(Result):
    """A counterfactual and how it was obtained (a :class:`core.model.result.Result`).

    x : ndarray of shape (n_features,) or None, the counterfactual (original units),
        strictly inside its cell of the model's partition; re-checked on the model.
    cost : the cost of ``x`` (optimal, or the best found). A point pushed strictly
        inside an open cell costs at most that nudge more than the cell's infimum
        (the paper's epsilon -> 0); for a proven optimum ``lower_bound`` is that
        infimum, so ``cost - lower_bound`` is at most the nudge's cost.
    status : "optimal", "feasible" (valid, optimality not proven), "infeasible",
        "time_limit" (no proof in time; ``x`` is the best valid point, if any),
        "stopped" (the caller stopped it before the proof; ``x`` as for "time_limit")
        or "error" (``message`` says why).
    gap : relative gap between ``cost`` and the proven lower bound (0 if optimal).
    elapsed : seconds from the query to the answer (``solve_time``, its older name, reads
        the same and warns); ``timings`` splits them by stage.
    params : the query's settings (JSON values).
    alternatives : further results when ``n_solutions > 1``.
    guarantee : what the answer guarantees (:class:`core.model.Guarantee`); when the
        solver that made it gives none, the one its status proves on a tree ensemble
        (:func:`status_guarantee`).
    """

    kind: ClassVar[str] = "counterfactual"
    what: ClassVar[str] = "counterfactual"

    x: np.ndarray | None
    cost: float
    status: str
    gap: float
    elapsed: float
    changes: tuple[Change, ...]
    backend: str
    params: dict[str, Any]
    x_query: np.ndarray | None = None
    lower_bound: float = 0.0
    valid: bool = False
    message: str = ""
    prediction: Any = None
    alternatives: tuple["CounterfactualResult", ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: the one the status proves
    binding: tuple[str, ...] = ()    # the constraints between features that hold with equality at x

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        object.__setattr__(self, "binding", tuple(str(t) for t in self.binding))
        if self.guarantee is None:          # a tree ensemble's exact solve: the status says what is proven
            object.__setattr__(self, "guarantee", status_guarantee(self.status, self.x is not None and self.valid,
                                                                   self.gap, self.lower_bound))

    @property
    def found(self) -> bool:
        return self.x is not None and self.valid

    solve_time = older_name("solve_time")

    def _body(self) -> dict[str, Any]:
        """The model's features (the analyst's columns: :func:`core.intake.columns.result_record`):
        numbers as numbers, None for a value that is not known (an infinite gap, a missing
        value before a change; ``nonfinite`` says which)."""
        w = Writer()
        w.value("status", self.status).value("valid", self.valid).number("cost", self.cost, math.inf)
        w.number("gap", self.gap, math.inf).number("lower_bound", self.lower_bound, math.inf)
        w.value("backend", self.backend).value("message", self.message).value("prediction", self.prediction)
        w.array("x", self.x).array("x_query", self.x_query)
        w.value("changes", [{"feature": c.feature, "from": _finite(c.before), "to": _finite(c.after),
                             "from_text": c.texts()[0], "to_text": c.texts()[1],
                             **({} if c.labels is None else {"labels": list(c.labels)})} for c in self.changes])
        w.value("alternatives", [a.to_dict() for a in self.alternatives])
        w.numbers("timings", self.timings, math.inf)
        if self.binding:
            w.value("binding", list(self.binding))
        return w.done()

    @classmethod
    def _from_body(cls, r: Reader) -> "CounterfactualResult":
        changes = tuple(Change(str(c["feature"]), _number(c["from"]), _number(c["to"]),
                               None if c.get("labels") is None else (str(c["labels"][0]), str(c["labels"][1])))
                        for c in r.get("changes"))
        return cls(x=r.array("x"), cost=r.number("cost", math.inf), status=str(r.get("status")),
                   gap=r.number("gap", math.inf), elapsed=r.number("elapsed"), changes=changes,
                   backend=str(r.get("backend")), params=dict(r.get("params")), x_query=r.array("x_query", default=None),
                   lower_bound=r.number("lower_bound", math.inf), valid=bool(r.get("valid")),
                   message=str(r.get("message", "")), prediction=r.get("prediction", None),
                   alternatives=tuple(CounterfactualResult.from_dict(a) for a in r.get("alternatives", [])),
                   timings=r.numbers("timings", math.inf), guarantee=Guarantee.from_dict(r.get("guarantee")),
                   binding=tuple(r.get("binding", ())))


def status_guarantee(status: str, found: bool, gap: float = 0.0, bound: float = 0.0,
                     model_kind: ModelKind = "tree_ensemble") -> Guarantee:
    """What an exact solve's status guarantees (a tree ensemble's or a linear model's)."""
    if status == "optimal" and found:
        return Guarantee("proven_optimal", model_kind, gap=0.0, bound=bound)
    if status == "infeasible":
        return Guarantee("infeasible", model_kind)
    if status == "stopped":           # the user stopped the search: what is known, with its gap
        return _stopped_guarantee(found, gap, bound, model_kind)
    if found:
        g = None if not np.isfinite(gap) else float(gap)
        return Guarantee("time_limited" if status == "time_limit" else "valid_on_model", model_kind,
                         gap=g, bound=float(bound) if np.isfinite(bound) else None)
    return Guarantee("not_found", model_kind)


def _stopped_guarantee(found: bool, gap: float, bound: float, model_kind: ModelKind) -> Guarantee:
    """What a search the user stopped guarantees: the point found, within its gap, or nothing."""
    if not found:
        return Guarantee("not_found", model_kind, note="Stopped before any valid point was found.")
    within = "an unknown gap" if not np.isfinite(gap) else f"a gap of {100 * gap:.1f}%"
    proven = f" (proven lower bound {bound:.4g})" if np.isfinite(bound) and bound > 0 else ""
    return Guarantee("valid_on_model", model_kind, gap=None if not np.isfinite(gap) else float(gap),
                     bound=float(bound) if np.isfinite(bound) else None,
                     note=f"Stopped before the proof: within {within} of the optimum{proven}.")


def _finite(v: Any) -> float | None:
    return None if v is None or not np.isfinite(float(v)) else float(v)


def _number(v: Any) -> float:
    """A change's value as written: None is a missing value (NaN)."""
    return float("nan") if v is None else float(v)


def changes_between(ens: TreeEnsemble, x_hat: np.ndarray, x: np.ndarray) -> tuple[Change, ...]:
    """The features ``x`` moves from ``x_hat``, categories by name. A number with an
    "is missing" feature (:mod:`core.model.missing`) is one change of the number,
    its missing state as NaN: ``income: missing → 1,200`` (never a change of the
    "is missing" feature itself; a value that stays missing does not change)."""
    states = indicator_of(ens)
    hidden = set(states.values())

    def value(v: np.ndarray, j: int) -> float:
        return float("nan") if j in states and v[states[j]] > 0.5 else float(v[j])

    out = []
    for j in range(ens.n_features):
        if j in hidden:
            continue
        a, b = value(x_hat, j), value(x, j)
        if a == b or (np.isnan(a) and np.isnan(b)):
            continue
        out.append(Change(str(ens.feature_names[j]), a, b,
                          None if ens.categories[j] is None else
                          (ens.category_label(j, x_hat[j]), ens.category_label(j, x[j]))))
    return tuple(out)


def output_mask(y: np.ndarray, target: TargetSpec) -> np.ndarray:
    """Y* as a mask over the model outputs: a class; ``("other", c)``: any class
    but ``c``; ``"other"``: any class but the most frequent model output (the
    usual untargeted question, "how do the others get out of the majority
    decision?"); ``(lo, hi)``: outputs in an interval (regression)."""
    if isinstance(target, str) and target == "other":
        values, counts = np.unique(y, return_counts=True)
        return y != values[np.argmax(counts)]
    if isinstance(target, tuple) and len(target) == 2 and target[0] == "other":
        return y != target[1]
    if isinstance(target, (tuple, list)) and len(target) == 2 and all(
            isinstance(v, (int, float, np.floating, np.integer)) for v in target):
        lo, hi = float(target[0]), float(target[1])
        return (y.astype(float) >= lo) & (y.astype(float) <= hi)
    return y == target


def continuous_outputs(y: np.ndarray) -> bool:
    """Do these model outputs call for a regression surrogate (floats with more
    than 20 distinct values) rather than a classifier?"""
    return bool(np.issubdtype(y.dtype, np.floating) and np.unique(y).size > 20)
