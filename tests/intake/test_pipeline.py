"""scikit-learn Pipelines with encoders, scalers and imputers, expressed on the raw
columns (core.intake.parsing.pipeline): parity with pipeline.predict on every row of a raw
table (unseen categories and missing values included), on the exact boundary
values of every numerical threshold, through skops and joblib files; refusals name
the step; the forest taken out of a pipeline is never silently misread."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    RobustScaler,
    StandardScaler,
)

from core.errors import SchemaError, UnsupportedModelError
from core.intake import io
from core.intake.models import from_model
from core.intake.sandbox import VettedModel
from core.intake.workspace import PositionalMatchRequired, build_workspace


def _data(n=2500, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float),
                       "job": rng.choice(["clerk", "nurse", "cook", "pilot", "vet", "rare1", "rare2"], n,
                                         p=[.3, .25, .2, .1, .13, .01, .01]),
                       "income": rng.normal(50, 20, n), "city": rng.choice(["x", "y", "z"], n),
                       "hours": rng.integers(10, 60, n).astype(float), "note": rng.choice(["p", "q"], n)})
    y = ((df.age > 40) ^ df.job.isin(["clerk", "cook"]) | (df.income > 70) | (df.city == "z")).astype(int)
    return df, y


def _pre(variant):
    num = Pipeline([("imp", SimpleImputer(strategy="median")), ("sc", StandardScaler())])
    if variant == "basic":
        return ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "city"]),
                                  ("num", num, ["age", "income"]), ("h", MinMaxScaler(), ["hours"])])
    if variant == "drop-infrequent":
        return ColumnTransformer([("cat", OneHotEncoder(drop="first", min_frequency=0.05,
                                                        handle_unknown="infrequent_if_exist"), ["job"]),
                                  ("ord", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
                                   ["city"]),
                                  ("rob", RobustScaler(), ["age"]), ("abs", MaxAbsScaler(), ["income"]),
                                  ("id", FunctionTransformer(), ["hours"])], remainder="drop")
    if variant == "imputed-categories":
        cat = Pipeline([("imp", SimpleImputer(strategy="most_frequent")),
                        ("oh", OneHotEncoder(handle_unknown="ignore", sparse_output=False))])
        return ColumnTransformer([("cat", cat, ["job", "city"]), ("num", num, ["age", "income", "hours"])],
                                 remainder="passthrough")
    raise ValueError(variant)


def _estimators():
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    return {"rf": RandomForestClassifier(40, max_depth=7, random_state=0),
            "gb": GradientBoostingClassifier(n_estimators=30, random_state=0),
            "xgb": xgb.XGBClassifier(n_estimators=30, max_depth=4, n_jobs=1),
            "lgb": lgb.LGBMClassifier(n_estimators=30, num_leaves=8, verbose=-1, n_jobs=1)}


def _raw_with_surprises(df):
    raw = df.copy()
    raw.loc[0, "job"] = "astronaut"          # unseen
    raw.loc[1, "job"] = np.nan                # missing
    raw.loc[2, "age"] = np.nan                # imputed
    raw.loc[3, "city"] = "w"                  # unseen
    return raw


@pytest.mark.parametrize("variant", ["basic", "drop-infrequent", "imputed-categories"])
@pytest.mark.parametrize("final", ["rf", "gb", "xgb", "lgb"])
def test_pipeline_matches_on_the_raw_table(variant, final):
    df, y = _data()
    if variant == "imputed-categories":
        df = df.drop(columns=["note"])
    pipe = Pipeline([("pre", _pre(variant)), ("model", _estimators()[final])]).fit(df, y)
    ens = from_model(pipe)
    assert set(ens.feature_names) <= set(df.columns)
    raw = _raw_with_surprises(df)
    if variant == "drop-infrequent":
        raw.loc[1, "job"] = "vet"              # no imputers here: missing values are the data's to fix
        raw.loc[2, "age"] = 30.0
    # the pipeline as the app hands it over once read (parsed once: build_workspace given the
    # object parses it again, as the tests below check)
    ws = build_workspace(raw.assign(label=y), "label", VettedModel(ensemble=ens, model=pipe), name="p")
    np.testing.assert_array_equal(ws.predictions, pipe.predict(raw))
    np.testing.assert_allclose(ens.predict_proba(_codes(ens, raw)), pipe.predict_proba(raw), rtol=1e-6, atol=1e-7)
    back = ws.to_raw(ws.X)
    np.testing.assert_array_equal(pipe.predict(back), ws.predictions)


def _codes(ens, raw):
    """The ensemble's codes view of a raw frame (independent of build_workspace)."""
    X = np.empty((len(raw), ens.n_features))
    for j, name in enumerate(ens.feature_names):
        cats = ens.categories[j]
        if cats is None:
            v = raw[name].to_numpy(dtype=float)
            X[:, j] = np.where(np.isnan(v), ens.meta.get("impute", {}).get(name, np.nan), v)
        else:
            index = {c: k for k, c in enumerate(cats)}
            col = raw[name].fillna(ens.meta["impute"][name]) if name in ens.meta.get("impute", {}) else raw[name]
            X[:, j] = [index.get(v, len(cats)) for v in col]
    return X


