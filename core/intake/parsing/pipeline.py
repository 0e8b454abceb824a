"""scikit-learn Pipelines (encoders, scalers, imputers, a tree ensemble or a linear
model last), expressed as one TreeEnsemble or one LinearModel on the pipeline's raw
input columns.

Every accepted preprocessing step is an exact map of one raw column at a time
(``ColumnTransformer``, ``OneHotEncoder``, ``OrdinalEncoder``, the four
scalers, ``SimpleImputer``, an identity ``FunctionTransformer``,
``"passthrough"``/``"drop"`` and nested pipelines of these); anything else is
refused, naming the step. The final estimator is parsed as usual; then each of
its splits ``z_k <= t`` on a transformed column ``z_k`` is rewritten on the raw
column ``r`` that ``z_k`` comes from, using the fitted preprocessing itself
(never a re-implementation of it):

* ``r`` numerical: ``z_k = f(r)`` is monotone (a composition of
  ``(x - c) / s`` and ``x * s + m``, possibly clipped); the raw threshold is the
  largest float64 ``x`` with ``f(x) <= t``, found by bisection on the ordered
  float64 values (so boundary values route exactly as in the pipeline); for a
  decreasing ``f`` (a negative scale) the children are swapped and the
  threshold is the largest ``x`` with ``f(x) > t``;
* ``r`` categorical (it enters a ``OneHotEncoder`` or ``OrdinalEncoder``): a
  native categorical feature whose categories are the encoder's; the split
  becomes ``r in S`` with ``S`` the categories whose transformed value is
  ``<= t``, each category (and the missing/unseen value) transformed by the
  pipeline's own steps, so ``drop``, infrequent categories, ``handle_unknown``,
  unknown/missing encodings and an imputer before the encoder are honoured;
* a native categorical split of the final estimator (a HistGradientBoosting
  model with ``categorical_features`` on an encoder's columns) on a column
  from raw column ``r``: each category of ``r`` (and the missing/unseen value)
  is transformed by the pipeline, its value looked up among the final
  estimator's own categories (none: its missing code), and goes where that
  code goes. A native categorical feature fed by a numerical raw column is
  refused.

Missing values in a column with an imputer become its fill value
(``meta["impute"]``, read by :func:`core.intake.workspace.build_workspace`); the
missing code of such a categorical column then stands for an unseen category.
Columns the pipeline drops are still required in its input; they are handed
to it as empty columns (``meta["extra_columns"]``). The model's own input is
the raw DataFrame (``meta["input"] = "frame-object"``).

A linear model last (:func:`parse_linear_pipeline`): its score is
``intercept + coef @ z`` on the transformed columns ``z``, and every accepted step
maps one raw column at a time, so the score is a sum over raw columns:

* a numerical raw column ``r``: each transformed column it makes is affine in
  ``r`` (``z_k = a_k + b_k r``, scalers and identities); ``a_k`` and ``b_k`` are
  read off the fitted preprocessing itself and checked to be affine on points
  around the column's centre and far from it (a clipping ``MinMaxScaler`` or any
  other map that is not is refused, naming the column); the raw coefficient is
  ``sum_k coef_k b_k`` and ``sum_k coef_k a_k`` goes to the intercept. An imputer
  before it fills a missing value with its statistic, which the model does too
  (``meta["impute"]``: exact, since the fill value then goes through the same
  affine map);
* a categorical raw column (it enters a ``OneHotEncoder`` or ``OrdinalEncoder``):
  a categorical feature whose score table holds, per category (and for the
  missing/unseen value), ``coef @ z`` of the columns it makes, each category
  transformed by the pipeline's own steps, so ``drop="first"`` / ``"if_binary"``,
  infrequent categories, ``handle_unknown`` and an imputer before the encoder are
  exact; a value the pipeline refuses (``handle_unknown="error"``) has a row of
  NaN and is refused;
* a constant transformed column adds ``coef_k z_k`` to the intercept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from core.errors import UnsupportedModelError
from core.intake.parsing.common import build_tree, resolve_redirects
from core.intake.parsing.linear import linear_arrays
from core.jsonable import plain
from core.model.ensemble import TreeEnsemble
from core.model.linear import LinearModel
from core.model.tree import MISSING_ONLY
from core.typing import ModelLike

__all__ = ["parse_pipeline", "parse_linear_pipeline", "SUPPORTED_STEPS"]

SUPPORTED_STEPS = ("ColumnTransformer", "Pipeline", "OneHotEncoder", "OrdinalEncoder", "StandardScaler",
                   "MinMaxScaler", "RobustScaler", "MaxAbsScaler", "SimpleImputer",
                   "FunctionTransformer (identity)", "'passthrough'", "'drop'")
UNSEEN = "__atlas_unseen__"   # a category no encoder knows (see core.model.native.model_input)
_SCALERS = ("StandardScaler", "MinMaxScaler", "RobustScaler", "MaxAbsScaler")
_ENCODERS = ("OneHotEncoder", "OrdinalEncoder")


@dataclass
class _Walk:
    """What the structural walk learns about the raw columns."""

    encoded: dict[str, Any] = field(default_factory=dict)      # raw column -> (encoder, its input index)
    fill: dict[str, Any] = field(default_factory=dict)         # raw column -> imputer fill value


def _refuse(path: str, step: Any) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"The pipeline step '{path}' ({type(step).__name__}) is not supported: every step must be an exact "
        f"map of single columns. Supported: {', '.join(SUPPORTED_STEPS)}, with a tree ensemble or a linear model "
        "last.")


def _walk(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    """Check ``step`` (applied to raw columns ``cols``, in order) and record encoders and imputers."""
    if isinstance(step, str):
        if step in ("passthrough", "drop"):
            return
        raise _refuse(path, step)
    if step is None:
        return
    handler = _STEP_WALKS.get(type(step).__name__)
    if handler is None:
        raise _refuse(path, step)
    handler(step, cols, path, w)


def _walk_pipeline(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    for sub_name, sub in step.steps:
        _walk(sub, cols, f"{path} > {sub_name}" if path else sub_name, w)
        if type(sub).__name__ in _ENCODERS:   # after an encoder the columns are no longer raw
            cols = []


def _walk_columns(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    """A ColumnTransformer: each transformer on the raw columns it selects."""
    for sub_name, sub, sel in step.transformers_:
        picked = _select(step, sel)
        _walk(sub, [c for c in picked if c in cols] if cols else [], f"{path} > {sub_name}" if path else sub_name,
              w)


def _walk_encoder(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    if not cols:
        raise UnsupportedModelError(f"The pipeline step '{path}' encodes columns that an earlier step already "
                                    "transformed; encoders must read raw columns.")
    for i, c in enumerate(cols):
        w.encoded[c] = (step, i)


def _walk_imputer(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    if getattr(step, "add_indicator", False):
        raise UnsupportedModelError(f"The pipeline step '{path}' adds missing-value indicator columns, "
                                    "which are not supported; use add_indicator=False.")
    for i, c in enumerate(cols):
        w.fill[c] = step.statistics_[i]


def _walk_scaler(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    """A scaler: an exact map of each column; nothing to record."""


def _walk_function(step: Any, cols: list[str], path: str, w: _Walk) -> None:
    """A FunctionTransformer: accepted only as the identity."""
    if step.func is None and step.inverse_func is None:
        return
    raise _refuse(path, step)


#: each supported step's class name -> its check
_STEP_WALKS: dict[str, Callable[[Any, list[str], str, _Walk], None]] = {
    "Pipeline": _walk_pipeline, "ColumnTransformer": _walk_columns,
    **dict.fromkeys(_ENCODERS, _walk_encoder), "SimpleImputer": _walk_imputer,
    **dict.fromkeys(_SCALERS, _walk_scaler), "FunctionTransformer": _walk_function}


def _select(ct: Any, sel: Any) -> list[str]:
    names = [str(c) for c in ct.feature_names_in_] if hasattr(ct, "feature_names_in_") else None
    out = []
    for it in _selection_items(sel):
        if isinstance(it, (int, np.integer)):
            if names is None:
                raise UnsupportedModelError("The pipeline's ColumnTransformer was fitted on an array without "
                                            "column names; fit the pipeline on a DataFrame.")
            out.append(names[int(it)])
        else:
            out.append(str(it))
    return out


def _selection_items(sel: Any) -> list[Any]:
    """A ColumnTransformer's column selection as a list of names or positions (a mask turned into positions)."""
    items = [sel] if isinstance(sel, (str, int, np.integer)) else list(np.asarray(sel).ravel())
    if items and isinstance(items[0], (bool, np.bool_)):
        items = [i for i, b in enumerate(items) if b]
    return items


