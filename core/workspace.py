"""A table and a model made into one checked workspace (no Streamlit here).

:func:`build_workspace` is the one place where an analyst's table and a model
become what every analysis reads; the app's pages and the audit CLI both call
it, and any failure is a ``ValueError`` subclass whose message the app shows
as is (so it can keep the previous workspace).

Three views of the same rows
----------------------------
*raw*
    the analyst's table as loaded (strings for categories, raw units);
*codes* (``Workspace.X``)
    the numeric view the analyses use: one float column per model feature,
    in the model's order; a categorical feature (``TreeEnsemble.categories``)
    holds its category code ``0..K-1``, ``K`` for a missing or unseen value;
*model input* (:meth:`Workspace.to_raw`)
    the raw columns the model itself takes, built from codes
    (:func:`core.parsing.native.model_input`): the original model's
    ``predict`` on ``to_raw(X)`` gives the ensemble's answer on ``X``.

How columns are matched (no silent misreads)
--------------------------------------------
* A model that carries feature names is matched **by name**, never by
  position. A name the table lacks may be a one-hot column of a table column
  (``workclass=Private``, ``workclass_Private``, as pandas' ``get_dummies`` or
  the app writes them): it is encoded from that column and the columns form a
  one-hot group.
* A model without names (``f0``, ``x0``, ``Column_0``, ``feature_0``) is matched
  **by position** only when the caller confirms the proposed mapping
  (``confirm_positions=True``); otherwise :class:`PositionalMatchRequired`
  carries the mapping for the page to show.
* Table columns the model does not use are listed in the notes
  ("ignored: ...").
* A categorical feature's values are matched to the model's categories
  (as text, so ``1``, ``1.0`` and ``"1"`` agree); values the model never saw and
  missing values take the missing code, as the model routes them, and are
  counted in the notes.
* Missing numerical values are the data's problem, not the model's: an error
  names the columns and rows, unless the model itself imputes that column
  (a scikit-learn pipeline's ``SimpleImputer``: the value it fills in is used,
  with a note) or the caller drops those rows.
* When the file carries the model's own training score (a forest's
  out-of-bag score, a recorded best score), a much lower accuracy on the
  labelled table is flagged in the notes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import pandas as pd

from core.ensemble import TreeEnsemble, from_model
from core.categorical import expand
from core.errors import DataError, PositionalMatchRequired, SchemaError, UnsupportedModelError
from core.parsing.native import model_input
from core.schema import Schema, infer_schema

__all__ = ["Workspace", "build_workspace", "PositionalMatchRequired", "GENERIC_NAME"]

#: feature names that carry no meaning (libraries' defaults for unnamed columns)
GENERIC_NAME = re.compile(r"(f|x|Column_|feature_|Feature_)\d+")
#: a score this much below the model's own training report is flagged
REPORT_GAP = 0.05


@dataclass(frozen=True)
class Workspace:
    """A checked table + model + feature settings; see the module docstring.

    Attributes
    ----------
    name : str, shown in the app.
    raw : DataFrame, the table as loaded (the target column included).
    X : DataFrame of shape (n_rows, n_features), the codes view in model order.
    y : Series or None, the target column as in the file (rows aligned with X).
    target : name of the target column, or None.
    model : the original model object, or None (only arrays were kept).
    ensemble : TreeEnsemble.
    schema : Schema of the features.
    mapping : tuple of (model feature, where its values come from).
    ignored : table columns the model does not use.
    notes : what was done to the data, in plain words.
    model_info : facts about the model (origin, scores) for display.
    """

    name: str
    raw: pd.DataFrame
    X: pd.DataFrame
    y: pd.Series | None
    target: str | None
    model: Any
    ensemble: TreeEnsemble
    schema: Schema
    data_sha256: str = ""
    model_sha256: str = ""
    notes: tuple[str, ...] = ()
    model_info: dict[str, Any] = field(default_factory=dict)
    mapping: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = ()

    @cached_property
    def predictions(self) -> np.ndarray:
        """The model's output on every row, computed once per workspace."""
        return self.ensemble.predict(self.X.to_numpy(dtype=float))

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the model's arrays and the rows (codes and target): the key
        of every cached result of this workspace, whatever its name or origin."""
        h = hashlib.sha256(self.ensemble.content_hash().encode())
        h.update(np.ascontiguousarray(self.X.to_numpy(dtype=float)).tobytes())
        h.update("|".join(map(str, self.X.columns)).encode())
        if self.y is not None:
            h.update(pd.util.hash_pandas_object(self.y, index=False).to_numpy().tobytes())
        return h.hexdigest()

    @cached_property
    def key(self) -> str:
        """The cache key of results on this workspace: its fingerprint and its
        feature settings (which change what the analyses may move)."""
        return hashlib.sha256((self.fingerprint + self.schema.to_json()).encode()).hexdigest()

    def to_raw(self, X: Any) -> pd.DataFrame:
        """Codes-view rows (n, n_features) as the raw columns the model takes:
        category codes become the model's categories (missing code: None/NaN)."""
        return model_input(self.ensemble, np.atleast_2d(np.asarray(X, dtype=float)), frame=True)

    def labels(self, X: Any) -> pd.DataFrame:
        """Codes-view rows for display: feature names as columns, categorical
        codes as category names, numbers as they are."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        ens = self.ensemble
        out = {}
        for j, name in enumerate(ens.feature_names):
            if ens.categories[j] is None:
                out[name] = X[:, j]
            else:
                out[name] = [ens.category_label(j, c) for c in X[:, j]]
        return pd.DataFrame(out, columns=list(ens.feature_names))

    def value_text(self, j: int, v: float) -> str:
        """One feature value as text: a category's name, or the number in short form."""
        if self.ensemble.categories[j] is not None:
            return self.ensemble.category_label(j, v)
        return f"{v:.4g}"

    def with_schema(self, schema: Schema) -> "Workspace":
        if schema.names != list(self.X.columns):
            raise SchemaError(
                f"The schema's features {schema.names[:6]}… do not match the data's columns "
                f"{list(self.X.columns)[:6]}…; load a schema saved for this dataset."
            )
        if {i: lv for i, lv in schema.categorical().items()} != _levels_by_index(self.ensemble):
            raise SchemaError("The schema's categorical features or their levels differ from the model's; "
                              "load a schema saved for this model.")
        return replace(self, schema=schema)

    def summary(self) -> dict[str, Any]:
        s = self.ensemble.summary()
        s.update(self.model_info)
        score = self.score_on_data()
        if score is not None:
            s[score[0]] = round(score[1], 4)
        return s

    def score_on_data(self) -> tuple[str, float] | None:
        """("accuracy on this data", value) for a classifier, ("R² on this data",
        value) for a regressor, or None without labels."""
        if self.y is None:
            return None
        if self.ensemble.task == "classification":
            pred, y = self.predictions, self.y.to_numpy()
            try:
                acc = float(np.mean(pred.astype(y.dtype) == y))
            except (TypeError, ValueError):
                acc = float(np.mean(pred.astype(str) == y.astype(str)))
            return "accuracy on this data", acc
        if self.ensemble.task == "regression":
            y = self.y.to_numpy(dtype=float)
            ss = float(np.sum((y - y.mean()) ** 2)) or 1.0
            return "R² on this data", 1 - float(np.sum((y - self.predictions) ** 2)) / ss
        return None


