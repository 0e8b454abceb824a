"""core.intake.workspace: a table and a model become one checked workspace, matched
by name (never silently by position), in three views (raw, codes, model input)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from core.errors import DataError, SchemaError
from core.intake.workspace import PositionalMatchRequired, build_workspace
from core.model import Tree, TreeEnsemble, category_bits_from_sets


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "income": rng.normal(50, 15, n).round(1),
                       "job": rng.choice(["clerk", "nurse", "chef"], n), "note": ["x"] * n})
    df["y"] = ((df.income > 50) ^ (df.job == "chef")).astype(int)
    return df


def test_named_model_matched_by_name_and_unused_columns_listed():
    from sklearn.ensemble import RandomForestClassifier

    df = _frame()
    X = pd.get_dummies(df[["income", "age", "job"]], columns=["job"], dtype=int)  # job_chef, job_clerk, ...
    model = RandomForestClassifier(20, max_depth=4, random_state=0).fit(X, df.y)
    ws = build_workspace(df, "y", model, name="t")
    assert list(ws.X.columns) == list(X.columns)                 # model order, not the table's
    np.testing.assert_array_equal(ws.X.to_numpy(), X.to_numpy(dtype=float))
    assert [f.kind for f in ws.schema.features if f.name.startswith("job_")] == ["one-hot"] * 3
    assert any("Ignored columns" in n and "note" in n for n in ws.notes)
    # the model input view reproduces the model's own answers
    np.testing.assert_array_equal(model.predict(ws.to_raw(ws.X)), ws.predictions)


def test_unnamed_model_needs_a_confirmed_positional_mapping():
    from sklearn.ensemble import RandomForestClassifier

    df = _frame()[["age", "income", "y"]]
    model = RandomForestClassifier(10, random_state=0).fit(df[["age", "income"]].to_numpy(), df.y)
    with pytest.raises(PositionalMatchRequired) as exc:
        build_workspace(df, "y", model, name="t")
    assert exc.value.mapping == [("x0", "age"), ("x1", "income")]
    ws = build_workspace(df, "y", model, name="t", confirm_positions=True)
    assert list(ws.X.columns) == ["age", "income"]
    assert any("by position" in n for n in ws.notes)


def test_extracted_forest_on_raw_table_is_never_loaded_silently():
    """The issue's case: a forest taken out of a one-hot pipeline, uploaded with the raw table."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.preprocessing import OneHotEncoder

    df = _frame()
    ct = ColumnTransformer([("num", "passthrough", ["income", "age"]), ("cat", OneHotEncoder(), ["job"])])
    forest = RandomForestClassifier(10, random_state=0).fit(ct.fit_transform(df), df.y)
    with pytest.raises(PositionalMatchRequired):
        build_workspace(df.drop(columns=["note"]), "y", forest, name="t")


def test_categorical_codes_unseen_and_missing_values():
    rng = np.random.default_rng(0)
    bits = category_bits_from_sets([[0, 2], None, None], 4)
    tree = Tree(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([1, -1, -1]),
                np.array([np.nan, np.nan, np.nan]), np.array([0.0, -1.0, 1.0]), bits)
    ens = TreeEnsemble((tree,), n_features=2, feature_names=("income", "job"), task="classification",
                       aggregation="sum", link="sigmoid", base_score=np.zeros(1), classes=np.array([0, 1]),
                       categories=(None, ("chef", "clerk", "nurse")), meta={"input": "frame-object"})
    df = pd.DataFrame({"income": rng.normal(size=6), "job": ["chef", "clerk", "nurse", "pilot", None, "chef"]})
    ws = build_workspace(df, None, ens, name="t")
    # the analyses' view: one 0/1 column per category (core.model.categorical); unseen and missing are all-zero
    jobs = ["job=chef", "job=clerk", "job=nurse"]
    assert ws.X[jobs].to_numpy().argmax(axis=1).tolist()[:3] == [0, 1, 2]
    assert ws.X[jobs].sum(axis=1).tolist() == [1, 1, 1, 0, 0, 1]
    assert all(ws.schema[c].kind == "one-hot" for c in jobs) and sorted(ws.schema.groups()["job"]) == [1, 2, 3]
    assert any("never saw" in n and "'pilot'" in n and "1 are missing" in n for n in ws.notes)
    np.testing.assert_array_equal(ws.predictions, ens.predict(np.column_stack(
        [df["income"], [0, 1, 2, 3, 3, 0]])))
    raw = ws.to_raw(ws.X)
    assert raw["job"].tolist()[:3] == ["chef", "clerk", "nurse"] and raw["job"].isna().tolist()[3:5] == [True, True]


def test_missing_numbers_are_kept_where_the_model_routes_them_else_refused():
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    df = _frame()[["age", "income", "y"]].astype({"income": float})
    model = RandomForestClassifier(5, random_state=0).fit(df[["age", "income"]], df.y)
    refuses = GradientBoostingClassifier(n_estimators=3).fit(df[["age", "income"]], df.y)
    df.loc[3, "income"] = np.nan
    kept = build_workspace(df, "y", model, name="t")                  # the forest routes a missing value
    assert len(kept.X) == len(df) and kept.X["income is missing"].tolist()[3] == 1.0
    assert kept.predictions[3] == model.predict(df[["age", "income"]].iloc[[3]])[0]
    with pytest.raises(DataError, match="rows of the data have missing values .*income.*row 3.*does not take"):
        build_workspace(df, "y", refuses, name="t")
    ws = build_workspace(df, "y", model, name="t", drop_missing=True)
    assert len(ws.X) == len(df) - 1 and len(ws.y) == len(ws.X)
    df["income"] = df["income"].astype(object)
    df.loc[5, "income"] = "n/a"
    with pytest.raises(DataError, match="must hold numbers"):
        build_workspace(df, "y", model, name="t", drop_missing=True)


