"""Benchmark: ONNX tree-ensemble intake (issue 62, item 2).

Prints JSON. Three 500-tree classifiers on 20 features exported to ONNX as a data
scientist would: XGBoost (depth 6) and LightGBM (31 leaves) by onnxmltools, a
scikit-learn random forest (depth 8) by skl2onnx. For each, in CPU seconds of this
process (``time.process_time``: every thread; the machines are shared, so the
fastest of a few runs):

* ``floor_cpu_s``: what any reader of the file pays, ``onnx.load`` of its bytes plus an
  onnxruntime ``InferenceSession`` on them (one thread, as the project's runner opens it);
* ``onnx_intake_cpu_s``: the whole in-process reading of the ``.onnx`` file as a script
  reads it, ``from_model(load_model(...))``: the checks without running it, the session
  and its first run, the reading of the trees, the verification against onnxruntime;
  ``ratio_to_floor`` is the measure, goal <= 3 (``goal_ratio_le_3``): the floor and the
  reading timed in turn, run after run, the median of each run's own ratio (the load moves
  both of a pair alike; ``ratio_of_fewest``: the fewest seconds of each, divided);
* ``app_path_cpu_s``: the work of the app's sandboxed reading, both processes' share
  run here one after the other: the child's (the reading above, its probe outputs,
  the arrays it sends) and the server's (the ensemble made again of those arrays, the
  file read again, its outputs on the probe points compared);
* ``onnx_parse_only_cpu_s``: the reading of the trees alone (no verification);
* ``native_intake_cpu_s``: the same model read from its own library's file (XGBoost
  JSON, LightGBM text, scikit-learn ``.skops``) with its verification, for scale;
* ``probe_rows``: the rows the verification runs the graph and the ensemble on, of which
  ``covering_rows`` reach the leaves the random and threshold rows miss
  (:func:`core.intake.parsing.covered_probe_points`; ``leaves_missed_by_random_rows`` of
  ``leaves``); ``probe_leaves_unreached``: the leaves no probe row reaches (goal 0; a misread
  confined to one of them would pass the verification), ``dead_leaves`` the leaves no row
  can reach;
* ``onnx_sandboxed_wall_s``: one sandboxed reading (``load_vetted``: a child process
  reads, converts and verifies it, the server reads it again), wall seconds.
"""

from __future__ import annotations

import io
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
RUNS = 10


def _cpu(fn, runs=RUNS):
    """The fewest CPU seconds of ``runs`` calls of ``fn``."""
    out = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return min(out)


def _paired(fn, ref, runs=RUNS):
    """(fewest CPU seconds of ``fn``, of ``ref``, median of their ratio run by run), the two
    timed in turn in each of ``runs`` runs."""
    mine, theirs = [], []
    for _ in range(runs):
        for fun, out in ((ref, theirs), (fn, mine)):
            t0 = time.process_time()
            fun()
            out.append(time.process_time() - t0)
    return min(mine), min(theirs), float(np.median(np.divide(mine, theirs)))


def _models():
    import lightgbm as lgb
    import skops.io as sio
    import xgboost as xgb
    from onnxmltools.convert import convert_lightgbm, convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType as SkFloatTensorType
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 20)).astype(np.float32)
    y = ((X[:, 0] + X[:, 1] * X[:, 2] + np.sin(3 * X[:, 3])) > 0).astype(int)
    types = [("input", FloatTensorType([None, 20]))]
    xm = xgb.XGBClassifier(n_estimators=500, max_depth=6, n_jobs=1).fit(X, y)
    lm = lgb.LGBMClassifier(n_estimators=500, num_leaves=31, verbose=-1, n_jobs=1).fit(X, y)
    rf = RandomForestClassifier(n_estimators=500, max_depth=8, n_jobs=1, random_state=0).fit(X, y)
    rf_onnx = convert_sklearn(rf, initial_types=[("input", SkFloatTensorType([None, 20]))],
                              options={id(rf): {"zipmap": False}})
    return {"xgboost": (bytes(xm.get_booster().save_raw("json")), "model.json",
                        convert_xgboost(xm, initial_types=types).SerializeToString()),
            "lightgbm": (lm.booster_.model_to_string().encode(), "model.txt",
                         convert_lightgbm(lm, initial_types=types, zipmap=False).SerializeToString()),
            "random_forest": (sio.dumps(rf), "model.skops", rf_onnx.SerializeToString())}


