"""The analyst's columns over the model's features.

The analyses read one float per model feature; for a categorical column the
model may see one 0/1 feature per category (a pipeline's or the data's one-hot
group, or the exact one-hot rewrite of a model's categorical splits,
:mod:`core.model.categorical`). What the analyst reads and edits is the table's own
columns: one :class:`Column` per raw column, a category column being one
choice among its categories (never two at once). Used by the pages (counts,
rule sizes, the what-if editor, sample tables) so they speak in the table's
columns whatever the model's encoding.

The exports write results in these columns too, with numbers as numbers
(:func:`value_of`: an integer column's value as an integer, a category by its
name, ``None`` for a missing value): a row (:func:`row_record`), the changes of
a counterfactual with their values beside the text (:func:`change_records`),
per-row tables of recourse (:func:`recourse_frame`), an optimal counterfactual
(:func:`result_record`) and a rule's box as conditions on the columns, a
category column as its set of categories (:func:`box_record`). No "is missing"
feature appears in them: a number's missing state is its value ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.jsonable import plain
from core.model.missing import SUFFIX, indicator_of
from core.model.result import export
from core.schema import INTEGRAL_KINDS
from core.shown import approx_text, number_text

if TYPE_CHECKING:
    from core.counterfactual import CounterfactualResult
    from core.model import TreeEnsemble
    from core.schema import Schema

__all__ = ["Column", "analyst_columns", "column_values", "apply_values", "columns_of", "changes_text", "MISSING",
           "value_of", "row_record", "change_records", "recourse_frame", "box_record", "result_record",
           "values_beside", "changed_columns"]

#: the option of a category column with no category set (a missing or unseen value)
NONE = "(missing or unseen)"
#: the value of a number column whose value is missing (its "is missing" feature is 1, :mod:`core.model.missing`)
MISSING = "missing"


@dataclass(frozen=True)
class Column:
    """One analyst column: its name, the model features it is read from, and its
    categories (None: a number in ``features[0]``). ``one_hot``: one 0/1 feature
    per category; otherwise a categorical feature holds the category's code."""

    name: str
    features: tuple[int, ...]
    categories: tuple[str, ...] | None = None
    one_hot: bool = False
    missing: int | None = None      # a number column that may be missing: its "is missing" feature
    integral: bool = False          # a number column of whole numbers (the schema's integer, ordinal, binary)

    @property
    def every_feature(self) -> tuple[int, ...]:
        """The model features this column is read from, its "is missing" feature included."""
        return self.features + ((self.missing,) if self.missing is not None else ())


def _level(feature: str, group: str) -> str:
    for sep in ("=", "_"):
        if feature.startswith(group + sep):
            return feature[len(group) + 1:]
    return feature


def analyst_columns(ens: TreeEnsemble, schema: Schema | None = None) -> list[Column]:
    """The analyst's columns of ``ens`` (and its schema's one-hot groups), in the
    order of their first feature."""
    names = list(ens.feature_names)
    states = indicator_of(ens)
    taken: set[int] = set(states.values())
    out = _expanded_columns(ens, taken) + _group_columns(schema, names, taken)
    for j, n in enumerate(names):
        if j in taken:
            continue
        cats = ens.categories[j] if ens.categories else None
        whole = schema is not None and cats is None and schema.features[j].kind in INTEGRAL_KINDS
        out.append(Column(str(n), (j,), None if cats is None else tuple(str(c) for c in cats), False,
                          states.get(j), whole))
    return sorted(out, key=lambda c: min(c.features))


def _expanded_columns(ens: TreeEnsemble, taken: set[int]) -> list[Column]:
    """The category columns of the one-hot rewrite of a model's categorical splits
    (:mod:`core.model.categorical`); their features added to ``taken``."""
    exp = ens.meta.get("expanded")
    out: list[Column] = []
    if not exp:
        return out
    for j, cols in enumerate(exp["columns"]):
        if exp["categories"][j] is not None:
            out.append(Column(str(exp["names"][j]), tuple(cols), tuple(str(c) for c in exp["categories"][j]),
                              True))
            taken.update(cols)
    return out


