"""Oracles: answers computed by definition or by enumeration, on tiny inputs.

The exact methods are checked against these (and against each other):

* :func:`grid_brute_force`: the optimal counterfactual cost by enumerating
  every combination of candidate values (the query's value, each split level,
  just above each level), for the tiny models of :func:`tiny_models`;
* :func:`categorical_brute_force`: the same with one-hot groups enumerated
  as categories (native categorical models loaded through the workspace);
* :func:`fcca_brute_force_cost`: FCCA's cost (lambda0 per changed feature,
  lambda1 per scaled unit) over every cell of the split grid;
* :func:`brute_cdp`, :func:`brute_crp`: the Projected Forest and the Regional
  RF of the counterfactual-rules paper by their definitions.
"""

from __future__ import annotations

import itertools

import lightgbm as lgb
import numpy as np
import xgboost as xgb
from conftest import make_data
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

from core.counterfactual import make_cost_model

EPS = 1e-9


def grid_brute_force(ens, x, target, norm, fixed=(), eps=1e-9):
    """Minimum cost over every combination of candidate values: x itself, each
    split level, and each level + eps (just inside the upper interval)."""
    cm = make_cost_model(ens, norm)
    cands = []
    for j in range(ens.n_features):
        lv = ens.split_levels(j)
        vals = {x[j]} if j in fixed else {x[j], *lv, *(lv + eps)}
        cands.append(sorted(vals))
    P = np.array(list(itertools.product(*cands)))
    ok = ens.predict(P) == target
    if not ok.any():
        return np.inf
    diff = P[ok] - x
    # infimum convention: a point eps above a level costs what the level costs
    on_level = np.zeros_like(diff, dtype=bool)
    for j in range(ens.n_features):
        lv = ens.split_levels(j)
        on_level[:, j] = np.isin(P[ok][:, j], lv + eps)
    Pinf = np.where(on_level, P[ok] - eps, P[ok])
    return float(cm.cost(x, Pinf).min())


def infimum_cost(ens, x, point, norm, schema=None):
    """The cost of the returned ``point``'s cell at its cheapest end: each moved continuous
    value taken back to the level its cell is open at (a point just above a level counts
    at the level, as :func:`grid_brute_force` counts it) or to the cell's closed end, within
    the schema's range. The brute forces give the optimum in this convention; a result's
    own ``cost`` is the point's (at most the nudge inside the cell above this). ``ens``: an
    ensemble, or a list of them (the grid of every model's levels; costs by the first)."""
    models = list(ens) if isinstance(ens, (list, tuple)) else [ens]
    cm = make_cost_model(models[0], norm, schema=schema)
    x, q = np.asarray(x, dtype=float), np.array(point, dtype=float)
    cats = models[0].categories
    for j in np.flatnonzero(q != x):
        kind = schema.features[j].kind if schema is not None else "numerical"
        if kind != "numerical" or (cats is not None and cats[j] is not None):
            continue
        lo = min(schema.features[j].lower, x[j]) if schema is not None else -np.inf
        hi = max(schema.features[j].upper, x[j]) if schema is not None else np.inf
        lv = np.unique(np.concatenate([np.asarray(m.split_levels(j), dtype=float) for m in models]))
        i = int(np.searchsorted(lv, q[j], side="left"))          # the cell (lv[i-1], lv[i]]
        if q[j] > x[j] and i > 0:
            q[j] = max(lv[i - 1], lo, x[j])
        elif q[j] < x[j] and i < lv.size:
            q[j] = min(lv[i], hi, x[j])
    return float(cm.cost(x, q[None, :])[0])


def returned_cost(res, ens, x, norm, schema=None):
    """What a brute force finds, read from a result: checks that its ``cost`` is its point's
    own cost, then returns :func:`infimum_cost` of its point."""
    models = list(ens) if isinstance(ens, (list, tuple)) else [ens]
    own = float(make_cost_model(models[0], norm, schema=schema).cost(np.asarray(x, dtype=float), res.x[None, :])[0])
    assert abs(res.cost - own) <= 1e-12 * max(1.0, abs(own)), (res.cost, own)
    return infimum_cost(ens, x, res.x, norm, schema)


def tiny_models():
    """Four tiny binary models (RF, GB, XGBoost, LightGBM) on 3 features, and their data."""
    X, y = make_data("binary", n=200, d=3, seed=4)
    return X, y, [
        RandomForestClassifier(6, max_depth=3, random_state=0).fit(X, y),
        GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=0).fit(X, y),
        xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X, y),
        lgb.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y),
    ]


def scaled_breast_cancer_forest():
    """Breast cancer, min-max scaled, RandomForestClassifier(30, depth 4) fitted on the first
    400 rows: ``(model, ensemble, X)``; the solvers' real-data case (30 correlated features)."""
    from sklearn.datasets import load_breast_cancer

    from core.intake.models import from_model

    b = load_breast_cancer()
    X = b.data.astype(float)
    X = (X - X.min(axis=0)) / np.maximum(X.max(axis=0) - X.min(axis=0), 1e-12)
    model = RandomForestClassifier(30, max_depth=4, random_state=0).fit(X[:400], b.target[:400])
    return model, from_model(model), X


