"""Features by name or index, and rows and tables of them, as the public API takes them.

The one resolver of feature names: every entry point that takes features
(``fixed``, ``increase_only``, ``decrease_only``, per-feature weights, the
features of a view, protected columns, one-hot groups) turns them into column
indices with :func:`feature_index` / :func:`feature_indices`, and every entry
point that takes rows turns them into floats in the model's feature order with
:func:`as_row` / :func:`as_table`. Each raises the caller's own error class
(``error``, a class of :mod:`core.errors`) with a message saying what was
expected, what arrived and how to fix it; an unknown name comes with the
closest names (:mod:`difflib`).

A feature is given by its name (a ``str``) or by its column index (an ``int``
in ``0..d-1``); nothing else (a float, a bool, None) names a feature. Where
several are taken, one name or one index stands for a list of one, and None
for no feature.

A row is a sequence of ``d`` numbers in the model's order, a one-row table, or
a pandas Series. A table is a 2-D array or a DataFrame. A Series' index and a
DataFrame's columns are labels: read by name when they hold every feature
(extra columns ignored, any order), else by position only when the labels say
nothing about the features: plain positions ``0..d-1`` (``pd.Series(values)``,
``pd.DataFrame(array)``), or a model whose names are placeholders its library
made up (``f0``, ``x0``, ``Column_0``, ``feature_0``: it was trained on an array).
Labels that name other things (``c0..c10`` for a model of ``f0..f10``'s
real names, a misspelt column) are refused with the missing features: reading
them by position would answer for values the caller did not mean. Values must be
numbers; infinite values are refused, missing values (NaN) too unless the caller
reads them (``missing=True``). Reference rows (``X_ref``) are read by
:func:`reference_rows`, which also refuses a table without rows or without a
single known value, and the roles of a query's features by :func:`feature_roles`,
which refuses a feature both increase-only and decrease-only.

The one shape of a model
------------------------
Three kinds of model reach the analyses (:data:`core.model.guarantee.MODEL_KINDS`): a
:class:`~core.model.TreeEnsemble` (``"tree_ensemble"``) and a
:class:`~core.model.linear.LinearModel` (``"linear"``), read exactly, and a
:class:`~core.model.blackbox.BlackBoxModel` (``"black_box"``), known only by its answers.
Each holds the same description, under the same names: ``feature_names`` (one str per
feature, in the model's order); ``categories`` (one entry per feature: None for a number,
the tuple of the category values of a categorical feature, which the model takes as a
*code*: ``0..K-1`` for its ``K`` categories, ``K`` for a missing or unseen value);
``task`` and ``classes`` (``"classification"``, its labels in the order of its scores;
``"regression"`` or ``"anomaly"``, None); ``kind`` and ``source``. Each answers rows of that
codes view with ``predict`` (labels or values, shape (n,)) and, for a classifier,
``predict_proba`` (n, n_classes: probabilities, or per-class scores when ``has_proba`` is
False), and says ``content_hash()``. What follows from that description is written once,
in their base :class:`ModelShape`: the codes of a categorical feature and their labels
(a numerical feature has neither: a :class:`~core.errors.SchemaError` says so), the
classes, whether the model is read exactly (:attr:`ModelShape.exact`: its answers may be
proven on it) and the strongest guarantee an answer on it can carry.
:func:`check_model_shape` is the conformance check every kind passes
(``tests/model/test_model_shape.py`` runs it on each kind, classifier and regressor).
"""

from __future__ import annotations

import difflib
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
import pandas as pd

from core.errors import DataError, ModelError, SchemaError, UnsupportedModelError
from core.typing import FeatureKey, Row, Rows

if TYPE_CHECKING:
    from core.model.guarantee import GuaranteeKind, ModelKind

__all__ = ["model_outputs", "feature_index", "feature_indices", "closest_names", "names_text", "as_row", "as_table",
           "fit_table", "placeholder_names", "reference_rows", "feature_roles", "ModelShape", "check_model_shape",
           "MISSING_LABEL"]