def _base_frame(raw_cols: list[str], cats: dict[str, tuple[Any, ...]], n: int) -> pd.DataFrame:
    data = {}
    for c in raw_cols:
        data[c] = np.full(n, cats[c][0], dtype=object) if c in cats else np.zeros(n)
    return pd.DataFrame(data, columns=raw_cols)


def _takes_nan(pipe: ModelLike, raw_cols: list[str], cats: dict[str, tuple[Any, ...]], fill: dict[str, Any]) -> bool:
    """Whether the pipeline predicts a row whose numerical columns (without an
    imputer) are missing: a final estimator that routes NaN may still refuse it
    (scikit-learn's trees refuse NaN in a sparse matrix, e.g. after a sparse
    OneHotEncoder)."""
    frame = _base_frame(raw_cols, cats, 1)
    gaps = [c for c in raw_cols if c not in cats and c not in fill]
    if not gaps:
        return True
    frame[gaps] = np.nan
    try:
        pipe.predict(frame)
    except (ValueError, TypeError):
        return False
    return True


def _transform(pre: Any, frame: pd.DataFrame) -> np.ndarray:
    out = pre.transform(frame)
    if hasattr(out, "toarray"):
        out = out.toarray()
    return np.asarray(out, dtype=np.float64)


def _ordered(x: np.ndarray) -> np.ndarray:
    b = x.view(np.int64)
    return np.where(b >= 0, b, np.int64(-2**63) - b)


