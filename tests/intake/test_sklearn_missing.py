"""scikit-learn models fitted on data with missing values, read from their files
(issue 37, item 4).

scikit-learn (1.9) routes a NaN at each node to the side ``tree_.missing_go_to_left``
names, and its best splitter writes the split "every number left, NaN right" with the
threshold ``+inf``. Such files were refused as damaged ("node 2 has the threshold
inf"). Every family that takes NaN (decision trees, random forests, extra trees,
monotonic forests, Isolation Forest, HistGradientBoosting; classifiers and
regressors) is now read from its ``.skops`` file, in the sandbox and in process, and
predicts as scikit-learn does on rows with NaN in each column in turn (the other
columns exactly on thresholds), on a row with every value missing, on the training
rows and on rows exactly at the thresholds. GradientBoosting, which refuses NaN, is
read as refusing it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import skops.io as sio
from sklearn import ensemble as ske
from sklearn import tree as skt

from core.intake import io
from core.intake.models import from_model
from core.intake.sandbox import load_vetted
from core.model.tree import MISSING_ONLY


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).round(2)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    r = X[:, 0] * 2 + X[:, 3]
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.2] = np.nan
    Xn[:40, 3] = np.nan                                   # a column missing often
    return Xn, y, r


FAMILIES = {
    "tree": lambda: skt.DecisionTreeClassifier(max_depth=6, random_state=0),
    "tree-reg": lambda: skt.DecisionTreeRegressor(max_depth=6, random_state=0),
    "extra-tree": lambda: skt.ExtraTreeClassifier(max_depth=6, random_state=0),
    "forest": lambda: ske.RandomForestClassifier(8, max_depth=5, random_state=0),
    "forest-reg": lambda: ske.RandomForestRegressor(8, max_depth=5, random_state=0),
    "forest-monotonic": lambda: ske.RandomForestClassifier(8, max_depth=5, monotonic_cst=[1, 0, 0, -1],
                                                          random_state=0),
    "extra-trees": lambda: ske.ExtraTreesClassifier(8, max_depth=5, random_state=0),
    "extra-trees-reg": lambda: ske.ExtraTreesRegressor(8, max_depth=5, random_state=0),
    "iforest": lambda: ske.IsolationForest(n_estimators=8, random_state=0),
    "hgb": lambda: ske.HistGradientBoostingClassifier(max_iter=8, max_leaf_nodes=8, random_state=0),
    "hgb-reg": lambda: ske.HistGradientBoostingRegressor(max_iter=8, max_leaf_nodes=8, random_state=0),
}
#: the families whose splitter writes "every number left, NaN right" as a +inf threshold
BEST_SPLITTER = ("tree", "tree-reg", "forest", "forest-reg", "forest-monotonic")


def _fit(name):
    X, y, r = _data()
    return FAMILIES[name]().fit(X, r if name.endswith("-reg") else y), X


def _sk_trees(model):
    ests = getattr(model, "estimators_", [model])
    return [e.tree_ for e in np.ravel(np.asarray(ests, dtype=object))]


def _threshold_rows(model, X, rng, n=60):
    """Rows exactly on the model's thresholds (and on the float32 neighbours of each),
    column by column, the rest from the training rows."""
    if hasattr(model, "_predictors"):
        pairs = [(int(nd["feature_idx"]), float(nd["num_threshold"])) for it in model._predictors for p in it
                 for nd in p.nodes if not nd["is_leaf"]]
    else:
        feats = getattr(model, "estimators_features_", None)
        pairs = []
        for k, t in enumerate(_sk_trees(model)):
            inner = t.children_left >= 0
            for f, v in zip(t.feature[inner], t.threshold[inner]):
                pairs.append((int(feats[k][f]) if feats is not None else int(f), float(v)))
    pairs = [(f, v) for f, v in pairs if np.isfinite(v)]
    assert pairs
    rows = X[rng.integers(0, len(X), n)].copy()
    for i in range(n):
        f, v = pairs[int(rng.integers(len(pairs)))]
        v32 = np.float32(v)
        rows[i, f] = [v, float(v32), float(np.nextafter(v32, np.float32(np.inf))),
                      float(np.nextafter(v32, np.float32(-np.inf)))][i % 4]
    return rows


def _missing_rows(on):
    """Column j missing in row j (the others on thresholds), then every value missing."""
    d = on.shape[1]
    rows = on[:d + 1].copy()
    rows[np.arange(d), np.arange(d)] = np.nan
    rows[d] = np.nan
    return rows


def _ours_and_theirs(ens, model, X):
    if ens.task == "anomaly":
        return ens.score_samples(X), model.score_samples(X)
    if ens.is_classifier:
        return ens.predict_proba(X), model.predict_proba(X)
    return ens.predict(X), model.predict(X)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_model_fitted_with_missing_values_is_read_from_its_file_and_predicts_as_scikit_learn(name):
    model, X = _fit(name)
    data = sio.dumps(model)
    vetted = load_vetted(data, f"{name}.skops")                 # the app's path: the sandbox, then in process
    direct = from_model(io.load_model(data, f"{name}.skops"))   # a script's path
    assert vetted.ensemble.routes_missing and direct.routes_missing
    on = _threshold_rows(model, np.nan_to_num(X, nan=0.0), np.random.default_rng(1))
    rows = np.vstack([_missing_rows(on), X, on, np.where(np.isnan(X), X, on[:1].repeat(len(X), 0))[:50]])
    assert np.isnan(rows).all(axis=1).any() and all(np.isnan(rows[:, j]).any() for j in range(rows.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # feature names: the model was fitted on an array
        for ens, native in ((vetted.ensemble, vetted.model), (direct, model)):
            ours, theirs = _ours_and_theirs(ens, native, rows)
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12, err_msg=name)
            if ens.is_classifier:
                np.testing.assert_array_equal(ens.predict(rows), native.predict(rows))


@pytest.mark.parametrize("name", BEST_SPLITTER)
def test_the_infinite_threshold_is_read_as_a_split_of_missing_values_from_numbers(name):
    """scikit-learn's +inf threshold: every number goes left (MISSING_ONLY, the largest
    float64) and NaN to the side missing_go_to_left names, which is right."""
    model, _ = _fit(name)
    ens = from_model(io.load_model(sio.dumps(model), "m.skops"))
    seen = 0
    for t, tree in zip(_sk_trees(model), ens.trees):
        at = np.flatnonzero((tree.children_left >= 0) & np.isposinf(t.threshold))
        seen += at.size
        np.testing.assert_array_equal(tree.threshold[at], MISSING_ONLY)
        np.testing.assert_array_equal(tree.missing_left[at], t.missing_go_to_left[at].astype(bool))
        np.testing.assert_array_equal(tree.missing_left[at], False)
        inner = np.flatnonzero(tree.children_left >= 0)
        np.testing.assert_array_equal(tree.missing_left[inner], t.missing_go_to_left[inner].astype(bool))
    assert seen > 0, "the fitted model has no split of missing values from numbers to read"
    big = np.vstack([np.eye(4) * 3e38, np.eye(4) * -3e38])  # about the largest numbers scikit-learn takes
    np.testing.assert_allclose(*_ours_and_theirs(ens, model, big), rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", [ske.GradientBoostingClassifier, ske.GradientBoostingRegressor])
def test_gradient_boosting_refuses_missing_values_as_scikit_learn_does(cls):
    X, y, r = _data()
    model = cls(n_estimators=5, max_depth=3, random_state=0).fit(np.nan_to_num(X, nan=0.0),
                                                                  r if "Regressor" in cls.__name__ else y)
    ens = load_vetted(sio.dumps(model), "gb.skops").ensemble
    assert not ens.routes_missing
    row = np.array([[np.nan, 0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="NaN"):
        model.predict(row)
    with pytest.raises(ValueError, match="does not take missing values"):
        ens.predict(row)


def test_damaged_thresholds_and_flags_are_still_refused():
    from core.errors import ModelError
    from core.intake.parsing.validate import check_sklearn_trees

    model, _ = _fit("tree")
    t = model.tree_
    inner = int(np.flatnonzero(t.children_left >= 0)[0])
    for bad in (np.nan, -np.inf):
        nodes = t.__getstate__()["nodes"].copy()
        nodes["threshold"][inner] = bad
        state = {**t.__getstate__(), "nodes": nodes}
        t.__setstate__(state)
        with pytest.raises(ModelError, match=f"node {inner} has the threshold"):
            check_sklearn_trees(model, "m.skops")


def test_edits_of_the_missing_value_routing_are_refused_or_read_exactly():
    """The fuzz corpus's edits of a NaN-fitted forest's routing (``sklearn_missing_edits``):
    flipped flags and a new +inf split are consistent models, read exactly (rows with
    NaN in every column included); -inf or NaN thresholds and dropped flags are refused
    with a message, in process and through the app's sandbox."""
    from core.errors import AtlasError
    from tests.intake_mutations import sklearn_missing_edits

    model, X = _fit("forest")
    outcome = {}
    for case, data in sklearn_missing_edits(sio.dumps(model)):
        try:
            native = io.load_model(data, "m.skops")
            ens = from_model(native)                      # verified on the probe points, NaN rows included
        except AtlasError as exc:
            outcome[case] = "refused"
            with pytest.raises(AtlasError) as info:
                load_vetted(data, "m.skops")
            assert str(info.value) == str(exc) and "Traceback" not in str(exc), (case, str(exc))
            assert "threshold" in str(exc) or "dtype" in str(exc), (case, str(exc))
            continue
        outcome[case] = "accepted"
        rows = np.vstack([_missing_rows(np.nan_to_num(X[:10], nan=0.5)), X])
        np.testing.assert_allclose(*_ours_and_theirs(ens, native, rows), rtol=0, atol=1e-12, err_msg=case)
    assert outcome == {"missing_go_to_left flipped": "accepted", "a threshold made +inf": "accepted",
                       "+inf thresholds made -inf": "refused", "+inf thresholds made NaN": "refused",
                       "missing_go_to_left dropped": "refused"}, outcome