_SHOWN = 40                     # names listed in a message at most
_PLACEHOLDER = re.compile(r"(f|x|Column_|feature_)\d+")


def placeholder_names(names: Sequence[Any]) -> bool:
    """Whether ``names`` are the placeholders a library gives the features of a model
    trained on an array (XGBoost ``f0``, scikit-learn's ``x0``, LightGBM ``Column_0``,
    ``feature_0``), which say nothing of the columns a table must hold."""
    return bool(names) and all(_PLACEHOLDER.fullmatch(str(n)) for n in names)


def _positions(labels: Sequence[Any]) -> bool:
    """Labels that are plain positions 0..k-1 (a RangeIndex, ``pd.DataFrame(array)``)."""
    return [str(v) for v in labels] == [str(k) for k in range(len(labels))]


def names_text(names: Sequence[Any], limit: int = _SHOWN) -> str:
    """``['a', 'b', …]``: the names as a message lists them (at most ``limit``)."""
    shown = [str(n) for n in names[:limit]]
    more = f", … ({len(names)} in all)" if len(names) > limit else ""
    return "[" + ", ".join(repr(n) for n in shown) + more + "]"


def closest_names(key: str, names: Sequence[str], n: int = 3) -> list[str]:
    """The names closest to ``key`` (difflib, then case-insensitive prefixes)."""
    names = [str(v) for v in names]
    near = difflib.get_close_matches(key, names, n=n, cutoff=0.6)
    if not near:
        low = key.lower()
        near = [v for v in names if v.lower() == low or v.lower().startswith(low) or low.startswith(v.lower())][:n]
    return near


def _hint(key: str, names: Sequence[str]) -> str:
    near = closest_names(key, names)
    if not near:
        return ""
    return f" Did you mean {' or '.join(repr(v) for v in near)}?"


def _is_index(key: object) -> TypeGuard[int | np.integer[Any]]:
    return isinstance(key, (numbers.Integral, np.integer)) and not isinstance(key, (bool, np.bool_))


def feature_index(names: Sequence[Any], key: FeatureKey, *, error: type[Exception] = SchemaError,
                  what: str = "feature") -> int:
    """The column index of ``key``, a feature's name or its index in ``names``.

    Raises ``error`` for an unknown name (with the closest names), an index
    outside ``0..d-1``, or anything else (``what`` says which argument it was)."""
    names = [str(v) for v in names]
    d = len(names)
    if isinstance(key, str):
        try:
            return names.index(key)
        except ValueError:
            pass
        raise error(f"{what}: Unknown feature {key!r} (no feature has that name).{_hint(key, names)} The "
                    f"features are {names_text(names)}.")
    if _is_index(key):
        if not 0 <= int(key) < d:
            raise error(f"{what}: feature index {int(key)} is outside 0..{d - 1} (the model has {d} features). "
                        "Give a feature by its name or by an index in that range.")
        return int(key)
    raise error(f"{what}: {key!r} ({type(key).__name__}) is neither a feature name nor a column index. Give "
                f"names such as {names_text(names, 3)} or indices 0..{d - 1}.")


def feature_indices(names: Sequence[Any], keys: FeatureKey | Iterable[FeatureKey] | None, *, error: type[Exception] = SchemaError,
                    what: str = "features") -> list[int]:
    """The column indices of ``keys``: None (no feature), one name or index, or a
    sequence of them (a list, tuple, set, array, pandas Index); order kept, each once."""
    if keys is None:
        return []
    if isinstance(keys, str) or _is_index(keys):
        keys = [keys]
    elif isinstance(keys, Mapping) or not isinstance(keys, Iterable):
        raise error(f"{what}: expected feature names or indices (a list such as {names_text(list(names), 2)}), "
                    f"got {type(keys).__name__} {_short(keys)}.")
    out: list[int] = []
    for k in keys:
        j = feature_index(names, k.item() if isinstance(k, np.generic) else k, error=error, what=what)
        if j not in out:
            out.append(j)
    return out


def _count(d: int) -> str:
    return f"{d} feature" if d == 1 else f"{d} features"


