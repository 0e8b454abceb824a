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
  the optimum by at most ``n_features / 2e9`` of the bound, reported in ``slack``).
"""

from __future__ import annotations

import numpy as np

from core.cells.bounds import bounded_costs, reachable_leaves
from core.cells.groups import grouped_leaves
from core.cells.problem import CellProblem, CellSolution

__all__ = ["solve"]

COST_SCALE_TARGET = 1e9
SCORE_SCALE_TARGET = 1e9
# measured on RF(100, depth 5), breast cancer: the LP worker proves bounds; see bench/optimal.py
SUBSOLVERS = ["max_lp", "core"]


class _Lits:
    """Literals ``[x_j > L_jm]`` of one feature: constants outside the allowed span."""

    def __init__(self, model, j: int, allowed: np.ndarray):
        self.k = allowed.size - 1
        ok = np.flatnonzero(allowed)
        self.lo_i, self.hi_i = int(ok[0]), int(ok[-1])
        self.vars = {m: model.new_bool_var(f"g{j}_{m}") for m in range(self.lo_i + 1, self.hi_i + 1)}
        for m in range(self.lo_i + 2, self.hi_i + 1):
            model.add_implication(self.vars[m], self.vars[m - 1])

    def ge(self, i: int):
        """Literal for 'interval >= i': True, False or a BoolVar."""
        if i <= self.lo_i:
            return True
        if i > self.hi_i:
            return False
        return self.vars[i]


def _neg(lit):
    return (not lit) if isinstance(lit, bool) else lit.Not()


def _clause(model, lits) -> bool:
    """Add OR(lits); False if it can never hold."""
    if any(lit is True for lit in lits):
        return True
    real = [lit for lit in lits if lit is not False]
    if not real:
        return False
    model.add_bool_or(real)
    return True


def solve(prob: CellProblem, time_limit: float = 30.0, hint: np.ndarray | None = None,
                n_workers: int = 2) -> CellSolution:
    from ortools.sat.python import cp_model

    d = prob.n_features
    ub = prob.upper_bound
    costs = bounded_costs(prob)
    allowed = [np.isfinite(c) for c in costs]
    if any(not a.any() for a in allowed):
        return CellSolution("infeasible", None, np.inf)
    ref = ub if np.isfinite(ub) and ub > 0 else max(1e-12, sum(float(c[np.isfinite(c)].max()) for c in costs))
    sc = COST_SCALE_TARGET / ref

    m = cp_model.CpModel()
    lits = [_Lits(m, j, allowed[j]) for j in range(d)]
    lo_i = np.array([L.lo_i for L in lits])   # the allowed span of each feature's intervals
    hi_i = np.array([L.hi_i for L in lits])
    for j in range(d):  # forbidden intervals inside the allowed span
        for i in range(lits[j].lo_i + 1, lits[j].hi_i):
            if not allowed[j][i] and not _clause(m, [_neg(lits[j].ge(i)), lits[j].ge(i + 1)]):
                return CellSolution("infeasible", None, np.inf)

    def leaf_vars(blk, name):
        mask = reachable_leaves(blk, costs, ub)
        svars: dict[int, object] = {}
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
        _tree_cuts(m, blk, svars, lits, lo_i, hi_i)
        keys = np.fromiter(svars.keys(), dtype=np.int64, count=len(svars))
        lo_all, hi_all = blk.lo[keys], blk.hi[keys]
        need_lo, need_hi = lo_all > lo_i, hi_all < hi_i       # only the bounds that cut the domain
        for r, j in zip(*np.nonzero(need_lo)):
            if not _clause(m, [_neg(svars[int(keys[r])]), lits[j].ge(int(lo_all[r, j]))]):
                return None
        for r, j in zip(*np.nonzero(need_hi)):
            if not _clause(m, [_neg(svars[int(keys[r])]), _neg(lits[j].ge(int(hi_all[r, j]) + 1))]):
                return None
        return svars

    model_blk, model_row = grouped_leaves(prob, prob.model_leaves)
    model_s = leaf_vars(model_blk, "s")
    if model_s is None:
        return CellSolution("infeasible", None, np.inf)
    if not _target_constraint(m, prob, model_blk, model_s):
        return CellSolution("infeasible", None, np.inf)
    plaus_s, plaus_blk, plaus_row = None, None, None
    if prob.plaus_leaves is not None:
        plaus_blk, plaus_row = grouped_leaves(prob, prob.plaus_leaves)
        plaus_s = leaf_vars(plaus_blk, "p")
        if plaus_s is None or not _plaus_constraint(m, prob, plaus_blk, plaus_s):
            return CellSolution("infeasible", None, np.inf)
    for g in prob.groups:  # exactly one category: column value 1 <=> interval of 1
        ones = []
        for j in g:
            i1 = int(np.searchsorted(prob.levels[j], 1.0, side="left"))
            ones.append(lits[j].ge(i1))
        const = sum(1 for v in ones if v is True)
        real = [v for v in ones if not isinstance(v, bool)]
        if const > 1 or (const == 0 and not real):
            return CellSolution("infeasible", None, np.inf)
        if const == 1:
            for v in real:
                m.add(v == 0)
        else:
            m.add_exactly_one(real)
    for kind, leaves in prob.nogoods:  # merged leaves share their members' values: the cut holds for all
        blk, row, svars = ((prob.model_leaves, model_row, model_s) if kind == "model"
                           else (prob.plaus_leaves, plaus_row, plaus_s))
        clause, skip = [], False
        for t, node in enumerate(leaves):
            i = np.flatnonzero((blk.tree_of == t) & (blk.node == node))
            if i.size == 0 or int(row[i[0]]) not in svars:
                skip = True
                break
            clause.append(_neg(svars[int(row[i[0]])]))
        if not skip and not _clause(m, clause):
            return CellSolution("infeasible", None, np.inf)
    for changed in prob.exclusions:  # diversity: keep one of these features unchanged
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

    # objective: sum_j C_j(lo_i) + sum_m (C_j(m) - C_j(m-1)) g_jm, with scaled integer costs
    obj, const = [], 0
    for j in range(d):
        c = costs[j].copy()
        for i in range(1, c.size):  # forbidden interior intervals take their neighbour's cost
            if not np.isfinite(c[i]):
                c[i] = c[i - 1]
        cs = np.round(np.where(np.isfinite(c), c, 0) * sc).astype(np.int64)
        const += int(cs[lits[j].lo_i])
        for mm, v in lits[j].vars.items():
            delta = int(cs[mm] - cs[mm - 1])
            if delta:
                obj.append((delta, v))
    expr = sum(coef * v for coef, v in obj) + const
    if np.isfinite(ub):
        m.add(expr <= int(np.floor(ub * sc)) + d + 1)
    m.minimize(expr)
    if hint is not None:
        _add_hints(m, prob, lits, ((model_row, model_s), (plaus_row, plaus_s)), hint)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(max(time_limit, 0.01))
    solver.parameters.num_workers = int(max(1, n_workers))
    solver.parameters.linearization_level = 1
    if n_workers >= 2:
        solver.parameters.subsolvers.extend(SUBSOLVERS)
    status = solver.solve(m)
    if status == cp_model.INFEASIBLE:
        return CellSolution("infeasible", None, np.inf)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if status == cp_model.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT rejected the model: {m.validate()}")
        return CellSolution("unknown", None, solver.best_objective_bound / sc if solver.best_objective_bound else 0.0)
    cells = np.array([lits[j].lo_i + sum(int(solver.boolean_value(v)) for v in lits[j].vars.values())
                      for j in range(d)])
    lb = max(0.0, (solver.best_objective_bound - d / 2) / sc)
    return CellSolution("optimal" if status == cp_model.OPTIMAL else "feasible", cells, lb, slack=d / (2 * sc))


def _tree_cuts(m, blk, svars, lits, lo_i: np.ndarray, hi_i: np.ndarray) -> None:
    """Per tree, feature and level: the leaves that need ``x_j > L_m`` sum to at
    most ``g[j][m]``, those that need ``x_j <= L_m`` to at most ``1 - g[j][m]``
    (OCEAN's flow constraints 16-17, aggregated); they tighten the LP relaxation.
    Only the features some leaf of the tree bounds inside the domain are visited."""
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
        cut_lo, cut_hi = LO > lo_i, HI < hi_i
        for j in np.flatnonzero(cut_lo.any(axis=0) | cut_hi.any(axis=0)):
            L = lits[j]
            lo, hi = LO[:, j], HI[:, j]
            for mm in np.unique(np.concatenate([lo[cut_lo[:, j]], hi[cut_hi[:, j]] + 1])):
                g = L.ge(int(mm))
                if isinstance(g, bool):
                    continue
                right = [svars[i] for i in idx[lo >= mm]]
                left = [svars[i] for i in idx[hi < mm]]
                if len(right) >= 2:
                    m.add(sum(right) <= g)
                if len(left) >= 2:
                    m.add(sum(left) + g <= 1)


def _linear(m, svars, coefs):
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


def _target_constraint(m, prob, blk, svars) -> bool:
    ens, tgt = prob.ens, prob.target
    V = blk.value
    T = blk.n_trees
    base = ens.base_score
    slack = T + 1  # worst rounding error of T leaves (0.5 each) on a difference, plus the base
    if tgt.kind == "class" and ens.link == "sigmoid":
        v = V[:, 0]
        S = SCORE_SCALE_TARGET / max(1e-12, _max_abs_sum(blk, v))
        expr, const = _linear(m, svars, np.round(v * S))
        rhs = -base[0] * S
        if tgt.class_index == 1:
            m.add(expr + const >= int(np.floor(rhs)) - slack)
        else:
            m.add(expr + const <= int(np.ceil(rhs)) + slack)
        return True
    if tgt.kind == "class":
        c_star = tgt.class_index
        for c in range(V.shape[1]):
            if c == c_star:
                continue
            diff = V[:, c_star] - V[:, c]
            S = SCORE_SCALE_TARGET / max(1e-12, _max_abs_sum(blk, diff))
            expr, const = _linear(m, svars, np.round(diff * S))
            rhs = (base[c] - base[c_star]) * S
            m.add(expr + const >= int(np.floor(rhs)) - slack)
        return True
    v = V[:, 0]
    S = SCORE_SCALE_TARGET / max(1e-12, _max_abs_sum(blk, v))
    expr, const = _linear(m, svars, np.round(v * S))
    if np.isfinite(tgt.lo):
        m.add(expr + const >= int(np.floor((tgt.lo - base[0]) * S)) - slack)
    if np.isfinite(tgt.hi):
        m.add(expr + const <= int(np.ceil((tgt.hi - base[0]) * S)) + slack)
    return True


def _plaus_constraint(m, prob, blk, svars) -> bool:
    v = blk.value[:, 0]
    S = SCORE_SCALE_TARGET / max(1e-12, _max_abs_sum(blk, v))
    expr, const = _linear(m, svars, np.round(v * S))
    m.add(expr + const >= int(np.floor(prob.plaus.delta * S)) - blk.n_trees - 1)
    return True


def _max_abs_sum(blk, v: np.ndarray) -> float:
    out = np.zeros(blk.n_trees)
    np.maximum.at(out, blk.tree_of, np.abs(v))
    return float(out.sum())


def _add_hints(m, prob, lits, leaf_sets, hint):
    """Hint the point ``hint``: its intervals and, per leaf set ((row map,
    booleans) of the model and the plausibility forest), the leaves it reaches."""
    cells = prob.interval_of(hint[None, :])[0]
    for j, L in enumerate(lits):
        for mm, v in L.vars.items():
            m.add_hint(v, bool(cells[j] >= mm))
    for (row, svars), blk, ens in zip(leaf_sets, (prob.model_leaves, prob.plaus_leaves),
                                      (prob.ens, None if prob.plaus is None else prob.plaus.forest)):
        if svars is None or ens is None:
            continue
        reached = ens.apply(hint[None, :])[0]
        hit = set(row[blk.node == reached[blk.tree_of]].tolist())
        for i, s in svars.items():
            if s is not True:
                m.add_hint(s, i in hit)
