"""The cell model of the counterfactual problem, solved by OR-Tools CP-SAT.

Variables and constraints (OCEAN's formulation, section 3, on booleans):

* ``g[j][m] = [x_j > L_jm]`` for the levels of feature j, with
  ``g[j][m] => g[j][m-1]`` (the order simplex, eq. 15); intervals that are not
  allowed (kind, range, actionability, or a cost above the upper bound) are
  forbidden by ``not (g[j][i] and not g[j][i+1])``.
* one boolean ``s`` per leaf that can still be reached, ``ExactlyOne`` per
  tree (eqs. 8-12), each leaf implying the interval bounds of its box
  (eqs. 16-17: ``s => g[j][lo]``, ``s => not g[j][hi+1]``).
* the target on the leaf booleans (eqs. 13-14), scaled to integers; the
  scaled constraint is *relaxed* by the worst rounding error, so it admits
  every truly valid cell (and possibly a near tie, which the caller verifies
  exactly and cuts off), hence the optimum found is never above the true one.
* one-hot groups: exactly one column at 1 (eq. 27); plausibility: the mean
  Isolation-Forest path length over its leaf booleans >= delta (eq. 33).
  Under eq. 27 a leaf's bounds on a group only select categories, so leaves
  that differ only in that (copies made by expanding a native categorical
  split) share one boolean (:mod:`core.cells.groups`).
* objective: per feature the interval cost telescoped on ``g`` (eq. 31
  generalised), costs scaled so the upper bound maps to 1e9 (rounding moves
  the optimum by at most ``n_features / 2e9`` of the bound, reported in ``slack``);
  for the L-infinity cost (``norm="linf"``) an integer variable at least every
  feature's telescoped cost, minimised (rounding: half a unit).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from core.cells.bounds import bounded_costs, reachable_leaves
from core.cells.groups import grouped_leaves, zero_one_intervals
from core.cells.problem import CellProblem, CellSolution, TreeBlock

__all__ = ["solve"]

COST_SCALE_TARGET = 1e9
SCORE_SCALE_TARGET = 1e9
# measured on RF(100, depth 5), breast cancer: the LP worker proves bounds; see bench/optimal.py
SUBSOLVERS = ["max_lp", "core"]


class _Lits:
    """Literals ``[x_j > L_jm]`` of one feature: constants outside the allowed span."""

    def __init__(self, model: Any, j: int, allowed: np.ndarray) -> None:
        self.k = allowed.size - 1
        ok = np.flatnonzero(allowed)
        self.lo_i, self.hi_i = int(ok[0]), int(ok[-1])
        self.vars = {m: model.new_bool_var(f"g{j}_{m}") for m in range(self.lo_i + 1, self.hi_i + 1)}
        for m in range(self.lo_i + 2, self.hi_i + 1):
            model.add_implication(self.vars[m], self.vars[m - 1])

    def ge(self, i: int) -> Any:
        """Literal for 'interval >= i': True, False or a BoolVar."""
        if i <= self.lo_i:
            return True
        if i > self.hi_i:
            return False
        return self.vars[i]


class _BandLits:
    """The literals of a missing value's column read as a band (:mod:`core.cells.band`):
    ``'interval >= i'`` as :class:`_Lits` gives it, but built as the rewrite over
    "is missing" columns would search it: the numbers on order literals ``h`` of their
    own, the band on one boolean ``miss``, and ``interval >= i`` the literal
    ``h_i or miss`` (made, reified, where a constraint asks for it). Measured on
    breast cancer with LightGBM, the band as the top literal of one order was
    searched up to 2x slower than the rewrite: leaving it meant flipping every
    literal between the band and the fill."""

    def __init__(self, model: Any, j: int, allowed: np.ndarray, b: int) -> None:
        self.model, self.b = model, b
        ok = np.flatnonzero(allowed)
        self.lo_i, self.hi_i = int(ok[0]), int(ok[-1])          # the band, the query's, is allowed: hi_i == b
        num = np.flatnonzero(allowed[:b])
        self.numbers = num.size > 0
        self.n_lo, self.n_hi = (int(num[0]), int(num[-1])) if self.numbers else (b, b - 1)
        self.h = {m: model.new_bool_var(f"h{j}_{m}") for m in range(self.n_lo + 1, self.n_hi + 1)}
        for m in range(self.n_lo + 2, self.n_hi + 1):
            model.add_implication(self.h[m], self.h[m - 1])
        for i in range(self.n_lo + 1, self.n_hi):               # a forbidden number between allowed ones
            if not allowed[i]:
                model.add_implication(self.h[i], self.h[i + 1])
        self.miss = model.new_bool_var(f"miss{j}") if self.numbers else True
        self._or: dict[int, Any] = {}
        self.vars: dict[int, Any] = {}                            # (no plain order literals)

    def number_ge(self, i: int) -> Any:
        if i <= self.n_lo:
            return True
        if i > self.n_hi:
            return False
        return self.h[i]

    def ge(self, i: int) -> Any:
        """Literal for 'interval >= i': True, False or a BoolVar."""
        if i <= self.lo_i:
            return True
        if i > self.hi_i:
            return False
        if i == self.b:
            return self.miss
        g = self.number_ge(i)
        if g is True or self.miss is True:
            return True
        if g is False:
            return self.miss
        if i not in self._or:
            v = self._or[i] = self.model.new_bool_var(f"ge{i}_{self.b}")
            self.model.add_bool_or([g, self.miss]).only_enforce_if(v)
            self.model.add_implication(g, v)
            self.model.add_implication(self.miss, v)
        return self._or[i]

    def cell(self, value: Callable[[Any], bool]) -> int:
        if self.miss is True or value(self.miss):
            return self.b
        return self.n_lo + sum(int(value(v)) for v in self.h.values())


def _cell(L: _Lits | _BandLits, value: Callable[[Any], bool]) -> int:
    """The interval a solution gives a feature (``value``: a literal's value)."""
    if isinstance(L, _BandLits):
        return L.cell(value)
    return L.lo_i + sum(int(value(v)) for v in L.vars.values())


def _neg(lit: Any) -> Any:
    return (not lit) if isinstance(lit, bool) else lit.Not()


def _clause(model: Any, lits: list[Any]) -> bool:
    """Add OR(lits); False if it can never hold."""
    if any(lit is True for lit in lits):
        return True
    real = [lit for lit in lits if lit is not False]
    if not real:
        return False
    model.add_bool_or(real)
    return True


def solve(prob: CellProblem, time_limit: float = 30.0, hint: np.ndarray | None = None,
          n_workers: int = 2, stop: threading.Event | None = None,
          on_solution: Callable[[np.ndarray], None] | None = None,
          on_bound: Callable[[float], None] | None = None) -> CellSolution:
    """The cheapest cell reaching the target, proven optimal within ``time_limit``
    (status "feasible" with a lower bound when the time runs out, or when
    ``stop`` is set: another solver racing this one proved first, or the user
    stopped). While it runs, ``on_solution(cells)`` is told every improving
    solution and ``on_bound(lower)`` every improvement of the proven lower bound
    (in cost units, from the solver's threads)."""
    from ortools.sat.python import cp_model  # optional heavy dependency, loaded on the first query

    costs = bounded_costs(prob)
    if any(not np.isfinite(c).any() for c in costs):
        return CellSolution("infeasible", None, np.inf)
    sc = COST_SCALE_TARGET / _cost_reference(prob.upper_bound, costs)
    made = _cell_model(cp_model.CpModel(), prob, costs, sc)
    if made is None:
        return CellSolution("infeasible", None, np.inf)
    m, lits, built, d = made
    if hint is not None:
        _add_hints(m, prob, lits, built, hint)
    solver = _solver(time_limit, n_workers)
    if stop is not None and stop.is_set():
        return CellSolution("unknown", None, 0.0)
    if on_bound is not None:
        solver.best_bound_callback = lambda b: on_bound(max(0.0, (b - d / 2) / sc))
    with _stopped_by(solver, stop):
        status = solver.solve(m, None if on_solution is None else _solutions(lits, on_solution))
    return _read(solver, status, m, lits, sc, d)


def _cell_model(m: Any, prob: CellProblem, costs: list[np.ndarray], sc: float
                ) -> tuple[Any, list[_Lits | _BandLits], tuple[_LeafSet, _LeafSet | None], int] | None:
    """The cell model in ``m``: its literals, constraints and scaled objective, capped by the
    upper bound; ``(model, literals, leaf sets, rounding units d)``, None when it cannot hold."""
    band = prob.band.cuts if prob.band is not None else {}
    lits: list[_Lits | _BandLits] = [_BandLits(m, j, np.isfinite(c), int(prob.hat[j])) if j in band
                                     else _Lits(m, j, np.isfinite(c)) for j, c in enumerate(costs)]
    built = _constraints(m, prob, costs, lits)
    if built is None:
        return None
    expr = _objective(m, prob, costs, lits, sc)
    # rounding error of the scaled objective: half a unit per feature added up, half a unit for the largest
    d = prob.n_features if prob.cost_model.combine == "sum" else 1
    if np.isfinite(prob.upper_bound):
        m.add(expr <= int(np.floor(prob.upper_bound * sc)) + d + 1)
    m.minimize(expr)
    return m, lits, built, d


def _cost_reference(ub: float, costs: list[np.ndarray]) -> float:
    """The cost the integer scale is set from: the upper bound, else the largest finite costs added up."""
    if np.isfinite(ub) and ub > 0:
        return ub
    return max(1e-12, sum(float(c[np.isfinite(c)].max()) for c in costs))


def _solver(time_limit: float, n_workers: int) -> Any:
    """A CP-SAT solver with the time limit, the workers and (two or more) the subsolvers set."""
    from ortools.sat.python import cp_model  # loaded with the solver

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(max(time_limit, 0.01))
    solver.parameters.num_workers = int(max(1, n_workers))
    solver.parameters.linearization_level = 1
    if n_workers >= 2:
        solver.parameters.subsolvers.extend(SUBSOLVERS)
    return solver


@contextlib.contextmanager
def _stopped_by(solver: Any, stop: threading.Event | None) -> Iterator[None]:
    """While the solve runs, a thread that stops the search as soon as ``stop`` is set."""
    if stop is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.005):
            if stop.is_set():
                solver.stop_search()
                return

    watcher = threading.Thread(target=watch, name="cpsat-stop", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _read(solver: Any, status: Any, m: Any, lits: list[_Lits | _BandLits], sc: float, d: int) -> CellSolution:
    """The solver's answer: the cells of its point and its proven bound, unscaled (``d / 2``
    units of rounding below the scaled one)."""
    from ortools.sat.python import cp_model  # loaded with the solver

    if status == cp_model.INFEASIBLE:
        return CellSolution("infeasible", None, np.inf)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if status == cp_model.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT rejected the model: {m.validate()}")
        return CellSolution("unknown", None, solver.best_objective_bound / sc if solver.best_objective_bound else 0.0)
    cells = np.array([_cell(L, solver.boolean_value) for L in lits])
    lb = max(0.0, (solver.best_objective_bound - d / 2) / sc)
    return CellSolution("optimal" if status == cp_model.OPTIMAL else "feasible", cells, lb, slack=d / (2 * sc))


def _solutions(lits: list[_Lits | _BandLits], tell: Callable[[np.ndarray], None]) -> Any:
    """A CP-SAT solution callback handing each improving solution's cells to ``tell``."""
    from ortools.sat.python import cp_model  # loaded with the solver

    class Solutions(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            tell(np.array([_cell(L, self.boolean_value) for L in lits]))

    return Solutions()


class _LeafSet(NamedTuple):
    """The booleans of one leaf block: per row of the (grouped) block its literal,
    and per row of the problem's own block its grouped row (-1: never reached)."""

    svars: dict[int, Any]
    row: np.ndarray


def _constraints(m: Any, prob: CellProblem, costs: list[np.ndarray], lits: list[_Lits | _BandLits]
                 ) -> tuple[_LeafSet, _LeafSet | None] | None:
    """Every constraint but the objective; None when they cannot all hold."""
    if not _forbidden_inside(m, costs, lits):
        return None
    model_blk, model_row = grouped_leaves(prob, prob.model_leaves)
    model_s = _leaf_vars(m, prob, model_blk, costs, lits, "s")
    if model_s is None or not _target_constraint(m, prob.ens, prob.target, model_blk, model_s):
        return None
    others = _other_sets(m, prob, costs, lits)
    if others is None:
        return None
    plaus = None
    if prob.plaus_leaves is not None:
        plaus = _plaus_set(m, prob, costs, lits)
        if plaus is None:
            return None
    model = _LeafSet(model_s, model_row)
    if not (_one_category(m, prob, lits) and _nogoods(m, prob, model, plaus, others)):
        return None
    _exclusions(m, prob, lits)
    return model, plaus


def _forbidden_inside(m: Any, costs: list[np.ndarray], lits: list[_Lits | _BandLits]) -> bool:
    """The forbidden intervals inside each feature's allowed span (a band: its own); False
    when one cannot be avoided."""
    for j, L in enumerate(lits):
        for i in range(L.lo_i + 1, L.hi_i if isinstance(L, _Lits) else L.lo_i + 1):
            if not np.isfinite(costs[j][i]) and not _clause(m, [_neg(L.ge(i)), L.ge(i + 1)]):
                return False
    return True


def _other_sets(m: Any, prob: CellProblem, costs: list[np.ndarray], lits: list[_Lits | _BandLits]
                ) -> dict[str, tuple[TreeBlock, _LeafSet]] | None:
    """Also valid for: each further model's leaves and target; None when one cannot be met."""
    others: dict[str, tuple[TreeBlock, _LeafSet]] = {}
    for k, other in enumerate(prob.others):
        blk, row = grouped_leaves(prob, other.leaves)
        s = _leaf_vars(m, prob, blk, costs, lits, f"o{k}_")
        if s is None or not _target_constraint(m, other.ens, other.target, blk, s):
            return None
        others[f"other{k}"] = (other.leaves, _LeafSet(s, row))
    return others


def _plaus_set(m: Any, prob: CellProblem, costs: list[np.ndarray], lits: list[_Lits | _BandLits]
               ) -> _LeafSet | None:
    """The plausibility forest's leaves and its threshold (eq. 33); None when it cannot be met."""
    assert prob.plaus_leaves is not None and prob.plaus is not None       # (set together)
    plaus_blk, plaus_row = grouped_leaves(prob, prob.plaus_leaves)
    plaus_s = _leaf_vars(m, prob, plaus_blk, costs, lits, "p")
    if plaus_s is None or not _plaus_constraint(m, prob.plaus.delta, plaus_blk, plaus_s):
        return None
    return _LeafSet(plaus_s, plaus_row)


def _leaf_vars(m: Any, prob: CellProblem, blk: TreeBlock, costs: list[np.ndarray], lits: list[_Lits | _BandLits], name: str
               ) -> dict[int, Any] | None:
    """One boolean per reachable leaf, exactly one per tree, each implying its
    box (eqs. 8-12, 16-17); None when some tree has no reachable leaf."""
    mask = reachable_leaves(blk, costs, prob.upper_bound, prob.cost_model.combine)
    svars = _one_leaf_per_tree(m, blk, mask, name)
    if svars is None:
        return None
    lo_i = np.array([L.lo_i for L in lits])   # the allowed span of each feature's intervals
    hi_i = np.array([L.hi_i for L in lits])
    in_group = _in_groups(prob, len(lits))
    _tree_cuts(m, blk, svars, lits, lo_i, hi_i, in_group)
    keys = np.fromiter(svars.keys(), dtype=np.int64, count=len(svars))
    lo_all, hi_all = blk.lo[keys], blk.hi[keys]
    if not _box_clauses(m, svars, keys, lits, (lo_all > lo_i) & ~in_group, lo_all, True):
        return None                                # only the bounds that cut the domain
    if not _box_clauses(m, svars, keys, lits, (hi_all < hi_i) & ~in_group, hi_all, False):
        return None
    for g in prob.groups:
        if not _leaf_categories(m, prob, g, [svars[int(k)] for k in keys], hi_all[:, g], lits):
            return None
    return svars


def _in_groups(prob: CellProblem, d: int) -> np.ndarray:
    """Which columns belong to a one-hot group (their leaves name categories)."""
    in_group = np.zeros(d, dtype=bool)
    in_group[[j for g in prob.groups for j in g]] = True
    return in_group


def _one_leaf_per_tree(m: Any, blk: TreeBlock, mask: np.ndarray, name: str) -> dict[int, Any] | None:
    """A boolean per reachable leaf (True for a tree's only one), exactly one per tree; None
    when some tree has no reachable leaf."""
    svars: dict[int, Any] = {}
    for t in range(blk.n_trees):
        idx = np.flatnonzero(mask & (blk.tree_of == t))
        if idx.size == 0:
            return None
        if idx.size == 1:
            svars[int(idx[0])] = True
        else:
            vs = [m.new_bool_var(f"{name}{t}_{i}") for i in idx]
            m.add_exactly_one(vs)
            svars.update(zip(idx.tolist(), vs))
    return svars


def _box_clauses(m: Any, svars: dict[int, Any], keys: np.ndarray, lits: list[_Lits | _BandLits], need: np.ndarray,
                 bound: np.ndarray, lower: bool) -> bool:
    """Each leaf implies the bounds of its box that ``need`` marks: ``x_j`` at least its lower
    interval (``lower``) or at most its upper one; False when one cannot hold."""
    for r, j in zip(*np.nonzero(need)):
        ge = lits[j].ge(int(bound[r, j])) if lower else _neg(lits[j].ge(int(bound[r, j]) + 1))
        if not _clause(m, [_neg(svars[int(keys[r])]), ge]):
            return False
    return True


def _leaf_categories(m: Any, prob: CellProblem, g: list[int], svars: list[Any], hi: np.ndarray, lits: list[_Lits | _BandLits]) -> bool:
    """A leaf's categories of group ``g`` (canonical bounds: a column spans 1
    iff its category is allowed, :mod:`core.cells.groups`): with one category
    hot (eq. 27), "one of the allowed is hot" and "every other is cold" say
    the same, so the shorter is written: one clause, or one per excluded column."""
    i0, i1 = zero_one_intervals(prob.levels, g)
    allowed = hi >= i1
    for s, a in zip(svars, allowed):
        if a.all():
            continue
        if a.sum() <= (~a).sum():
            ok = _clause(m, [_neg(s)] + [lits[j].ge(int(i1[c])) for c, j in enumerate(g) if a[c]])
        else:
            ok = all(_clause(m, [_neg(s), _neg(lits[j].ge(int(i0[c]) + 1))]) for c, j in enumerate(g) if not a[c])
        if not ok:
            return False
    return True


def _one_category(m: Any, prob: CellProblem, lits: list[_Lits | _BandLits]) -> bool:
    """Exactly one column of each one-hot group at 1 (eq. 27)."""
    for g in prob.groups:
        _, i1 = zero_one_intervals(prob.levels, g)
        if not _exactly_one(m, [lits[j].ge(int(i)) for j, i in zip(g, i1)]):
            return False
    return True


def _exactly_one(m: Any, ones: list[Any]) -> bool:
    """Exactly one of the literals ``ones`` (True, False or BoolVars) true; False when impossible."""
    const = sum(1 for v in ones if v is True)
    real = [v for v in ones if not isinstance(v, bool)]
    if const > 1 or (const == 0 and not real):
        return False
    if const == 1:
        for v in real:
            m.add(v == 0)
    else:
        m.add_exactly_one(real)
    return True


def _nogoods(m: Any, prob: CellProblem, model: _LeafSet, plaus: _LeafSet | None,
             others: dict[str, tuple[TreeBlock, _LeafSet]]) -> bool:
    """Cut off the leaf combinations of points found invalid (near ties the
    integer scaling admitted); merged leaves share their members' values, so
    the cut holds for every member."""
    for kind, leaves in prob.nogoods:
        blk, ls = _nogood_set(prob, kind, model, plaus, others)
        clause = []
        for t, node in enumerate(leaves):
            i = np.flatnonzero((blk.tree_of == t) & (blk.node == node))
            if i.size == 0 or int(ls.row[i[0]]) not in ls.svars:
                break
            clause.append(_neg(ls.svars[int(ls.row[i[0]])]))
        else:
            if not _clause(m, clause):
                return False
    return True


def _nogood_set(prob: CellProblem, kind: str, model: _LeafSet, plaus: _LeafSet | None,
                others: dict[str, tuple[TreeBlock, _LeafSet]]) -> tuple[TreeBlock, _LeafSet]:
    """The leaves and leaf booleans a no-good of this kind names."""
    if kind == "model":
        return prob.model_leaves, model
    if kind == "plaus":
        if prob.plaus_leaves is None or plaus is None:
            raise RuntimeError("A no-good on the plausibility forest, but the problem has none.")
        return prob.plaus_leaves, plaus
    return others[kind]


def _exclusions(m: Any, prob: CellProblem, lits: list[_Lits | _BandLits]) -> None:
    """Diversity: of each earlier solution's changed features, keep one unchanged."""
    for changed in prob.exclusions:
        us = []
        for j in changed:
            h = int(prob.hat[j])
            u = m.new_bool_var(f"u{j}")
            for lit in (lits[j].ge(h), _neg(lits[j].ge(h + 1))):
                if lit is False:
                    m.add(u == 0)
                elif lit is not True:
                    m.add_implication(u, lit)
            us.append(u)
        m.add_bool_or(us)


def _objective(m: Any, prob: CellProblem, costs: list[np.ndarray], lits: list[_Lits | _BandLits], sc: float) -> Any:
    """Per feature C_j(lo_i) + sum_m (C_j(m) - C_j(m-1)) g_jm, with integer costs scaled by
    ``sc``: their sum, or for the L-infinity cost a variable at least each of them (the largest)."""
    per_feature = [part for j, L in enumerate(lits) for part in _feature_cost(prob, j, L, costs[j], sc)]
    if prob.cost_model.combine == "max":
        return _largest(m, costs, per_feature, sc)
    const = sum(c0 for c0, _ in per_feature)
    return sum(coef * v for _, terms in per_feature for coef, v in terms) + const


def _largest(m: Any, costs: list[np.ndarray], per_feature: list[tuple[int, list[tuple[int, Any]]]], sc: float) -> Any:
    """The L-infinity cost: a variable at least each feature's scaled cost."""
    top = max(int(np.round(float(c[np.isfinite(c)].max()) * sc)) for c in costs) + 1
    z = m.new_int_var(0, top, "linf")
    for c0, terms in per_feature:
        if terms:
            m.add(z >= sum(coef * v for coef, v in terms) + c0)
    return z


def _feature_cost(prob: CellProblem, j: int, L: _Lits | _BandLits, cost: np.ndarray, sc: float
                  ) -> list[tuple[int, list[tuple[int, Any]]]]:
    """Feature ``j``'s scaled cost as (constant, terms) parts: ``C_j(lo_i)`` and the steps
    ``C_j(m) - C_j(m-1)`` on ``g_jm`` (a banded column: :func:`_band_objective`)."""
    c = cost.copy()
    for i in range(1, c.size):  # forbidden interior intervals take their neighbour's cost
        if not np.isfinite(c[i]):
            c[i] = c[i - 1]
    if isinstance(L, _BandLits) and prob.band is not None:
        return _band_objective(prob, j, L, np.isfinite(c), sc)
    assert isinstance(L, _Lits)
    cs = np.round(np.where(np.isfinite(c), c, 0) * sc).astype(np.int64)
    return [(int(cs[L.lo_i]), [(int(cs[mm] - cs[mm - 1]), v) for mm, v in L.vars.items() if cs[mm] != cs[mm - 1]])]


def _band_objective(prob: CellProblem, j: int, L: _BandLits, allowed: np.ndarray, sc: float
                    ) -> list[tuple[int, list[tuple[int, Any]]]]:
    """A banded column's cost as (constant, terms) parts, added for a sum of costs or
    each a lower bound of the largest: the numbers telescoped on ``h`` from the fill
    (0 at the fill, free while the value stays missing, when the search leaves ``h``
    at the fill) and ``leave (1 - miss)``, the price of giving a value."""
    assert prob.band is not None
    raw = prob.band.raw[j].copy()
    raw[~allowed] = np.inf
    raw = raw[:L.b]
    for i in range(1, raw.size):                 # forbidden numbers take their neighbour's cost
        if not np.isfinite(raw[i]):
            raw[i] = raw[i - 1]
    cs = np.round(np.where(np.isfinite(raw), raw, 0) * sc).astype(np.int64)
    parts = []
    if L.numbers:
        parts.append((int(cs[L.n_lo]), [(int(cs[mm] - cs[mm - 1]), v) for mm, v in L.h.items()
                                        if cs[mm] != cs[mm - 1]]))
    leave = int(round(prob.band.leave[j] * sc))
    if leave and L.miss is not True:
        parts.append((leave, [(-leave, L.miss)]))
    return parts


def _tree_cuts(m: Any, blk: TreeBlock, svars: dict[int, Any], lits: list[_Lits | _BandLits], lo_i: np.ndarray, hi_i: np.ndarray, skip: np.ndarray) -> None:
    """Per tree, feature and level: the leaves that need ``x_j > L_m`` sum to at
    most ``g[j][m]``, those that need ``x_j <= L_m`` to at most ``1 - g[j][m]``
    (OCEAN's flow constraints 16-17, aggregated); they tighten the LP relaxation.
    Only the features some leaf of the tree bounds inside the domain are visited,
    and not the one-hot columns in ``skip`` (their leaves name categories)."""
    keys = np.fromiter((i for i, v in svars.items() if v is not True), dtype=np.int64)
    if keys.size < 2:
        return
    tree = blk.tree_of[keys]
    order = np.argsort(tree, kind="stable")
    keys, tree = keys[order], tree[order]
    starts = np.flatnonzero(np.r_[True, tree[1:] != tree[:-1]])
    ends = np.r_[starts[1:], keys.size]
    for a, b in zip(starts, ends):
        if b - a < 2:
            continue
        idx = keys[a:b]
        LO, HI = blk.lo[idx], blk.hi[idx]
        cut_lo, cut_hi = (LO > lo_i) & ~skip, (HI < hi_i) & ~skip
        for j in np.flatnonzero(cut_lo.any(axis=0) | cut_hi.any(axis=0)):
            lo, hi = LO[:, j], HI[:, j]
            _level_cuts(m, lits[j], svars, idx, (lo, hi),
                        np.unique(np.concatenate([lo[cut_lo[:, j]], hi[cut_hi[:, j]] + 1])))


def _level_cuts(m: Any, L: _Lits | _BandLits, svars: dict[int, Any], idx: np.ndarray,
                box: tuple[np.ndarray, np.ndarray], levels: np.ndarray) -> None:
    """One tree's cuts on one feature: at each level ``mm``, its leaves (``idx``, with their
    boxes' bounds on the feature) above it sum to at most ``g``, those below to ``1 - g``."""
    lo, hi = box
    for mm in levels:
        g = L.ge(int(mm))
        if isinstance(g, bool):
            continue
        right = [svars[i] for i in idx[lo >= mm]]
        left = [svars[i] for i in idx[hi < mm]]
        if len(right) >= 2:
            m.add(sum(right) <= g)
        if len(left) >= 2:
            m.add(sum(left) + g <= 1)


def _linear(m: Any, svars: dict[int, Any], coefs: np.ndarray) -> tuple[Any, int]:
    """sum coef_i s_i split into variable terms and the constant of fixed leaves."""
    terms, const = [], 0
    for i, s in svars.items():
        c = int(coefs[i])
        if c == 0:
            continue
        if s is True:
            const += c
        else:
            terms.append(c * s)
    return sum(terms) if terms else 0, const


def _target_constraint(m: Any, ens: Any, tgt: Any, blk: TreeBlock, svars: dict[int, Any]) -> bool:
    """The target of ``ens`` (eqs. 13-14) on the leaf booleans of its block; with a
    margin (confident recourse) the class's probability at least ``tgt.margin``:
    on the margin for a sigmoid link, linear in the leaf probabilities for a forest."""
    V = blk.value
    slack = blk.n_trees + 1  # worst rounding error of T leaves (0.5 each) on a difference, plus the base
    if tgt.kind == "class" and ens.link == "sigmoid":
        _sigmoid_target(m, ens, tgt, blk, svars, slack)
        return True
    if tgt.kind == "class" and tgt.margin is not None:     # a forest: p_c = raw_c / sum_k raw_k >= q
        c_star, q = tgt.class_index, float(tgt.margin)
        coef = V[:, c_star] - q * V.sum(axis=1)
        expr, const, S = _scaled(m, blk, svars, coef)
        m.add(expr + const >= int(np.floor((q * float(np.sum(ens.base_score)) - ens.base_score[c_star]) * S))
              - slack)
    if tgt.kind == "class":
        _class_target(m, ens, tgt, blk, svars, slack)
        return True
    base = ens.base_score
    expr, const, S = _scaled(m, blk, svars, V[:, 0])
    if np.isfinite(tgt.lo):
        m.add(expr + const >= int(np.floor((tgt.lo - base[0]) * S)) - slack)
    if np.isfinite(tgt.hi):
        m.add(expr + const <= int(np.ceil((tgt.hi - base[0]) * S)) + slack)
    return True


def _scaled(m: Any, blk: TreeBlock, svars: dict[int, Any], v: np.ndarray) -> tuple[Any, int, float]:
    """The leaf values ``v`` scaled to integers (:data:`SCORE_SCALE_TARGET` at the largest
    reachable sum) on the leaf booleans: ``(expression, constant, scale)``."""
    S = SCORE_SCALE_TARGET / max(1e-12, _max_abs_sum(blk, v))
    expr, const = _linear(m, svars, np.round(v * S))
    return expr, const, S


def _sigmoid_target(m: Any, ens: Any, tgt: Any, blk: TreeBlock, svars: dict[int, Any], slack: int) -> None:
    """A binary model's one score (sigmoid link): above the cut towards class 1, below it
    towards class 0 (the cut: 0, or the margin's logit)."""
    expr, const, S = _scaled(m, blk, svars, blk.value[:, 0])
    base = ens.base_score
    cut = 0.0 if tgt.margin is None else float(np.log(tgt.margin / (1 - tgt.margin))) / ens.sigmoid_scale
    if tgt.class_index == 1:
        m.add(expr + const >= int(np.floor((cut - base[0]) * S)) - slack)
    else:
        m.add(expr + const <= int(np.ceil((-cut - base[0]) * S)) + slack)


def _class_target(m: Any, ens: Any, tgt: Any, blk: TreeBlock, svars: dict[int, Any], slack: int) -> None:
    """Several classes: the target class's score at least every other's."""
    V, base, c_star = blk.value, ens.base_score, tgt.class_index
    for c in range(V.shape[1]):
        if c == c_star:
            continue
        expr, const, S = _scaled(m, blk, svars, V[:, c_star] - V[:, c])
        rhs = (base[c] - base[c_star]) * S
        m.add(expr + const >= int(np.floor(rhs)) - slack)


def _plaus_constraint(m: Any, delta: float, blk: TreeBlock, svars: dict[int, Any]) -> bool:
    """The plausibility forest's mean path length at least ``delta`` (eq. 33) on its leaf booleans."""
    v = blk.value[:, 0]
    S = SCORE_SCALE_TARGET / max(1e-12, _max_abs_sum(blk, v))
    expr, const = _linear(m, svars, np.round(v * S))
    m.add(expr + const >= int(np.floor(delta * S)) - blk.n_trees - 1)
    return True


def _max_abs_sum(blk: TreeBlock, v: np.ndarray) -> float:
    out = np.zeros(blk.n_trees)
    np.maximum.at(out, blk.tree_of, np.abs(v))
    return float(out.sum())


def _add_hints(m: Any, prob: CellProblem, lits: list[_Lits | _BandLits], leaf_sets: tuple[_LeafSet, _LeafSet | None],
               hint: np.ndarray) -> None:
    """Hint the point ``hint``: its intervals and, for the model's and the
    plausibility forest's leaf sets, the leaves it reaches."""
    cells = prob.interval_of(hint[None, :])[0]
    for j, L in enumerate(lits):
        if isinstance(L, _BandLits):                 # missing: the numbers hinted at the fill
            _hint_band(m, prob, j, L, int(cells[j]))
            continue
        for mm, v in L.vars.items():
            m.add_hint(v, bool(cells[j] >= mm))
    _hint_leaves(m, prob, leaf_sets, hint)


def _hint_band(m: Any, prob: CellProblem, j: int, L: _BandLits, cell: int) -> None:
    """A banded column's hint: missing or not, and its numbers at the fill while missing."""
    at = prob.band.fill_hat[j] if cell == L.b and prob.band is not None else cell
    if L.miss is not True:
        m.add_hint(L.miss, bool(cell == L.b))
    for mm, v in L.h.items():
        m.add_hint(v, bool(at >= mm))


def _hint_leaves(m: Any, prob: CellProblem, leaf_sets: tuple[_LeafSet, _LeafSet | None], hint: np.ndarray) -> None:
    """The leaves the hinted point reaches, for the model's and the plausibility forest's leaf sets."""
    for ls, blk, ens in zip(leaf_sets, (prob.model_leaves, prob.plaus_leaves),
                            (prob.ens, None if prob.plaus is None else prob.plaus.forest)):
        if ls is None or ens is None or blk is None:
            continue
        reached = ens.apply(hint[None, :])[0]
        hit = set(ls.row[blk.node == reached[blk.tree_of]].tolist())
        for i, s in ls.svars.items():
            if s is not True:
                m.add_hint(s, i in hit)
