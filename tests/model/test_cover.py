"""The verification's probe rows reach every leaf a row can reach (issue 62, item 2).

Random points and points on thresholds left leaves unreached (386 of 7,456 in a 500-tree
XGBoost, 16,395 of 48,271 in a random forest), and a misreading confined to one of them passed
the verification. :func:`core.intake.parsing.covered_probe_points` adds rows made for the
leaves missed (:mod:`core.model.cover`). Here: every leaf of models with numbers, missing
values and categories is reached (exported to ONNX: tests/intake/test_onnx_cover.py), and of
a forest grown in full in rows near the fewest possible; a leaf no row can reach is counted, not covered; the compiled rows and the numpy
ones are the same; the kernel refuses what it cannot read; and a leaf value misread where
no random probe row goes is now refused.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from core.errors import UnsupportedModelError
from core.intake.models import from_model
from core.intake.parsing import covered_probe_points, probe_points, verify_against_source
from core.model import Tree, TreeEnsemble, flatwalk
from core.model.cover import covering_rows, reached_leaves


def _data(n=600, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = ((X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] ** 2) > 0.4).astype(int)
    return X, y


def _random_forest():
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data()
    return RandomForestClassifier(30, max_depth=9, random_state=0).fit(X, y)


def _xgboost_with_missing():
    import xgboost as xgb

    X, y = _data(seed=1)
    X[np.random.default_rng(2).random(X.shape) < 0.2] = np.nan
    return xgb.XGBClassifier(n_estimators=40, max_depth=5, n_jobs=1).fit(X, y)


def _lightgbm_with_categories():
    import lightgbm as lgb

    X, y = _data(seed=3)
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    df["c"] = pd.Categorical(np.random.default_rng(4).integers(0, 7, len(df)))
    y = (y + (df["c"].cat.codes.to_numpy() % 3 == 0)) % 2
    return lgb.LGBMClassifier(n_estimators=40, num_leaves=24, min_child_samples=5, verbose=-1,
                              n_jobs=1).fit(df, y)


def _hgb_with_categories_and_missing():
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _data(seed=5)
    X[np.random.default_rng(6).random(X.shape) < 0.15] = np.nan
    X[:, 5] = np.random.default_rng(7).integers(0, 5, len(X))
    y = (y + (X[:, 5] == 2)) % 2
    return HistGradientBoostingClassifier(max_iter=30, categorical_features=[5], random_state=0).fit(X, y)


MODELS = {"random forest": _random_forest, "xgboost, missing values": _xgboost_with_missing,
          "lightgbm, a categorical feature": _lightgbm_with_categories,
          "hist gradient boosting, categories and missing values": _hgb_with_categories_and_missing}


def _unreached(ens, X):
    """The leaves (packed indices) no row of ``X`` reaches."""
    _, seen = reached_leaves(ens, X)
    return np.flatnonzero((ens._flat["packed"]["feature"] == -1) & (seen == 0))


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    m = MODELS[request.param]()
    return m, from_model(m)


def test_every_leaf_is_reached_by_the_probe_rows(model):
    _, ens = model
    missed = _unreached(ens, probe_points(ens))
    assert missed.size > 0, "the random and threshold rows alone reach every leaf: no test of the covering"
    X, raw, cover = covered_probe_points(ens)
    assert cover.covered == missed.size and cover.dead == cover.left == 0
    assert _unreached(ens, X).size == 0
    assert len(X) == len(probe_points(ens)) + cover.rows and cover.rows < missed.size
    np.testing.assert_array_equal(raw, ens.predict_raw(X))


def test_the_compiled_and_numpy_rows_are_the_same(model, monkeypatch):
    _, ens = model
    X = probe_points(ens)
    _, seen = reached_leaves(ens, X)
    rows, cover = covering_rows(ens, seen, X[:64], 1e307)
    monkeypatch.setattr(flatwalk, "USE_COMPILED", False)
    _, seen_numpy = reached_leaves(ens, X)
    np.testing.assert_array_equal(seen_numpy, seen)
    rows_numpy, cover_numpy = covering_rows(ens, seen, X[:64], 1e307)
    assert cover_numpy == cover
    np.testing.assert_array_equal(rows_numpy, rows)


def test_a_leaf_misread_where_no_random_row_goes_is_refused(model):
    """The ensemble read with one leaf value changed, a leaf the random and threshold rows miss:
    the verification let it through before the covering rows."""
    m, ens = model
    fl = ens._flat
    node = int(fl["packed_to_node"][_unreached(ens, probe_points(ens))[0]])
    tree = int(np.searchsorted(fl["offsets"], node, side="right") - 1)
    t = ens.trees[tree]
    value = t.value.copy()
    value[node - fl["offsets"][tree]] += 0.5
    trees = list(ens.trees)
    trees[tree] = Tree(t.children_left, t.children_right, t.feature, t.threshold, value, t.category_bits,
                       t.missing_left)
    misread = replace(ens, trees=tuple(trees))
    verify_against_source(ens, m)
    with pytest.raises(UnsupportedModelError, match="differ from the library's own"):
        verify_against_source(misread, m)


def _one_tree(threshold, missing_left=None, categories=()):
    """Root: x0 <= 0; its left child: x0 <= threshold[1] (or a category set on x1)."""
    tree = Tree(children_left=np.array([1, 3, -1, -1, -1]), children_right=np.array([2, 4, -1, -1, -1]),
                feature=np.array([0, 0, -1, -1, -1]), threshold=np.array(threshold, dtype=float),
                value=np.arange(5.0)[:, None], missing_left=missing_left)
    return TreeEnsemble((tree,), 2, ("x0", "x1"), "regression", "sum", "identity", np.zeros(1),
                        categories=categories)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_leaf_no_number_reaches_is_dead_unless_a_missing_value_does(compiled, monkeypatch):
    monkeypatch.setattr(flatwalk, "USE_COMPILED", compiled)
    # under x0 <= 0, "x0 > 1" is empty: node 4 has no number
    ens = _one_tree([0.0, 1.0, np.nan, np.nan, np.nan])
    seen = np.zeros(ens._flat["packed"].shape[0], dtype=np.uint8)
    rows, cover = covering_rows(ens, seen, np.zeros((1, 2)), 1e307)
    assert (cover.covered, cover.dead) == (2, 1)
    leaf_of = ens._flat["packed_to_node"][reached_leaves(ens, rows)[1].nonzero()[0]]
    assert set(leaf_of.tolist()) == {2, 3}
    # NaN goes left at the root and right under it: a missing x0 reaches node 4
    routed = _one_tree([0.0, 1.0, np.nan, np.nan, np.nan], missing_left=np.array([True, False, False, False, False]))
    rows, cover = covering_rows(routed, seen, np.zeros((1, 2)), 1e307)
    assert (cover.covered, cover.dead) == (3, 0)
    assert np.isnan(rows).any()
    _, reached = reached_leaves(routed, rows)
    assert set(routed._flat["packed_to_node"][reached.nonzero()[0]].tolist()) == {2, 3, 4}


@pytest.mark.parametrize("compiled", [True, False])
def test_category_sets_give_codes_and_an_empty_set_is_dead(compiled, monkeypatch):
    monkeypatch.setattr(flatwalk, "USE_COMPILED", compiled)
    bits = np.zeros((5, 1), dtype=np.uint64)
    bits[0, 0] = 0b0110          # root: codes 1 and 2 go left
    bits[1, 0] = 0b1000          # its left child: code 3 goes left, which no code under the root has
    tree = Tree(children_left=np.array([1, 3, -1, -1, -1]), children_right=np.array([2, 4, -1, -1, -1]),
                feature=np.array([1, 1, -1, -1, -1]), threshold=np.array([np.nan] * 5), value=np.arange(5.0)[:, None],
                category_bits=bits)
    ens = TreeEnsemble((tree,), 2, ("x0", "c"), "regression", "sum", "identity", np.zeros(1),
                       categories=(None, ("a", "b", "c", "d", "e")))
    seen = np.zeros(ens._flat["packed"].shape[0], dtype=np.uint8)
    rows, cover = covering_rows(ens, seen, np.zeros((1, 2)), 1e307)
    assert (cover.covered, cover.dead) == (2, 1)
    assert set(rows[:, 1].tolist()) <= {0.0, 1.0, 2.0, 4.0, 5.0} and rows[:, 1].tolist().count(1.0) == 1
    _, reached = reached_leaves(ens, rows)
    assert set(ens._flat["packed_to_node"][reached.nonzero()[0]].tolist()) == {2, 4}


def _cover_args(ens, **swap):
    fl = ens._flat
    d = ens.n_features
    args = dict(nodes=fl["packed"], roots=fl["packed_roots"], bits=fl["packed_bits"],
                seen=np.zeros(fl["packed"].shape[0], dtype=np.uint8), codes=np.full(d, -1, dtype=np.int64),
                kind=np.empty((8, d), dtype=np.int8), lo=np.empty((8, d)), hi=np.empty((8, d)))
    args.update(swap)
    return (args["nodes"], args["roots"], args["bits"], args["seen"], args["codes"], 1e307, True, 10**6,
            args["kind"], args["lo"], args["hi"])


def test_the_kernel_refuses_what_it_cannot_read():
    from core.model.flatwalk import _treewalk

    assert _treewalk is not None, "build the kernels: setup.py build_ext"
    ens = _one_tree([0.0, 1.0, np.nan, np.nan, np.nan])
    assert _treewalk.cover(*_cover_args(ens))[:4] == (2, 2, 1, 0)
    damaged = ens._flat["packed"].copy()
    damaged["left"][0] = 7
    n = ens._flat["packed"].shape[0]
    for swap, match in [({"seen": np.zeros(n + 1, dtype=np.uint8)}, "seen must hold one byte per node"),
                        ({"kind": np.empty((8, 3), dtype=np.int8)}, r"kind, lo and hi must have the shape"),
                        ({"lo": np.empty((4, 2))}, r"kind, lo and hi must have the shape"),
                        ({"roots": np.array([0, 0])}, "roots must rise inside the nodes"),
                        ({"nodes": damaged}, "the node array is damaged"),
                        ({"seen": np.zeros(n, dtype=np.int64)}, "seen must be a 1-D array of uint8"),
                        ({"kind": np.empty((8, 2), dtype=np.int8)[:, ::-1]}, "kind must be a C-contiguous")]:
        with pytest.raises(ValueError, match=match):
            _treewalk.cover(*_cover_args(ens, **swap))
    assert _treewalk.cover(*_cover_args(ens, kind=np.empty((1, 2), dtype=np.int8), lo=np.empty((1, 2)),
                                        hi=np.empty((1, 2))))[:4] == (1, 1, 1, 1)      # the rows ran out


def test_the_numpy_rows_reach_at_most_their_share_and_count_the_rest(monkeypatch):
    from core.model import cover

    ens = from_model(_random_forest())
    X = probe_points(ens)
    _, seen = reached_leaves(ens, X)
    monkeypatch.setattr(flatwalk, "USE_COMPILED", False)
    monkeypatch.setattr(cover, "NUMPY_LEAVES", 25)
    rows, done = covering_rows(ens, seen, X[:64], 1e307)
    assert (done.covered, done.dead) == (25, 0) and done.left == _unreached(ens, X).size - 25
    assert 0 < _unreached(ens, np.vstack([X, rows])).size <= done.left     # (a row may reach more by chance)


def test_a_forest_grown_in_full_is_reached_in_rows_near_the_fewest_and_the_rows_are_bounded(monkeypatch):
    """Every leaf of deep trees (hundreds per tree, most missed by the probe rows) in fewer than
    twice the rows its largest tree needs at least (one row per leaf of it); then the rows capped
    (a 500-tree model's share, scaled down) and the steps, the leaves past them counted as left."""
    from sklearn.ensemble import RandomForestClassifier

    from core.model import cover

    X, y = _data(n=3000, seed=8)
    y = (y + (np.random.default_rng(9).random(len(y)) < 0.2)) % 2       # noise: the trees grow deep
    ens = from_model(RandomForestClassifier(8, random_state=0).fit(X, y))
    P = probe_points(ens)
    _, seen = reached_leaves(ens, P)
    missed = _unreached(ens, P)
    tree = np.searchsorted(ens._flat["packed_roots"], missed, side="right") - 1
    fewest = int(np.bincount(tree).max())
    assert missed.size > 2000 and fewest > 200
    rows, done = covering_rows(ens, seen, P[:64], 1e307)
    assert (done.covered, done.dead, done.left) == (missed.size, 0, 0) and done.rows < 2 * fewest
    assert _unreached(ens, np.vstack([P, rows])).size == 0
    full = done
    monkeypatch.setattr(cover, "MAX_STEPS", 8 * 100)
    monkeypatch.setattr(cover, "MIN_ROWS", 10)
    rows, done = covering_rows(ens, seen, P[:64], 1e307)
    assert done.rows == len(rows) == 100 and done.left == missed.size - done.covered > 0
    monkeypatch.undo()
    monkeypatch.setattr(cover, "MAX_WORK", full.steps // 3)            # the steps run out: no new row
    rows, done = covering_rows(ens, seen, P[:64], 1e307)
    assert 0 < done.rows < full.rows and done.left == missed.size - done.covered > 0
    assert full.steps // 3 <= done.steps < full.steps
    monkeypatch.setattr(cover, "MAX_WORK", 50)                          # spent judging the first leaves
    rows, done = covering_rows(ens, seen, P[:64], 1e307)
    assert (len(rows), done.covered, done.dead, done.left) == (0, 0, 0, missed.size) and done.steps < 100


@pytest.mark.parametrize("compiled", [True, False])
def test_codes_past_the_first_word_of_a_set(compiled, monkeypatch):
    """A feature of 150 categories: its sets span three 64-bit words."""
    monkeypatch.setattr(flatwalk, "USE_COMPILED", compiled)
    bits = np.zeros((5, 3), dtype=np.uint64)
    bits[0, 1] = np.uint64(1) << np.uint64(70 - 64)                    # root: codes 70 and 130 go left
    bits[0, 2] = np.uint64(1) << np.uint64(130 - 128)
    bits[1, 2] = np.uint64(1) << np.uint64(130 - 128)                  # then 130 left, 70 right
    tree = Tree(children_left=np.array([1, 3, -1, -1, -1]), children_right=np.array([2, 4, -1, -1, -1]),
                feature=np.array([0, 0, -1, -1, -1]), threshold=np.array([np.nan] * 5), value=np.arange(5.0)[:, None],
                category_bits=bits)
    ens = TreeEnsemble((tree,), 1, ("c",), "regression", "sum", "identity", np.zeros(1),
                       categories=(tuple(f"level {k}" for k in range(150)),))
    seen = np.zeros(ens._flat["packed"].shape[0], dtype=np.uint8)
    rows, cover = covering_rows(ens, seen, np.zeros((1, 1)), 1e307)
    assert (cover.rows, cover.covered, cover.dead, cover.left) == (3, 3, 0, 0)
    assert sorted(rows[:, 0].tolist()) == [0.0, 70.0, 130.0]