def categorical_brute_force(ens, schema, x, target):
    """Minimum l1 cost over each numerical column at its value, a level or just above one,
    and each one-hot group at each of its levels."""
    cm = make_cost_model(ens, "l1", schema=schema)
    groups = [list(g) for g in schema.groups().values() if len(g) >= 2]
    in_group = {j for g in groups for j in g}
    axes, names = [], []
    for j in range(ens.n_features):
        if j in in_group:
            continue
        lv = ens.split_levels(j)
        axes.append(sorted({x[j], *lv, *(lv + EPS)}))
        names.append(("num", j))
    for g in groups:
        axes.append(list(range(len(g))))
        names.append(("cat", g))
    best = np.inf
    for combo in itertools.product(*axes):
        p = x.copy()
        for (kind, where), v in zip(names, combo):
            if kind == "num":
                p[where] = v
            else:
                p[where] = 0.0
                p[where[v]] = 1.0
        if ens.predict(p[None, :])[0] != target:
            continue
        q = p.copy()
        for (kind, j), v in zip(names, combo):   # infimum: just above a level costs what the level costs
            if kind == "num" and np.isin(v, ens.split_levels(j) + EPS):
                q[j] = v - EPS
        best = min(best, float(cm.cost(x, q[None, :])[0]))
    return best


def fcca_brute_force_cost(ens, x0, target, span, lam0=0.1, lam1=1.0):
    """Cheapest cost over every cell of the split grid (cost at the cell's infimum point)."""
    d = len(x0)
    per_feature = []
    for j in range(d):
        lv = ens.split_levels(j)
        opts = []
        edges = np.concatenate([[-np.inf], lv, [np.inf]])
        for i in range(len(edges) - 1):
            a, b = edges[i], edges[i + 1]
            if a < x0[j] <= b:
                mid, c = x0[j], 0.0
            elif b < x0[j]:
                mid, c = (b if np.isinf(a) else (a + b) / 2), lam0 + lam1 * (x0[j] - b) / span[j]
            else:
                mid, c = (a + 1 if np.isinf(b) else (a + b) / 2), lam0 + lam1 * (a - x0[j]) / span[j]
            opts.append((mid, c))
        per_feature.append(opts)
    best = np.inf
    for combo in itertools.product(*per_feature):
        x = np.array([p for p, _ in combo])
        if ens.predict(x[None, :])[0] == target:
            best = min(best, sum(c for _, c in combo))
    return best


# ------------------------------------------------------------ brute force
def reached_leaves(tree, sides) -> list[int]:
    """Leaves reached from the root when ``sides(feature, threshold)`` says
    whether to go (left, right) at each split."""
    reached, stack = [], [0]
    while stack:
        v = stack.pop()
        if tree.children_left[v] < 0:
            reached.append(v)
            continue
        left, right = sides(tree.feature[v], tree.threshold[v])
        if left:
            stack.append(tree.children_left[v])
        if right:
            stack.append(tree.children_right[v])
    return reached


def brute_cdp(cr, x, S, target) -> float:
    """The Projected Forest by its definition: per tree, drop x with the splits
    on S sent both ways; keep the fitted rows inside every reached leaf on the
    other features; average over trees the target share among them."""
    X, y = cr.X_, cr.y_
    d = X.shape[1]
    rest = [j for j in range(d) if j not in set(S)]
    vals = []
    for tree in cr.ensemble_.trees:
        reached = reached_leaves(tree, lambda f, t: (True, True) if f in S else (x[f] <= t, x[f] > t))
        keep = np.ones(len(X), dtype=bool)
        leaves, lo, hi = tree.leaf_boxes(d)
        pos = {v: k for k, v in enumerate(leaves)}
        for v in reached:
            k = pos[v]
            keep &= np.all((X[:, rest] > lo[k, rest]) & (X[:, rest] <= hi[k, rest]), axis=1)
        if keep.any():
            vals.append(np.mean(y[keep] == target))
    return float(np.mean(vals)) if vals else 0.0


def brute_crp(cr, qlo, qhi, target) -> float:
    """The Regional RF by its definition: at a split on t go left if the query
    interval (a, b] has a <= ... i.e. some value <= t, right if some value > t."""
    X, y = cr.X_, cr.y_
    vals = []
    for tree in cr.ensemble_.trees:
        reached = reached_leaves(tree, lambda f, t: (qlo[f] < t, qhi[f] > t))
        leaf = tree.apply(X)
        inside = np.isin(leaf, reached)
        if inside.any():
            vals.append(np.mean(y[inside] == target))
    return float(np.mean(vals)) if vals else 0.0


