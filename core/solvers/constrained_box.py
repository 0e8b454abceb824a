"""Tree ensembles under constraints between features, on the LP box search's relaxation.

:mod:`core.solvers.lpbox` proves a free query fast: its relaxation on the order simplex
(OCEAN, Parmentier & Vidal 2021, eqs. 15-20, stated per side of the query, with per-tree
linking rows) is tight, and its best-first search re-solves one LP per box from the
previous basis. A constraint between features (:mod:`core.constraints`) reads the new
values themselves, which that relaxation only knows through their intervals. This module
adds them, for the features the constraints read (and those their category moves narrow,
:func:`coupled`), and nothing else:

* **the value.** ``x_j`` in its box, tied to its interval by the incremental rows
  ``x_j >= a_h + sum_{k>h} (a_k - a_{k-1}) u_jk - sum_{k<h} (a_{k+1} - a_k) d_jk`` and the
  same with each interval's largest value ``b_k`` and ``<=`` (``u_jk``: the point at or
  above interval ``k``; ``d_jk``: at or below; ``a_k``, ``b_k`` the interval's least and
  largest value, its closure): at binary level variables ``x_j`` lies in the chosen
  interval, and no tighter link by these variables exists (the incremental formulation).
  An interval no point may take moves its level variable with the next one.
* **the cost** of a coupled feature: its value's own (:func:`core.solvers.constrained._features`,
  on ``x - x_hat = p - n``), held at least the steps of its level variables (the cheapest
  point of its interval), so the relaxation is never looser than the free one; every other
  feature costs its steps, as in the free search.
* **the constraints**, as :mod:`core.solvers.constrained` writes them (an implication's
  binaries relaxed to ``[0, 1]`` in the LP).

:func:`box_program` is that program with the level variables binary, for HiGHS (then
every tree's leaf weights rest on the leaf holding the point: exact); a feasibility
question (no objective, :func:`core.solvers.constrained.tree_witness`) is answered by it.
:func:`solve` runs the LP box search itself on the widened relaxation: a box's bound is
still a lower bound of every point in it under the constraints; a cell (one interval per
feature) is valued exactly, by the program of its coupled values alone (the cheapest point
of its closure under the constraints, :func:`core.solvers.constrained._cell_program`), and
offered as the incumbent with a point strictly inside it; a box whose LP point is the
incumbent is closed only when its LP bound meets the incumbent's cost (an implication or
an integral value relaxed may leave the LP below it), else split around that point.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from core.cells.problem import NUDGE, CellProblem, CellSolution
from core.solvers import lpbox
from core.solvers.constrained_program import (
    Domain,
    _add_constraints,
    _allowed,
    _cell_program,
    _Columns,
    _features,
    _place,
    _Program,
    _read_x,
    _run,
    _subset,
    _valid,
)

if TYPE_CHECKING:
    from core.constraints import Constraint, Constraints
    from core.solvers.boxsearch import BoxSearch

__all__ = ["applies", "NotBox", "coupled", "box_program", "solve"]


def applies(prob: CellProblem) -> bool:
    """Does the LP box search's relaxation take this problem? (a sum of costs, no one-hot
    groups, no diverse alternatives: :func:`core.solvers.lpbox.applies`; no column of
    category codes: those go to OCEAN's rows, which hold a binary per code)"""
    return lpbox.applies(prob) is None and not prob.ens.categorical_features


class NotBox(Exception):
    """The LP box search does not take this problem (costs that do not rise away from the
    query, or no leaf left within the bound)."""


def coupled(dom: Domain, cons: Constraints, lo: np.ndarray, hi: np.ndarray, code_costs: dict[int, np.ndarray]
            ) -> list[int]:
    """The features whose new value the program holds as a variable: those a comparison
    reads, and those whose box or codes the row's category moves narrowed (``lo``, ``hi``,
    ``code_costs``: :func:`core.solvers.constrained._allowed`)."""
    from core.constraints import CategoryMove, Implication

    out: set[int] = set()
    for c in cons:
        f = c.form
        if isinstance(f, Implication):
            out.update(j for form in (*f.premises, *f.conclusions) for j, _ in form.new)
        elif not isinstance(f, CategoryMove):
            out.update(j for j, _ in f.new)
    out.update(int(j) for j in np.flatnonzero((lo != dom.lo) | (hi != dom.hi)))
    out.update(j for j, cc in code_costs.items() if not np.array_equal(np.isfinite(cc), np.isfinite(dom.code_costs[j])))
    return sorted(out)


