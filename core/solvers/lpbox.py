"""Best-first branch and bound over boxes of intervals with a linear-programming bound.

The cell problem of :mod:`core.cells.problem` for a sum of per-feature costs
that rise away from the query (L1, L0, squared L2, a mix), solved exactly.
Its nodes are the boxes of :mod:`core.solvers.boxsearch`; its bound is the
optimum of a linear relaxation on the order simplex (OCEAN, Parmentier &
Vidal 2021, section 3.2, eqs. 15-20), stated per side of the query so that
the cost is linear in the level variables:

* per feature ``j`` with query interval ``h`` and level ``k > h``, a variable
  ``u_jk`` (the point lies at or above interval ``k``), and per ``k < h`` a
  variable ``d_jk`` (at or below ``k``), each chain monotone
  (``u_j,k+1 <= u_jk``, ``d_j,k-1 <= d_jk``) and the two sides exclusive
  (``u_j,h+1 + d_j,h-1 <= 1``); the cost is ``sum_k (C(k) - C(k-1)) u_jk``
  plus the same downwards, ``C(k)`` the cheapest allowed interval at or
  beyond ``k`` (eqs. 28-32 for a separable cost);
* per leaf a weight ``z_l`` with one leaf per tree (eq. 13) and every need
  of the target met by the weighted leaf scores (eq. 14, per need as in
  :func:`core.cells.bounds.target_needs`);
* linking, per tree ``t``, feature ``j`` and each level a leaf of ``t``
  bounds: ``sum {z_l : l in t, lo_lj >= k} <= u_jk`` (the leaves that need
  the point at or above ``k``) and ``sum {z_l : l in t, hi_lj < k} <= 1 - u_jk``
  (the leaves that exclude it), and the same downwards. Summing over the
  whole tree rather than per split node (Misic's form, OCEAN eq. 16) is valid
  because one leaf per tree holds, and it is tighter: on breast cancer,
  RF(100, depth 5), L1, the root bound is 73-98% of the optimum where
  CP-SAT's is about 84%.

A box ``[lo, hi]`` only changes variable bounds (``u_jk = 1`` for
``k <= lo_j`` above the query, ``u_jk = 0`` for ``k > hi_j``, and downwards
alike), so each node is the same LP re-solved from the previous basis by
GLOP's dual simplex (OR-Tools, already required for CP-SAT). The bound of a
box is the larger of its LP optimum and the box search's per-tree bound.

The search pops the box of smallest bound; the box's cheapest point and the
LP solution rounded to a point are checked on the model, and the cheaper
valid one is the incumbent; a box whose level variables are integral holds
the LP's point, which is then the box's optimum. Otherwise the box splits at
the fractional level whose cost step, weighted by how fractional it is, is
largest. The smallest bound left is a proven lower bound at every moment
(anytime); the search ends when it reaches the incumbent (proven optimal).
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import Callable

import numpy as np

from core.cells.problem import CellProblem, CellSolution
from core.solvers.boxsearch import BoxSearch

__all__ = ["applies", "solve", "LPBox"]

#: a relative margin taken off every LP optimum (the simplex's tolerances); a box whose bound is
#: within SLACK (relative) of the incumbent is pruned, and the result says so in its ``slack``
LP_MARGIN = 1e-7
SLACK = 2 * LP_MARGIN
#: a dive goes on while its box's bound is within this share of the gap above the best box's
DIVE = 0.5
FRACTIONAL = 1e-6


def applies(prob: CellProblem) -> str | None:
    """None when this solver takes the problem, else why not (a sentence)."""
    if prob.cost_model.combine != "sum":
        return "the LP box search takes a sum of costs"
    if prob.groups:
        return "the LP box search does not take one-hot groups"
    if prob.exclusions:
        return "the LP box search does not take diverse alternatives"
    return None


class LPBox:
    """The relaxation of one problem, kept in one GLOP model re-solved per box."""

    def __init__(self, prob: CellProblem, S: BoxSearch):
        from ortools.linear_solver import pywraplp

        self.prob, self.S = prob, S
        d = S.d
        hat, sizes, off, flat, prev, nxt = S.hat, S.sizes, S.off, S.flat, S.prev, S.next
        # level variables: (feature, level, side) with the step of cost that crossing the level adds
        feat: list[int] = []
        lev: list[int] = []
        side: list[int] = []
        step: list[float] = []
        usable: list[bool] = []
        self.col: dict[tuple[int, int, int], int] = {}
        self.base = 0.0
        for j in range(d):
            o, n, h = int(off[j]), int(sizes[j]), int(hat[j])
            here = float(flat[o + h])
            self.base += here
            for sgn, ks in ((1, range(h + 1, n)), (-1, range(h - 1, -1, -1))):
                before = here
                for k in ks:
                    at = int(nxt[o + k]) if sgn == 1 else int(prev[o + k])
                    reach = o <= at < o + n and np.isfinite(flat[at])
                    c = float(flat[at]) if reach else np.inf
                    self.col[(j, k, sgn)] = len(feat)
                    feat.append(j)
                    lev.append(k)
                    side.append(sgn)
                    step.append(c - before if reach else 0.0)
                    usable.append(reach)
                    if reach:
                        before = c
        self.feat = np.array(feat, dtype=np.int64)
        self.lev = np.array(lev, dtype=np.int64)
        self.side = np.array(side, dtype=np.int64)
        self.step = np.maximum(np.array(step, dtype=float), 0.0)
        self.usable = np.array(usable, dtype=bool)
        nv = self.feat.size
        solver = pywraplp.Solver.CreateSolver("GLOP")
        if solver is None:  # pragma: no cover - OR-Tools always ships GLOP
            raise RuntimeError("GLOP is not available")
        solver.SetSolverSpecificParametersAsString("use_preprocessing:false use_dual_simplex:true")
        self.solver = solver
        inf = solver.infinity()
        self.u = [solver.NumVar(0.0, 1.0 if ok else 0.0, "") for ok in self.usable]
        self.cur_lb = np.zeros(nv)
        self.cur_ub = self.usable.astype(float)
        # leaves: one variable each, bounded by 0 when the leaf cannot be reached within the incumbent
        reach = self._leaf_reach()
        self.z = [solver.NumVar(0.0, 1.0 if ok else 0.0, "") for ok in reach]
        tree = S.tree
        for t in np.unique(tree):
            c = solver.Constraint(1.0, 1.0)
            for leaf in np.flatnonzero(tree == t):
                c.SetCoefficient(self.z[leaf], 1.0)
        for start, n, score, need in S.needs:
            c = solver.Constraint(float(need), inf)
            for i in range(n):
                if score[i] != 0:
                    c.SetCoefficient(self.z[start + i], float(score[i]))
        for (j, k, sgn), ci in self.col.items():      # monotone chains
            nk = self.col.get((j, k + sgn, sgn))
            if nk is not None:
                c = solver.Constraint(-inf, 0.0)
                c.SetCoefficient(self.u[nk], 1.0)
                c.SetCoefficient(self.u[ci], -1.0)
        for j in range(d):                              # one side of the query at a time
            h = int(hat[j])
            a, b = self.col.get((j, h + 1, 1)), self.col.get((j, h - 1, -1))
            if a is not None and b is not None:
                c = solver.Constraint(-inf, 1.0)
                c.SetCoefficient(self.u[a], 1.0)
                c.SetCoefficient(self.u[b], 1.0)
        self._link(reach)
        obj = solver.Objective()
        for i in np.flatnonzero(self.step > 0).tolist():
            obj.SetCoefficient(self.u[i], float(self.step[i]))
        obj.SetMinimization()

    def _leaf_reach(self) -> np.ndarray:
        """Mask of the leaves whose own cheapest point is within the incumbent's cost."""
        S = self.S
        _, _, _, e, _ = S.evaluate(S.root_lo, S.root_hi)
        ub = float(self.prob.upper_bound)
        ok = np.isfinite(e)
        if np.isfinite(ub):
            ok &= e <= ub * (1 + 1e-9) + 1e-12
        return ok

    def _link(self, reach: np.ndarray) -> None:
        """The per-tree linking rows (see the module doc), vectorised over the sparse leaf bounds."""
        S, solver = self.S, self.solver
        inf = solver.infinity()
        f, lo_e, hi_e = S.E_f, S.E_lo, S.E_hi
        leaf = np.repeat(np.arange(S.n_leaf), np.diff(S.ptr))
        tree = S.tree[leaf]
        keep = reach[leaf]
        f, lo_e, hi_e, leaf, tree = f[keep], lo_e[keep], hi_e[keep], leaf[keep], tree[keep]
        hat = S.hat[f]
        order = np.lexsort((f, tree))
        f, lo_e, hi_e, leaf, tree, hat = f[order], lo_e[order], hi_e[order], leaf[order], tree[order], hat[order]
        cut = np.flatnonzero(np.r_[True, (tree[1:] != tree[:-1]) | (f[1:] != f[:-1]), True])
        for a, b in zip(cut[:-1], cut[1:]):
            j, h = int(f[a]), int(hat[a])
            L, H, lv = lo_e[a:b], hi_e[a:b], leaf[a:b]
            rows: list[tuple[int, np.ndarray, float]] = []
            for k in np.unique(L[L > h]):                        # needs the point at or above k
                rows.append((self.col[(j, int(k), 1)], lv[L >= k], -1.0))
            for k in np.unique(H[H < h]):                        # needs it at or below k
                rows.append((self.col[(j, int(k), -1)], lv[H <= k], -1.0))
            up = H + 1
            for k in np.unique(up[(up > h) & (up < S.sizes[j])]):  # excludes it at or above k
                rows.append((self.col[(j, int(k), 1)], lv[H < k], 1.0))
            dn = L - 1
            for k in np.unique(dn[(dn < h) & (dn >= 0)]):        # excludes it at or below k
                rows.append((self.col[(j, int(k), -1)], lv[L > k], 1.0))
            for ci, leaves, sign in rows:
                c = solver.Constraint(-inf, 0.0 if sign < 0 else 1.0)
                c.SetCoefficient(self.u[ci], sign)
                for leaf_i in leaves:
                    c.SetCoefficient(self.z[int(leaf_i)], 1.0)

    def bound(self, lo: np.ndarray, hi: np.ndarray) -> tuple[float, np.ndarray | None]:
        """(the LP bound of the box, the level variables' values), or (inf, None) when the
        LP proves the box empty, or (nan, None) when the LP ended otherwise."""
        from ortools.linear_solver import pywraplp

        k, j, up = self.lev, self.feat, self.side == 1
        lb = np.where(up, (k <= lo[j]) & (lo[j] > self.S.hat[j]), (k >= hi[j]) & (hi[j] < self.S.hat[j]))
        ub = self.usable & np.where(up, k <= hi[j], k >= lo[j])
        lb = lb.astype(float)
        ub = ub.astype(float)
        if np.any(lb > ub):
            return np.inf, None
        for i in np.flatnonzero((lb != self.cur_lb) | (ub != self.cur_ub)):
            self.u[i].SetBounds(float(lb[i]), float(ub[i]))
        self.cur_lb, self.cur_ub = lb, ub
        status = self.solver.Solve()
        if status == pywraplp.Solver.INFEASIBLE:
            return np.inf, None
        if status != pywraplp.Solver.OPTIMAL:
            return np.nan, None
        val = self.base + self.solver.Objective().Value()
        return val - LP_MARGIN * (1.0 + abs(val)), np.array([v.solution_value() for v in self.u])

    def rounded(self, values: np.ndarray, p: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The LP's point: per feature the furthest level it crosses at least half way, else the
        box's cheapest interval; moved to the nearest allowed interval of the box."""
        x = p.copy()
        big = values >= 0.5
        for i in np.flatnonzero(big):
            j, k = int(self.feat[i]), int(self.lev[i])
            if self.side[i] == 1 and k > x[j]:
                x[j] = k
            elif self.side[i] == -1 and k < x[j] and not (x[j] > self.S.hat[j]):
                x[j] = k
        S = self.S
        o = S.off
        for j in range(S.d):
            at = o[j] + x[j]
            if not np.isfinite(S.flat[at]):
                cand = S.next[at] if x[j] > S.hat[j] else S.prev[at]
                x[j] = cand - o[j] if o[j] <= cand < o[j] + S.sizes[j] else p[j]
        return np.clip(x, lo, hi)


def solve(prob: CellProblem, time_limit: float = 30.0, hint: np.ndarray | None = None,
          stop: threading.Event | None = None, node_limit: int | None = None,
          on_bound: Callable[[float, float], None] | None = None,
          on_solution: Callable[[np.ndarray], None] | None = None) -> CellSolution | None:
    """The cheapest cell reaching the target, proven optimal (status "optimal" or
    "infeasible"), or with a proven lower bound (status "feasible" with the incumbent,
    "unknown" without) when ``time_limit``, ``node_limit`` or ``stop`` ends it first;
    None when the problem is not for this solver (:func:`applies`, or costs that do not
    rise away from the query). ``hint``: a valid point, the first incumbent;
    ``on_bound(lower, upper)`` hears every improvement of either bound and
    ``on_solution(cells)`` every new incumbent."""
    if applies(prob) is not None:
        return None
    deadline = time.perf_counter() + time_limit
    S = BoxSearch(prob)
    if not S.ok or S.n_leaf == 0:
        return None
    ub, inc = float(prob.upper_bound), None
    if hint is not None:
        hc = prob.interval_of(np.asarray(hint, dtype=float)[None, :])[0]
        if prob.is_valid(prob.point_of(hc)[None, :])[0]:
            inc, ub = hc, min(ub, float(prob.cost_of(hc)))
    LP = LPBox(prob, S)
    nodes = 0
    lb_told = -np.inf

    def better(cells: np.ndarray) -> None:
        nonlocal inc, ub
        c = float(prob.cost_of(cells))
        if c < ub and prob.is_valid(prob.point_of(cells)[None, :])[0]:
            inc, ub = cells.copy(), c
            if on_solution is not None:
                on_solution(inc)
            if on_bound is not None:
                on_bound(max(lb_told, 0.0), ub)

    def prunes(bound: float) -> bool:
        if not np.isfinite(ub):
            return bound == np.inf
        return not (bound < ub - SLACK * (1.0 + abs(ub)))

    def evaluate(lo: np.ndarray, hi: np.ndarray):
        nonlocal nodes
        nodes += 1
        box_bound, p, base, _, holds = S.evaluate(lo, hi)
        if not np.isfinite(box_bound):
            return np.inf, p, None
        if holds:
            better(p)
        lp, values = LP.bound(lo, hi)
        if np.isnan(lp):
            lp = -np.inf       # the LP gave no answer: the box search's bound stands
        return max(box_bound, lp), p, values

    # a node: (bound, -depth, order, lo, hi, evaluated); an unevaluated box carries its parent's bound
    heap: list = []
    counter = 0
    dive = None

    def node(bound: float, depth: int, lo: np.ndarray, hi: np.ndarray, done: tuple | None) -> tuple:
        nonlocal counter
        counter += 1
        return (bound, -depth, counter, lo, hi, done)

    heap.append(node(-np.inf, 0, S.root_lo.copy(), S.root_hi.copy(), None))
    while heap or dive is not None:
        lower = min(heap[0][0] if heap else np.inf, dive[0] if dive is not None else np.inf)
        if (stop is not None and stop.is_set()) or time.perf_counter() > deadline or \
                (node_limit is not None and nodes > node_limit):
            return CellSolution("feasible" if inc is not None else "unknown", inc, max(0.0, min(lower, ub)),
                                slack=SLACK * (1.0 + abs(ub)) if np.isfinite(ub) else 0.0)
        if prunes(lower):
            break
        if on_bound is not None and lower > lb_told and np.isfinite(lower):
            lb_told = lower
            on_bound(lower, ub)
        diving = dive is not None
        if dive is not None:
            item, dive = dive, None
        else:
            item = heapq.heappop(heap)
        bound, neg_depth, _, lo, hi, done = item
        if done is None:
            lp_bound, p, values = evaluate(lo, hi)
            bound = max(bound, lp_bound)
            if prunes(bound):
                continue
            if diving and heap and np.isfinite(ub) and bound > heap[0][0] + DIVE * (ub - heap[0][0]):
                heapq.heappush(heap, node(bound, -neg_depth, lo, hi, (p, values)))
                continue                    # the dive has gone past the best boxes: back to best-first
        else:
            p, values = done
        branch: tuple[int, int] | None
        if values is not None:
            x = LP.rounded(values, p, lo, hi)
            better(x)
            if prunes(bound):
                continue
            frac = np.minimum(values, 1 - values)
            cand = np.flatnonzero(frac > FRACTIONAL)
            if cand.size:
                i = int(cand[np.argmax(frac[cand] * np.maximum(LP.step[cand], 1e-12))])
                j, k = int(LP.feat[i]), int(LP.lev[i])
                branch = (j, k if LP.side[i] == 1 else k + 1)      # split into < level and >= level
                toward_high = (values[i] >= 0.5) == (LP.side[i] == 1)
            elif inc is not None and np.array_equal(inc, x):
                continue                    # the LP's own point, valid: the box's optimum (now the incumbent)
            else:
                branch, toward_high = _split_at(x, lo, hi), False
        else:
            branch, toward_high = _split_at(p, lo, hi), False
        if branch is None:
            continue                        # a single cell, checked above: nothing better in it
        j, sv = branch
        hi1 = hi.copy()
        hi1[j] = sv - 1
        lo2 = lo.copy()
        lo2[j] = sv
        low_box = node(bound, 1 - neg_depth, lo, hi1, None)
        high_box = node(bound, 1 - neg_depth, lo2, hi, None)
        dive, other = (high_box, low_box) if toward_high else (low_box, high_box)
        heapq.heappush(heap, other)     # the child the LP leans to is solved next, from this LP's basis
    if inc is None:
        return CellSolution("infeasible", None, np.inf)
    return CellSolution("optimal", inc, float(ub), slack=SLACK * (1.0 + abs(ub)))


def _split_at(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[int, int] | None:
    """A split of the box that separates the cell ``x`` from part of the box, or None
    when the box is that single cell."""
    wide = np.flatnonzero(lo < hi)
    if wide.size == 0:
        return None
    j = int(wide[0])
    return (j, int(x[j]) + 1) if x[j] < hi[j] else (j, int(x[j]))
