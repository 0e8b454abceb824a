"""The :class:`LinearModel`: a linear classifier or regressor read exactly.

Layout (documented like :class:`core.model.TreeEnsemble`)
--------------------------------------------------------
Parallel arrays over the model's ``n_features`` features and its
``n_outputs`` scores (1 for a regressor or a binary classifier, one per class
for a multiclass one):

coef : ndarray of shape (n_outputs, n_features), dtype float64
    Weight of each numerical feature in each score; 0 at a categorical feature.
intercept : ndarray of shape (n_outputs,), dtype float64
    The scores' constant terms (a pipeline's scalers and constant columns folded in).
category_scores : tuple of length n_features
    None for a numerical feature; for a categorical one an ndarray of shape
    (n_codes(j), n_outputs), dtype float64: what each code adds to each score
    (row ``K`` is the missing or unseen value; a row of NaN: a code the source
    model refuses, e.g. an unknown category with ``handle_unknown="error"``).

**One score rule**, in float64::

    s(x) = intercept + coef @ x_numerical + sum_j category_scores[j][code_j]

Categorical features are given as integer codes as in a ``TreeEnsemble``:
``categories[j]`` is the tuple of category values of feature ``j`` (None for a
numerical feature), codes ``0 .. K-1`` name them and ``K`` stands for a missing
or unseen value. A numerical feature may hold NaN only when the source imputes
it (``meta["impute"][name]`` is the fill value, used in its place).

Link (``link``), from scores to outputs:

``"sigmoid"``
    binary logistic regression: ``P(classes[1]) = 1 / (1 + exp(-s))``;
``"softmax"``
    multinomial logistic regression: ``P = softmax(s)``;
``"ovr"``
    one-vs-rest log-loss (SGDClassifier): ``expit(s)`` normalised over classes;
``"decision"``
    a classifier with no probability (linear SVM, ridge, perceptron, hinge loss);
``"identity"``
    a regressor: the output is ``s`` itself.

Labels follow scikit-learn's ``LinearClassifierMixin.predict``: a binary model
predicts ``classes[1]`` iff ``s > 0`` (a tie goes to ``classes[0]``); a
multiclass model predicts the first class of largest score (``argmax``).

The representation is filled from arrays alone (:meth:`LinearModel.from_arrays`),
so any parser of a linear model (scikit-learn's estimators and pipelines in
:mod:`core.intake.parsing.linear`, an ONNX ``LinearClassifier`` /
``LinearRegressor`` later) only fills ``coef``, ``intercept``, the category
tables and the link.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from core.errors import ModelError, SchemaError
from core.jsonable import plain
from core.model.features import ModelShape, feature_index
from core.typing import Rows

if TYPE_CHECKING:
    from core.model.guarantee import ModelKind

__all__ = ["LinearModel", "LinearLink", "LINEAR_LINKS", "LINEAR_ANALYSES"]

LinearLink = Literal["sigmoid", "softmax", "ovr", "decision", "identity"]
LINEAR_LINKS: tuple[str, ...] = ("sigmoid", "softmax", "ovr", "decision", "identity")

#: what runs on a linear model (the words of every refusal that needs a tree ensemble)
LINEAR_ANALYSES = ("the optimal counterfactual (core.optimal.optimal_counterfactual, proven optimal by a MILP on "
                   "the model's score) and the decision-region slices (core.solvers.linear_regions.linear_slice, "
                   "the exact boundary)")


def _expit(s: np.ndarray) -> np.ndarray:
    from scipy.special import expit  # scikit-learn's own: the same float results

    return np.asarray(expit(s), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class LinearModel(ModelShape):
    """A linear model in one representation; see the module docstring.

    Attributes
    ----------
    coef : ndarray of shape (n_outputs, n_features)
    intercept : ndarray of shape (n_outputs,)
    feature_names : tuple of str, length n_features
    task : "classification" or "regression"
    link : one of :data:`LINEAR_LINKS`
    classes : ndarray of shape (n_classes,) or None (regression)
    categories : tuple of length n_features (or empty: no categorical feature)
    category_scores : tuple of length n_features (or empty), see the module docstring
    source : str, e.g. ``"sklearn.Pipeline[sklearn.LogisticRegression]"``
    meta : dict; ``meta["input"]`` says how the source model takes its input
        (:mod:`core.model.native`), ``meta["impute"]`` the fill values of imputed columns.
    """

    _cache: ClassVar[dict[str, Any]]

    coef: np.ndarray
    intercept: np.ndarray
    feature_names: tuple[str, ...]
    task: Literal["classification", "regression"]
    link: LinearLink
    classes: np.ndarray | None = None
    categories: tuple[tuple[Any, ...] | None, ...] = ()
    category_scores: tuple[np.ndarray | None, ...] = ()
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        coef, intercept = _checked_weights(self.coef, self.intercept)
        n_out, d = coef.shape
        names = tuple(str(n) for n in self.feature_names)
        if len(names) != d:
            raise ModelError(f"{len(names)} feature names for {d} features.")
        _check_task_and_link(self.task, self.link)
        cats, tables = _category_tables(self.categories, self.category_scores, names, coef)
        object.__setattr__(self, "classes", _checked_classes(self.task, self.link, self.classes, n_out))
        coef.setflags(write=False)
        intercept.setflags(write=False)
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "intercept", intercept)
        object.__setattr__(self, "feature_names", names)
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "category_scores", tables)
        object.__setattr__(self, "meta", dict(self.meta))
        object.__setattr__(self, "_cache", {})

    # ------------------------------------------------------------------ shape
    @property
    def kind(self) -> ModelKind:
        """``"linear"`` (a :class:`core.model.TreeEnsemble` says ``"tree_ensemble"``)."""
        return "linear"

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.coef.shape[0])

    @property
    def routes_missing(self) -> bool:
        """False: a missing number is refused unless the source imputes it (``meta["impute"]``)."""
        return False

    @property
    def has_proba(self) -> bool:
        """Does the source model give probabilities (``predict_proba``)?"""
        return self.link in ("sigmoid", "softmax", "ovr")

    @property
    def positive_at_tie(self) -> bool:
        return False

    def score_table(self, j: int) -> np.ndarray:
        """``category_scores[j]`` of categorical feature ``j``: (n_codes(j), n_outputs)."""
        t = self.category_scores[j]
        if t is None:
            raise ValueError(f"Feature {self.feature_names[j]!r} is numerical, not categorical: it has no score "
                             "table.")
        return t

    def code_allowed(self, j: int, code: int) -> bool:
        """Does the source model take code ``code`` of categorical feature ``j``?"""
        return bool(np.all(np.isfinite(self.score_table(j)[int(code)])))

    def feature_index(self, f: int | str) -> int:
        """Index of a feature given by index or name (:func:`core.model.features.feature_index`,
        as :meth:`TreeEnsemble.feature_index`: a SchemaError names the closest features)."""
        return feature_index(self.feature_names, f, error=SchemaError)

    # ------------------------------------------------------------ prediction
    def _check_X(self, X: Any) -> np.ndarray:
        X = np.array(X, dtype=np.float64, ndmin=2)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X has shape {X.shape}; the model expects (n_samples, {self.n_features}).")
        fills = self.meta.get("impute", {})
        for j in np.flatnonzero(np.isnan(X).any(axis=0)).tolist():
            name = self.feature_names[j]
            if self.categories[j] is not None:
                raise ValueError(f"Column {name!r} is categorical: a missing value is its code "
                                 f"{self.missing_code(j)}, not NaN.")
            if name not in fills:
                raise ValueError(f"Column {name!r} has a missing value, and this model does not take missing "
                                 "values (nothing in it imputes them); impute or drop those rows first.")
            X[np.isnan(X[:, j]), j] = float(fills[name])
        for j in self.categorical_features:
            col = X[:, j]
            bad = (col < 0) | (col >= self.n_codes(j)) | (col != np.floor(col))
            if bad.any():
                raise ValueError(f"Column {self.feature_names[j]!r} is categorical: it takes integer codes "
                                 f"0..{self.n_codes(j) - 1}, got {col[bad][0]!r}.")
            refused = ~np.all(np.isfinite(self.score_table(j)[col.astype(np.int64)]), axis=1)
            if refused.any():
                raise ValueError(f"Column {self.feature_names[j]!r}: the model refuses a missing or unknown "
                                 "category (its encoder has handle_unknown='error').")
        return X

    def scores(self, X: Rows) -> np.ndarray:
        """The scores ``s(x)``, shape (n_samples, n_outputs)."""
        X = self._check_X(X)
        num = X.copy()
        cats = self.categorical_features
        num[:, cats] = 0.0
        out = num @ self.coef.T + self.intercept
        for j in cats:
            out = out + self.score_table(j)[X[:, j].astype(np.int64)]
        return out

    def decision_function(self, X: Rows) -> np.ndarray:
        """scikit-learn's ``decision_function``: shape (n_samples,) for one score,
        (n_samples, n_outputs) otherwise (regressors: the prediction)."""
        s = self.scores(X)
        return s[:, 0].copy() if self.n_outputs == 1 else s

    def predict_raw(self, X: Rows) -> np.ndarray:
        """The scores, shape (n_samples, n_outputs) (as :meth:`TreeEnsemble.predict_raw`)."""
        return self.scores(X)

    def labels_from_scores(self, s: np.ndarray) -> np.ndarray:
        """Labels (or values) from scores of shape (n, n_outputs), by the module's rule."""
        s = np.atleast_2d(s)
        if self.task == "regression":
            return s[:, 0].copy()
        assert self.classes is not None
        if s.shape[1] == 1:
            return self.classes[(s[:, 0] > 0).astype(np.int64)]
        return self.classes[np.argmax(s, axis=1)]

    def predict(self, X: Rows) -> np.ndarray:
        """Labels (classifiers, in the source model's label set) or values (regression)."""
        return self.labels_from_scores(self.scores(X))

    def proba_from_raw(self, raw: np.ndarray) -> np.ndarray:
        """Class probabilities from scores (n, n_outputs), as the source computes them."""
        if not self.has_proba:
            raise ValueError(f"This {self.source or 'linear'} model gives no probabilities (link {self.link!r}); "
                             "only its decision scores.")
        raw = np.atleast_2d(np.asarray(raw, dtype=np.float64))
        if self.link == "sigmoid":
            p = _expit(raw[:, 0])
            return np.column_stack([1.0 - p, p])
        if self.link == "softmax":
            z = raw - raw.max(axis=1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=1, keepdims=True)
        p = _expit(raw)
        total = p.sum(axis=1, keepdims=True)
        zero = total[:, 0] == 0
        p[zero] = 1.0
        total[zero] = p.shape[1]
        return p / total

    def predict_proba(self, X: Rows) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), when the source has them."""
        self._classifier_only("predict_proba")
        return self.proba_from_raw(self.scores(X))

    def summary(self) -> dict[str, Any]:
        """Plain facts about the model for display."""
        return {"family": self.source, "task": self.task, "kind": "linear", "link": self.link,
                "features": self.n_features, "scores": self.n_outputs,
                "categorical features": len(self.categorical_features),
                "classes": None if self.classes is None else [str(c) for c in self.classes]}

    # ------------------------------------------------------ arrays round trip
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Plain arrays and JSON-able metadata that :meth:`from_arrays` turns back into
        this model (no pickle: they may cross a process boundary from an untrusted parse)."""
        tabs = [t for t in self.category_scores if t is not None]
        arrays = {"coef": self.coef.copy(), "intercept": self.intercept.copy(),
                  "category_scores": (np.vstack(tabs) if tabs else np.zeros((0, self.n_outputs)))}
        meta = {"kind": "linear", "feature_names": list(self.feature_names), "task": self.task, "link": self.link,
                "classes": None if self.classes is None else [plain(c) for c in self.classes],
                "categories": [None if c is None else [plain(v) for v in c] for c in self.categories],
                "source": self.source, "meta": plain(self.meta)}
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> "LinearModel":
        """Rebuild a model from :meth:`to_arrays` output, checking every invariant again."""
        try:
            if meta.get("kind", "linear") != "linear":
                raise ModelError(f"These arrays hold a {meta.get('kind')!r} model, not a linear one.")
            coef = np.asarray(arrays["coef"], dtype=np.float64)
            cats = [None if c is None else tuple(c) for c in meta.get("categories") or ()]
            tables = _split_tables(np.asarray(arrays["category_scores"], dtype=np.float64), cats)
            classes = meta.get("classes")
            return cls(coef, np.asarray(arrays["intercept"], dtype=np.float64),
                       feature_names=tuple(meta["feature_names"]), task=meta["task"], link=meta["link"],
                       classes=None if classes is None else np.asarray(classes), categories=tuple(cats),
                       category_scores=tuple(tables), source=str(meta.get("source", "")),
                       meta=dict(meta.get("meta") or {}))
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"The parsed linear model is incomplete ({type(exc).__name__}: {exc}).") from None

    def content_hash(self) -> str:
        """SHA-256 of the model's arrays and metadata: equal for equal models (a cache key)."""
        cache = self._cache.get("content_hash")
        if cache is None:
            arrays, meta = self.to_arrays()
            h = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode())
            for k in sorted(arrays):
                a = np.ascontiguousarray(arrays[k])
                h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
                h.update(a.tobytes())
            cache = self._cache["content_hash"] = h.hexdigest()
        return cache