def test_boundary_values_and_a_negative_scale_route_exactly():
    from sklearn.ensemble import RandomForestClassifier

    df, y = _data()
    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job"]),
                             ("sc", StandardScaler(), ["age", "income", "hours"])])
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(30, max_depth=8, random_state=0))]).fit(df, y)
    scaler = pipe.named_steps["pre"].named_transformers_["sc"]
    scaler.scale_ = scaler.scale_ * np.array([-1.0, 1.0, -2.0])   # decreasing maps: children swap
    ens = from_model(pipe)
    base = df.iloc[:1]
    rows = []
    for j, name in enumerate(ens.feature_names):
        if ens.categories[j] is not None:
            continue
        for x in ens.split_levels(j):
            for v in (np.nextafter(x, -np.inf), x, np.nextafter(x, np.inf)):
                r = base.copy()
                r[name] = v
                rows.append(r)
    probe = pd.concat(rows, ignore_index=True)
    assert len(probe) > 300
    np.testing.assert_allclose(ens.predict_proba(_codes(ens, probe)), pipe.predict_proba(probe), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("shape", "whole_line"), [("affine", False), ("decreasing", False), ("huge", False),
                                                   ("clipped", True), ("log", True)])
def test_each_raw_threshold_is_the_largest_float_on_its_side_whatever_the_map(shape, whole_line):
    """The bisection starts in a bracket around the affine map's inverse where that bracket holds
    (about 13 transforms instead of 66); a clipped map, or a map not affine at 0 and 1, keeps the
    whole line for the thresholds where the bracket fails. Whatever the map, each answer x is the
    largest float64 on the threshold's side: f(x) <= t and f(next float above x) > t (for a
    decreasing map, > and <=)."""
    from core.intake.parsing.pipeline import _largest_at_most

    rng = np.random.default_rng(3)
    t = np.concatenate([rng.normal(0, 3, 200), [0.0, 1.0, -1.0, 1e-300, 5e300]])
    maps = {"affine": (lambda x: (x - 41.3) / 7.9, True), "decreasing": (lambda x: (x - 2.5) * -3.1e-3, False),
            "clipped": (lambda x: np.clip((x - 10.0) / 4.0, -1.5, 2.0), True),
            "huge": (lambda x: x * 1e300, True), "log": (lambda x: np.log1p(np.maximum(x, 0.0)), True)}
    f, up = maps[shape]
    calls = []

    def counted(x):
        calls.append(1)
        with np.errstate(all="ignore"):
            return f(x)

    x = _largest_at_most(counted, t, up)
    side = (lambda v: v <= t) if up else (lambda v: v > t)
    with np.errstate(all="ignore"):
        here, above = side(f(x)), side(f(np.nextafter(x, np.inf)))
        everywhere = side(f(np.full(t.shape, np.finfo(float).max)))
    inside = np.isfinite(x)
    assert inside.sum() > 50
    assert here[inside].all() and not above[inside].any()
    assert (np.isposinf(x) == everywhere).all()          # +inf: every float is on the threshold's side
    assert (len(calls) > 60) == whole_line, len(calls)  # the bracket held for every threshold, or not


