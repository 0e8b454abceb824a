"""core.load_model reads a model file as a file from elsewhere must be read: in a sandboxed
child process first, within its time and memory limits; a model it does not read exactly
(an ONNX graph that is not a tree ensemble) runs in a sandboxed worker; reading the file in
the caller's own process is an explicit choice (``in_process=True``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import skops.io as sio
from sklearn.ensemble import RandomForestClassifier
from sklearn.neural_network import MLPClassifier

import core
from core.errors import ModelError, UnsupportedModelError
from core.intake import sandbox
from core.intake.door import load_model
from core.intake.models import from_model
from core.model.blackbox import BlackBoxModel


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 4))
    return X, ((X[:, 0] * X[:, 1] > 0) ^ (X[:, 2] > 1)).astype(int)


def test_core_load_model_reads_a_file_in_the_sandbox_unless_told_otherwise(monkeypatch):
    assert core.load_model is load_model
    X, y = _data()
    rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y)
    data = sio.dumps(rf)
    calls = []
    vetted = sandbox.load_vetted
    monkeypatch.setattr(sandbox, "load_vetted", lambda *a, **k: calls.append(a[1]) or vetted(*a, **k))
    model = core.load_model(data, "forest.skops")
    assert calls == ["forest.skops"] and type(model).__name__ == "RandomForestClassifier"
    assert np.array_equal(model.predict(X), rf.predict(X))
    here = load_model(data, "forest.skops", in_process=True)     # the explicit choice: no child
    assert calls == ["forest.skops"] and np.array_equal(here.predict(X), rf.predict(X))
    # the sandbox's limits hold by default: a reading past its time is stopped there, with a message
    monkeypatch.setenv("ATLAS_SANDBOX_SECONDS", "0.001")
    with pytest.raises(ModelError, match="'forest.skops' took longer than"):
        load_model(data, "forest.skops")
    assert np.array_equal(load_model(data, "forest.skops", in_process=True).predict(X), rf.predict(X))


def test_an_onnx_graph_that_is_not_a_tree_ensemble_runs_in_a_worker_as_its_refusal_says():
    from skl2onnx import to_onnx

    X, y = _data(1)
    X = X.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPClassifier((8,), max_iter=300, random_state=0).fit(X, y)
    data = to_onnx(mlp, X[:1]).SerializeToString()
    here = load_model(data, "mlp.onnx", in_process=True)
    with pytest.raises(UnsupportedModelError, match="analysed as any other model instead: run in a sandboxed worker"):
        from_model(here)
    model = load_model(data, "mlp.onnx")          # and so it is
    assert isinstance(model, BlackBoxModel) and model.source == "onnx" and model.has_proba
    assert np.array_equal(model.predict(X), mlp.predict(X))
    np.testing.assert_allclose(model.predict_proba(X), mlp.predict_proba(X), atol=1e-5)


def test_a_file_whose_name_says_another_format_is_told_to_be_renamed_not_damaged():
    """A model file is read by its extension: a .skops archive named .json, an XGBoost JSON named
    .txt, a LightGBM text named .json, a .skops archive named .pkl are intact, and the message says what they hold and the name
    to give them (before: "is damaged … Re-save the model"); a damaged file of the kind its name
    says is still called damaged, in this process and through the sandbox."""
    import lightgbm as lgb
    import xgboost as xgb

    from core.intake import io

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    files = {"skops": (sio.dumps(RandomForestClassifier(3, max_depth=2, random_state=0).fit(X, y)), "m.json"),
             "xgboost": (bytes(xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, y).get_booster()
                               .save_raw("json")), "m.txt"),
             "lightgbm": (lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y).booster_.model_to_string()
                          .encode(), "m.json")}
    cases = [(kind, data, name) for kind, (data, name) in files.items()]
    cases.append(("skops", files["skops"][0], "m.pkl"))      # a zip named .pkl: not a pickle to trust or refuse
    for kind, data, name in cases:
        ends = {"skops": ".skops", "xgboost": ".json", "lightgbm": ".txt"}[kind]
        for read in (lambda: io.load_model(data, name), lambda: load_model(data, name)):
            with pytest.raises(ModelError, match=rf"not what its name says.*its name ends in \{ends} and"):
                read()
        assert from_model(io.load_model(data, "m" + ends)) is not None           # renamed, it is read
    damaged = files["xgboost"][0][: len(files["xgboost"][0]) // 2]
    with pytest.raises(ModelError) as e:
        io.load_model(damaged, "m.json")
    assert "Rename" not in str(e.value) and "damaged" in str(e.value)
