"""Cost of reading uploads in the sandbox (core.intake.sandbox), printed as JSON.

* overhead: wall time of ``load_vetted`` (child process: read, convert,
  verify; then the in-process re-read and probe check) against reading in
  process (``core.intake.io.load_model`` + ``core.intake.models.from_model``), for an
  XGBoost JSON model of 100 trees (and of 500 trees, depth 6: the issue's goal
  is at most 0.3 s added), a LightGBM text model of 100 trees and a
  skops random forest of 100 trees; cold (a fresh child importing its one
  library) and forked (a child forked from the fork server, core.intake.forkserver,
  once it runs), medians, and the CPU a cold child costs (the forked one's
  share is in the fork server's children, not ours: its wall time bounds it);
* rejection: wall time to refuse one hostile file of each class (structural
  edits caught by core.intake.parsing.validate in the child, a crash, a hang at a
  2 s limit, a memory blow-up at a 1.5 GiB limit, 100k-deep JSON);
* bombs: time and peak RSS (the server's growth, and the checking child's) to
  refuse small files that expand: a 150 M-row Parquet file in public mode and
  5 M long strings locally (against the old read-then-cap path in the same
  kind of process), a few KB of UBJ zero-width containers, and a damaged
  XGBoost booster inside a .skops file.

Run: ``python bench/intake_safety.py`` (2 cores shared: figures are indicative).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402


def _files() -> dict[str, bytes]:
    import tempfile

    import lightgbm as lgb
    import skops.io as sio
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 10))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    d = Path(tempfile.mkdtemp(prefix="atlas-bench-"))
    xgb.XGBClassifier(n_estimators=100, max_depth=5, n_jobs=1).fit(X, y).save_model(d / "m.json")
    xgb.XGBClassifier(n_estimators=500, max_depth=6, n_jobs=1).fit(X, y).save_model(d / "m500.json")
    lgb.LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=1).fit(X, y).booster_.save_model(
        d / "m.txt")
    (d / "m.skops").write_bytes(sio.dumps(RandomForestClassifier(100, max_depth=8, random_state=0, n_jobs=1)
                                          .fit(X, y)))
    return {p.name: p.read_bytes() for p in d.iterdir()}


def _time(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    from intake_mutations import valid_files, xgboost_json_edits

    from core.errors import AtlasError
    from core.intake import forkserver, io
    from core.intake.models import from_model
    from core.intake.sandbox import load_vetted

    files = _files()
    overhead = {}
    for name in ("m.json", "m500.json", "m.txt", "m.skops"):
        data = files[name]
        inproc = _time(lambda: from_model(io.load_model(data, name)), 3)
        os.environ["ATLAS_SANDBOX_WARM"] = "0"
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cold = _time(lambda: load_vetted(data, name), 3)
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cold_cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / 3
        os.environ["ATLAS_SANDBOX_WARM"] = "1"
        load_vetted(data, name)                        # starts the fork server (once)
        w = _time(lambda: load_vetted(data, name), 3)
        overhead[name] = {"bytes": len(data), "in_process_s": round(inproc, 3), "sandbox_cold_s": round(cold, 3),
                          "cold_child_cpu_s": round(cold_cpu, 3), "sandbox_forked_s": round(w, 3),
                          "ratio_cold": round(cold / inproc, 1), "ratio_forked": round(w / inproc, 1),
                          "added_forked_s": round(w - inproc, 3), "ratio_cold_to_forked": round(cold / w, 1)}
    small = valid_files()
    base = json.loads(small["m.json"])
    edits = dict(xgboost_json_edits(base, np.random.default_rng(0)))
    hostile = {
        "negative child (segfaults XGBoost unchecked)": ("m.json", edits["negative child"], {}),
        "cycle": ("m.json", edits["cycle to an ancestor"], {}),
        "num_class 1e8": ("m.json", edits["huge num_class"], {}),
        "infinite threshold": ("m.json", edits["infinite threshold"], {}),
        "JSON nested 100k deep": ("m.json", edits["deep nesting"], {}),
        "LightGBM num_leaves 1e8": ("m.txt", small["m.txt"].replace(b"num_leaves=", b"num_leaves=10000000", 1), {}),
        "truncated UBJ": ("m.ubj", small["m.ubj"][: len(small["m.ubj"]) // 2], {}),
        "crash in the library (SIGSEGV)": ("m.json", small["m.json"], {"_hook": "segfault"}),
        "hang (2 s limit)": ("m.json", small["m.json"], {"_hook": "hang", "time_limit": 2}),
        "memory blow-up (1.5 GiB limit)": ("m.json", small["m.json"], {"_hook": "memory", "memory_mb": 1536}),
    }
    os.environ["ATLAS_SANDBOX_WARM"] = "0"            # each refusal timed with a cold child (worst case)
    reject = {}
    for what, (fname, data, kw) in hostile.items():
        t0 = time.perf_counter()
        try:
            load_vetted(data, fname, **kw)
            verdict = "accepted"
        except AtlasError as exc:
            verdict = type(exc).__name__
        reject[what] = {"seconds": round(time.perf_counter() - t0, 3), "result": verdict}
    forkserver.stop()
    print(json.dumps({"overhead": overhead, "reject_cold_child": reject, "bombs": bombs(),
                      "cpu_count": os.cpu_count(), "load_avg": os.getloadavg()[0]}, indent=2))


_MEASURE = """
import json, resource, sys, time
sys.path[:0] = [{root!r}, {tests!r}]
import pyarrow, pyarrow.parquet, pandas, numpy
from core.errors import AtlasError
from dashboard.deploy import Deployment
from dashboard.loaders import read_table
from core.intake.sandbox import load_vetted
data = open({path!r}, "rb").read()
public = Deployment(public=True, max_upload_mb=50, max_rows=200_000, scheduler=None, max_table_mb=512)
local = Deployment(public=False, max_upload_mb=200, max_rows=None, scheduler=None, max_table_mb=2048)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
try:
    {call}
    result = "read"
