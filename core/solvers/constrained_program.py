"""The programs behind the counterfactuals under constraints between features: the domain of a
query, its columns and rows (OCEAN's cells and the constraints' forms, implications as
big-M rows), HiGHS's run and the point read back and placed inside its cell.

:mod:`core.solvers.constrained` (the solvers) and :mod:`core.solvers.constrained_box` (the LP box
search under the constraints) both build on these; they live apart so that neither of those
imports the other at module level and the two stay free of a cycle. The equations are the
ones :mod:`core.solvers.constrained`'s docstring cites.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from core.cells.problem import NUDGE, CellProblem
from core.solvers.ocean import _Builder

if TYPE_CHECKING:
    from core.constraints import Constraints, Implication, LinearForm
    from core.counterfactual import CostModel


_HIGHS = {"mip_abs_gap": 0.0, "mip_feasibility_tolerance": 1e-9, "primal_feasibility_tolerance": 1e-9,
          "dual_feasibility_tolerance": 1e-9}


#: tangent cuts of the squared cost at most, per query
_L2_ROUNDS = 30


@dataclass
class Domain:
    """The query's features as the program reads them (codes view, the model's order).

    x_hat : (d,) the row.  lo, hi : (d,) finite bounds of each new value (range and
    actionability folded in).  integral : (d,) integer-valued features.  code_costs :
    categorical feature -> cost of each code (inf: not allowed); such a feature's
    ``x_j`` is the sum of its code binaries.  cost_model : :class:`core.counterfactual.CostModel`.
    groups : one-hot groups (their columns sum to one).  names : feature names.
    """

    x_hat: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    integral: np.ndarray
    code_costs: dict[int, np.ndarray]
    cost_model: Any
    groups: list[list[int]]
    names: list[str]

    @property
    def d(self) -> int:
        return int(self.x_hat.size)

    def point_cost(self, x: np.ndarray) -> float:
        """The cost of a point, as the program counts it (codes at their own cost)."""
        per = self.cost_model.feature_costs(self.x_hat, x[None, :])[0]
        for j, cc in self.code_costs.items():
            per[j] = cc[int(round(x[j]))]
        return float(self.cost_model.total(per))


# ------------------------------------------------------------------ the program
class _Program(_Builder):
    """OCEAN's builder (:class:`core.solvers.ocean._Builder`: columns with bounds and
    integrality, rows as sparse triplets, so OCEAN's rows are written straight in) with a
    cost per column, solved by HiGHS."""

    def __init__(self) -> None:
        super().__init__()
        self.c: list[float] = []

    def var(self, lo: float = 0.0, hi: float = 1.0, integer: bool = False, cost: float = 0.0) -> int:
        self.c.append(cost)
        return super().var(lo, hi, integer)

    def solve(self, time_limit: float, objective: bool = True) -> tuple[str, np.ndarray | None, float, float]:
        """(status, solution, objective, bound) by HiGHS (scipy's ``milp``)."""
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import csr_array

        n = len(self.lb)
        cons = [LinearConstraint(csr_array((self.vals, (self.rows, self.cols)), shape=(len(self.rlo), n)),
                                 np.array(self.rlo), np.array(self.rhi))] if self.rlo else []
        c = np.array(self.c) if objective else np.zeros(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # HiGHS's own options, passed on verbatim
            res = milp(c, integrality=np.array(self.integ), bounds=Bounds(np.array(self.lb), np.array(self.ub)),
                       constraints=cons, options={"time_limit": max(time_limit, 0.01), "mip_rel_gap": 0.0,
                                                  "disp": False, **_HIGHS})  # type: ignore[arg-type]
        if res.status == 2:
            return "infeasible", None, math.inf, math.inf
        if res.x is None:
            return ("time_limit" if res.status == 1 else "error"), None, math.inf, -math.inf
        bound = getattr(res, "mip_dual_bound", None)
        bound = float(res.fun) if bound is None or not np.isfinite(bound) else float(bound)
        return ("optimal" if res.status == 0 else "feasible"), np.asarray(res.x), float(res.fun), bound


@dataclass
class _Columns:
    x: list[int]
    p: dict[int, int]
    n: dict[int, int]
    codes: dict[int, list[tuple[int, int]]]
    l2: list[tuple[int, int, float]]          # (move column, epigraph column, span) of each squared term
    terms: dict[int, list[tuple[int, float]]] = field(default_factory=dict)   # each feature's cost, as terms


def _features(P: _Program, dom: Domain, lo: np.ndarray, hi: np.ndarray, with_cost: bool,
              only: Sequence[int] | None = None) -> _Columns:
    """``x_j`` per feature within ``[lo_j, hi_j]``, its moves and its cost (module docstring);
    ``only``: these features alone (the others' ``x`` column is -1)."""
    x_hat = dom.x_hat
    cols = _Columns([], {}, {}, {}, [])
    per_feature: list[list[tuple[int, float]]] = []       # each feature's cost as terms (the max of linf)
    keep = set(range(dom.d)) if only is None else set(only)
    for j in range(dom.d):
        if j not in keep:
            cols.x.append(-1)
            continue
        xj = P.var(float(lo[j]), float(hi[j]), bool(dom.integral[j]))
        cols.x.append(xj)
        if j in dom.code_costs:
            terms = _code_columns(P, dom, cols, j, float(lo[j]), float(hi[j]))
        else:
            terms = _move_columns(P, dom, cols, j, float(lo[j]), float(hi[j]))
        per_feature.append(terms)
        cols.terms[j] = terms
    for g in (dom.groups if only is None else ()):                                     # one hot column per group
        P.row([(cols.x[j], 1.0) for j in g], 1.0 if float(x_hat[g].sum()) == 1.0 else -np.inf, 1.0)
    if with_cost:
        _cost(P, dom.cost_model, per_feature)
    return cols


def _code_columns(P: _Program, dom: Domain, cols: _Columns, j: int, lo: float, hi: float) -> list[tuple[int, float]]:
    """Categorical feature ``j``: one binary column per code (closed outside ``[lo, hi]`` and
    where the code is not allowed), exactly one on, ``x_j`` its code; its cost terms."""
    cc, xj = dom.code_costs[j], cols.x[j]
    opts = [(k, P.var(0.0, 1.0 if np.isfinite(cc[k]) and lo <= k <= hi else 0.0, True)) for k in range(cc.size)]
    cols.codes[j] = opts
    P.row([(col, 1.0) for _, col in opts], 1.0, 1.0)
    P.row([(xj, 1.0)] + [(col, -float(k)) for k, col in opts], 0.0, 0.0)
    return [(col, float(cc[k])) for k, col in opts if np.isfinite(cc[k]) and cc[k] != 0]


def _move_columns(P: _Program, dom: Domain, cols: _Columns, j: int, lo: float, hi: float) -> list[tuple[int, float]]:
    """Numerical feature ``j``: its increase and decrease within ``[lo, hi]``, each with its
    l1, l0 and squared-l2 terms, and ``x_j = x̂_j + p_j - n_j``; its cost terms."""
    cm, x_hat = dom.cost_model, dom.x_hat
    up, down = max(hi - x_hat[j], 0.0), max(x_hat[j] - lo, 0.0)
    terms: list[tuple[int, float]] = []
    span = float(cm.span[j])
    for side, room, w in ((cols.p, up, cm.w_up[j]), (cols.n, down, cm.w_down[j])):
        if room <= 0:
            continue
        col = side[j] = P.var(0.0, room)
        terms.append((col, cm.l1 * w / span))
        if cm.l0 > 0:
            z = P.var(0.0, 1.0, True)
            P.row([(col, 1.0), (z, -room)], hi=0.0)
            terms.append((z, cm.l0 * w))
        if cm.l2 > 0:
            s = P.var(0.0, (room / span) ** 2)
            terms.append((s, cm.l2 * w))
            cols.l2.append((col, s, span))
            for a in (0.0, 0.5, 1.0):                       # first tangents of (move / span)^2
                P.row([(s, 1.0), (col, -2 * a / span)], lo=-a * a)
    moves = ([(cols.p[j], -1.0)] if j in cols.p else []) + ([(cols.n[j], 1.0)] if j in cols.n else [])
    P.row([(cols.x[j], 1.0)] + moves, float(x_hat[j]), float(x_hat[j]))
    return terms


def _cost(P: _Program, cm: CostModel, per_feature: list[list[tuple[int, float]]]) -> None:
    """The objective: the sum of every feature's terms, or (L-infinity) their largest feature's."""
    if cm.combine == "max":
        t = P.var(0.0, np.inf, cost=1.0)
        for terms in per_feature:
            if terms:
                P.row([(t, 1.0)] + [(col, -v) for col, v in terms], lo=0.0)
    else:
        for terms in per_feature:
            for col, v in terms:
                P.c[col] += v


def _box(dom: Domain, form: LinearForm, a: np.ndarray) -> tuple[float, float]:
    """The smallest and largest value of ``a x`` over the box of the new values."""
    lo = float(np.sum(np.where(a > 0, a * dom.lo, a * dom.hi)))
    hi = float(np.sum(np.where(a > 0, a * dom.hi, a * dom.lo)))
    return lo, hi


def _step(dom: Domain, a: np.ndarray, rhs: float) -> float:
    """The step of a strict row: 1 when every term is integral, else 1e-9 of its scale."""
    nz = np.flatnonzero(a)
    if nz.size and all(dom.integral[j] and float(a[j]).is_integer() for j in nz) and float(rhs).is_integer():
        return 1.0
    scale = float(np.sum(np.abs(a) * (dom.hi - dom.lo))) + abs(rhs)
    return 1e-9 * max(scale, 1.0)


def _sides(dom: Domain, form: LinearForm) -> tuple[np.ndarray, float, float]:
    """The row ``lo <= a x <= hi`` of a linear form on this row (strict sides stepped)."""
    a, rhs, sense = form.on_row(dom.x_hat)
    a = np.asarray(a, dtype=float)
    if sense == "==":
        return a, rhs, rhs
    if sense in ("<=", "<"):
        return a, -np.inf, rhs - (_step(dom, a, rhs) if sense == "<" else 0.0)
    return a, rhs + (_step(dom, a, rhs) if sense == ">" else 0.0), np.inf


def _add_form(P: _Program, cols: _Columns, dom: Domain, form: LinearForm, on: int | None = None) -> None:
    """``form`` as a row; with ``on`` (a binary column), only where ``on`` is 1 (big M over the box)."""
    a, lo, hi = _sides(dom, form)
    terms = [(cols.x[j], float(a[j])) for j in np.flatnonzero(a)]
    if on is None:
        P.row(terms, lo, hi)
        return
    least, most = _box(dom, form, a)
    if np.isfinite(lo):
        P.row(terms + [(on, -(lo - least))], lo=least)        # a x >= lo - (lo - least)(1 - on)
    if np.isfinite(hi):
        P.row(terms + [(on, most - hi)], hi=most)             # a x <= hi + (most - hi)(1 - on)


def _broken(P: _Program, cols: _Columns, dom: Domain, form: LinearForm) -> list[int]:
    """Binaries each of which, when 1, breaks ``form`` one way (an equation breaks two ways)."""
    a, rhs, sense = form.on_row(dom.x_hat)
    a = np.asarray(a, dtype=float)
    step = _step(dom, a, rhs)
    ways = {"<=": [(">=", rhs + step)], "<": [(">=", rhs)], ">=": [("<=", rhs - step)], ">": [("<=", rhs)],
            "==": [(">=", rhs + step), ("<=", rhs - step)]}[sense]
    terms = [(cols.x[j], float(a[j])) for j in np.flatnonzero(a)]
    least, most = _box(dom, form, a)
    out = []
    for side, bound in ways:
        b = P.var(0.0, 1.0, True)
        if side == ">=":
            if bound > most:                                   # this way cannot happen in the box
                P.ub[b] = 0.0
            else:
                P.row(terms + [(b, -(bound - least))], lo=least)
        else:
            if bound < least:
                P.ub[b] = 0.0
            else:
                P.row(terms + [(b, most - bound)], hi=most)
        out.append(b)
    return out


def _add_constraints(P: _Program, cols: _Columns, dom: Domain, cons: Constraints) -> None:
    from core.constraints import CategoryMove, Implication

    for c in cons:
        form = c.form
        if isinstance(form, Implication):
            _add_implication(P, cols, dom, form)
        elif not isinstance(form, CategoryMove):               # moves are read as allowed codes (_allowed)
            _add_form(P, cols, dom, form)


def _add_implication(P: _Program, cols: _Columns, dom: Domain, imp: Implication) -> None:
    b = P.var(0.0, 1.0, True)
    for q in imp.conclusions:
        _add_form(P, cols, dom, q, on=b)
    breaks = [col for p in imp.premises for col in _broken(P, cols, dom, p)]
    P.row([(b, 1.0)] + [(col, 1.0) for col in breaks], lo=1.0)     # the conclusions hold, or a premise fails


def _allowed(dom: Domain, cons: Constraints) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """The box and the code costs with the row's category moves applied."""
    lo, hi = dom.lo.copy(), dom.hi.copy()
    code_costs = {j: cc.copy() for j, cc in dom.code_costs.items()}
    for j, ok in cons.allowed_codes(dom.x_hat).items():
        if j in code_costs:
            cc = code_costs[j]
            cc[[k for k in range(cc.size) if k not in ok]] = np.inf
        else:
            lo[j], hi[j] = max(lo[j], min(ok)), min(hi[j], max(ok))
    for _, ok in cons.allowed_groups(dom.x_hat).items():
        for j in _group_of(dom, ok):
            if j not in ok:
                hi[j] = min(hi[j], 0.0)
    return lo, hi, code_costs


def _group_of(dom: Domain, cols: set[int]) -> list[int]:
    return next((g for g in dom.groups if cols & set(g)), sorted(cols))


# ------------------------------------------------------------------ reading the answer
def _cuts(P: _Program, cols: _Columns, z: np.ndarray) -> bool:
    """Add a tangent of every squared term the cut model underestimates at ``z``; any added?"""
    added = False
    for col, s, span in cols.l2:
        a = z[col] / span
        if a * a - z[s] > 1e-10 * max(1.0, a * a):
            P.row([(s, 1.0), (col, -2 * a / span)], lo=-a * a)
            added = True
    return added


def _run(P: _Program, cols: _Columns, deadline: float) -> tuple[str, np.ndarray | None, float, float]:
    """Solve, adding tangent cuts of the squared terms until the cut model is exact."""
    status, z, obj, bound = "time_limit", None, math.inf, -math.inf
    for _ in range(_L2_ROUNDS):
        left = deadline - time.perf_counter()
        if left <= 0:
            return "time_limit" if z is None else "feasible", z, obj, bound
        status, z, obj, bound = P.solve(left)
        if z is None or not _cuts(P, cols, z):
            return status, z, obj, bound
    return ("feasible" if z is not None else status), z, obj, bound


def _read_x(dom: Domain, cols: _Columns, z: np.ndarray) -> np.ndarray:
    x = z[cols.x].astype(float)
    x[dom.integral] = np.round(x[dom.integral])
    for j, opts in cols.codes.items():
        x[j] = float(max(opts, key=lambda kc: z[kc[1]])[0])
    return x


def _cell_bounds(prob: CellProblem, lo: np.ndarray, hi: np.ndarray, integral: np.ndarray, cells: np.ndarray,
                 strict: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``[lo, hi]`` narrowed to the inside of each feature's cell (``NUDGE`` of a span past an
    open end, or its closure when not ``strict``; the next integer of an integral feature)."""
    lo, hi = lo.copy(), hi.copy()
    for j in range(prob.n_features):
        levels, i = prob.levels[j], int(cells[j])
        if i > 0:
            L = float(levels[i - 1])
            step = NUDGE * float(prob.cost_model.span[j]) if strict else 0.0
            lo[j] = max(lo[j], math.floor(L) + 1.0 if integral[j] else L + step)
        if i < levels.size:
            hi[j] = min(hi[j], float(levels[i]))
    return lo, hi


def _cell_program(prob: CellProblem, dom: Domain, cons: Constraints, cells: np.ndarray, strict: bool = True
                  ) -> tuple[_Program, _Columns, tuple[np.ndarray, np.ndarray]]:
    """The cells fixed: the new values alone, strictly inside each of them (``strict``; else
    in their closure), under the constraints; and the box inside the cells that a read point
    is held to."""
    lo, hi, code_costs = _allowed(dom, cons)
    lo, hi = _cell_bounds(prob, lo, hi, dom.integral, cells, strict)
    d2 = Domain(dom.x_hat, lo, hi, dom.integral, code_costs, dom.cost_model, dom.groups, dom.names)
    P = _Program()
    cols = _features(P, d2, lo, hi, True)
    _add_constraints(P, cols, d2, cons)
    return P, cols, (lo, hi)


def _place(prob: CellProblem, dom: Domain, cons: Constraints, x: np.ndarray, cells: np.ndarray,
           deadline: float) -> np.ndarray | None:
    """The relaxation's point if it is valid, else the cheapest point strictly inside its
    cells (``cells``, as its level variables chose them) under the constraints, if valid."""
    if _valid(prob, cons, dom, x):
        return x
    P, cols, (lo, hi) = _cell_program(prob, dom, cons, cells)
    status, z, _, _ = _run(P, cols, deadline)
    if z is None:
        return None
    y = np.clip(_read_x(dom, cols, z), lo, hi)     # the solver's tolerance may leave a bound by 1e-9
    return y if _valid(prob, cons, dom, y) else None


def _valid(prob: CellProblem, cons: Constraints, dom: Domain, x: np.ndarray) -> bool:
    return bool(prob.is_valid(x[None, :])[0]) and not cons.violated(dom.x_hat, x) and \
        bool(np.all(x >= dom.lo - 1e-9) and np.all(x <= dom.hi + 1e-9))


# ------------------------------------------------------------------ preclusion
def _subset(cons: Constraints, keep: Sequence[int]) -> Constraints:
    from core.constraints import Constraints as C

    return C(cons[k] for k in keep)
