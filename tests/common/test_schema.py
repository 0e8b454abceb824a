"""Schema inference, validation and JSON round trips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.errors import SchemaError
from core.intake.demo import synthetic_credit
from core.schema import FeatureSpec, Schema, infer_schema


def test_inference_on_the_synthetic_credit_demo():
    df, target = synthetic_credit(500)
    s = infer_schema(df, target)
    kinds = {f.name: f.kind for f in s.features}
    assert kinds["income"] == "numerical" and kinds["age"] == "integer" and kinds["owns_home"] == "binary"
    assert s.groups() == {"employment": [6, 7, 8, 9]}
    assert s.protected() == ["sex"] and s["sex"].actionability == "fixed"
    assert target not in s.names
    assert s["age"].lower == df["age"].min() and s["age"].upper == df["age"].max()


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