def _short(v: Any, limit: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _type_text(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape}"
    return f"{type(v).__name__} {_short(v)}"


def _floats(values: Any, names: Sequence[str], error: type[Exception], what: str) -> np.ndarray:
    """``values`` (a 2-D array-like) as floats, or ``error`` naming the first cell that is no number."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    if isinstance(values, list) and values and isinstance(values[0], Mapping):
        raise error(f"{what} is a list of dicts; pass pd.DataFrame(rows) (each dict a row keyed by feature "
                    f"name) or an array of shape (n_rows, {len(names)}).")
    try:
        arr = np.asarray(values, dtype=object)
    except ValueError:                          # ragged nested sequences
        arr = np.empty(0, dtype=object)
    if arr.ndim != 2:
        raise error(f"{what} must hold numbers in a table of (rows, {len(names)} features); got "
                    f"{_type_text(values)}.")
    _check_cells(arr, names, error, what)
    raise error(f"{what} must hold numbers; got {_type_text(values)}.")


def _check_cells(arr: np.ndarray, names: Sequence[str], error: type[Exception], what: str) -> None:
    """``error`` naming the first cell of the 2-D object array ``arr`` that is no number."""
    for i, row in enumerate(arr):
        for j, v in enumerate(row):
            try:
                float(v)
            except (TypeError, ValueError):
                col = names[j] if j < len(names) else str(j)
                raise error(f"{what} must hold numbers; row {i}, feature {col!r} holds {_short(v)} "
                            f"({type(v).__name__}). Encode text and categories as numbers (the model's "
                            "codes) first.") from None


def _repeated(labels: list[str]) -> list[str]:
    """The labels given more than once, sorted."""
    if len(set(labels)) == len(labels):
        return []
    return sorted({c for c in labels if labels.count(c) > 1})


def _frame_columns(frame: pd.DataFrame, names: list[str], error: type[Exception], what: str) -> pd.DataFrame:
    """The frame's columns in model order: by name, or by position when that is safe."""
    cols = [str(c) for c in frame.columns]
    dup = _repeated(cols)
    if dup:
        raise error(f"{what} has duplicate columns {names_text(dup)}; give each feature once.")
    if all(n in cols for n in names):
        return frame.iloc[:, [cols.index(n) for n in names]]
    if len(cols) == len(names) and (_positions(cols) or placeholder_names(names)):
        return frame                                      # by position: the labels name no feature
    raise error(_unnamed(cols, names, what, "columns"))


def _unnamed(labels: list[str], names: list[str], what: str, kind: str) -> str:
    """The message for labels (a frame's ``columns``, a Series' ``index``) that do not
    name the model's features (module doc)."""
    missing = [n for n in names if n not in labels]
    hint = "".join(_hint(m, [c for c in labels if c not in names]) for m in missing[:1])
    has, fix, array = ((f"has columns {names_text(labels)}", "Rename or add those columns", "an array")
                       if kind == "columns" else
                       (f"is a Series indexed {names_text(labels)}", "Index it by the features' names",
                        "its values (x.to_numpy())"))
    return (f"{what} lacks the model's features {names_text(missing, 6)}.{hint} The model reads "
            f"{_count(len(names))} {names_text(names)}; {what} {has}. {fix}, or give {array} in the model's "
            "feature order to read them by position.")


def as_table(X: Rows, names: Sequence[Any], *, error: type[Exception] = SchemaError, what: str = "X",
             value_error: type[Exception] | None = None, missing: bool = False, infinite: bool = False,
             one_row: bool = False, min_rows: int = 1) -> np.ndarray:
    """``X`` as a float array of shape (n, d) in the order of ``names``.

    ``error`` is raised for a table that does not fit (type, shape, columns),
    ``value_error`` (default: ``error``) for values that are no numbers, or
    missing or infinite where they are refused. ``missing``: NaN passes (the
    caller reads it); ``infinite``: so do infinite values; ``one_row``: a 1-D
    sequence of d numbers is one row; ``min_rows``: fewer rows raise ``error``."""
    value_error = value_error or error
    names = [str(v) for v in names]
    _check_is_table(X, len(names), error, what)
    if isinstance(X, pd.Series):
        X = X.to_frame().T if one_row else X
    if isinstance(X, pd.DataFrame):
        A = _frame_floats(_frame_columns(X, names, error, what), names, value_error, what)
    elif isinstance(X, np.ndarray) and X.dtype.kind in "biuf":
        A = np.asarray(X, dtype=np.float64)
    else:
        A = _floats(X, names, value_error, what)
    if A.ndim == 1 and one_row:
        A = A[None, :]
    _check_table_shape(A, names, error, what, min_rows)
    _check_values(A, names, value_error, what, missing, infinite)
    return A


def _check_is_table(X: object, d: int, error: type[Exception], what: str) -> None:
    """``X`` is something that holds rows (not text, a dict, a number or None)."""
    if X is None or isinstance(X, (str, bytes, Mapping, numbers.Number, np.generic)) or not hasattr(X, "__len__"):
        kind = "a dict" if isinstance(X, Mapping) else _type_text(X)
        hint = (" (a dict of columns: pass pd.DataFrame(X))" if isinstance(X, Mapping) else "")
        raise error(f"{what} must be a table of rows: a DataFrame with the model's feature columns or an "
                    f"array of shape (n_rows, {d}); got {kind}{hint}.")


def _frame_floats(frame: pd.DataFrame, names: list[str], error: type[Exception], what: str) -> np.ndarray:
    """A frame's columns (in model order) as floats; ``error`` naming the columns that are not numeric."""
    text = [c for c, dt in zip(names, frame.dtypes)
            if not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt))]
    if text:
        sample = frame.iloc[:, names.index(text[0])].dropna().head(1).tolist()
        example = f" (e.g. {_short(sample[0])})" if sample else ""
        raise error(f"{what}: columns {names_text(text, 6)} are not numeric{example}; encode text and "
                    "categories as numbers (the model's codes) first.")
    return frame.to_numpy(dtype=np.float64, na_value=np.nan)


