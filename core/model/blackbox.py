"""Any other model: known only by its answers, run somewhere else.

A :class:`BlackBoxModel` is a model the Atlas does not read exactly (an MLP, a
kernel SVM, k-nearest neighbours, naive Bayes, an ONNX graph, a boosting
library it has no parser for). It is described by what a tree ensemble is
described by (feature names, task, classes, categorical features with their
categories) and answers rows of the *codes view* (floats in feature order, a
categorical feature as its code ``0..K-1``, ``K`` for a missing or unseen
value; see :mod:`core.model`), but it never runs in the calling process: its
answers come from a callable (:class:`core.intake.worker.ModelWorker` in the
app: a sandboxed child process with time and memory limits), so this module
imports nothing that runs a model.

What can be said about an answer on such a model is what was *checked* on it
(:class:`core.model.guarantee.Guarantee` ``valid_on_model``); the exact
analyses run on a tree-ensemble surrogate of it, whose fidelity is measured.

The callable takes a float64 array of shape (n, n_features) and the model's
``categories`` (they travel with every call, so a model whose categories the data
gave, e.g. an ONNX graph's string inputs, needs no state in its worker) and returns a dict
with ``"label"`` (n,) (a classifier's class, a regressor's value) and, for a
classifier, ``"proba"`` (n, n_classes) (class probabilities, or per-class
decision scores when the model has no probabilities: ``has_proba`` says which).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np

from core.errors import ModelError, SchemaError
from core.model.features import ModelShape
from core.typing import Rows

if TYPE_CHECKING:
    from core.model.guarantee import ModelKind

__all__ = ["BlackBoxModel", "Answers", "check_answers"]

Answers = Callable[[np.ndarray, Any], dict[str, np.ndarray]]


def _finite(a: np.ndarray, what: str, n: int, error: type[ModelError]) -> None:
    """Refuse NaN or an infinite value among the model's numbers, naming it and how many rows."""
    bad = ~np.isfinite(a)
    if not bad.any():
        return
    rows = int(bad.reshape(len(a), -1).any(axis=1).sum())
    found = "NaN (not a number)" if np.isnan(a).any() else "an infinite value"
    raise error(f"The model answered {found} as its {what} on {rows:,} of {n:,} rows. A model must answer a "
                "finite number on every row: check it on those rows in its own library (a division by zero, an "
                "overflow, a missing value it cannot take), then save it again.")


def check_answers(out: dict[str, Any], n: int, n_classes: int, error: type[ModelError] = ModelError
                  ) -> dict[str, np.ndarray]:
    """A model's answers on ``n`` rows, checked: ``label`` one per row (a column of one is
    flattened), for a classifier (``n_classes`` > 0) ``proba`` of shape (n, n_classes), every
    number finite (a regressor's values as float64). Anything else raises ``error`` naming what
    arrived: an answer no model gives is refused, never read as one (a NaN label is no class, and
    NaN scores make every row look alike)."""
    label = np.asarray(out.get("label"))
    if label.shape == (n, 1):
        label = label[:, 0]
    if label.shape != (n,):
        raise error(f"The model answered labels of shape {label.shape} for {n:,} rows; one label per row is "
                    "expected. Check what its predict returns.")
    if not n_classes:                                   # a regressor: a number per row
        try:
            value = label.astype(np.float64)
        except (TypeError, ValueError):
            raise error("The model is a regressor but answered values that are not numbers.") from None
        _finite(value, "value", n, error)
        return {"label": value}
    if label.dtype.kind == "f":
        _finite(label, "label", n, error)
    try:
        proba = np.asarray(out.get("proba"), dtype=np.float64)
    except (TypeError, ValueError):
        raise error("The model answered class scores that are not numbers.") from None
    if proba.shape != (n, n_classes):
        raise error(f"The model answered class scores of shape {proba.shape} for {n:,} rows and {n_classes} "
                    f"classes; ({n:,}, {n_classes}) is expected. Check what its predict_proba (or "
                    "decision_function) returns.")
    _finite(proba, "class scores", n, error)
    return {"label": label, "proba": proba}


