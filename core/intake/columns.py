"""The analyst's columns over the model's features.

The analyses read one float per model feature; for a categorical column the
model may see one 0/1 feature per category (a pipeline's or the data's one-hot
group, or the exact one-hot rewrite of a model's categorical splits,
:mod:`core.model.categorical`). What the analyst reads and edits is the table's own
columns: one :class:`Column` per raw column, a category column being one
choice among its categories (never two at once). Used by the pages (counts,
rule sizes, the what-if editor, sample tables) so they speak in the table's
columns whatever the model's encoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from core.model.missing import indicator_of
from core.shown import approx_text, number_text

if TYPE_CHECKING:
    from core.model import TreeEnsemble
    from core.schema import Schema

__all__ = ["Column", "analyst_columns", "column_values", "apply_values", "columns_of", "changes_text", "MISSING"]

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


def _level(feature: str, group: str) -> str:
    for sep in ("=", "_"):
        if feature.startswith(group + sep):
            return feature[len(group) + 1:]
    return feature


def analyst_columns(ens: TreeEnsemble, schema: Schema | None = None) -> list[Column]:
    """The analyst's columns of ``ens`` (and its schema's one-hot groups), in the
    order of their first feature."""
    names = list(ens.feature_names)
    out: list[Column] = []
    states = indicator_of(ens)
    taken: set[int] = set(states.values())
    exp = ens.meta.get("expanded")
    if exp:
        for j, cols in enumerate(exp["columns"]):
            if exp["categories"][j] is not None:
                out.append(Column(str(exp["names"][j]), tuple(cols), tuple(str(c) for c in exp["categories"][j]),
                                  True))
                taken.update(cols)
    if schema is not None:
        for g, idx in schema.groups().items():
            idx = [i for i in idx if i not in taken]
            if len(idx) >= 2:
                out.append(Column(str(g), tuple(idx), tuple(_level(names[i], str(g)) for i in idx), True))
                taken.update(idx)
    for j, n in enumerate(names):
        if j in taken:
            continue
        cats = ens.categories[j] if ens.categories else None
        out.append(Column(str(n), (j,), None if cats is None else tuple(str(c) for c in cats), False,
                          states.get(j)))
    return sorted(out, key=lambda c: min(c.features))


def columns_of(columns: Sequence[Column], features: Iterable[int]) -> list[str]:
    """The analyst columns the given model features belong to (each once, in order)."""
    owner = {j: c.name for c in columns for j in c.features}
    seen: list[str] = []
    for j in features:
        name = owner.get(int(j), str(j))
        if name not in seen:
            seen.append(name)
    return seen


def column_values(columns: Sequence[Column], x: np.ndarray) -> dict[str, Any]:
    """Row ``x`` (model features) as the analyst's values: a number, or a category's name."""
    x = np.asarray(x, dtype=float)
    out: dict[str, Any] = {}
    for c in columns:
        if c.categories is None:
            out[c.name] = MISSING if c.missing is not None and x[c.missing] > 0.5 else float(x[c.features[0]])
        elif c.one_hot:
            hot = [k for k, j in enumerate(c.features) if x[j] > 0.5]
            out[c.name] = c.categories[hot[0]] if hot else NONE
        else:
            k = int(x[c.features[0]])
            out[c.name] = c.categories[k] if 0 <= k < len(c.categories) else NONE
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
        v = values[c.name]
        if c.categories is None and c.missing is not None:
            gone = v is None or (isinstance(v, str) and v.strip().lower() == MISSING) or (
                isinstance(v, float) and np.isnan(v))
            out[c.missing] = 1.0 if gone else 0.0
            if gone:
                continue
        if c.categories is None:
            try:
                num = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{c.name}: {v!r} is not a number.") from None
            if not np.isfinite(num):
                raise ValueError(f"{c.name}: give a finite number, not {v!r}.")
            out[c.features[0]] = num
            continue
        text = str(v)
        if text != NONE and text not in c.categories:
            raise ValueError(f"{c.name}: {text!r} is not one of its categories ({', '.join(c.categories[:8])}"
                             f"{'…' if len(c.categories) > 8 else ''}).")
        k = c.categories.index(text) if text != NONE else len(c.categories)
        if c.one_hot:
            out[list(c.features)] = 0.0
            if k < len(c.categories):
                out[c.features[k]] = 1.0
        else:
            out[c.features[0]] = float(k)
    return out


def changes_text(columns: Sequence[Column], x: np.ndarray, x_cf: np.ndarray, sep: str = "; ") -> str:
    """The moves from ``x`` to ``x_cf`` in the analyst's columns, ``column: before → after``:
    a category switch is one move by name; the value after in full (the checked value,
    :func:`core.shown.number_text`), the value before to 6 significant digits."""
    a, b = column_values(columns, x), column_values(columns, x_cf)
    out = []
    for c in columns:
        if a[c.name] == b[c.name]:
            continue
        if c.categories is None:
            before = a[c.name] if a[c.name] == MISSING else approx_text(a[c.name], 6)
            out.append(f"{c.name}: {before} → {b[c.name] if b[c.name] == MISSING else number_text(b[c.name])}")
        else:
            out.append(f"{c.name}: {a[c.name]} → {b[c.name]}")
    return sep.join(out)
