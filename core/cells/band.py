"""Missing values as one more level of their column's grid, for one query.

A model that routes missing values is read by the analyses over its columns
plus one "is missing" column per feature that may be missing
(:func:`core.model.missing.expand`); a query whose value of ``j`` is missing
and may be given one then carries, in that rewrite, a copy of every subtree
below a split on ``j`` for each state. This module asks the same question on
the model as it routes a missing value (:func:`core.model.missing.banded`):
"missing" is the band ``x > p1`` of ``j``'s own column, one more interval at
the top of its grid, and each split sends the band to its own missing side.
The cell problem (OCEAN section 3.2, eqs. 15-20: one interval per feature) is
then the imputed row's, with a leaf cut in two only where a split sends
missing values left.

The costs are the rewrite's, interval by interval: staying missing costs 0
(the band is the query's interval); giving ``j`` a value in interval ``I``
costs the move from the fill to ``I`` plus the "is missing" column's own change
(1 to 0), combined as the cost combines features (their sum, or for the
L-infinity cost the larger; OCEAN eqs. 28-32 are separable, so this is exact).
The "is missing" column itself stays at 1 inside the problem. Every point the
solvers return is read back (:meth:`Band.to_outer`) as the caller's row: the
band as the fill with "is missing" 1, any other value with "is missing" 0. The
optimum is the rewrite's (tests compare both, norm by norm, and with a brute
force on small forests). The costs are not monotone away from the query here
(the band is the query's interval, the fill's the cheapest number), so the box
search, which needs that, leaves such a query to CP-SAT.

It applies when each "is missing" column of the query is held (a known value
that stays known, a missing one that stays missing) or is missing and may
become known; a query that lets a known value become missing, with
plausibility or further models, keeps the rewrite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from core.cells.problem import Band, CellProblem
from core.model.missing import band_cut, banded, info

if TYPE_CHECKING:
    from core.model import TreeEnsemble

__all__ = ["Band", "band_problem", "ENABLED"]

#: read missing values as a band (False: always the rewrite; tests compare the two)
ENABLED = True


def band_problem(wide: TreeEnsemble, x: np.ndarray, action: list[str],
                 build: Callable[[TreeEnsemble, dict[int, list[float]]], CellProblem]) -> CellProblem | None:
    """The cell problem of query ``x`` (a row of ``wide``, :func:`core.model.missing.expand`)
    with each missing value that may become known read as a band (module docstring);
    ``action``: each column's actionability for this query; ``build(ensemble,
    extra_levels)``: the caller's :func:`core.cells.problem.build_problem` with its
    settings (one model, no plausibility). None when it does not apply: nothing
    missing may become known, a known value may become missing, or ``wide`` does not
    know the model it was rewritten from."""
    got = info(wide)
    source = wide._flat.get("missing_source")
    if not ENABLED or got is None or source is None:
        return None
    cuts: dict[int, tuple[float, float]] = {}
    always: list[int] = []
    fill: dict[int, float] = {}
    indicator: dict[int, int] = {}
    for j, k in zip(got["features"], got["indicators"]):
        j, k = int(j), int(k)
        held = action[k] == "fixed" or (x[k] > 0.5 and action[k] == "increase") \
            or (x[k] <= 0.5 and action[k] == "decrease")
        if x[k] <= 0.5:
            if not held:                   # a known value that may become missing: the rewrite says how
                return None
            continue
        if held:
            always.append(j)
            continue
        cuts[j], fill[j], indicator[j] = band_cut(source, j, float(x[j])), float(x[j]), k
    if not cuts:
        return None
    inner = banded(wide, cuts, always)
    if inner is None:
        return None
    prob = build(inner, {j: [c[0]] for j, c in cuts.items()})
    cm = prob.cost_model
    fill_hat, leaves, raw = {}, {}, {}
    for j, (_, p2) in cuts.items():
        k = indicator[j]
        lv = prob.levels[j]
        b = int(np.searchsorted(lv, p2, side="left"))          # the band: the last interval, x > p1
        fill_hat[j] = int(prob.hat[j])
        leave = leaves[j] = float(cm.feature_cost(k, 1.0, np.array([0.0]))[0])   # "is missing" 1 -> 0
        raw[j] = prob.costs[j].copy()
        raw[j][b] = np.inf
        c = np.maximum(raw[j], leave) if cm.combine == "max" else raw[j] + leave
        c[b] = 0.0
        prob.costs[j] = c
        prob.points[j] = prob.points[j].copy()
        prob.points[j][b] = p2
        prob.hat[j] = b
        ck = np.full(prob.costs[k].shape, np.inf)               # inside the problem "is missing" stays 1
        ck[prob.hat[k]] = 0.0
        prob.costs[k] = ck
    prob.band = Band(wide, x.copy(), cuts, indicator, fill, fill_hat, leaves, raw)
    prob.x_hat = prob.band.to_inner(x)
    return prob
