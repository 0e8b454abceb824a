"""Which rules a row can reach under the analyst's constraints between features, and the
least move into a rule that keeps them.

T-CREx's rules and the counterfactual rules are boxes ``lower < x <= upper``; what a
person does with one is a move into it (:mod:`core.rules.onmodel`). The analyst's
constraints (:mod:`core.constraints`: comparisons over the new values, the row's own
values ``old(...)`` and the changes ``delta(...)``; implications; category moves) say
which moves a person can make. A rule is *reachable* from a row when some point of its
box, within the features' domain (the schema's range, widened to the row's own value;
0/1 for a binary feature) and the query's fixed and one-way features, satisfies every
constraint for that row. Its *least move* is such a point at the least distance
``sum |z_j - x_j| / span_j`` (the schema's spans): the move a person makes.

How it is decided, for many rows and one box at once:

* a category (a categorical feature's codes, a one-hot group) appears in no comparison
  (the language refuses it), so it is decided alone: the levels the box allows, that the
  row's category moves allow and that a fixed feature keeps; the row's own level when it
  is among them, else the one the box asks for (else the most frequent in the data, as
  :func:`core.rules.onmodel.edge_points` chooses);
* a comparison that reads the new value of one feature (``delta(a) <= 10``,
  ``b <= old(b) + 1``) bounds that feature; with the domain, the roles and the box, each
  other feature gets an interval ``[L, U]`` (an open end stepped as the solvers step it:
  the next integer of an integral feature, :data:`core.cells.problem.NUDGE` of the span of
  another), and the row's value clipped to it is the least move on that feature;
* when that point breaks a comparison of several features or an implication, the
  least move is a small mixed-integer program solved by HiGHS (scipy's ``milp``): the
  features' new values within their intervals, the cost above on ``z - x = p - n``, each
  comparison a row, each implication a binary that enforces its conclusions and binaries
  that break one of its premises otherwise (a big M from the intervals), as
  :mod:`core.solvers.constrained` writes them for the exact counterfactual.

Every point returned is checked against every constraint (the tolerance of
:meth:`core.constraints.Constraints.holds`); a point the check refuses is not returned, and
the rule counts as out of reach for that row: nothing is prescribed that was not checked.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

import numpy as np

from core.cells.problem import NUDGE
from core.constraints.forms import compare
from core.errors import QueryError

if TYPE_CHECKING:
    from core.constraints import Constraints, LinearForm
    from core.schema import Schema

__all__ = ["Reach", "reach_of", "resolve", "rule_reach"]

#: relative step of a strict comparison of continuous features (past the solver's tolerance, so the check holds)
STRICT = 1e-7


def _dense(terms: Iterable[tuple[int, float]], d: int) -> np.ndarray:
    a = np.zeros(d)
    for j, c in terms:
        a[j] += c
    return a


@dataclass(frozen=True)
class _Form:
    """A comparison ready for many rows: ``a_new @ z <sense> rhs(x)`` with ``rhs(x) = -(const + a_old @ x)``."""

    new: np.ndarray
    old: np.ndarray
    const: float
    sense: str

    @classmethod
    def of(cls, form: LinearForm, d: int) -> "_Form":
        return cls(_dense(form.new, d), _dense(form.old, d), float(form.const), form.sense)

    def rhs(self, X: np.ndarray) -> np.ndarray:
        cols = np.flatnonzero(self.old)
        return -(self.const + (X[:, cols] @ self.old[cols] if cols.size else np.zeros(len(X))))

    def holds(self, X: np.ndarray, Z: np.ndarray, tol: float = 1e-9) -> np.ndarray:
        cols = np.flatnonzero(self.new)
        rhs = self.rhs(X)
        lhs = Z[:, cols] @ self.new[cols] if cols.size else np.zeros(len(Z))
        slack = tol * (1.0 + np.abs(Z[:, cols]) @ np.abs(self.new[cols]) + np.abs(rhs))
        return compare(lhs, rhs, self.sense, slack)


@dataclass(frozen=True)
class _Bound:
    """A comparison of one feature's new value: ``z_j <sense> value(x)`` (sense turned by the sign)."""

    j: int
    form: _Form

    def value(self, X: np.ndarray) -> tuple[np.ndarray, str]:
        a = float(self.form.new[self.j])
        flip = {"<=": ">=", ">=": "<=", "<": ">", ">": "<", "==": "=="}
        return self.form.rhs(X) / a, self.form.sense if a > 0 else flip[self.form.sense]


