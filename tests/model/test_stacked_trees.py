"""A whole ensemble's trees made from their stacked arrays (``core.model.tree.stacked_trees``),
checked at once: the same trees as made one by one, and the same refusal, the first failing
tree's first failing check, for the tree checks and for the ensemble's; checked by the
compiled kernel (``check_stacked``) and by numpy alike."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier

from core.errors import ModelError
from core.intake.models import from_model
from core.model import Tree, TreeEnsemble
from core.model import tree as tree_module
from core.model.tree import stacked_trees

FIELDS = ("children_left", "children_right", "feature", "threshold", "value", "category_bits", "missing_left")


@pytest.fixture(scope="module")
def stacked():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    arrays, meta = from_model(GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0).fit(X, y)).to_arrays()
    arrays["missing_left"] = np.arange(len(arrays["feature"])) % 3 == 0
    return arrays, meta


def _one_by_one(a):
    ends = np.cumsum(a["node_counts"])
    try:
        return tuple(Tree(*(a[f][s:e] for f in FIELDS)) for s, e in zip(ends - a["node_counts"], ends))
    except ModelError as exc:
        return str(exc)


def _at_once(a):
    try:
        return stacked_trees(a["node_counts"], *(a[f] for f in FIELDS))
    except ModelError as exc:
        return str(exc)


def _damaged(a, edits):
    """``a`` with ``edits`` [(field, tree, node, value)]: nodes indexed within their tree (-1 its last)."""
    out = {k: v.copy() for k, v in a.items()}
    starts = np.cumsum(a["node_counts"]) - a["node_counts"]
    for field, tree, node, value in edits:
        out[field][starts[tree] + node % a["node_counts"][tree]] = value
    return out


def test_the_trees_made_at_once_are_the_trees_made_one_by_one(stacked):
    arrays, _ = stacked
    ones, once = _one_by_one(arrays), _at_once(arrays)
    assert len(ones) == len(once) == len(arrays["node_counts"])
    for a, b in zip(ones, once):
        for f in FIELDS:
            x, y = getattr(a, f), getattr(b, f)
            assert x.dtype == y.dtype and x.shape == y.shape and not y.flags.writeable
            assert x.tobytes() == y.tobytes(), f


@pytest.mark.parametrize("edits", [
    [("children_right", 0, 0, -1)],                                      # one child only
    [("children_left", 2, 0, 0)],                                        # a child before its parent
    [("children_left", 1, 0, 99)],                                       # out of its tree
    [("children_left", 3, 1, 5), ("children_left", 3, 4, 2)],            # a node reached twice
    [("children_right", 3, 1, 4)],                  # a leaf the child of two splits, a subtree of none
    [("feature", 1, 0, -1)],                                             # a split without a feature
    [("threshold", 1, 0, np.inf)],
    [("threshold", 2, 0, np.nan)],                                       # a category set without words
    [("threshold", 4, 0, np.inf), ("children_left", 2, 0, 0)],           # the first tree's refusal
    [("children_right", 5, 0, -3), ("feature", 4, 0, -1)],               # a bad child pointing back, later
], ids=["one-child", "child-first", "beyond", "twice", "shared-child", "no-feature", "infinite", "no-set", "first-tree",
        "back-later"])
@pytest.mark.parametrize("checks", ["compiled", "numpy"])
def test_damaged_stacks_are_refused_as_one_by_one(stacked, edits, checks, monkeypatch):
    arrays, _ = stacked
    assert checks == "numpy" or tree_module._treewalk is not None, "build the kernels: setup.py build_ext"
    if checks == "numpy":
        monkeypatch.setattr(tree_module, "_treewalk", None)
    bad = _damaged(arrays, edits)
    got = _at_once(bad)
    assert isinstance(got, str) and got == _one_by_one(bad)
    assert isinstance(_at_once(arrays), tuple)           # and the undamaged ones pass both checks


def test_the_ensemble_refuses_its_first_failing_trees_first_check(stacked):
    arrays, meta = stacked
    later_nan = _damaged(arrays, [("value", 3, -1, np.nan), ("feature", 1, 0, 7)])
    with pytest.raises(ModelError, match="beyond n_features"):
        TreeEnsemble.from_arrays(later_nan, meta)
    first_nan = _damaged(arrays, [("value", 1, -1, np.inf), ("feature", 3, 0, 7)])
    leaf = int(arrays["node_counts"][1]) - 1
    with pytest.raises(ModelError, match=f"Tree 1, leaf {leaf} has the value"):
        TreeEnsemble.from_arrays(first_nan, meta)


def _with_categories(arrays, meta):
    """The stacked arrays with one split made categorical (a set of codes of a categorical feature)."""
    from core.model.tree import category_bits_from_sets

    a = {k: v.copy() for k, v in arrays.items()}
    inner = np.flatnonzero(a["children_left"] >= 0)
    a["feature"][inner[a["feature"][inner] == 2]] = 0     # feature 2 split on by one set alone
    a["threshold"][inner[1]] = np.nan
    a["feature"][inner[1]] = 2
    bits = np.zeros((len(a["feature"]), 1), dtype=np.uint64)
    bits[inner[1]] = category_bits_from_sets([{0, 2}], 4)[0]
    a["category_bits"] = bits
    return a


@pytest.mark.parametrize("categorical", [False, True])
def test_an_ensemble_of_stacked_trees_reads_them_as_an_ensemble_of_their_copies_does(stacked, categorical):
    """The ensemble made of trees made stacked takes their stacked arrays as they are
    (``flatwalk._stack``): everything it holds is what it holds made of the same trees one by one."""
    arrays, meta = stacked
    if categorical:
        arrays = _with_categories(arrays, meta)
        meta = {**meta, "categories": [None, None, ["a", "b", "c"]]}
    fast = TreeEnsemble.from_arrays(arrays, meta)
    plain = TreeEnsemble.from_arrays(arrays, meta)
    plain = TreeEnsemble(tuple(Tree(*(getattr(t, f) for f in FIELDS)) for t in plain.trees),
                         **{k: getattr(fast, k) for k in ("n_features", "feature_names", "task", "aggregation", "link",
                                                          "base_score", "classes", "categories")})
    assert type(fast.trees) is tuple
    assert fast._flat.keys() == plain._flat.keys()
    for k in fast._flat:
        x, y = fast._flat[k], plain._flat[k]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), k
        else:
            assert x == y, k
    X = np.random.default_rng(1).normal(size=(50, 3))
    X[::7, 0] = np.nan
    if categorical:
        X[:, 2] = np.arange(50) % 4
    assert np.array_equal(fast.predict_raw(X), plain.predict_raw(X))


def test_trees_made_stacked_pickle_as_a_plain_tuple(stacked):
    import pickle

    arrays, _ = stacked
    once = _at_once(arrays)
    again = pickle.loads(pickle.dumps(once))
    assert type(again) is tuple and len(again) == len(once)
    assert all(a.threshold.tobytes() == b.threshold.tobytes() for a, b in zip(once, again))


def test_split_levels_are_each_features_distinct_thresholds(stacked):
    arrays, meta = stacked
    a = {k: v.copy() for k, v in arrays.items()}
    inner = np.flatnonzero(a["children_left"] >= 0)
    a["threshold"][inner[:3]] = [0.0, -0.0, 0.25]         # equal levels, one signed zero
    a["feature"][inner[:3]] = [1, 1, 1]
    ens = TreeEnsemble.from_arrays(a, meta)
    f, t = ens._flat["feature_raw"], ens._flat["threshold_raw"]
    for j in range(ens.n_features):
        got = ens.split_levels(j)
        assert np.array_equal(got, np.unique(t[(f == j) & ~np.isnan(t)]))
        got[:] = 99.0                                      # the caller's own copy
        assert not np.any(ens.split_levels(j) == 99.0)


def test_a_stacked_trees_views_are_made_when_first_read_and_pickled_as_its_own(stacked):
    """A tree made stacked holds no views of its own until an array of it is read (an ensemble
    reads its trees through the stacked arrays); read, pickled or copied, it is the tree made one
    by one, and it never carries the whole stack along with it."""
    import copy
    import pickle

    a, _ = stacked
    made = _at_once(a)
    alone = _one_by_one(a)
    assert all("_stacked" in t.__dict__ for t in made)
    TreeEnsemble(made, n_features=3, feature_names=("a", "b", "c"), task="classification", aggregation="sum",
                 link="sigmoid", base_score=np.zeros(1), classes=np.array([0, 1]))
    assert all("_stacked" in t.__dict__ for t in made)               # the ensemble read none of them
    first = made[0]
    assert len(pickle.dumps(first)) < len(pickle.dumps(alone[0])) + 200 < len(pickle.dumps(made))
    got = pickle.loads(pickle.dumps(first))
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(got, f), getattr(alone[0], f))
    assert "_stacked" not in got.__dict__ and "_stacked" not in copy.copy(made[1]).__dict__
    for t, one in zip(made, alone):
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(t, f), getattr(one, f))
    with pytest.raises(AttributeError):
        first.no_such_array  # noqa: B018
