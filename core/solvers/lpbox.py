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
  whole tree rather than per split node (Misic's form behind OCEAN eq. 16)
  is valid because one leaf per tree holds, and tighter (CP-SAT's model
  carries the same rows, :func:`core.solvers.cpsat._tree_cuts`). On breast
  cancer, RF(100, depth 5), L1, the root bound is 73-98% of the optimum.

A box ``[lo, hi]`` only changes variable bounds (``u_jk = 1`` for
``k <= lo_j`` above the query, ``u_jk = 0`` for ``k > hi_j``, and downwards
alike), so each node is the same LP re-solved from the previous basis by
GLOP's dual simplex (OR-Tools, already required for CP-SAT), which stops
as soon as its objective (it only rises) passes the incumbent's cost: such a
box is closed without its optimum. The bound of a
box is the larger of its LP optimum and the box search's per-tree bound. Two
reductions hold for every point cheaper than the incumbent and so tighten
the box without losing any: a leaf whose cheapest point in the box costs at
least the incumbent is held at 0, and a level variable whose reduced cost
lifts the LP bound past the incumbent keeps its value (reduced-cost fixing:
the box loses that side of the level).

The search: a box is queued with its parent's bound and solved when taken;
the worker then splits it and dives into the child the LP leans to (solved
next from its parent's basis, so in a few pivots) while that child's bound
stays within ``DIVE`` of the gap above the best queued box, else goes back
to the queue. A worker whose dive has ended takes the last sibling it queued
if that box is still queued and within ``DIVE`` of the gap (its LP is a few
pivots from the worker's), else the best queued box. The box's cheapest point and the LP solution rounded
to a point are checked on the model, and the cheaper valid one becomes the
incumbent; a box whose level variables are integral holds the LP's point,
its optimum. Otherwise the box splits on the feature whose fractional levels
carry the most cost, at its most fractional level. ``n_workers`` threads take
boxes from one queue, each with its own GLOP model (GLOP runs without the
interpreter lock). The smallest bound of a box queued or being solved is a
proven lower bound at every moment (anytime); the search ends when it
reaches the incumbent (proven optimal, to ``SLACK`` of the cost).
"""

from __future__ import annotations

import copy
import heapq
import itertools
import threading
import time
from collections import defaultdict
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
DIVE = 0.2
#: GLOP without presolve (it would drop the basis between boxes), by the dual simplex (bound changes keep
#: it dual feasible), unscaled (the coefficients are 0/1, leaf scores and cost steps: 17% faster at the root),
#: its dual pricing favouring rows of large norm (8 breast-cancer queries, one worker: 4.27-4.29 s against 4.47)
GLOP_PARAMS = "use_preprocessing:false use_dual_simplex:true use_scaling:false dual_price_prioritize_norm:true"
FRACTIONAL = 1e-6
#: GLOP ends without an optimum at its objective limit or at its time limit: one that ends further
#: than this (s) before the query's deadline ended at the limit
CUTOFF_CLEAR = 0.005


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
        self.cur_lb = np.zeros(nv)
        self.cur_ub = self.usable.astype(float)
        # leaves: one variable each, bounded by 0 when the leaf cannot be reached within the incumbent
        reach = self._leaf_reach()
        self.reach = reach
        self.z_open = reach.copy()
        self.proto = self._model(reach)
        self.solver, self.vars = self.load()
        self.limit = np.inf           # the objective limit GLOP has (see bound)

    def load(self) -> tuple:
        """A GLOP solver holding the relaxation (another one for another thread), and room for its
        variables (level variables first, then leaves), fetched when first bounded: listing all of
        them costs 9 ms, about a node."""
        from ortools.linear_solver import pywraplp

        solver = pywraplp.Solver.CreateSolver("GLOP")
        if solver is None:  # pragma: no cover - OR-Tools always ships GLOP
            raise RuntimeError("GLOP is not available")
        err = solver.LoadModelFromProto(self.proto)
        if err:  # pragma: no cover - the model is built here
            raise RuntimeError(f"GLOP refused the relaxation: {err}")
        solver.SetSolverSpecificParametersAsString(GLOP_PARAMS)
        return solver, [None] * solver.NumVariables()

    def _bounds(self, i: int, lb: float, ub: float) -> None:
        v = self.vars[i]
        if v is None:
            v = self.vars[i] = self.solver.variable(i)
        v.SetBounds(lb, ub)

    def copy(self) -> "LPBox":
        """The same relaxation in a solver of its own (for another worker)."""
        other = copy.copy(self)
        other.cur_lb = np.zeros(self.feat.size)
        other.cur_ub = self.usable.astype(float)
        other.z_open = self.reach.copy()
        other.solver, other.vars = self.load()
        other.limit = np.inf
        return other

    def _model(self, reach: np.ndarray):
        """The relaxation as an OR-Tools model proto: level variables first, then leaves."""
        from ortools.linear_solver import linear_solver_pb2

        S = self.S
        nv = self.feat.size
        m = linear_solver_pb2.MPModelProto()
        for i in range(nv):
            v = m.variable.add()
            v.lower_bound, v.upper_bound = 0.0, 1.0 if self.usable[i] else 0.0
            v.objective_coefficient = float(self.step[i])
        for ok in reach:
            v = m.variable.add()
            v.lower_bound, v.upper_bound = 0.0, 1.0 if ok else 0.0

        def row(lo: float, hi: float, idx, coef) -> None:
            c = m.constraint.add()
            c.lower_bound, c.upper_bound = lo, hi
            c.var_index.extend(idx)
            c.coefficient.extend(coef)

        inf = float("inf")
        tree = S.tree
        order = np.argsort(tree, kind="stable")
        bounds = np.flatnonzero(np.r_[True, tree[order][1:] != tree[order][:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):                 # one leaf per tree
            leaves = order[a:b] + nv
            row(1.0, 1.0, leaves.tolist(), [1.0] * leaves.size)
        for start, _n, score, need in S.needs:                     # every need of the target
            nz = np.flatnonzero(score != 0)
            row(float(need), inf, (nz + start + nv).tolist(), score[nz].astype(float).tolist())
        for (j, k, sgn), ci in self.col.items():                   # monotone chains
            nk = self.col.get((j, k + sgn, sgn))
            if nk is not None:
                row(-inf, 0.0, [nk, ci], [1.0, -1.0])
        for j in range(S.d):                                       # one side of the query at a time
            h = int(S.hat[j])
            a_, b_ = self.col.get((j, h + 1, 1)), self.col.get((j, h - 1, -1))
            if a_ is not None and b_ is not None:
                row(-inf, 1.0, [a_, b_], [1.0, 1.0])
        for ci, leaves, sign in self._link(reach):
            row(-inf, 0.0 if sign < 0 else 1.0, [ci] + (leaves + nv).tolist(), [sign] + [1.0] * leaves.size)
        return m

    def _leaf_reach(self) -> np.ndarray:
        """Mask of the leaves whose own cheapest point is within the incumbent's cost."""
        S = self.S
        _, _, _, e, _ = S.evaluate(S.root_lo, S.root_hi)
        ub = float(self.prob.upper_bound)
        ok = np.isfinite(e)
        if np.isfinite(ub):
            ok &= e <= ub * (1 + 1e-9) + 1e-12
        return ok

    def _link(self, reach: np.ndarray) -> list[tuple[int, np.ndarray, float]]:
        """The per-tree linking rows (see the module doc) as (level variable, leaves, its sign).
        Within one tree and feature, sorted by the leaves' lower (upper) bounds, the leaves of
        each row are a prefix of that order, so every row is a slice."""
        S = self.S
        f, lo_e, hi_e = S.E_f, S.E_lo, S.E_hi
        leaf = np.repeat(np.arange(S.n_leaf), np.diff(S.ptr))
        keep = reach[leaf]
        f, lo_e, hi_e, leaf = f[keep], lo_e[keep], hi_e[keep], leaf[keep]
        tree = S.tree[leaf]
        h = S.hat[f]
        rows: list[tuple[int, np.ndarray, float]] = []
        # (sort key within the group, the level of the row, which entries open a row, its side, its sign)
        kinds = ((-lo_e, lo_e, lo_e > h, 1, -1.0),                                   # needs x >= lo
                 (hi_e, hi_e, hi_e < h, -1, -1.0),                                    # needs x <= hi
                 (hi_e, hi_e + 1, (hi_e + 1 > h) & (hi_e + 1 < S.sizes[f]), 1, 1.0),  # excludes x >= hi + 1
                 (-lo_e, lo_e - 1, (lo_e - 1 < h) & (lo_e >= 1), -1, 1.0))            # excludes x <= lo - 1
        for key, level, opens, sgn, sign in kinds:
            order = np.lexsort((key, f, tree))
            t_s, f_s, k_s, l_s, o_s = tree[order], f[order], key[order], leaf[order], opens[order]
            lev_s = level[order]
            group = np.r_[True, (t_s[1:] != t_s[:-1]) | (f_s[1:] != f_s[:-1])]
            start = np.maximum.accumulate(np.where(group, np.arange(t_s.size), 0))
            # the end of a row: the last entry of its group with the same sort key
            last = np.r_[(t_s[1:] != t_s[:-1]) | (f_s[1:] != f_s[:-1]) | (k_s[1:] != k_s[:-1]), True]
            for i in np.flatnonzero(last & o_s).tolist():
                rows.append((self.col[(int(f_s[i]), int(lev_s[i]), sgn)], l_s[start[i]:i + 1], sign))
        return rows

    def bound(self, lo: np.ndarray, hi: np.ndarray, open_leaves: np.ndarray | None = None,
              deadline: float | None = None, cutoff: float = np.inf
              ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        """(the LP bound of the box, the level variables' values and reduced costs), or
        (inf, None, None) when the LP proves the box empty, or (cutoff, None, None) when it
        proves the bound at least ``cutoff`` (the dual simplex stops there: its objective only
        rises), or (nan, None, None) when the LP ended otherwise. ``open_leaves``: the leaves
        a better point may still use (the others are held at 0)."""
        from ortools.linear_solver import linear_solver_pb2, pywraplp

        if open_leaves is not None:
            want = self.reach & open_leaves
            nv = self.feat.size
            for i in np.flatnonzero(want != self.z_open).tolist():
                self._bounds(nv + i, 0.0, 1.0 if want[i] else 0.0)
            self.z_open = want

        k, j, up = self.lev, self.feat, self.side == 1
        lb = np.where(up, (k <= lo[j]) & (lo[j] > self.S.hat[j]), (k >= hi[j]) & (hi[j] < self.S.hat[j]))
        ub = self.usable & np.where(up, k <= hi[j], k >= lo[j])
        lb = lb.astype(float)
        ub = ub.astype(float)
        if np.any(lb > ub):
            return np.inf, None, None
        for i in np.flatnonzero((lb != self.cur_lb) | (ub != self.cur_ub)).tolist():
            self._bounds(i, float(lb[i]), float(ub[i]))
        self.cur_lb, self.cur_ub = lb, ub
        if deadline is not None:        # a large LP must not outlast the query's time limit
            self.solver.SetTimeLimit(max(1, int(1000 * (deadline - time.perf_counter()))))
        # the LP's objective past which the box's bound (less LP_MARGIN) is at least the cutoff
        limit = cutoff - self.base + 2 * LP_MARGIN * (1.0 + abs(cutoff)) if np.isfinite(cutoff) else np.inf
        if limit != self.limit:
            self.limit = limit
            self.solver.SetSolverSpecificParametersAsString(
                GLOP_PARAMS + (f" objective_upper_limit:{limit!r}" if np.isfinite(limit) else ""))
        status = self.solver.Solve()
        if status == pywraplp.Solver.INFEASIBLE:
            return np.inf, None, None
        if status == pywraplp.Solver.NOT_SOLVED and np.isfinite(limit) and \
                (deadline is None or time.perf_counter() < deadline - CUTOFF_CLEAR):
            return cutoff, None, None   # GLOP stopped at the limit (its time limit would have ended later)
        if status != pywraplp.Solver.OPTIMAL:
            return np.nan, None, None
        val = self.base + self.solver.Objective().Value()
        out = linear_solver_pb2.MPSolutionResponse()     # every value in one call (the level variables come first)
        self.solver.FillSolutionResponseProto(out)
        nv = self.feat.size
        return (val - LP_MARGIN * (1.0 + abs(val)), np.array(out.variable_value[:nv]),
                np.array(out.reduced_cost[:nv]))

    def fixed(self, lo: np.ndarray, hi: np.ndarray, bound: float, values: np.ndarray, rc: np.ndarray,
              ub: float) -> tuple[np.ndarray, np.ndarray]:
        """The box shrunk by reduced costs: a level variable at 0 whose reduced cost lifts the
        bound past the incumbent's cost ``ub`` stays 0 in every better point of the box (and one
        at 1 with a negative reduced cost stays 1), so the box loses that side of the level."""
        if not np.isfinite(ub):
            return lo, hi
        gap = ub + SLACK * (1.0 + abs(ub)) - bound
        up = self.side == 1
        free = (self.cur_lb < self.cur_ub)
        zero = free & (values <= FRACTIONAL) & (rc > gap)
        one = free & (values >= 1 - FRACTIONAL) & (-rc > gap)
        if not (zero.any() or one.any()):
            return lo, hi
        lo, hi = lo.copy(), hi.copy()
        j, k = self.feat, self.lev
        np.minimum.at(hi, j[zero & up], k[zero & up] - 1)     # the point stays below level k
        np.maximum.at(lo, j[zero & ~up], k[zero & ~up] + 1)   # it stays above level k
        np.maximum.at(lo, j[one & up], k[one & up])           # it stays at or above level k
        np.minimum.at(hi, j[one & ~up], k[one & ~up])         # it stays at or below level k
        return lo, hi

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
          on_solution: Callable[[np.ndarray], None] | None = None, n_workers: int = 2,
          later: Callable[[Callable[[], bool]], np.ndarray | None] | None = None) -> CellSolution | None:
    """The cheapest cell reaching the target, proven optimal (status "optimal" or
    "infeasible"), or with a proven lower bound (status "feasible" with the incumbent,
    "unknown" without) when ``time_limit``, ``node_limit`` or ``stop`` ends it first;
    None when the problem is not for this solver (:func:`applies`, or costs that do not
    rise away from the query). ``hint``: a valid point, the first incumbent;
    ``on_bound(lower, upper)`` hears every improvement of either bound and
    ``on_solution(cells)`` every new incumbent. ``n_workers`` threads take boxes from
    one queue, each with its own copy of the LP (GLOP runs without the interpreter lock).
    ``later(ended)``: a start to compute while the search runs (the reference rows'), its
    point (or None) offered as an incumbent; the second worker calls it while the first
    solves the root LP (the only worker, before it starts), and ``ended()`` turns true
    when the search is over without it."""
    if applies(prob) is not None:
        return None
    deadline = time.perf_counter() + time_limit
    S = BoxSearch(prob)
    if not S.ok or S.n_leaf == 0:
        return None
    search = _Search(prob, S, deadline, stop, node_limit, on_bound, on_solution, later)
    if hint is not None:
        hc = prob.interval_of(np.asarray(hint, dtype=float)[None, :])[0]
        if prob.is_valid(prob.point_of(hc)[None, :])[0]:
            search.inc, search.ub = hc, min(search.ub, float(prob.cost_of(hc)))
    return search.run(max(1, int(n_workers)))


class _Search:
    """The shared state of the search: the queue of boxes, the incumbent and the bounds."""

    def __init__(self, prob: CellProblem, S: BoxSearch, deadline: float, stop: threading.Event | None,
                 node_limit: int | None, on_bound: Callable[[float, float], None] | None,
                 on_solution: Callable[[np.ndarray], None] | None,
                 later: Callable[[Callable[[], bool]], np.ndarray | None] | None = None):
        self.prob, self.S, self.deadline, self.stop, self.node_limit = prob, S, deadline, stop, node_limit
        self.on_bound, self.on_solution, self.later = on_bound, on_solution, later
        self.ub = float(prob.upper_bound)
        self.inc: np.ndarray | None = None
        self.lock = threading.Condition()
        self.heap: list = []
        self.busy: dict[int, float] = {}          # worker -> the bound of the box it is on
        self.mine: dict[int, list[tuple]] = defaultdict(list)   # worker -> the siblings of its dives it queued
        self.order = itertools.count()            # ties in the queue: never two boxes alike (next() is atomic)
        self.nodes = 0
        self.lb_told = -np.inf
        self.ended: str | None = None             # "done" or "limit"
        self.error: BaseException | None = None
        self.LP = self.relaxation(prob, S)

    def relaxation(self, prob: CellProblem, S: BoxSearch) -> LPBox:
        """The linear relaxation the workers bound boxes with (a search under further
        constraints widens it, :mod:`core.solvers.constrained_box`)."""
        return LPBox(prob, S)

    # ------------------------------------------------------------------ shared state (under the lock)
    def better(self, cells: np.ndarray) -> None:
        """Make ``cells`` the incumbent if it is valid and cheaper."""
        prob = self.prob
        c = float(prob.cost_of(cells))
        if not c < self.ub or not prob.is_valid(prob.point_of(cells)[None, :])[0]:
            return
        with self.lock:
            if c < self.ub:
                inc = cells.copy()
                self.inc, self.ub = inc, c
                if self.on_solution is not None:
                    self.on_solution(inc)
                if self.on_bound is not None:
                    self.on_bound(max(self.lb_told, 0.0), self.ub)

    def prunes(self, bound: float) -> bool:
        ub = self.ub
        if not np.isfinite(ub):
            return bound == np.inf
        return not (bound < ub - SLACK * (1.0 + abs(ub)))

    def node(self, bound: float, depth: int, lo: np.ndarray, hi: np.ndarray, done: tuple | None) -> tuple:
        return (bound, -depth, next(self.order), lo, hi, done)

    def lower(self) -> float:
        """The proven lower bound: the smallest bound of a box still queued or being solved."""
        return min(self.heap[0][0] if self.heap else np.inf, min(self.busy.values(), default=np.inf))

    def _take(self, me: int, dive: tuple | None) -> tuple | None:
        """The next box for worker ``me`` (its dive, else the queue's best), or None when the search is over."""
        with self.lock:
            while True:
                if self.ended is not None:
                    return None
                if (self.stop is not None and self.stop.is_set()) or time.perf_counter() > self.deadline or \
                        (self.node_limit is not None and self.nodes > self.node_limit):
                    self.ended = "limit"
                    self.lock.notify_all()
                    return None
                lower = min(self.lower(), dive[0] if dive is not None else np.inf)
                if self.prunes(lower) or (dive is None and not self.heap and not self.busy):
                    self.ended = "done"
                    self.lock.notify_all()
                    return None
                if self.on_bound is not None and lower > self.lb_told and np.isfinite(lower):
                    self.lb_told = lower
                    self.on_bound(lower, self.ub)
                if dive is None and self.heap:
                    near = self._plunge(me)
                    dive = (*near[:6], True) if near is not None else (*heapq.heappop(self.heap)[:6], False)
                elif dive is not None:
                    dive = (*dive[:6], True)
                else:
                    self.lock.wait(0.005)          # another worker may queue boxes
                    continue
                if self.prunes(dive[0]):
                    dive = None
                    continue
                self.busy[me] = dive[0]
                self.nodes += 1
                return dive

    def _plunge(self, me: int) -> tuple | None:
        """The last box worker ``me`` queued beside its dive, taken out of the queue, if it is still
        there and its bound within ``DIVE`` of the gap above the best box's (its LP is then a few
        pivots from this worker's: a box from the top of the queue took 105 pivots, 8.9 ms, against
        18-24 pivots, 3.2-3.5 ms, for a box next to the last one, on breast cancer); else None."""
        mine, ub = self.mine[me], self.ub
        while mine:
            box = mine[-1]
            at = next((i for i, b in enumerate(self.heap) if b is box), None)
            if at is None:                    # another worker took it
                mine.pop()
                continue
            top = self.heap[0][0]
            if not (np.isfinite(ub) and box[0] <= top + DIVE * (ub - top)):
                return None
            mine.pop()
            self.heap[at] = self.heap[-1]
            self.heap.pop()
            heapq.heapify(self.heap)
            return box
        return None

    def _give(self, me: int, boxes: list[tuple], keep: float | None = None, beside: bool = False) -> None:
        """Queue ``boxes``; the worker is then idle, or still holds a box of bound ``keep`` (its dive).
        ``beside``: the boxes are siblings of the worker's dive (see :meth:`_plunge`)."""
        with self.lock:
            for b in boxes:
                heapq.heappush(self.heap, b)
                if beside:
                    self.mine[me].append(b)
            if keep is None:
                self.busy.pop(me, None)
            else:
                self.busy[me] = keep
            self.lock.notify_all()

    # ------------------------------------------------------------------ one worker
    def work(self, me: int, LP: LPBox | None) -> None:
        try:
            self._work(me, LP)
        except BaseException as exc:      # noqa: BLE001 - handed to the caller's thread
            with self.lock:
                self.error = exc
                self.ended = "limit"
                self.busy.pop(me, None)
                self.lock.notify_all()

    def _work(self, me: int, LP: LPBox | None) -> None:
        S = self.S
        if LP is None:  # while the first worker solves the root, the others load their LP and warm it on the root
            if me == 1:
                self._later()
            LP = self.LP.copy()
            LP.bound(S.root_lo, S.root_hi, deadline=self.deadline)
        dive = None
        while True:
            item = self._take(me, dive)
            dive = None
            if item is None:
                return
            bound, neg_depth, _, lo, hi, done, diving = item
            if done is None:
                box_bound, p, _, e, holds = S.evaluate(lo, hi)
                if holds:
                    self.better(p)
                values = rc = None
                lp = np.nan
                if np.isfinite(box_bound):
                    ub = self.ub
                    cut = ub - SLACK * (1.0 + abs(ub)) if np.isfinite(ub) else np.inf
                    lp, values, rc = LP.bound(lo, hi, e < cut, self.deadline, cut)   # nan: no answer (time)
                    bound = max(bound, box_bound, -np.inf if np.isnan(lp) else lp)
                else:
                    bound = np.inf
                if self.prunes(bound):
                    self._give(me, [])
                    continue
                if values is not None and rc is not None:
                    lo, hi = LP.fixed(lo, hi, lp, values, rc, self.ub)
                with self.lock:
                    top = self.heap[0][0] if self.heap else np.inf
                    back = diving and np.isfinite(self.ub) and bound > top + DIVE * (self.ub - top)
                if back:                   # the dive has gone past the best boxes: back to best-first
                    self._give(me, [self.node(bound, -neg_depth, lo, hi, (p, values))])
                    continue
            else:
                p, values = done
            branch, toward_high = self._branch(LP, values, p, lo, hi)
            if branch is None:
                self._give(me, [])
                continue
            j, sv = branch
            hi1 = hi.copy()
            hi1[j] = sv - 1
            lo2 = lo.copy()
            lo2[j] = sv
            low_box = self.node(bound, 1 - neg_depth, lo, hi1, None)
            high_box = self.node(bound, 1 - neg_depth, lo2, hi, None)
            # the child the LP leans to is solved next, from this LP's basis; its bound still counts
            dive, other = (high_box, low_box) if toward_high else (low_box, high_box)
            self._give(me, [other], keep=bound, beside=True)

    def _branch(self, LP: LPBox, values: np.ndarray | None, p: np.ndarray, lo: np.ndarray, hi: np.ndarray
                ) -> tuple[tuple[int, int] | None, bool]:
        """(feature, level) to split the box at, and whether the LP leans to the upper side;
        None when the box needs no split (its LP point is valid, or it is one cell)."""
        if values is None:
            return _split_at(p, lo, hi), False
        x = LP.rounded(values, p, lo, hi)
        self.better(x)
        frac = np.minimum(values, 1 - values)
        cand = np.flatnonzero(frac > FRACTIONAL)
        if cand.size:
            w = frac[cand] * np.maximum(LP.step[cand], 1e-12)
            j = int(np.argmax(np.bincount(LP.feat[cand], weights=w, minlength=self.S.d)))
            mine = cand[LP.feat[cand] == j]       # the feature with the most fractional cost, at its most fractional level
            i = int(mine[np.argmax(frac[mine] + 1e-9 * LP.step[mine])])
            j, k = int(LP.feat[i]), int(LP.lev[i])
            return (j, k if LP.side[i] == 1 else k + 1), bool((values[i] >= 0.5) == (LP.side[i] == 1))
        inc = self.inc
        if inc is not None and np.array_equal(inc, x):
            return None, False              # the LP's own point, valid: the box's optimum (the incumbent)
        return _split_at(x, lo, hi), False

    def _later(self) -> None:
        """The caller's start computed beside the search (:func:`solve`), offered as an incumbent."""
        later, self.later = self.later, None
        if later is not None:
            x = later(lambda: self.ended is not None)
            if x is not None:
                self.better(self.prob.interval_of(np.asarray(x, dtype=float)[None, :])[0])

    # ------------------------------------------------------------------ the run
    def run(self, n_workers: int) -> CellSolution:
        S = self.S
        with self.lock:
            self.heap.append(self.node(-np.inf, 0, S.root_lo.copy(), S.root_hi.copy(), None))
        threads = [threading.Thread(target=self.work, args=(w, None), name=f"lpbox-{w}", daemon=True)
                   for w in range(1, n_workers)]
        if n_workers == 1:
            self._later()
        for t in threads:
            t.start()
        self.work(0, self.LP)
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        ub, inc = self.ub, self.inc
        slack = SLACK * (1.0 + abs(ub)) if np.isfinite(ub) else 0.0
        if self.ended == "limit":
            lower = self.lower()
            return CellSolution("feasible" if inc is not None else "unknown", inc, max(0.0, min(lower, ub)),
                                slack=slack)
        if inc is None:
            return CellSolution("infeasible", None, np.inf)
        return CellSolution("optimal", inc, float(ub), slack=slack)


def _split_at(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[int, int] | None:
    """A split of the box that separates the cell ``x`` from part of the box, or None
    when the box is that single cell."""
    wide = np.flatnonzero(lo < hi)
    if wide.size == 0:
        return None
    j = int(wide[0])
    return (j, int(x[j]) + 1) if x[j] < hi[j] else (j, int(x[j]))
