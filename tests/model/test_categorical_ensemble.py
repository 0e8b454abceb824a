"""Categorical splits in the one TreeEnsemble: the walk, boxes and masks, the
arrays round trip, against a direct reading of the split rule."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import ModelError
from core.model import Tree, TreeEnsemble, category_bits_from_sets
from core.model import flatwalk as ens_mod  # the tree walk and its compiled/numpy switch


def _random_tree(rng, n_codes: int, depth: int) -> Tree:
    """A random tree on feature 0 (numerical) and feature 1 (categorical)."""
    left, right, feat, thr, sets, vals = [], [], [], [], [], []

    def grow(d: int) -> int:
        i = len(left)
        left.append(-1), right.append(-1), feat.append(-1), thr.append(np.nan), sets.append(None)
        vals.append(rng.normal())
        if d < depth and rng.random() < 0.85:
            if rng.random() < 0.5:
                feat[i], thr[i] = 0, float(rng.normal())
            else:
                feat[i] = 1
                sets[i] = np.flatnonzero(rng.random(n_codes) < 0.5)
            left[i] = grow(d + 1)
            right[i] = grow(d + 1)
        return i

    grow(0)
    return Tree(np.array(left), np.array(right), np.array(feat), np.array(thr), np.array(vals),
                category_bits_from_sets(sets, n_codes))


def _by_rule(tree: Tree, x: np.ndarray, n_codes: int) -> int:
    node = 0
    while tree.children_left[node] >= 0:
        j = tree.feature[node]
        if np.isnan(tree.threshold[node]):
            go = bool(tree.left_codes(node, n_codes)[int(x[j])])
        else:
            go = x[j] <= tree.threshold[node]
        node = tree.children_left[node] if go else tree.children_right[node]
    return node


@pytest.mark.parametrize("n_levels", [3, 70])
def test_walks_agree_with_the_split_rule(n_levels):
    rng = np.random.default_rng(n_levels)
    cats = tuple(f"c{k}" for k in range(n_levels))
    trees = tuple(_random_tree(rng, n_levels + 1, 5) for _ in range(20))
    ens = TreeEnsemble(trees, n_features=2, feature_names=("x", "c"), task="regression", aggregation="sum",
                       link="identity", base_score=np.zeros(1), categories=(None, cats))
    X = np.column_stack([rng.normal(size=400), rng.integers(0, n_levels + 1, 400)]).astype(float)
    expect = np.array([[_by_rule(t, x, n_levels + 1) for t in trees] for x in X])
    np.testing.assert_array_equal(ens.apply(X), expect)
    compiled = ens.predict(X)
    ens_mod.USE_COMPILED = False
    try:
        np.testing.assert_array_equal(ens.apply(X), expect)
        np.testing.assert_allclose(ens.predict(X), compiled, rtol=0, atol=1e-12)
    finally:
        ens_mod.USE_COMPILED = ens_mod._treewalk is not None
    np.testing.assert_array_equal(np.column_stack([t.apply(X) for t in trees]), expect)
    # leaf boxes (numerical) and masks (categorical) hold exactly the points reaching each leaf
    for t, ((ids, lo, hi), masks) in enumerate(zip(ens.leaf_boxes(), ens.leaf_category_masks())):
        pos = np.searchsorted(ids, expect[:, t])
        assert np.all(ids[pos] == expect[:, t])
        assert np.all((X[:, 0] > lo[pos, 0]) & (X[:, 0] <= hi[pos, 0]))
        assert np.all(masks[1][pos, X[:, 1].astype(int)])
        # and a leaf admits no code some point of another leaf would need: masks partition the codes
        for code in range(n_levels + 1):
            pts = X[X[:, 1] == code]
            if len(pts):
                reached = set(expect[X[:, 1] == code, t])
                admits = {int(ids[i]) for i in np.flatnonzero(masks[1][:, code])}
                assert reached <= admits


def test_arrays_round_trip_and_hash():
    rng = np.random.default_rng(1)
    trees = tuple(_random_tree(rng, 6, 4) for _ in range(5))
    ens = TreeEnsemble(trees, n_features=2, feature_names=("x", "c"), task="classification", aggregation="sum",
                       link="sigmoid", base_score=np.array([0.3]), classes=np.array(["no", "yes"]),
                       categories=(None, ("a", "b", 3, 4.5, True)), meta={"iteration_range": (0, 5)})
    arrays, meta = ens.to_arrays()
    back = TreeEnsemble.from_arrays(arrays, meta)
    X = np.column_stack([rng.normal(size=50), rng.integers(0, 6, 50)]).astype(float)
    np.testing.assert_array_equal(back.predict_proba(X), ens.predict_proba(X))
    assert back.categories == ens.categories and list(back.classes) == ["no", "yes"]
    assert back.content_hash() == ens.content_hash()
    assert back.meta["iteration_range"] == (0, 5)
    arrays["threshold"] = arrays["threshold"] + 1.0
    assert TreeEnsemble.from_arrays(arrays, meta).content_hash() != ens.content_hash()


def test_codes_are_checked_and_splits_must_match_the_feature_kind():
    rng = np.random.default_rng(2)
    trees = (_random_tree(rng, 4, 3),)
    ens = TreeEnsemble(trees, n_features=2, feature_names=("x", "c"), task="regression", aggregation="sum",
                       link="identity", base_score=np.zeros(1), categories=(None, ("a", "b", "c")))
    with pytest.raises(ValueError, match="integer codes 0..3"):
        ens.predict(np.array([[0.0, 4.0]]))
    with pytest.raises(ValueError, match="integer codes"):
        ens.predict(np.array([[0.0, 1.5]]))
    assert ens.split_levels(1).tolist() == [0.5, 1.5, 2.5]
    assert ens.category_label(1, 3) == "(missing)" and ens.category_label(1, 0) == "a"
    with pytest.raises(ModelError, match="categorical split"):  # the same trees with feature 1 numerical
        TreeEnsemble(trees, n_features=2, feature_names=("x", "c"), task="regression", aggregation="sum",
                     link="identity", base_score=np.zeros(1))
    bits = category_bits_from_sets([[0, 5], None, None], 6)
    tree = Tree(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([1, -1, -1]), np.array([np.nan] * 3),
                np.zeros(3), bits)
    with pytest.raises(ModelError, match="beyond"):  # code 5 does not exist for 3 categories + missing
        TreeEnsemble((tree,), n_features=2, feature_names=("x", "c"), task="regression", aggregation="sum",
                     link="identity", base_score=np.zeros(1), categories=(None, ("a", "b", "c")))