def test_missing_column_names_what_is_missing():
    from sklearn.ensemble import RandomForestClassifier

    df = _frame()
    model = RandomForestClassifier(5, random_state=0).fit(df[["age", "income"]], df.y)
    with pytest.raises(SchemaError, match=r"expects columns \['income'\]"):
        build_workspace(df.drop(columns=["income"]), "y", model, name="t")


def test_accuracy_far_below_the_models_own_report_is_flagged():
    from sklearn.ensemble import RandomForestClassifier

    df = _frame(2000)
    model = RandomForestClassifier(50, oob_score=True, random_state=0).fit(df[["age", "income"]], df.y)
    ok = build_workspace(df, "y", model, name="t")
    assert not any("far below" in n for n in ok.notes)
    bad = df.copy()
    bad["y"] = np.random.default_rng(1).permutation(bad.y.to_numpy())
    ws = build_workspace(bad, "y", model, name="t")
    assert any("far below its own out-of-bag score" in n for n in ws.notes)


def test_labels_that_are_none_of_the_model_classes_are_flagged():
    """Text labels (">50K") for a model whose classes are 0/1: accuracy 0 means nothing, and the page says so."""
    import lightgbm as lgb

    rng = np.random.default_rng(4)
    X = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    y = (X.a > 0).astype(int)
    model = lgb.LGBMClassifier(n_estimators=5, verbose=-1, n_jobs=1).fit(X, y)
    ws = build_workspace(X.assign(label=np.where(y == 1, ">50K", "<=50K")), "label", model, name="t")
    assert any("is one of the model's classes (0, 1)" in n and "'>50K'" in n for n in ws.notes)
    ok = build_workspace(X.assign(label=y), "label", model, name="t")
    assert not any("model's classes" in n for n in ok.notes)


def test_decimal_commas_get_a_hint():
    import lightgbm as lgb

    rng = np.random.default_rng(6)
    X = pd.DataFrame({"a": rng.normal(size=200).round(2), "b": rng.normal(size=200)})
    model = lgb.LGBMClassifier(n_estimators=3, verbose=-1, n_jobs=1).fit(X, (X.a > 0).astype(int))
    comma = X.assign(a=X.a.map(lambda v: f"{v}".replace(".", ",")))
    with pytest.raises(DataError, match="decimal comma"):
        build_workspace(comma, None, model, name="t")
    words = X.assign(a=["n/a"] * 200)
    with pytest.raises(DataError, match="values are text") as e:
        build_workspace(words, None, model, name="t")
    assert "decimal comma" not in str(e.value)


def test_an_infinite_value_is_refused_naming_its_column_and_row():
    """An infinite number (a CSV's "inf") is refused at the door with its column, its row and the
    fix, whether the column is read as numbers or as text (before: "range [17.0, inf] must be
    finite", naming neither row nor fix, after a numpy warning)."""
    import lightgbm as lgb

    rng = np.random.default_rng(6)
    X = pd.DataFrame({"a": rng.normal(size=200).round(2), "b": rng.normal(size=200)})
    model = lgb.LGBMClassifier(n_estimators=3, verbose=-1, n_jobs=1).fit(X, (X.a > 0).astype(int))
    for col in (X.a.where(X.index != 7, np.inf), X.a.astype(str).where(X.index != 7, "-inf")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(DataError, match=r"Column 'a' holds 1 infinite value\(s\) \(e\.g\. -?inf in row 7\)"
                                                r".*leave the cell empty"):
                build_workspace(X.assign(a=col), None, model, name="t")


def test_no_column_is_marked_for_its_name_and_the_analysts_choice_takes_its_whole_column():
    """The library marks nothing protected, fixed or directed because of a name (sex, race,
    gender, ethnicity here); what the analyst marks takes every feature of the column: a
    category column's one-hot features, a number's "is missing" feature."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    n = 800
    df = pd.DataFrame({"income": rng.normal(50, 15, n).round(1), "sex": rng.integers(0, 2, n).astype(float),
                       "race": pd.Categorical(rng.choice(["a", "b", "c"], n)), "gender": rng.integers(0, 2, n),
                       "ethnicity": rng.integers(0, 3, n)})
    y = (((df.income > 50) ^ (df.race == "b")) | (df.sex == 1)).astype(int)
    df.loc[rng.random(n) < 0.2, "sex"] = np.nan
    model = lgb.LGBMClassifier(n_estimators=30, num_leaves=8, min_child_samples=5, verbose=-1, n_jobs=1).fit(df, y)
    ws = build_workspace(df.assign(y=y), "y", model, name="t")
    names = list(ws.X.columns)
    assert "sex is missing" in names and {"race=a", "race=b", "race=c"} <= set(names)
    assert ws.schema.protected() == []
    assert {f.name: f.actionability for f in ws.schema.features if f.actionability != "free"} == {
        "sex is missing": "decrease"}                        # a rule of the data (a value never becomes missing)
    chosen = ws.with_protected(["sex", "race"])
    marked = ["sex", "race=a", "race=b", "race=c", "sex is missing"]
    assert sorted(chosen.schema.protected()) == sorted(marked)
    assert all(chosen.schema[m].actionability == "fixed" for m in marked)
    assert [f for f in chosen.schema.features if f.name not in marked] == \
        [f for f in ws.schema.features if f.name not in marked]
    given = build_workspace(df.assign(y=y), "y", model, name="t", protected=["sex", "race"])
    assert given.schema == chosen.schema                      # the same as naming them when building
    assert ws.with_protected("gender").schema.protected() == ["gender"]
    with pytest.raises(SchemaError, match="'sexx' is not a column the model reads. Did you mean 'sex'"):
        ws.with_protected(["sexx"])
