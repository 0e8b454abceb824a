"""Benchmark: how far the cell model's LP relaxation is from the optimum (issue: the hard cases).

Breast cancer, RF(100, depth 5), L1 on range-scaled features, the queries of
``bench/optimal.py``. Each query is solved as the app solves it; the CP-SAT
model it built (after the warm start's upper bound pruned leaves and
intervals) is then relaxed to an LP and solved with HiGHS:

* ``lp``: the model as CP-SAT receives it, integrality dropped (CP-SAT's root
  LP adds its own cuts on top);
* ``lifted``: the same LP plus, for the ``--pairs-of`` features whose order
  booleans are the most fractional and every pair of them, a joint
  distribution on the pair's levels (``H(a, b) = P(interval_j >= a,
  interval_k >= b)`` on the levels the leaves bound both features at, every
  grid rectangle non-negative, the margins the order booleans) with each leaf
  that bounds both features at most its rectangle's mass.

The LP lets every tree couple fractional features its own way (a leaf that
needs two moves gets the smaller of their fractions, whatever the other trees
assumed); the lifted LP makes the trees share one coupling per pair. Figures:
each bound as a share of the optimum (median and worst over the queries), the
LP sizes and solve times, against the reference in the same run, the CP-SAT
solve itself. Prints JSON.

Usage: python bench/optimal_relaxation.py [--queries 20] [--pairs-of 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.intake.models import from_model  # noqa: E402
from core.optimal import optimal_counterfactual  # noqa: E402
from core.schema import infer_schema  # noqa: E402

_LAST: dict = {}


def _recording_solver():
    """CP-SAT's solver class, recording the model and the objective it reached."""
    from ortools.sat.python import cp_model

    base = cp_model.CpSolver

    class Recording(base):  # type: ignore[misc, valid-type]
        def solve(self, model, *args, **kwargs):
            status = super().solve(model, *args, **kwargs)
            _LAST.update(proto=model.proto, objective=self.objective_value, status=self.status_name(status))
            return status

    cp_model.CpSolver = Recording


def _rows(proto) -> tuple[list[dict[int, float]], list[float], list[float]]:
    """Every constraint of the model as a linear row ``lo <= a x <= hi`` on 0-1 variables."""
    rows, lo, hi = [], [], []

    def add(lits, low, high):
        terms: dict[int, float] = defaultdict(float)
        const = 0.0
        for lit in lits:
            if lit >= 0:
                terms[lit] += 1.0
            else:                               # not x  =  1 - x
                terms[-lit - 1] -= 1.0
                const += 1.0
        rows.append(dict(terms))
        lo.append(low - const)
        hi.append(high - const)

    for c in proto.constraints:
        nots = [-e - 1 for e in c.enforcement_literal]
        if c.has_bool_or():
            add(list(c.bool_or.literals) + nots, 1.0, np.inf)
        elif c.has_bool_and():
            for lit in c.bool_and.literals:
                add([lit] + nots, 1.0, np.inf)
        elif c.has_exactly_one():
            add(list(c.exactly_one.literals), 1.0, 1.0)
        elif c.has_at_most_one():
            add(list(c.at_most_one.literals), -np.inf, 1.0)
        elif c.has_linear() and not nots:
            dom = list(c.linear.domain)
            rows.append({int(v): float(a) for v, a in zip(c.linear.vars, c.linear.coeffs)})
            lo.append(float(dom[0]) if dom[0] > -2 ** 62 else -np.inf)
            hi.append(float(dom[-1]) if dom[-1] < 2 ** 62 else np.inf)
        else:
            raise ValueError(f"constraint not handled: {c}")
    return rows, lo, hi


def _solve_lp(rows, lo, hi, obj, n_vars):
    """min obj x over the rows, 0 <= x <= 1 (rows and objective scaled to unit size)."""
    from scipy import sparse
    from scipy.optimize import linprog

    r, c, v = [], [], []
    for i, t in enumerate(rows):
        for j, a in t.items():
            r.append(i)
            c.append(j)
            v.append(a)
    A = sparse.coo_matrix((v, (r, c)), shape=(len(rows), n_vars)).tocsr()
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    scale = np.asarray(abs(A).max(axis=1).todense()).ravel()
    scale[scale == 0] = 1.0
    A = sparse.diags(1 / scale) @ A
    lo, hi = lo / scale, hi / scale
    eq = np.isfinite(lo) & (lo == hi)
    up, down = np.isfinite(hi) & ~eq, np.isfinite(lo) & ~eq
    unit = max(float(abs(obj).max()), 1.0)
    res = linprog(obj / unit, A_ub=sparse.vstack([A[up], -A[down]]), b_ub=np.r_[hi[up], -lo[down]],
                  A_eq=A[eq] if eq.any() else None, b_eq=lo[eq] if eq.any() else None, bounds=(0, 1), method="highs")
    if res.status != 0:
        raise RuntimeError(res.message)
    return float(res.fun) * unit, res.x


