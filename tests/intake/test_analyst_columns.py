"""The analyst's columns everywhere (#29 item 3): a pipeline's or a categorical
model's one-hot features read as the table's own columns; a category is one
pick; a value the model folds into "any other value" reads as the person's own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from streamlit.testing.v1 import AppTest

from core.intake.columns import NONE, analyst_columns, apply_values, column_values, columns_of
from core.intake.workspace import build_workspace


def _table(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float),
                       "job": rng.choice(["clerk", "nurse", "cook", "pilot", "vet"], n),
                       "income": rng.normal(50, 20, n), "city": rng.choice(["x", "y", "z"], n)})
    df["y"] = ((df.age > 40) ^ df.job.isin(["clerk", "cook"]) | (df.income > 70) | (df.city == "z")).astype(int)
    return df


@pytest.fixture(scope="module")
def pipeline_ws():
    df = _table()
    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "city"]),
                             ("num", StandardScaler(), ["age", "income"])])
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(30, max_depth=6, random_state=0))])
    pipe.fit(df.drop(columns="y"), df.y)
    return build_workspace(df, "y", pipe, name="pipeline")


def test_columns_are_the_tables(pipeline_ws):
    ws = pipeline_ws
    cols = analyst_columns(ws.ensemble, ws.schema)
    assert sorted(c.name for c in cols) == ["age", "city", "income", "job"]
    job = next(c for c in cols if c.name == "job")
    assert set(job.categories) == {"clerk", "nurse", "cook", "pilot", "vet"}
    X = ws.X.to_numpy(float)
    for r in range(20):
        v = column_values(cols, X[r])
        assert v["job"] == ws.raw["job"].iloc[r] and v["city"] == ws.raw["city"].iloc[r]
        np.testing.assert_array_equal(apply_values(cols, X[r], v), X[r])
    x = apply_values(cols, X[0], {"job": "pilot", "age": 61})
    assert column_values(cols, x)["job"] == "pilot" and column_values(cols, x)["age"] == 61
    assert job.one_hot                                # a pipeline's encoder: one 0/1 feature per category
    assert x[list(job.features)].sum() == 1           # one pick: exactly one column of the group is set
    raw = ws.to_raw(x[None, :])
    assert raw["job"].iloc[0] == "pilot"
    assert ws.model.predict(raw)[0] == ws.ensemble.predict(x[None, :])[0]
    with pytest.raises(ValueError, match="job: 'astronaut' is not one of its categories"):
        apply_values(cols, X[0], {"job": "astronaut"})
    with pytest.raises(ValueError, match="age: 'old' is not a number"):
        apply_values(cols, X[0], {"age": "old"})
    assert columns_of(cols, job.features) == ["job"]


def test_a_folded_value_reads_as_the_persons_own(tmp_path):
    cb = pytest.importorskip("catboost")
    from core.intake.sandbox import load_vetted

    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.normal(size=1500), "job": rng.choice(["clerk", "nurse", "cook"], 1500)})
    y = ((df.a > 0) ^ (df.job == "nurse")).astype(int)
    model = cb.CatBoostClassifier(iterations=20, depth=3, verbose=0, allow_writing_files=False, one_hot_max_size=10,
                                  cat_features=["job"], thread_count=1).fit(df, y)
    model.save_model(str(tmp_path / "m.json"), format="json")
    audit = df.copy()
    audit.loc[:9, "job"] = "astronaut"                     # never seen: the model folds both into "any other value"
    audit.loc[10:19, "job"] = "diver"
    ws = build_workspace(audit.assign(label=y), "label", load_vetted((tmp_path / "m.json").read_bytes(), "m.json"),
                         name="cb")
    X = ws.X.to_numpy(float)
    folded = ws.raw_view(X[:1])["job"].iloc[0]
    assert folded == "(any other value)"                   # without the row: the level's own name
    own = ws.raw_changes(X[0], X[0], row=0)
    assert own.set_index("column").at["job", "original"] == "astronaut"
    assert ws.raw_view(X[[0, 12]], [0, 12])["job"].tolist() == ["astronaut", "diver"]
    moved = X[0].copy()
    moved[1:] = ws.X.to_numpy(float)[20, 1:]              # a counterfactual with a seen category
    changes = ws.raw_changes(X[0], moved, row=0).set_index("column")
    assert changes.at["job", "original"] == "astronaut" and changes.at["job", "counterfactual"] != "astronaut"


def _app_on(ws) -> AppTest:
    """The app with ``ws`` loaded as if uploaded."""
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=240)
    app.run()
    app.session_state["workspace"] = ws
    app.session_state["demo_key"] = None
    app.run()
    return app


def test_rules_page_and_sidebar_count_the_tables_columns(pipeline_ws):
    app = _app_on(pipeline_ws)
    assert any("× 4 columns" in m.value for m in app.sidebar.markdown)
    app.switch_page("../pages/counterfactual_rules.py").run()
    assert not app.exception, app.exception
    app.button(key="cr_go").click().run()
    assert not app.exception, app.exception
    metric = next(m for m in app.metric if m.label == "Columns to change")
    assert 1 <= int(metric.value) <= 4
    samples = app.dataframe[0].value
    assert set(samples.columns) <= {"model output", "reaches target", "inlier", "age", "income", "job", "city"}, \
        samples.columns
    for col, levels in (("job", {"clerk", "nurse", "cook", "pilot", "vet"}), ("city", {"x", "y", "z"})):
        assert set(samples.get(col, pd.Series(dtype=object))) <= levels


def test_what_if_picks_one_category(pipeline_ws):
    app = _app_on(pipeline_ws)
    app.switch_page("../pages/optimal_cf.py").run()
    assert not app.exception, app.exception
    cols = analyst_columns(pipeline_ws.ensemble, pipeline_ws.schema)
    k = [c.name for c in cols].index("job")
    box = app.selectbox(key=f"ocf_wi_0_{k}")
    assert set(box.options) == {"clerk", "nurse", "cook", "pilot", "vet"} and NONE not in box.options
    other = next(o for o in box.options if o != box.value)
    box.set_value(other).run()
    assert not app.exception, app.exception
    app.button[[b.label for b in app.button].index("Find the optimal counterfactual")].click().run()
    assert not app.exception, app.exception
    res = app.session_state["ocf_result"]
    assert column_values(cols, res.x_query)["job"] == other


def test_metarule_tree_asks_for_a_category_not_a_one_hot_threshold(pipeline_ws):
    from core.tcrex import TCREx

    ws = pipeline_ws
    X = ws.X.to_numpy(float)
    tc = TCREx(groups=list(ws.schema.groups().values()), random_state=0).fit(X, ws.predictions, 1,
                                                                              feature_names=list(ws.X.columns))
    dot = tc.to_graphviz()
    import re

    labels = re.findall(r'label="([^"]*)"', dot)
    assert not any("=" in lab.replace("<=", "") for lab in labels if "<=" in lab), labels
    assert any(q in dot for q in ("job = ", "city = ")), dot


def test_changes_read_in_the_tables_columns(pipeline_ws):
    from core.intake.columns import changes_text

    ws = pipeline_ws
    cols = analyst_columns(ws.ensemble, ws.schema)
    X = ws.X.to_numpy(float)
    other = next(c for c in ["clerk", "nurse", "cook", "pilot", "vet"] if c != column_values(cols, X[0])["job"])
    moved = apply_values(cols, X[0], {"job": other, "age": 77.5})
    before = column_values(cols, X[0])
    parts = set(changes_text(cols, X[0], moved).split("; "))
    assert parts == {f"age: {before['age']:g} → 77.5", f"job: {before['job']} → {other}"}
