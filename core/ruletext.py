"""One way to write a rule's conditions, for every analysis that shows rules.

A rule is a box ``lower < x <= upper`` (infinite bounds are absent). Numbers
read ``a < name <= b``, ``name > a`` or ``name <= b`` (``>=`` and ``<`` where a bound is one
float step below a short number, as a filter's ``x >= 30`` is kept) with 6 significant
digits at most (rounded down, :func:`core.shown.bound_text`); a one-hot group (columns named ``group=level``) reads as one
condition on the group: ``group = level`` when one column must be 1, ``group
not in {level, ...}`` when columns must be 0 (T-CREx appendix A's one-hot and
multi-cold rules; counterfactual rules' groups moved as one). Used by
:mod:`core.rules` (counterfactual rules) and :mod:`core.tcrex` (rules and
metarules), and through them by the pages, the audit and the case story.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from core.model.missing import SUFFIX
from core.shown import bound_text, parse_number

__all__ = ["fmt", "conditions", "rule_text"]


def fmt(v: float) -> str:
    """A bound as written in a rule (:func:`core.shown.bound_text`: exact, or
    rounded down so the condition is true of the number shown)."""
    return bound_text(v)


def _group_condition(g: list[int], lower: np.ndarray, upper: np.ndarray, names: Sequence[str]) -> str | None:
    label = str(names[g[0]]).split("=")[0]
    hot = [j for j in g if np.isfinite(lower[j]) and lower[j] >= 0.5 - 1e-9]
    cold = [j for j in g if np.isfinite(upper[j]) and upper[j] < 1.0]

    def level(j: int) -> str:
        return str(names[j]).split("=", 1)[-1]

    if hot:
        return f"{label} = {level(hot[0])}"
    if cold:
        return f"{label} not in {{{', '.join(level(j) for j in cold)}}}"
    return None


def missing_condition(name: str, lo: float, hi: float) -> str | None:
    """``"income is missing"`` / ``"income has a value"`` for a bound on the 0/1 column
    ``"income is missing"`` (:mod:`core.model.missing`); None for any other column."""
    if not name.endswith(SUFFIX):
        return None
    if np.isfinite(lo) and lo >= 0.5 - 1e-9:
        return name
    if np.isfinite(hi) and hi < 1.0:
        return f"{name[:-len(SUFFIX)]} has a value"
    return None


def _next_short(v: float) -> float | None:
    """The float just above ``v`` when it is written exactly in few digits and ``v`` is not
    (``v`` is then one step below a short number: a filter's ``x >= 30`` is kept as
    ``x > nextafter(30, -inf)``, :mod:`core.rules.filters`); else None."""
    up = float(np.nextafter(v, np.inf))
    exact = [parse_number(fmt(t)) == t for t in (up, v)]
    return up if exact[0] and (not exact[1] or up == 0) else None


def _feature_condition(name: str, lo: float, hi: float) -> str | None:
    """One column's condition (an "is missing" column's state in words), or None when it is unbounded.
    A bound one float step below a short number reads with that number: ``x > 29.999999999999996``
    is ``x >= 30`` and ``x <= 49999.99999999999`` is ``x < 50000``, exactly (no float lies between)."""
    state = missing_condition(name, lo, hi)
    if state is not None:
        return state
    lo_at, hi_at = (_next_short(b) if np.isfinite(b) else None for b in (lo, hi))
    lo_op, lo_v = ("<=", lo_at) if lo_at is not None else ("<", lo)
    hi_op, hi_v = ("<", hi_at) if hi_at is not None else ("<=", hi)
    if np.isfinite(lo) and np.isfinite(hi):
        return f"{fmt(lo_v)} {lo_op} {name} {hi_op} {fmt(hi_v)}"
    if np.isfinite(lo):
        return f"{name} {lo_op.replace('<', '>')} {fmt(lo_v)}"
    if np.isfinite(hi):
        return f"{name} {hi_op} {fmt(hi_v)}"
    return None


def conditions(lower: np.ndarray, upper: np.ndarray, names: Sequence[str], groups: Sequence[Sequence[int]] = (),
               features: Sequence[int] | None = None) -> tuple[list[tuple[list[int], str]], list[str]]:
    """The rule's conditions as ``(columns, text)`` (one per bounded feature or
    one-hot group, in feature order), and the labels of ``features`` left
    unbounded. ``features`` defaults to every column."""
    feats = list(range(len(names))) if features is None else list(features)
    fset = set(feats)
    out, free, done = [], [], set()
    for g in groups:
        g = [j for j in g if j in fset]
        if not g:
            continue
        done.update(g)
        text = _group_condition(g, lower, upper, names)
        if text is None:
            free.append(str(names[g[0]]).split("=")[0])
        else:
            out.append((g, text))
    for j in feats:
        if j in done:
            continue
        text = _feature_condition(str(names[j]), lower[j], upper[j])
        if text is None:
            free.append(str(names[j]))
        else:
            out.append(([j], text))
    out.sort(key=lambda item: min(item[0]))
    return out, free


def rule_text(features: Sequence[int], lower: np.ndarray, upper: np.ndarray, names: Sequence[str],
              groups: Sequence[Sequence[int]] = ()) -> str:
    """``a < name <= b and ...`` over the bounded features, then the features
    left free: ``(any value of ...)``."""
    conds, free = conditions(lower, upper, names, groups, features)
    text = " and ".join(t for _, t in conds)
    states = [f[:-len(SUFFIX)] for f in free if f.endswith(SUFFIX)]
    free = [f for f in free if not f.endswith(SUFFIX)]
    extra = ([f"any value of {', '.join(free)}"] if free else []) + (
        [f"{', '.join(states)} missing or not"] if states else [])
    if extra:
        text += f" ({'; '.join(extra)})"
    return text.strip()