def _order_booleans(names: list[str]) -> dict[int, tuple[int, int]]:
    """Variable index -> (feature j, level m) of each ``g[j][m] = [interval_j >= m]``."""
    out = {}
    for i, nm in enumerate(names):
        hit = re.fullmatch(r"g(\d+)_(\d+)", nm)
        if hit:
            out[i] = (int(hit.group(1)), int(hit.group(2)))
    return out


def _leaf_boxes(proto, names, order) -> dict[int, dict[int, list]]:
    """Leaf boolean -> {feature: [lowest allowed interval, first interval not allowed]}
    read from the model's two-literal clauses ``not s or g`` / ``not s or not g``."""
    boxes: dict[int, dict[int, list]] = defaultdict(dict)
    for c in proto.constraints:
        if not c.has_bool_or() or len(c.bool_or.literals) != 2:
            continue
        a, b = c.bool_or.literals
        for s_lit, g_lit in ((a, b), (b, a)):
            if s_lit >= 0 or not names[-s_lit - 1].startswith("s"):
                continue
            g = g_lit if g_lit >= 0 else -g_lit - 1
            if g not in order:
                continue
            j, m = order[g]
            box = boxes[-s_lit - 1].setdefault(j, [None, None])
            if g_lit >= 0:
                box[0] = m if box[0] is None else max(box[0], m)
            else:
                box[1] = m if box[1] is None else min(box[1], m)
    return boxes


def _lift(rows, lo, hi, n_vars, pairs, boxes, order):
    """Add each pair's joint distribution (see the module doc); the new variable count."""
    var_of = {jm: v for v, jm in order.items()}
    span: dict[int, tuple[int, int]] = {}
    for j, m in order.values():
        a, b = span.get(j, (m, m))
        span[j] = (min(a, m), max(b, m))

    def at_least(j, m):                       # P(interval_j >= m) as (terms, constant)
        if m is None:
            return {}, 1.0
        if m == "top":
            return {}, 0.0
        if (j, m) in var_of:
            return {var_of[(j, m)]: 1.0}, 0.0
        return ({}, 1.0) if m < span[j][0] else ({}, 0.0)

    def row(parts, low):
        terms: dict[int, float] = defaultdict(float)
        const = 0.0
        for sign, (t, k) in parts:
            for v, a in t.items():
                terms[v] += sign * a
            const += sign * k
        rows.append(dict(terms))
        lo.append(low - const)
        hi.append(np.inf)

    for j, k in pairs:
        leaves = [s for s, box in boxes.items() if j in box and k in box]
        if not leaves:
            continue
        A = sorted({m for s in leaves for m in boxes[s][j] if m is not None})
        B = sorted({m for s in leaves for m in boxes[s][k] if m is not None})
        H = {}
        for a in A:
            for b in B:
                H[(a, b)] = n_vars
                n_vars += 1

        def both(a, b, H=H, j=j, k=k):          # P(interval_j >= a, interval_k >= b)
            if a == "top" or b == "top":
                return {}, 0.0
            if a is None:
                return at_least(k, b)
            if b is None:
                return at_least(j, a)
            return {H[(a, b)]: 1.0}, 0.0

        ea, eb = [None, *A, "top"], [None, *B, "top"]
        for a0, a1 in zip(ea[:-1], ea[1:]):
            for b0, b1 in zip(eb[:-1], eb[1:]):
                row([(1, both(a0, b0)), (-1, both(a1, b0)), (-1, both(a0, b1)), (1, both(a1, b1))], 0.0)
        for s in leaves:
            (la, ha), (lb, hb) = boxes[s][j], boxes[s][k]
            ha, hb = ha if ha is not None else "top", hb if hb is not None else "top"
            row([(1, both(la, lb)), (-1, both(ha, lb)), (-1, both(la, hb)), (1, both(ha, hb)), (-1, ({s: 1.0}, 0.0))],
                0.0)
    return n_vars