# ------------------------------------------------------------------ checks of the layout
def _checked_weights(coef_in: Any, intercept_in: Any) -> tuple[np.ndarray, np.ndarray]:
    """``coef`` of shape (n_outputs, n_features) and ``intercept`` of shape (n_outputs,) (one
    value repeated for every score), as float64 and all finite."""
    coef = np.array(coef_in, dtype=np.float64, ndmin=2)
    if coef.ndim != 2 or coef.shape[0] == 0:
        raise ModelError(f"coef has shape {coef.shape}; expected (n_outputs, n_features).")
    n_out = coef.shape[0]
    intercept = np.array(intercept_in, dtype=np.float64, ndmin=1).ravel()
    if intercept.size == 1 and n_out > 1:
        intercept = np.repeat(intercept, n_out)
    if intercept.shape != (n_out,):
        raise ModelError(f"intercept has shape {intercept.shape}; expected ({n_out},).")
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        raise ModelError("The linear model has a coefficient or an intercept that is not a finite number. "
                         "Re-fit or re-save the model.")
    return coef, intercept


def _split_tables(flat: np.ndarray, cats: list[tuple[Any, ...] | None]) -> list[np.ndarray | None]:
    """The score tables :meth:`LinearModel.to_arrays` stacked in ``flat``, one per categorical feature."""
    tables: list[np.ndarray | None] = []
    at = 0
    for c in cats:
        if c is None:
            tables.append(None)
            continue
        tables.append(flat[at:at + len(c) + 1])
        at += len(c) + 1
    if at != flat.shape[0]:
        raise ModelError("The linear model's category tables do not add up to its categories.")
    return tables


