"""Side by side with ``reachml`` (Kothari, Kulynych & Ustun, "Prediction without preclusion",
ICLR 2024): which rows of a linear model are precluded under the same action set.

The table is synthetic and wholly discrete, so both methods apply: ``sex`` (binary,
immutable), ``age`` (integer, moved only by ``years``: each year employed more is a year
older), ``years`` (integer, increase-only, at most 3 more), education as a thermometer
``ed_hs``, ``ed_ba``, ``ed_ms`` (it may only rise), ``job`` one-hot over three columns,
``cards`` (integer, at most 2 up or down). A LogisticRegression is fitted on it; the first
``--rows`` rows it declines are asked whether any action gives them the favourable class.

* **reachml** enumerates each row's reachable set (its ``ActionSet`` with a
  ``DirectionalLinkage`` years -> age (a target's change is its own action plus the scale
  times the source's; age has no action of its own), a ``ThermometerEncoding`` with
  ``step_direction=1``, a ``OneHotEncoding``, the steps' bounds) and predicts every point
  with the model's weights. It runs in its own environment (``--reachml-python``, or the
  environment variable ``REACHML_PYTHON``: a Python with reachml installed, e.g.
  ``python3 -m venv /tmp/rvenv && /tmp/rvenv/bin/pip install reachml cplex``; reachml's SCIP
  backend imports ``cplex`` when it builds a model), this same file run with ``--worker``, which
  imports neither the project nor scikit-learn: the two exchange JSON files.
* **here**: :func:`core.optimal.verify_recourse` on the same fitted model, the same action set
  written as a schema (ranges, kinds, ``sex`` fixed, ``years`` and education increase-only,
  ``job`` a one-hot group) and constraints between features::

      delta(age) == delta(years)
      delta(years) <= 3
      ed_ba <= ed_hs
      ed_ms <= ed_ba
      delta(cards) <= 2
      delta(cards) >= -2

Printed (JSON): the rows each method finds precluded, whether the two sets are identical
(they must be), the CPU seconds per row of each (reachml's enumeration and prediction; the
recourse check here, without its blocking set) and their ratio. Without a reachml
environment, it says so and exits.

Usage: python bench/reachml_side.py [--rows 100] [--reachml-python /tmp/rvenv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

COLUMNS = ["sex", "age", "years", "ed_hs", "ed_ba", "ed_ms", "job_a", "job_b", "job_c", "cards"]
#: the action set, as reachml reads it: bounds, actionability, direction and the steps' bounds
ACTIONS = {
    "sex": dict(lb=0, ub=1, actionable=False),
    "age": dict(lb=18, ub=75, actionable=False),
    "years": dict(lb=0, ub=45, step_direction=1, step_ub=3),
    "ed_hs": dict(lb=0, ub=1), "ed_ba": dict(lb=0, ub=1), "ed_ms": dict(lb=0, ub=1),
    "job_a": dict(lb=0, ub=1), "job_b": dict(lb=0, ub=1), "job_c": dict(lb=0, ub=1),
    "cards": dict(lb=0, ub=10, step_ub=2, step_lb=-2),
}
LINKS = [dict(kind="linkage", names=["years", "age"], scales=[1, 1]),
         dict(kind="thermometer", names=["ed_hs", "ed_ba", "ed_ms"], step_direction=1),
         dict(kind="onehot", names=["job_a", "job_b", "job_c"])]
#: the same action set in this project's constraint language (the rest is in the schema)
TEXTS = ["delta(age) == delta(years)", "delta(years) <= 3", "ed_ba <= ed_hs", "ed_ms <= ed_ba",
         "delta(cards) <= 2", "delta(cards) >= -2"]


def make_table(n: int = 2000, seed: int = 0):
    """The synthetic table and its labels (module docstring)."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    age = rng.integers(18, 66, n)
    years = np.minimum(age - 18, rng.integers(0, 31, n))
    edu = rng.choice(4, n, p=[0.2, 0.4, 0.3, 0.1])
    job = rng.integers(0, 3, n)
    cards = rng.integers(0, 11, n)
    X = np.column_stack([sex, age, years, edu >= 1, edu >= 2, edu >= 3, job == 0, job == 1, job == 2, cards])
    logit = (-3.2 + 1.4 * sex + 0.04 * (age - 40) + 0.09 * years + 0.8 * edu + 0.5 * (job == 1) + 0.9 * (job == 2)
             - 0.25 * cards + rng.normal(0, 1.0, n))
    return X.astype(float), (logit > 0).astype(int)


