"""Benchmark: FCCA on a model that is not a tree ensemble, at the FCCA page's settings.

The model is the MLP pipeline of ``bench/any_model.py`` (two hidden layers of 100 units,
scaled numbers, one-hot categories) trained on Adult (``../shared/data/adult.csv``; the
carried sample without it), saved with skops and run in its sandboxed worker, as an upload
is. FCCA runs on the workspace's surrogate, every counterfactual checked on the MLP.

The page's settings: at most 1,000 rows of M, 10 s per counterfactual, p0 = 0.5, p1 = 1,
lambda0 = 0.1, lambda1 = 1. Measured in the same run, in this process (one process for the
counterfactuals, so that its CPU seconds are all of them):

* reference: no run time limit (what the page ran before it stated one): every row solved;
* ours: the page's default run time limit (:data:`pages.fcca.RUN_LIMIT`, 120 s).

Per run: wall and CPU seconds, rows reached, counterfactuals, thresholds, the share of
counterfactuals the MLP itself accepts; the ratio of CPU seconds (ours / reference).
Goal: ours ends within its limit (wall <= limit + 5 s). Prints JSON.

    .venv/bin/python bench/fcca_black_box.py [--max-points 1000] [--limit 120]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _run(ws, model, limit: float | None, max_points: int) -> dict:
    from core.compression import fcca

    c0, t0 = _cpu(), time.perf_counter()
    res = fcca(ws.ensemble, ws.X.to_numpy(float), ws.y.to_numpy(), schema=ws.schema, p0=0.5, p1=1.0, lambda0=0.1,
               lambda1=1.0, lambda2=0.0, max_points=max_points, time_limit=10.0, n_jobs=1, model=model,
               surrogate=ws.surrogate, run_time_limit=limit)
    return {"run_time_limit": limit, "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(_cpu() - c0, 2),
            "statuses": res.statuses, "counterfactuals": int(len(res.rows)), "thresholds": int(len(res.thresholds)),
            "accepted_by_model": round(float(res.valid_on_model.mean()), 3),
            "guarantee": res.guarantee.kind, "model_kind": res.guarantee.model_kind}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-points", type=int, default=1000)
    ap.add_argument("--limit", type=float, default=None, help="default: the page's RUN_LIMIT")
    args = ap.parse_args()

    import skops.io as sio
    from any_model import ADULT, _adult, _mlp

    from core.intake.worker import ModelWorker
    from core.intake.workspace import build_workspace
    from core.rules.onmodel import on_model

    limit = args.limit
    if limit is None:
        import ast
        tree = ast.parse((ROOT / "pages" / "fcca.py").read_text())     # the page runs on import: read its constant
        limit = next(float(ast.literal_eval(n.value)) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                     and any(getattr(t, "id", "") == "RUN_LIMIT" for t in n.targets))
    df, target, cats = _adult()
    pipe = _mlp(df, target, cats)
    worker = ModelWorker(sio.dumps(pipe), "mlp.skops")
    try:
        ws = build_workspace(df, target, worker.model("bench"), name="adult-mlp")
        solve_on, extra = ws.query_model()
        model = on_model(solve_on, **extra)
        reference = _run(ws, model, None, args.max_points)
        ours = _run(ws, model, limit, args.max_points)
    finally:
        worker.stop()
    print(json.dumps({"data": ADULT.name if ADULT.exists() else "adult_sample.csv", "rows": len(df),
                      "surrogate_fidelity": ws.surrogate.fidelity, "reference": reference, "ours": ours,
                      "cpu_ratio": round(ours["cpu_s"] / reference["cpu_s"], 3),
                      "within_limit": ours["wall_s"] <= limit + 5.0}, indent=2))


if __name__ == "__main__":
    main()
