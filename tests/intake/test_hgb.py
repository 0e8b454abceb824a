"""scikit-learn's HistGradientBoostingClassifier (binary, 3 classes) and Regressor
parsed into the one TreeEnsemble (core.intake.parsing.hgb): trained here as a data
scientist would, saved with skops and read through the app's own reader
(core.intake.io.load_model; the whole upload path, core.intake.sandbox.load_vetted, gives the
same ensembles, also from a trusted joblib file); predictions equal the library's
on every training row, on rows placed exactly on every threshold (and one float
above) and on every category code (missing and unseen included); numeric
features, native categorical features given as indices and as pandas
``category`` columns (``"from_dtype"``), and HGB last in a Pipeline after an
OrdinalEncoder; optimal counterfactuals fed back to the original model give the
target."""

from __future__ import annotations

import io as _io

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder, StandardScaler

from core.errors import ModelError, UnsupportedModelError
from core.intake import io
from core.intake.models import from_model
from core.intake.parsing import probe_points
from core.intake.sandbox import load_vetted
from core.intake.workspace import build_workspace
from core.model.native import model_input
from core.model.tree import MISSING_ONLY


@pytest.fixture(autouse=True)
def _one_thread():  # noqa: PT004
    """HGB fits and predicts with OpenMP threads, which spin for their share of a busy
    machine (seconds per tiny fit when other tests run): one thread is as exact."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


JOBS = ["clerk", "nurse", "cook", "pilot", "vet", "baker"]
SMALL = dict(max_iter=20, max_leaf_nodes=8, random_state=0)


def _table(n=800, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"income": rng.normal(50, 20, n).round(1), "job": rng.choice(JOBS, n),
                       "age": rng.integers(18, 80, n).astype(float), "city": rng.choice(["x", "y", "z"], n)})
    score = (df.income - 50) / 20 + np.where(df.job.isin(["clerk", "cook", "vet"]), 1.0, -0.8) \
        + (df.age > 45) * 0.7 + (df.city == "z") * 0.5
    targets = {"binary": (score > 0.4).astype(int).to_numpy(),
               "3-class": np.digitize(score, [-0.3, 0.9]),
               "regression": (3 * score + rng.normal(0, 0.1, n)).to_numpy()}
    return df, targets


def _fit(kind, X, y, **kw):
    cls = HistGradientBoostingRegressor if kind == "regression" else HistGradientBoostingClassifier
    return cls(**SMALL, **kw).fit(X, y)


def _loaded(model, name="hgb.skops"):
    """The model saved with skops and read back by the app's reader (core.intake.io.load_model:
    the allow-list, the structural checks), then parsed and verified (from_model).
    test_the_apps_sandboxed_loader_reads_the_same checks that the app's whole path,
    core.intake.sandbox.load_vetted, gives the same ensembles."""
    back = io.load_model(sio.dumps(model), name)
    assert type(back) is type(model)
    return from_model(back), back


def _codes(ens, df):
    """A raw table in the ensemble's codes view (categories by value, unknown: the missing code)."""
    out = np.empty((len(df), ens.n_features))
    for j, name in enumerate(ens.feature_names):
        col = df[name]
        if ens.categories[j] is None:
            out[:, j] = col.to_numpy(float)
        else:
            k = pd.Index(list(ens.categories[j])).get_indexer(pd.Series(col).astype(object))
            out[:, j] = np.where(k < 0, ens.missing_code(j), k)
    return out


def _on_thresholds(ens, X):
    """Training rows moved, one numerical feature at a time, exactly onto each threshold
    and onto the next float above it."""
    rows = []
    for j in range(ens.n_features):
        if ens.categories[j] is not None:
            continue
        for k, t in enumerate(ens.split_levels(j)[ens.split_levels(j) < MISSING_ONLY]):   # not a split on NaN
            for v in (t, np.nextafter(t, np.inf)):
                r = X[k % len(X)].copy()
                r[j] = v
                rows.append(r)
    assert rows
    return np.array(rows)


def _assert_same(ens, model, P, given=None):
    """Our outputs equal the model's on codes-view rows ``P`` (``given``: the model's own input)."""
    Xn = model_input(ens, P) if given is None else given
    if ens.task == "regression":
        np.testing.assert_allclose(ens.predict(P), model.predict(Xn), rtol=0, atol=1e-12)
        return
    np.testing.assert_array_equal(ens.predict(P), model.predict(Xn))
    np.testing.assert_allclose(ens.predict_proba(P), model.predict_proba(Xn), rtol=0, atol=1e-12)
    raw = np.asarray(model.decision_function(Xn), dtype=float).reshape(len(P), -1)
    np.testing.assert_allclose(ens.predict_raw(P), raw, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["binary", "3-class", "regression"])