def test_saved_pipelines_load_through_skops_and_trusted_joblib(tmp_path):
    import joblib
    import skops.io as sio
    from sklearn.ensemble import RandomForestClassifier

    df, y = _data()
    pipe = Pipeline([("pre", _pre("basic")), ("rf", RandomForestClassifier(20, max_depth=5, random_state=0))])
    pipe.fit(df, y)
    joblib.dump(pipe, tmp_path / "p.joblib")
    for data, name, trust in ((sio.dumps(pipe), "p.skops", False), ((tmp_path / "p.joblib").read_bytes(),
                                                                       "p.joblib", True)):
        loaded = io.load_model(data, name, allow_pickle=trust)
        ws = build_workspace(df.assign(label=y), "label", loaded, name=name)
        np.testing.assert_array_equal(ws.predictions, pipe.predict(df))


def test_unsupported_steps_are_named():
    from sklearn.decomposition import PCA
    from sklearn.ensemble import RandomForestClassifier

    df, y = _data()
    pre = ColumnTransformer([("cat", OneHotEncoder(), ["job"]),
                             ("num", Pipeline([("sc", StandardScaler()), ("pca", PCA(1))]), ["age", "income"])])
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(5, random_state=0))]).fit(df, y)
    with pytest.raises(UnsupportedModelError, match=r"pre > num > pca.*PCA"):
        from_model(pipe)
    log = Pipeline([("pre", FunctionTransformer(np.log1p)), ("rf", RandomForestClassifier(5, random_state=0))])
    log.fit(df[["age", "income"]].abs(), y)
    with pytest.raises(UnsupportedModelError, match="FunctionTransformer"):
        from_model(log)


def test_forest_taken_out_of_a_pipeline_is_never_silently_misread():
    from sklearn.ensemble import RandomForestClassifier

    df, y = _data()
    pipe = Pipeline([("pre", _pre("basic")), ("rf", RandomForestClassifier(20, max_depth=5, random_state=0))])
    pipe.fit(df, y)
    with pytest.raises((PositionalMatchRequired, SchemaError)):
        build_workspace(df.assign(label=y), "label", pipe.named_steps["rf"], name="forest alone")
    dense = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["job", "city"]),
                               ("num", StandardScaler(), ["age", "income"])]).set_output(transform="pandas")
    named = Pipeline([("pre", dense),
                      ("rf", RandomForestClassifier(20, max_depth=5, random_state=0))]).fit(df, y)
    with pytest.raises((PositionalMatchRequired, SchemaError)):
        build_workspace(df.assign(label=y), "label", named.named_steps["rf"], name="forest alone")


@pytest.mark.parametrize("path", adult_sources())
def test_adult_all_rows_through_a_pipeline(path):
    from sklearn.ensemble import RandomForestClassifier

    table = io.load_table(path.read_bytes(), "adult.csv")
    kinds = table.attrs.get("column_types", {})
    cats = [c for c, k in kinds.items() if k == "categorical"]
    raw = table.astype({c: str for c in cats})
    raw[cats] = raw[cats].apply(lambda s: "v" + s)              # text categories, as an analyst has them
    nums = [c for c in raw.columns if c not in cats + ["Class"]]
    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), cats), ("num", StandardScaler(), nums)])
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(60, max_depth=10, random_state=0, n_jobs=2))])
    X = raw.drop(columns=["Class"])
    pipe.fit(X, raw["Class"])
    ws = build_workspace(raw, "Class", pipe, name="adult")
    assert len(ws.X) == len(raw)
    np.testing.assert_array_equal(ws.predictions, pipe.predict(X))