@dataclass(frozen=True, eq=False)
class BlackBoxModel(ModelShape):
    """A model answered by a callable (see the module docstring).

    Attributes
    ----------
    feature_names : tuple of str, length n_features, in the model's order.
    task : "classification" or "regression".
    classes : ndarray of shape (n_classes,) or None (regression).
    categories : tuple of length n_features: None for a numerical feature, the
        tuple of category values of a categorical one (or empty: none).
    has_proba : True when ``proba`` holds probabilities (rows sum to 1), False
        when it holds decision scores (the class with the highest score wins).
    takes_missing : True when the model accepts NaN (a numerical value missing).
    source : what the model is, e.g. ``"sklearn.MLPClassifier"`` or ``"onnx"``.
    identity : a content hash of the model (its file's SHA-256): the key of caches.
    meta : how the model takes its input (``meta["input"]``, as in
        :mod:`core.model.native`) and other facts of its reader.
    answers : the callable; not part of the model's identity.
    """

    feature_names: tuple[str, ...]
    task: Literal["classification", "regression"]
    classes: np.ndarray | None
    answers: Answers = field(repr=False)
    categories: tuple[tuple[Any, ...] | None, ...] = ()
    has_proba: bool = True
    takes_missing: bool = False
    source: str = "model"
    identity: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> ModelKind:
        """``"black_box"``: a model known by its answers (not read exactly)."""
        return "black_box"

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.feature_names)
        if not names:
            raise ModelError("The model takes no features.")
        object.__setattr__(self, "feature_names", names)
        cats = tuple(self.categories) or (None,) * len(names)
        if len(cats) != len(names):
            raise ModelError(f"categories has {len(cats)} entries for {len(names)} features.")
        object.__setattr__(self, "categories", tuple(None if c is None else tuple(c) for c in cats))
        if self.task not in ("classification", "regression"):
            raise ModelError(f"Unknown task {self.task!r}; expected 'classification' or 'regression'.")
        if self.task == "classification":
            if self.classes is None or len(self.classes) < 2:
                raise ModelError("A classifier needs at least two classes.")
            object.__setattr__(self, "classes", np.asarray(self.classes))
        else:
            object.__setattr__(self, "classes", None)

    # -- shape, as TreeEnsemble has it
    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def routes_missing(self) -> bool:
        return self.takes_missing

    def content_hash(self) -> str:
        return self.identity

    def __reduce__(self) -> Any:
        raise ModelError("A model that runs in its own worker process cannot be sent to another process; "
                         "send its surrogate (a TreeEnsemble) and check the answers here.")

    # -- answers
    def _check_X(self, X: Any) -> np.ndarray:
        try:
            A = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise SchemaError("Rows for the model must be numbers (the codes view: a category as its code).") \
                from None
        if A.ndim == 1:
            A = A[None, :]
        if A.ndim != 2 or A.shape[1] != self.n_features:
            raise SchemaError(f"Rows of shape {A.shape} given; the model takes {self.n_features} features "
                              f"({', '.join(self.feature_names[:5])}{', …' if self.n_features > 5 else ''}).")
        if not self.takes_missing:
            num = [j for j in range(self.n_features) if self.categories[j] is None]
            if num and np.isnan(A[:, num]).any():
                raise SchemaError("This model does not take missing values; fill them or drop those rows.")
        return np.ascontiguousarray(A)

    def answer(self, X: Rows) -> dict[str, np.ndarray]:
        """The model's answers on rows ``X`` (see the module docstring), checked for shape."""
        A = self._check_X(X)
        if len(A) == 0:
            out: dict[str, np.ndarray] = {"label": np.empty(0, dtype=object if self.classes is None else
                                                              self.classes.dtype)}
            if self.is_classifier:
                out["proba"] = np.empty((0, self.n_classes))
            return out
        return check_answers(self.answers(A, self.categories), len(A), self.n_classes)

    def predict(self, X: Rows) -> np.ndarray:
        """Class labels (classifier) or values (regressor) on rows ``X``."""
        return self.answer(X)["label"]

    def predict_proba(self, X: Rows) -> np.ndarray:
        """Class probabilities (``has_proba``) or per-class scores, shape (n, n_classes)."""
        self._classifier_only("predict_proba")
        return self.answer(X)["proba"]

    def with_categories(self, categories: Iterable[Iterable[object] | None]) -> "BlackBoxModel":
        """This model with categories for its categorical inputs (e.g. read from the data)."""
        return replace(self, categories=tuple(None if c is None else tuple(c) for c in categories))

    def with_names(self, names: Iterable[object]) -> "BlackBoxModel":
        """This model with other feature names (columns matched by position, as confirmed)."""
        return replace(self, feature_names=tuple(str(n) for n in names))

    def summary(self) -> dict[str, Any]:
        return {"kind": "any other model", "source": self.source, "features": self.n_features,
                "task": self.task, "classes": None if self.classes is None else [str(c) for c in self.classes],
                "probabilities": self.has_proba}
