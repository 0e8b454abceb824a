"""OCEAN's mixed-integer program (Parmentier & Vidal 2021, section 3), solved by
HiGHS (through scipy) or Gurobi.

Variables, per tree ``t`` of the model (and of the Isolation Forest):
``y_tv`` in [0, 1] for every node (the flow, eqs. 8-9, 11) and a binary
``lambda_td`` per depth (eqs. 10a-10b, 12); by theorem 1 the flows are integral.
Per feature ``j`` and level ``L_jm``: ``mu_jm`` in [0, 1], the order simplex
``mu_jm <= mu_j(m-1)`` (eq. 15), linked to the splits by
``y_l(v) <= 1 - mu_jm`` (eq. 16) and ``y_r(v) <= mu_jm`` (eqs. 17-18 with the
levels' intervals open at the bottom, so no epsilon is needed). One-hot groups
sum to one (eq. 27). The class condition is eqs. 13-14 on the leaf flows with a
margin of 1e-9 (ties are re-checked by the caller), plausibility eq. 33.
The objective is eq. 31 generalised: each feature's interval cost telescoped
on ``mu``; for squared l2 this equals the cost at the levels, where optima lie.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from core.cells.bounds import bounded_costs, reachable_leaves
from core.cells.problem import CellProblem, CellSolution, Other, TreeBlock
from core.errors import GurobiUnavailable

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from core.model import TreeEnsemble

__all__ = ["build_ocean", "solve", "OceanMILP", "GurobiUnavailable"]

MARGIN = 1e-9


@dataclass
class OceanMILP:
    c: np.ndarray                # objective
    c0: float                    # constant
    A: csr_matrix                # (m, n)
    lb_row: np.ndarray
    ub_row: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    integrality: np.ndarray      # 1 for binaries
    mu_index: list[dict[int, int]]  # per feature: level m -> column of mu_jm
    lo_i: list[int]
    n_vars: int


#: per feature, its columns ``{level m: column of mu_jm}`` and ``{level value: m}``
_Mu = list[tuple[dict[int, int], dict[float, int]]]
#: per feature, the constant value of ``mu_jm`` outside the allowed span (None: a variable)
_Consts = list[Callable[[int], int | None]]


class _Builder:
    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integ: list[int] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.rlo: list[float] = []
        self.rhi: list[float] = []

    def var(self, lo: float = 0.0, hi: float = 1.0, integer: bool = False) -> int:
        self.lb.append(lo)
        self.ub.append(hi)
        self.integ.append(int(integer))
        return len(self.lb) - 1

    def row(self, terms: Iterable[tuple[int, float]], lo: float = -np.inf, hi: float = np.inf) -> None:
        r = len(self.rlo)
        for col, v in terms:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(v)
        self.rlo.append(lo)
        self.rhi.append(hi)


def _const(lo: int, hi: int) -> Callable[[int], int | None]:
    """``mu_jm`` of a feature whose allowed intervals are ``lo..hi``: 1 at and below ``lo``,
    0 above ``hi``, None (a variable) between."""
    return lambda m: 1 if m <= lo else (0 if m > hi else None)


def _add_trees(B: _Builder, ens: TreeEnsemble, mu: _Mu, lits_const: _Consts,
               allowed_leaf: Callable[[int, int], bool] | None = None) -> list[dict[int, int]]:
    """Flow variables and eqs. 8-12, 16-17 for every tree; returns per tree the
    columns of its leaves, as {node: column}."""
    out = []
    for t, tree in enumerate(ens.trees):
        depth = _depths(tree)
        y = [B.var() for _ in range(tree.n_nodes)]
        B.row([(y[0], 1.0)], 1.0, 1.0)                                   # (8)
        internal = np.flatnonzero(tree.children_left >= 0)
        lam = {dd: B.var(integer=True) for dd in np.unique(depth[internal])}
        for v in internal:
            _split_rows(B, tree, int(v), y, mu, lits_const)
        for dd, lv in lam.items():
            at = internal[depth[internal] == dd]
            B.row([(y[tree.children_left[v]], 1.0) for v in at] + [(lv, -1.0)], hi=0.0)       # (10a)
            B.row([(y[tree.children_right[v]], 1.0) for v in at] + [(lv, 1.0)], hi=1.0)       # (10b)
        out.append(_leaf_columns(B, tree, t, y, allowed_leaf))
    return out


def _leaf_columns(B: _Builder, tree: Any, t: int, y: list[int],
                  allowed_leaf: Callable[[int, int], bool] | None) -> dict[int, int]:
    """Tree ``t``'s leaves as {node: column}, those not allowed held at 0."""
    leaves = np.flatnonzero(tree.children_left < 0)
    if allowed_leaf is not None:
        for v in leaves:
            if not allowed_leaf(t, int(v)):
                B.ub[y[v]] = 0.0
    return {int(v): y[v] for v in leaves}


