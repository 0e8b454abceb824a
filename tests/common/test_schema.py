"""Schema inference, validation and JSON round trips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources

from core.errors import SchemaError
from core.intake import io
from core.intake.demo import synthetic_credit
from core.schema import FeatureSpec, Schema, infer_schema, suggest_protected


def test_inference_on_the_synthetic_credit_demo():
    df, target = synthetic_credit(500)
    s = infer_schema(df, target)
    kinds = {f.name: f.kind for f in s.features}
    assert kinds["income"] == "numerical" and kinds["age"] == "integer" and kinds["owns_home"] == "binary"
    assert s.groups() == {"employment": [6, 7, 8, 9]}
    assert s.protected() == [] and {f.actionability for f in s.features} == {"free"}   # no name decides
    given = infer_schema(df, target, protected=["sex"])                                 # the analyst does
    assert given.protected() == ["sex"] and given["sex"].actionability == "fixed"
    assert [f for f in given.features if f.name != "sex"] == [f for f in s.features if f.name != "sex"]
    assert target not in s.names
    assert s["age"].lower == df["age"].min() and s["age"].upper == df["age"].max()


def test_no_column_is_protected_fixed_or_directed_because_of_its_name():
    rng = np.random.default_rng(0)
    n = 60
    race = rng.integers(0, 3, n)
    df = pd.DataFrame({"sex": rng.integers(0, 2, n), "Race": rng.integers(0, 5, n), "GENDER": rng.integers(0, 2, n),
                       "ethnicity": rng.normal(size=n), "religion": rng.integers(0, 4, n),
                       "nationality": rng.integers(0, 9, n), "Age": rng.integers(18, 90, n),
                       **{f"race={k}": (race == k).astype(int) for k in range(3)}})
    s = infer_schema(df)
    assert s.groups() == {"race": [7, 8, 9]}
    assert s.protected() == [] and all(f.actionability == "free" for f in s.features), s.to_frame()
    cats = infer_schema(df[["sex", "Age"]], levels={"sex": ["f", "m"]})              # a categorical sex too
    assert cats.protected() == [] and cats["sex"].actionability == "free"
    chosen = infer_schema(df, protected=["race", "GENDER"])                           # a group by its name
    assert chosen.protected() == ["GENDER", "race=0", "race=1", "race=2"]
    assert {f.name for f in chosen.features if f.actionability == "fixed"} == set(chosen.protected())


@pytest.fixture(scope="module", params=adult_sources())
def adult(request):
    """Adult prepared as the app prepares it: ``(X, y, kinds, groups)``."""
    df = io.load_table(request.param.read_bytes(), request.param.name)
    prep = io.prepare_data(df, df.attrs["target"])
    return prep.X, prep.y.to_numpy().astype(int), prep.kinds, prep.groups


def test_adult_sex_is_proposed_never_imposed(adult):
    """Adult's ``Sex`` reads like a protected attribute: proposed with its reason, never
    marked by infer_schema on its own (which made every answer keep Sex where changing
    it is cheaper)."""
    X, y, kinds, groups = adult
    s = infer_schema(X, kinds=kinds, groups=groups)
    assert "Sex" in s.names and s.protected() == [], s.protected()
    assert {f.actionability for f in s.features} == {"free"}
    assert suggest_protected(list(X.columns), groups=groups) == {
        "Sex": "its name reads like a protected attribute (sex)"}
    given = infer_schema(X, kinds=kinds, groups=groups, protected=["Sex"])
    assert given.protected() == ["Sex"] and given["Sex"].actionability == "fixed"
    assert [f for f in given.features if f.name != "Sex"] == [f for f in s.features if f.name != "Sex"]


def test_suggest_protected_proposes_with_the_reason_in_words():
    got = suggest_protected(["Age", "Sex", "income", "RACE", "gender", "ethnic", "Religion", "nationality", "sexes",
                             "race_white", "sex_m"])
    assert got == {name: f"its name reads like a protected attribute ({word})" for name, word in [
        ("Sex", "sex"), ("RACE", "race"), ("gender", "gender"), ("ethnic", "ethnic"), ("Religion", "religion"),
        ("nationality", "nationality")]}
    assert list(got) == ["Sex", "RACE", "gender", "ethnic", "Religion", "nationality"]     # in the columns' order
    groups = {"race": ["race=a", "race=b"], "job": ["job=x", "job=y"]}
    assert suggest_protected(["race=a", "race=b", "job=x", "job=y", "age"], groups=groups) == {
        "race": "its name reads like a protected attribute (race)"}
    assert suggest_protected("Sex") == {"Sex": "its name reads like a protected attribute (sex)"}
    assert suggest_protected(["age", "income"]) == {}
    with pytest.raises(SchemaError, match="dict"):
        suggest_protected(["sex"], groups=["sex"])


def test_json_and_frame_round_trips():
    df, target = synthetic_credit(300)
    s = infer_schema(df, target).with_updates("age", actionability="increase", weight=2.0)
    assert Schema.from_json(s.to_json()) == s
    assert Schema.from_frame(s.to_frame(), target=target) == s


@pytest.mark.parametrize("bad,match", [
    ("not json", "not valid JSON"), ("[1, 2]", "JSON object"), ('{"x": 1}', "Not a schema file"),
    ('{"features": [{"name": "a", "kind": "weird"}]}', "kind 'weird'"),
    ('{"features": [{"name": "a", "actionability": "maybe"}]}', "actionability"),
    ('{"features": [{"name": "a", "lower": 2, "upper": 1}]}', "lower <= upper"),
    ('{"features": [{"name": "a"}, {"name": "a"}]}', "Duplicate"),
])
def test_bad_schema_files(bad, match):
    with pytest.raises(SchemaError, match=match):
        Schema.from_json(bad)


def test_non_numeric_columns_are_named():
    with pytest.raises(SchemaError, match="'city'"):
        infer_schema(pd.DataFrame({"a": [1.0, 2.0], "city": ["x", "y"]}))


def test_one_hot_groups_need_rows_summing_to_one():
    df = pd.DataFrame({"c_a": [1, 0, 0], "c_b": [0, 1, 1], "d_a": [1, 1, 0], "d_b": [0, 1, 0]})
    s = infer_schema(df)
    assert s.groups() == {"c": [0, 1]}
    assert s["d_a"].kind == "binary"


def test_feature_spec_checks():
    with pytest.raises(SchemaError, match="group"):
        FeatureSpec("a", kind="one-hot")
    with pytest.raises(SchemaError, match="weight"):
        FeatureSpec("a", weight=-1)
    assert FeatureSpec("a", lower=3, upper=3).span == 1.0
    assert np.isclose(FeatureSpec("a", lower=0, upper=4).span, 4)
