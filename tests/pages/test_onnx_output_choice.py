"""An ONNX graph with several candidate outputs on the Data & model page (issue #60 item 2):
the page never guesses; it names the candidates, lets the analyst pick the output to
analyse, and loads the graph run on that output."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import ROOT
from onnx_builders import affine_graph
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")


def test_the_analyst_picks_the_output_of_a_graph_with_several():
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(3, 1)).astype(np.float32), np.array([0.5], dtype=np.float32)
    X = rng.normal(size=(120, 3))
    df = pd.DataFrame(X, columns=["a", "b", "c"]).assign(value=(X.astype(np.float32) @ W + b).ravel())
    graph = affine_graph(["mm", "y", "p"], W, b)
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", df.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value("value").run()
    at.file_uploader(key="dm_model_file").upload("affine.onnx", graph, "application/octet-stream")
    at.run()
    assert not at.exception
    choice = at.selectbox(key="dm_onnx_output")
    assert [o.split(" ")[0] for o in choice.options[1:]] == ["mm", "y", "p"]   # each with its kind
    at.button(key="dm_load").click().run()                  # no choice: refused, every candidate named
    assert not at.exception
    refused = " ".join(e.value for e in at.error)
    assert "could not be loaded" in refused and all(repr(n) in refused for n in ("mm", "y", "p"))
    assert at.session_state["workspace"].name.startswith("Synthetic credit")       # the demo kept
    at.selectbox(key="dm_onnx_output").set_value("y").run()
    at.button(key="dm_load").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("by position" in w.value for w in at.warning)      # the graph names no features: confirm
    at.button(key="dm_confirm_positions").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert ws.name == "data.csv · affine.onnx" and ws.model_kind == "black_box"
    np.testing.assert_allclose(ws.predictions, df["value"].to_numpy(), rtol=1e-5)
