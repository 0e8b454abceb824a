"""The Data & model page (the real script, AppTest) on ONNX uploads: a hostile file is
explained and the loaded workspace kept; an exported tree ensemble taking one float
tensor loads once its positional mapping is confirmed, read exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

pytest.importorskip("onnxmltools")


def _files():
    import xgboost as xgb
    from onnxmltools.convert import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=200), "b": rng.integers(0, 4, 200).astype(float)})
    df["label"] = (df.a + df.b > 1.5).astype(int)
    m = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(df[["a", "b"]].to_numpy(), df["label"])
    onnx_bytes = convert_xgboost(m, initial_types=[("input", FloatTensorType([None, 2]))]).SerializeToString()
    return df, m, onnx_bytes


def _upload(at, df, name, data):
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", df.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value("label").run()
    at.file_uploader(key="dm_model_file").upload(name, data, "application/octet-stream")
    at.run()
    at.button(key="dm_load").click().run()


def test_onnx_uploads_on_the_data_model_page():
    df, lib, onnx_bytes = _files()
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    at.run()
    before = at.session_state["workspace"]
    _upload(at, df, "model.onnx", onnx_bytes[: len(onnx_bytes) // 2])          # truncated
    assert not at.exception
    assert any("not a readable ONNX model" in e.value for e in at.error), [e.value for e in at.error]
    assert at.session_state["workspace"] is before
    _upload(at, df, "model.onnx", onnx_bytes)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["workspace"] is before                             # waits for the mapping
    at.button(key="dm_confirm_positions").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert ws is not before and ws.ensemble.source.startswith("onnx.TreeEnsembleClassifier")
    assert np.array_equal(ws.predictions, lib.predict(df[["a", "b"]].to_numpy()))