@dataclass(frozen=True)
class _Implication:
    premises: tuple[_Form, ...]
    conclusions: tuple[_Form, ...]

    def holds(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        premised = np.ones(len(Z), dtype=bool)
        for p in self.premises:
            premised &= p.holds(X, Z)
        met = np.ones(len(Z), dtype=bool)
        for c in self.conclusions:
            met &= c.holds(X, Z)
        return ~premised | met


def _ranges(schema: Schema, arr: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The schema's range of each feature, [0, 1] for a binary or one-hot column."""
    lo, hi = arr["lower"].copy(), arr["upper"].copy()
    for j, f in enumerate(schema.features):
        if f.kind in ("binary", "one-hot"):
            lo[j], hi[j] = 0.0, 1.0
    return lo, hi


def _held(fixed: Iterable[int], groups: tuple[tuple[int, ...], ...]) -> set[int]:
    """The fixed columns: a fixed column of a one-hot group fixes its whole group."""
    held = set(int(j) for j in fixed)
    for g in groups:
        if held & set(g):
            held |= set(g)
    return held


def _sorted_forms(cons: Constraints, d: int) -> tuple[list[_Bound], list[_Form], list[_Form]]:
    """The linear constraints by how many new values they read: one (a bound on that feature),
    several (a row of the program), or none (they read the row alone: a row that breaks one
    reaches nothing)."""
    bounds, rows, given = [], [], []
    for form in cons.linear():
        f = _Form.of(form, d)
        news = np.flatnonzero(f.new)
        if news.size == 1:
            bounds.append(_Bound(int(news[0]), f))
        elif news.size == 0:
            given.append(f)
        else:
            rows.append(f)
    return bounds, rows, given


def _implications(cons: Constraints, d: int) -> tuple[_Implication, ...]:
    """The implications between linear comparisons, as forms on d features."""
    from core.constraints import Implication, LinearForm

    imps = []
    for imp in cons.implications():
        assert isinstance(imp, Implication)
        imps.append(_Implication(tuple(_Form.of(p, d) for p in imp.premises if isinstance(p, LinearForm)),
                                 tuple(_Form.of(c, d) for c in imp.conclusions if isinstance(c, LinearForm))))
    return tuple(imps)


@dataclass(frozen=True, eq=False)
class Reach:
    """The constraints in force for rules on a schema's features (see the module docstring).

    cons : the constraints (:class:`core.constraints.Constraints`, read against ``schema``).
    lo, hi, span : the schema's range and span per feature; integral : integer-valued
        features (not categorical codes). categorical : code column -> its number of levels.
    groups : the one-hot groups (column indices). fixed, increase_only, decrease_only :
        the query's roles (column indices; a fixed column of a group fixes its group).
    """

    cons: Constraints
    lo: np.ndarray
    hi: np.ndarray
    span: np.ndarray
    integral: np.ndarray
    categorical: dict[int, int]
    groups: tuple[tuple[int, ...], ...]
    fixed: frozenset[int] = frozenset()
    increase_only: frozenset[int] = frozenset()
    decrease_only: frozenset[int] = frozenset()
    _bounds: tuple[_Bound, ...] = field(default=(), repr=False)
    _rows: tuple[_Form, ...] = field(default=(), repr=False)
    _given: tuple[_Form, ...] = field(default=(), repr=False)
    _implications: tuple[_Implication, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, cons: Constraints, schema: Schema, *, fixed: Iterable[int] = (), increase_only: Iterable[int] = (),
           decrease_only: Iterable[int] = ()) -> "Reach":
        """The reach of ``cons`` on ``schema``'s features, with the query's roles (column indices)."""
        d = len(schema.features)
        arr = schema.arrays()
        lo, hi = _ranges(schema, arr)
        integral = np.array([f.integral and f.kind != "categorical" for f in schema.features], dtype=bool)
        groups = tuple(tuple(g) for g in schema.groups().values() if len(g) >= 2)
        held = _held(fixed, groups)
        bounds, rows, given = _sorted_forms(cons, d)
        return cls(cons, lo, hi, arr["span"].astype(float), integral,
                   {j: len(lv) for j, lv in schema.categorical().items()}, groups, frozenset(held),
                   frozenset(int(j) for j in increase_only) - held, frozenset(int(j) for j in decrease_only) - held,
                   tuple(bounds), tuple(rows), tuple(given), _implications(cons, d))

    @property
    def texts(self) -> list[str]:
        """The constraints as written."""
        return self.cons.texts

    @property
    def d(self) -> int:
        return int(self.lo.size)

    def __len__(self) -> int:
        return len(self.cons)

    # ------------------------------------------------------------------ checks
    def holds(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Does each point ``Z[i]`` keep every constraint for the row ``X[i]``? bool (n,)."""
        X, Z = np.atleast_2d(np.asarray(X, float)), np.atleast_2d(np.asarray(Z, float))
        ok = np.ones(len(Z), dtype=bool)
        for f in (*self._given, *(b.form for b in self._bounds), *self._rows):
            ok &= f.holds(X, Z)
        for imp in self._implications:
            ok &= imp.holds(X, Z)
        if self.cons.moves():
            codes, cols = self._move_masks(X)
            for j, allowed in codes.items():
                z = Z[:, j]
                valid = np.isfinite(z) & (z == np.round(z)) & (z >= 0) & (z < allowed.shape[1])
                at = np.where(valid, z, 0).astype(np.int64)
                ok &= ~valid | allowed[np.arange(len(Z)), at]
            ok &= ~np.any((Z > 0.5) & ~cols, axis=1)
        return ok

    def _move_masks(self, X: np.ndarray) -> tuple[dict[int, np.ndarray], np.ndarray]:
        """The rows' category moves: per code column, (n, levels) the codes each row may take;
        (n, d) the one-hot columns each row may set. Read once per distinct set of levels."""
        n = len(X)
        codes = {j: np.ones((n, k), dtype=bool) for j, k in self.categorical.items()}
        cols = np.ones((n, self.d), dtype=bool)
        if not self.cons.moves() or not n:
            return codes, cols
        read = sorted(set(self.categorical) | {j for g in self.groups for j in g})
        keys, inverse = np.unique(np.nan_to_num(X[:, read], nan=-1.0), axis=0, return_inverse=True)
        for k in range(len(keys)):
            rows = np.flatnonzero(inverse.ravel() == k)
            self._forbid_moves(X[rows[0]], rows, codes, cols)
        return codes, cols

    def _forbid_moves(self, x: np.ndarray, rows: np.ndarray, codes: dict[int, np.ndarray], cols: np.ndarray) -> None:
        """In place, for ``rows`` (whose levels are ``x``'s): the codes and one-hot columns the
        constraints' category moves do not allow them."""
        for j, allowed in self.cons.allowed_codes(x).items():
            if j in codes:
                out = np.array([c for c in range(codes[j].shape[1]) if c not in allowed], dtype=np.int64)
                codes[j][np.ix_(rows, out)] = False
        for allowed in self.cons.allowed_groups(x).values():
            g = next((g for g in self.groups if allowed & set(g)), ())
            cols[np.ix_(rows, np.array([c for c in g if c not in allowed], dtype=np.int64))] = False

    # ------------------------------------------------------------------ the moves
    def moves(self, X: np.ndarray, lower: np.ndarray, upper: np.ndarray, first: np.ndarray | None = None,
              ones: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The least move of each row of ``X`` into the box ``lower < z <= upper`` under the
        constraints: ``(ok, Z)``, ``ok[i]`` whether row i reaches the box, ``Z[i]`` its move
        (where ok). ``first``: candidate points (e.g. the rule's edge, :func:`edge_points`)
        kept where they keep every constraint; ``ones``: each column's count of ones in the
        data (which category a one-hot group becomes, as the edge chooses it)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        n, d = X.shape
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        if d != self.d:
            raise QueryError(f"The rows have {d} features; the constraints were read against a schema of {self.d}.")
        done = np.zeros(n, dtype=bool)
        Z = np.array(X, copy=True)
        if first is not None and n:
            F = np.atleast_2d(np.asarray(first, float))
            inside = np.all((F > lower) & (F <= upper) | ~(np.isfinite(lower) | np.isfinite(upper)), axis=1)
            done = inside & self._roles_keep(X, F) & self.holds(X, F)
            Z[done] = F[done]
        rest = np.flatnonzero(~done)
        ok = done.copy()
        if rest.size:
            got, Zr = self._clipped(X[rest], lower, upper, ones)
            ok[rest], Z[rest] = got, Zr
        return ok, Z

    def reachable(self, X: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Can each row of ``X`` reach the box? bool (n,)."""
        return self.moves(X, lower, upper)[0]

    def _roles_keep(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        ok = np.ones(len(X), dtype=bool)
        for j in self.fixed:
            ok &= (Z[:, j] == X[:, j]) | (np.isnan(Z[:, j]) & np.isnan(X[:, j]))
        for j in self.increase_only:
            ok &= ~(Z[:, j] < X[:, j])
        for j in self.decrease_only:
            ok &= ~(Z[:, j] > X[:, j])
        return ok

    def _intervals(self, X: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row and feature, ``[L, U]``: the domain, the box (open ends stepped), the roles and
        the comparisons of one feature's new value; NaN where a row's own value it reads is missing."""
        L, U = np.fmin(self.lo, X), np.fmax(self.hi, X)
        up = np.where(self.integral, np.floor(lower) + 1.0, lower + NUDGE * self.span)
        up = np.where(~self.integral & (up > upper), np.nextafter(lower, np.inf), up)
        L = np.where(np.isfinite(lower), np.maximum(L, up), L)
        U = np.minimum(U, upper)
        for j in self.fixed:
            L[:, j], U[:, j] = np.maximum(L[:, j], X[:, j]), np.minimum(U[:, j], X[:, j])
        for j in self.increase_only:
            L[:, j] = np.maximum(L[:, j], X[:, j])
        for j in self.decrease_only:
            U[:, j] = np.minimum(U[:, j], X[:, j])
        for b in self._bounds:
            v, sense = b.value(X)
            j, integral = b.j, bool(self.integral[b.j])
            step = NUDGE * self.span[j]
            if sense in ("<=", "=="):
                U[:, j] = np.minimum(U[:, j], v)
            if sense in (">=", "=="):
                L[:, j] = np.maximum(L[:, j], v)
            if sense == "<":
                U[:, j] = np.minimum(U[:, j], np.ceil(v) - 1.0 if integral else v - step)
            if sense == ">":
                L[:, j] = np.maximum(L[:, j], np.floor(v) + 1.0 if integral else v + step)
        L[:, self.integral] = np.ceil(L[:, self.integral] - 1e-9)
        U[:, self.integral] = np.floor(U[:, self.integral] + 1e-9)
        return L, U

    def _clipped(self, X: np.ndarray, lower: np.ndarray, upper: np.ndarray, ones: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The least moves of rows none of whose candidates kept the constraints."""
        L, U = self._intervals(X, lower, upper)
        cat = np.zeros(self.d, dtype=bool)
        cat[list(self.categorical)] = True
        for g in self.groups:
            cat[list(g)] = True
        num = ~cat
        with np.errstate(invalid="ignore"):
            ok = np.all(L[:, num] <= U[:, num], axis=1)
        for f in self._given:
            ok &= f.holds(X, X)
        Z = np.clip(np.where(np.isnan(X), L, X), L, U)
        Z[:, cat] = X[:, cat]
        if self.categorical or self.groups:
            ok &= self._categories(X, Z, lower, upper, ones)
        if not (self._rows or self._implications):
            return ok, Z
        good = ok & self.holds(X, Z)
        for i in np.flatnonzero(ok & ~good):
            z = self._program(X[i], Z[i], L[i], U[i], num)
            if z is not None and self.holds(X[i][None, :], z[None, :])[0]:
                Z[i], good[i] = z, True
        return good, Z

    def _categories(self, X: np.ndarray, Z: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    ones: np.ndarray | None) -> np.ndarray:
        """Each category of ``Z`` set to a level the box, the rows' moves and the roles allow
        (in place; the row's own when allowed): bool (n,), False where some category has none."""
        n = len(X)
        ok = np.ones(n, dtype=bool)
        at = np.arange(n)
        codes, allowed_cols = self._move_masks(X)
        for j, k in self.categorical.items():
            A = codes[j] & np.array([lower[j] < c <= upper[j] for c in range(k)])[None, :]
            own = X[:, j]
            valid = np.isfinite(own) & (own == np.round(own)) & (own >= 0) & (own < k)
            own_ok = valid & A[at, np.where(valid, own, 0).astype(np.int64)]
            if j in self.fixed:
                ok &= own_ok
                continue
            ok &= A.any(axis=1)
            Z[:, j] = np.where(own_ok, own, A.argmax(axis=1))
        for g in self.groups:
            cols = np.asarray(g, dtype=np.int64)
            clear = np.array([lower[c] < 0.0 <= upper[c] for c in cols])
            box_hot = np.array([lower[c] < 1.0 <= upper[c] and np.delete(clear, i).all() for i, c in enumerate(cols)])
            H = box_hot[None, :] & allowed_cols[:, cols]
            hot = X[:, cols] > 0.5
            single = hot.sum(axis=1) == 1
            keep = single & H[at, hot.argmax(axis=1)] | ~hot.any(axis=1) & clear.all()   # a row without a level may stay so
            if g[0] in self.fixed:
                ok &= keep
                continue
            pref = np.where(lower[cols] >= 0.0, np.inf, 0.0 if ones is None else ones[cols])  # asked for, else most frequent
            pick = np.where(H, pref[None, :], -1.0).argmax(axis=1)
            ok &= keep | H.any(axis=1)
            move = np.flatnonzero(~keep & H.any(axis=1))
            Z[np.ix_(move, cols)] = 0.0
            Z[move, cols[pick[move]]] = 1.0
        return ok

    def _program(self, x: np.ndarray, z0: np.ndarray, L: np.ndarray, U: np.ndarray, num: np.ndarray
                 ) -> np.ndarray | None:
        """The least move of one row under the comparisons of several features and the
        implications (module docstring); None when there is none (or HiGHS found none)."""
        P = _Milp()
        cols = self._move_columns(P, x, L, U, num)
        fixed = z0.copy()                            # the categories' levels, decided alone
        for f in self._rows:
            P.form(f, x, cols, fixed, self.integral)
        for imp in self._implications:
            on = P.var(0.0, 1.0, True)
            for q in imp.conclusions:
                P.form(q, x, cols, fixed, self.integral, on=on)
            breaks = [b for pr in imp.premises for b in P.broken(pr, x, cols, fixed, self.integral)]
            P.row({on: 1.0, **{b: 1.0 for b in breaks}}, 1.0, np.inf)
        solution = P.solve()
        if solution is None:
            return None
        z = z0.copy()
        for j, c in cols.items():
            z[j] = round(solution[c]) if self.integral[j] else min(max(solution[c], L[j]), U[j])
        return z

    def _move_columns(self, P: _Milp, x: np.ndarray, L: np.ndarray, U: np.ndarray, num: np.ndarray
                      ) -> dict[int, int]:
        """A column per number moved (in ``[L, U]``, integral as the feature), and its move
        ``|z - x|`` as two columns costing ``1 / span`` each: the feature's column of each."""
        cols = {int(j): P.var(L[j], U[j], bool(self.integral[j])) for j in np.flatnonzero(num)}
        for j, c in cols.items():
            if np.isfinite(x[j]) and U[j] > L[j]:
                p, m = P.var(0.0, max(U[j] - x[j], 0.0)), P.var(0.0, max(x[j] - L[j], 0.0))
                P.cost[p] = P.cost[m] = 1.0 / self.span[j]
                P.row({c: 1.0, p: -1.0, m: 1.0}, x[j], x[j])
        return cols


class _Milp:
    """Columns (bounds, integrality, cost) and rows ``rlo <= sum(v * col) <= rhi`` of one program."""

    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integ: list[int] = []
        self.cost: list[float] = []
        self.rows: list[dict[int, float]] = []
        self.rlo: list[float] = []
        self.rhi: list[float] = []

    def var(self, lo: float, hi: float, integer: bool = False) -> int:
        self.lb.append(float(lo))
        self.ub.append(float(hi))
        self.integ.append(int(integer))
        self.cost.append(0.0)
        return len(self.lb) - 1

    def row(self, terms: dict[int, float], lo: float, hi: float) -> None:
        self.rows.append(terms)
        self.rlo.append(float(lo))
        self.rhi.append(float(hi))

    def solve(self) -> np.ndarray | None:
        """The least-cost values of the columns (HiGHS, 10 s at most), or None when it found none."""
        from scipy.optimize import Bounds, LinearConstraint, milp

        A = np.zeros((len(self.rlo), len(self.lb)))
        for r, terms in enumerate(self.rows):
            for c, v in terms.items():
                A[r, c] += v
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = milp(np.array(self.cost), integrality=np.array(self.integ),
                       bounds=Bounds(np.array(self.lb), np.array(self.ub)),
                       constraints=[LinearConstraint(A, np.array(self.rlo), np.array(self.rhi))] if self.rows else [],
                       options=cast(Any, {"time_limit": 10.0, "disp": False, "mip_rel_gap": 0.0,
                                          "primal_feasibility_tolerance": 1e-9}))
        return cast("np.ndarray | None", res.x)

    def _sides(self, f: _Form, x: np.ndarray, cols: dict[int, int], fixed: np.ndarray, integral: np.ndarray
               ) -> tuple[dict[int, float], float, float, float, float]:
        """``f`` for the row ``x``: its terms, its right-hand side, its step (strict sides), and
        the least and largest value of its terms over the columns' bounds."""
        rhs = float(f.rhs(x[None, :])[0])
        terms: dict[int, float] = {}
        for j in np.flatnonzero(f.new):
            if int(j) in cols:
                terms[cols[int(j)]] = float(f.new[j])
            else:                                      # a category's level (never in a comparison): a number
                rhs -= float(f.new[j]) * float(fixed[j])
        whole = all(integral[j] and float(f.new[j]).is_integer() for j in np.flatnonzero(f.new))
        least = sum(v * (self.lb[c] if v > 0 else self.ub[c]) for c, v in terms.items())
        most = sum(v * (self.ub[c] if v > 0 else self.lb[c]) for c, v in terms.items())
        step = 1.0 if whole and float(rhs).is_integer() else STRICT * max(1.0, abs(most - least) + abs(rhs))
        return terms, rhs, step, least, most

    def form(self, f: _Form, x: np.ndarray, cols: dict[int, int], fixed: np.ndarray, integral: np.ndarray,
             on: int | None = None) -> None:
        """``f`` as a row; with ``on`` (a binary column), enforced only where it is 1."""
        terms, rhs, step, least, most = self._sides(f, x, cols, fixed, integral)
        lo = rhs + step if f.sense == ">" else rhs if f.sense in (">=", "==") else -np.inf
        hi = rhs - step if f.sense == "<" else rhs if f.sense in ("<=", "==") else np.inf
        if on is None:
            self.row(terms, lo, hi)
            return
        if np.isfinite(lo):
            self.row({**terms, on: -(lo - least)}, least, np.inf)        # a z >= lo - (lo - least)(1 - on)
        if np.isfinite(hi):
            self.row({**terms, on: most - hi}, -np.inf, most)            # a z <= hi + (most - hi)(1 - on)

    def broken(self, f: _Form, x: np.ndarray, cols: dict[int, int], fixed: np.ndarray, integral: np.ndarray
               ) -> list[int]:
        """Binaries each of which, when 1, breaks ``f`` one way (an equation two ways)."""
        terms, rhs, step, least, most = self._sides(f, x, cols, fixed, integral)
        ways = {"<=": [(">=", rhs + step)], "<": [(">=", rhs)], ">=": [("<=", rhs - step)], ">": [("<=", rhs)],
                "==": [(">=", rhs + step), ("<=", rhs - step)]}[f.sense]
        out = []
        for side, bound in ways:
            b = self.var(0.0, 1.0, True)
            if side == ">=":
                if bound > most:
                    self.ub[b] = 0.0
                else:
                    self.row({**terms, b: -(bound - least)}, least, np.inf)
            elif bound < least:
                self.ub[b] = 0.0
            else:
                self.row({**terms, b: most - bound}, -np.inf, most)
            out.append(b)
        return out


def resolve(constraints: Iterable[str] | str | Constraints | None, schema: Schema | None, names: Sequence[str]
            ) -> Constraints | None:
    """The constraints in force for rules on the features ``names``: texts, a parsed
    :class:`core.constraints.Constraints` (read against its own schema), or None for the
    schema's own (:func:`core.optimal.constrained.resolve_constraints`); None when there are
    none. The schema they are read against must describe ``names``, in their order."""
    from core.constraints import Constraints
    from core.optimal.constrained import resolve_constraints
    from core.schema import Schema

    if isinstance(constraints, Constraints) and isinstance(constraints.schema, Schema):
        schema = constraints.schema
    cons = resolve_constraints(constraints, schema)
    if not len(cons):
        return None
    if not isinstance(schema, Schema):
        raise QueryError("Constraints between features are read against the features' schema (their names, kinds "
                         "and ranges); pass schema= as well, e.g. infer_schema(table).")
    if list(schema.names) != [str(n) for n in names]:
        raise QueryError(f"The schema's features ({len(schema.names)}: {schema.names[:4]}...) are not the rules' "
                         f"features ({len(names)}: {list(names)[:4]}...) in the same order; give the schema of "
                         "these features.")
    if cons.schema is not schema:
        cons = Constraints(cons, schema)
    return cons


def reach_of(constraints: Iterable[str] | str | Constraints | None, schema: Schema | None, names: Sequence[str], *,
             fixed: Iterable[int] = (),
             increase_only: Iterable[int] = (), decrease_only: Iterable[int] = ()) -> Reach | None:
    """The :class:`Reach` of the constraints in force (:func:`resolve`) with the query's
    roles (column indices); None when there are none."""
    cons = resolve(constraints, schema, names)
    if cons is None:
        return None
    return Reach.of(cons, cons.schema, fixed=fixed, increase_only=increase_only,   # type: ignore[arg-type]
                    decrease_only=decrease_only)


def rule_reach(cons: Constraints | None, S: Sequence[int] | np.ndarray, fixed: Iterable[int] = (), increase_only: Iterable[int] = (),
               decrease_only: Iterable[int] = ()) -> Reach | None:
    """The reach of a counterfactual rule on the columns ``S``, whose statement keeps every
    other feature at the row's value: those features fixed, besides the query's roles."""
    if cons is None or not len(cons):
        return None
    schema = cons.schema
    d = len(schema.names)                                                       # type: ignore[union-attr]
    others = set(range(d)) - {int(j) for j in S}
    return Reach.of(cons, schema, fixed=others | {int(j) for j in fixed},       # type: ignore[arg-type]
                    increase_only=increase_only, decrease_only=decrease_only)
