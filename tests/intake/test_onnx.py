"""ONNX tree ensembles exported by skl2onnx and onnxmltools, read exactly: the ensemble
predicts what onnxruntime predicts (on data rows and on rows exactly at the thresholds),
its optimal counterfactual costs what the original library's model (read by the existing
parsers) gives, and every counterfactual fed to onnxruntime gets its target."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from core.intake.io import load_model
from core.intake.models import from_model
from core.intake.parsing import probe_points
from core.intake.workspace import build_workspace
from core.model.native import model_input
from core.optimal import optimal_counterfactual

pytest.importorskip("skl2onnx")
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)

D = 5


def _data(seed=0, n=500):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)).astype(np.float32)
    X[:, 3] = np.round(X[:, 3] * 3)                    # a few repeated values: thresholds between them
    y2 = (X[:, 0] + X[:, 1] > 0).astype(int)
    y3 = (X[:, 0] > 0).astype(int) + (X[:, 2] > 0.5)
    yr = X[:, 0] * 2 + np.sin(X[:, 1])
    return X, y2, y3, yr


def _skl(m, X):
    from skl2onnx import to_onnx

    return to_onnx(m, X[:1]).SerializeToString()


def _mltools(m, kind):
    from onnxmltools.convert import convert_lightgbm, convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    conv = convert_xgboost if kind == "xgb" else convert_lightgbm
    return conv(m, initial_types=[("input", FloatTensorType([None, D]))]).SerializeToString()


def _make(case):
    """(library model, ONNX bytes, X, y) of one case."""
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn import ensemble as E
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    X, y2, y3, yr = _data()
    family, task = case.rsplit("-", 1)
    y = {"binary": y2, "multi": y3, "regression": yr}[task]
    reg = task == "regression"
    if family == "hgb-nan":
        X = X.copy()
        X[::6, 1] = np.nan
    sk = {"rf": (E.RandomForestRegressor if reg else E.RandomForestClassifier)(12, max_depth=5, random_state=0),
          "et": (E.ExtraTreesRegressor if reg else E.ExtraTreesClassifier)(12, max_depth=5, random_state=0),
          "gb": (E.GradientBoostingRegressor if reg else E.GradientBoostingClassifier)(n_estimators=12, max_depth=3,
                                                                                       random_state=0),
          "hgb": (E.HistGradientBoostingRegressor if reg else E.HistGradientBoostingClassifier)(max_iter=12),
          "hgb-nan": (E.HistGradientBoostingRegressor if reg else E.HistGradientBoostingClassifier)(max_iter=12),
          "dt": (DecisionTreeRegressor if reg else DecisionTreeClassifier)(max_depth=6, random_state=0)}
    if family in sk:
        m = sk[family].fit(X, y)
        return m, _skl(m, X), X, y
    if family == "xgb":
        m = (xgb.XGBRegressor if reg else xgb.XGBClassifier)(n_estimators=12, max_depth=3, n_jobs=1).fit(X, y)
        return m, _mltools(m, "xgb"), X, y
    m = (lgb.LGBMRegressor if reg else lgb.LGBMClassifier)(n_estimators=12, num_leaves=8, verbose=-1,
                                                           n_jobs=1).fit(X, y)
    return m, _mltools(m, "lgb"), X, y


CASES = [f"{f}-{t}" for f in ("rf", "et", "gb", "hgb", "dt", "xgb", "lgb") for t in ("binary", "multi", "regression")]
CASES += ["hgb-nan-binary", "hgb-nan-regression"]


def _clear(ens, X, rel=1e-5):
    """Rows whose label no float32 rounding can change (away from ties of the scores)."""
    raw = ens.predict_raw(X)
    if ens.link == "sigmoid":
        margin = np.abs(raw[:, 0])
    elif ens.link == "identity" and raw.shape[1] == 2:
        margin = np.abs(raw[:, 1] - raw[:, 0])
    else:
        top = np.sort(raw, axis=1)
        margin = top[:, -1] - top[:, -2]
    return margin > rel * np.maximum(1.0, np.abs(raw).max(axis=1))


@pytest.mark.parametrize("case", CASES)
def test_onnx_trees_predict_what_onnxruntime_predicts(case):
    _, data, X, _ = _make(case)
    model = load_model(data, f"{case}.onnx")
    ens = from_model(model)                      # verified against onnxruntime on probe points
    assert ens.source.startswith("onnx.TreeEnsemble")
    assert ens.feature_names == tuple(f"f{k}" for k in range(D)) and ens.meta["input"] == "array"
    rows = np.vstack([X.astype(np.float64), probe_points(ens, 200, seed=3)])
    theirs = model.predict(model_input(ens, rows))
    if ens.is_classifier:
        clear = _clear(ens, rows)
        assert clear.mean() > 0.97
        assert np.array_equal(ens.predict(rows)[clear], theirs[clear])
    else:
        np.testing.assert_allclose(ens.predict(rows), theirs, rtol=2e-5, atol=2e-5 * np.abs(theirs).max())
    # exactly at the thresholds and one float64 step above them: each side as onnxruntime routes it
    j = int(np.argmax(ens.split_counts()))
    t = ens.split_levels(j)[:40]
    at = np.repeat(np.median(X, axis=0)[None, :].astype(np.float64), 2 * len(t), axis=0)
    at[:, j] = np.concatenate([t, np.nextafter(t, np.inf)])
    _, scores = model.run(model_input(ens, at))
    ours = ens.predict_raw(at) if ens.meta["onnx"]["scores"] == "raw" else (
        ens.predict_proba(at) if ens.is_classifier else ens.predict(at)[:, None])
    np.testing.assert_allclose(ours, scores, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(scores).max()))


def _cost_cases():
    return ["rf-binary", "gb-binary", "hgb-multi", "dt-binary", "xgb-binary", "xgb-multi", "lgb-binary",
            "rf-regression", "xgb-regression"]


@pytest.mark.parametrize("case", _cost_cases())
def test_optimal_costs_equal_the_library_models_and_hold_on_onnxruntime(case):
    lib, data, X, y = _make(case)
    model = load_model(data, f"{case}.onnx")
    ens = from_model(model)
    ref = from_model(lib, feature_names=ens.feature_names)
    Xd = X.astype(np.float64)
    rows = np.random.default_rng(1).choice(len(X), 4, replace=False)
    for i in rows:
        x = Xd[i]
        if ens.is_classifier:
            now = ens.predict(x[None, :])[0]
            target = next(c for c in ens.classes if c != now)
        else:
            v = float(ens.predict(x[None, :])[0])
            target = (v + 0.5, np.inf)
        ours = optimal_counterfactual(ens, x, target, time_limit=60)
        theirs = optimal_counterfactual(ref, x, target, time_limit=60)
        assert ours.found and theirs.found
        # skl2onnx and onnxmltools store float32 thresholds: the library's own float64 (LightGBM) or
        # float32-midpoint (scikit-learn) thresholds round to them, one float32 step at most
        assert ours.cost == pytest.approx(theirs.cost, rel=1e-5, abs=1e-5)
        got = model.predict(model_input(ens, ours.x[None, :]))[0]
        if ens.is_classifier:
            assert got == target
        else:
            assert got >= target[0] - 1e-4 * max(1.0, abs(target[0]))


def test_per_column_pipeline_with_strings_is_matched_by_name():
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"age": rng.integers(18, 70, n).astype(float), "income": rng.normal(size=n).round(3),
                       "job": rng.choice(["clerk", "nurse", "cook"], n), "city": rng.choice(["x", "y"], n)})
    y = ((df.age > 40) ^ (df.job == "nurse") | (df.income > 1)).astype(int)
    pipe = Pipeline([("ct", ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), ["job", "city"])],
                                              remainder="passthrough")),
                     ("rf", RandomForestClassifier(15, max_depth=5, random_state=0))]).fit(df, y)
    types = [("age", FloatTensorType([None, 1])), ("income", FloatTensorType([None, 1])),
             ("job", StringTensorType([None, 1])), ("city", StringTensorType([None, 1]))]
    model = load_model(convert_sklearn(pipe, initial_types=types).SerializeToString(), "pipe.onnx")
    ens = from_model(model)
    assert ens.meta["input"] == "frame-object" and ens.feature_names == ("age", "income", "job", "city")
    assert ens.categories[2] == ("clerk", "cook", "nurse") and ens.categories[0] is None
    table = df[["city", "job", "income", "age"]].assign(approved=y)     # another column order: matched by name
    ws = build_workspace(table, "approved", model, name="t")
    assert np.array_equal(ws.predictions, pipe.predict(df))
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    x = ws.X.to_numpy()[row]
    res = optimal_counterfactual(ws.ensemble, x, 1, schema=ws.schema, time_limit=60)
    assert res.found
    raw = ws.to_raw(res.x[None, :])
    assert model.predict(raw)[0] == 1 and pipe.predict(raw[list(df.columns)])[0] == 1


def test_a_single_float_input_is_matched_by_position_once_confirmed():
    from core.errors import PositionalMatchRequired

    lib, data, X, y = _make("xgb-binary")
    model = load_model(data, "m.onnx")
    table = pd.DataFrame(X.astype(np.float64), columns=["a", "b", "c", "d", "e"]).assign(label=y)
    with pytest.raises(PositionalMatchRequired) as err:
        build_workspace(table, "label", model, name="t")
    assert [s for _, s in err.value.mapping] == ["a", "b", "c", "d", "e"]
    ws = build_workspace(table, "label", model, name="t", confirm_positions=True)
    assert np.array_equal(ws.predictions, lib.predict(X))


def test_string_class_labels():
    from sklearn.ensemble import RandomForestClassifier

    X, y2, _, _ = _data()
    labels = np.array(["no", "yes"])[y2]
    rf = RandomForestClassifier(8, max_depth=4, random_state=0).fit(X, labels)
    model = load_model(_skl(rf, X), "s.onnx")
    ens = from_model(model)
    assert list(ens.classes) == ["no", "yes"]
    assert np.array_equal(ens.predict(X.astype(np.float64)), rf.predict(X))