def _interval_ends(prob: CellProblem, j: int, lo: float, hi: float, integral: bool, strict: bool
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The least and the largest value of ``x_j`` in each of its intervals ``(L_k-1, L_k]``
    within ``[lo, hi]``: the closure (``strict``: ``NUDGE`` of the span past the open end; an
    integral feature's next integer). Both rise with the interval."""
    L = np.asarray(prob.levels[j], dtype=float)
    below = np.concatenate([[-np.inf], L])
    above = np.concatenate([L, [np.inf]])
    if integral:
        a, b = np.floor(below) + 1.0, np.floor(above)
    else:
        a, b = below + (NUDGE * float(prob.cost_model.span[j]) if strict else 0.0), above
    return np.clip(a, lo, hi), np.clip(b, lo, hi)


def _couple(P: _Program, LP: lpbox.LPBox, prob: CellProblem, dom: Domain, cons: Constraints, J: Sequence[int],
            strict: bool, with_cost: bool) -> _Columns:
    """Add to ``P`` (whose first columns are ``LP``'s: level variables, then leaves) the
    coupled features' values, their links, their costs and the constraints (module docstring)."""
    S = LP.S
    for (j, k, sgn), i in LP.col.items():           # an interval no point may take: its level moves with the next
        if LP.usable[i] and not np.isfinite(S.flat[int(S.off[j]) + k]):
            P.row([(i, 1.0), (LP.col[(j, k + sgn, sgn)], -1.0)], 0.0, 0.0)
    cols = _features(P, dom, dom.lo, dom.hi, with_cost, only=J)
    for j in J:
        mine = [(i, sgn, k) for (jj, k, sgn), i in LP.col.items() if jj == j and LP.usable[i]]
        _link(P, LP, prob, dom, cols.x[j], j, mine, strict)
        if with_cost:
            _coupled_cost(P, LP, cols, j, mine)
    _add_constraints(P, cols, dom, cons)
    return cols


def _link(P: _Program, LP: lpbox.LPBox, prob: CellProblem, dom: Domain, xj: int, j: int,
          mine: list[tuple[int, int, int]], strict: bool) -> None:
    """Coupled feature ``j``'s value ``x_j`` (column ``xj``) between the least and the largest
    value of the interval its level variables ``mine`` choose."""
    h = int(LP.S.hat[j])
    a, b = _interval_ends(prob, j, float(dom.lo[j]), float(dom.hi[j]),
                          bool(dom.integral[j] or j in dom.code_costs), strict)
    for end, side in ((a, "lo"), (b, "hi")):
        terms = [(xj, 1.0)]
        terms += [(i, -float(end[k] - end[k - 1])) if sgn == 1 else (i, float(end[k + 1] - end[k]))
                  for i, sgn, k in mine]
        P.row(terms, **{side: float(end[h])})


def _coupled_cost(P: _Program, LP: lpbox.LPBox, cols: _Columns, j: int, mine: list[tuple[int, int, int]]) -> None:
    """A coupled feature's cost: its value's (``cols.terms``) in place of its level variables'
    steps, at least its interval's cheapest point's."""
    S = LP.S
    steps = [(i, float(LP.step[i])) for i, _, _ in mine if LP.step[i] != 0]
    for i, _ in steps:
        P.c[i] = 0.0
    own = float(S.flat[int(S.off[j]) + int(S.hat[j])])           # the cheapest point of the row's own interval
    if (steps or own) and cols.terms.get(j):
        P.row(cols.terms[j] + [(i, -v) for i, v in steps], lo=own)


#: at most this many cases of the implications are searched one by one (:func:`cases`)
CASES = 16


def cases(cons: Constraints, limit: int = CASES) -> list[Constraints] | None:
    """The constraints as cases without implications, whose union is the constraints: each
    implication ``P_1 and ... and P_m -> Q`` splits into "``P_1`` fails", ..., "``P_1 ... P_m-1``
    hold and ``P_m`` fails", "all hold and ``Q``" (a failing equation: either side). None when
    there would be more than ``limit`` cases (the MILP then answers, :func:`box_program`, its
    implications by binaries)."""
    from core.constraints import Constraints, Implication

    plain = [c for c in cons if not isinstance(c.form, Implication)]
    ways: list[list[list[Constraint]]] = [_implication_cases(c) for c in cons if isinstance(c.form, Implication)]
    if int(np.prod([len(w) for w in ways])) > limit:
        return None
    out = [Constraints(plain, cons.schema)]
    for opts in ways:
        out = [Constraints([*base, *more], cons.schema) for base in out for more in opts]
    return out


def _implication_cases(c: Constraint) -> list[list[Constraint]]:
    """An implication's cases: "``P_1`` fails", ..., "``P_1 ... P_m-1`` hold and ``P_m`` fails",
    "all hold and ``Q``", each as constraints of the implication's line."""
    from core.constraints import Constraint, Implication

    f = c.form
    assert isinstance(f, Implication)
    opts: list[list[Constraint]] = []
    for m, p in enumerate(f.premises):
        held = [Constraint(c.text, c.line, q) for q in f.premises[:m]]
        opts += [held + [Constraint(c.text, c.line, q)] for q in _negations(p)]
    opts.append([Constraint(c.text, c.line, q) for q in (*f.premises, *f.conclusions)])
    return opts


def _negations(form: Any) -> list[Any]:
    """The comparisons whose union is where ``form`` fails (an equation fails either way)."""
    flip = {"<=": [">"], "<": [">="], ">=": ["<"], ">": ["<="], "==": ["<", ">"]}[form.sense]
    return [replace(form, sense=s) for s in flip]


def _narrowed(dom: Domain, cons: Constraints) -> Domain:
    lo, hi, code_costs = _allowed(dom, cons)
    return Domain(dom.x_hat, lo, hi, dom.integral, code_costs, dom.cost_model, dom.groups, dom.names)


def _search_state(prob: CellProblem, ub: float) -> tuple[CellProblem, BoxSearch]:
    from core.solvers.boxsearch import BoxSearch

    q = prob if not np.isfinite(ub) else replace(prob, upper_bound=float(ub))
    S = BoxSearch(q)
    if not S.ok or S.n_leaf == 0:
        raise NotBox()
    return q, S


def box_program(prob: CellProblem, dom: Domain, cons: Constraints, strict: bool, with_cost: bool = True,
                subset: Sequence[int] | None = None, ub: float = np.inf
                ) -> tuple[_Program, _Columns, Callable[[np.ndarray], np.ndarray]]:
    """The query as one MILP on the LP box search's relaxation, the level variables binary
    (module docstring), and the reading of its cells from a solution; with a finite ``ub``
    (a valid point's cost) the leaves and intervals dearer than it are left out and the cost
    is held at most ``ub``. Raises :class:`NotBox` where the relaxation does not apply."""
    use = cons if subset is None else _subset(cons, subset)
    d2 = _narrowed(dom, use)
    q, S = _search_state(prob, ub)
    LP = lpbox.LPBox(q, S)
    P = _relaxation_program(LP, with_cost)
    nv = int(LP.feat.size)
    J = coupled(dom, use, d2.lo, d2.hi, d2.code_costs)
    cols = _couple(P, LP, prob, d2, use, J, strict, with_cost)
    if with_cost:
        _fixed_cost(P, S, prob.n_features, J, ub)
    return P, cols, _cell_reader(LP, S.hat, nv)


def _relaxation_program(LP: lpbox.LPBox, with_cost: bool) -> _Program:
    """The LP box search's relaxation as a program, its usable level variables binary."""
    P = _Program()
    for v in LP.proto.variable:
        P.var(v.lower_bound, v.upper_bound, cost=v.objective_coefficient if with_cost else 0.0)
    for c in LP.proto.constraint:
        P.row(zip(c.var_index, c.coefficient), c.lower_bound, c.upper_bound)
    for i in np.flatnonzero(LP.usable):
        P.integ[int(i)] = 1
    return P


def _fixed_cost(P: _Program, S: BoxSearch, d: int, J: Sequence[int], ub: float) -> None:
    """The uncoupled features' own intervals' cost as a constant, and the cost held at most ``ub``."""
    base = float(sum(S.flat[int(S.off[j]) + int(S.hat[j])] for j in range(d) if j not in J))
    if base:
        P.var(1.0, 1.0, cost=base)
    if np.isfinite(ub):
        P.row([(i, c) for i, c in enumerate(P.c) if c], hi=ub * (1 + 1e-9) + 1e-12)


def _cell_reader(LP: lpbox.LPBox, hat: np.ndarray, nv: int) -> Callable[[np.ndarray], np.ndarray]:
    feat, side, usable = LP.feat, LP.side, LP.usable

    def cells(z: np.ndarray) -> np.ndarray:          # the interval of each feature, as the level variables say
        c = np.asarray(hat, dtype=np.int64).copy()
        np.add.at(c, feat, np.round(z[:nv]).astype(np.int64) * usable * side)
        return c
    return cells


# ------------------------------------------------------------------ the box search
class _Relaxation(lpbox.LPBox):
    """:class:`core.solvers.lpbox.LPBox`'s relaxation widened by the coupled values, their
    links, costs and the constraints (closed intervals: a lower bound of the strict query)."""

    def __init__(self, prob: CellProblem, S: BoxSearch, dom: Domain, cons: Constraints, J: Sequence[int]):
        self.dom, self.cons, self.J = dom, cons, list(J)
        self.last: tuple[np.ndarray, float] | None = None    # the last LP's level values and bound
        super().__init__(prob, S)
        self.base -= float(sum(S.flat[int(S.off[j]) + int(S.hat[j])] for j in self.J))   # their value's cost counts

    def _model(self, reach: np.ndarray) -> Any:
        m = super()._model(reach)
        P = _Program()
        for v in m.variable:
            P.var(v.lower_bound, v.upper_bound, cost=v.objective_coefficient)
        n0 = len(P.lb)
        _couple(P, self, self.prob, self.dom, self.cons, self.J, strict=False, with_cost=True)
        for i in range(n0):
            m.variable[i].objective_coefficient = P.c[i]
        for i in range(n0, len(P.lb)):
            v = m.variable.add()
            v.lower_bound, v.upper_bound, v.objective_coefficient = P.lb[i], P.ub[i], P.c[i]
        rows = np.asarray(P.rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        cuts = np.searchsorted(rows[order], np.arange(len(P.rlo) + 1))
        colv, valv = np.asarray(P.cols)[order], np.asarray(P.vals)[order]
        for r in range(len(P.rlo)):
            c = m.constraint.add()
            c.lower_bound, c.upper_bound = P.rlo[r], P.rhi[r]
            c.var_index.extend(colv[cuts[r]:cuts[r + 1]].tolist())
            c.coefficient.extend(valv[cuts[r]:cuts[r + 1]].tolist())
        return m

    def bound(self, lo: np.ndarray, hi: np.ndarray, open_leaves: np.ndarray | None = None,
              deadline: float | None = None, cutoff: float = np.inf
              ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        out = super().bound(lo, hi, open_leaves, deadline, cutoff)
        if out[1] is not None:
            self.last = (out[1], out[0])
        return out


class _Search(lpbox._Search):
    """The LP box search with cells valued under the constraints (module docstring)."""

    def __init__(self, prob: CellProblem, S: BoxSearch, deadline: float, dom: Domain, cons: Constraints,
                 J: Sequence[int]):
        self.dom, self.cons, self.J = dom, cons, list(J)
        self.narrowed = _narrowed(dom, cons)
        self.valued: dict[bytes, tuple[float, np.ndarray] | None] = {}
        self.point: np.ndarray | None = None     # the incumbent's point, strictly inside its cells
        self.unplaced = False                    # a cell's closure held a point but its inside none was found
        self.first = False                       # end at the first point (a witness, not the cheapest)
        super().__init__(prob, S, deadline, None, None, None, None)

    def relaxation(self, prob: CellProblem, S: BoxSearch) -> lpbox.LPBox:
        return _Relaxation(prob, S, self.narrowed, self.cons, self.J)

    def offer(self, cells: np.ndarray, value: float, point: np.ndarray) -> None:
        with self.lock:
            if value < self.ub:
                self.inc, self.ub, self.point = np.asarray(cells, dtype=np.int64).copy(), value, point
                if self.first:
                    self.ended = "limit"
                    self.lock.notify_all()

    def better(self, cells: np.ndarray) -> None:
        """Make ``cells`` the incumbent if its cheapest point under the constraints is cheaper."""
        if not float(self.prob.cost_of(cells)) < self.ub:
            return
        key = np.asarray(cells, dtype=np.int64).tobytes()
        if key not in self.valued:
            self.valued[key] = self._value(np.asarray(cells, dtype=np.int64))
        got = self.valued[key]
        if got is not None:
            self.offer(cells, *got)

    def _value(self, cells: np.ndarray) -> tuple[float, np.ndarray] | None:
        """(the cheapest cost over the cells' closure under the constraints, a valid point
        strictly inside them), or None when the cells give another answer, hold no such
        point, or cannot beat the incumbent."""
        prob, dom, cons = self.prob, self.dom, self.cons
        y = prob.point_of(cells)
        if not prob.is_valid(y[None, :])[0]:
            return None
        if _valid(prob, cons, dom, y):              # the cells' cheapest point keeps the constraints
            return float(prob.cost_of(cells)), y
        P, cols, _ = _cell_program(prob, dom, cons, cells, strict=False)
        status, z, value, _ = _run(P, cols, self.deadline)
        if z is None or status != "optimal" or not value < self.ub:
            return None
        point = _place(prob, dom, cons, _read_x(dom, cols, z), cells, self.deadline)
        if point is None:
            self.unplaced = True
            return None
        return float(value), point

    def _branch(self, LP: lpbox.LPBox, values: np.ndarray | None, p: np.ndarray, lo: np.ndarray, hi: np.ndarray
                ) -> tuple[tuple[int, int] | None, bool]:
        branch, toward = super()._branch(LP, values, p, lo, hi)
        if branch is not None or values is None:
            return branch, toward
        last = getattr(LP, "last", None)
        if last is not None and last[0] is values and self.prunes(last[1]):
            return None, False                 # the LP's own point, and nothing in the box is cheaper
        return lpbox._split_at(LP.rounded(values, p, lo, hi), lo, hi), False


def solve(prob: CellProblem, dom: Domain, cons: Constraints, *, time_limit: float = 30.0,
          start: np.ndarray | None = None, n_workers: int = 2, first: bool = False
          ) -> tuple[CellSolution, np.ndarray | None, bool]:
    """The cheapest point of ``prob`` under ``cons`` by the LP box search on the widened
    relaxation: (the search's answer on the cells, the incumbent's point, whether some cell
    was left unplaced, so that "optimal" and "infeasible" are not proven). ``start``: a
    valid point under the constraints, the first incumbent. ``first``: end at the first
    valid point (status "feasible"; "infeasible" still proven). Raises :class:`NotBox` where
    the search does not apply."""
    deadline = time.perf_counter() + time_limit
    d2 = _narrowed(dom, cons)
    J = coupled(dom, cons, d2.lo, d2.hi, d2.code_costs)
    ub = dom.point_cost(start) if start is not None else np.inf
    q, S = _search_state(prob, ub)
    if start is not None:            # the box search's own bound (per tree, no LP) may already rule the case out
        root = float(S.evaluate(S.root_lo, S.root_hi)[0])
        if not root < ub - lpbox.SLACK * (1.0 + abs(ub)):
            cells = q.interval_of(np.asarray(start, dtype=float)[None, :])[0]
            return CellSolution("optimal", cells, ub, slack=lpbox.SLACK * (1.0 + abs(ub))), start.copy(), False
    search = _Search(q, S, deadline, dom, cons, J)
    search.first = first
    if start is not None:
        search.inc, search.point = q.interval_of(np.asarray(start, dtype=float)[None, :])[0], start.copy()
    sol = search.run(max(1, int(n_workers)))
    return sol, search.point, search.unplaced
