"""Benchmark: how the whole fairness audit scales with the data and the processes (issue 62).

Adult (../shared/data/adult.csv, one-hot categories) resampled with replacement
(seeded) to ``--sizes`` rows (20,000 and 100,000 by default), a RandomForest(100
trees, depth 5) trained on them, Sex protected: a ``--rows``-row audit (recourse,
T-CREx, local rules, group fairness with the labels, statistics, subgroup scan;
every default of :func:`core.audit.run_audit`) run in a fresh process for each of

* ``1``: one process (the reference of the same size);
* ``2``: two local processes, a first audit (its pool started: cold) and a second
  one on the same, warm workers (the app's second audit);
* ``dask``: a Dask LocalCluster of 2 single-threaded worker processes (started
  before, its start-up timed apart), a first and a second audit.

For each: the wall seconds, the CPU seconds of every process of the run (the calling
one and its workers, ``psutil``), each apart, and ``cpu_critical_s``, the calling
process's plus the busiest worker's (about the wall an idle machine would give: on a
shared one the wall also counts the other users' load), the speed-up (wall of 1 process
/ wall here), the
peak memory of the calling process (its ``VmHWM``) above what it held before the audit
and the peak of each worker, and the audit's stage timings (seconds of work summed over
its tasks). ``memory_per_row_kb``: the growth of the calling process's peak per row of
data from the smallest size to the largest, with one process. The answers must be the
same in every configuration (the Audit's JSON, timings and the process settings left
out): ``same_answers``. Prints JSON; the machine is shared, so ``load_1min`` is given.

    python bench/audit_scale.py [--sizes 20000 100000] [--rows 100]
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
sys.path.insert(0, str(ROOT))

from common import ADULT, adult_with_sex_protected  # noqa: E402

CONFIGS = ("1", "2", "dask")


def _peak_kb(pid: int | str = "self") -> int:
    """A process's peak resident memory (VmHWM), in kB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def _tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of this process and every process below it, by pid."""
    import psutil

    me = psutil.Process()
    out = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            continue
    return out


def _answers(audit) -> str:
    """The audit's JSON without what depends on how or when it ran."""
    d = audit.to_dict()
    d.pop("elapsed", None)
    d.get("params", {}).pop("n_jobs", None)
    d.get("params", {}).pop("scheduler", None)
    meta = d["meta"]
    for k in ("created", "timings", "versions"):
        meta.pop(k, None)
    meta["parameters"].pop("n_jobs", None)
    meta["parameters"].pop("scheduler", None)
    rows = d["rows"]
    k = rows["columns"].index("elapsed")
    for r in rows["data"]:
        r[k] = None
    return json.dumps(d, sort_keys=True, default=str)


def _one_audit(data: dict, config: str, scheduler) -> dict:
    from core.audit import run_audit

    t_cpu, t0 = _tree_cpu(), time.perf_counter()
    a = run_audit(data["ens"], data["X"], schema=data["schema"], target=1, protected=["Sex"], y=data["y"],
                  max_rows=data["rows"], n_jobs=2 if config == "2" else 1, scheduler=scheduler)
    wall = time.perf_counter() - t0
    after = _tree_cpu()
    per = {pid: v - t_cpu.get(pid, 0.0) for pid, v in after.items()}
    others = sorted((v for pid, v in per.items() if pid != os.getpid()), reverse=True)
    return {"wall_s": round(wall, 2), "cpu_s": round(sum(per.values()), 2),
            "cpu_calling_s": round(per[os.getpid()], 2), "cpu_workers_s": [round(v, 2) for v in others if v >= 0.01],
            # on an idle machine the wall would be about the calling process's CPU plus the busiest worker's
            "cpu_critical_s": round(per[os.getpid()] + (others[0] if others else 0.0), 2),
            "timings": a.meta["timings"], "statuses": a.meta["statuses"], "answers": _answers(a)}


def child(path: str, config: str) -> None:
    """One configuration in this fresh process (see the module docstring); prints JSON."""
    with open(path, "rb") as f:
        data = pickle.load(f)
    out: dict = {"config": config}
    base = _rss_kb()
    runs = 1 if config == "1" else 2
    if config == "dask":
        from dask.distributed import LocalCluster

        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        out["dask_start_s"] = round(time.perf_counter() - t0, 2)
        scheduler = cluster.scheduler_address
    else:
        cluster, scheduler = None, None
    out["runs"] = [_one_audit(data, config, scheduler) for _ in range(runs)]
    out["peak_kb_above_start"] = _peak_kb() - base
    import psutil

    out["worker_peaks_kb"] = sorted(_peak_kb(p.pid) for p in psutil.Process().children(recursive=True)
                                    if p.is_running())
    if cluster is not None:
        cluster.close()
    print("RESULT " + json.dumps(out))


def _data(n: int, rows: int) -> dict:
    from sklearn.ensemble import RandomForestClassifier

    from core.intake.models import from_model

    X, y, schema, _ = adult_with_sex_protected()
    idx = np.random.default_rng(0).choice(len(X), n, replace=n > len(X))
    X, y = X.iloc[idx].reset_index(drop=True), y[idx]
    model = RandomForestClassifier(n_estimators=100, max_depth=5, random_state=0, n_jobs=1).fit(X, y)
    return {"X": X, "y": y, "schema": schema, "ens": from_model(model, feature_names=list(X.columns)), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    if not ADULT.exists():
        print(json.dumps({"skipped": f"{ADULT} is absent"}))
        return
    out: dict = {"dataset": "adult, resampled", "model": "RF(100, depth 5)", "audited_rows": a.rows,
                 "load_1min_start": os.getloadavg()[0], "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.sizes:
            path = os.path.join(tmp, f"data{n}.pkl")
            with open(path, "wb") as f:
                pickle.dump(_data(n, a.rows), f)
            res = {}
            for config in a.configs:
                proc = subprocess.run([sys.executable, __file__, "--child", path, config], capture_output=True,
                                      text=True, cwd=ROOT)
                line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
                if not line:
                    raise SystemExit(f"{config} at {n} rows failed:\n{proc.stderr[-3000:]}")
                res[config] = json.loads(line[-1][len("RESULT "):])
            answers = {r["answers"] for c in res.values() for r in c["runs"]}
            for c in res.values():
                for r in c["runs"]:
                    r.pop("answers")
            one = res.get("1", {}).get("runs", [{}])[0].get("wall_s")
            for c in res.values():
                for r in c["runs"]:
                    r["speedup_over_1"] = round(one / r["wall_s"], 2) if one else None
            out["sizes"][n] = {"configs": res, "same_answers": len(answers) == 1}
    if "1" in a.configs and len(a.sizes) >= 2:
        lo, hi = min(a.sizes), max(a.sizes)
        grow = out["sizes"][hi]["configs"]["1"]["peak_kb_above_start"] - \
            out["sizes"][lo]["configs"]["1"]["peak_kb_above_start"]
        out["memory_per_row_kb"] = round(grow / (hi - lo), 3)
    out["load_1min_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