def _unordered(k: np.ndarray) -> np.ndarray:
    b = np.where(k >= 0, k, np.int64(-2**63) - k)
    return b.astype(np.int64).view(np.float64)


def _largest_at_most(f: Any, t: np.ndarray, increasing: np.ndarray | bool) -> np.ndarray:
    """Per threshold, the largest x with ``f(x) <= t`` (increasing f) or ``f(x) > t``
    (decreasing f), by bisection over ordered float64; ±inf when none/all. ``f`` maps
    one x per threshold (all thresholds bisect together: one call per step);
    ``increasing`` is one flag, or one per threshold."""
    big = np.finfo(np.float64).max
    lo = np.full(t.shape, _ordered(np.array([-big]))[0])
    hi = np.full(t.shape, _ordered(np.array([big]))[0])
    def ok(v: np.ndarray, tt: np.ndarray) -> np.ndarray:
        return np.where(increasing, v <= tt, v > tt)
    at_lo, at_hi = ok(f(np.full(t.shape, -big)), t), ok(f(np.full(t.shape, big)), t)
    lo, hi = _near_guess(f, t, ok, lo, hi)
    for _ in range(66):                         # invariant: ok(lo), not ok(hi)
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)      # no int64 overflow
        good = ok(f(_unordered(mid)), t)
        lo, hi = np.where(good, mid, lo), np.where(good, hi, mid)
        if np.all((hi - 1 <= lo)):
            break
    x = _unordered(lo)
    x = np.where(at_hi, np.inf, x)
    return np.where(~at_lo, -np.inf, x)


#: ordered float steps on either side of the affine guess (:func:`_near_guess`), many times its rounding
NEAR_STEPS = 64


