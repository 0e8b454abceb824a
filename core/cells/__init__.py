"""The counterfactual kernel: the problem on the grid of split levels.

Used by :mod:`core.optimal` (per-instance optimal counterfactuals),
:mod:`core.regions` (exact pure regions) and :mod:`core.compression` (thresholds from
counterfactuals), and solved by the modules of :mod:`core.solvers`.

* :mod:`core.cells.problem`: :class:`CellProblem` (grid, interval costs and
  points, leaf boxes, target), :func:`build_problem`, :class:`Plausibility`,
  :class:`CellSolution` (what every solver returns);
* :mod:`core.cells.bounds`: lower bounds (:func:`radius_bound`), leaf and box
  distances, the cut-offs an upper bound allows;
* :mod:`core.cells.starts`: upper bounds, from reference rows
  (:func:`warm_start`) or from the model alone (:func:`greedy_start`);
* :mod:`core.cells.result`: a solution read back as a counterfactual checked
  on the ensemble and the original model (:class:`QueryRun`);
* :mod:`core.cells.band`: a missing value that may become known read as one
  more level of its column's grid (:func:`band_problem`);
* :mod:`core.cells.cache`: the query-independent structures kept between
  queries (:class:`GridCache`).
"""

from core.cells.bounds import radius_bound, radius_for, score_needs
from core.cells.problem import (
                                NUDGE,
                                CellProblem,
                                CellSolution,
                                Plausibility,
                                TreeBlock,
                                build_problem,
                                explain_infeasible,
                                feature_levels,
)
from core.cells.result import QueryRun, check_on_model
from core.cells.starts import best_start, greedy_start, local_search, target_margin, warm_start

__all__ = ["NUDGE", "CellProblem", "CellSolution", "Plausibility", "TreeBlock", "build_problem",
           "explain_infeasible", "feature_levels", "radius_bound", "radius_for", "score_needs",
           "best_start", "greedy_start", "local_search", "target_margin", "warm_start", "QueryRun", "check_on_model"]