def _check_table_shape(A: np.ndarray, names: list[str], error: type[Exception], what: str, min_rows: int) -> None:
    """``A`` is 2-D, one column per feature, with at least ``min_rows`` rows."""
    d = len(names)
    if A.ndim != 2:
        shape = "a single value" if A.ndim == 0 else f"{A.ndim}-D, shape {A.shape}"
        one = " (for one row, X[None, :])" if A.ndim == 1 else ""
        raise error(f"{what} must be a table of shape (n_rows, {d}); got {shape}{one}.")
    if A.shape[1] != d:
        raise error(f"{what} has {A.shape[1]} columns; the model expects {_count(d)} {names_text(names)}. Give "
                    "the rows with one value per feature, in that order.")
    if len(A) < min_rows:
        raise error(f"{what} has {len(A)} rows; at least {min_rows} {'is' if min_rows == 1 else 'are'} needed.")


def _check_values(A: np.ndarray, names: Sequence[str], error: type[Exception], what: str, missing: bool,
                  infinite: bool = False) -> None:
    bad = np.zeros(A.shape, dtype=bool) if infinite else np.isinf(A)
    if not missing:
        bad |= np.isnan(A)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        nan = np.isnan(A[i, j])
        where = f"row {i}, feature {names[j]!r}" if A.shape[0] > 1 else f"feature {names[j]!r}"
        if nan:
            rows = int(np.isnan(A).any(axis=1).sum())
            count = f" ({rows} rows have one)" if rows > 1 else ""
            raise error(f"{what} has a missing value (NaN) at {where}{count}. This call needs complete rows: "
                        "fill or drop them, or run the rows through an analysis that reads missing values "
                        "(a batch of counterfactuals, FCCA, the audit, or core.build_workspace).")
        raise error(f"{what} has an infinite value at {where}; give finite numbers.")