def _group_columns(schema: Schema | None, names: list[str], taken: set[int]) -> list[Column]:
    """The schema's one-hot groups (of two columns or more not ``taken``) as category
    columns; their features added to ``taken``."""
    out: list[Column] = []
    if schema is None:
        return out
    for g, idx in schema.groups().items():
        idx = [i for i in idx if i not in taken]
        if len(idx) >= 2:
            out.append(Column(str(g), tuple(idx), tuple(_level(names[i], str(g)) for i in idx), True))
            taken.update(idx)
    return out


def columns_of(columns: Sequence[Column], features: Iterable[int]) -> list[str]:
    """The analyst columns the given model features belong to (each once, in order)."""
    owner = {j: c.name for c in columns for j in c.features}
    seen: list[str] = []
    for j in features:
        name = owner.get(int(j), str(j))
        if name not in seen:
            seen.append(name)
    return seen


def value_of(column: Column, x: np.ndarray) -> Any:
    """Column ``column`` of row ``x`` (model features) as a plain value: a number
    (an ``int`` for a whole number of an integer column), a category's name, or
    None for a missing value (or a category column with none of its categories)."""
    c = column
    if c.categories is None:
        return _number_value(c, x)
    if c.one_hot:
        hot = [k for k, j in enumerate(c.features) if x[j] > 0.5]
        return c.categories[hot[0]] if hot else None
    k = int(x[c.features[0]])
    return c.categories[k] if 0 <= k < len(c.categories) else None


def _number_value(c: Column, x: np.ndarray) -> float | int | None:
    """A number column's value: None when missing, an ``int`` for a whole number of an integer column."""
    if c.missing is not None and x[c.missing] > 0.5:
        return None
    v = float(x[c.features[0]])
    return int(v) if c.integral and v.is_integer() and abs(v) < 2**53 else v


def column_values(columns: Sequence[Column], x: np.ndarray) -> dict[str, Any]:
    """Row ``x`` (model features) as the analyst's values: a number (whole numbers of
    an integer column as ``int``), a category's name, :data:`MISSING` for a missing
    number, :data:`NONE` for a category column with none of its categories."""
    x = np.asarray(x, dtype=float)
    out: dict[str, Any] = {}
    for c in columns:
        v = value_of(c, x)
        out[c.name] = v if v is not None else MISSING if c.categories is None else NONE
    return out


def row_record(columns: Sequence[Column], x: np.ndarray | None) -> dict[str, Any] | None:
    """Row ``x`` as ``{column: value}`` (:func:`value_of`; None for a missing value);
    None without a row."""
    if x is None:
        return None
    x = np.asarray(x, dtype=float)
    return {c.name: value_of(c, x) for c in columns}


def _text(c: Column, v: Any, before: bool) -> str:
    """A value as a change shows it: a category by name, a missing value as "missing"; a
    number before the change to 6 significant digits, after it in full (the checked value)."""
    if v is None:
        return MISSING if c.categories is None else NONE
    if c.categories is not None:
        return str(v)
    return approx_text(v, 6) if before else number_text(v)


def changed_columns(columns: Sequence[Column], x: np.ndarray, x_cf: np.ndarray) -> list[Column]:
    """The columns whose value differs between ``x`` and ``x_cf`` (a fill of a missing
    value is one change of its column; a category switch one change)."""
    x, x_cf = np.asarray(x, dtype=float), np.asarray(x_cf, dtype=float)
    return [c for c in columns if value_of(c, x) != value_of(c, x_cf)]


def change_records(columns: Sequence[Column], x: np.ndarray, x_cf: np.ndarray) -> list[dict[str, Any]]:
    """The moves from ``x`` to ``x_cf``, one per changed column: ``{"column", "from",
    "to", "text"}``, the values as :func:`value_of` gives them (full precision, None
    for missing) and the text as :func:`changes_text` writes it."""
    x, x_cf = np.asarray(x, dtype=float), np.asarray(x_cf, dtype=float)
    out = []
    for c in changed_columns(columns, x, x_cf):
        a, b = value_of(c, x), value_of(c, x_cf)
        out.append({"column": c.name, "from": a, "to": b,
                    "text": f"{c.name}: {_text(c, a, True)} → {_text(c, b, False)}"})
    return out


def apply_values(columns: Sequence[Column], x: np.ndarray, values: Mapping[str, Any]) -> np.ndarray:
    """``x`` with the analyst's ``values`` written into the model's features: a
    number as is, a category as its code or as its one-hot column set (all
    others cleared). Raises ValueError naming the column for a value that is
    not a number or not one of its categories."""
    out = np.array(x, dtype=float)
    for c in columns:
        if c.name not in values:
            continue
        if c.categories is None:
            _write_number(out, c, values[c.name])
        else:
            _write_category(out, c, c.categories, values[c.name])
    return out