def test_numeric_features_match_on_training_rows_and_thresholds(kind):
    df, y = _table()
    X = df[["income", "age"]].to_numpy()
    model = _fit(kind, X, y[kind])
    ens, back = _loaded(model)
    assert ens.source == f"sklearn.{type(model).__name__}" and not ens.categorical_features
    assert ens.n_trees == 20 * (3 if kind == "3-class" else 1)
    assert ens.link == {"binary": "sigmoid", "3-class": "softmax", "regression": "identity"}[kind]
    for m in (model, back):
        _assert_same(ens, m, X, given=X)
        _assert_same(ens, m, _on_thresholds(ens, X))
        _assert_same(ens, m, probe_points(ens, 200, seed=3))


def test_trained_with_missing_values_every_row_is_exact():
    """Where missing values predict the label HGB splits on NaN (threshold +inf: every
    value left, NaN right): kept as a split at MISSING_ONLY with NaN's own side, so rows
    with a missing number predict as in the library, as do rows without one and
    missing categories (the missing code)."""
    df, y = _table()
    rng = np.random.default_rng(1)
    frame = df.astype({"job": "category", "city": "category"})
    miss = rng.random(len(df)) < 0.3
    frame.loc[miss, "income"] = np.nan
    frame.loc[rng.random(len(df)) < 0.1, "job"] = np.nan
    label = (miss ^ (df.age > 50)).astype(int).to_numpy()
    model = _fit("binary", frame, label, categorical_features="from_dtype")
    on_nan = [p.nodes for it in model._predictors for p in it]
    assert sum(int(np.isinf(n["num_threshold"][n["is_leaf"] == 0]).sum()) for n in on_nan) >= 10
    ens, back = _loaded(model)
    assert ens.routes_missing
    assert sum(int(np.sum(t.threshold == MISSING_ONLY)) for t in ens.trees) >= 10
    C = _codes(ens, frame)
    assert (C[:, 1] == ens.missing_code(1)).sum() > 20                # missing categories among them
    assert np.isnan(C).any(axis=1).sum() == miss.sum()
    _assert_same(ens, back, C, given=frame)
    _assert_same(ens, model, _on_thresholds(ens, C[~miss]))


def test_a_row_on_a_threshold_goes_left_as_in_the_library():
    """HGB sends x <= num_threshold left, compared in float64: our rule, threshold as it is."""
    df, y = _table()
    X = df[["income", "age"]].to_numpy()
    model = _fit("regression", X, y["regression"])
    ens = from_model(model)
    root = model._predictors[0][0].nodes[0]
    t, j = float(root["num_threshold"]), int(root["feature_idx"])
    assert t in ens.split_levels(j)
    on, above = X[:1].copy(), X[:1].copy()
    on[0, j], above[0, j] = t, np.nextafter(t, np.inf)
    assert ens.apply(on)[0, 0] != ens.apply(above)[0, 0]       # the two sides of the root split
    np.testing.assert_allclose(ens.predict(np.vstack([on, above])), model.predict(np.vstack([on, above])),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["binary", "3-class", "regression"])
def test_from_dtype_categories_match_on_every_code(kind):
    df, y = _table()
    frame = df.astype({"job": "category", "city": "category"})
    model = _fit(kind, frame, y[kind], categorical_features="from_dtype")
    ens, back = _loaded(model)
    assert ens.categorical_features == [1, 3] and ens.meta["input"] == "frame"
    assert ens.categories[1] == tuple(sorted(JOBS)) and ens.categories[3] == ("x", "y", "z")
    assert ens.used_features().tolist() == [0, 1, 2, 3]
    C = _codes(ens, frame)
    _assert_same(ens, model, C, given=frame)                  # the training rows as the model was given them
    _assert_same(ens, back, C, given=frame)
    _assert_same(ens, model, _on_thresholds(ens, C))
    rng = np.random.default_rng(1)
    every = np.array(np.meshgrid(rng.normal(50, 20, 3), np.arange(7), [30.0, 60.0], np.arange(4),
                                 indexing="ij")).reshape(4, -1).T      # every code, the missing one included
    _assert_same(ens, model, every)
    unseen = frame.head(4).astype({"job": object, "city": object})
    unseen.loc[0, "job"], unseen.loc[1, "city"] = "astronaut", "w"   # unseen: routed as missing
    unseen.loc[2, "job"], unseen.loc[3, "city"] = np.nan, np.nan
    _assert_same(ens, model, _codes(ens, unseen), given=unseen)