def as_row(x: Row, names: Sequence[Any], *, error: type[Exception] = SchemaError, what: str = "x",
           missing: bool = False) -> np.ndarray:
    """``x``, one row, as a float array of shape (d,) in the order of ``names``:
    a sequence of d numbers, a pandas Series (by name when its index holds
    every feature) or a one-row table."""
    names = [str(v) for v in names]
    d = len(names)
    if isinstance(x, pd.Series):
        x = _series_values(x, names, error, what)
    if x is None or isinstance(x, (str, bytes, Mapping)) or not hasattr(x, "__len__"):
        hint = " (a dict: pass pd.Series(x), whose index names the features)" if isinstance(x, Mapping) else ""
        raise error(f"{what} must be one row: {d} numbers in the model's feature order {names_text(names, 4)}, "
                    f"a pandas Series or a one-row DataFrame; got {_type_text(x)}{hint}.")
    A = _row_floats(x, names, error, what, missing)
    if A.ndim == 1:
        A = A[None, :]
    _check_row_shape(A, names, error, what)
    _check_values(A, names, error, what, missing)
    return A[0].copy()


def _series_values(x: pd.Series, names: list[str], error: type[Exception], what: str) -> np.ndarray:
    """A Series' values in model order: by name when its index holds every feature, else
    by position when its labels name no feature."""
    idx = [str(i) for i in x.index]
    if all(n in idx for n in names):
        x = x.iloc[[idx.index(n) for n in names]]
    elif len(idx) == len(names) and not (_positions(idx) or placeholder_names(names)):
        raise error(_unnamed(idx, names, what, "index"))
    return x.to_numpy()


def _row_floats(x: Any, names: list[str], error: type[Exception], what: str, missing: bool) -> np.ndarray:
    """One row as floats: a one-row table, a numeric array or a sequence of numbers."""
    if isinstance(x, pd.DataFrame):
        return as_table(x, names, error=error, what=what, missing=missing)
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        return x.astype(np.float64)
    try:
        flat = np.ndim(x) == 1
    except ValueError:                      # ragged nested sequences
        flat = False
    return _floats([list(x)] if flat and isinstance(x, Iterable) else x, names, error, what)


def _check_row_shape(A: np.ndarray, names: list[str], error: type[Exception], what: str) -> None:
    """``A`` is one row of one value per feature."""
    d = len(names)
    if A.ndim != 2 or A.shape[0] != 1:
        many = (f" {A.shape[0]} rows: one query at a time here (core.optimal.batch.batch_counterfactuals "
                "runs many)" if A.ndim == 2 else f" shape {A.shape}")
        raise error(f"{what} must be one row of {d} numbers; got{many}.")
    if A.shape[1] != d:
        raise error(f"{what} has {A.shape[1]} values; the model expects {_count(d)} {names_text(names)}: give one "
                    "finite number per feature, in that order.")


def fit_table(X: Rows, feature_names: Iterable[str] | None = None, *, error: type[Exception] = SchemaError, what: str = "X",
              min_rows: int = 1, missing: bool = False) -> tuple[np.ndarray, list[str]]:
    """The rows an estimator is fitted on, and its features' names: ``feature_names``
    when given (unique names, one per column), else a DataFrame's columns, else
    ``x0, x1, ...``. Complete rows only (NaN or infinite values raise ``error``),
    unless ``missing``: then NaN and infinite values pass (the estimator reads them)."""
    width = _table_width(X, error, what)
    if feature_names is None:
        names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else [f"x{j}" for j in range(width)]
    else:
        names = _given_names(X, feature_names, width, error, what)
    return as_table(X, names, error=error, what=what, min_rows=min_rows, missing=missing, infinite=missing), names


def _table_width(X: Rows, error: type[Exception], what: str) -> int:
    """The number of columns of the table ``X`` (``error`` when it is no 2-D table)."""
    if isinstance(X, pd.DataFrame):
        return int(X.shape[1])
    try:
        shape = np.shape(X)
    except ValueError:                      # ragged nested sequences
        shape = ()
    if X is None or isinstance(X, (str, bytes, Mapping)) or len(shape) != 2:
        raise error(f"{what} must be a table of rows: a DataFrame or an array of shape (n_rows, n_features); "
                    f"got {_type_text(X)}.")
    return int(shape[1])