def _is_missing_value(v: Any) -> bool:
    """None, NaN or the text "missing" (any case, spaces around): a number given no value."""
    return v is None or (isinstance(v, str) and v.strip().lower() == MISSING) or (
        isinstance(v, float) and np.isnan(v))


def _write_number(out: np.ndarray, c: Column, v: Any) -> None:
    """A number column's value into ``out``: its "is missing" feature set, else the number, checked."""
    if c.missing is not None:
        gone = _is_missing_value(v)
        out[c.missing] = 1.0 if gone else 0.0
        if gone:
            return
    try:
        num = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{c.name}: {v!r} is not a number.") from None
    if not np.isfinite(num):
        raise ValueError(f"{c.name}: give a finite number, not {v!r}.")
    out[c.features[0]] = num


def _write_category(out: np.ndarray, c: Column, categories: tuple[str, ...], v: Any) -> None:
    """A category column's value into ``out``: its code, or its one-hot column set (all others cleared)."""
    text = str(v)
    if text != NONE and text not in categories:
        raise ValueError(f"{c.name}: {text!r} is not one of its categories ({', '.join(categories[:8])}"
                         f"{'…' if len(categories) > 8 else ''}).")
    k = categories.index(text) if text != NONE else len(categories)
    if c.one_hot:
        out[list(c.features)] = 0.0
        if k < len(categories):
            out[c.features[k]] = 1.0
    else:
        out[c.features[0]] = float(k)


def changes_text(columns: Sequence[Column], x: np.ndarray, x_cf: np.ndarray, sep: str = "; ") -> str:
    """The moves from ``x`` to ``x_cf`` in the analyst's columns, ``column: before → after``:
    a category switch is one move by name; the value after in full (the checked value,
    :func:`core.shown.number_text`), the value before to 6 significant digits."""
    return sep.join(r["text"] for r in change_records(columns, x, x_cf))


def recourse_frame(columns: Sequence[Column], X: np.ndarray, X_cf: np.ndarray, prefix: str = "cf:"
                   ) -> pd.DataFrame:
    """Per row of ``X`` and its counterfactual in ``X_cf`` (a row of NaN: none), the
    number of columns changed (``n_changed``), the changes as text (``changes``) and,
    beside them, the counterfactual's value of every column at full precision
    (``{prefix}{column}``: :func:`value_of`, None where missing or without a
    counterfactual): what a per-row export holds."""
    X, X_cf = np.atleast_2d(np.asarray(X, dtype=float)), np.atleast_2d(np.asarray(X_cf, dtype=float))
    n_changed, texts = [], []
    values: dict[str, list[Any]] = {f"{prefix}{c.name}": [] for c in columns}
    for x, cf in zip(X, X_cf):
        found = bool(np.all(np.isfinite(cf)))
        recs = change_records(columns, x, cf) if found else []
        n_changed.append(float(len(recs)) if found else math.nan)
        texts.append("; ".join(r["text"] for r in recs))
        for c in columns:
            values[f"{prefix}{c.name}"].append(value_of(c, cf) if found else None)
    out = pd.DataFrame({"n_changed": n_changed, "changes": texts}, index=range(len(X)))
    for k, v in values.items():
        out[k] = pd.Series(v, index=out.index, dtype=object)
    return out


def values_beside(table: pd.DataFrame, columns: Sequence[Column], x: np.ndarray, x_cf: np.ndarray | None
                  ) -> pd.DataFrame:
    """A table with one row per analyst column (its ``column`` field: names), with the
    row's and the counterfactual's values at full precision beside its texts
    (``original value``, ``counterfactual value``; :func:`value_of`, None where missing)."""
    a = row_record(columns, x) or {}
    b = row_record(columns, x_cf) or {}
    names = [str(n) for n in table["column"]]
    return table.assign(**{"original value": pd.Series([a.get(n) for n in names], index=table.index, dtype=object),
                           "counterfactual value": pd.Series([b.get(n) for n in names], index=table.index,
                                                             dtype=object)})