# ------------------------------------------------------------------ reachml, in its own environment
def worker(inp: str, out: str) -> None:
    """Run reachml on the rows of ``inp`` (JSON) and write what it found to ``out``."""
    import pandas as pd
    from reachml import ActionSet, ReachableSetEnumerator
    from reachml.constraints import DirectionalLinkage, OneHotEncoding, ThermometerEncoding

    job = json.loads(Path(inp).read_text())
    cols = job["columns"]
    A = ActionSet(pd.DataFrame(job["X"], columns=cols))
    for name, spec in job["actions"].items():
        for key, value in spec.items():
            setattr(A[name], key, value)
    for link in job["links"]:
        if link["kind"] == "linkage":
            A.constraints.add(DirectionalLinkage(names=link["names"], scales=link["scales"]))
        elif link["kind"] == "thermometer":
            A.constraints.add(ThermometerEncoding(names=link["names"], step_direction=link["step_direction"]))
        else:
            A.constraints.add(OneHotEncoding(names=link["names"]))
    w, b = np.asarray(job["coef"], dtype=float), float(job["intercept"])
    precluded, seconds, points = [], [], []
    for x in job["rows"]:
        t0 = time.process_time()
        E = ReachableSetEnumerator(A, np.asarray(x, dtype=float))
        E.enumerate()
        R = E.reachable_points
        reach = bool(np.any(R @ w + b > 0))         # the model's class 1, as LogisticRegression.predict
        seconds.append(time.process_time() - t0)
        precluded.append(not reach)
        points.append(np.asarray(R, dtype=float).tolist())
    Path(out).write_text(json.dumps({"precluded": precluded, "cpu_s": seconds, "points": points}))


