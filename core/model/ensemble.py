"""The :class:`TreeEnsemble` every analysis reads.

Its shape (trees, outputs, categorical features and their codes), its
structure (split counts and levels, leaf boxes and category masks),
prediction (rows walked by :mod:`core.model.flatwalk`, then aggregated and linked),
the Isolation Forest scores, and the plain-arrays round trip and content hash
that let an ensemble cross a process boundary. The representation is
documented in :mod:`core.model`.

:func:`as_ensemble` is how an analysis accepts a fitted model too: it returns a
``TreeEnsemble`` as is and hands anything else to the converter registered with
:func:`register_converter`, so the representation imports no parser. It refuses a
linear model, naming the analyses that run on one. :func:`as_model` is how an
analysis that also reads linear models accepts a model: a ``TreeEnsemble`` or a
:class:`core.model.linear.LinearModel` as is, anything else through the converter
registered with :func:`register_model_converter`.

A converter is registered as a function or, lazily, as the path of one
(``"package.module:function"``), imported the first time a model that is not
already one of core's needs it: importing ``core`` registers
``core.intake.models:from_model`` and ``core.intake.models:model_from`` that way, so
no parser (and no XGBoost, LightGBM or ONNX) is imported until a model arrives.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal

import numpy as np

from core.errors import DataError, ModelError, SchemaError, UnsupportedModelError
from core.jsonable import plain
from core.model.features import ModelShape, as_table, feature_index
from core.model.flatwalk import _flatten, _stack, leaf_sum, leaves
from core.model.linear import LINEAR_ANALYSES, LinearModel
from core.model.tree import StackedTrees, Tree, node_category_masks, stacked_trees
from core.typing import ModelLike, Rows

if TYPE_CHECKING:
    from core.model.guarantee import ModelKind

__all__ = ["TreeEnsemble", "Link", "Task", "as_ensemble", "as_model", "register_converter",
           "register_model_converter"]

Link = Literal["identity", "sigmoid", "softmax", "isolation"]
Task = Literal["classification", "regression", "anomaly"]


@dataclass(frozen=True, eq=False)
class TreeEnsemble(ModelShape):
    """A tree ensemble in one representation; see the docstring of :mod:`core.model`.

    Attributes
    ----------
    trees : tuple of Tree
    n_features : int
    feature_names : tuple of str, length n_features
    task : "classification", "regression" or "anomaly"
    aggregation : "sum" or "mean" over trees
    link : "identity", "sigmoid", "softmax" or "isolation"
    base_score : ndarray of shape (n_outputs,), added to the aggregate
    classes : ndarray of shape (n_classes,) or None (regression, anomaly)
    sigmoid_scale : float, ``proba = 1 / (1 + exp(-scale * raw))``
    positive_at_tie : bool, binary sigmoid models whose ``predict`` gives the
        positive class at ``raw == 0`` (scikit-learn's gradient boosting)
    source : str, e.g. ``"sklearn.RandomForestClassifier"``
    meta : dict, family-specific constants (Isolation Forest: ``c``, ``offset``);
        ``meta["input"]`` says how the source model takes its input (see
        :mod:`core.model.native`).
    categories : tuple of length n_features (or empty: no categorical feature),
        None for a numerical feature, the tuple of category values of a
        categorical one (see :mod:`core.model`).
    """

    _flat: ClassVar[dict[str, Any]]   # every tree flattened for the walk (set per instance in __post_init__)

    trees: tuple[Tree, ...]
    n_features: int
    feature_names: tuple[str, ...]
    task: Task
    aggregation: Literal["sum", "mean"]
    link: Link
    base_score: np.ndarray
    classes: np.ndarray | None = None
    sigmoid_scale: float = 1.0
    positive_at_tie: bool = False
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    categories: tuple[tuple[Any, ...] | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.trees:
            raise ModelError("The model has no trees.")
        made = self.trees if isinstance(self.trees, StackedTrees) else None   # their stacked arrays (_stack)
        object.__setattr__(self, "trees", tuple(self.trees))
        n_out = made.arrays["value"].shape[1] if made is not None else _common_outputs(self.trees)
        base = _checked_base_score(self.base_score, n_out)
        object.__setattr__(self, "base_score", base)
        names = tuple(str(n) for n in self.feature_names)
        if len(names) != self.n_features:
            raise ModelError(f"{len(names)} feature names for {self.n_features} features.")
        object.__setattr__(self, "feature_names", names)
        cats = _checked_categories(self.categories, self.n_features)
        object.__setattr__(self, "categories", cats)
        is_cat = np.array([c is not None for c in cats], dtype=bool)
        n_codes = np.array([0 if c is None else len(c) + 1 for c in cats], dtype=np.int64)
        if not np.all(np.isfinite(base)):
            raise ModelError(f"The model's base score is {base.tolist()}: not a finite number. Re-save the model "
                             "from its library.")
        stacked = _stack(made if made is not None else self.trees)
        _check_trees(stacked, self.feature_names, is_cat, n_codes)
        if self.classes is not None:
            object.__setattr__(self, "classes", np.asarray(self.classes))
        object.__setattr__(self, "_flat", _flatten(self.trees, stacked))

    # ------------------------------------------------------------------ shape
    @property
    def kind(self) -> ModelKind:
        """``"tree_ensemble"`` (a :class:`core.model.linear.LinearModel` says ``"linear"``)."""
        return "tree_ensemble"

    @property
    def n_trees(self) -> int:
        return len(self.trees)

    @property
    def n_outputs(self) -> int:
        return int(self.base_score.shape[0])

    @property
    def has_proba(self) -> bool:
        """A classifier's ``predict_proba`` gives probabilities (its link applied)."""
        return self.is_classifier

    @property
    def max_depth(self) -> int:
        return max(t.max_depth for t in self.trees)

    @property
    def n_leaves(self) -> int:
        return int(sum(int(t.is_leaf.sum()) for t in self.trees))

    def feature_index(self, f: int | str) -> int:
        """Index of a feature given by index or name (:func:`core.model.features.feature_index`:
        a SchemaError names the closest features)."""
        return feature_index(self.feature_names, f, error=SchemaError)

    # ------------------------------------------------------------- structure
    def split_counts(self) -> np.ndarray:
        """Number of splits on each feature over all trees, shape (n_features,)."""
        f = self._flat["feature_raw"]
        return np.bincount(f[f >= 0].astype(np.int64), minlength=self.n_features)

    def split_levels(self, j: int) -> np.ndarray:
        """Sorted distinct thresholds on numerical feature ``j`` over all trees.

        For a categorical feature: the half-integers ``0.5 .. n_codes - 1.5``
        between its codes, so that every code is a cell of its own on the grid
        of split levels the analyses use."""
        if self.categories[j] is not None:
            return np.arange(self.n_codes(j) - 1) + 0.5
        levels = self._flat.get("split_levels")
        if levels is None:                           # every feature's at once (a scan of all nodes per feature was
            levels = _split_levels(self._flat, self.n_features)    # most of the probe points of a large model)
            self._flat["split_levels"] = levels
        return levels[j].copy()

    def leaf_boxes(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per tree, ``(leaves, lower, upper)`` as in :meth:`Tree.leaf_boxes`;
        categorical features are unbounded here, see :meth:`leaf_category_masks`."""
        cache = self._flat.setdefault("leaf_boxes", None)
        if cache is None:
            cache = [t.leaf_boxes(self.n_features) for t in self.trees]
            self._flat["leaf_boxes"] = cache
        return cache

    def leaf_category_masks(self) -> list[dict[int, np.ndarray]]:
        """Per tree, ``{j: bool array (n_leaves, n_codes(j))}``: the codes of each
        categorical feature that each leaf (in :meth:`leaf_boxes` order) admits."""
        cache = self._flat.setdefault("leaf_category_masks", None)
        if cache is None:
            n_codes = {j: self.n_codes(j) for j in self.categorical_features}
            cache = []
            for t in self.trees:
                leaves = np.flatnonzero(t.is_leaf)
                cache.append({j: m[leaves] for j, m in node_category_masks(t, n_codes).items()})
            self._flat["leaf_category_masks"] = cache
        return cache

    def used_features(self) -> np.ndarray:
        """Indices of the features that at least one split uses."""
        f = self._flat["feature_raw"]
        return np.unique(f[f >= 0])

    # ------------------------------------------------------------ prediction
    def _check_X(self, X: Any) -> np.ndarray:
        """Rows as a C-contiguous float64 array (n, n_features): a 2-D array or a
        DataFrame (by name when it holds every feature, see
        :func:`core.model.features.as_table`), or one row as a 1-D sequence. A
        table that does not fit the model raises SchemaError; values that are no
        numbers, or NaN the model cannot take, DataError."""
        if isinstance(X, np.ndarray) and X.dtype.kind in "biuf" and X.ndim in (1, 2) \
                and X.shape[-1] == self.n_features:
            X = np.asarray(X, dtype=np.float64)          # the analyses' own rows: no copy, no conversion
            if X.ndim == 1:
                X = X[None, :]
        else:
            X = self._door(X)
        nan = np.isnan(X)
        if nan.any():
            cats = [j for j in self.categorical_features if nan[:, j].any()]
            if cats:
                raise DataError(f"Column {self.feature_names[cats[0]]!r} is categorical: a missing value is its "
                                f"code {self.missing_code(cats[0])}, not NaN.")
            if not self.routes_missing:
                raise DataError("X contains NaN, and this model does not take missing values (its library "
                                "refuses them); impute or drop those rows first.")
        for j in self.categorical_features:
            col = X[:, j]
            bad = (col < 0) | (col >= self.n_codes(j)) | (col != np.floor(col))
            if bad.any():
                raise DataError(
                    f"Column {self.feature_names[j]!r} is categorical: it takes integer codes 0..{self.n_codes(j) - 1}, "
                    f"got {col[bad][0]!r}."
                )
        return np.ascontiguousarray(X)

    def _door(self, X: Any) -> np.ndarray:
        """Rows given as anything but a numeric array of the right width, checked
        (a SchemaError for a shape or columns that do not fit, a DataError for values)."""
        if isinstance(X, np.ndarray) and X.dtype.kind in "biuf" and X.ndim in (1, 2):
            raise SchemaError(f"X has shape {X.shape}; the model expects (n_samples, {self.n_features}) "
                              f"(its features: {list(self.feature_names)[:12]}{' …' if self.n_features > 12 else ''}).")
        return as_table(X, self.feature_names, error=SchemaError, value_error=DataError, missing=True,
                        infinite=True, one_row=True, min_rows=0)

    @property
    def routes_missing(self) -> bool:
        """True when every tree says where a missing value (NaN) goes at each split."""
        return bool(self._flat["routes_missing"])

    def apply(self, X: Rows) -> np.ndarray:
        """Leaf node index per row and tree, shape (n_samples, n_trees)."""
        X = self._check_X(X)          # a missing value (NaN) takes each split's own routing in the walk
        return leaves(self._flat, X, self.n_trees) - self._flat["offsets"][None, :]

    def predict_raw(self, X: Rows, *, seen: np.ndarray | None = None) -> np.ndarray:
        """Aggregated leaf values plus base score, shape (n_samples, n_outputs).

        Forest classifiers: mean class probabilities. Boosting: margins.
        Regression: predicted values. Isolation Forest: mean path length.
        ``seen``: one byte per node in the walk's packed order, set to 1 at every leaf reached
        (:func:`core.model.cover.covering_rows` reads it).
        """
        X = self._check_X(X)          # a missing value (NaN) takes each split's own routing in the walk
        out = leaf_sum(self._flat, X, self.n_outputs, self.n_trees, seen)
        if self.aggregation == "mean":
            out /= self.n_trees
        return out + self.base_score

    def predict_proba(self, X: Rows) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), in ``classes`` order."""
        self._classifier_only("predict_proba")
        raw = self.predict_raw(X)
        return self.proba_from_raw(raw)

    def proba_from_raw(self, raw: np.ndarray) -> np.ndarray:
        """Class probabilities from aggregated raw outputs (``predict_raw``, or a
        region's ``raw``): the link of the model applied."""
        if self.link == "sigmoid":
            p = 1.0 / (1.0 + np.exp(-self.sigmoid_scale * raw[:, 0]))
            return np.column_stack([1.0 - p, p])
        if self.link == "softmax":
            z = raw - raw.max(axis=1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=1, keepdims=True)
        return raw / np.maximum(raw.sum(axis=1, keepdims=True), np.finfo(float).tiny)

    def predict(self, X: Rows) -> np.ndarray:
        """Labels (classifiers, in the source model's label set), values
        (regression), or +1 inlier / -1 outlier (Isolation Forest)."""
        return self.predict_from_raw(self.predict_raw(X))

    def predict_from_raw(self, raw: np.ndarray) -> np.ndarray:
        """What :meth:`predict` gives for aggregated raw outputs (``predict_raw``)."""
        if self.task == "regression":
            return raw[:, 0].copy()
        if self.task == "anomaly":
            return np.where(self._decision_from_raw(raw) >= 0, 1, -1)
        if self.classes is None:
            raise ModelError(f"This {self.source or 'tree ensemble'} classifier has no class labels (classes is "
                             "None): read it again from its library, or use predict_proba.")
        if self.link == "sigmoid":
            pos = raw[:, 0] >= 0 if self.positive_at_tie else raw[:, 0] > 0
            return self.classes[pos.astype(int)]
        return self.classes[np.argmax(self.proba_from_raw(raw), axis=1)]

    # ------------------------------------------------------- isolation forest
    def _decision_from_raw(self, raw: np.ndarray) -> np.ndarray:
        return self._score_from_raw(raw) - self.meta["offset"]

    def _score_from_raw(self, raw: np.ndarray) -> np.ndarray:
        c = self.meta["c"]
        return -(2.0 ** (-raw[:, 0] / c)) if c > 0 else -np.ones(raw.shape[0])

    def score_samples(self, X: Rows) -> np.ndarray:
        """Isolation Forest anomaly score (as scikit-learn's ``score_samples``)."""
        if self.task != "anomaly":
            raise UnsupportedModelError("score_samples is defined for Isolation Forest models only; this model is a "
                                        f"{self.task} model.")
        return self._score_from_raw(self.predict_raw(X))

    def decision_function(self, X: Rows) -> np.ndarray:
        """Isolation Forest ``score_samples - offset`` (negative = outlier)."""
        if self.task != "anomaly":
            raise UnsupportedModelError("decision_function is defined for Isolation Forest models only; this model "
                                        f"is a {self.task} model.")
        return self._decision_from_raw(self.predict_raw(X))

    def summary(self) -> dict[str, Any]:
        """Plain facts about the model for display."""
        return {
            "family": self.source,
            "task": self.task,
            "trees": self.n_trees,
            "max depth": self.max_depth,
            "leaves": self.n_leaves,
            "features": self.n_features,
            "features used": int(self.used_features().size),
            "categorical features": len(self.categorical_features),
            "classes": None if self.classes is None else [str(c) for c in self.classes],
        }

    # ------------------------------------------------------ arrays round trip
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Plain arrays and JSON-able metadata that :meth:`from_arrays` turns back
        into this ensemble: no pickle, so they can cross a process boundary from
        an untrusted parse (``np.savez`` / ``json``)."""
        arrays = {**_tree_arrays(self.trees), "base_score": np.asarray(self.base_score, dtype=np.float64)}
        if self.routes_missing:
            arrays["missing_left"] = np.concatenate([t.missing_left for t in self.trees])
        meta = {
            "n_features": int(self.n_features), "feature_names": list(self.feature_names),
            "task": self.task, "aggregation": self.aggregation, "link": self.link,
            "classes": None if self.classes is None else [plain(c) for c in self.classes],
            "sigmoid_scale": float(self.sigmoid_scale), "positive_at_tie": bool(self.positive_at_tie),
            "source": self.source, "meta": plain(self.meta),
            "categories": [None if c is None else [plain(v) for v in c] for c in self.categories],
        }
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> "TreeEnsemble":
        """Rebuild an ensemble from :meth:`to_arrays` output, checking every invariant again."""
        try:
            counts = np.asarray(arrays["node_counts"], dtype=np.int64)
            cols = _node_columns(arrays, counts)
            trees = stacked_trees(counts, cols["children_left"], cols["children_right"], cols["feature"],
                                  cols["threshold"], cols["value"], cols["category_bits"], cols.get("missing_left"))
            classes = meta.get("classes")
            return cls(trees, n_features=int(meta["n_features"]), feature_names=tuple(meta["feature_names"]),
                       task=meta["task"], aggregation=meta["aggregation"], link=meta["link"],
                       base_score=np.asarray(arrays["base_score"], dtype=np.float64),
                       classes=None if classes is None else np.asarray(classes),
                       sigmoid_scale=float(meta.get("sigmoid_scale", 1.0)),
                       positive_at_tie=bool(meta.get("positive_at_tie", False)), source=str(meta.get("source", "")),
                       meta=_unplain(dict(meta.get("meta") or {})),
                       categories=tuple(None if c is None else tuple(c) for c in meta.get("categories") or ()))
        except (KeyError, TypeError, IndexError) as exc:
            raise ModelError(f"The parsed model is incomplete ({type(exc).__name__}: {exc}).") from None

    def content_hash(self) -> str:
        """SHA-256 of the ensemble's arrays and metadata: equal for equal models,
        whatever file or training run they came from (a cache key)."""
        cache = self._flat.get("content_hash")
        if cache is None:
            arrays, meta = self.to_arrays()
            h = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode())
            for k in sorted(arrays):
                a = np.ascontiguousarray(arrays[k])
                h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
                h.update(a.tobytes())
            cache = self._flat["content_hash"] = h.hexdigest()
        return cache



def _split_levels(flat: dict[str, Any], n_features: int) -> list[np.ndarray]:
    """Per feature, the sorted distinct thresholds of its splits on numbers over all trees."""
    f, t = flat["feature_raw"], flat["threshold_raw"]
    keep = (f >= 0) & ~np.isnan(t)
    f, t = f[keep], t[keep]
    order = np.argsort(f, kind="stable")          # by feature (a radix sort), then each feature's own
    ends = np.searchsorted(f[order], np.arange(n_features + 1))     # (lexsort of both took twice as long)
    return [np.unique(t[order[ends[j]:ends[j + 1]]]) for j in range(n_features)]


def _common_outputs(trees: tuple[Tree, ...]) -> int:
    """The number of outputs every tree has (they must all have the same)."""
    n_out = int(trees[0].value.shape[1])
    if any(t.value.shape[1] != n_out for t in trees):
        raise ModelError("All trees must have the same number of outputs.")
    return n_out


def _checked_base_score(base_score: Any, n_out: int) -> np.ndarray:
    """The base score, read-only, one per output of the trees (``n_out``)."""
    base = np.atleast_1d(np.asarray(base_score, dtype=np.float64)).copy()
    if base.shape != (n_out,):
        raise ModelError(f"base_score has shape {base.shape}; expected ({n_out},).")
    base.setflags(write=False)
    return base


def _checked_categories(categories: tuple[Any, ...], d: int) -> tuple[tuple[Any, ...] | None, ...]:
    """One entry per feature (none given: every feature numerical), each categories tuple or None."""
    cats = tuple(categories) or (None,) * d
    if len(cats) != d:
        raise ModelError(f"categories has {len(cats)} entries for {d} features.")
    return tuple(None if c is None else tuple(c) for c in cats)


def _tree_arrays(trees: tuple[Tree, ...]) -> dict[str, np.ndarray]:
    """The trees' node arrays one after the other (category words padded to the widest), with their node counts."""
    cat_w = max((t.bits.shape[1] for t in trees), default=0)
    bits = np.concatenate([np.pad(t.bits, ((0, 0), (0, cat_w - t.bits.shape[1]))) for t in trees]).astype(np.uint64)
    return {"node_counts": np.array([t.n_nodes for t in trees], dtype=np.int64),
            **{k: np.concatenate([getattr(t, k) for t in trees])
               for k in ("children_left", "children_right", "feature", "threshold", "value")},
            "category_bits": bits}


def _node_columns(arrays: dict[str, np.ndarray], counts: np.ndarray) -> dict[str, np.ndarray]:
    """The node arrays :meth:`TreeEnsemble.to_arrays` wrote, checked to add up to the node ``counts``."""
    total = int(counts.sum())
    if counts.ndim != 1 or counts.size == 0 or np.any(counts <= 0):
        raise ModelError("The parsed model has no trees or an empty tree.")
    cols = {k: np.asarray(arrays[k]) for k in ("children_left", "children_right", "feature", "threshold",
                                                "value", "category_bits")}
    if "missing_left" in arrays:
        cols["missing_left"] = np.asarray(arrays["missing_left"], dtype=bool)
    if any(len(v) != total for v in cols.values()):
        raise ModelError("The parsed model's arrays do not add up to its node counts.")
    return cols


def _check_trees(st: dict[str, Any], names: tuple[str, ...], is_cat: np.ndarray, n_codes: np.ndarray) -> None:
    """The ensemble's checks of its trees (finite leaf values, features it has, categorical
    splits on categorical features only and sending none of their codes beyond them left),
    on the stacked trees (:func:`core.model.flatwalk._stack`) at once: the first failing
    tree's first failing check is raised, as checking tree by tree would."""
    inner, feature = st["children_left"] >= 0, st["feature_raw"]
    known = np.clip(feature, 0, max(len(names) - 1, 0))
    cat = st["cat_node"]
    checks = [~inner & ~np.all(np.isfinite(st["value"]), axis=1), feature >= len(names),
              cat != (inner & is_cat[known]), _codes_beyond(st["cat_bits"], cat, n_codes[known])]
    tree_of = np.repeat(np.arange(st["sizes"].size), st["sizes"])
    failing = [(int(tree_of[np.argmax(bad)]), k) for k, bad in enumerate(checks) if bad.any()]
    if not failing:
        return
    tree, which = min(failing)
    node = int(np.argmax(checks[which]))
    if which == 0:
        raise ModelError(f"Tree {tree}, leaf {node - int(st['offsets'][tree])} has the value "
                         f"{st['value'][node].tolist()}: not a finite number. Re-save the model from its library.")
    if which == 1:
        raise ModelError("A tree splits on a feature index beyond n_features.")
    if which == 2:
        raise ModelError("A categorical split is on a numerical feature, or a threshold split on a categorical "
                         "feature.")
    raise ModelError(f"A categorical split sends a code beyond the {int(n_codes[known[node]])} codes of feature "
                     f"{names[known[node]]!r} left.")


def _codes_beyond(bits: np.ndarray, cat: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Which categorical splits send a code at or beyond ``k`` (their feature's codes) left: a
    bit of their set at that code or later, in the words of their tree."""
    out = np.zeros(cat.shape, dtype=bool)
    for w in range(bits.shape[1]):
        lo = 64 * w
        shift = np.clip(k - lo, 0, 63).astype(np.uint64)
        allowed = np.where(k >= lo + 64, ~np.uint64(0),
                           np.where(k <= lo, np.uint64(0), (np.uint64(1) << shift) - np.uint64(1)))
        out |= cat & ((bits[:, w] & ~allowed) != 0)
    return out

def _unplain(meta: dict[str, Any]) -> dict[str, Any]:
    if isinstance(meta.get("iteration_range"), list):
        meta["iteration_range"] = tuple(meta["iteration_range"])
    return meta


def _replace(ens: TreeEnsemble, **changes: Any) -> TreeEnsemble:
    return replace(ens, **changes)


Converter = Callable[..., Any]

#: the converters, by what they make ("ensemble": a TreeEnsemble; "model": a TreeEnsemble or a
#: LinearModel): a function, or the path "module:function" of one, imported on first use
_converters: dict[str, Converter | str] = {}


def _register(what: str, fn: Converter | str) -> Converter | str:
    if isinstance(fn, str):
        module, sep, name = fn.partition(":")
        if not (sep and module and name):
            raise ValueError(f"A converter's path reads 'package.module:function'; got {fn!r}.")
    elif not callable(fn):
        raise ValueError(f"A converter is a function or the path 'package.module:function' of one; got "
                         f"{type(fn).__name__}.")
    _converters[what] = fn
    return fn


def _converter(what: str, obj: Any) -> Converter:
    """The registered converter ``what``, its module imported now when it was registered by path."""
    fn = _converters.get(what)
    if fn is None:
        raise UnsupportedModelError(f"No converter from {type(obj).__name__} to a model of core is registered "
                                    "(importing core registers the parsers).")
    if isinstance(fn, str):
        module, _, name = fn.partition(":")
        fn = _converters[what] = getattr(importlib.import_module(module), name)
    return fn


def register_converter(fn: Callable[..., TreeEnsemble] | str) -> Callable[..., TreeEnsemble] | str:
    """Make ``fn(model, **kw)`` the converter :func:`as_ensemble` calls on anything that
    is not a :class:`TreeEnsemble`; ``fn`` may be the path ``"module:function"`` of it,
    imported on first use (``core`` registers ``core.intake.models:from_model``)."""
    return _register("ensemble", fn)


def as_ensemble(obj: ModelLike, **kw: object) -> TreeEnsemble:
    """``obj`` itself when it is a :class:`TreeEnsemble`, else the registered
    converter's ``TreeEnsemble`` of the fitted model ``obj`` (keywords passed on)."""
    if isinstance(obj, TreeEnsemble):
        return obj
    if isinstance(obj, LinearModel):
        raise UnsupportedModelError(f"This analysis needs a tree ensemble; the model is a linear model "
                                    f"({obj.source or 'linear'}). On a linear model run {LINEAR_ANALYSES}.")
    return _converter("ensemble", obj)(obj, **kw)


def register_model_converter(fn: Callable[..., TreeEnsemble | LinearModel] | str
                             ) -> Callable[..., TreeEnsemble | LinearModel] | str:
    """Make ``fn(model, **kw)`` the converter :func:`as_model` calls on anything that is
    neither a :class:`TreeEnsemble` nor a :class:`LinearModel`; a path ``"module:function"``
    is imported on first use (``core`` registers ``core.intake.models:model_from``)."""
    return _register("model", fn)


def as_model(obj: ModelLike, **kw: object) -> TreeEnsemble | LinearModel:
    """``obj`` itself when it is a :class:`TreeEnsemble` or a :class:`LinearModel`, else
    the registered converter's reading of the fitted model ``obj`` (a linear model, a
    pipeline ending in one, or a tree ensemble); keywords passed on."""
    if isinstance(obj, (TreeEnsemble, LinearModel)):
        return obj
    return _converter("model", obj)(obj, **kw)
