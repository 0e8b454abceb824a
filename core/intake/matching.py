"""Matching an analyst's table to a model's features, and encoding it.

Used by :func:`core.intake.workspace.build_workspace`; no Streamlit here.

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
  counted in the notes. Two libraries route unknown values otherwise:
  CatBoost names its one-hot levels by hash (:func:`match_hashed_categories`)
  and XGBoost fitted on codes without saving its categories sends any code
  its splits do not name left (:func:`match_open_codes`); both read such
  values as one "any other" level, and an XGBoost code column given as text
  is refused with the fix.
* Missing numerical values are the data's problem, not the model's: an error
  names the columns and rows, unless the model itself imputes that column
  (a scikit-learn pipeline's ``SimpleImputer``: the value it fills in is used,
  with a note) or the caller drops those rows.
* When the file carries the model's own training score (a forest's
  out-of-bag score, a recorded best score), a much lower accuracy on the
  labelled table is flagged in the notes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Protocol, Sequence

import numpy as np
import pandas as pd

from core.errors import DataError, ModelError, PositionalMatchRequired, SchemaError
from core.intake.parsing.catboost import fold_other_level
from core.intake.parsing.cityhash import cat_feature_hash, category_text
from core.intake.parsing.xgboost import drop_other_code
from core.model import TreeEnsemble
from core.model.categorical import OTHER_CODE

__all__ = ["Source", "MatchedModel", "GENERIC_NAME", "category_key", "match_columns", "match_hashed_categories", "match_open_codes",
           "truncate_lightgbm_codes", "encode", "categorical_codes", "table_names",
           "norm_text"]

#: feature names that carry no meaning (libraries' defaults for unnamed columns)
GENERIC_NAME = re.compile(r"(f|x|Column_|feature_|Feature_)\d+")


class MatchedModel(Protocol):
    """What matching and encoding read of a model: its features' names and categories,
    what it is and how it takes missing values (a :class:`TreeEnsemble`, a
    :class:`core.model.linear.LinearModel` or a :class:`core.model.blackbox.BlackBoxModel`)."""

    @property
    def feature_names(self) -> tuple[str, ...]: ...
    @property
    def categories(self) -> tuple[tuple[Any, ...] | None, ...]: ...
    @property
    def n_features(self) -> int: ...
    @property
    def categorical_features(self) -> list[int]: ...
    @property
    def routes_missing(self) -> bool: ...
    @property
    def source(self) -> str: ...
    @property
    def meta(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Source:
    """Where one model feature's values come from: a table column, or one
    level of a table column (a one-hot column)."""

    column: str
    level: Any = None
    one_hot: bool = False
    category: bool = False      # one category of a model's categorical feature: missing is allowed

    def describe(self) -> str:
        return f"{self.column} = {self.level}" if self.one_hot else self.column


def norm_text(v: object) -> str:
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


def _one_hot_source(name: str, table: pd.DataFrame, values: dict[str, set[str]]) -> Source | None:
    """``name`` read as ``column=level`` or ``column_level`` of a table column
    (the longest column name that fits); ``values`` caches each column's values."""
    best: Source | None = None
    for c in map(str, table.columns):
        for sep in ("=", "_"):
            if name.startswith(c + sep) and len(name) > len(c) + 1 and (best is None or len(c) > len(best.column)):
                if c not in values:
                    values[c] = set(_keys(table[c])[1])
                if name[len(c) + 1:] in values[c]:
                    best = Source(c, name[len(c) + 1:], one_hot=True)
    return best


def _by_name(ens: MatchedModel, table: pd.DataFrame) -> list[Source]:
    cols = {str(c) for c in table.columns}
    sources: list[Source] = []
    missing: list[str] = []
    values: dict[str, set[str]] = {}
    lgb_names = _lightgbm_names(ens, cols)
    for j, name in enumerate(ens.feature_names):
        if name in cols:
            src: Source | None = Source(name)
        elif len(lgb_names.get(name, [])) == 1:
            src = Source(lgb_names[name][0])
        else:
            src = None if ens.categories[j] is not None else _one_hot_source(name, table, values)
        if src is None:
            missing.append(name)
        else:
            sources.append(src)
    if missing:
        raise _absent_columns_error(missing, sources, table)
    return sources