def _floor(data: bytes) -> None:
    import onnx
    import onnxruntime as ort

    onnx.load_from_string(data)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    ort.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])


def _app_path(data: bytes) -> None:
    """Both processes' work of ``core.intake.sandbox.load_vetted``, here one after the other."""
    from core.intake.io import load_model
    from core.intake.models import model_from
    from core.intake.parsing import probe_points
    from core.intake.sandbox import same_reading
    from core.model import TreeEnsemble
    from core.model.native import native_outputs

    model = load_model(data, "model.onnx")                   # the child: read, convert, verify
    ens = model_from(model)
    X = probe_points(ens, 16, seed=1)
    _, theirs, _ = native_outputs(ens, model, X)
    arrays, meta = ens.to_arrays()
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays, probe_X=X, probe_out=np.asarray(theirs, dtype=np.float64))
    with np.load(io.BytesIO(buf.getvalue()), allow_pickle=False) as z:    # the server: made again, checked
        got = dict(z)
    probe_X, probe_out = got.pop("probe_X"), got.pop("probe_out")
    again = TreeEnsemble.from_arrays(got, meta)
    if not same_reading(again, load_model(data, "model.onnx"), probe_X, probe_out):
        raise AssertionError("the server read the model otherwise")


def _coverage(ens) -> dict:
    """What the verification's probe rows reach of the ensemble's leaves."""
    from core.intake.parsing import covered_probe_points, probe_points
    from core.model.cover import reached_leaves

    leaf = ens._flat["packed"]["feature"] == -1

    def unreached(X):
        return int((leaf & (reached_leaves(ens, X)[1] == 0)).sum())

    X, _, cover = covered_probe_points(ens)
    return {"leaves": int(leaf.sum()), "probe_rows": len(X), "covering_rows": cover.rows,
            "leaves_missed_by_random_rows": unreached(probe_points(ens)), "probe_leaves_unreached": unreached(X),
            "dead_leaves": cover.dead}


def main() -> None:
    from core.intake.io import load_model
    from core.intake.models import from_model
    from core.intake.parsing import parse
    from core.intake.sandbox import load_vetted

    out: dict = {"trees": 500, "time": "CPU seconds (process_time), fewest of %d runs; the ratio "
                                         "to the floor: median of %d paired runs" % (RUNS, 2 * RUNS)}
    for name, (native, native_name, onnx_bytes) in _models().items():
        ens = from_model(load_model(onnx_bytes, "model.onnx"))
        model = load_model(onnx_bytes, "model.onnx")
        onnx_s, floor, ratio = _paired(lambda: from_model(load_model(onnx_bytes, "model.onnx")),
                                       lambda: _floor(onnx_bytes), runs=2 * RUNS)
        app_s = _cpu(lambda: _app_path(onnx_bytes))
        parse_s = _cpu(lambda: parse(model))
        native_s = _cpu(lambda: from_model(load_model(native, native_name)), runs=3)
        t0 = time.perf_counter()
        load_vetted(onnx_bytes, "model.onnx")
        sandbox_s = time.perf_counter() - t0
        out[name] = {"onnx_bytes": len(onnx_bytes), "nodes": int(sum(t.n_nodes for t in ens.trees)),
                     **_coverage(ens),
                     "floor_cpu_s": round(floor, 4), "onnx_intake_cpu_s": round(onnx_s, 4),
                     "ratio_to_floor": round(ratio, 2), "ratio_of_fewest": round(onnx_s / floor, 2),
                     "goal_ratio_le_3": ratio <= 3,
                     "app_path_cpu_s": round(app_s, 4), "app_path_ratio_to_floor": round(app_s / floor, 2),
                     "onnx_parse_only_cpu_s": round(parse_s, 4), "native_intake_cpu_s": round(native_s, 4),
                     "onnx_sandboxed_wall_s": round(sandbox_s, 3)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