def _check_task_and_link(task: str, link: str) -> None:
    if task not in ("classification", "regression"):
        raise ModelError(f"A linear model is a classifier or a regressor, not {task!r}.")
    if link not in LINEAR_LINKS:
        raise ModelError(f"Unknown link {link!r}; expected one of {', '.join(LINEAR_LINKS)}.")


def _category_tables(categories: tuple[Any, ...], category_scores: tuple[Any, ...], names: tuple[str, ...],
                     coef: np.ndarray) -> tuple[tuple[tuple[Any, ...] | None, ...], tuple[np.ndarray | None, ...]]:
    """Each feature's categories (None: numerical) and its checked, read-only score table."""
    d = len(names)
    cats = tuple(categories) or (None,) * d
    tables = tuple(category_scores) or (None,) * d
    if len(cats) != d or len(tables) != d:
        raise ModelError(f"categories / category_scores have {len(cats)} / {len(tables)} entries for {d} "
                         "features.")
    cats = tuple(None if c is None else tuple(c) for c in cats)
    fixed = tuple(_score_table(names[j], c, t, coef[:, j]) for j, (c, t) in enumerate(zip(cats, tables)))
    return cats, fixed


def _score_table(name: str, cats: tuple[Any, ...] | None, table: Any, coef: np.ndarray) -> np.ndarray | None:
    """The score table of one feature, checked against its categories and its numerical
    coefficients ``coef`` (one per score); None for a numerical feature."""
    if (cats is None) != (table is None):
        raise ModelError(f"Feature {name!r}: a categorical feature needs both its categories and its "
                         "score table.")
    if cats is None:
        return None
    if not cats:
        raise ModelError(f"Categorical feature {name!r} has no categories.")
    n_out = coef.shape[0]
    tab = np.array(table, dtype=np.float64, ndmin=2)
    if tab.shape != (len(cats) + 1, n_out):
        raise ModelError(f"The score table of {name!r} has shape {tab.shape}; expected "
                         f"({len(cats) + 1}, {n_out}): one row per category and one for a missing value.")
    if np.any(np.isinf(tab)) or np.any(np.isnan(tab[:-1])):
        raise ModelError(f"The score table of {name!r} holds a value that is not a finite number.")
    if coef.any():
        raise ModelError(f"Categorical feature {name!r} has a numerical coefficient.")
    tab.setflags(write=False)
    return tab


def _checked_classes(task: str, link: str, classes: Any, n_out: int) -> np.ndarray | None:
    """The classes of a classifier whose scores and link fit them; None for a regressor."""
    if task != "classification":
        if n_out != 1 or link != "identity":
            raise ModelError("A linear regressor has one score and the identity link.")
        return None
    if classes is None or len(classes) < 2:
        raise ModelError("A linear classifier needs at least two classes.")
    k = len(classes)
    want = 1 if k == 2 else k
    if n_out not in (want, k):
        raise ModelError(f"A classifier of {k} classes has {n_out} scores; expected {want}.")
    _check_classifier_link(link, n_out, k)
    return np.asarray(classes)


def _check_classifier_link(link: str, n_out: int, k: int) -> None:
    """A classifier of ``k`` classes with ``n_out`` scores has a link that reads them."""
    if link == "identity":
        raise ModelError("A classifier's link is sigmoid, softmax, ovr or decision, not identity.")
    if link == "sigmoid" and n_out != 1:
        raise ModelError("The sigmoid link is for one score (a binary classifier).")
    if link in ("softmax", "ovr") and n_out != k:
        raise ModelError(f"The {link} link needs one score per class.")