def _lightgbm_names(ens: MatchedModel, cols: set[str]) -> dict[str, list[str]]:
    """LightGBM saves "mean radius" as "mean_radius": the table's columns by the name
    LightGBM gives them (none for a model of another library)."""
    out: dict[str, list[str]] = {}
    if _from_lightgbm(ens):
        for c in cols:
            out.setdefault(re.sub(r"\s", "_", c), []).append(c)
    return out


def table_names(ens: MatchedModel, sources: list[Source]) -> list[str] | None:
    """The features' names as the table writes them, where a LightGBM model matched a column by
    the name LightGBM gave it ("mean_radius" for "mean radius"); None when every name is the table's."""
    names = [s.column if not s.one_hot and s.column != name else name
             for name, s in zip(ens.feature_names, sources)]
    if names == list(ens.feature_names) or not _from_lightgbm(ens):
        return None
    return names


def _from_lightgbm(ens: MatchedModel) -> bool:
    """Whether the model was read from LightGBM (which saves "mean radius" as "mean_radius")."""
    return str(ens.source).lower().startswith("lightgbm")


def _absent_columns_error(missing: list[str], sources: list[Source], table: pd.DataFrame) -> SchemaError:
    """The model's features the table lacks, named with the table's columns left unused."""
    used = {s.column for s in sources}
    extra = [c for c in table.columns if str(c) not in used]
    return SchemaError(
        f"The model expects columns {missing[:8]}{' …' if len(missing) > 8 else ''} that the data does not "
        f"have{'; the data has columns the model does not use: ' + str(extra[:8]) if extra else ''}. "
        "Upload the data the model was trained on (with the same column names), or pick the right target "
        "column."
    )


def _positional(ens: MatchedModel, table: pd.DataFrame) -> list[Source]:
    """Model features matched to table columns in order; text columns (for a
    model without categorical features) expanded to one-hot columns level by
    level, as the app encodes them."""
    sources: list[Source] = []
    for c in table.columns:
        s = table[str(c)]
        if ens.categorical_features or pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            sources.append(Source(str(c)))
        else:
            levels = sorted(set(_keys(s)[1]))
            sources.extend(Source(str(c), lv, one_hot=True) for lv in levels)
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


def match_columns(ens: MatchedModel, table: pd.DataFrame, *, confirm_positions: bool = False
                  ) -> tuple[list[Source], list[str], bool]:
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
    return idx, [norm_text(v) for v in uniques]


def match_hashed_categories(ens: TreeEnsemble, table: pd.DataFrame, sources: list[Source], notes: list[str]
                             ) -> tuple[TreeEnsemble, pd.DataFrame]:
    """CatBoost one-hot splits name a category by its hash (:mod:`core.intake.parsing.catboost`):
    each value of the data is hashed as CatBoost hashes it and read as the level with
    that hash, or as "any other value" (which routes alike everywhere, and is given to
    the model as the data's most frequent such value; when the data holds only one
    such value, the level is named by it; when it holds none, there is no such level).
    A level the export named only by its hash
    takes the data's value with that hash as its name."""
    hashes = ens.meta["category_hashes"]
    other = ens.meta.get("other_level", "(any other value)")
    cats = list(ens.categories)
    table = table.copy(deep=False)
    examples: dict[str, Any] = {}
    fold: list[int] = []
    for j, known in enumerate(ens.categories):
        name = ens.feature_names[j]
        if known is None or name not in hashes:
            continue
        col = sources[j].column
        level_of = {h: k for k, h in enumerate(hashes[name])}
        levels = list(known)
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
            notes.append(f"Of column {col!r}, the value {levels[-1]!r} ({others[0][0]} rows) is no category a split "
                         f"of the model names: it is the model's {other!r} level, named by it (CatBoost routes any "
                         "such value alike).")
        elif not others:                # none: the level goes (folded into the missing code, routed alike)
            fold.append(j)
        cats[j] = tuple(levels)
        table[col] = table[col].map(lambda v, m=read_as: m.get(v, v))
        if len(others) > 1:
            top = max(others, key=lambda cv: cv[0])[1]
            examples[name] = category_text(top)
            notes.append(f"Of column {col!r}, {sum(c for c, _ in others)} values no split of the model names "
                         f"(e.g. {category_text(top)!r}) are read as {other!r}: CatBoost routes them all alike.")
    meta = {**ens.meta, "other_example": {**ens.meta.get("other_example", {}), **examples}}
    return fold_other_level(replace(ens, categories=tuple(cats), meta=meta), fold), table