except AtlasError as exc:
    result = "refused: " + str(exc)[:90]
seconds = time.perf_counter() - t0
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({{"seconds": round(seconds, 3), "server_rss_growth_mb": round((me - before) / 1024, 1),
                  "child_peak_rss_mb": round(kids / 1024, 1), "result": result}}))
"""


def _measured(path: str, call: str) -> dict:
    """``call`` on the bytes of ``path`` in a fresh process: its time, RSS growth and result."""
    import subprocess

    code = _MEASURE.format(root=str(ROOT), tests=str(ROOT / "tests"), path=path, call=call)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        return {"failed": out.stderr.strip().splitlines()[-1][:200] if out.stderr.strip() else out.returncode}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bombs() -> dict:
    """Time and peak memory to refuse small files that expand: a 150 M-row Parquet file
    (public mode), 5 M copies of a 700-character string (local mode), a UBJ file of
    zero-width containers and an XGBoost booster in a .skops file with a negative
    child. Each is measured in a fresh process; the reference is the old way of reading
    the table (pandas.read_parquet, then the row cap), in the same kind of process."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    from intake_mutations import embedded_booster_edits, embedded_booster_files

    d = Path(tempfile.mkdtemp(prefix="atlas-bombs-"))
    ints = pa.chunked_array([pa.array(np.full(1_000_000, 7, dtype=np.int64))] * 150)
    pq.write_table(pa.table({"x": ints, "y": ints}), d / "rows.parquet", compression="zstd",
                   row_group_size=50_000_000)
    text = pa.chunked_array([pa.array(["z" * 700] * 1_000_000)] * 5)
    pq.write_table(pa.table({"s": text}), d / "strings.parquet", compression="zstd", row_group_size=5_000_000)
    ubj = b"[" + (b"[$Z#L" + (10**7).to_bytes(8, "big")) * 200 + b"]"
    (d / "bomb.ubj").write_bytes(ubj)
    skops = embedded_booster_files(12)["xgb.skops"]
    mutant = dict(embedded_booster_edits(skops, np.random.default_rng(0)))["embedded xgboost negative child"]
    (d / "mutant.skops").write_bytes(mutant)
    old = ("df = pandas.read_parquet(__import__('io').BytesIO(data)); "
           "(_ for _ in ()).throw(AtlasError('over the row cap')) if len(df) > {cap} else None")
    out = {}
    for name, file, dep, cap in (("parquet 150 M rows, public", "rows.parquet", "public", 200_000),
                                 ("parquet 5 M x 700-char strings, local", "strings.parquet", "local", None)):
        path = str(d / file)
        out[name] = {"bytes": (d / file).stat().st_size,
                     "now": _measured(path, f"read_table(data, 'upload.parquet', {dep})"),
                     "reference_read_then_cap": _measured(path, old.format(cap=cap or 10**12))}
        now, ref = out[name]["now"], out[name]["reference_read_then_cap"]
        if "server_rss_growth_mb" in now and "server_rss_growth_mb" in ref:
            out[name]["rss_growth_ratio_now_to_reference"] = round(
                max(now["server_rss_growth_mb"], 0.1) / max(ref["server_rss_growth_mb"], 0.1), 4)
    out["ubj 200 zero-width containers of 10^7"] = {"bytes": len(ubj), "now": _measured(
        str(d / "bomb.ubj"), "load_vetted(data, 'bomb.ubj')")}
    out["skops XGBoost booster, negative child"] = {"bytes": len(mutant), "now": _measured(
        str(d / "mutant.skops"), "load_vetted(data, 'mutant.skops')")}
    return out


if __name__ == "__main__":
    main()
