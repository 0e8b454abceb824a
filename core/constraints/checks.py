"""Constraints that no row can meet, where that is cheap to see: a comparison of
numbers only that is false, and bounds on the same expression (up to a factor)
that exclude each other. Whether all the constraints together leave any point for
a row is the solver's question."""

from __future__ import annotations

from typing import NamedTuple

from core.constraints.forms import Constraint, LinearForm
from core.constraints.lexicon import where
from core.errors import ConstraintError

__all__ = ["check_contradictions"]


# ------------------------------------------------------------- contradictions
class _Bound(NamedTuple):
    value: float
    strict: bool
    source: Constraint


def _constant_holds(f: LinearForm) -> bool:
    c = f.const
    return {"<=": c <= 0, ">=": c >= 0, "==": c == 0, "<": c < 0, ">": c > 0}[f.sense]


def _normalised(f: LinearForm) -> tuple[tuple[tuple[bool, int, float], ...], float, str]:
    """``f`` as ``e <sense> value`` with ``e``'s first coefficient 1: (e's terms, value, sense)."""
    terms = [(False, j, c) for j, c in f.new] + [(True, j, c) for j, c in f.old]
    s = terms[0][2]
    flip = {"<=": ">=", ">=": "<=", "<": ">", ">": "<", "==": "=="}
    key = tuple((old, j, round(c / s, 12)) for old, j, c in terms)
    return key, -f.const / s, f.sense if s > 0 else flip[f.sense]


def _clash(lo: _Bound, hi: _Bound) -> bool:
    eps = 1e-9 * max(1.0, abs(lo.value), abs(hi.value))
    return lo.value > hi.value + eps or (abs(lo.value - hi.value) <= eps and (lo.strict or hi.strict))


def _tighter(new: _Bound, old: _Bound | None, lower: bool) -> _Bound:
    if old is None:
        return new
    if new.value != old.value:
        return new if (new.value > old.value) == lower else old
    return new if new.strict and not old.strict else old


def check_contradictions(cons: list[Constraint]) -> None:
    """Refuse what no row can meet and is cheap to see: a comparison of numbers
    only that is false, and bounds on the same expression (up to a factor) that
    exclude each other (``a >= 5`` and ``a <= 3``; ``delta(a) > 0`` and ``delta(a) <= 0``).
    Whether all of them together leave any point is the solver's question."""
    bounds: dict[tuple[tuple[bool, int, float], ...], list[_Bound | None]] = {}
    for c in cons:
        f = c.form
        if not isinstance(f, LinearForm):
            continue
        if not f.new and not f.old:
            if not _constant_holds(f):
                raise ConstraintError(f"{where(c.line, None, c.text)}: holds no feature and is false, so no row can "
                                      "meet it. Correct it or remove it.", c.line)
            continue
        key, value, sense = _normalised(f)
        lo, hi = bounds[key] = _tightened(bounds.get(key, [None, None]), value, sense, c)
        if lo is not None and hi is not None and _clash(lo, hi):
            _refuse_clash(lo, hi)


def _tightened(held: list[_Bound | None], value: float, sense: str, c: Constraint) -> list[_Bound | None]:
    """An expression's ``[lower, upper]`` bounds, tightened by ``c`` (``e <sense> value``)."""
    lo, hi = held
    if sense in (">=", ">", "=="):
        lo = _tighter(_Bound(value, sense == ">", c), lo, lower=True)
    if sense in ("<=", "<", "=="):
        hi = _tighter(_Bound(value, sense == "<", c), hi, lower=False)
    return [lo, hi]


def _refuse_clash(lo: _Bound, hi: _Bound) -> None:
    """Refuse two bounds on one expression that exclude each other, naming both lines (or one)."""
    a, b = sorted((lo.source, hi.source), key=lambda s: s.line)
    which = (f"line {a.line} ({a.text!r}) and line {b.line} ({b.text!r}) exclude each other"
             if a is not b else f"line {a.line} ({a.text!r}) excludes itself")
    raise ConstraintError(f"The constraints contradict each other for every row: {which}. Correct or "
                          "remove one of them.", b.line)