def _near_guess(f: Any, t: np.ndarray, ok: Callable[[np.ndarray, np.ndarray], np.ndarray], lo: np.ndarray,
                hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per threshold, a bracket of ``2 * NEAR_STEPS`` ordered floats around the affine map's inverse
    at ``t``, where it holds; else the whole line ``(lo, hi)``. A numerical column's map is affine,
    possibly clipped (module doc): ``f(0)`` and ``f(1)`` give it, and its inverse lands within a few
    float steps of the threshold. Each bracket is checked (``ok`` at its low end, not at its high
    end) before it is used, so a map that is not affine there (clipped, or 0 outside its domain)
    keeps the whole line; ``f`` is monotone, so the bisection in a checked bracket ends where the
    whole line's would, in about 7 transforms instead of 64."""
    with np.errstate(all="ignore"):
        f0, f1 = f(np.zeros(t.shape)), f(np.ones(t.shape))
        guess = (t - f0) / (f1 - f0)
    usable = np.isfinite(guess) & (np.abs(guess) < np.finfo(np.float64).max / 2)
    at = _ordered(np.where(usable, guess, 0.0))
    a, b = np.clip(at - NEAR_STEPS, lo, hi), np.clip(at + NEAR_STEPS, lo, hi)
    with np.errstate(all="ignore"):
        good = usable & ok(f(_unordered(a)), t) & ~ok(f(_unordered(b)), t)
    return np.where(good, a, lo), np.where(good, b, hi)


def parse_pipeline(pipe: ModelLike, *, parse_final: Callable[[Any], TreeEnsemble]) -> TreeEnsemble:
    """The pipeline as one TreeEnsemble on its raw columns; its final estimator
    is parsed by ``parse_final`` (the dispatcher :func:`core.intake.parsing.parse`,
    which hands itself over)."""
    last_name, est, pre, raw_cols, w = _steps(pipe)
    inner = parse_final(est)
    cats = _encoder_categories(w)
    owner, per_code, no_missing = _owners(pre, raw_cols, cats, w.fill, inner.n_features)
    _check_category_owners(inner, owner, cats, last_name)
    features, dropped = _raw_features(raw_cols, cats, owner)
    n_codes = max((len(v) + 1 for v in cats.values()), default=None)
    raw = _RawMap(pre, raw_cols, cats, owner, per_code, index={c: j for j, c in enumerate(features)},
                  bounds=_raw_thresholds(pre, raw_cols, cats, owner, inner), inner_cats=inner.categories,
                  fill=dict(w.fill))
    nan = inner.routes_missing and _takes_nan(pipe, raw_cols, cats, w.fill)
    trees = [build_tree(resolve_redirects(_rewrite(tree, raw)), inner.n_outputs, n_codes,
                        routes_missing=nan) for tree in inner.trees]
    meta = _pipeline_meta(pipe, {}, dropped, no_missing, {c: plain(v) for c, v in w.fill.items()})
    return TreeEnsemble(tuple(trees), n_features=len(features), feature_names=tuple(features), task=inner.task,
                        aggregation=inner.aggregation, link=inner.link, base_score=inner.base_score,
                        classes=inner.classes, sigmoid_scale=inner.sigmoid_scale,
                        positive_at_tie=inner.positive_at_tie, source=f"sklearn.Pipeline[{inner.source}]",
                        meta=meta, categories=tuple(cats.get(c) for c in features))


def _steps(pipe: ModelLike) -> tuple[str, Any, Any, list[str], _Walk]:
    """The final step's name and estimator, the preprocessing before it, the raw columns, and
    what the walk of the preprocessing learnt (every step checked)."""
    if not hasattr(pipe, "steps") or not pipe.steps:
        raise UnsupportedModelError("The pipeline has no steps.")
    last_name, est = pipe.steps[-1]
    pre = pipe[:-1]
    if not hasattr(pipe, "feature_names_in_"):
        raise UnsupportedModelError("The pipeline was fitted on an array without column names; fit it on a "
                                    "DataFrame so that its columns can be matched to the data by name.")
    raw_cols = [str(c) for c in pipe.feature_names_in_]
    w = _Walk()
    _walk(pre, raw_cols, "", w)
    return last_name, est, pre, raw_cols, w


def _raw_features(raw_cols: list[str], cats: dict[str, tuple[Any, ...]],
                  owner: list[str | None]) -> tuple[list[str], list[str]]:
    """The raw columns the model depends on (its features, in the pipeline's order), and the others."""
    features = [c for c in raw_cols if c in cats or c in owner]
    return features, [c for c in raw_cols if c not in features]


def _check_category_owners(inner: TreeEnsemble, owner: list[str | None], cats: dict[str, tuple[Any, ...]],
                           last_name: str) -> None:
    """The final estimator's categorical features each come from an encoder (or a constant column)."""
    for k in inner.categorical_features:
        if owner[k] is not None and owner[k] not in cats:
            raise UnsupportedModelError(
                f"The pipeline's final step '{last_name}' splits by category on a column that comes from the "
                f"numerical column {owner[k]!r}; only columns an encoder of the pipeline makes can be its "
                "categorical features.")


def _pipeline_meta(pipe: ModelLike, extra: dict[str, Any], dropped: list[str], no_missing: list[str],
                   fills: dict[str, Any]) -> dict[str, Any]:
    """The model's meta: its raw frame input, the steps, ``extra``, and the dropped, never-missing and
    imputed columns where there are any."""
    meta: dict[str, Any] = {"input": "frame-object", "pipeline": [n for n, _ in pipe.steps], **extra}
    if dropped:
        meta["extra_columns"] = dropped
    if no_missing:
        meta["no_missing"] = no_missing
    if fills:
        meta["impute"] = fills
    return meta


@dataclass
class _RawMap:
    """How the final estimator's transformed columns map back to the raw columns."""

    pre: Any                                    # the preprocessing: the pipeline without its last step
    raw_cols: list[str]
    cats: dict[str, tuple[Any, ...]]                      # categorical raw column -> its categories
    owner: list[str | None]                     # transformed column -> the raw column it depends on
    per_code: dict[str, np.ndarray]             # categorical raw column -> transformed rows, one per code
    index: dict[str, int]                       # raw column -> its feature index in the ensemble
    bounds: dict[tuple[int, float], tuple[float, bool]]   # (column, threshold) -> raw bound, increasing
    inner_cats: tuple[Any, ...]                           # the final estimator's own categories per column (or None)
    fill: dict[str, Any] = field(default_factory=dict)     # raw column -> its imputer's fill value


def _encoder_categories(w: _Walk) -> dict[str, tuple[Any, ...]]:
    """Each encoded raw column's categories, as the encoder knows them (no missing value)."""
    cats: dict[str, tuple[Any, ...]] = {}
    for c, (enc, i) in w.encoded.items():
        values = [v for v in enc.categories_[i] if not (isinstance(v, float) and np.isnan(v)) and v is not None]
        cats[c] = tuple(plain(v) for v in values)
        if not cats[c]:
            raise UnsupportedModelError(f"The encoder of column {c!r} has no categories.")
    return cats


def _owners(pre: Any, raw_cols: list[str], cats: dict[str, tuple[Any, ...]], fill: dict[str, Any],
            n_out: int) -> tuple[list[str | None], dict[str, np.ndarray], list[str]]:
    """Per transformed column, the raw column it depends on (None: a constant
    column); per categorical raw column, the transformed rows of its codes; and
    the categorical columns whose missing value the pipeline refuses."""
    no_missing: list[str] = []
    owner: list[str | None] = [None] * n_out
    per_code: dict[str, np.ndarray] = {}
    for c in raw_cols:
        if c in cats:
            frame = _base_frame(raw_cols, cats, len(cats[c]) + 1)
            # the last code: a missing value, or, when an imputer fills missing values in (they then
            # read as the fill category), a category the pipeline never saw
            frame[c] = list(cats[c]) + [UNSEEN if c in fill else np.nan]
            try:
                Z = _transform(pre, frame)
            except ValueError:                   # handle_unknown="error": the pipeline refuses missing values
                Z = np.vstack([_transform(pre, frame.iloc[:-1]), np.full((1, n_out), np.nan)])
                no_missing.append(c)
            per_code[c] = Z
            varies = np.flatnonzero(np.nanmax(Z, axis=0) > np.nanmin(Z, axis=0))
        else:
            frame = _base_frame(raw_cols, cats, 4)
            frame[c] = [-1e6, -1.0, 1.0, 1e6]
            varies = np.flatnonzero(np.ptp(_transform(pre, frame), axis=0) > 0)
        for k in varies:
            if owner[k] is not None:
                raise UnsupportedModelError(f"A transformed column depends on both {owner[k]!r} and {c!r}; only "
                                            "column-by-column preprocessing is supported.")
            owner[k] = c
    return owner, per_code, no_missing


def _numeric_maps(pre: Any, raw_cols: list[str], cats: dict[str, tuple[Any, ...]], cols: list[str],
                  ks: list[int]) -> Any:
    """Transformed columns ``ks[i]`` as functions of numerical raw columns ``cols[i]``, all
    in one transform: ``g(x, which)`` gives, for each row r, column ``ks[which[r]]`` of a base
    row whose column ``cols[which[r]]`` holds ``x[r]``. Every transformed column depends on
    one raw column (:func:`_owners`), so a row's other columns do not change its value."""
    col_of = np.asarray(cols, dtype=object)
    k_of = np.asarray(ks, dtype=np.int64)

    def g(x: np.ndarray, which: np.ndarray) -> np.ndarray:
        frame = _base_frame(raw_cols, cats, len(x))
        for c in dict.fromkeys(cols):
            v = np.zeros(len(x))
            mine = col_of[which] == c
            v[mine] = x[mine]
            frame[c] = v
        with np.errstate(all="ignore"):
            return _transform(pre, frame)[np.arange(len(x)), k_of[which]]
    return g


def _raw_thresholds(pre: Any, raw_cols: list[str], cats: dict[str, tuple[Any, ...]], owner: list[str | None],
                    inner: TreeEnsemble) -> dict[tuple[int, float], tuple[float, bool]]:
    """Raw thresholds for every (transformed column, threshold) used by the trees
    on a numerical raw column, and whether the column's map is increasing. Every
    column's thresholds are bisected together, one pipeline transform per step
    (a transform costs about the same for one row as for a thousand)."""
    ks: list[int] = []
    cols: list[str] = []
    tss: list[np.ndarray] = []
    for k in range(inner.n_features):
        ts = np.unique(np.concatenate([t.threshold[(t.feature == k) & ~np.isnan(t.threshold)]
                                       for t in inner.trees]))
        col = owner[k]
        if ts.size == 0 or col is None or col in cats:
            continue
        ks.append(k)
        cols.append(col)
        tss.append(ts)
    if not ks:
        return {}
    g = _numeric_maps(pre, raw_cols, cats, cols, ks)
    each = np.arange(len(ks))
    with np.errstate(all="ignore"):
        increasing = g(np.full(len(ks), 1e6), each) >= g(np.full(len(ks), -1e6), each)
    which = np.repeat(each, [ts.size for ts in tss])
    xs = _largest_at_most(lambda x: g(x, which), np.concatenate(tss), increasing[which])
    bounds: dict[tuple[int, float], tuple[float, bool]] = {}
    for i, t, x in zip(which.tolist(), np.concatenate(tss).tolist(), xs.tolist()):
        bounds[(ks[i], float(t))] = (float(x), bool(increasing[i]))
    return bounds


def _rewrite(tree: Any, raw: _RawMap) -> list[dict[str, Any]]:
    """A tree of the final estimator as node dicts on the raw columns (with
    redirects where every row goes the same way, see
    :func:`core.intake.parsing.common.resolve_redirects`)."""
    nodes: list[dict[str, Any]] = []
    for i in range(tree.n_nodes):
        left, right = int(tree.children_left[i]), int(tree.children_right[i])
        if left < 0:
            nodes.append({"value": tree.value[i]})
            continue
        k, t = int(tree.feature[i]), float(tree.threshold[i])
        c = raw.owner[k]
        if raw.inner_cats[k] is not None:    # a native categorical split of the final estimator
            nodes.append(_category_split(tree, i, raw, k, c))
            continue
        if c is None:                        # a constant column: every row goes the same way
            goes_left = bool(_transform(raw.pre, _base_frame(raw.raw_cols, raw.cats, 1))[0, k] <= t)
            nodes.append(_always(left if goes_left else right))
        elif c in raw.cats:
            go = raw.per_code[c][:, k] <= t          # the last code: missing or unseen
            nodes.append({"feature": raw.index[c], "categories_left": [int(v) for v in np.flatnonzero(go)],
                          "left": left, "right": right})
        else:
            nodes.append(_numeric_split(tree, i, raw, k, t, c))
    return nodes


def _numeric_split(tree: Any, i: int, raw: _RawMap, k: int, t: float, c: str) -> dict[str, Any]:
    """Node ``i`` (``z_k <= t``) on numerical raw column ``c``, with the route of a
    missing value: the final estimator's own (``missing_left``; the column's maps
    keep NaN), or, after an imputer, where the fill value goes."""
    left, right = int(tree.children_left[i]), int(tree.children_right[i])
    nan_left = bool(tree.missing_left[i]) if tree.missing_left is not None else False
    fill = raw.fill.get(c)
    j = raw.index[c]
    if t >= MISSING_ONLY:                    # a split on NaN only: every number left, as before
        return {"feature": j, "threshold": MISSING_ONLY, "left": left, "right": right,
                "missing_left": True if fill is not None else nan_left}
    x, increasing = raw.bounds[(k, t)]
    if not np.isfinite(x):                   # every number on one side
        side = left if (x > 0) == increasing else right
        return _one_side(j, side, side if fill is not None else (left if nan_left else right))
    if fill is not None:
        nan_left = bool(float(fill) <= x) == bool(increasing)
    return _bound_split(j, x, bool(increasing), left, right, nan_left)


def _bound_split(j: int, x: float, increasing: bool, left: int, right: int, nan_left: bool) -> dict[str, Any]:
    """``r <= x`` on feature ``j``, the children swapped where the column's map decreases."""
    if increasing:
        return {"feature": j, "threshold": x, "left": left, "right": right, "missing_left": nan_left}
    return {"feature": j, "threshold": x, "left": right, "right": left, "missing_left": not nan_left}


def _one_side(j: int, side: int, nan_side: int) -> dict[str, Any]:
    """A split on feature ``j`` that sends every number to ``side`` and a missing value to ``nan_side``."""
    if nan_side == side:
        return _always(side)
    return {"feature": j, "threshold": MISSING_ONLY, "left": side, "right": nan_side, "missing_left": False}


def _category_split(tree: Any, i: int, raw: _RawMap, k: int, c: str | None) -> dict[str, Any]:
    """Node ``i``, a native categorical split of the final estimator (e.g. a
    HistGradientBoosting model on an OrdinalEncoder's columns) on its column ``k``,
    rewritten on raw column ``c``: each raw code's transformed value (the pipeline's
    own) is looked up among the final estimator's categories, a value it does not
    know (NaN, an unknown_value) taking its missing code's route."""
    cats = raw.inner_cats[k]
    go = tree.left_codes(i, len(cats) + 1)
    lookup = {float(v): n for n, v in enumerate(cats)}

    def code(z: float) -> int:
        return lookup.get(float(z), len(cats)) if z == z else len(cats)

    left, right = int(tree.children_left[i]), int(tree.children_right[i])
    if c is None:                            # a constant column: every row goes the same way
        z = _transform(raw.pre, _base_frame(raw.raw_cols, raw.cats, 1))[0, k]
        return _always(left if go[code(z)] else right)
    codes = [code(z) for z in raw.per_code[c][:, k]]          # the last raw code: missing or unseen
    return {"feature": raw.index[c], "categories_left": [n for n, v in enumerate(codes) if go[v]],
            "left": left, "right": right}


def _always(child: int) -> dict[str, Any]:
    return {"redirect": child}


# ------------------------------------------------------------------ a linear model last
def _affine(pre: Any, raw_cols: list[str], cats: dict[str, tuple[Any, ...]], c: str, ks: list[int]
            ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Transformed columns ``ks`` of numerical raw column ``c`` as ``a + b * r``:
    ``(a, b, centre, spread)``, the centre and spread of ``r`` where the maps put 0
    and +-1 (data-like points for the checks). Refused when not affine."""
    def z(x: np.ndarray) -> np.ndarray:
        frame = _base_frame(raw_cols, cats, len(x))
        frame[c] = x
        with np.errstate(all="ignore"):
            return _transform(pre, frame)[:, ks]

    a = z(np.array([0.0]))[0]
    b = (z(np.array([1.0]))[0] - z(np.array([-1.0]))[0]) / 2.0
    safe = np.where(b != 0, b, 1.0)
    centre = float(np.median(np.where(b != 0, -a / safe, 0.0)))
    t = 2.0 ** np.ceil(np.log2(max(1.0, abs(centre))))       # a step of the column's own size: no cancellation
    b = (z(np.array([centre + t]))[0] - z(np.array([centre - t]))[0]) / (2.0 * t)
    b_max = float(np.max(np.abs(b)))
    spread = 1.0 / b_max if b_max > 0 else 1.0
    xs = centre + spread * np.array([-1e4, -37.5, -3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 3.0, 41.0, 1e4])
    got = z(xs)
    want = a[None, :] + xs[:, None] * b[None, :]
    scale = np.abs(a)[None, :] + np.abs(xs[:, None] * b[None, :]) + 1e-300
    if not np.all(np.isfinite(got)) or np.any(np.abs(got - want) > 1e-9 * scale):
        raise UnsupportedModelError(f"The pipeline transforms the column {c!r} in a way that is not affine (for "
                                    "example a MinMaxScaler with clip=True); a linear model after it cannot be read "
                                    "exactly. Use scalers without clipping.")
    return a, b, centre, spread


def parse_linear_pipeline(pipe: ModelLike) -> LinearModel:
    """A Pipeline whose last step is a linear estimator, as one LinearModel on its raw
    columns (see the module docstring)."""
    _, est, pre, raw_cols, w = _steps(pipe)
    coef_z, intercept, task, link, classes = linear_arrays(est)
    n_out, n_z = coef_z.shape
    cats = _encoder_categories(w)
    owner, per_code, no_missing = _owners(pre, raw_cols, cats, w.fill, n_z)
    features, dropped = _raw_features(raw_cols, cats, owner)
    intercept = intercept + _constant_score(pre, raw_cols, cats, owner, coef_z)
    coef = np.zeros((n_out, len(features)))
    tables: list[np.ndarray | None] = []
    scale: dict[str, list[float]] = {}
    for j, c in enumerate(features):
        ks = [k for k in range(n_z) if owner[k] == c]
        if c in cats:
            tables.append(_score_table(per_code[c][:, ks], coef_z[:, ks], c in no_missing))
            continue
        tables.append(None)
        if not ks:
            continue
        a, b, centre, spread = _affine(pre, raw_cols, cats, c, ks)
        coef[:, j] = coef_z[:, ks] @ b
        intercept = intercept + coef_z[:, ks] @ a
        scale[c] = [centre, spread]
    meta = _pipeline_meta(pipe, {"scale": scale}, dropped, no_missing,
                          {c: plain(v) for c, v in w.fill.items() if c in features})
    return LinearModel(coef, intercept, feature_names=tuple(features), task=task,
                       link=link, classes=classes,
                       categories=tuple(cats.get(c) for c in features), category_scores=tuple(tables),
                       source=f"sklearn.Pipeline[sklearn.{type(est).__name__}]", meta=meta)


def _constant_score(pre: Any, raw_cols: list[str], cats: dict[str, tuple[Any, ...]], owner: list[str | None],
                    coef_z: np.ndarray) -> np.ndarray:
    """What the constant transformed columns (no raw column moves them) add to the score."""
    base = _transform(pre, _base_frame(raw_cols, cats, 1))[0]
    const = [k for k in range(len(owner)) if owner[k] is None]
    score: np.ndarray = coef_z[:, const] @ base[const]
    return score


def _score_table(Z: np.ndarray, coef: np.ndarray, no_missing: bool) -> np.ndarray:
    """A categorical column's scores, one row per code (``Z``: its transformed rows, the last
    missing/unseen, NaN where the pipeline refuses a missing value)."""
    tab: np.ndarray = Z @ coef.T
    if no_missing:
        tab[-1] = np.nan
    return tab