def test_categorical_features_as_indices_on_strings_and_on_integer_codes():
    df, y = _table()
    model = _fit("binary", df, y["binary"], categorical_features=[1, 3])     # object columns, by position
    ens, _ = _loaded(model)
    assert ens.categorical_features == [1, 3] and ens.meta["input"] == "frame-object"
    _assert_same(ens, model, _codes(ens, df), given=df)
    _assert_same(ens, model, _on_thresholds(ens, _codes(ens, df)))
    # a NumPy array whose categorical column holds integer codes (with gaps: 0, 2, 5, 7, 9, 11)
    X = np.column_stack([df.income, df.job.map({j: 2 * i + (i > 1) for i, j in enumerate(JOBS)}), df.age])
    model = _fit("3-class", X, y["3-class"], categorical_features=[1])
    ens, _ = _loaded(model)
    assert ens.categories[1] == (0, 2, 5, 7, 9, 11) and ens.meta["input"] == "array"
    C = _codes(ens, pd.DataFrame(X, columns=ens.feature_names))
    _assert_same(ens, model, C, given=X)
    _assert_same(ens, model, probe_points(ens, 200, seed=4))
    odd = X[:3].copy()
    odd[:, 1] = [4.0, 12.0, -1.0]                  # not a category of the model: its missing route
    _assert_same(ens, model, np.column_stack([odd[:, 0], [6, 6, 6], odd[:, 2]]), given=odd)


def _pipelines(df, y):
    """HGB last in a Pipeline after an OrdinalEncoder: on the encoded columns as numbers
    (an unseen category encoded -1), and as its native categories (scikit-learn's own
    recipe; an unseen category encoded NaN, which HGB routes as missing)."""
    numeric = Pipeline([("pre", ColumnTransformer([
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), ["job", "city"]),
        ("num", StandardScaler(), ["income", "age"])])), ("hgb", HistGradientBoostingClassifier(**SMALL))])
    native = Pipeline([("pre", ColumnTransformer([
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), ["job", "city"])],
        remainder="passthrough")), ("hgb", HistGradientBoostingClassifier(**SMALL, categorical_features=[0, 1]))])
    return numeric.fit(df, y["binary"]), native.fit(df, y["3-class"])


def test_pipeline_with_an_ordinal_encoder_in_front():
    """Parity on the raw table (unseen values too) through the workspace, on thresholds
    and on every code."""
    df, y = _table()
    raw = df.copy()
    raw.loc[0, "job"], raw.loc[1, "city"] = "astronaut", "w"
    for pipe in _pipelines(df, y):
        ens, back = _loaded(pipe, "pipe.skops")
        assert ens.source == "sklearn.Pipeline[sklearn.HistGradientBoostingClassifier]"
        assert set(ens.feature_names) == {"job", "city", "income", "age"}
        assert {ens.feature_names[j] for j in ens.categorical_features} == {"job", "city"}
        ws = build_workspace(raw.assign(label=pipe.predict(raw)), "label", back, name="pipe")
        np.testing.assert_array_equal(ws.predictions, pipe.predict(raw))
        np.testing.assert_allclose(ws.ensemble.predict_proba(ws.X.to_numpy(float)), pipe.predict_proba(raw),
                                   rtol=0, atol=1e-12)
        C = _codes(ens, raw)
        _assert_same(ens, pipe, C, given=raw)
        _assert_same(ens, pipe, _on_thresholds(ens, C))
        _assert_same(ens, back, probe_points(ens, 200, seed=5))