def constrained_oracle(ens, schema, x, target, cons, norm="l1"):
    """The cheapest point under constraints between features, by enumeration: every cell of
    the split grid where the model gives ``target`` is solved as its own (mixed-integer)
    linear program over the closed cell, the features' ranges and the constraints (each
    implication by its branches: its conclusions, or one premise broken), cells taken
    cheapest box first until no box can beat the best. ``inf`` when no cell has a point.
    Features are free within their ranges (the schema's actionability is not read)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    from core.constraints import CategoryMove, Implication

    cm = make_cost_model(ens, norm, None, schema)
    d = ens.n_features
    arr = schema.arrays()
    lo, hi = np.minimum(arr["lower"], x), np.maximum(arr["upper"], x)
    integral = np.array([f.kind in ("integer", "ordinal", "binary") for f in schema.features])
    for j, ok in cons.allowed_codes(x).items():
        lo[j], hi[j] = max(lo[j], min(ok)), min(hi[j], max(ok))
    levels = [np.asarray(ens.split_levels(j), dtype=float) for j in range(d)]
    cells = []
    for j in range(d):
        edges = np.concatenate([[-np.inf], levels[j], [np.inf]])
        opts = []
        for a, b in zip(edges[:-1], edges[1:]):
            a2, b2 = max(a, lo[j]), min(b, hi[j])
            if integral[j]:
                a2 = max(np.floor(a) + 1 if np.isfinite(a) else -np.inf, np.ceil(lo[j]))
                b2 = min(np.floor(b) if np.isfinite(b) else np.inf, np.floor(hi[j]))
                if a2 > b2:
                    continue
                inside = a2
            else:
                if a2 > b2 or (a2 == b2 and a2 == a):      # (a, b] meets the range at a alone: empty
                    continue
                inside = (a2 + b2) / 2 if a2 < b2 else b2
            opts.append((a2, b2, inside))
        cells.append(opts)
    combos = list(itertools.product(*cells))
    if not combos:
        return np.inf
    P = np.array([[c[2] for c in combo] for combo in combos])
    ok = ens.predict(P) == target
    boxes = [(float(cm.cost(x, np.clip(x, [c[0] for c in combo], [c[1] for c in combo])[None, :])[0]), combo)
             for combo, k in zip(combos, ok) if k]
    boxes.sort(key=lambda t: t[0])
    linear = [c.form for c in cons if not isinstance(c.form, (Implication, CategoryMove))]
    imps = [c.form for c in cons if isinstance(c.form, Implication)]
    def ways(imp):          # its conclusions hold, or one premise is broken (an equation: either side)
        out = [("then", imp)]
        for p in imp.premises:
            out += [("<=", p), (">=", p)] if p.sense == "==" else [("not", p)]
        return out

    branches = list(itertools.product(*[ways(imp) for imp in imps]))
    best = np.inf
    # variables: x (d), p (d), n (d); x - p + n = x_hat; cost sum w+ p / span + w- n / span
    cost = np.concatenate([np.zeros(d), cm.w_up / cm.span, cm.w_down / cm.span]) * cm.l1
    for box_cost, combo in boxes:
        if box_cost >= best - 1e-12:
            break
        xl, xh = np.array([c[0] for c in combo]), np.array([c[1] for c in combo])
        for branch in branches:
            rows, rlo, rhi = [np.hstack([np.eye(d), -np.eye(d), np.eye(d)])], [x], [x]
            forms = [(f, None) for f in linear]
            for how, f in branch:
                forms += [(q, None) for q in f.conclusions] if how == "then" else [(f, how)]
            for f, broken in forms:
                a, rhs, sense = f.on_row(x)
                a = np.asarray(a, dtype=float)
                if broken is not None:      # the broken side: a step of 1 on integers, else its closure
                    whole = all(integral[j] and float(a[j]).is_integer() for j in np.flatnonzero(a)) and \
                        float(rhs).is_integer()
                    step = 1.0 if whole else 0.0
                    if broken == "not":
                        broken = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}[sense]
                    if broken in ("<", ">"):
                        rhs = rhs - step if broken == "<" else rhs + step
                        broken = "<=" if broken == "<" else ">="
                    elif f.sense == "==":   # an equation broken on one side: strictly
                        rhs = rhs - step if broken == "<=" else rhs + step
                    sense = broken
                row = np.concatenate([a, np.zeros(2 * d)])[None, :]
                rows.append(row)
                rlo.append([rhs if sense in (">=", ">", "==") else -np.inf])
                rhi.append([rhs if sense in ("<=", "<", "==") else np.inf])
            res = milp(cost, integrality=np.concatenate([integral.astype(int), np.zeros(2 * d, int)]),
                       bounds=Bounds(np.concatenate([xl, np.zeros(2 * d)]),
                                     np.concatenate([xh, np.full(2 * d, np.inf)])),
                       constraints=LinearConstraint(np.vstack(rows), np.concatenate(rlo), np.concatenate(rhi)))
            if res.x is not None and res.fun < best:
                best = float(res.fun)
    return best
