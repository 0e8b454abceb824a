"""Exact solvers of the counterfactual problem (:class:`core.cells.CellProblem`).

Each module has one entry point, ``solve(problem, ...) -> CellSolution``:

* :mod:`core.solvers.cpsat`: the cell model (OCEAN's constraints on
  booleans) in OR-Tools CP-SAT, the default;
* :mod:`core.solvers.ocean`: OCEAN's MILP as in the paper (flows, lambda per
  depth, order simplex), in HiGHS or Gurobi;
* :mod:`core.solvers.separable`: boosted stumps, a multiple-choice knapsack
  solved by branch and bound (returns None when the problem is not separable).

The box branch and bound over maximal intersection regions (Blanchart) lives
with its analysis in :mod:`core.regions`.
"""