MAX_CAT = float(1 << 24)   # XGBoost's InvalidCat: a code at or above this (or below 0) is no category


def match_open_codes(ens: TreeEnsemble, table: pd.DataFrame, sources: list[Source], notes: list[str]
                     ) -> tuple[TreeEnsemble, pd.DataFrame]:
    """XGBoost fitted on category codes without saving its categories
    (:mod:`core.intake.parsing.xgboost`): each value of the data is read as the code
    XGBoost makes of it (``int(x)``) when a split names that code, else as
    "any other code", which XGBoost routes alike at every split (left) and
    which is given to the model as the data's most frequent such value; when
    the data holds only one such value the level is named by it, when it holds
    none there is no such level. Text is no code: refused, saying how to fix it."""
    cats = list(ens.categories)
    stand_in = {int(j): code for j, code in ens.meta["open_codes"]}
    table = table.copy(deep=False)
    drop: list[int] = []
    for j in sorted(stand_in):
        col = sources[j].column
        levels = cats[j]
        if levels is None:
            raise ModelError(f"The model marks feature {ens.feature_names[j]!r} as read by its category codes, but "
                             "it is not categorical: the file is damaged or was edited. Save the model again.")
        s = table[col]
        v = pd.to_numeric(s, errors="coerce")
        text = v.isna() & s.notna()
        if text.any():
            raise DataError(
                f"Column {col!r} holds text (e.g. {s[text].iloc[0]!r}), but the model was saved without its "
                f"categories (XGBoost before 3.1, or trained on codes): its splits name the category codes "
                f"0..{len(levels) - 2} only, so which text is which code cannot be known. Give the column as the "
                f"codes the model was trained on (for a pandas category column: df[{col!r}].cat.codes, with the "
                "categories in their training order), or save the model with XGBoost 3.1 or later, which stores "
                "the categories in the file.")
        x = v.to_numpy(dtype=float)
        code = np.trunc(x)
        named = (x >= 0) & (x < MAX_CAT) & (code <= len(levels) - 2)
        other = ~np.isnan(x) & ~named
        out = pd.Series(np.where(named, code, np.nan), index=s.index, dtype=object)
        _note_fractions(col, x[named], "XGBoost", notes)
        if other.any():
            values, counts = np.unique(x[other], return_counts=True)
            top = float(values[np.argmax(counts)])
            stand_in[j] = int(top) if top.is_integer() else top
            if values.size == 1:                    # the level is that value
                levels = levels[:-1] + (stand_in[j],)
                cats[j] = levels
                notes.append(f"Of column {col!r}, the value {stand_in[j]!r} ({int(other.sum())} rows) is a code no "
                             f"split of the model names: it stands for {OTHER_CODE!r}, which XGBoost routes alike "
                             "at every split (not as a missing value).")
            else:
                notes.append(f"Of column {col!r}, {int(other.sum())} values are codes no split of the model names "
                             f"(e.g. {stand_in[j]!r}); they are read as {levels[-1]!r}: XGBoost routes them all "
                             "alike (not as a missing value).")
            out[other] = levels[-1]
        else:
            drop.append(j)
        table[col] = out
    meta = {**ens.meta, "open_codes": [[j, c] for j, c in sorted(stand_in.items())]}
    return drop_other_code(replace(ens, categories=tuple(cats), meta=meta), drop), table


def _note_fractions(col: str, x: np.ndarray, library: str, notes: list[str]) -> None:
    """A note when numbers of a code column are not whole (read as ``int(x)``)."""
    frac = np.isfinite(x) & (x != np.trunc(x))
    if frac.any():
        notes.append(f"Of column {col!r}, {int(frac.sum())} values are not whole codes (e.g. {float(x[frac][0])!r}): "
                     f"they are read as the code int(x), as {library} reads them.")


def truncate_lightgbm_codes(ens: TreeEnsemble, table: pd.DataFrame, sources: list[Source], notes: list[str]
                            ) -> pd.DataFrame:
    """LightGBM fitted on integer codes (no pandas categories saved) reads a number
    as the code ``int(x)`` (its ``CategoricalDecision``: 2.7 is category 2, -0.5 is
    category 0): the data's numbers in such a column are truncated alike before
    they are matched to the categories."""
    if not ens.source.startswith("lightgbm") or ens.meta.get("input", "array") != "array":
        return table
    table = table.copy(deep=False)
    for j in ens.categorical_features:
        col = sources[j].column
        if pd.api.types.is_float_dtype(table[col]):
            v = table[col].to_numpy(dtype=float)
            inside = np.isfinite(v) & (np.abs(v) < 2.0 ** 31)
            _note_fractions(col, v[inside], "LightGBM", notes)
            table[col] = np.where(inside, np.trunc(v), v)
    return table


