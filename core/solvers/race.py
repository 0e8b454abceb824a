"""The box search and CP-SAT side by side on one cell problem; the first proof wins.

The box search (:mod:`core.solvers.boxsearch`) runs in a thread of its own
(its node bound is compiled code that releases the interpreter lock); when it
has not proved its answer within :data:`HEAD_BOXES` boxes, CP-SAT
(:mod:`core.solvers.cpsat`) starts here with the remaining workers (the box
search goes on); the first to prove its answer (optimal or infeasible) stops
the other. The head start keeps CP-SAT's model from being built at all on the
many queries the box search proves in a few dozen boxes. When the
time runs out first, the cheaper incumbent and the larger of the two proven
lower bounds are kept. The answer says which solver it comes from.

For a sum of feature costs (L1, L0, squared L2, a mix) on an ensemble larger
than the probe's (below), the box search bounded by linear programs
(:mod:`core.solvers.lpbox`) answers instead of CP-SAT, with every worker: on
breast cancer's RF(100, depth 5), L1, it proved the 20 bench queries at a
median 0.44 s against CP-SAT's 2.7 s in the same run, and with a plausibility
forest 6 of 6 where CP-SAT proved 4 in 60 s (same costs). Problems it does not
take (one-hot groups, diverse alternatives, costs that do not rise away from
the query) go to CP-SAT.

For a sum of feature costs the box search and CP-SAT do not race:
on breast cancer's RF(100, depth 5) the box search's per-tree bound is too weak
and its thread only slows CP-SAT. But on smaller ensembles it proves faster
than CP-SAT starts and searches (wine's RF(30, depth 3) with FCCA's cost,
breast cancer's XGBoost(100, depth 4): 240 and 690 leaves; the random forest
has 1,645), so on an ensemble of at most :data:`PROBE_LEAVES` leaves (its
own, plausibility's and further models') the box search runs alone first, for at
most :data:`PROBE_WORK` boxes divided by the number of features (a count, not a
time: the same problem always takes the same path; 2,307 boxes on wine's 13
features, where 90% of the queries need fewer, 1,000 on breast cancer's 30,
where 2,000 made an RF(30, depth 4) 15% slower): its proof is the answer;
otherwise CP-SAT runs as before from the hint (the box search's only incumbent
short of a proof), and the probe's proven lower bound is kept if CP-SAT ends on
its time limit with a weaker one.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

from core.cells.problem import CellProblem, CellSolution
from core.solvers import boxsearch, cpsat, lpbox

__all__ = ["solve", "takes", "probes", "uses_lpbox", "solver_name"]

PROVEN = ("optimal", "infeasible")
#: race on a sum of feature costs too; off: measured on breast cancer RF(100, depth 5), L1, the box
#: search's per-tree bound is too weak there and its thread only slows CP-SAT (README, solvers)
RACE_SUMS = False
#: a sum of costs: the box search alone first on ensembles of at most this many leaves (the
#: model's, plausibility's and further models' together), for at most PROBE_WORK / features boxes
PROBE_LEAVES = 1000
PROBE_WORK = 30_000
#: the L-infinity race: the box search alone for its first HEAD_BOXES boxes (a count, not a time: the
#: same problem always takes the same path), CP-SAT beside it only after. Measured on the four cases of
#: bench/veritas_side.py: the box search proved Adult's and breast cancer's XGBoost(100, 4) and Adult's
#: RF(100, 5) in at most 70 boxes (3-27 ms) where CP-SAT took 0.13-12 s; breast cancer's RF(100, 5) in
#: 3,800-21,000 boxes (0.7-3 s) where CP-SAT proved none in 60 s
HEAD_BOXES = 5000
#: before that, the L-infinity query's first step (:func:`core.optimal._quick_box`): the box search
#: alone for this many boxes, before any start or bound is computed (it proves the easy cases above);
#: past it the starts' upper bound prunes the leaves (breast cancer's RF(100, 5): 2.7 CPU-s a query
#: with it, 4.3 without)
QUICK_BOXES = 300
#: a sum of costs on a larger ensemble: the box search bounded by linear programs (core.solvers.lpbox)
#: instead of CP-SAT; measured side by side in bench/optimal.py (README, solvers)
LP_SUMS = True


def takes(prob: CellProblem) -> bool:
    """Does the race run the box search on ``prob`` (else CP-SAT runs alone)?"""
    return boxsearch.applies(prob) is None and (RACE_SUMS or prob.cost_model.combine == "max")


def probes(prob: CellProblem) -> bool:
    """Does a sum of costs go to the box search first (see the module doc)?"""
    if prob.cost_model.combine == "max" or boxsearch.applies(prob) is not None:
        return False
    leaves = prob.model_leaves.lo.shape[0] + sum(o.leaves.lo.shape[0] for o in prob.others)
    if prob.plaus_leaves is not None:
        leaves += prob.plaus_leaves.lo.shape[0]
    return leaves <= PROBE_LEAVES


def uses_lpbox(prob: CellProblem) -> bool:
    """Does a sum of costs go to the box search bounded by linear programs (else CP-SAT)?"""
    return LP_SUMS and not takes(prob) and not probes(prob) and lpbox.applies(prob) is None


def solver_name(prob: CellProblem) -> str:
    """The solver whose points the race reports while it runs: "lpbox" or "cpsat"."""
    return "lpbox" if uses_lpbox(prob) else "cpsat"


def _probe_then_cpsat(prob: CellProblem, time_limit: float, hint: np.ndarray | None, n_workers: int,
                      stop: threading.Event | None, on_solution: Callable[[np.ndarray], None] | None,
                      on_bound: Callable[[float], None] | None) -> tuple[CellSolution, str]:
    """The box search for at most PROBE_WORK / features boxes, then, unless it proved, CP-SAT."""
    t0 = time.perf_counter()
    try:
        box = boxsearch.solve(prob, time_limit=time_limit, hint=hint, stop=stop,
                              node_limit=PROBE_WORK // max(1, prob.n_features),
                              on_bound=None if on_bound is None else lambda lower, _upper: on_bound(lower))
    except Exception:                  # the search failed: CP-SAT alone decides
        box = None
    if box is not None and (box.status in PROVEN or (stop is not None and stop.is_set())):
        return box, "boxsearch"
    # unproven, the box search's only incumbent is the hint (its first valid point is optimal)
    left = max(0.0, time_limit - (time.perf_counter() - t0))
    cp = cpsat.solve(prob, time_limit=left, hint=hint, n_workers=n_workers, stop=stop,
                     on_solution=on_solution, on_bound=on_bound)
    return _after_cpsat(prob, box, cp)


def solve(prob: CellProblem, time_limit: float = 30.0, hint: np.ndarray | None = None,
          n_workers: int = 2, stop: threading.Event | None = None,
          on_solution: Callable[[np.ndarray], None] | None = None,
          on_bound: Callable[[float], None] | None = None,
          later: Callable[[Callable[[], bool]], np.ndarray | None] | None = None) -> tuple[CellSolution, str]:
    """(solution, "boxsearch", "lpbox" or "cpsat"): the first proof of the two solvers,
    or the best of both when neither proves within ``time_limit`` (a sum of costs: the
    probe then CP-SAT, or the LP box search, see the module doc). CP-SAT gets
    ``n_workers - 1`` workers (at least one), the box search one thread; a
    problem the race does not run the box search on (:func:`takes`) goes to
    CP-SAT alone with every worker. ``stop`` (set by the caller) ends both;
    ``on_solution(cells)`` and ``on_bound(lower)`` hear from both while they run;
    ``later``: a start the LP box search computes beside its first LP (:func:`core.solvers.lpbox.solve`)."""
    if not takes(prob):
        return _without_race(prob, time_limit, hint, n_workers, stop, on_solution, on_bound, later)
    stop_box, stop_cp = threading.Event(), threading.Event()
    done = threading.Event()

    def relay() -> None:               # the caller's stop ends both solvers
        while stop is not None and not done.wait(0.01):
            if stop.is_set():
                stop_box.set()
                stop_cp.set()
                return
    box: list[tuple[CellSolution | None, float]] = []
    go = threading.Event()             # the box search's head start is over (or it ended)
    t0 = time.perf_counter()

    def run_box() -> None:
        try:
            sol = boxsearch.solve(prob, time_limit=time_limit, hint=hint, stop=stop_box,
                                  on_bound=None if on_bound is None else lambda lower, _upper: on_bound(lower),
                                  head=(HEAD_BOXES, go))
        except Exception:              # the search failed: CP-SAT alone decides
            sol = None
        box.append((sol, time.perf_counter()))
        if sol is not None and sol.status in PROVEN:
            stop_cp.set()
        go.set()

    th = threading.Thread(target=run_box, name="boxsearch", daemon=True)
    th.start()
    watch = threading.Thread(target=relay, name="race-stop", daemon=True)
    if stop is not None:
        watch.start()
    try:
        while not go.wait(0.05) and not stop_box.is_set():
            pass
        if box and box[0][0] is not None and box[0][0].status in PROVEN:
            return box[0][0], "boxsearch"      # proven within its head start: CP-SAT never built
        cp = cpsat.solve(prob, time_limit=max(0.0, time_limit - (time.perf_counter() - t0)), hint=hint,
                         n_workers=max(1, n_workers - 1), stop=stop_cp, on_solution=on_solution, on_bound=on_bound)
    finally:
        cp_done = time.perf_counter()
        stop_box.set()
        th.join()
        done.set()
        if stop is not None:
            watch.join()
    b, b_done = box[0] if box else (None, np.inf)
    return _winner(prob, b, b_done, cp, cp_done)


def _winner(prob: CellProblem, b: CellSolution | None, b_done: float, cp: CellSolution, cp_done: float
            ) -> tuple[CellSolution, str]:
    """The box search's answer when it proved and CP-SAT did not, or not before it; else
    :func:`_after_cpsat`."""
    if b is not None and b.status in PROVEN and (cp.status not in PROVEN or b_done <= cp_done):
        return b, "boxsearch"
    return _after_cpsat(prob, b, cp)


def _without_race(prob: CellProblem, time_limit: float, hint: np.ndarray | None, n_workers: int,
                  stop: threading.Event | None, on_solution: Callable[[np.ndarray], None] | None,
                  on_bound: Callable[[float], None] | None,
                  later: Callable[[Callable[[], bool]], np.ndarray | None] | None) -> tuple[CellSolution, str]:
    """A problem the race does not run the box search beside CP-SAT on: the probe then CP-SAT,
    the LP box search, or CP-SAT alone with every worker (:func:`solve`'s arguments)."""
    if probes(prob):
        return _probe_then_cpsat(prob, time_limit, hint, n_workers, stop, on_solution, on_bound)
    if uses_lpbox(prob):
        sol = lpbox.solve(prob, time_limit=time_limit, hint=hint, stop=stop, n_workers=n_workers,
                          on_solution=on_solution, later=later,
                          on_bound=None if on_bound is None else lambda lower, _upper: on_bound(lower))
        if sol is not None:     # None: costs that do not rise away from the query (CP-SAT takes them)
            return sol, "lpbox"
    return cpsat.solve(prob, time_limit=time_limit, hint=hint, n_workers=n_workers, stop=stop,
                       on_solution=on_solution, on_bound=on_bound), "cpsat"


def _after_cpsat(prob: CellProblem, box: CellSolution | None, cp: CellSolution) -> tuple[CellSolution, str]:
    """CP-SAT's answer when it proved (or the box search gave nothing); else, neither having
    proved, the cheaper of the two points with the better of the two lower bounds."""
    if cp.status in PROVEN or box is None:
        return cp, "cpsat"
    lb = max(box.lower_bound, cp.lower_bound)
    cost_b = prob.cost_of(box.cells) if box.cells is not None else np.inf
    cost_c = prob.cost_of(cp.cells) if cp.cells is not None else np.inf
    if cost_b <= cost_c and box.cells is not None:
        return CellSolution("feasible", box.cells, lb, slack=cp.slack), "boxsearch"
    return CellSolution(cp.status, cp.cells, lb, slack=cp.slack), "cpsat"
