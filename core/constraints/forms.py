"""The typed forms of the constraint language, and how a point is checked against them.

A line of the language (:mod:`core.constraints`) becomes one :class:`Constraint`
whose ``form`` is a :class:`LinearForm` (one comparison), an :class:`Implication`
(comparisons that require others) or a :class:`CategoryMove` (where a row at one
level of a categorical feature may go). :class:`Constraints` holds the lines of a
schema and checks points in the codes view: rows in the schema's feature order,
a categorical feature's value its code (an index into its ``levels``), one-hot
columns 0/1.

Every check takes the row ``x_hat`` (the values ``old(...)`` reads) and the new
points ``X``. A non-strict comparison holds within ``tol`` scaled by the size of
its terms (``tol * (1 + |a| @ |x| + |rhs|)``: round-off of a solver's answer on
large values is no violation); a strict one holds only strictly, so a point on
the boundary of ``a < 5`` breaks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, NamedTuple

import numpy as np

from core.constraints.moves import move_columns, resolve_level
from core.constraints.view import SchemaView
from core.errors import ConstraintError
from core.model.features import as_row, as_table
from core.typing import BoolArray, FloatArray, Row, Rows

__all__ = ["LinearForm", "Implication", "CategoryMove", "Constraint", "Constraints", "SENSES"]

#: the senses of a comparison, each read as ``lhs <sense> 0``
SENSES = ("<=", ">=", "==", "<", ">")


def _row(x_hat: Row) -> FloatArray:
    x = np.asarray(x_hat, dtype=np.float64)
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 1:
        raise ConstraintError(f"x_hat must be one row of numbers (the row's own values); got shape {x.shape}.")
    return x


def _points(X: Rows, d: int) -> FloatArray:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2 or A.shape[1] != d:
        raise ConstraintError(f"The new points must be a table of shape (n, {d}), one value per feature in the "
                              f"schema's order (as x_hat); got shape {A.shape}.")
    return A


def compare(lhs: FloatArray, rhs: FloatArray | float, sense: str, slack: FloatArray) -> BoolArray:
    """``lhs <sense> rhs`` row by row, equalities and non-strict sides within ``slack`` (NaN never holds)."""
    with np.errstate(invalid="ignore"):
        if sense == "<=":
            return lhs <= rhs + slack
        if sense == ">=":
            return lhs >= rhs - slack
        if sense == "==":
            return np.abs(lhs - rhs) <= slack
        if sense == "<":
            return lhs < rhs
        return lhs > rhs


@dataclass(frozen=True)
class LinearForm:
    """``sum(a * new) + sum(b * old) + const  <sense>  0``: one linear comparison.

    ``new`` and ``old`` are (feature index in the schema, coefficient) pairs, sorted
    by index, each index once, no zero coefficient: ``new`` over the point's values,
    ``old`` over the row's own values (``delta(f)`` is ``f - old(f)``, so it adds to
    both). ``sense`` is one of :data:`SENSES`; a strict sense stays strict unless
    every feature is integral and every number an integer (then the parser wrote
    ``> c`` as ``>= c + 1``)."""

    new: tuple[tuple[int, float], ...]
    old: tuple[tuple[int, float], ...]
    const: float
    sense: str

    def __post_init__(self) -> None:
        if self.sense not in SENSES:
            raise ConstraintError(f"A linear form's sense is one of {SENSES}; got {self.sense!r}.")

    @property
    def features(self) -> tuple[int, ...]:
        """The feature indices the form reads (new or old), sorted, each once."""
        return tuple(sorted({j for j, _ in self.new} | {j for j, _ in self.old}))

    def on_row(self, x_hat: Row) -> tuple[FloatArray, float, str]:
        """The form for the row ``x_hat``: ``(a, rhs, sense)`` with ``a @ x <sense> rhs``
        for a new point ``x``; ``a`` has shape (d,), d the length of ``x_hat``."""
        x = _row(x_hat)
        d = x.shape[0]
        top = max(self.features, default=-1)
        if top >= d:
            raise ConstraintError(f"x_hat has {d} values; this constraint reads feature index {top}. Give the row "
                                  "with one value per feature of the schema, in its order.")
        a = np.zeros(d)
        for j, c in self.new:
            a[j] += c
        rhs = -(self.const + float(sum(c * x[j] for j, c in self.old)))
        return a, rhs, self.sense

    def holds(self, x_hat: Row, X: Rows, tol: float = 1e-9) -> BoolArray:
        """Whether each new point of ``X`` (n, d) meets the form for the row ``x_hat``: bool (n,)."""
        a, rhs, sense = self.on_row(x_hat)
        A = _points(X, a.shape[0])
        lhs = A @ a
        slack = tol * (1.0 + np.abs(A) @ np.abs(a) + abs(rhs))
        return compare(lhs, rhs, sense, slack)


@dataclass(frozen=True)
class Implication:
    """``if P1 and P2 ... then C1 and C2 ...``: where every premise holds, every
    conclusion must hold (elsewhere nothing is required)."""

    premises: tuple[LinearForm, ...]
    conclusions: tuple[LinearForm, ...]

    def holds(self, x_hat: Row, X: Rows, tol: float = 1e-9) -> BoolArray:
        """Whether each new point of ``X`` (n, d) meets the implication: bool (n,)."""
        n = _points(X, _row(x_hat).shape[0]).shape[0]
        premised = np.ones(n, dtype=bool)
        for p in self.premises:
            premised &= p.holds(x_hat, X, tol)
        met = np.ones(n, dtype=bool)
        for c in self.conclusions:
            met &= c.holds(x_hat, X, tol)
        return ~premised | met


@dataclass(frozen=True)
class CategoryMove:
    """A row at ``level`` of ``feature`` (a categorical feature's name, or a one-hot
    group's name) may go to the levels ``to`` or stay; rows at other levels are
    not bound by it."""

    feature: str
    level: str
    to: tuple[str, ...]


@dataclass(frozen=True)
class Constraint:
    """One line of the language: its text as written (stripped), its 1-based line
    number, and its typed form."""

    text: str
    line: int
    form: LinearForm | Implication | CategoryMove


class _Move(NamedTuple):
    """A category move resolved on the schema: the feature's (or group's) name, the
    columns it reads (one column of codes, or the group's columns), the level it
    binds (a code, or a position in the group) and the levels a row there may
    reach (its own included)."""

    name: str
    columns: tuple[int, ...]
    one_hot: bool
    level: int
    allowed: frozenset[int]


def _levels_at(move: _Move, A: FloatArray) -> np.ndarray:
    """The level of each row of ``A`` for the move's feature: a code (categorical)
    or a position in the group (one-hot); -1 where there is none."""
    if move.one_hot:
        hot = A[:, list(move.columns)] > 0.5
        return np.where(hot.sum(axis=1) == 1, hot.argmax(axis=1), -1)
    v = A[:, move.columns[0]]
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (v == np.round(v))
    return np.where(ok, np.nan_to_num(v, nan=-1.0), -1.0).astype(np.int64)


class Constraints(tuple[Constraint, ...]):
    """The constraints of a schema, an immutable sequence of :class:`Constraint`.

    Made by :func:`core.constraints.parse` (or :meth:`core.schema.Schema.parsed_constraints`);
    it keeps the schema it was read against (``schema``), which category moves need
    to find their levels in the codes view.

    Examples
    --------
    >>> import numpy as np
    >>> from core.schema import FeatureSpec, Schema
    >>> from core.constraints import parse
    >>> schema = Schema([FeatureSpec("age", "integer", 18, 90), FeatureSpec("debt"), FeatureSpec("income")])
    >>> cons = parse("delta(age) >= 0\\ndebt - 0.4 * income <= 0", schema)
    >>> cons.texts
    ['delta(age) >= 0', 'debt - 0.4 * income <= 0']
    >>> cons.holds([30, 0.1, 1.0], [[31, 0.2, 1.0], [29, 0.5, 1.0]]).tolist()
    [[True, True], [False, False]]
    """

    schema: SchemaView | None

    def __new__(cls, items: Iterable[Constraint] = (), schema: SchemaView | None = None) -> Constraints:
        self = super().__new__(cls, tuple(items))
        wrong = [c for c in self if not isinstance(c, Constraint)]
        if wrong:
            raise ConstraintError(f"Constraints holds Constraint objects; got {type(wrong[0]).__name__}. Read the "
                                  "lines with core.constraints.parse(texts, schema).")
        self.schema = schema
        return self

    def __repr__(self) -> str:
        return f"Constraints({self.texts!r})"

    @property
    def texts(self) -> list[str]:
        """The lines as written (stripped), in order."""
        return [c.text for c in self]

    def linear(self) -> list[LinearForm]:
        """The single comparisons."""
        return [c.form for c in self if isinstance(c.form, LinearForm)]

    def implications(self) -> list[Implication]:
        """The ``if ... then ...`` lines."""
        return [c.form for c in self if isinstance(c.form, Implication)]

    def moves(self) -> list[CategoryMove]:
        """The category moves."""
        return [c.form for c in self if isinstance(c.form, CategoryMove)]

    # ---------------------------------------------------------------- moves
    @cached_property
    def _moves(self) -> dict[int, _Move]:
        """Each category move (by its position in the sequence) resolved on the schema."""
        out: dict[int, _Move] = {}
        for k, c in enumerate(self):
            if not isinstance(c.form, CategoryMove):
                continue
            if self.schema is None:
                raise ConstraintError("These constraints hold a category move but no schema to find its levels in; "
                                      "read them with core.constraints.parse(texts, schema).")
            name, columns, one_hot, levels = move_columns(self.schema, c.form.feature)
            at = resolve_level(c.form.level, levels)
            allowed = frozenset({at} | {resolve_level(t, levels) for t in c.form.to})
            out[k] = _Move(name, columns, one_hot, at, allowed)
        return out

    def _bound_moves(self, x: FloatArray) -> list[_Move]:
        """The moves that bind the row ``x`` (those for its level)."""
        return [m for m in self._moves.values() if int(_levels_at(m, x[None, :])[0]) == m.level]

    # --------------------------------------------------------------- checks
    def _row_of(self, x_hat: Row, what: str = "x_hat") -> FloatArray:
        if self.schema is None:
            return _row(x_hat)
        return as_row(x_hat, self.schema.names, error=ConstraintError, what=what, missing=True)

    def _points_of(self, X: Rows, d: int) -> FloatArray:
        if self.schema is None:
            return _points(X, d)
        return as_table(X, self.schema.names, error=ConstraintError, what="X", missing=True, one_row=True)

    def holds(self, x_hat: Row, X: Rows, tol: float = 1e-9) -> BoolArray:
        """Whether each constraint holds at each new point of ``X`` for the row ``x_hat``:
        bool of shape (n, k), k the number of constraints. A category move holds where
        the row is not at its level, or the point's level is one the move allows."""
        x = self._row_of(x_hat)
        A = self._points_of(X, x.shape[0])
        out = np.ones((A.shape[0], len(self)), dtype=bool)
        moves = self._moves
        for k, c in enumerate(self):
            if isinstance(c.form, CategoryMove):
                m = moves[k]
                if int(_levels_at(m, x[None, :])[0]) == m.level:
                    out[:, k] = np.isin(_levels_at(m, A), list(m.allowed))
            else:
                out[:, k] = c.form.holds(x, A, tol)
        return out

    def violated(self, x_hat: Row, x: Row, tol: float = 1e-9) -> list[int]:
        """The indices (in this sequence) of the constraints the point ``x`` breaks for the row ``x_hat``."""
        point = self._row_of(x, "x")
        return [int(k) for k in np.flatnonzero(~self.holds(x_hat, point[None, :], tol)[0])]

    def allowed_codes(self, x_hat: Row) -> dict[int, set[int]]:
        """Categorical feature index -> the codes a new point may take for the row
        ``x_hat`` (its own code included), for each categorical feature with a move
        for the row's level (several such moves: the codes all of them allow)."""
        out: dict[int, set[int]] = {}
        for m in self._bound_moves(self._row_of(x_hat)):
            if not m.one_hot:
                j = m.columns[0]
                out[j] = out[j] & m.allowed if j in out else set(m.allowed)
        return out

    def allowed_groups(self, x_hat: Row) -> dict[str, set[int]]:
        """One-hot group -> the column indices a new point may set for the row
        ``x_hat`` (its own column included), for each group with a move for the
        row's level (several such moves: the columns all of them allow)."""
        out: dict[str, set[int]] = {}
        for m in self._bound_moves(self._row_of(x_hat)):
            if m.one_hot:
                cols = {m.columns[p] for p in m.allowed}
                out[m.name] = out[m.name] & cols if m.name in out else cols
        return out