def _given_names(X: Rows, feature_names: object, width: int, error: type[Exception], what: str) -> list[str]:
    """``feature_names`` checked: a list of distinct names, one per column of ``X`` (or
    each a column of its DataFrame)."""
    if isinstance(feature_names, (str, bytes, Mapping)) or not isinstance(feature_names, Iterable):
        raise error(f"feature_names is a list of names, one per column; got {type(feature_names).__name__}.")
    names = [str(n) for n in feature_names]
    dup = _repeated(names)
    if dup:
        raise error(f"feature_names repeats {names_text(dup, 5)}; give each column its own name.")
    by_name = isinstance(X, pd.DataFrame) and all(n in map(str, X.columns) for n in names)
    if width != len(names) and not by_name:
        raise error(f"feature_names has {len(names)} names for the {width} columns of {what}; give one "
                    "name per column.")
    return names


def reference_rows(X_ref: Rows, names: Sequence[Any], *, error: type[Exception] = SchemaError,
                   what: str = "X_ref") -> np.ndarray:
    """Reference rows (a query's ``X_ref``: the data the model was trained on, where the
    starts and the plausibility come from) as an (n, d) float array; NaN passes (the
    model may read it). A table without rows, or whose every value is missing, holds
    no reference and is refused: it would be taken silently as "no reference given"."""
    if isinstance(X_ref, np.ndarray) and X_ref.dtype == np.float64 and X_ref.ndim == 2 and X_ref.shape[1] == len(names):
        A = X_ref                                   # kept as is (the caller's cache is keyed on it)
        with np.errstate(over="ignore", invalid="ignore"):
            finite = bool(A.size) and bool(np.isfinite(A.sum()))
        if finite:                                  # every value finite (one pass, no mask): nothing to refuse
            return A
        _check_values(A, [str(n) for n in names], error, what, missing=True)
    else:
        A = as_table(X_ref, names, error=error, what=what, missing=True, min_rows=0)
    if len(A) == 0:
        raise error(f"{what} has no rows. Give the reference rows (e.g. the data the model was trained on), or "
                    f"leave {what} out (None).")
    if np.isnan(A).all():
        raise error(f"{what}: every value of its {len(A):,} rows is missing (NaN), so it holds no reference. Give "
                    f"rows with values, or leave {what} out (None).")
    return A


def feature_roles(names: Sequence[Any], *, error: type[Exception] = SchemaError,
                  **roles: FeatureKey | Iterable[FeatureKey] | None) -> dict[str, list[int] | None]:
    """Each of ``roles`` (``fixed``, ``increase_only``, ``decrease_only``: names or
    indices; None stays None) as column indices, by :func:`feature_indices`. A feature
    both increase-only and decrease-only may move neither way: that is ``fixed``, and
    saying it in two contradicting lists is refused rather than read one way."""
    out = {role: None if keys is None else feature_indices(names, keys, error=error, what=role)
           for role, keys in roles.items()}
    both = sorted(set(out.get("increase_only") or ()) & set(out.get("decrease_only") or ()))
    if both:
        shown = names_text([str(names[j]) for j in both], 6)
        raise error(f"{shown} {'is' if len(both) == 1 else 'are'} both in increase_only and in decrease_only; a "
                    "feature may only increase, or only decrease. One that may move neither way is fixed: list "
                    "it in fixed instead (and in neither of the two).")
    return out


# ------------------------------------------------------------------ the one shape of a model
#: how the missing code of a categorical feature reads
MISSING_LABEL = "(missing)"

_WORDS = {"tree_ensemble": "tree ensemble, read exactly", "linear": "linear model, read exactly",
          "black_box": "any other model, run in a sandbox; checked on it, analysed through a surrogate"}


