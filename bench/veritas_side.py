"""Benchmark: the smallest L-infinity change that flips a forest, ours against Veritas.

Veritas (Devos, Meert and Davis, "Versatile verification of tree ensembles",
ICML 2021; ``dtai-veritas`` on the package index) answers this, its home
problem, by a bisection on the radius ``delta``: each step asks its best-first
search for the largest output the forest reaches in the box ``x +- delta``,
10 steps from ``start_delta`` 0.3 (a bracket of 3e-4). Ours is one query of
``optimal_counterfactual(..., norm="linf")``: the exact optimum, proven.

Same rows and model objects on both sides: the features min-max scaled on the
training rows, the first ``--rows`` held-out rows (20% held out), target = the
other class, no schema (every feature free and unbounded, in scaled units:
Veritas's box). Four cases (issue 62): breast cancer (30 features) and Adult
(its 11 label-encoded columns, as the library user's setting of bench/optimal.py),
each with a RandomForestClassifier(100, depth 5) and an XGBClassifier(100, depth 4).
Per row: our cost and CPU seconds (``time.process_time`` of the query, every
thread; the default ``auto``, and with ``--backends`` CP-SAT and the box search
alone), Veritas's bracket and CPU seconds (``time.process_time`` of its search in
its own process), and how many of its bisection steps its search left undecided
(out of time or memory: its bound, not a proof, moved the bracket there). The
cases run one after the other in one run. The figures: medians, p95 and maxima of the CPU seconds, the ratio of the CPU
medians Veritas / ours, the load, and whether our optimum lies in every bracket
Veritas closed with every step decided; the rows where it did not decide a step
are listed. Ours and Veritas take turns, ``--rounds`` times (default 3): ours on every
row, then Veritas on the same rows, and again; the ratio is the median of each round's own
ratio of the medians (a busy spell of the shared machine slows a round's two sides alike,
where one pass each was 1.9 and then 3.2 ms for our same ten queries), and the medians pool
every round. Veritas runs in a process of its own (``--veritas-python``, default
``$VERITAS_PYTHON`` or this interpreter; ``dtai-veritas`` is pinned in
requirements-dev.txt); without it the Veritas side prints "skipped". Prints JSON.

Usage: python bench/veritas_side.py [--rows 10] [--rounds 3] [--time-limit 60] [--only breast_cancer_rf]
       [--backends auto]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# OpenMP's idle threads sleep instead of spinning (as in the tests, tests/conftest.py): the models
# predict one row at a time, and spinning threads would bill both sides for CPU no answer used
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
START_DELTA, STEPS = 0.3, 10


def _veritas_worker(path_in: str, path_out: str) -> None:
    """Runs under the Veritas interpreter: the bisection on each row."""
    import veritas

    class Counted(veritas.VeritasRobustnessSearch):
        """Veritas's own bisection step, also counting the steps its search left
        undecided (out of time or memory: then its bound, not a proof, moved the bracket)."""

        undecided = 0

        def get_max_output_difference(self, delta, max_time):
            s = self.get_search(delta)
            reason = s.step_for(max_time, 100)
            self.undecided += reason in (veritas.StopReason.OUT_OF_TIME, veritas.StopReason.OUT_OF_MEMORY)
            max_output_diff, examples = s.current_bounds().best, []
            if s.num_solutions() > 0:
                best = s.get_solution(0)
                if best.output > 0.0:
                    max_output_diff = best.output
                for i in range(min(s.num_solutions(), self.keep_at_most_generated_examples)):
                    examples.append(veritas.get_closest_example(s.get_solution(i), self.example, self.search_guard))
            return max_output_diff, examples

    with open(path_in, "rb") as fh:
        job = pickle.load(fh)
    at = veritas.get_addtree(job["model"], silent=True)     # sum of leaf probabilities - n_trees / 2
    rows = np.asarray(job["rows"], dtype=float)
    if not np.array_equal(at.eval(rows)[:, 0] > 0, job["model"].predict(rows) == 1):
        raise RuntimeError("Veritas's tree ensemble does not give the forest's classes on the rows.")
    out = []
    for x, t in zip(rows, job["targets"]):
        src, tgt = (None, at) if t == 1 else (at, None)       # reach output >= 0 (class 1) or <= 0
        t0, c0 = time.perf_counter(), time.process_time()
        rs = Counted(np.asarray(x, dtype=float), START_DELTA, src, tgt, num_steps=STEPS,
                     max_time=job["time_limit"], silent=True)
        delta, lower, upper = rs.search()
        out.append({"lower": float(lower), "upper": float(upper), "time_s": time.perf_counter() - t0,
                    "cpu_s": time.process_time() - c0, "undecided_steps": int(rs.undecided)})
    with open(path_out, "w") as fh:
        json.dump(out, fh)


def _veritas(python: str, model, rows, targets, time_limit: float):
    """Veritas's brackets and times, or None when its interpreter is absent."""
    if not python or not Path(python).exists():
        return None
    probe = subprocess.run([python, "-c", "import veritas"], capture_output=True)
    if probe.returncode != 0:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        job, res = Path(tmp) / "job.pkl", Path(tmp) / "out.json"
        with open(job, "wb") as fh:
            pickle.dump({"model": model, "rows": rows, "targets": targets, "time_limit": time_limit}, fh)
        subprocess.run([python, __file__, "--worker", str(job), str(res)], check=True)
        return json.loads(res.read_text())