def _levels_by_index(ens: TreeEnsemble) -> dict[int, tuple[str, ...]]:
    return {j: tuple(str(v) for v in ens.categories[j]) for j in ens.categorical_features}


# ------------------------------------------------------------------ matching
@dataclass(frozen=True)
class _Source:
    """Where one model feature's values come from: a table column, or one
    level of a table column (a one-hot column)."""

    column: str
    level: Any = None
    one_hot: bool = False
    category: bool = False      # one category of a model's categorical feature: missing is allowed

    def describe(self) -> str:
        return f"{self.column} = {self.level}" if self.one_hot else self.column


def _norm(v: Any) -> str:
    """A value as matching text: 1, 1.0, "1" and True/"True" agree; NaN is ''."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    return str(v).strip()


def _one_hot_source(name: str, table: pd.DataFrame, values: dict[str, set[str]]) -> _Source | None:
    """``name`` read as ``column=level`` or ``column_level`` of a table column
    (the longest column name that fits); ``values`` caches each column's values."""
    best: _Source | None = None
    for c in map(str, table.columns):
        for sep in ("=", "_"):
            if name.startswith(c + sep) and len(name) > len(c) + 1 and (best is None or len(c) > len(best.column)):
                if c not in values:
                    values[c] = set(_keys(table[c])[1])
                if name[len(c) + 1:] in values[c]:
                    best = _Source(c, name[len(c) + 1:], one_hot=True)
    return best


