"""The regions table for people (#59 item 8): a bound read off a tree (LightGBM's zero split
at 1.0000000180025095e-35, a surrogate's 4.0034160242651815 on a column of whole numbers)
is written as a person reads it (a whole number for a column of whole numbers, six digits of
the feature's span otherwise), and the rounded bound sorts every value written at that
precision to the same side as the exact one; probabilities and distances to 4 significant digits."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from core.figures import regions_table
from core.intake.csvsafe import to_csv
from core.model import Tree, TreeEnsemble
from core.regions import slice_regions
from core.schema import infer_schema
from core.shown import round_sig

ZERO_SPLIT = 1.0000000180025095e-35
ODD_SPLIT = 4.0034160242651815


def _stump(feature: int, t: float, left: float, right: float) -> Tree:
    return Tree([1, -1, -1], [2, -1, -1], [feature, -1, -1], [t, np.nan, np.nan], [[0.0], [left], [right]])


def _model_and_schema():
    """gain (a number, mostly 0, up to 99,999) split at LightGBM's zero threshold and at 7,024.3;
    children (whole numbers) split at 4.0034160242651815."""
    ens = TreeEnsemble((_stump(0, ZERO_SPLIT, -1.0, 0.7), _stump(0, 7024.318359375, 0.0, 1.3),
                        _stump(1, ODD_SPLIT, 0.4, -0.9)), n_features=2, feature_names=("gain", "children"),
                       task="classification", aggregation="sum", link="sigmoid", base_score=[0.1],
                       classes=np.array([0, 1]))
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"gain": np.where(rng.random(200) < 0.8, 0.0, rng.uniform(0, 99_999, 200)).round(3),
                      "children": rng.integers(0, 9, 200)})
    X.loc[0, "gain"], X.loc[1, "gain"] = 0.0, 99_999.0
    return ens, infer_schema(X), X.to_numpy(float)


def test_region_bounds_are_rounded_for_people_and_keep_every_value_on_its_side():
    ens, schema, X = _model_and_schema()
    assert [f.kind for f in schema.features] == ["numerical", "integer"]
    rs = slice_regions(ens, X[0], (0, 1))
    assert len(rs.regions) == 6
    table = regions_table(rs.regions, ens, (0, 1), schema)
    csv = to_csv(table)
    assert "e-35" not in csv and "4.0034" not in csv, csv
    back = pd.read_csv(io.StringIO(csv))
    assert sorted(set(back["gain >"]) | set(back["gain <="])) == [-np.inf, 0.0, 7024.3, np.inf]
    assert sorted(set(back["children >"]) | set(back["children <="])) == [-np.inf, 4.0, np.inf]
    gains = np.array([0.0, 0.1, 1.0, 7024.2, 7024.3, 7024.4, 7025.0, 99_999.0])   # at the table's precision
    kids = np.arange(0, 9)
    for r, (_, row) in zip(rs.regions, back.iterrows()):
        exact = (gains > r.lower[0]) & (gains <= r.upper[0])
        assert np.array_equal(exact, (gains > row["gain >"]) & (gains <= row["gain <="]))
        exact = (kids > r.lower[1]) & (kids <= r.upper[1])
        assert np.array_equal(exact, (kids > row["children >"]) & (kids <= row["children <="]))
    for col in ("P(1)", "distance"):
        assert all(round_sig(float(v), 4) == v for v in back[col]), back[col]
    assert list(back["prediction"]) == [r.prediction for r in rs.regions]
    assert not any(isinstance(v, float) and np.isfinite(v) for v in table["children >"])    # whole numbers as such
