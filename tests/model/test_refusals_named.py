"""A question a model cannot answer is refused with a named error, not a TypeError.

The typing pass of issue #40 (item 4) found paths that read an optional value as if it were
always there: the labels of a numerical feature, the class labels of a classifier read
without them, the category codes of a numerical column, the last level of a numerical
feature. Each used to fail with ``TypeError: 'NoneType' object ...``; each now says what is
wrong in the family of errors the app shows (``core.errors``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from core.errors import AtlasError, ModelError, SchemaError
from core.intake.matching import categorical_codes
from core.intake.parsing.common import drop_last_level
from core.model import as_ensemble


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return as_ensemble(RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y)), X


def test_the_labels_of_a_numerical_feature_are_refused_by_name(forest):
    ens, _ = forest
    assert ens.categories[1] is None
    with pytest.raises(SchemaError, match="'x1' is numerical, not categorical"):
        ens.category_label(1, 0)


def test_a_classifier_read_without_its_labels_says_so_and_still_gives_probabilities(forest):
    ens, X = forest
    bare = dataclasses.replace(ens, classes=None)
    with pytest.raises(ModelError, match="has no class labels"):
        bare.predict(X[:5])
    np.testing.assert_array_equal(bare.predict_proba(X[:5]), ens.predict_proba(X[:5]))


def test_category_codes_of_a_numerical_column_are_refused(forest):
    ens, _ = forest
    with pytest.raises(SchemaError, match="not categorical"):
        categorical_codes(ens, 0, pd.Series(["a", "b"]), [])


def test_the_last_level_of_a_numerical_feature_cannot_be_dropped(forest):
    ens, _ = forest
    with pytest.raises(ModelError, match="not categorical") as info:
        drop_last_level(ens, [2], "left")
    assert isinstance(info.value, AtlasError)