def relaxations(proto, pairs_of: int) -> dict:
    """The LP and lifted-LP bounds of one recorded model (objective units)."""
    names = [v.name for v in proto.variables]
    n = len(names)
    obj = np.zeros(n)
    for v, a in zip(proto.objective.vars, proto.objective.coeffs):
        obj[v] = a
    rows, lo, hi = _rows(proto)
    t0 = time.perf_counter()
    lp, x = _solve_lp(rows, lo, hi, obj, n)
    t_lp = time.perf_counter() - t0
    order = _order_booleans(names)
    frac: Counter = Counter()
    for v, (j, _) in order.items():
        frac[j] += min(x[v], 1 - x[v])
    chosen = sorted(j for j, f in frac.most_common(pairs_of) if f > 1e-6)
    boxes = _leaf_boxes(proto, names, order)
    n_rows = len(rows)
    n2 = _lift(rows, lo, hi, n, list(itertools.combinations(chosen, 2)), boxes, order)
    t0 = time.perf_counter()
    lifted, _ = _solve_lp(rows, lo, hi, np.r_[obj, np.zeros(n2 - n)], n2)
    t_lifted = time.perf_counter() - t0
    off = proto.objective.offset
    return {"lp": lp + off, "lifted": lifted + off, "lp_size": [n_rows, n], "lifted_size": [len(rows), n2],
            "lp_s": t_lp, "lifted_s": t_lifted, "features_lifted": len(chosen)}


def main() -> None:
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--pairs-of", type=int, default=5, help="lift every pair of this many most fractional features")
    args = ap.parse_args()
    _recording_solver()
    b = load_breast_cancer(as_frame=True)
    X = b.data.to_numpy(float)
    schema = infer_schema(b.data)
    model = RandomForestClassifier(100, max_depth=5, random_state=0, n_jobs=2).fit(b.data, b.target)
    ens = from_model(model)
    rows = np.random.default_rng(0).choice(len(X), args.queries, replace=False)   # as bench/optimal.py
    targets = 1 - ens.predict(X[rows]).astype(int)
    per = []
    for r, t in zip(rows, targets):
        _LAST.clear()
        res = optimal_counterfactual(ens, X[r], t, schema=schema, model=model, X_ref=X, time_limit=60)
        if "proto" not in _LAST or _LAST["status"] != "OPTIMAL" or _LAST["objective"] <= 0:
            continue                            # proven by the bound alone, or nothing to relax
        rel = relaxations(_LAST["proto"], args.pairs_of)
        opt = _LAST["objective"]
        per.append({"row": int(r), "cpsat_s": round(res.timings.get("solve", np.nan), 3),
                    "lp_share": round(rel["lp"] / opt, 4), "lifted_share": round(rel["lifted"] / opt, 4),
                    "lp_s": round(rel["lp_s"], 3), "lifted_s": round(rel["lifted_s"], 3),
                    "lp_size": rel["lp_size"], "lifted_size": rel["lifted_size"]})
        print(json.dumps(per[-1]), file=sys.stderr, flush=True)
    if not per:
        print(json.dumps({"queries": 0}))
        return
    col = {k: np.array([p[k] for p in per], float) for k in ("cpsat_s", "lp_share", "lifted_share", "lp_s", "lifted_s")}
    gap = 1 - col["lp_share"]
    out = {"data": "breast_cancer", "forest": "RF(100, depth 5)", "norm": "l1 (range-scaled)",
           "queries_relaxed": len(per), "pairs_of": args.pairs_of,
           "lp_share_of_optimum": {"median": round(float(np.median(col["lp_share"])), 3),
                                   "min": round(float(col["lp_share"].min()), 3)},
           "lifted_share_of_optimum": {"median": round(float(np.median(col["lifted_share"])), 3),
                                       "min": round(float(col["lifted_share"].min()), 3)},
           "gap_closed_by_lifting_median": round(float(np.median(
               (col["lifted_share"] - col["lp_share"]) / np.maximum(gap, 1e-12))), 3),
           "lp_solve_median_s": round(float(np.median(col["lp_s"])), 3),
           "lifted_solve_median_s": round(float(np.median(col["lifted_s"])), 3),
           "cpsat_solve_median_s": round(float(np.median(col["cpsat_s"])), 3),
           "ratio_lifted_lp_over_cpsat_median": round(float(np.median(col["lifted_s"] / col["cpsat_s"])), 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