def run_reachml(python: str, X: np.ndarray, rows: np.ndarray, coef: np.ndarray, intercept: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
        inp.write_text(json.dumps({"columns": COLUMNS, "X": X.tolist(), "rows": X[rows].tolist(), "actions": ACTIONS,
                                   "links": LINKS, "coef": coef.tolist(), "intercept": intercept}))
        done = subprocess.run([python, str(Path(__file__).resolve()), "--worker", str(inp), str(out)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"reachml's run failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


# ------------------------------------------------------------------ this project
def schema_for():
    from core.schema import FeatureSpec, Schema

    feats = []
    for name in COLUMNS:
        spec = ACTIONS[name]
        if name.startswith("job_"):
            kind, group = "one-hot", "job"
        else:
            kind, group = ("binary" if spec["ub"] - spec["lb"] == 1 else "integer"), None
        if name == "sex":
            act = "fixed"
        elif name == "years" or name.startswith("ed_"):
            act = "increase"
        else:
            act = "free"              # age moves with years alone (a constraint), cards within its steps
        feats.append(FeatureSpec(name, kind, float(spec["lb"]), float(spec["ub"]), act, group=group))
    return Schema(feats)


def run_here(model, X: np.ndarray, rows: np.ndarray, time_limit: float) -> dict:
    import pandas as pd

    from core.optimal import verify_recourse

    schema = schema_for()
    cons = schema.with_constraints(TEXTS).parsed_constraints()
    precluded, seconds, witnesses = [], [], []
    for r in rows:
        t0 = time.process_time()
        chk = verify_recourse(model, X[r], 1, schema=schema, constraints=TEXTS, time_limit=time_limit, explain=False)
        seconds.append(time.process_time() - t0)
        if chk.status == "unknown":
            raise RuntimeError(f"Row {r}: not decided within {time_limit} s.")
        if chk.witness is not None:           # a witness is a point the model and the constraints accept
            point = pd.DataFrame(chk.witness[None, :], columns=COLUMNS)
            assert model.predict(point)[0] == 1 and not cons.violated(X[r], chk.witness), r
        precluded.append(chk.precluded)
        witnesses.append(chk.witness)
    return {"precluded": precluded, "cpu_s": seconds, "witnesses": witnesses}


def allowed_here(schema, x: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Which points of ``R`` the schema (ranges, actionability, the one-hot group) and the
    constraints allow for the row ``x``."""
    arr = schema.arrays()
    cons = schema.with_constraints(TEXTS).parsed_constraints()
    ok = cons.holds(x, R).all(axis=1) & np.all((R >= arr["lower"]) & (R <= arr["upper"]), axis=1)
    for j, f in enumerate(schema.features):
        if f.actionability == "fixed":
            ok &= R[:, j] == x[j]
        elif f.actionability == "increase":
            ok &= R[:, j] >= x[j]
    ok &= R[:, [COLUMNS.index(c) for c in ("job_a", "job_b", "job_c")]].sum(axis=1) == 1
    return ok


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--reachml-python", default=os.environ.get("REACHML_PYTHON"))
    p.add_argument("--worker", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        worker(*a.worker)
        return
    if not a.reachml_python:
        print(json.dumps({"skipped": "no reachml environment: give --reachml-python or REACHML_PYTHON"}))
        return
    sys.path.insert(0, str(ROOT))
    from sklearn.linear_model import LogisticRegression

    X, y = make_table()
    import pandas as pd

    model = LogisticRegression(max_iter=2000).fit(pd.DataFrame(X, columns=COLUMNS), y)
    rows = np.flatnonzero(model.predict(pd.DataFrame(X, columns=COLUMNS)) == 0)[:a.rows]
    theirs = run_reachml(a.reachml_python, X, rows, model.coef_[0], float(model.intercept_[0]))
    ours = run_here(model, X, rows, a.time_limit)
    schema = schema_for()
    # the same action set both ways: every point reachml reaches is allowed here, and every witness found here
    # is one of the points reachml reaches
    outside_here = sum(int((~allowed_here(schema, X[r], np.asarray(R).reshape(-1, X.shape[1]))).sum())
                       for r, R in zip(rows, theirs["points"]))
    outside_reachml = sum(int(not np.any(np.all(np.isclose(np.asarray(R), w), axis=1)))
                          for R, w in zip(theirs["points"], ours["witnesses"]) if w is not None)
    p_theirs = {int(r) for r, v in zip(rows, theirs["precluded"]) if v}
    p_ours = {int(r) for r, v in zip(rows, ours["precluded"]) if v}
    med_t, med_o = float(np.median(theirs["cpu_s"])), float(np.median(ours["cpu_s"]))
    print(json.dumps({
        "model": "LogisticRegression", "rows": int(rows.size), "constraints": TEXTS,
        "reachml_links": [f"{k['kind']}: {', '.join(k['names'])}" for k in LINKS],
        "precluded_reachml": len(p_theirs), "precluded_here": len(p_ours), "identical": p_theirs == p_ours,
        "only_reachml": sorted(p_theirs - p_ours), "only_here": sorted(p_ours - p_theirs),
        "reachml_points_median": float(np.median([len(R) for R in theirs["points"]])),
        "reachml_points_not_allowed_here": outside_here, "witnesses_here_not_reached_by_reachml": outside_reachml,
        "cpu_s_per_row_reachml": {"median": round(med_t, 4), "mean": round(float(np.mean(theirs["cpu_s"])), 4)},
        "cpu_s_per_row_here": {"median": round(med_o, 4), "mean": round(float(np.mean(ours["cpu_s"])), 4)},
        "ratio_here_over_reachml": round(med_o / max(med_t, 1e-9), 3),
    }, indent=2))


if __name__ == "__main__":
    main()