class ModelShape:
    """The shape every kind of model shares (see the module docstring); each kind is a
    frozen dataclass that holds the description and answers, and inherits the rest."""

    if TYPE_CHECKING:
        feature_names: tuple[str, ...]
        categories: tuple[tuple[Any, ...] | None, ...]
        classes: np.ndarray | None
        task: str
        source: str

        @property
        def kind(self) -> ModelKind: ...

        @property
        def n_features(self) -> int: ...

        @property
        def has_proba(self) -> bool: ...

        def predict(self, X: Rows) -> np.ndarray: ...

        def predict_proba(self, X: Rows) -> np.ndarray: ...

        def content_hash(self) -> str: ...

    # -- what it is
    @property
    def exact(self) -> bool:
        """Is the model read exactly (a tree ensemble, a linear model), so that an answer may
        be proven on it? False for a model known by its answers, whose answers are checked."""
        return self.kind != "black_box"

    @property
    def strongest_guarantee(self) -> GuaranteeKind:
        """The strongest guarantee an optimal counterfactual on it can carry
        (:class:`core.model.guarantee.Guarantee`): proven optimal on a model read exactly,
        valid on the model (checked on it, found through its surrogate) otherwise."""
        return "proven_optimal" if self.exact else "valid_on_model"

    def kind_words(self) -> str:
        """What kind of model it is and how it is read, in a few words."""
        return _WORDS[self.kind]

    # -- its classes
    @property
    def is_classifier(self) -> bool:
        return self.task == "classification"

    @property
    def n_classes(self) -> int:
        return 0 if self.classes is None else int(len(self.classes))

    def _classifier_only(self, what: str) -> None:
        """Refuse ``what`` (e.g. "predict_proba") on a model that is not a classifier."""
        if not self.is_classifier:
            raise UnsupportedModelError(f"{what} needs a classifier; this model is a {self.task} model: use predict.")

    # -- its categorical features
    @property
    def categorical_features(self) -> list[int]:
        """Indices of the categorical features."""
        return [j for j, c in enumerate(self.categories) if c is not None]

    def is_categorical(self, j: int) -> bool:
        return self.categories[j] is not None

    def _levels(self, j: int, what: str) -> tuple[Any, ...]:
        c = self.categories[j]
        if c is None:
            raise SchemaError(f"Feature {self.feature_names[j]!r} is numerical, not categorical: it has no {what}.")
        return c

    def n_codes(self, j: int) -> int:
        """Number of codes of categorical feature ``j``: its categories plus the missing code."""
        return len(self._levels(j, "codes")) + 1

    def missing_code(self, j: int) -> int:
        """The code standing for a missing or unseen value of categorical feature ``j``."""
        return len(self._levels(j, "codes"))

    def category_label(self, j: int, code: float) -> str:
        """The category a code of feature ``j`` stands for, as text (:data:`MISSING_LABEL`
        for the missing code)."""
        c = self._levels(j, "labels")
        k = int(code)
        return MISSING_LABEL if k == len(c) else str(c[k])


def kind_of(model: object, default: ModelKind = "black_box") -> ModelKind:
    """The kind of ``model`` (:attr:`ModelShape.kind`) when it is a model of core.model;
    ``default`` for anything else (a fitted object of another library, known by its answers
    until it is read)."""
    return model.kind if isinstance(model, ModelShape) else default


def check_model_shape(model: object, X: Rows) -> None:
    """Check that ``model`` has the one shape (see the module docstring) and answers the
    codes-view rows ``X`` (n, n_features) as it says; a :class:`~core.errors.ModelError`
    lists every way it does not."""
    from core.model.guarantee import MODEL_KINDS

    if not isinstance(model, ModelShape):
        raise ModelError(f"{type(model).__name__} is not a model of core.model (a ModelShape).")
    problems: list[str] = []

    def need(ok: object, what: str) -> None:
        if not ok:
            problems.append(what)

    d = len(model.feature_names)
    need(model.kind in MODEL_KINDS, f"kind {model.kind!r} is none of {MODEL_KINDS}")
    need(model.exact == (model.kind != "black_box"), "exact does not follow its kind")
    need(model.n_features == d == len(model.categories), "n_features, feature_names and categories disagree")
    need(len(set(model.feature_names)) == d and all(isinstance(n, str) for n in model.feature_names),
         "feature names are not distinct strings")
    need((model.classes is not None) == model.is_classifier, "classes are given if and only if it is a classifier")
    need(model.n_classes == (0 if model.classes is None else len(model.classes)), "n_classes is not len(classes)")
    need(isinstance(model.content_hash(), str) and model.content_hash(), "content_hash is not a text")
    problems += _code_problems(model)
    problems += _answer_problems(model, np.asarray(X, dtype=float))
    if problems:
        raise ModelError(f"{type(model).__name__} does not have the one model shape: " + "; ".join(problems) + ".")