def _cases(n_rows: int):
    """(name, scaled training rows, labels, the held-out rows asked about) per data set."""
    import pandas as pd
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    b = load_breast_cancer(as_frame=True)
    data = [("breast_cancer", b.data.to_numpy(dtype=float), b.target.to_numpy())]
    adult = next((p / "shared" / "data" / "adult.csv" for p in ROOT.parents
                  if (p / "shared" / "data" / "adult.csv").exists()), ROOT.parent / "shared" / "data" / "adult.csv")
    if adult.exists():
        raw = pd.read_csv(adult, skiprows=[1])
        data.append(("adult", raw.drop(columns="Class").to_numpy(dtype=float),
                     raw["Class"].to_numpy().astype(int)))
    else:
        print(json.dumps({"skipped": f"{adult} is absent"}), file=sys.stderr)
    for name, X, y in data:
        Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=0)
        lo, span = Xtr.min(axis=0), np.maximum(Xtr.max(axis=0) - Xtr.min(axis=0), 1e-12)
        yield name, (Xtr - lo) / span, ytr, ((Xte - lo) / span)[:n_rows]
    del pd


def _model(kind: str, Xtr: np.ndarray, ytr: np.ndarray):
    """The case's model: a random forest (100, depth 5) or XGBoost (100, depth 4)."""
    if kind == "rf":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(100, max_depth=5, random_state=0, n_jobs=2).fit(Xtr, ytr)
    import xgboost as xgb

    return xgb.XGBClassifier(n_estimators=100, max_depth=4, n_jobs=2, random_state=0).fit(Xtr, ytr)


def _ours(ens, model, X_ref, rows, targets, time_limit, backend):
    from core.optimal import optimal_counterfactual

    out = []
    for x, t in zip(rows, targets):
        c0 = time.process_time()
        res = optimal_counterfactual(ens, x, t, norm="linf", backend=backend, time_limit=time_limit, X_ref=X_ref,
                                     model=model)
        out.append({"status": res.status, "cost": float(res.cost) if res.found else None,
                    "time_s": float(res.elapsed), "cpu_s": time.process_time() - c0, "backend": res.backend,
                    "lower_bound": float(res.lower_bound)})
    return out


