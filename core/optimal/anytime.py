"""An optimal query while it runs: the best valid point, the proven lower bound, a stop.

The solvers tell :class:`Anytime` every improving solution (CP-SAT's solution
callback) and every improvement of their proven lower bound (CP-SAT's bound
callback, the box search's best-first bound); it keeps the cheapest point that
is valid on the ensemble and the largest bound, so what it hands to
``on_progress`` never gets worse: the cost never rises, the bound never falls.
``should_stop()`` is polled by a small thread that ends the solvers through
their stop event; the query then returns the best point with its gap
(:func:`stopped_result`), never a claim of optimality.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable

import numpy as np

from core.cells import QueryRun
from core.counterfactual import CounterfactualResult

__all__ = ["Anytime", "stopped_result"]

POLL_S = 0.02        # how often should_stop() is asked


def relative_gap(cost: float, bound: float) -> float:
    """(cost - bound) / cost, at least 0; infinite without a finite cost."""
    if not np.isfinite(cost):
        return float("inf")
    return max(0.0, (cost - bound) / max(abs(cost), 1e-12))


class Anytime:
    """The best valid point and the proven lower bound of one query while it runs.

    ``on_progress(result)`` is told each improvement once a valid point exists: a
    :class:`CounterfactualResult` with status "feasible", the point (valid on the
    ensemble), its cost, ``lower_bound`` and ``gap`` (the solver's threads call it).
    ``should_stop()`` is polled from :meth:`open` to :meth:`close`; when it says True,
    :attr:`stop` is set and the solvers given it end.
    """

    def __init__(self, run: QueryRun, on_progress: Callable[[CounterfactualResult], None] | None,
                 should_stop: Callable[[], bool] | None) -> None:
        self.run = run
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.stop = threading.Event()
        self.lock = threading.RLock()   # held while telling too: points told in the order they were kept
        self.last: CounterfactualResult | None = None   # the best point as last told
        self.bound = 0.0
        self._done = threading.Event()
        self._watch: threading.Thread | None = None

    # ---------------------------------------------------------------- the stop
    def open(self) -> "Anytime":
        if self.should_stop is not None:
            self._poll()
            self._watch = threading.Thread(target=self._watching, name="optimal-stop", daemon=True)
            self._watch.start()
        return self

    def close(self) -> None:
        self._done.set()
        if self._watch is not None:
            self._watch.join()

    def _poll(self) -> None:
        if self.should_stop is not None and self.should_stop():
            self.stop.set()

    def _watching(self) -> None:
        while not self._done.wait(POLL_S) and not self.stop.is_set():
            self._poll()

    @property
    def listening(self) -> bool:
        """Does anyone hear the progress (else the solvers run without callbacks, at full speed)?"""
        return self.on_progress is not None

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    # ---------------------------------------------------------------- progress
    def point(self, x: np.ndarray, cost: float, backend: str) -> None:
        """A valid point (on the ensemble) of cost ``cost``: kept and told if cheaper."""
        with self.lock:
            if self.last is not None and cost >= self.last.cost:
                return
            res = self.run.result(x, cost, "feasible", backend=backend, lower_bound=min(self.bound, cost),
                                  gap=relative_gap(cost, self.bound), check=False)
            if not res.found or (self.last is not None and res.cost >= self.last.cost):
                return
            self.last = res
            self._tell(res)

    def cells(self, cells: np.ndarray, backend: str) -> None:
        """A solver's solution: its point, if valid (a near tie of the integer scaling is not)."""
        prob = self.run.prob
        x = prob.point_of(cells)
        if prob.is_valid(x[None, :])[0]:
            self.point(x, float(prob.cost_of(cells)), backend)

    def lower(self, bound: float) -> None:
        """A proven lower bound on the cost: kept and told if larger."""
        with self.lock:
            if not np.isfinite(bound) or bound <= self.bound:
                return
            self.bound = float(bound)
            if self.last is None:
                return
            cost = self.last.cost
            res = self.last = replace(self.last, lower_bound=min(self.bound, cost),
                                      gap=relative_gap(cost, self.bound), guarantee=None,  # type: ignore[arg-type]  # None: the status says it again
                                      elapsed=time.perf_counter() - self.run.t0)
            self._tell(res)

    def _tell(self, res: CounterfactualResult) -> None:
        if self.on_progress is not None:
            self.on_progress(res)


def stopped_result(run: QueryRun, x: np.ndarray | None, cost: float, bound: float, backend: str
                   ) -> CounterfactualResult:
    """The answer of a query the user stopped: the best valid point found so far,
    checked on the model, with the proven lower bound and the gap; or none."""
    if x is None:
        return run.result(None, np.inf, "stopped", backend=backend, gap=np.inf, lower_bound=bound,
                          message="Stopped before any valid point was found; nothing is proven either way.")
    bound = min(bound, cost)
    gap = relative_gap(cost, bound)
    return run.result(x, cost, "stopped", backend=backend, gap=gap, lower_bound=bound,
                      message=f"Stopped before optimality was proven: this is the best valid point found "
                              f"(gap {gap:.1%}).")
