"""Benchmark: the smallest L-infinity change that flips a forest, ours against Veritas.

Veritas (Devos, Meert and Davis, "Versatile verification of tree ensembles",
ICML 2021; ``dtai-veritas`` on the package index) answers this, its home
problem, by a bisection on the radius ``delta``: each step asks its best-first
search for the largest output the forest reaches in the box ``x +- delta``,
10 steps from ``start_delta`` 0.3 (a bracket of 3e-4). Ours is one query of
``optimal_counterfactual(..., norm="linf")``: the exact optimum, proven.

Same rows and model on both sides: the features min-max scaled on the training
rows, a RandomForestClassifier(100, depth 5), the first ``--rows`` held-out
rows (20% held out), target = the other class, no schema (every feature free
and unbounded, in scaled units: Veritas's box). Cases: breast cancer (30
features) and Adult (its 11 label-encoded columns, as the library user's
setting of bench/optimal.py). Per row: our cost and time (the default
``auto``, CP-SAT alone and the box search alone, 2 cores), Veritas's bracket
and time; the figures: medians, p95 and maxima, the median of the per-row time
ratio Veritas / ours, and whether our optimum lies in every bracket Veritas
closed. Veritas runs in a process of its own (``--veritas-python``, default
``$VERITAS_PYTHON`` or this interpreter; ``dtai-veritas`` is pinned in
requirements-dev.txt); without it the Veritas side prints "skipped". Prints JSON.

Usage: python bench/veritas_side.py [--rows 10] [--time-limit 60] [--only breast_cancer]
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

import numpy as np

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
        t0 = time.perf_counter()
        rs = Counted(np.asarray(x, dtype=float), START_DELTA, src, tgt, num_steps=STEPS,
                     max_time=job["time_limit"], silent=True)
        delta, lower, upper = rs.search()
        out.append({"lower": float(lower), "upper": float(upper), "time_s": time.perf_counter() - t0,
                    "undecided_steps": int(rs.undecided)})
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


def _ours(ens, model, X_ref, rows, targets, time_limit, backend):
    from core.optimal import optimal_counterfactual

    out = []
    for x, t in zip(rows, targets):
        res = optimal_counterfactual(ens, x, t, norm="linf", backend=backend, time_limit=time_limit, X_ref=X_ref,
                                     model=model)
        out.append({"status": res.status, "cost": float(res.cost) if res.found else None,
                    "time_s": float(res.elapsed), "backend": res.backend})
    return out


def _stats(times) -> dict:
    t = np.asarray(times, dtype=float)
    return {"median_s": round(float(np.median(t)), 3), "p95_s": round(float(np.quantile(t, 0.95)), 3),
            "max_s": round(float(t.max()), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", choices=("breast_cancer", "adult"))
    ap.add_argument("--veritas-python", default=os.environ.get("VERITAS_PYTHON", sys.executable))
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _veritas_worker(*args.worker)
        return
    sys.path.insert(0, str(ROOT))
    from sklearn.ensemble import RandomForestClassifier

    from core.intake.models import from_model

    out: dict = {"problem": "smallest L-infinity change flipping the class (min-max scaled, unbounded)",
                 "model": "RandomForestClassifier(100, max_depth=5, random_state=0)", "cores": 2,
                 "veritas": f"bisection from {START_DELTA}, {STEPS} steps", "load_1min": os.getloadavg()[0],
                 "cases": []}
    for name, Xtr, ytr, rows in _cases(args.rows):
        if args.only and name != args.only:
            continue
        model = RandomForestClassifier(100, max_depth=5, random_state=0, n_jobs=2).fit(Xtr, ytr)
        ens = from_model(model)
        targets = [int(v) for v in 1 - model.predict(rows).astype(int)]
        case: dict = {"data": name, "rows": len(rows), "features": Xtr.shape[1]}
        t0 = time.perf_counter()
        runs = {be: _ours(ens, model, Xtr, rows, targets, args.time_limit, be) for be in ("auto", "cpsat", "boxsearch")}
        for be, rs in runs.items():
            case[f"ours_{be}"] = {**_stats([r["time_s"] for r in rs]),
                                  "proven": f"{sum(r['status'] == 'optimal' for r in rs)}/{len(rs)}"}
        case["ours_auto"]["proved_by"] = {b: sum(r["backend"] == b for r in runs["auto"])
                                          for b in sorted({r["backend"] for r in runs["auto"]})}
        costs = [[r["cost"] for r in rs] for rs in runs.values()]
        case["ours_same_cost_every_backend"] = all(
            (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-9 * max(1, abs(a)))
            for c in costs[1:] for a, b in zip(costs[0], c))
        ver = _veritas(args.veritas_python, model, rows, targets, args.time_limit)
        if ver is None:
            case["veritas"] = "skipped: dtai-veritas is not installed for --veritas-python"
        else:
            case["veritas"] = _stats([v["time_s"] for v in ver])
            ours = runs["auto"]
            # rows where every bisection step was decided and the optimum was below the start radius
            closed = [(o, v) for o, v in zip(ours, ver) if o["cost"] is not None and v["upper"] < START_DELTA
                      and v["undecided_steps"] == 0]
            case["veritas"]["every_step_decided"] = f"{sum(v['undecided_steps'] == 0 for v in ver)}/{len(ver)}"
            # there our exact optimum lies in Veritas's bracket (3e-4 wide)
            case["same_optimum"] = f"{sum(v['lower'] - 1e-6 <= o['cost'] <= v['upper'] + 1e-6 for o, v in closed)}" \
                                   f"/{len(closed)}"
            ratios = [v["time_s"] / max(o["time_s"], 1e-9) for o, v in zip(ours, ver)]
            case["ratio_veritas_over_ours_median"] = round(float(np.median(ratios)), 2)
            case["ratio_of_medians"] = round(case["veritas"]["median_s"] / max(case["ours_auto"]["median_s"], 1e-9), 2)
            case["per_row"] = [{"ours": round(o["cost"], 6) if o["cost"] is not None else None,
                                "ours_s": round(o["time_s"], 3), "veritas": [round(v["lower"], 6), round(v["upper"], 6)],
                                "veritas_s": round(v["time_s"], 3), "veritas_undecided_steps": v["undecided_steps"]}
                               for o, v in zip(ours, ver)]
        case["wall_s"] = round(time.perf_counter() - t0, 1)
        out["cases"].append(case)
        print(json.dumps(case), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