def test_the_apps_sandboxed_loader_reads_the_same(monkeypatch):
    """core.intake.sandbox.load_vetted (the app's upload path: a child process reads, parses and
    verifies, the server reads again) gives the ensembles the in-process reader gives:
    a .skops model with pandas categories, a .skops pipeline, a trusted joblib file."""
    import joblib

    monkeypatch.setenv("OMP_NUM_THREADS", "1")          # the child's OpenMP, as _one_thread does here
    df, y = _table()
    frame = df.astype({"job": "category", "city": "category"})
    model = _fit("3-class", frame, y["3-class"], categorical_features="from_dtype")
    pipe = _pipelines(df, y)[1]
    buf = _io.BytesIO()
    joblib.dump(_fit("regression", df, y["regression"], categorical_features=[1, 3]), buf)
    for data, name, m in ((sio.dumps(model), "upload.skops", model), (sio.dumps(pipe), "pipe.skops", pipe),
                          (buf.getvalue(), "hgb.joblib", None)):
        trusted = name.endswith(".joblib")
        v = load_vetted(data, name, allow_pickle=trusted)
        back = io.load_model(data, name, allow_pickle=trusted)
        assert type(v.model) is type(back) and (m is None or type(back) is type(m))
        assert v.ensemble.content_hash() == from_model(back).content_hash()


@pytest.mark.parametrize("kind", ["binary", "3-class"])
def test_optimal_counterfactuals_give_the_target_on_the_original_model(kind):
    from core.optimal import optimal_counterfactual

    df, y = _table()
    frame = df.astype({"job": "category", "city": "category"})
    model = _fit(kind, frame, y[kind], categorical_features="from_dtype")
    _, back = _loaded(model)
    ws = build_workspace(df.assign(label=y[kind]), "label", back, name="hgb")
    np.testing.assert_array_equal(ws.predictions, model.predict(frame))
    X = ws.X.to_numpy(float)
    target = 1 if kind == "binary" else 2
    rows = np.flatnonzero(ws.predictions != target)[:3]
    assert len(rows) == 3
    for row in rows:
        res = optimal_counterfactual(ws.ensemble, X[row], target, schema=ws.schema, X_ref=X, model=model,
                                     time_limit=30)
        assert res.found and res.status == "optimal" and res.valid, res.message
        back = ws.to_raw(res.x[None, :]).astype({"job": frame.job.dtype, "city": frame.city.dtype})
        assert model.predict(back)[0] == target                       # the original model, as it was fitted
        assert model.predict(ws.to_raw(res.x[None, :]))[0] == target  # and given plain values


def test_refusals_name_the_reason():
    df, y = _table()
    X = df[["income", "age"]].to_numpy()
    with pytest.raises(UnsupportedModelError, match="poisson"):
        from_model(HistGradientBoostingRegressor(loss="poisson", **SMALL).fit(X, np.exp(y["regression"] / 5)))
    with pytest.raises(UnsupportedModelError, match="not fitted"):
        from_model(HistGradientBoostingClassifier())
    passthrough = Pipeline([("pre", ColumnTransformer([("cat", OrdinalEncoder(), ["job"])], remainder="passthrough")),
                            ("hgb", HistGradientBoostingClassifier(**SMALL, categorical_features=[0, 2]))])
    passthrough.fit(df[["job", "income", "age"]], y["binary"])       # age: categories of a raw number column
    with pytest.raises(UnsupportedModelError, match="numerical column 'age'"):
        from_model(passthrough)
    model = _fit("binary", X, y["binary"])           # trained without NaN, HGB still routes one
    ens = from_model(model)
    assert ens.routes_missing
    nan_rows = np.array([[np.nan, 40.0], [50.0, np.nan], [np.nan, np.nan]])
    np.testing.assert_allclose(ens.predict_proba(nan_rows), model.predict_proba(nan_rows), rtol=0, atol=1e-12)


def test_a_damaged_file_is_refused_before_the_library_walks_it():
    df, y = _table()
    model = _fit("binary", df.astype({"job": "category", "city": "category"}), y["binary"],
                 categorical_features="from_dtype")
    nodes = model._predictors[2][0].nodes
    nodes["left"][0] = 0                           # the root's left child: the root itself (a loop)
    with pytest.raises(ModelError, match="damaged.*iteration 2, tree 0, node 0"):
        io.load_model(sio.dumps(model), "loop.skops")
    nodes["left"][0] = 1
    other = model._predictors[3][0].nodes
    split = np.flatnonzero(~other["is_leaf"].astype(bool))[0]
    other["bitset_idx"][split], other["is_categorical"][split] = 99, 1     # a category set it does not hold
    with pytest.raises(ModelError, match="damaged"):
        io.load_model(sio.dumps(model), "bits.skops")