def _by_name(ens: TreeEnsemble, table: pd.DataFrame) -> list[_Source]:
    cols = {str(c) for c in table.columns}
    sources, missing = [], []
    values: dict[str, set[str]] = {}
    for j, name in enumerate(ens.feature_names):
        if name in cols:
            sources.append(_Source(name))
            continue
        src = None if ens.categories[j] is not None else _one_hot_source(name, table, values)
        if src is None:
            missing.append(name)
        sources.append(src)
    if missing:
        used = {s.column for s in sources if s is not None}
        extra = [c for c in table.columns if str(c) not in used]
        raise SchemaError(
            f"The model expects columns {missing[:8]}{' …' if len(missing) > 8 else ''} that the data does not "
            f"have{'; the data has columns the model does not use: ' + str(extra[:8]) if extra else ''}. "
            "Upload the data the model was trained on (with the same column names), or pick the right target "
            "column."
        )
    return sources


def _positional(ens: TreeEnsemble, table: pd.DataFrame) -> list[_Source]:
    """Model features matched to table columns in order; text columns (for a
    model without categorical features) expanded to one-hot columns level by
    level, as the app encodes them."""
    sources: list[_Source] = []
    for c in table.columns:
        s = table[str(c)]
        if ens.categorical_features or pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            sources.append(_Source(str(c)))
        else:
            levels = sorted(set(_keys(s)[1]))
            sources.extend(_Source(str(c), lv, one_hot=True) for lv in levels)
    if len(sources) != ens.n_features:
        text = [str(c) for c in table.columns if not pd.api.types.is_numeric_dtype(table[str(c)])]
        raise SchemaError(
            f"The model's {ens.n_features} features have no names, so they can only be matched to the data's "
            f"columns by position, but the data has {table.shape[1]} feature columns"
            f"{f' ({len(sources)} after one-hot encoding its text columns {text[:4]})' if text else ''}. "
            "Upload the table the model was trained on, with exactly its columns in the same order, or save the "
            "model with feature names (train it on a DataFrame)."
        )
    return sources


def match_columns(ens: TreeEnsemble, table: pd.DataFrame, *, confirm_positions: bool = False
                  ) -> tuple[list[_Source], list[str], bool]:
    """Sources of the model's features, table columns left unused, and whether
    the match is positional."""
    positional = all(GENERIC_NAME.fullmatch(n) for n in ens.feature_names) and not all(
        n in {str(c) for c in table.columns} for n in ens.feature_names)
    sources = _positional(ens, table) if positional else _by_name(ens, table)
    if positional and not confirm_positions:
        mapping = [(f, s.describe()) for f, s in zip(ens.feature_names, sources)]
        raise PositionalMatchRequired(
            f"The model's {ens.n_features} features have no names ({', '.join(ens.feature_names[:3])}, …), so "
            "they can only be matched to the data's columns by position. Check the proposed mapping: it is right "
            "only if the model was trained on exactly these columns in this order, encoded the same way.",
            mapping)
    used = {s.column for s in sources}
    ignored = [str(c) for c in table.columns if str(c) not in used]
    return sources, ignored, positional