def category_key(v: object) -> str:
    """A category as matching text: :func:`norm_text`, but text exactly as written
    (a library reads ``"clerk "`` as another category than ``"clerk"``)."""
    return v if isinstance(v, str) else norm_text(v)


def categorical_codes(ens: MatchedModel, j: int, s: pd.Series, notes: list[str]) -> np.ndarray:
    cats = _categories_of(ens, j)
    index = {category_key(v): k for k, v in enumerate(cats)}
    idx, raw = pd.factorize(s, use_na_sentinel=True)
    uniques = [category_key(v) for v in raw]
    code_of = np.array([index.get(u, len(cats)) for u in uniques] + [len(cats)], dtype=float)
    codes = code_of[idx]                      # idx -1 (missing) takes the last entry: the missing code
    notes.extend(_unread_notes(ens.feature_names[j], cats, idx, uniques, index))
    return codes


def _unread_notes(name: str, cats: Sequence[Any], idx: np.ndarray, uniques: list[Any], index: dict[Any, int]
                  ) -> list[str]:
    """Notes on the values of a category column the model reads as missing (unseen or
    missing ones, and unseen ones that differ from a category only by spaces); none when all are read."""
    unseen_u = [k for k, u in enumerate(uniques) if u not in index]
    n_unseen = int(np.isin(idx, unseen_u).sum()) if unseen_u else 0
    n_nan = int((idx < 0).sum())
    if not (n_unseen or n_nan):
        return []
    return ([_unseen_note(name, n_unseen, n_nan, uniques[unseen_u[0]] if n_unseen else None)]
            + _spaces_note(name, cats, [uniques[k] for k in unseen_u]))


def _categories_of(ens: MatchedModel, j: int) -> Sequence[Any]:
    """The categories of feature ``j``, which must be categorical."""
    cats = ens.categories[j]
    if cats is None:
        raise SchemaError(f"Feature {ens.feature_names[j]!r} of the model is not categorical: it has no category "
                          "codes.")
    return cats


def _unseen_note(name: str, n_unseen: int, n_nan: int, example: Any) -> str:
    """How many values of a category column the model reads as missing: unseen ones and missing ones."""
    parts = []
    if n_unseen:
        parts.append(f"{n_unseen} hold categories the model never saw (e.g. {example!r})")
    if n_nan:
        parts.append(f"{n_nan} are missing")
    return (f"Of column {name!r}, {' and '.join(parts)}: they are read as a missing value, which is how the model "
            "routes them.")


def _spaces_note(name: str, cats: Sequence[Any], unseen: list[Any]) -> list[str]:
    """A note when unseen values differ from a model's category only by spaces around them (none otherwise)."""
    stripped = {norm_text(v): v for v in cats if isinstance(v, str)}
    near = sorted({u for u in unseen if isinstance(u, str) and u.strip() in stripped and u != u.strip()})
    if not near:
        return []
    return [f"Values of column {name!r} such as {near[0]!r} differ from the model's "
            f"category {stripped[near[0].strip()]!r} only by spaces; the model reads them as another "
            "(unseen) category, and so do the analyses. Remove the spaces in the data if they are the "
            "same category."]


