"""Counterfactuals under constraints between features: one exact MILP for tree ensembles and linear models.

The other solvers read a feature's cheapest point of an interval on its own (OCEAN,
Parmentier & Vidal 2021, eqs. 28-32: a separable cost over independent features).
A constraint between features (:mod:`core.constraints`: linear rows over the new
values, the row's own values and the changes; implications; category moves) breaks
that independence, so this module keeps every feature's new value ``x_j`` as a
variable of its own and states the whole query as one mixed-integer program:

* **the model gives the target.** A tree ensemble: OCEAN's rows as
  :func:`core.solvers.ocean.add_cell_model` writes them (flows, eqs. 8-12; the order
  simplex, eq. 15; splits, eqs. 16-17; the target, eqs. 13-14; plausibility, eq. 33;
  one-hot groups, eq. 27), with each level variable ``mu_jm`` (the point lies above
  level ``L_jm``) tied to ``x_j``: ``x_j >= lo_j + (L_jm + e_jm - lo_j) mu_jm`` and
  ``x_j <= L_jm + (hi_j - L_jm) mu_jm`` (a big M given by the feature's finite range
  ``[lo_j, hi_j]``; ``e_jm`` the step into the open end ``(L_jm, ...]``: the next
  integer of an integral feature, else ``0`` when the closed relaxation is solved and
  ``NUDGE`` of the span when the point is placed). A linear model: its target rows
  ``g_r(x) = const_r + A_r x + sum_k T_rk c_jk >= tau_r`` (:mod:`core.solvers.linear`,
  strict rows with a small ``tau``), ``c_jk`` one binary per code of a categorical feature.
* **the cost** of :mod:`core.counterfactual`, on ``x - x_hat = p - n`` (``p, n >= 0``):
  ``w+ (l1 p / span + l0 z+) + w- (l1 n / span + l0 z-)`` with ``p <= (hi - x_hat) z+``;
  squared l2 by tangent cuts of ``(p / span)^2`` added until the cut model equals the
  cost at the solution (outer approximation: exact for the convex square); the
  L-infinity cost by ``t >= f_j`` for every feature; a categorical feature's code ``k``
  at its own cost.
* **the constraints.** A linear row ``a x <sense> rhs`` (the row's own values folded
  into ``rhs``); a strict row with a step of 1 when every term is integral, else 1e-9
  of the row's scale. An implication ``P_1 and ... -> Q_1 and ...``: a binary ``b``
  with ``Q`` enforced when ``b = 1`` and, when ``b = 0``, some premise broken (one
  binary per premise, ``sum >= 1 - b``), each with the big M of the row's range over
  the box. A category move: the codes (one-hot columns) the row may not reach held at 0.

Tree ensembles the LP box search takes (a sum of costs, no one-hot groups, no category
codes) are first narrowed by the bounds the comparisons imply (:func:`narrowed`) and solved
by that search under the constraints (:mod:`core.solvers.constrained_box`: its relaxation
widened by the coupled values, implications split into cases), which proves the free
optimum as fast as the free search when it keeps the constraints; where the search does
not apply or does not decide, the program below answers (on the box search's relaxation
with binary levels where that applies, else on OCEAN's rows).

The program is solved in two steps, so that the cost returned is the cost of the
point returned and the bound is a true one: the closed relaxation (open interval ends
closed) gives a lower bound and the cells of a candidate; those cells are then fixed
and the point placed strictly inside them (a small program of ``x`` alone); when the
constraints leave no room inside those cells, the strict program is solved whole.
The point is read back, checked on the model (:meth:`CellProblem.is_valid`, the
linear model's own answer) and against every constraint (:meth:`Constraints.violated`);
``binding`` lists the constraints that hold with equality there.

Preclusion (:func:`tree_witness`, or :func:`solve_linear_model` with no objective): the
box search ended at its first valid point, case by case, or the same rows with a zero
objective, where HiGHS stops at its first point, or proves that none exists. :func:`blocking` finds the smallest set of the
analyst's constraints under which the row is still precluded (by size, then a
deletion filter past ``EXHAUSTIVE`` constraints).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Container, Sequence

import numpy as np

from core.cells.problem import NUDGE, CellProblem
from core.schema import INTEGRAL_KINDS
from core.shown import shortest_inside
from core.solvers.constrained_program import (  # noqa: F401 - re-exported: the solvers' program pieces
    _HIGHS,
    _L2_ROUNDS,
    Domain,
    _add_constraints,
    _add_form,
    _add_implication,
    _allowed,
    _box,
    _broken,
    _cell_bounds,
    _cell_program,
    _Columns,
    _cuts,
    _features,
    _group_of,
    _place,
    _Program,
    _read_x,
    _run,
    _sides,
    _step,
    _subset,
    _valid,
)
from core.solvers.ocean import _Infeasible

if TYPE_CHECKING:
    from core.constraints import Constraints, LinearForm
    from core.solvers.linear import LinearProblem

__all__ = ["Domain", "Solved", "solve_cells", "solve_linear_model", "tree_witness", "blocking", "binding",
           "EXHAUSTIVE"]

#: up to this many constraints, the blocking set is the smallest by size (every subset, smallest first)
EXHAUSTIVE = 6
#: relative optimality tolerance of "proven optimal"
PROVEN_GAP = 1e-7




@dataclass
class Solved:
    """What the program found: ``status`` "optimal", "feasible" (a point, no proof),
    "infeasible" (proven), "time_limit" (nothing found in time) or "error"."""

    status: str
    x: np.ndarray | None = None
    cost: float = math.inf
    bound: float = -math.inf
    message: str = ""
    binding: tuple[int, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
































def binding(cons: Constraints, x_hat: np.ndarray, x: np.ndarray, tol: float = 1e-7) -> tuple[int, ...]:
    """The constraints that hold with equality at ``x`` (an implication: one of its
    conclusions, where its premises hold)."""
    from core.constraints import CategoryMove, Implication

    def tight(form: LinearForm) -> bool:
        a, rhs, _ = form.on_row(x_hat)
        v = float(np.asarray(a, dtype=float) @ x)
        return abs(v - rhs) <= tol * max(1.0, abs(rhs), float(np.abs(np.asarray(a) * x).sum()))

    out = []
    for k, c in enumerate(cons):
        f = c.form
        if isinstance(f, CategoryMove):
            continue
        if isinstance(f, Implication):
            if all(bool(p.holds(x_hat, x[None, :])[0]) for p in f.premises) and any(tight(q) for q in f.conclusions):
                out.append(k)
        elif tight(f):
            out.append(k)
    return tuple(out)


# ------------------------------------------------------------------ tree ensembles
def _tree_links(P: _Program, prob: CellProblem, cols: _Columns, dom: Domain, mu: Any, consts: Any,
                strict: bool) -> None:
    """Tie each level variable to ``x_j`` (module docstring); constant levels become bounds."""
    for j in range(prob.n_features):
        levels = prob.levels[j]
        span = float(prob.cost_model.span[j])
        lo, hi = P.lb[cols.x[j]], P.ub[cols.x[j]]
        for m in range(1, levels.size + 1):
            L = float(levels[m - 1])
            if dom.integral[j]:
                above = math.floor(L) + 1.0
            else:
                above = L + (NUDGE * span if strict else 0.0)
            g = consts[j](m)
            if g == 1:
                lo = max(lo, above)
            elif g == 0:
                hi = min(hi, L)
            else:
                col = mu[j][0][m]
                P.row([(cols.x[j], 1.0), (col, -(above - P.lb[cols.x[j]]))], lo=P.lb[cols.x[j]])
                P.row([(cols.x[j], 1.0), (col, -(P.ub[cols.x[j]] - L))], hi=L)
        P.lb[cols.x[j]], P.ub[cols.x[j]] = lo, hi


def _tree_program(prob: CellProblem, dom: Domain, cons: Constraints, strict: bool, with_cost: bool = True,
                  subset: Sequence[int] | None = None, ub: float = np.inf
                  ) -> tuple[_Program, _Columns, Callable[[np.ndarray], np.ndarray]]:
    """The whole program of a tree ensemble's query, and the reading of its cells from a
    solution; with a finite ``ub`` (a valid point's cost), the leaves whose cheapest point
    costs more are left out (a constrained point costs at least its free cost) and the cost
    is held at most ``ub``."""
    from core.solvers.ocean import add_cell_model

    P = _Program()
    use = cons if subset is None else _subset(cons, subset)
    lo, hi, code_costs = _allowed(dom, use)
    mu, lo_i, consts, _, _ = add_cell_model(P, prob, ub)
    d2 = Domain(dom.x_hat, lo, hi, dom.integral, code_costs, dom.cost_model, dom.groups, dom.names)
    cols = _features(P, d2, lo, hi, with_cost)
    if with_cost and np.isfinite(ub):
        P.row([(i, c) for i, c in enumerate(P.c) if c], hi=ub * (1 + 1e-9) + 1e-12)
    _tree_links(P, prob, cols, d2, mu, consts, strict)
    _add_constraints(P, cols, d2, use)

    def cells(z: np.ndarray) -> np.ndarray:
        """The interval of each value (a level variable off every split of the chosen leaves
        may be fractional, so the values say it); a value on a level lies in the interval
        above when its level variable says so (the closed relaxation's open end)."""
        x = _read_x(d2, cols, z)
        out = np.asarray(prob.interval_of(x[None, :])[0]).copy()
        for j in range(prob.n_features):
            L = prob.levels[j]
            m = int(np.argmin(np.abs(L - x[j]))) if L.size else -1
            if m >= 0 and abs(x[j] - L[m]) <= 1e-7 * (1.0 + abs(L[m])):     # on level m + 1, within the tolerance
                col = mu[j][0].get(m + 1)
                above = consts[j](m + 1) if col is None else int(z[col] >= 0.5)
                out[j] = m + 1 if above else m
        return out
    return P, cols, cells






def tree_domain(prob: CellProblem, action: Sequence[str]) -> Domain:
    """The :class:`Domain` of a tree ensemble's cell problem (``action``: each feature's
    actionability, :func:`core.cells.problem.feature_actions`)."""
    lo, hi = _ranges(prob)
    x_hat = prob.x_hat
    integral = np.array([k in INTEGRAL_KINDS and k != "categorical" for k in prob.kinds] or [False] * prob.n_features)
    _held_by_action(lo, hi, x_hat, action)
    lo[integral], hi[integral] = np.ceil(lo[integral] - 1e-9), np.floor(hi[integral] + 1e-9)
    code_costs = {}
    for j, cats in enumerate(prob.ens.categories):      # a column of codes: each code at its own cost
        if cats is not None:
            codes = np.arange(prob.ens.n_codes(j), dtype=float)
            cc = prob.cost_model.feature_cost(j, x_hat[j], codes)
            cc[~np.isfinite(prob.costs[j][prob.interval_of(_at(x_hat, j, codes))[:, j]])] = np.inf
            code_costs[j] = cc
            lo[j], hi[j] = 0.0, float(codes.size - 1)
    return Domain(x_hat.copy(), lo, hi, integral, code_costs, prob.cost_model, [list(g) for g in prob.groups],
                  list(prob.ens.feature_names))


def _ranges(prob: CellProblem) -> tuple[np.ndarray, np.ndarray]:
    """Copies of every feature's range, which constraints between features need finite."""
    if prob.lo is None or prob.hi is None or not (np.all(np.isfinite(prob.lo)) and np.all(np.isfinite(prob.hi))):
        raise ValueError("Constraints between features need every feature's range: give a schema.")
    return prob.lo.astype(float).copy(), prob.hi.astype(float).copy()


def _held_by_action(lo: np.ndarray, hi: np.ndarray, x_hat: np.ndarray, action: Sequence[str],
                    skip: Container[int] = ()) -> None:
    """The range cut at the row's value on the side its actionability forbids (fixed: both)."""
    for j, a in enumerate(action):
        if j in skip:
            continue
        if a in ("fixed", "decrease"):
            hi[j] = x_hat[j]
        if a in ("fixed", "increase"):
            lo[j] = x_hat[j]


def _at(x_hat: np.ndarray, j: int, values: np.ndarray) -> np.ndarray:
    """Rows equal to ``x_hat`` but for feature ``j``, which takes each of ``values``."""
    X = np.tile(x_hat, (values.size, 1))
    X[:, j] = values
    return X


def implied_bounds(dom: Domain, cons: Constraints, rounds: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The box of the new values narrowed by what the comparisons imply on their own (bound
    propagation: ``lo <= a x <= hi`` bounds each ``a_j x_j`` by the row's sides less the rest's
    extremes over the box), a few rounds; each bound loosened by round-off, an integral one
    rounded inwards. Implications bind only where their premises hold, so they are left out."""
    from core.constraints import LinearForm

    lo, hi = dom.lo.astype(float).copy(), dom.hi.astype(float).copy()
    rows = [_sides(dom, c.form) for c in cons if isinstance(c.form, LinearForm)]
    for _ in range(rounds):
        moved = False
        for a, r_lo, r_hi in rows:
            nz = np.flatnonzero(a)
            least, most = np.where(a > 0, a * lo, a * hi), np.where(a > 0, a * hi, a * lo)
            s_least, s_most = float(least[nz].sum()), float(most[nz].sum())
            for j in nz:
                tol = 1e-9 * (1.0 + abs(s_least) + abs(s_most) + abs(r_lo if np.isfinite(r_lo) else 0.0)
                              + abs(r_hi if np.isfinite(r_hi) else 0.0))
                top = (r_hi - (s_least - least[j]) + tol) / a[j] if np.isfinite(r_hi) else np.inf * np.sign(a[j])
                bottom = (r_lo - (s_most - most[j]) - tol) / a[j] if np.isfinite(r_lo) else -np.inf * np.sign(a[j])
                new_lo, new_hi = (bottom, top) if a[j] > 0 else (top, bottom)
                if dom.integral[j]:
                    new_lo, new_hi = float(np.ceil(new_lo - 1e-9)), float(np.floor(new_hi + 1e-9))
                if new_lo > lo[j]:
                    lo[j], moved = new_lo, True
                if new_hi < hi[j]:
                    hi[j], moved = new_hi, True
        if not moved:
            break
    return lo, hi


def narrowed(prob: CellProblem, dom: Domain, cons: Constraints) -> tuple[CellProblem, Domain]:
    """The problem and its domain with the bounds the comparisons imply (:func:`implied_bounds`)
    folded in: an interval outside them is not allowed, one they cut costs its cheapest point
    inside them (:func:`core.cells.problem._grids`; the row's own interval too, when they
    leave the row's value out). The points allowed are the same, so every solver reads the
    same query."""
    from core.cells.problem import _grids

    lo, hi = implied_bounds(dom, cons)
    keep = (lo <= hi) & np.array([j not in dom.code_costs for j in range(dom.d)])
    moved = keep & ((lo > dom.lo) | (hi < dom.hi))
    if not moved.any():
        return prob, dom
    lo, hi = np.where(moved, lo, dom.lo), np.where(moved, hi, dom.hi)
    points, costs, _ = _grids(prob.ens, prob.levels, prob.x_hat, prob.kinds or ["numerical"] * dom.d, lo, hi,
                              ["free"] * dom.d, prob.cost_model, prob.grid_key)
    for k in np.flatnonzero(~moved):
        points[k], costs[k] = prob.points[k], prob.costs[k]
    for j in (int(k) for k in np.flatnonzero(moved)):
        gone = ~np.isfinite(prob.costs[j])
        costs[j] = np.where(gone, np.inf, costs[j])
        points[j] = np.where(gone, np.nan, points[j])
        if not lo[j] <= dom.x_hat[j] <= hi[j]:          # the row's own interval: its point nearest the row, if any
            h = int(prob.hat[j])
            v = float(np.clip(dom.x_hat[j], lo[j], hi[j]))
            inside = _in_interval(prob.levels[j], h, v) and not gone[h]
            costs[j][h] = float(prob.cost_model.feature_cost(j, dom.x_hat[j], np.array([v]))[0]) if inside else np.inf
            points[j][h] = v if inside else np.nan
    return (replace(prob, points=points, costs=costs),
            Domain(dom.x_hat, lo, hi, dom.integral, dom.code_costs, dom.cost_model, dom.groups, dom.names))


def _in_interval(levels: np.ndarray, i: int, v: float) -> bool:
    """Does ``v`` lie in interval ``i`` of ``levels``, ``(levels[i-1], levels[i]]``?"""
    return (i == 0 or v > levels[i - 1]) and (i == levels.size or v <= levels[i])


def _program(prob: CellProblem, dom: Domain, cons: Constraints, strict: bool, with_cost: bool = True,
             subset: Sequence[int] | None = None, ub: float = np.inf
             ) -> tuple[_Program, _Columns, Callable[[np.ndarray], np.ndarray]]:
    """The program of a tree ensemble's query: on the LP box search's relaxation
    (:func:`core.solvers.constrained_box.box_program`) where it applies, else OCEAN's rows (:func:`_tree_program`)."""
    from core.solvers import constrained_box as cbox

    if cbox.applies(prob):
        try:
            return cbox.box_program(prob, dom, cons, strict, with_cost, subset, ub)
        except cbox.NotBox:
            pass
    return _tree_program(prob, dom, cons, strict, with_cost, subset, ub)


def _read_point(prob: CellProblem, dom: Domain, cols: _Columns, z: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The program's point: the values it holds, and each other feature at its interval's
    cheapest point (:meth:`CellProblem.point_of`)."""
    held = np.array([c >= 0 for c in cols.x])
    if held.all():
        return _read_x(dom, cols, z)
    x = np.asarray(prob.point_of(cells), dtype=float).copy()
    got = _read_x(dom, replace(cols, x=[c if c >= 0 else 0 for c in cols.x]), z)
    x[held] = got[held]
    return x


def by_boxes(prob: CellProblem, cons: Constraints) -> bool:
    """Does the LP box search answer this query under ``cons`` (:mod:`core.solvers.constrained_box`:
    its relaxation takes the problem and the implications split into few enough cases)?"""
    from core.solvers import constrained_box as cbox

    return cbox.applies(prob) and cbox.cases(cons) is not None


def _by_boxes(prob: CellProblem, dom: Domain, cons: Constraints, inc: np.ndarray | None, deadline: float,
              n_workers: int) -> Solved | None:
    """The answer of the LP box search under the constraints (:mod:`core.solvers.constrained_box`)
    when it applies and proves it (optimal, or no point at all) within the time; else None
    (the program then answers, with the time left)."""
    from core.solvers import constrained_box as cbox

    cases = cbox.cases(cons) if cbox.applies(prob) else None
    if cases is None:
        return None
    t0 = time.perf_counter()
    best, lower = inc, np.inf
    for case in cases:                     # each way the implications may hold: the cheapest of their optima
        p_case, d_case = narrowed(prob, dom, case)
        try:
            sol, point, unplaced = cbox.solve(p_case, d_case, case, time_limit=max(0.01, deadline - time.perf_counter()),
                                              start=best, n_workers=n_workers)
        except cbox.NotBox:
            return None
        if unplaced or sol.status not in ("optimal", "infeasible"):
            return None
        lower = min(lower, sol.lower_bound)
        if point is not None and (best is None or dom.point_cost(point) < dom.point_cost(best)):
            best = point
    timings = {"box search": time.perf_counter() - t0}
    if best is None:
        return Solved("infeasible", message="No point meets the target under the constraints.", timings=timings)
    x = _short(dom, best, lambda y: _valid(prob, cons, dom, y), prob.levels)
    return _answer(x, dom.point_cost(x), min(lower, dom.point_cost(best)), "optimal", dom, cons, timings)


def solve_cells(prob: CellProblem, dom: Domain, cons: Constraints, *, time_limit: float = 30.0,
                starts: Sequence[np.ndarray] = (), X_ref: np.ndarray | None = None, n_workers: int = 1) -> Solved:
    """The cheapest point of ``prob`` (a tree ensemble's query) under ``cons``, proven (module
    docstring). ``starts`` (e.g. the optimum without the constraints) and ``X_ref`` give a
    first valid point (:func:`_incumbent`): its cost bounds the program (leaves that cannot
    beat it are left out, and a cut-off row keeps the search below it), and it is the answer
    when the program proves that nothing is cheaper, or runs out of time first."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    prob, dom = narrowed(prob, dom, cons)
    inc = _incumbent(prob, dom, cons, starts, X_ref, deadline)
    ub = dom.point_cost(inc) if inc is not None else np.inf
    boxed = _by_boxes(prob, dom, cons, inc, deadline, n_workers)
    if boxed is not None:
        return boxed
    try:
        P, cols, cells = _program(prob, dom, cons, strict=False, ub=ub)
    except _Infeasible:
        if inc is not None:
            return _answer(inc, ub, ub, "optimal", dom, cons, {"total": time.perf_counter() - t0})
        return Solved("infeasible", message="No allowed value of some feature.")
    status, z, _, bound = _run(P, cols, deadline)
    timings = {"relaxation": time.perf_counter() - t0}
    if z is None:
        return _no_program_point(inc, ub, status, bound, dom, cons, timings)
    lower = bound if status == "optimal" else max(bound, 0.0)
    x = _place(prob, dom, cons, _read_point(prob, dom, cols, z, cells(z)), cells(z), deadline)
    if x is None:                                # no room inside those cells: the strict program, whole
        x, status2 = _strict_point(prob, dom, cons, ub, deadline)
        if x is None or not _valid(prob, cons, dom, x):
            return _unplaced(inc, ub, lower, status2, dom, cons, timings)
    x = _cheaper(inc, x, dom)
    x = _short(dom, x, lambda y: _valid(prob, cons, dom, y), prob.levels)
    return _answer(x, dom.point_cost(x), lower, status, dom, cons, timings)


def _no_program_point(inc: np.ndarray | None, ub: float, status: str, bound: float, dom: Domain, cons: Constraints,
                      timings: dict[str, float]) -> Solved:
    """The answer when the program gives no point: the first valid point (proven optimal when
    the program proves nothing cheaper, else within its bound), or the program's status."""
    if inc is None:
        return Solved(status, timings=timings)
    if status == "infeasible":                   # nothing cheaper (proven)
        return _answer(inc, ub, ub, "optimal", dom, cons, timings)
    return _answer(inc, ub, max(bound, 0.0), "feasible", dom, cons, timings)     # no time for better


def _cheaper(inc: np.ndarray | None, x: np.ndarray, dom: Domain) -> np.ndarray:
    """The first valid point when it costs less than the program's."""
    return inc if inc is not None and dom.point_cost(inc) < dom.point_cost(x) else x


def _unplaced(inc: np.ndarray | None, ub: float, lower: float, status: str, dom: Domain, cons: Constraints,
              timings: dict[str, float]) -> Solved:
    """The answer when no valid point comes out of the program: the first valid point, or an error."""
    if inc is not None:
        return _answer(inc, ub, lower, "feasible", dom, cons, timings)
    return Solved("time_limit" if status == "time_limit" else "error", bound=lower, timings=timings,
                  message="The program's point is not valid on the model within its tolerances.")


def _strict_point(prob: CellProblem, dom: Domain, cons: Constraints, ub: float, deadline: float
                  ) -> tuple[np.ndarray | None, str]:
    """The strict program's point, held inside its cells (None when it has none), and its status."""
    P, cols, cells = _program(prob, dom, cons, strict=True, ub=ub)
    status, z, _, _ = _run(P, cols, deadline)
    if z is None:
        return None, status
    return np.clip(_read_point(prob, dom, cols, z, cells(z)),
                   *_cell_bounds(prob, dom.lo, dom.hi, dom.integral, cells(z))), status


def _short(dom: Domain, x: np.ndarray, valid: Callable[[np.ndarray], bool],
           levels: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """``x`` with each moved continuous value written with the fewest significant digits
    within ``NUDGE`` of its span (so the cost moves by no more than the proof's slack),
    inside its cell of ``levels`` when given, kept only where the point stays ``valid``."""
    out = np.array(x, dtype=float)
    for j in (int(k) for k in np.flatnonzero(out != dom.x_hat)):
        if dom.integral[j] or j in dom.code_costs:
            continue
        a, b = -math.inf, math.inf
        if levels is not None:
            lv = np.asarray(levels[j], dtype=float)
            i = int(np.searchsorted(lv, float(out[j]), side="left"))
            a = float(lv[i - 1]) if i > 0 else -math.inf
            b = float(np.nextafter(lv[i], math.inf)) if i < lv.size else math.inf
        tried = out.copy()
        tried[j] = shortest_inside(out[j], a, b, float(dom.lo[j]), float(dom.hi[j]), float(out[j]),
                                   NUDGE * float(dom.cost_model.span[j]))
        if tried[j] != out[j] and valid(tried):
            out = tried
    return out


def _answer(x: np.ndarray, cost: float, lower: float, status: str, dom: Domain, cons: Constraints,
            timings: dict[str, float]) -> Solved:
    """The result for point ``x``: proven optimal when the bound meets its cost (within the nudge)."""
    proven = status == "optimal" and cost - lower <= PROVEN_GAP * max(1.0, cost) + _nudge_cost(dom)
    return Solved("optimal" if proven else "feasible", x, cost, min(lower, cost), binding=binding(cons, dom.x_hat, x),
                  timings=timings)


def _incumbent(prob: CellProblem, dom: Domain, cons: Constraints, starts: Sequence[np.ndarray],
               X_ref: np.ndarray | None, deadline: float) -> np.ndarray | None:
    """The cheapest valid point at hand: reference rows that already give the target within
    the box and the constraints, and each start's cells filled under the constraints."""
    found: list[np.ndarray] = []
    if X_ref is not None and len(X_ref):
        R = np.asarray(X_ref, dtype=float)
        ok = prob.is_valid(R) & cons.holds(dom.x_hat, R).all(axis=1) & \
            np.all((R >= dom.lo - 1e-9) & (R <= dom.hi + 1e-9), axis=1)
        if ok.any():
            R = R[ok]
            found.append(R[int(np.argmin(dom.cost_model.cost(dom.x_hat, R)))])
    for s in starts:
        y = _place(prob, dom, cons, np.asarray(s, dtype=float), prob.interval_of(np.asarray(s)[None, :])[0], deadline)
        if y is not None:
            found.append(y)
    return min(found, key=dom.point_cost) if found else None


def _nudge_cost(dom: Domain) -> float:
    """The most that stepping ``NUDGE`` of a span into open interval ends adds to a cost."""
    cm = dom.cost_model
    w = np.maximum(cm.w_up, cm.w_down)
    per = NUDGE * w * (cm.l1 + 2 * cm.l2)
    return float(per.max(initial=0.0) if cm.combine == "max" else per.sum())






def _witness_by_boxes(prob: CellProblem, dom: Domain, cons: Constraints, deadline: float
                      ) -> tuple[str, np.ndarray | None] | None:
    """A witness by the LP box search under the constraints, ended at its first valid point,
    case by case (:func:`_by_boxes`); ("infeasible", None) when every case is proven empty;
    None when the search does not apply or does not decide."""
    from core.solvers import constrained_box as cbox

    cases = cbox.cases(cons) if cbox.applies(prob) else None
    if cases is None:
        return None
    for case in cases:
        p_case, d_case = narrowed(prob, dom, case)
        try:
            sol, point, unplaced = cbox.solve(p_case, d_case, case, time_limit=max(0.01, deadline - time.perf_counter()),
                                              n_workers=1, first=True)
        except cbox.NotBox:
            return None
        if point is not None:
            return "feasible", point
        if unplaced or sol.status != "infeasible":
            return None
    return "infeasible", None


def tree_witness(prob: CellProblem, dom: Domain, cons: Constraints, *, time_limit: float = 30.0
                 ) -> tuple[str, np.ndarray | None]:
    """("feasible", a valid point), ("infeasible", None) proven, or (a time-out status, None):
    any point at all, not the cheapest. The closed relaxation is asked first, with no
    objective; its cells are then filled strictly (the strict program whole, if they leave
    no room)."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    boxed = _witness_by_boxes(prob, dom, cons, deadline)
    if boxed is not None:
        return boxed
    try:
        P, cols, cells = _program(prob, dom, cons, strict=False, with_cost=False)
    except _Infeasible:
        return "infeasible", None
    status, z, _, _ = P.solve(time_limit, objective=False)
    if z is None:
        return status, None
    x = _place(prob, dom, cons, _read_point(prob, dom, cols, z, cells(z)), cells(z), deadline)
    if x is not None:
        return "feasible", x
    whole = solve_cells(prob, dom, cons, time_limit=max(0.01, deadline - time.perf_counter()))
    return ("feasible", whole.x) if whole.x is not None else (whole.status, None)


# ------------------------------------------------------------------ linear models
def linear_domain(prob: LinearProblem) -> Domain:
    """The :class:`Domain` of a linear model's query (:func:`core.solvers.linear.build_linear_problem`)."""
    lin, x_hat = prob.lin, prob.x_hat
    lo, hi = np.array(prob.lo, dtype=float), np.array(prob.hi, dtype=float)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("Constraints between features need every feature's range: give a schema.")
    integral = np.array([k in INTEGRAL_KINDS and lin.categories[j] is None for j, k in enumerate(prob.kinds)])
    code_costs = {}
    for j in lin.categorical_features:
        code_costs[j] = _linear_code_costs(prob, j)
        lo[j], hi[j] = 0.0, float(lin.n_codes(j) - 1)
    _held_by_action(lo, hi, x_hat, prob.action, skip=code_costs)
    lo[integral], hi[integral] = np.ceil(lo[integral] - 1e-9), np.floor(hi[integral] + 1e-9)
    return Domain(x_hat.copy(), lo, hi, integral, code_costs, prob.cost_model, [list(g) for g in prob.groups],
                  list(lin.feature_names))


def _linear_code_costs(prob: LinearProblem, j: int) -> np.ndarray:
    """Categorical feature ``j``'s cost per code: 0 at its own, a switch's cost at each code it
    may take (none when fixed; the last code is the model's reference, left out), inf elsewhere."""
    lin = prob.lin
    own = int(prob.x_hat[j])
    cc = np.full(lin.n_codes(j), np.inf)
    for k in range(lin.n_codes(j)):
        if k == own or (prob.action[j] != "fixed" and lin.code_allowed(j, k) and k < lin.n_codes(j) - 1):
            cc[k] = 0.0 if k == own else float(prob.unit[j])
    return cc


def _linear_program(prob: LinearProblem, dom: Domain, cons: Constraints, tau: np.ndarray, with_cost: bool = True,
                    subset: Sequence[int] | None = None) -> tuple[_Program, _Columns]:
    from core.solvers.linear import _row_coefs

    P = _Program()
    use = cons if subset is None else _subset(cons, subset)
    lo, hi, code_costs = _allowed(dom, use)
    d2 = Domain(dom.x_hat, lo, hi, dom.integral, code_costs, dom.cost_model, dom.groups, dom.names)
    cols = _features(P, d2, lo, hi, with_cost)
    const, A, tabs = _row_coefs(prob)
    for r in range(len(prob.rhs)):                             # g_r(x) >= tau_r on x and the code binaries
        terms = [(cols.x[j], float(A[r, j])) for j in range(dom.d) if j not in cols.codes and A[r, j] != 0]
        terms += [(col, float(tabs[j][k, r])) for j, opts in cols.codes.items() for k, col in opts]
        P.row(terms, lo=float(tau[r]) - float(const[r]))
    _add_constraints(P, cols, d2, use)
    return P, cols


def _taus(prob: LinearProblem, k: int) -> np.ndarray:
    """Each target row's step: 0 when closed, else 1e-9 of the row's scale, raised ``10**k``."""
    from core.solvers.linear import _row_coefs

    const, A, _ = _row_coefs(prob)
    return np.where(prob.strict, 1e-9 * np.maximum(1.0, np.abs(const) + np.abs(A).sum(axis=1)) * 10 ** k, 0.0)


def solve_linear_model(prob: LinearProblem, dom: Domain, cons: Constraints, *, time_limit: float = 30.0,
                       check: Callable[[np.ndarray], bool] | None = None, objective: bool = True) -> Solved:
    """The cheapest point of a linear model's query under ``cons``, proven (a strict target
    row stepped by ``tau``, raised tenfold while the point does not hold, five times at most);
    ``objective`` False: any point (a feasibility question)."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    for k in range(6):
        P, cols = _linear_program(prob, dom, cons, _taus(prob, k), with_cost=objective)
        status, z, obj, bound = _run(P, cols, deadline)
        if z is None:
            return Solved(status, message="" if status != "infeasible" else "No point meets the target under the "
                          "constraints.", timings={"total": time.perf_counter() - t0})
        x = _read_x(dom, cols, z)

        def ok_at(y: np.ndarray) -> bool:
            return bool(prob.holds(y[None, :])[0]) and not cons.violated(dom.x_hat, y) and (check is None or check(y))
        ok = ok_at(x)
        if ok:
            x = _short(dom, x, ok_at)
            cost = dom.point_cost(x)
            lower = bound if status == "optimal" else 0.0
            proven = status == "optimal" and cost - lower <= PROVEN_GAP * max(1.0, cost) + _nudge_cost(dom)
            return Solved("optimal" if proven else "feasible", x, cost, min(lower, cost),
                          binding=binding(cons, dom.x_hat, x), timings={"total": time.perf_counter() - t0})
    return Solved("error", message="The program's point does not meet the target within its tolerances.",
                  timings={"total": time.perf_counter() - t0})




def blocking(build: Callable[[Sequence[int] | None], tuple[_Program, _Columns]], n: int, *,
             deadline: float) -> tuple[int, ...] | None:
    """The smallest set of the ``n`` constraints under which there is still no point
    (smallest by size up to :data:`EXHAUSTIVE` constraints, else irreducible by a deletion
    filter); ``()`` when the model and the features' own settings preclude the row alone;
    None when the time ran out first."""

    def infeasible(keep: Sequence[int]) -> bool | None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        try:
            P, _ = build(list(keep))
        except _Infeasible:
            return True
        status, z, _, _ = P.solve(left, objective=False)
        if status == "time_limit" and z is None:
            return None
        return z is None and status == "infeasible"

    return _smallest_set(infeasible, n) if n <= EXHAUSTIVE else _deletion_filter(infeasible, n)


def _smallest_set(infeasible: Callable[[Sequence[int]], bool | None], n: int) -> tuple[int, ...] | None:
    """The smallest set of the ``n`` constraints still infeasible, by size (None: out of time, or none)."""
    for size in range(n + 1):
        for keep in itertools.combinations(range(n), size):
            r = infeasible(keep)
            if r is None:
                return None
            if r:
                return tuple(keep)
    return None


def _deletion_filter(infeasible: Callable[[Sequence[int]], bool | None], n: int) -> tuple[int, ...] | None:
    """An irreducible infeasible set: each constraint dropped in turn when the rest stay infeasible."""
    kept = list(range(n))
    for k in range(n):
        trial = [i for i in kept if i != k]
        r = infeasible(trial)
        if r is None:
            return None
        if r:
            kept = trial
    return tuple(kept)