# ------------------------------------------------------------------ encoding
def _keys(s: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Per row the index of its value among the distinct values, and those values
    as matching text (:func:`_norm`); a missing value has index -1."""
    idx, uniques = pd.factorize(s, use_na_sentinel=True)
    return idx, [_norm(v) for v in uniques]


def _match_hashed_categories(ens: TreeEnsemble, table: pd.DataFrame, sources: list[_Source], notes: list[str]
                             ) -> tuple[TreeEnsemble, pd.DataFrame]:
    """CatBoost one-hot splits name a category by its hash (:mod:`core.parsing.catboost`):
    each value of the data is hashed as CatBoost hashes it and read as the level with
    that hash, or as "any other value" (which routes alike everywhere, and is given to
    the model as the data's most frequent such value; when the data holds only one
    such value, the level is named by it; when it holds none, there is no such level).
    A level the export named only by its hash
    takes the data's value with that hash as its name."""
    from dataclasses import replace as _re

    from core.parsing.cityhash import cat_feature_hash, category_text

    hashes = ens.meta["category_hashes"]
    other = ens.meta.get("other_level", "(any other value)")
    cats = list(ens.categories)
    table = table.copy(deep=False)
    examples: dict[str, Any] = {}
    fold: list[int] = []
    for j in ens.categorical_features:
        name = ens.feature_names[j]
        if name not in hashes:
            continue
        col = sources[j].column
        level_of = {h: k for k, h in enumerate(hashes[name])}
        levels = list(cats[j])
        counts = table[col].value_counts(dropna=True)
        read_as: dict[Any, Any] = {}
        others = []
        for value, count in counts.items():
            k = level_of.get(cat_feature_hash(value))
            if k is None:
                read_as[value] = other
                others.append((count, value))
                continue
            if str(levels[k]).startswith("#"):
                levels[k] = category_text(value)
            read_as[value] = levels[k]
        if len(others) == 1:            # one value no split names: the level is that value
            levels[-1] = category_text(others[0][1])
            read_as[others[0][1]] = levels[-1]
        elif not others:                # none: the level goes (folded into the missing code, routed alike)
            fold.append(j)
        cats[j] = tuple(levels)
        table[col] = table[col].map(lambda v, m=read_as: m.get(v, v))
        if len(others) > 1:
            top = max(others, key=lambda cv: cv[0])[1]
            examples[name] = category_text(top)
            notes.append(f"Of column {col!r}, {sum(c for c, _ in others)} values no split of the model names "
                         f"(e.g. {category_text(top)!r}) are read as {other!r}: CatBoost routes them all alike.")
    from core.parsing.catboost import fold_other_level

    meta = {**ens.meta, "other_example": {**ens.meta.get("other_example", {}), **examples}}
    return fold_other_level(_re(ens, categories=tuple(cats), meta=meta), fold), table


def _categorical_codes(ens: TreeEnsemble, j: int, s: pd.Series, notes: list[str]) -> np.ndarray:
    cats = ens.categories[j]
    index = {_norm(v): k for k, v in enumerate(cats)}
    idx, uniques = _keys(s)
    code_of = np.array([index.get(u, len(cats)) for u in uniques] + [len(cats)], dtype=float)
    codes = code_of[idx]                      # idx -1 (missing) takes the last entry: the missing code
    unseen_u = [k for k, u in enumerate(uniques) if u not in index]
    n_unseen = int(np.isin(idx, unseen_u).sum()) if unseen_u else 0
    n_nan = int((idx < 0).sum())
    if n_unseen or n_nan:
        parts = []
        if n_unseen:
            parts.append(f"{n_unseen} hold categories the model never saw (e.g. {uniques[unseen_u[0]]!r})")
        if n_nan:
            parts.append(f"{n_nan} are missing")
        notes.append(f"Of column {ens.feature_names[j]!r}, {' and '.join(parts)}: they are read as a missing "
                     "value, which is how the model routes them.")
    return codes


def _numeric(name: str, s: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(s):
        return s.astype(float)
    if pd.api.types.is_numeric_dtype(s):
        return s.astype(float)
    conv = pd.to_numeric(s, errors="coerce")
    bad = conv.isna() & s.notna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(
            f"Column {name!r} must hold numbers for the model, but {int(bad.sum())} of its values are text "
            f"(e.g. {s.iloc[i]!r} in row {i + 1}). Fix or remove those values and upload again."
        )
    return conv.astype(float)


def _encode(ens: TreeEnsemble, table: pd.DataFrame, sources: list[_Source], drop_missing: bool
            ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The codes view (n, d), the mask of rows kept, and notes."""
    notes: list[str] = []
    n = len(table)
    X = np.empty((n, ens.n_features))
    missing = np.zeros(n, dtype=bool)
    missing_cols: list[str] = []
    impute = dict(ens.meta.get("impute") or {})
    for j, src in enumerate(sources):
        s = table[src.column]
        name = ens.feature_names[j]
        if (src.category or ens.categories[j] is not None) and src.column in impute and s.isna().any():
            s = s.fillna(impute[src.column])           # the model's own imputer: missing reads as its fill
        if ens.categories[j] is not None:
            X[:, j] = _categorical_codes(ens, j, s, notes)
            continue
        if src.one_hot:
            idx, uniques = _keys(s)
            hit = np.array([u == src.level for u in uniques] + [False])
            X[:, j] = hit[idx].astype(float)
            gap = np.zeros(n, dtype=bool) if src.category else idx < 0
        else:
            v = _numeric(src.column, s).to_numpy()
            gap = np.isnan(v)
            if gap.any() and name in impute:
                v = np.where(gap, float(impute[name]), v)
                notes.append(f"{int(gap.sum())} missing values of {name!r} are read as {impute[name]!r}, the value "
                             "the model's own imputer fills in.")
                gap = np.zeros(n, dtype=bool)
            X[:, j] = v
        if gap.any():
            missing |= gap
            if src.column not in missing_cols:
                missing_cols.append(src.column)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        if not drop_missing:
            raise DataError(
                f"{int(missing.sum())} of {n} rows of the data have missing values (columns {missing_cols[:6]}; "
                f"first at row {i + 1}). The model cannot score a row with a missing number: impute those values "
                "in the data, or choose to drop those rows."
            )
        notes.append(f"Dropped {int(missing.sum())} rows with missing values (columns {missing_cols[:6]}).")
    return X[~missing], ~missing, notes


# ------------------------------------------------------------------ building
def _as_model(model: Any) -> tuple[TreeEnsemble, Any, dict[str, Any]]:
    """(ensemble, original object or None, facts the file carries) from a
    TreeEnsemble, a loaded model file (``.ensemble``, ``.model``, ``.info``) or
    a fitted model object."""
    if isinstance(model, TreeEnsemble):
        return model, None, {}
    if hasattr(model, "ensemble") and isinstance(getattr(model, "ensemble"), TreeEnsemble):
        return model.ensemble, getattr(model, "model", None), dict(getattr(model, "info", None) or {})
    info = {}
    oob = getattr(model, "oob_score_", None)
    if isinstance(oob, (float, np.floating)):
        info["training report"] = {"metric": "out-of-bag score", "value": float(oob)}
    return from_model(model), model, info


def _report_gap(ws: Workspace, info: dict[str, Any]) -> str | None:
    """A note when the score on the labelled data is far below the model's own report."""
    rep = info.get("training report")
    score = ws.score_on_data()
    if not rep or score is None:
        return None
    value = float(rep["value"])
    if score[1] < value - REPORT_GAP:
        return (f"The model scores {score[1]:.3f} on this data ({score[0].split(' on ')[0]}), far below its own "
                f"{rep['metric']} of {value:.3f} recorded in the file. Check that the columns are matched and "
                "encoded as in training.")
    return None


def build_workspace(df: pd.DataFrame, target: str | None, model: Any, *, name: str,
                    data_sha256: str = "", model_sha256: str = "", drop_missing: bool = False,
                    model_info: dict[str, Any] | None = None, schema: Schema | None = None,
                    confirm_positions: bool = False, protected: Sequence[str] | None = None) -> Workspace:
    """Match a table to a model and check them; see the module docstring.

    Parameters
    ----------
    df : the table as loaded (``core.io.load_table``); ``df.attrs["column_types"]``
        (a type row's kinds) is read if present.
    target : the label column, or None.
    model : a fitted model object, a ``TreeEnsemble``, or a loaded model file
        (``core.io.load_model_file``).
    name : shown in the app.
    drop_missing : drop rows with missing numerical values instead of refusing them.
    schema : feature settings to keep (used when they fit the model's features).
    confirm_positions : the user has seen and accepted the positional mapping.
    protected : protected columns (default: columns named like sex, race, ...).

    Raises
    ------
    PositionalMatchRequired, SchemaError, DataError, UnsupportedModelError
    """
    if target is not None and target not in df.columns:
        raise DataError(f"Target column {target!r} is not in the table; columns are {list(df.columns)[:12]}.")
    ens, original, file_info = _as_model(model)
    if ens.task == "anomaly":
        raise UnsupportedModelError(
            "An Isolation Forest is a plausibility model, not a model to audit; load a classifier or regressor "
            "(you can use an Isolation Forest in the analyses).")
    table = df.drop(columns=[target]) if target else df
    if table.shape[1] == 0:
        raise DataError("The table has no feature columns besides the target.")
    sources, ignored, positional = match_columns(ens, table, confirm_positions=confirm_positions)
    if positional:  # keep the data's names for the features
        names = [s.describe() if s.one_hot else s.column for s in sources]
        ens = from_model(ens, feature_names=[n.replace(" = ", "=") for n in names])
    notes_before: list[str] = []
    if ens.meta.get("category_hashes"):             # CatBoost: categories known by their hashes
        ens, table = _match_hashed_categories(ens, table, sources, notes_before)
    native = ens
    if ens.categorical_features:   # the analyses read categorical splits as exact one-hot trees
        ens = expand(ens)
        sources = [one for j, src in enumerate(sources) for one in (
            [_Source(src.column, _norm(c), one_hot=True, category=True) for c in native.categories[j]]
            if native.categories[j] is not None else [src])]
    codes, kept, notes = _encode(ens, table, sources, drop_missing)
    notes = notes_before + notes
    for j in native.categorical_features:
        cols = ens.meta["expanded"]["columns"][j]
        none = int((codes[:, cols].sum(axis=1) == 0).sum())
        if none and native.feature_names[j] in native.meta.get("no_missing", ()):
            raise DataError(f"{none} rows of column {sources[cols[0]].column!r} are missing or hold categories the "
                            "model never saw, and the model refuses such values (its encoder has "
                            "handle_unknown='error'). Fix those values, or drop those rows, and upload again.")
        if none:                                   # the note names unseen values and counts missing ones
            col = table[sources[cols[0]].column]
            impute = native.meta.get("impute", {})
            _categorical_codes(native, j, col.fillna(impute[col.name]) if col.name in impute else col, notes)
    X = pd.DataFrame(codes, columns=list(ens.feature_names))
    y = df[target][kept].reset_index(drop=True) if target else None
    if y is not None and y.isna().any():
        raise DataError(f"{int(y.isna().sum())} rows have no value in the target column {target!r}; drop them or "
                        "choose another target column.")
    if ignored:
        notes.append(f"Ignored columns the model does not use: {', '.join(ignored[:12])}"
                     f"{' …' if len(ignored) > 12 else ''}.")
    if positional:
        notes.append("Columns matched to the model's unnamed features by position, as confirmed.")
    types = dict(df.attrs.get("column_types", {}))
    for j, src in enumerate(sources):
        if types.get(src.column) == "categorical" and ens.categories[j] is None and not src.one_hot:
            notes.append(f"Column {src.column!r} is marked categorical in the file, but the model splits it as a "
                         "number: it is analysed as a number.")
    if schema is None or schema.names != list(X.columns):
        groups: dict[str, list[str]] = {}
        for f, src in zip(ens.feature_names, sources):
            if src.one_hot:
                groups.setdefault(src.column, []).append(f)
        kinds = {f: types[s.column] for f, s in zip(ens.feature_names, sources)
                 if not s.one_hot and types.get(s.column) in ("numerical", "integer", "binary")}
        schema = infer_schema(X, kinds=kinds, groups={g: c for g, c in groups.items() if len(c) >= 2},
                              levels={ens.feature_names[j]: ens.categories[j] for j in ens.categorical_features},
                              protected=protected)
    schema = Schema(schema.features, target=target)
    info = {**file_info.pop("display", {}), **dict(model_info or {})}
    ws = Workspace(name=name, raw=df, X=X, y=y, target=target, model=original, ensemble=ens, schema=schema,
                   data_sha256=data_sha256, model_sha256=model_sha256, notes=tuple(notes), model_info=info,
                   mapping=tuple((f, s.describe()) for f, s in zip(ens.feature_names, sources)),
                   ignored=tuple(ignored))
    warn = _report_gap(ws, file_info)
    return replace(ws, notes=ws.notes + (warn,)) if warn else ws