def _code_problems(model: ModelShape) -> list[str]:
    out = []
    for j, c in enumerate(model.categories):
        if c is None:
            out += _numerical_code_problems(model, j)
            continue
        if (model.n_codes(j), model.missing_code(j)) != (len(c) + 1, len(c)):
            out.append(f"categorical feature {j} does not have {len(c)} codes and a missing one")
        if [model.category_label(j, k) for k in range(len(c) + 1)] != [*map(str, c), MISSING_LABEL]:
            out.append(f"categorical feature {j}'s labels are not its categories")
    if model.categorical_features != [j for j, c in enumerate(model.categories) if c is not None]:
        out.append("categorical_features are not the features with categories")
    return out


def _numerical_code_problems(model: ModelShape, j: int) -> list[str]:
    """One problem for each call about codes that numerical feature ``j`` answers instead of refusing."""
    out = []
    for call in (model.n_codes, model.missing_code, lambda j: model.category_label(j, 0)):
        try:
            call(j)
            out.append(f"numerical feature {j} has codes")
        except SchemaError:
            pass
    return out


def _answer_problems(model: ModelShape, X: np.ndarray) -> list[str]:
    y = np.asarray(model.predict(X))
    if y.shape != (len(X),):
        return [f"predict answered shape {y.shape} for {len(X)} rows"]
    if not model.is_classifier:
        try:
            model.predict_proba(X)
            return ["a model that is not a classifier gave class probabilities"]
        except UnsupportedModelError:
            return []
    assert model.classes is not None, "a classifier has classes (checked above)"
    out = []
    if not set(map(str, y.tolist())) <= set(map(str, model.classes.tolist())):
        out.append("predict answered a label that is not one of its classes")
    return out + _proba_problems(model, X, y)


def _proba_problems(model: ModelShape, X: np.ndarray, y: np.ndarray) -> list[str]:
    """How a classifier's probabilities disagree with its shape or with its labels ``y``."""
    assert model.classes is not None, "a classifier has classes (checked by the caller)"
    try:
        p = np.asarray(model.predict_proba(X), dtype=float)
    except ValueError:                  # a classifier without probabilities may refuse them
        return [] if not model.has_proba else ["predict_proba refused a classifier with probabilities"]
    if p.shape != (len(X), model.n_classes) or not np.isfinite(p).all():
        return [f"predict_proba answered shape {p.shape}, or numbers that are not finite"]
    if not model.has_proba:
        return []
    if not np.allclose(p.sum(axis=1), 1.0):
        return ["its probabilities do not sum to 1"]
    if model.n_classes > 2 and not _labels_are_argmax(model.classes, p, y):
        return ["its label is not the class of largest probability"]
    return []


def _labels_are_argmax(classes: np.ndarray, p: np.ndarray, y: np.ndarray) -> bool:
    """Is every label ``y`` the class of largest probability in ``p``."""
    return bool((classes[p.argmax(axis=1)].astype(str) == y.astype(str)).all())


def model_outputs(y_model: object, n: int) -> np.ndarray:
    """The model's outputs ``y_model`` on the n rows an estimator is fitted on, one each
    (T-CREx, the counterfactual rules), as an array; a clear error for anything else."""
    if y_model is None or isinstance(y_model, (str, bytes, dict)):
        raise DataError(f"y_model is the model's outputs on X's rows (an array of {n} values, e.g. "
                        f"model.predict(X)); got {type(y_model).__name__}.")
    y = np.asarray(y_model)
    if y.ndim != 1 or len(y) != n:
        raise DataError(f"y_model has shape {y.shape}; X has {n} rows: give the model's output for each row.")
    return y