def _numeric(name: str, s: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(s):
        return s.astype(float)
    if pd.api.types.is_numeric_dtype(s):
        return _finite(name, s.astype(float))
    conv = pd.to_numeric(s, errors="coerce")
    bad = conv.isna() & s.notna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        comma = s[bad].astype(str).str.fullmatch(r"\s*[-+]?\d*,\d+\s*").mean() > 0.5
        hint = (" They look like numbers with a decimal comma: save the file with '.' as the decimal separator "
                "(or as Parquet)." if comma else "")
        raise DataError(
            f"Column {name!r} must hold numbers for the model, but {int(bad.sum())} of its values are text "
            f"(e.g. {s.iloc[i]!r} in row {i}).{hint} Fix or remove those values and upload again."
        )
    return _finite(name, conv.astype(float))


def _finite(name: str, s: pd.Series) -> pd.Series:
    """``s`` (float) when it holds no infinite value; else refused, naming a row (a range, a cost, a
    split cannot be read on an infinite value; a missing one is left blank)."""
    inf = np.isinf(s.to_numpy())
    if inf.any():
        i = int(np.flatnonzero(inf)[0])
        raise DataError(f"Column {name!r} holds {int(inf.sum())} infinite value(s) (e.g. {float(s.iloc[i]):g} in row {i}); "
                        "the analyses need finite numbers. Replace them with a number, or leave the cell empty "
                        "for a missing value, and upload again.")
    return s


def encode(ens: MatchedModel, table: pd.DataFrame, sources: list[Source], drop_missing: bool,
           keep_missing: bool = False) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The codes view (n, d), the mask of rows kept, and notes. ``keep_missing``
    (the model routes missing values): a missing number stays NaN in its row
    (:func:`core.model.missing.expand` makes it a state); otherwise such rows are
    refused, or dropped with ``drop_missing``."""
    notes: list[str] = []
    n = len(table)
    X = np.empty((n, ens.n_features))
    missing = np.zeros(n, dtype=bool)
    missing_cols: list[str] = []
    impute = dict(ens.meta.get("impute") or {})
    for j, src in enumerate(sources):
        s = _imputed_category(table[src.column], src, ens.categories[j] is not None, impute)
        if ens.categories[j] is not None:
            X[:, j] = categorical_codes(ens, j, s, notes)
            continue
        if src.one_hot:
            X[:, j], gap = _one_hot_values(src, s)
        else:
            X[:, j], gap = _number_values(src, s, ens.feature_names[j], impute, keep_missing, notes)
        if gap.any():
            missing |= gap
            if src.column not in missing_cols:
                missing_cols.append(src.column)
    if missing.any():
        if not drop_missing:
            raise _missing_rows_error(ens, missing, missing_cols, keep_missing)
        notes.append(f"Dropped {int(missing.sum())} rows with missing values (columns {missing_cols[:6]}).")
    return X[~missing], ~missing, notes


def _imputed_category(s: pd.Series, src: Source, categorical: bool, impute: dict[str, Any]) -> pd.Series:
    """A category column with its missing values filled as the model's own imputer fills them
    (missing reads as its fill); any other column as it is."""
    if (src.category or categorical) and src.column in impute and s.isna().any():
        return s.fillna(impute[src.column])
    return s


def _one_hot_values(src: Source, s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A one-hot feature's 0/1 values (1 where the row holds its level), and the rows
    missing a value (none for a model's category: missing is one more category)."""
    if src.category:                     # a model's category: its text exactly as written
        idx, raw = pd.factorize(s, use_na_sentinel=True)
        uniques = [category_key(v) for v in raw]
    else:
        idx, uniques = _keys(s)
    hit = np.array([u == src.level for u in uniques] + [False])
    gap = np.zeros(len(s), dtype=bool) if src.category else idx < 0
    return hit[idx].astype(float), gap


def _number_values(src: Source, s: pd.Series, name: str, impute: dict[str, Any], keep_missing: bool,
                   notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A number feature's values, and the rows missing one: none when the model's own imputer
    fills them (noted) or when the model routes missing values (``keep_missing``: NaN kept)."""
    v = _numeric(src.column, s).to_numpy()
    gap = np.isnan(v)
    if gap.any() and name in impute:
        v = np.where(gap, float(impute[name]), v)
        notes.append(f"{int(gap.sum())} missing values of {name!r} are read as {impute[name]!r}, the value "
                     "the model's own imputer fills in.")
        gap = np.zeros(len(s), dtype=bool)
    if keep_missing:
        gap = np.zeros(len(s), dtype=bool)
    return v, gap


def _missing_rows_error(ens: MatchedModel, missing: np.ndarray, missing_cols: list[str], keep_missing: bool
                        ) -> DataError:
    """Rows with a missing value the model cannot take, refused saying why and how to fix it."""
    i = int(np.flatnonzero(missing)[0])
    return DataError(
        f"{int(missing.sum())} of {len(missing)} rows of the data have missing values (columns {missing_cols[:6]}; "
        f"first at row {i}). "
        + ("This model does not take missing values (its library refuses them, and so would its predict): "
           if not keep_missing and not ens.routes_missing else
           "A column the data one-hot encodes has a missing value, which names no category: ")
        + "impute those values in the data, or choose to drop those rows."
    )


# ------------------------------------------------------------------ building
