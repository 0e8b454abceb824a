"""The exact regions obey ``fixed`` / ``increase_only`` / ``decrease_only`` (issue #40
item 2): on tiny forests, for random roles, the exact counterfactual equals the optimal
MILP's cost (l1 and l0) and, for l0 (the number of changed features), a brute force
over every cell of the forest's split grid; its point keeps every role and gets the
target on the model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from core import exact_counterfactual, from_model, optimal_counterfactual


def _brute_l0(ens, x, target, fixed, inc, dec):
    """Fewest changed features over every cell of the split grid that the roles allow."""
    d = len(x)
    options = []
    for j in range(d):
        t = np.unique(ens.split_levels(j))
        edges = np.concatenate([[-np.inf], t, [np.inf]])
        cells = []
        for a, b in zip(edges[:-1], edges[1:]):          # the cell a < v <= b
            if a < x[j] <= b:
                cells.append((x[j], 0))
                continue
            up = a >= x[j]
            if j in fixed or (up and j in dec) or (not up and j in inc):
                continue
            v = (a + b) / 2 if np.isfinite(a) and np.isfinite(b) else (b - 1.0 if np.isfinite(b) else a + 1.0)
            cells.append((v, 1))
        options.append(cells)
    best = np.inf
    for combo in itertools.product(*options):
        cost = sum(c for _, c in combo)
        if cost >= best:
            continue
        p = np.array([v for v, _ in combo])
        if ens.predict(p[None, :])[0] == target:
            best = cost
    return best


@pytest.mark.parametrize("seed", range(6))
def test_exact_regions_keep_the_roles_and_match_the_milp_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] - X[:, 2] + 0.3 * rng.normal(size=200) > 0).astype(int)
    ens = from_model(RandomForestClassifier(3, max_depth=2, random_state=seed).fit(X, y))
    compared = 0
    for i in range(8):
        x = X[i]
        target = 1 - int(ens.predict(x[None, :])[0])
        perm = rng.permutation(3)
        roles = dict(fixed=[int(perm[0])] if i % 3 == 0 else [], increase_only=[int(perm[1])],
                     decrease_only=[int(perm[2])] if i % 2 else [])
        for norm in ("l1", "l0"):
            e = exact_counterfactual(ens, x, target, norm=norm, time_limit=60, **roles)
            m = optimal_counterfactual(ens, x, target, norm=norm, time_limit=60, **roles)
            assert e.status in ("optimal", "infeasible") and m.status in ("optimal", "infeasible")
            assert e.found == m.found
            if norm == "l0":
                brute = _brute_l0(ens, x, target, set(roles["fixed"]), set(roles["increase_only"]),
                                  set(roles["decrease_only"]))
                assert (brute == np.inf) == (not e.found)
            if not e.found:
                continue
            compared += 1
            assert e.cost == pytest.approx(m.cost, rel=1e-9, abs=1e-9)
            if norm == "l0":
                assert e.cost == pytest.approx(brute)
            assert ens.predict(e.x[None, :])[0] == target
            for j in roles["fixed"]:
                assert e.x[j] == x[j]
            for j in roles["increase_only"]:
                assert e.x[j] >= x[j]
            for j in roles["decrease_only"]:
                assert e.x[j] <= x[j]
    assert compared >= 8
