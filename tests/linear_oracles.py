"""Independent oracles for optimal counterfactuals of linear models.

* :func:`brute_force`: every combination of the discrete values (integers, binaries,
  categories) on a small grid, and for each the continuous moves by an exact method
  of their own: with one target row, a fractional-knapsack greedy (l1, l0), or a
  bisection on the multiplier of the one row (squared l2); with several rows (a
  multiclass model), scipy's ``linprog`` (l1). With l0, every subset of the
  continuous features is tried as the set allowed to move.
* :func:`gurobi_x_space`: a second MILP / MIQP written in the features themselves
  (``x_j`` with ``|x_j - x̂_j|`` split by sign and big-M change indicators), solved by Gurobi.

Both read the same query description, :class:`Query`: the model's scores as
``intercept + coef @ x`` plus category tables, the target as rows on the scores
(closed, ``>=``), each feature's allowed values, and the costs of
:mod:`core.counterfactual` (a category switch costs ``w (l0 + l1 + l2)``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass
class Query:
    coef: np.ndarray            # (n_out, d)
    intercept: np.ndarray       # (n_out,)
    tables: list                # per feature None or (n_codes, n_out)
    rows: np.ndarray            # (n_rows, n_out)
    rhs: np.ndarray             # (n_rows,)
    x_hat: np.ndarray
    lo: np.ndarray              # continuous / integer range (after actionability)
    hi: np.ndarray
    kind: list                  # "continuous", "integer", "categorical", "fixed"
    codes: list                 # categorical: allowed codes
    span: np.ndarray
    l0: float
    l1: float
    l2: float
    wu: np.ndarray | None = None    # weights to increase / decrease (default 1)
    wd: np.ndarray | None = None

    def __post_init__(self) -> None:
        d = len(self.x_hat)
        self.wu = np.ones(d) if self.wu is None else np.asarray(self.wu, dtype=float)
        self.wd = np.ones(d) if self.wd is None else np.asarray(self.wd, dtype=float)

    def score_rows(self, x: np.ndarray) -> np.ndarray:
        s = self.intercept + self.coef @ np.where([t is None for t in self.tables], x, 0.0)
        for j, t in enumerate(self.tables):
            if t is not None:
                s = s + t[int(x[j])]
        return self.rows @ s - self.rhs

    def cost_of(self, x: np.ndarray) -> float:
        total = 0.0
        for j in range(len(x)):
            d = x[j] - self.x_hat[j]
            if self.tables[j] is not None:
                total += 0.5 * (self.wu[j] + self.wd[j]) * (self.l0 + self.l1 + self.l2) * (d != 0)
            else:
                D = abs(d) / self.span[j]
                w = self.wu[j] if d > 0 else self.wd[j]
                total += w * (self.l0 * (d != 0) + self.l1 * D + self.l2 * D * D)
        return total


def _knapsack(gain, cap, unit, need):
    """Fractional knapsack: cheapest per unit of gain first (l1 moves)."""
    cost, moves = 0.0, np.zeros(len(gain))
    for i in np.argsort(np.asarray(unit) / np.asarray(gain), kind="stable"):
        if need <= 1e-15:
            break
        take = min(cap[i], need / gain[i])
        moves[i] = take
        cost += take * unit[i]
        need -= take * gain[i]
    return (cost, moves) if need <= 1e-9 * max(1.0, abs(need)) + 1e-12 else (np.inf, None)


def _quadratic(gain, cap, c1, c2, need):
    """min sum c1 d + c2 d^2, sum gain d >= need, 0 <= d <= cap: bisection on the multiplier."""
    gain, cap, c1, c2 = (np.asarray(v, dtype=float) for v in (gain, cap, c1, c2))
    if np.sum(gain * cap) < need:
        return np.inf, None

    def d(lam):
        return np.clip((lam * gain - c1) / (2 * c2), 0.0, cap)

    lo, hi = 0.0, 1.0
    while np.sum(gain * d(hi)) < need:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.sum(gain * d(mid)) < need:
            lo = mid
        else:
            hi = mid
    m = d(hi)
    return float(np.sum(c1 * m + c2 * m * m)), m


def brute_force(q: Query) -> tuple[float, np.ndarray | None]:
    """The optimum over the grid (see the module docstring) and its point."""
    d = len(q.x_hat)
    disc = [j for j in range(d) if q.kind[j] in ("integer", "categorical")]
    cont = [j for j in range(d) if q.kind[j] == "continuous"]
    choices = [q.codes[j] if q.kind[j] == "categorical" else
               list(np.arange(q.lo[j], q.hi[j] + 1)) for j in disc]
    best, best_x = np.inf, None
    subsets = [tuple(s) for r in range(len(cont) + 1) for s in itertools.combinations(cont, r)] \
        if q.l0 > 0 else [tuple(cont)]
    for combo in itertools.product(*choices):
        x = q.x_hat.copy()
        x[disc] = combo
        base = q.cost_of(x)
        if base >= best:
            continue
        short = -q.score_rows(x)            # what the continuous moves must add to each row
        for S in subsets:
            extra, moved = _continuous(q, x, list(S), short)
            if extra is None:
                continue
            total = base + extra
            if total < best - 1e-12:
                best, best_x = total, moved
    return best, best_x


def _continuous(q: Query, x: np.ndarray, S: list, short: np.ndarray):
    A = q.rows @ q.coef
    if not S:
        return (q.l0 * 0.0, x) if np.all(short <= 1e-12) else (None, None)
    if len(q.rhs) == 1:
        need = float(short[0])
        items, gain, cap, c1, c2, sign = [], [], [], [], [], []
        for j in S:
            a = A[0, j]
            for s, c, w in ((1.0, q.hi[j] - q.x_hat[j], q.wu[j]), (-1.0, q.x_hat[j] - q.lo[j], q.wd[j])):
                if s * a > 0 and c > 0:
                    items.append(j), gain.append(abs(a)), cap.append(c), sign.append(s)
                    c1.append(w * q.l1 / q.span[j]), c2.append(w * q.l2 / q.span[j] ** 2)
        if need <= 0:
            return 0.0, x
        if not items:
            return None, None
        if q.l2 > 0:
            cost, m = _quadratic(gain, cap, c1, c2, need)
        else:
            cost, m = _knapsack(gain, cap, c1, need)
        if m is None:
            return None, None
        out = x.copy()
        for j, s, v in zip(items, sign, m):
            out[j] = q.x_hat[j] + s * v
        return cost + q.l0 * _changed(q, out, S), out
    from scipy.optimize import linprog

    assert q.l2 == 0, "several rows with squared l2: compare with the Gurobi formulation instead"
    n = len(S)
    c = np.concatenate([[q.wu[j] * q.l1 / q.span[j] for j in S], [q.wd[j] * q.l1 / q.span[j] for j in S]])
    A_ub = -np.hstack([A[:, S], -A[:, S]])
    bounds = [(0, q.hi[j] - q.x_hat[j]) for j in S] + [(0, q.x_hat[j] - q.lo[j]) for j in S]
    res = linprog(c, A_ub=A_ub, b_ub=-short, bounds=bounds, method="highs")
    if res.status != 0:
        return None, None
    out = x.copy()
    out[S] = q.x_hat[S] + res.x[:n] - res.x[n:]
    return float(res.fun) + q.l0 * _changed(q, out, S), out


def _changed(q: Query, x: np.ndarray, S: list) -> float:
    """The l0 weights of the features of S that x moves (by direction)."""
    return float(sum(q.wu[j] if x[j] > q.x_hat[j] else q.wd[j] for j in S if x[j] != q.x_hat[j]))


def gurobi_x_space(q: Query) -> float:
    """The same query as a MILP / MIQP in x itself, solved by Gurobi (the closed rows)."""
    import gurobipy as gp

    d = len(q.x_hat)
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    m = gp.Model(env=env)
    m.Params.MIPGap = 0.0
    m.Params.MIPGapAbs = 0.0
    m.Params.FeasibilityTol = 1e-9
    m.Params.IntFeasTol = 1e-9
    obj = 0.0
    s = [gp.LinExpr(float(b)) for b in q.intercept]
    for j in range(d):
        if q.kind[j] == "categorical":
            b = {k: m.addVar(vtype=gp.GRB.BINARY) for k in q.codes[j]}
            m.addConstr(gp.quicksum(b.values()) == 1)
            for o in range(len(s)):
                s[o] += gp.quicksum(float(q.tables[j][k, o]) * v for k, v in b.items())
            own = int(q.x_hat[j])
            obj += 0.5 * (q.wu[j] + q.wd[j]) * (q.l0 + q.l1 + q.l2) * gp.quicksum(v for k, v in b.items() if k != own)
            continue
        if q.kind[j] == "fixed":
            for o in range(len(s)):
                s[o] += float(q.coef[o, j] * q.x_hat[j])
            continue
        x = m.addVar(lb=q.lo[j], ub=q.hi[j], vtype=gp.GRB.INTEGER if q.kind[j] == "integer" else gp.GRB.CONTINUOUS)
        up, dn = m.addVar(lb=0.0), m.addVar(lb=0.0)
        m.addConstr(up - dn == x - q.x_hat[j])
        if q.l0 > 0:
            zu, zd = m.addVar(vtype=gp.GRB.BINARY), m.addVar(vtype=gp.GRB.BINARY)
            m.addConstr(up <= (q.hi[j] - q.lo[j]) * zu)
            m.addConstr(dn <= (q.hi[j] - q.lo[j]) * zd)
            obj += q.l0 * (q.wu[j] * zu + q.wd[j] * zd)
        obj += (q.l1 * (q.wu[j] * up + q.wd[j] * dn) / q.span[j]
                + q.l2 * (q.wu[j] * up * up + q.wd[j] * dn * dn) / q.span[j] ** 2)
        for o in range(len(s)):
            s[o] += float(q.coef[o, j]) * x
    for r in range(len(q.rhs)):
        m.addConstr(gp.quicksum(float(q.rows[r, o]) * s[o] for o in range(len(s))) >= float(q.rhs[r]))
    m.setObjective(obj, gp.GRB.MINIMIZE)
    m.optimize()
    assert m.Status == gp.GRB.OPTIMAL, m.Status
    out = float(m.ObjVal)
    env.dispose()
    return out