def box_record(columns: Sequence[Column], lower: np.ndarray, upper: np.ndarray,
               features: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """A rule's box ``lower < x <= upper`` (model features) as conditions on the
    analyst's columns, one per column it bounds (among ``features``, default all):

    * a number: ``{"column", "greater_than", "at_most"}`` (exact bounds, the open ones
      absent); a column of whole numbers ``{"column", "at_least", "at_most"}`` as
      integers; ``"missing": true`` (it must be missing) or ``false`` (it must have a
      value) where the rule bounds its "is missing" feature;
    * a category column: ``{"column", "in": [categories]}``, the categories the box
      allows (``None`` in the list: none of them, a missing or unseen value).
    """
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    box = _Box(lower, upper, set(range(lower.size)) if features is None else {int(j) for j in features})
    out: list[dict[str, Any]] = []
    for c in columns:
        if not any(box.bounded(j) for j in c.every_feature):
            continue
        rec = _number_condition(c, box) if c.categories is None else _category_condition(c, box)
        if rec is not None:
            out.append(rec)
    return out


@dataclass(frozen=True)
class _Box:
    """A rule's box ``lower < x <= upper`` over the model features ``feats`` (the others unbounded)."""

    lower: np.ndarray
    upper: np.ndarray
    feats: set[int]

    def bounded(self, j: int) -> bool:
        return j in self.feats and bool(np.isfinite(self.lower[j]) or np.isfinite(self.upper[j]))

    def holds(self, j: int, v: float) -> bool:
        return j not in self.feats or bool(self.lower[j] < v <= self.upper[j])


def _number_condition(c: Column, box: _Box) -> dict[str, Any] | None:
    """A number column's condition: must it be missing or have a value, and its bounds
    (None when the box leaves it free)."""
    rec: dict[str, Any] = {"column": c.name}
    k = c.missing
    if k is not None and box.bounded(k):
        can_miss, can_have = box.holds(k, 1.0), box.holds(k, 0.0)
        if can_miss != can_have:
            rec["missing"] = can_miss
        if not can_have:
            return rec
    rec.update(_bounds(c, box, c.features[0]))
    return rec if len(rec) > 1 else None


def _bounds(c: Column, box: _Box, j: int) -> dict[str, Any]:
    """The finite bounds of feature ``j``: exact (``greater_than``, ``at_most``), or for a
    column of whole numbers as integers (``at_least``, ``at_most``)."""
    if not box.bounded(j):
        return {}
    lo, hi = float(box.lower[j]), float(box.upper[j])
    out: dict[str, Any] = {}
    if c.integral:
        if math.isfinite(lo):
            out["at_least"] = int(math.floor(lo)) + 1
        if math.isfinite(hi):
            out["at_most"] = int(math.floor(hi))
    else:
        if math.isfinite(lo):
            out["greater_than"] = lo
        if math.isfinite(hi):
            out["at_most"] = hi
    return out


def _category_condition(c: Column, box: _Box) -> dict[str, Any] | None:
    """A category column's condition, the categories the box allows (None: a missing or
    unseen value); None when it allows every one."""
    assert c.categories is not None
    allowed = _allowed_one_hot(c, box) if c.one_hot else _allowed_codes(c, box)
    if len(allowed) == len(c.categories) + 1:
        return None
    return {"column": c.name, "in": allowed}


def _allowed_one_hot(c: Column, box: _Box) -> list[Any]:
    """The categories whose one-hot column alone may be 1 (None: all may be 0)."""
    assert c.categories is not None
    one = [box.holds(j, 1.0) for j in c.features]
    zero = [box.holds(j, 0.0) for j in c.features]
    allowed: list[Any] = [cat for k, cat in enumerate(c.categories)
                          if one[k] and all(zero[i] for i in range(len(zero)) if i != k)]
    if all(zero):
        allowed.append(None)
    return allowed


def _allowed_codes(c: Column, box: _Box) -> list[Any]:
    """The categories whose code the box allows (None: the missing code)."""
    assert c.categories is not None
    j = c.features[0]
    allowed: list[Any] = [cat for k, cat in enumerate(c.categories) if box.holds(j, float(k))]
    if box.holds(j, float(len(c.categories))):
        allowed.append(None)
    return allowed


def _finite(v: Any) -> float | None:
    return float(v) if v is not None and math.isfinite(float(v)) else None


def _json_ready(v: Any) -> Any:
    """:func:`core.jsonable.plain`, with infinite and NaN numbers as None (JSON has no such numbers)."""
    v = plain(v)
    if isinstance(v, dict):
        return {k: _json_ready(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_ready(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


ROLES = ("fixed", "increase_only", "decrease_only")


def _settings_record(columns: Sequence[Column], params: Mapping[str, Any], names: Sequence[str] | None
                     ) -> dict[str, Any]:
    """A query's settings with its feature lists (fixed, increase only, decrease only) in
    the analyst's columns: a one-hot column once; a number's "is missing" feature not as a
    column of its own: held fixed, its column is listed under ``kept_missing``;
    decrease-only is its default (a known value never becomes missing), not listed."""
    out: dict[str, Any] = _json_ready(dict(params))
    owners = _Owners({j: c.name for c in columns for j in c.features},
                     {c.missing: c.name for c in columns if c.missing is not None},
                     {str(n): j for j, n in enumerate(names or ())})
    for role in ROLES:
        items = out.get(role)
        if isinstance(items, list):
            out[role] = _role_columns(items, role, owners, out)
    return out


@dataclass(frozen=True)
class _Owners:
    """Whose a model feature is: an analyst column's (``owner``), a number's "is missing"
    feature (``state``: its column), and the features by name (``index``)."""

    owner: dict[int, str]
    state: dict[int, str]
    index: dict[str, int]

    def feature_of(self, item: Any) -> int | None:
        """The feature a settings list names: by name, by index, or by its "is missing" name."""
        j = self.index.get(str(item), int(item) if str(item).isdigit() else None)
        if j is None and str(item).endswith(SUFFIX):            # no names given: the indicator's own name
            j = next((k for k, c in self.state.items() if f"{c}{SUFFIX}" == str(item)), None)
        return j


def _role_columns(items: list[Any], role: str, owners: _Owners, out: dict[str, Any]) -> list[str]:
    """A settings list (fixed, increase only, decrease only) as the analyst's columns, each
    once; an "is missing" feature listed in ``out`` under ``kept_missing`` (fixed) or
    ``may_become_missing`` (increase only), its default (decrease only) not at all."""
    listed: list[str] = []
    for item in items:
        j = owners.feature_of(item)
        if j in owners.state:
            if role != "decrease_only":
                key = "kept_missing" if role == "fixed" else "may_become_missing"
                out.setdefault(key, []).append(owners.state[j])
            continue
        name = owners.owner.get(j, str(item)) if j is not None else str(item)
        if name not in listed:
            listed.append(name)
    return listed


def result_record(columns: Sequence[Column], res: CounterfactualResult, names: Sequence[str] | None = None
                  ) -> dict[str, Any]:
    """An optimal counterfactual in the analyst's columns, as its JSON export holds it:
    the status and what it guarantees, cost, gap (None when not known), the query and
    the counterfactual as ``{column: value}`` (:func:`row_record`: None for a missing
    value, also one that stays missing), the changes with their values
    (:func:`change_records`), the settings with their feature lists in the analyst's
    columns (``names``: the model's feature names, to read those lists), the
    alternatives the same way, nested; beside them the one result shape's header
    (``kind``, ``elapsed``, ...: :func:`core.model.result.export`)."""
    return export(res, _record(columns, res, names))


def _record(columns: Sequence[Column], res: CounterfactualResult, names: Sequence[str] | None) -> dict[str, Any]:
    x = res.x if res.found else None
    return {
        "status": res.status, "proven_optimal": bool(res.found and res.guarantee is not None
                                                     and res.guarantee.kind == "proven_optimal"),
        "guarantee": None if res.guarantee is None else res.guarantee.to_dict(), "valid": res.valid,
        "cost": _finite(res.cost), "gap": _finite(res.gap), "lower_bound": _finite(res.lower_bound),
        "solve_time_s": round(float(res.elapsed), 4), "backend": res.backend, "message": res.message,
        "prediction": _json_ready(res.prediction),
        "x_query": row_record(columns, res.x_query), "x": row_record(columns, x),
        "changes": [] if x is None or res.x_query is None else change_records(columns, res.x_query, x),
        "params": _settings_record(columns, res.params, names),
        "alternatives": [_record(columns, a, names) for a in res.alternatives],
        "timings": _json_ready(res.timings),
    }
