"""Valid starting points (upper bounds) for the counterfactual solvers.

A valid point found before solving bounds the optimum from above; the solvers
then drop every interval and leaf that cannot beat it (OCEAN's MILP and the
cell model alike) and start from the point as a hint. Two sources:

* :func:`warm_start`: reference rows (usually the training data) projected
  onto the actionable set, the cheapest valid ones polished by
  :func:`local_search`;
* :func:`greedy_start`: from the model alone, a greedy descent from ``x_hat``
  by one-feature (or one-hot group) moves, most target margin
  (:func:`target_margin`) per unit of cost, then the same local search. It is
  what makes the call without reference rows as fast as the call with them.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from core.cells.cache import GRID_CACHE
from core.cells.problem import CellProblem

__all__ = ["best_start", "warm_start", "greedy_start", "local_search", "target_margin"]


def _reference_cells(prob: CellProblem, X_ref: np.ndarray, max_candidates: int) -> np.ndarray:
    """Interval indices of the reference rows (at most ``max_candidates``, evenly
    spread): the grid does not depend on the query, so they are kept with the
    reference array (:data:`core.cells.cache.GRID_CACHE`) for the next query."""
    def build():
        rows = X_ref
        if len(rows) > max_candidates:  # a fixed, spread-out subset keeps this fast and deterministic
            rows = rows[np.linspace(0, len(rows) - 1, max_candidates).astype(int)]
        return prob.interval_of(rows)

    key = ("ref_cells", prob.ens.content_hash(), prob.grid_key, X_ref.shape, X_ref[0].tobytes(),
           X_ref[-1].tobytes(), max_candidates)
    return GRID_CACHE.get(X_ref, key, build)


def warm_start(prob: CellProblem, X_ref: np.ndarray | None, max_candidates: int = 10000,
               chunk: int = 1024, stop: Callable[[], bool] | None = None) -> tuple[np.ndarray | None, float]:
    """A valid point and its (cell) cost from reference rows, or (None, inf).

    Rows of ``X_ref`` (at most ``max_candidates``, evenly spread) are projected
    onto the feasible set (each feature to its interval's allowed point, or
    kept at x_hat when that interval is not allowed) and sorted by cost;
    validity is checked cheapest first, a chunk at a time, and the five
    cheapest valid candidates are polished by :func:`local_search`. When
    ``stop()`` turns true (a solver beside it has finished), the polish ends
    with the best point so far.
    """
    if X_ref is None or len(X_ref) == 0:
        return None, np.inf
    X_ref = np.asarray(X_ref, dtype=float)
    cells = _reference_cells(prob, X_ref, max_candidates)
    offs = np.cumsum([0] + [c.size for c in prob.costs[:-1]])
    flat_cost = np.concatenate(prob.costs)
    flat_point = np.concatenate(prob.points)
    proj = np.where(np.isfinite(flat_cost[cells + offs]), cells, prob.hat)
    for g in prob.groups:  # keep one-hot groups one-hot
        bad = np.abs(flat_point[proj[:, g] + offs[g]].sum(axis=1) - 1) > 1e-9
        proj[np.ix_(bad, g)] = prob.hat[g]
    order = np.argsort(flat_cost[proj + offs].sum(axis=1), kind="stable")
    found: list[np.ndarray] = []
    seen: set[bytes] = set()
    for a in range(0, len(order), chunk):
        C = proj[order[a:a + chunk]]
        for c in C[prob.is_valid(prob.point_of(C))]:
            if c.tobytes() not in seen and len(found) < 5:
                seen.add(c.tobytes())
                found.append(c)
        if len(found) >= 5:
            break
    if not found:
        return None, np.inf
    best_cells, best_cost = None, np.inf
    for c0 in found:  # polish the five cheapest valid candidates
        if stop is not None and best_cells is not None and stop():
            break
        cells_ = local_search(prob, c0)
        c = prob.cost_of(cells_)
        if c < best_cost:
            best_cells, best_cost = cells_, c
    if best_cells is None:
        return None, np.inf
    return prob.point_of(best_cells), best_cost


def best_start(prob: CellProblem, X_ref: np.ndarray | None, deadline: float = np.inf
               ) -> tuple[np.ndarray | None, float]:
    """The cheaper of the two starts: the reference rows' (when given) and the
    model's own (which stops at ``deadline``); on a tie, the reference row's."""
    ws_x, ws_cost = warm_start(prob, X_ref)
    gx, g_cost = greedy_start(prob, deadline=deadline)
    return (gx, g_cost) if g_cost < ws_cost - 1e-12 else (ws_x, ws_cost)


def target_margin(prob: CellProblem, X: np.ndarray) -> np.ndarray:
    """How deep each row lies inside the target (and the plausibility set):
    positive inside, the smaller of the two when both apply. Shape (n,)."""
    raw = prob.ens.predict_raw(X)
    tgt, ens = prob.target, prob.ens
    if tgt.kind == "class" and ens.link == "sigmoid":
        m = raw[:, 0] if tgt.class_index == 1 else -raw[:, 0]
    elif tgt.kind == "class":
        m = raw[:, tgt.class_index] - np.delete(raw, tgt.class_index, axis=1).max(axis=1)
    else:
        m = np.minimum(raw[:, 0] - tgt.lo, tgt.hi - raw[:, 0])
    if prob.plaus is not None:
        m = np.minimum(m, prob.plaus.forest.predict_raw(X)[:, 0] - prob.plaus.delta)
    return m


def _moves(prob: CellProblem, per_feature: int
           ) -> tuple[np.ndarray, np.ndarray, list[tuple[list[int], np.ndarray]]]:
    """The one-feature moves (feature, interval) of the greedy start, at most
    ``per_feature`` intervals per feature (those nearest ``x_hat`` and an even
    spread of the rest), and one move per category of each one-hot group."""
    in_group = {j for g in prob.groups for j in g}
    J: list[int] = []
    I: list[int] = []
    for j in range(prob.n_features):
        if j in in_group:
            continue
        ok = np.flatnonzero(np.isfinite(prob.costs[j]))
        ok = ok[ok != prob.hat[j]]
        if ok.size > per_feature:
            near = ok[np.argsort(np.abs(ok - prob.hat[j]), kind="stable")[:per_feature // 2]]
            spread = ok[np.linspace(0, ok.size - 1, per_feature - near.size).astype(int)]
            ok = np.union1d(near, spread)
        J.extend([j] * ok.size)
        I.extend(ok.tolist())
    group_moves = []
    for g in prob.groups:
        for k in g:
            pattern = np.array([np.searchsorted(prob.levels[j], 1.0 if j == k else 0.0, side="left") for j in g])
            if all(np.isfinite(prob.costs[j][c]) for j, c in zip(g, pattern)):
                group_moves.append((g, pattern))
    return np.asarray(J, dtype=np.int64), np.asarray(I, dtype=np.int64), group_moves


def greedy_start(prob: CellProblem, max_steps: int | None = None, per_feature: int = 48,
                 deadline: float = np.inf) -> tuple[np.ndarray | None, float]:
    """A valid point and its cost found from the model alone, or (None, inf).

    Greedy descent on the cell grid: from ``x_hat``, while the point is not
    valid, take the one-feature (or one-hot group) move that is valid and
    cheapest if any, else the one that gains most target margin per unit of
    cost; then :func:`local_search`. It needs no reference rows, so a caller
    without training data gets an upper bound as tight as the reference
    rows' (on Adult's forests usually the optimum itself)."""
    J, I, group_moves = _moves(prob, per_feature)
    n = J.size + len(group_moves)
    if n == 0:
        return None, np.inf
    cells = prob.hat.copy()
    x0 = prob.point_of(cells)
    if prob.is_valid(x0[None, :])[0]:   # the query meets the target already
        return x0, prob.cost_of(cells)
    cur_m = target_margin(prob, x0[None, :])[0]
    cur_c = prob.cost_of(cells)
    for _ in range(max_steps or 2 * prob.n_features + 2):
        if time.perf_counter() > deadline:
            break
        C = np.repeat(cells[None, :], n, axis=0)
        C[np.arange(J.size), J] = I
        for r, (g, pattern) in enumerate(group_moves, start=J.size):
            C[r, g] = pattern
        P = prob.point_of(C)
        cost = prob.costs_of(C)
        valid = prob.is_valid(P)
        if valid.any():
            r = np.flatnonzero(valid)[np.argmin(cost[valid])]
            best = local_search(prob, C[r])
            return prob.point_of(best), prob.cost_of(best)
        gain = target_margin(prob, P) - cur_m
        score = np.where(gain > 1e-12, gain / np.maximum(cost - cur_c, 1e-12), -np.inf)
        r = int(np.argmax(score))
        if not np.isfinite(score[r]):
            break
        cells, cur_m, cur_c = C[r], cur_m + gain[r], cost[r]
    return None, np.inf


def local_search(prob: CellProblem, cells: np.ndarray, max_rounds: int = 200) -> np.ndarray:
    """Improve a valid cell assignment: move one feature (or one-hot group) at a
    time to the interval nearest ``x_hat`` that keeps the point valid, taking the
    largest saving each round, until no move saves anything."""
    cells = cells.copy()
    singles = [j for j in range(prob.n_features) if not any(j in g for g in prob.groups)]
    for _ in range(max_rounds):
        moves: list[tuple[int, int]] = []  # (feature, new interval)
        for j in singles:
            cur, h = int(cells[j]), int(prob.hat[j])
            if cur == h:
                continue
            rng = range(h, cur) if cur > h else range(cur + 1, h + 1)
            cheaper = [i for i in rng if prob.costs[j][i] < prob.costs[j][cur]]
            moves.extend((j, i) for i in cheaper)
        group_moves = []
        for g in prob.groups:
            if any(cells[j] != prob.hat[j] for j in g):
                group_moves.append(g)
        n = len(moves) + len(group_moves)
        if n == 0:
            break
        C = np.repeat(cells[None, :], n, axis=0)
        for r, (j, i) in enumerate(moves):
            C[r, j] = i
        for r, g in enumerate(group_moves, start=len(moves)):
            C[r, g] = prob.hat[g]
        costs = prob.costs_of(C)
        valid = prob.is_valid(prob.point_of(C))
        if not valid.any():
            break
        costs[~valid] = np.inf
        r = int(np.argmin(costs))
        if costs[r] >= prob.cost_of(cells) - 1e-15:
            break
        cells = C[r]
    return cells