def _stats(times, unit: str = "s") -> dict:
    t = np.asarray(times, dtype=float)
    return {f"median_{unit}": round(float(np.median(t)), 4), f"p95_{unit}": round(float(np.quantile(t, 0.95)), 4),
            f"max_{unit}": round(float(t.max()), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="ours then Veritas on every row, this many times")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", choices=[f"{d}_{k}" for d in ("breast_cancer", "adult") for k in ("rf", "xgb")])
    ap.add_argument("--backends", default="auto", help="comma-separated: auto, cpsat, boxsearch")
    ap.add_argument("--veritas-python", default=os.environ.get("VERITAS_PYTHON", sys.executable))
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _veritas_worker(*args.worker)
        return
    sys.path.insert(0, str(ROOT))
    from core.intake.models import from_model

    backends = [b for b in args.backends.split(",") if b]
    out: dict = {"problem": "smallest L-infinity change flipping the class (min-max scaled, unbounded)",
                 "models": "RandomForestClassifier(100, max_depth=5), XGBClassifier(100, max_depth=4)", "cores": 2,
                 "veritas": f"bisection from {START_DELTA}, {STEPS} steps", "cpu": "time.process_time per query",
                 "load_1min_start": os.getloadavg()[0], "cases": []}
    for name, Xtr, ytr, rows in _cases(args.rows):
        for kind in ("xgb", "rf"):
            if args.only and f"{name}_{kind}" != args.only:
                continue
            out["cases"].append(_case(name, kind, Xtr, ytr, rows, backends, args, from_model))
            print(json.dumps(out["cases"][-1]), file=sys.stderr, flush=True)
    out["load_1min_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


def _case(name, kind, Xtr, ytr, rows, backends, args, from_model) -> dict:
    """One data set and model: ours (each backend), then Veritas, on the same rows."""
    model = _model(kind, Xtr, ytr)
    ens = from_model(model)
    targets = [int(v) for v in 1 - model.predict(rows).astype(int)]
    case: dict = {"case": f"{name}_{kind}", "rows": len(rows), "features": Xtr.shape[1], "load_1min": os.getloadavg()[0]}
    t0 = time.perf_counter()
    _ours(ens, model, Xtr, rows[:1], targets[:1], args.time_limit, backends[0])      # imports, caches
    rounds = []                       # (ours by backend, Veritas), taking turns on the same rows
    for _ in range(max(1, args.rounds)):
        runs = {be: _ours(ens, model, Xtr, rows, targets, args.time_limit, be) for be in backends}
        rounds.append((runs, _veritas(args.veritas_python, model, rows, targets, args.time_limit)))
    for be in backends:
        every = [r for runs, _ in rounds for r in runs[be]]
        first = rounds[0][0][be]
        case[f"ours_{be}"] = {**_stats([r["cpu_s"] for r in every], "cpu_s"),
                              "proven": f"{sum(r['status'] == 'optimal' for r in first)}/{len(first)}",
                              "proved_by": {b: sum(r["backend"] == b for r in first) for b in sorted({r["backend"] for r in first})}}
    costs = [[r["cost"] for r in rs] for runs, _ in rounds for rs in runs.values()]
    case["ours_same_cost_every_backend"] = all(
        (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-4 * max(1, abs(a)))
        for c in costs[1:] for a, b in zip(costs[0], c))
    ours, ver = rounds[0][0][backends[0]], rounds[0][1]
    if ver is None:
        case["veritas"] = "skipped: dtai-veritas is not installed for --veritas-python"
    else:
        case["veritas"] = _stats([v["cpu_s"] for _, vs in rounds for v in vs], "cpu_s")
        # rows where every bisection step was decided and the optimum was below the start radius
        closed = [(o, v) for o, v in zip(ours, ver) if o["cost"] is not None and v["upper"] < START_DELTA
                  and v["undecided_steps"] == 0]
        case["veritas"]["every_step_decided"] = f"{sum(v['undecided_steps'] == 0 for v in ver)}/{len(ver)}"
        case["veritas"]["rows_with_undecided_steps"] = [i for i, v in enumerate(ver) if v["undecided_steps"]]
        # there our exact optimum (the proven infimum, and the returned point's cost) lies in Veritas's bracket
        case["same_optimum"] = f"{sum(v['lower'] - 1e-6 <= o['lower_bound'] <= v['upper'] + 1e-6 for o, v in closed)}" \
                               f"/{len(closed)}"
        by_round = [float(np.median([v["cpu_s"] for v in vs])) / max(float(np.median([r["cpu_s"] for r in runs[backends[0]]])),
                                                                       1e-9) for runs, vs in rounds]
        case["ratio_veritas_over_ours_cpu_by_round"] = [round(r, 2) for r in by_round]
        case["ratio_veritas_over_ours_cpu_median"] = round(float(np.median(by_round)), 2)
        case["ours_at_or_below_veritas_cpu_median"] = float(np.median(by_round)) >= 1.0
        case["per_row"] = [{"ours": round(o["cost"], 6) if o["cost"] is not None else None,
                            "ours_cpu_s": round(float(np.median([runs[backends[0]][i]["cpu_s"] for runs, _ in rounds])), 4),
                            "veritas": [round(v["lower"], 6), round(v["upper"], 6)],
                            "veritas_cpu_s": round(float(np.median([vs[i]["cpu_s"] for _, vs in rounds])), 4),
                            "veritas_undecided_steps": v["undecided_steps"]}
                           for i, (o, v) in enumerate(zip(ours, ver))]
    case["wall_s"] = round(time.perf_counter() - t0, 1)
    return case


if __name__ == "__main__":
    main()