def _depths(tree: Any) -> np.ndarray:
    """Each node's depth (the root's 0; a parent comes before its children)."""
    depth = np.zeros(tree.n_nodes, dtype=int)
    for u in range(tree.n_nodes):
        if tree.children_left[u] >= 0:
            depth[tree.children_left[u]] = depth[tree.children_right[u]] = depth[u] + 1
    return depth


def _split_rows(B: _Builder, tree: Any, v: int, y: list[int], mu: _Mu, lits_const: _Consts) -> None:
    """Node ``v``'s flow into its children (eq. 9) and its split on the order simplex (eqs.
    16-17), or the child its split never reaches closed when the level is constant."""
    l, r = tree.children_left[v], tree.children_right[v]
    B.row([(y[v], 1.0), (y[l], -1.0), (y[r], -1.0)], 0.0, 0.0)   # (9)
    j, thr = int(tree.feature[v]), float(tree.threshold[v])
    m = mu[j][1][thr]
    g = lits_const[j](m)
    if g is None:
        B.row([(y[l], 1.0), (mu[j][0][m], 1.0)], hi=1.0)        # (16)
        B.row([(y[r], 1.0), (mu[j][0][m], -1.0)], hi=0.0)       # (17)
    elif g == 1:
        B.ub[y[l]] = 0.0
    else:
        B.ub[y[r]] = 0.0


def build_ocean(prob: CellProblem) -> OceanMILP:
    """OCEAN's MILP for a :class:`core.cells.CellProblem` (see module doc)."""
    from scipy import sparse

    B = _Builder()
    mu, lo_i, consts, obj, c0 = add_cell_model(B, prob, prob.upper_bound)
    n = len(B.lb)
    cvec = np.zeros(n)
    for col, v in obj.items():
        cvec[col] = v
    A = sparse.csr_matrix((B.vals, (B.rows, B.cols)), shape=(len(B.rlo), n))
    return OceanMILP(cvec, c0, A, np.array(B.rlo), np.array(B.rhi), np.array(B.lb), np.array(B.ub),
                     np.array(B.integ), [m[0] for m in mu], lo_i, n)


def add_cell_model(B: _Builder, prob: CellProblem, ub: float) -> tuple[_Mu, list[int], _Consts, dict[int, float], float]:
    """Every row of OCEAN's MILP but its objective, added to ``B``: the order simplex of each
    feature (eq. 15, forbidden intervals held out), the trees (eqs. 8-12, 16-17, leaves whose
    cheapest point costs more than ``ub`` held at 0), the target (eqs. 13-14), plausibility
    (eq. 33), the one-hot groups (eq. 27). Returns the level variables (per feature
    ``({m: column}, {level: m})``), each feature's lowest allowed interval, the constant
    level variables, and the telescoped cost on the level variables (``{column: cost}``
    and its constant, eq. 31), which a caller with a cost of its own leaves out."""
    costs = bounded_costs(prob)
    mu: _Mu = []
    lo_i: list[int] = []
    consts: _Consts = []
    obj: dict[int, float] = {}
    c0 = 0.0
    for j in range(prob.n_features):
        cols, lo, hi = _order_simplex(B, costs[j])
        mu.append((cols, {float(v): m + 1 for m, v in enumerate(prob.levels[j])}))
        lo_i.append(lo)
        consts.append(_const(lo, hi))
        c0 += _telescoped(costs[j], lo, cols, obj)

    def allowed(blk: TreeBlock) -> Callable[[int, int], bool]:
        mask = reachable_leaves(blk, costs, ub)
        keep = {(int(t), int(n)) for t, n, k in zip(blk.tree_of, blk.node, mask) if k}
        return lambda t, v: (t, v) in keep

    leaves = _add_trees(B, prob.ens, mu, consts, allowed(prob.model_leaves))
    _target_rows(B, prob, leaves)
    for other in prob.others:                  # further models: their trees and their target, on the same levels
        _target_rows(B, other, _add_trees(B, other.ens, mu, consts, allowed(other.leaves)))
    if prob.plaus is not None:
        if prob.plaus_leaves is None:
            raise RuntimeError("The problem has a plausibility forest but not its leaves (core.cells.build_problem "
                               "makes both).")
        pl = _add_trees(B, prob.plaus.forest, mu, consts, allowed(prob.plaus_leaves))
        f = prob.plaus.forest
        terms = [(col, float(f.trees[t].value[v, 0]) / f.n_trees) for t, cols in enumerate(pl)
                 for v, col in cols.items()]
        B.row(terms, lo=prob.plaus.delta)                                  # (33)
    _group_rows(B, prob, mu, consts)
    return mu, lo_i, consts, obj, c0


