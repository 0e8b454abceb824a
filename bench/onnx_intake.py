"""Benchmark: ONNX tree-ensemble intake.

Prints JSON. A 500-tree XGBoost classifier (depth 6, 20 features) and a 500-tree
LightGBM classifier (31 leaves), each exported to ONNX by onnxmltools; for each the
whole in-process reading of the ``.onnx`` file (checks, onnxruntime session, first run,
parse, verification against onnxruntime's scores and labels on the probe points)
against the reading of the same model from its own file (XGBoost JSON, LightGBM text:
load, parse, verify against the library) in the same process, best of 3 (the machines
are shared and noisy). Goal: ONNX tree intake of 500 trees <= 1 s. Also the parse
alone (no verification) and the sandboxed reading of the ``.onnx`` file (a child
process reads, converts and verifies it; the server reads it again).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

warnings.filterwarnings("ignore")


def _best(fn, runs=3):
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def _models():
    import lightgbm as lgb
    import xgboost as xgb
    from onnxmltools.convert import convert_lightgbm, convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 20)).astype(np.float32)
    y = ((X[:, 0] + X[:, 1] * X[:, 2] + np.sin(3 * X[:, 3])) > 0).astype(int)
    types = [("input", FloatTensorType([None, 20]))]
    xm = xgb.XGBClassifier(n_estimators=500, max_depth=6, n_jobs=1).fit(X, y)
    lm = lgb.LGBMClassifier(n_estimators=500, num_leaves=31, verbose=-1, n_jobs=1).fit(X, y)
    return {"xgboost": (bytes(xm.get_booster().save_raw("json")), "model.json",
                        convert_xgboost(xm, initial_types=types).SerializeToString()),
            "lightgbm": (lm.booster_.model_to_string().encode(), "model.txt",
                         convert_lightgbm(lm, initial_types=types, zipmap=False).SerializeToString())}


def main() -> None:
    from core.intake.io import load_model
    from core.intake.models import from_model
    from core.intake.parsing import parse
    from core.intake.sandbox import load_vetted

    out: dict = {"trees": 500}
    for name, (native, native_name, onnx_bytes) in _models().items():
        ens = from_model(load_model(onnx_bytes, "model.onnx"))
        model = load_model(onnx_bytes, "model.onnx")
        onnx_s = _best(lambda: from_model(load_model(onnx_bytes, "model.onnx")))
        native_s = _best(lambda: from_model(load_model(native, native_name)))
        parse_s = _best(lambda: parse(model))
        t0 = time.perf_counter()
        load_vetted(onnx_bytes, "model.onnx")
        sandbox_s = time.perf_counter() - t0
        out[name] = {"onnx_bytes": len(onnx_bytes), "nodes": int(sum(t.n_nodes for t in ens.trees)),
                     "onnx_intake_s": round(onnx_s, 3), "native_intake_s": round(native_s, 3),
                     "ratio_onnx_to_native": round(onnx_s / native_s, 2), "onnx_parse_only_s": round(parse_s, 3),
                     "onnx_sandboxed_s": round(sandbox_s, 3), "goal_onnx_intake_le_1s": onnx_s <= 1.0}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