def _order_simplex(B: _Builder, cost: np.ndarray) -> tuple[dict[int, int], int, int]:
    """A feature's level variables ``mu_m`` between its lowest and highest allowed intervals,
    nonincreasing (eq. 15), each forbidden interval held out; ``(columns, lo, hi)``."""
    ok = np.flatnonzero(np.isfinite(cost))
    if ok.size == 0:
        raise _Infeasible()
    lo, hi = int(ok[0]), int(ok[-1])
    cols = {m: B.var() for m in range(lo + 1, hi + 1)}
    for m in range(lo + 2, hi + 1):
        B.row([(cols[m], 1.0), (cols[m - 1], -1.0)], hi=0.0)          # (15)
    for i in range(lo + 1, hi):
        if not np.isfinite(cost[i]):
            B.row([(cols[i], 1.0), (cols[i + 1], -1.0)], hi=0.0)      # forbidden interval i
    return cols, lo, hi


def _telescoped(cost: np.ndarray, lo: int, cols: dict[int, int], obj: dict[int, float]) -> float:
    """A feature's cost telescoped on its level variables (eq. 31), added to ``obj``; its
    constant ``C(lo)`` (a forbidden interval takes its neighbour's cost)."""
    c = cost.copy()
    for i in range(1, c.size):
        if not np.isfinite(c[i]):
            c[i] = c[i - 1]
    for m, col in cols.items():
        obj[col] = float(c[m] - c[m - 1])
    return float(c[lo])


def _group_rows(B: _Builder, prob: CellProblem, mu: _Mu, consts: _Consts) -> None:
    """Exactly one column of each one-hot group at 1 (eq. 27)."""
    for g in prob.groups:
        terms, fixed = [], 0.0
        for j in g:
            i1 = int(np.searchsorted(prob.levels[j], 1.0, side="left"))
            k = consts[j](i1)
            if k is None:
                terms.append((mu[j][0][i1], 1.0))
            else:
                fixed += k
        B.row(terms, 1.0 - fixed, 1.0 - fixed)                            # (27)


class _Infeasible(Exception):
    pass


def _target_rows(B: _Builder, prob: CellProblem | Other, leaves: list[dict[int, int]]) -> None:
    ens, tgt = prob.ens, prob.target
    scale = 1.0 / ens.n_trees if ens.aggregation == "mean" else 1.0
    base = ens.base_score

    def terms(fn: Callable[[np.ndarray], Any]) -> list[tuple[int, float]]:
        return [(col, float(fn(ens.trees[t].value[v])) * scale) for t, cols in enumerate(leaves)
                for v, col in cols.items()]

    if tgt.kind == "class" and ens.link == "sigmoid":
        if tgt.class_index == 1:
            B.row(terms(lambda val: val[0]), lo=-base[0] + (0 if ens.positive_at_tie else MARGIN))
        else:
            B.row(terms(lambda val: val[0]), hi=-base[0] - (MARGIN if ens.positive_at_tie else 0))
    elif tgt.kind == "class":
        _class_rows(B, ens, tgt.class_index, terms)
    else:
        B.row(terms(lambda val: val[0]), lo=tgt.lo - base[0], hi=tgt.hi - base[0])


def _class_rows(B: _Builder, ens: TreeEnsemble, c0: int,
                terms: Callable[[Callable[[np.ndarray], Any]], list[tuple[int, float]]]) -> None:
    """Class ``c0``'s score above every other class's (eqs. 13-14; argmax keeps the first maximum)."""
    base = ens.base_score
    for c in range(ens.n_outputs):
        if c != c0:
            need = base[c] - base[c0] + (MARGIN if c < c0 else 0.0)
            B.row(terms(lambda val: val[c0] - val[c]), lo=need)  # read now: c is this class


def _read(prob: CellProblem, milp: OceanMILP, x: np.ndarray) -> np.ndarray:
    cells = np.zeros(prob.n_features, dtype=int)
    for j in range(prob.n_features):
        cells[j] = milp.lo_i[j] + sum(int(round(x[col])) for col in milp.mu_index[j].values())
    return cells


def solve(prob: CellProblem, solver: str = "highs", time_limit: float = 30.0) -> CellSolution:
    """Build and solve OCEAN's MILP; ``solver`` "highs" or "gurobi"."""
    try:
        milp = build_ocean(prob)
    except _Infeasible:
        return CellSolution("infeasible", None, np.inf)
    if solver == "gurobi":
        return _solve_gurobi(prob, milp, time_limit)
    return _solve_highs(prob, milp, time_limit)


def _solve_highs(prob: CellProblem, milp: OceanMILP, time_limit: float) -> CellSolution:
    from scipy.optimize import Bounds, LinearConstraint
    from scipy.optimize import milp as scipy_milp

    res = scipy_milp(milp.c, integrality=milp.integrality, bounds=Bounds(milp.lb, milp.ub),
                     constraints=LinearConstraint(milp.A, milp.lb_row, milp.ub_row),
                     options={"time_limit": max(0.01, time_limit), "mip_rel_gap": 1e-9, "disp": False})
    if res.status == 2:  # infeasible
        return CellSolution("infeasible", None, np.inf)
    if res.x is None:
        return CellSolution("unknown", None, 0.0)
    bound = getattr(res, "mip_dual_bound", None)
    lb = milp.c0 + (bound if bound is not None and np.isfinite(bound) else 0.0)
    status = "optimal" if res.status == 0 else "feasible"
    return CellSolution(status, _read(prob, milp, res.x), lb if status != "optimal" else milp.c0 + res.fun)


def _solve_gurobi(prob: CellProblem, milp: OceanMILP, time_limit: float) -> CellSolution:
    try:
        import gurobipy as gp
        from gurobipy import GRB
    except ImportError as exc:
        raise GurobiUnavailable(f"gurobipy is not installed ({exc}).") from None
    try:
        env = gp.Env(params={"OutputFlag": 0})
        m = gp.Model(env=env)
        vtype = np.where(milp.integrality == 1, GRB.BINARY, GRB.CONTINUOUS)
        x = m.addMVar(milp.n_vars, lb=milp.lb, ub=milp.ub, vtype=vtype)
        fin_lo, fin_hi = np.isfinite(milp.lb_row), np.isfinite(milp.ub_row)
        eq = fin_lo & fin_hi & (milp.lb_row == milp.ub_row)
        A = milp.A
        if eq.any():
            m.addConstr(A[eq] @ x == milp.lb_row[eq])
        ge = fin_lo & ~eq
        le = fin_hi & ~eq
        if ge.any():
            m.addConstr(A[ge] @ x >= milp.lb_row[ge])
        if le.any():
            m.addConstr(A[le] @ x <= milp.ub_row[le])
        m.setObjective(milp.c @ x + milp.c0, GRB.MINIMIZE)
        m.Params.TimeLimit = max(0.01, time_limit)
        m.Params.MIPGap = 1e-9
        m.Params.Threads = 2
        m.optimize()
    except gp.GurobiError as exc:
        raise GurobiUnavailable(f"Gurobi could not solve this model: {exc}") from None
    if m.Status == GRB.INFEASIBLE:
        return CellSolution("infeasible", None, np.inf)
    if m.SolCount == 0:
        return CellSolution("unknown", None, 0.0)
    status = "optimal" if m.Status == GRB.OPTIMAL else "feasible"
    return CellSolution(status, _read(prob, milp, x.getAttr(GRB.Attr.X)), float(m.ObjBound))
