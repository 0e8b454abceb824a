"""One vocabulary across the analyses (issue #40 item 2).

One resolver of feature names (a linear model's too, with the closest names); the
three roles keyword-only, with a message naming the keyword settings when given by
position; ``n_jobs`` means processes of our own pool everywhere (the counterfactual
rules' forest threads are ``n_workers``, ``n_jobs`` a deprecated alias); FCCA takes
the cost as ``norm=`` like every analysis, ``lambda0/1/2`` kept as aliases giving the
same answers; the same setting has the same default everywhere (core.settings)."""

from __future__ import annotations

import inspect
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from core import (
    CounterfactualRules,
    TCREx,
    counterfactual_set,
    exact_counterfactual,
    fcca,
    from_model,
    infer_schema,
    optimal_counterfactual,
    run_audit,
)
from core.audit.compare import compare_models
from core.audit.story import case_story
from core.errors import AuditError, FCCAError, QueryError, SchemaError
from core.model import as_model
from core.regions import projection_regions, slice_regions
from core.settings import RANDOM_STATE, ROW_TIME_LIMIT, TIME_LIMIT
from core.solvers.linear_regions import linear_slice

NAMES = ["age", "income", "debt", "hours"]


@pytest.fixture(scope="module")
def f():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=NAMES)
    y = ((X.income - X.debt + 0.3 * X.age) > 0).astype(int)
    lr = LogisticRegression().fit(X, y)
    rf = RandomForestClassifier(8, max_depth=3, random_state=0).fit(X, y)
    return X, y.to_numpy(), lr, rf


def test_a_linear_model_resolves_names_with_the_one_resolver(f):
    X, y, lr, _ = f
    lin = as_model(lr)
    assert lin.feature_index("debt") == lin.feature_index(2) == 2
    with pytest.raises(SchemaError, match="Did you mean 'age'"):
        lin.feature_index("agee")
    with pytest.raises(SchemaError, match="outside 0..3"):
        lin.feature_index(7)
    x = X.to_numpy(float)[0]
    with pytest.raises(QueryError, match="Did you mean 'income'"):
        linear_slice(lr, x, ("age", "incme"))
    with pytest.raises(QueryError, match="Did you mean 'debt'"):
        optimal_counterfactual(lr, x, 1 - int(lr.predict(x[None])[0]), fixed=["dept"])
    sl = linear_slice(lr, x, ("age", 1))
    assert sl.features == (0, 1)


def test_the_roles_are_keyword_only_with_a_clear_message(f):
    X, y, _, rf = f
    cr = CounterfactualRules(n_estimators=5, max_depth=4).fit(X, rf.predict(X))
    assert cr.candidate_units(fixed=["age"]) == cr.candidate_units(fixed=[0])
    with pytest.raises(QueryError, match="keyword-only.*fixed=") as got:
        cr.candidate_units(["age"])
    assert "positional" in str(got.value) and isinstance(got.value, TypeError)      # what Python would raise
    assert type(got.value).__module__ == "core.errors"
    assert pickle.loads(pickle.dumps(got.value)).args == got.value.args             # crosses a process
    for fn in (optimal_counterfactual, exact_counterfactual, counterfactual_set, cr.local_rule, cr.regional_rules,
               cr.evaluate, cr.candidate_units, cr.minimal_divergent_explanations, TCREx.fit):
        params = inspect.signature(fn).parameters
        roles = [r for r in ("fixed", "increase_only", "decrease_only") if r in params]
        assert "fixed" in roles, fn                                   # every one of them takes fixed
        assert all(params[r].kind is inspect.Parameter.KEYWORD_ONLY for r in roles), (fn, roles)
    assert "fixed" in inspect.signature(TCREx.fit).parameters


def test_n_jobs_means_processes_and_the_rules_forest_threads_are_n_workers(f):
    X, y, _, rf = f
    cr = CounterfactualRules(n_estimators=5, max_depth=4, n_workers=2).fit(X, rf.predict(X))
    assert cr.surrogate_.n_jobs == 2 and cr.n_workers == 2
    with pytest.warns(DeprecationWarning, match="n_workers"):
        old = CounterfactualRules(n_estimators=5, max_depth=4, n_jobs=2)
    assert old.n_workers == 2 and old.fit(X, rf.predict(X)).surrogate_.n_jobs == 2
    with pytest.raises(QueryError, match="threads"):
        CounterfactualRules(n_workers=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CounterfactualRules()                       # the default warns nothing


def test_fcca_takes_norm_like_every_analysis(f):
    X, y, _, rf = f
    ens = from_model(rf)
    base = fcca(ens, X, y, max_points=12, n_jobs=1)
    mixed = fcca(ens, X, y, max_points=12, n_jobs=1, norm={"l0": 0.1, "l1": 1.0})
    np.testing.assert_allclose(mixed.costs, base.costs, rtol=1e-9)
    pd.testing.assert_frame_equal(mixed.thresholds, base.thresholds)
    l1 = fcca(ens, X, y, max_points=12, n_jobs=1, norm="l1")
    alias = fcca(ens, X, y, max_points=12, n_jobs=1, lambda0=0.0, lambda1=1.0, lambda2=0.0)
    np.testing.assert_allclose(l1.costs, alias.costs, rtol=1e-9)
    assert l1.params["lambda0"] == 0.0 and l1.params["lambda1"] == 1.0
    half = fcca(ens, X, y, max_points=12, n_jobs=1, lambda0=0.1)           # one alias: the others default
    np.testing.assert_allclose(half.costs, base.costs, rtol=1e-9)
    assert len(l1.rows) > 0
    for x, xc in zip(l1.x0, l1.x_ce):
        assert rf.predict(xc[None, :])[0] != rf.predict(x[None, :])[0]      # fed back to the model
    with pytest.raises(FCCAError, match="not both"):
        fcca(ens, X, y, norm="l1", lambda0=0.2)
    with pytest.raises(FCCAError, match="norm"):
        fcca(ens, X, y, norm="l3")


def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_the_same_setting_has_the_same_default():
    for fn in (optimal_counterfactual, exact_counterfactual, counterfactual_set, slice_regions, projection_regions,
               case_story):
        assert _default(fn, "time_limit") == TIME_LIMIT, fn
    for fn in (fcca, run_audit, compare_models):
        assert _default(fn, "time_limit") == ROW_TIME_LIMIT, fn
    for fn in (run_audit, compare_models, TCREx, CounterfactualRules):
        assert _default(fn, "random_state") == RANDOM_STATE, fn


def test_the_estimators_answer_the_same_twice_by_default(f):
    X, y, _, rf = f
    pred = rf.predict(X)
    a = CounterfactualRules(n_estimators=5, max_depth=4).fit(X, pred)
    b = CounterfactualRules(n_estimators=5, max_depth=4).fit(X, pred)
    x = X.to_numpy(float)[int(np.flatnonzero(pred == 0)[0])]
    ra, rb = a.local_rule(x, 1), b.local_rule(x, 1)
    np.testing.assert_array_equal(ra.lower, rb.lower)
    np.testing.assert_array_equal(ra.upper, rb.upper)
    t1 = TCREx(rho=0.05, n_trees=3).fit(X, pred, 1)
    t2 = TCREx(rho=0.05, n_trees=3).fit(X, pred, 1)
    assert t1.to_text() == t2.to_text()


def test_the_comparison_resolves_protected_columns_like_the_audit(f):
    X, y, _, rf = f
    Xs = X.assign(sex=(X.age > 0).astype(float))
    a = from_model(RandomForestClassifier(4, max_depth=3, random_state=0).fit(Xs, y))
    b = from_model(RandomForestClassifier(4, max_depth=3, random_state=1).fit(Xs, y))
    schema = infer_schema(Xs, protected=["sex"])
    with pytest.raises(AuditError, match="Did you mean 'sex'"):
        compare_models(a, b, Xs, schema=schema, target=1, protected=["sexx"], max_rows=5, n_jobs=1)
    with pytest.raises(AuditError, match="Did you mean 'sex'"):
        run_audit(a, Xs, schema=schema, target=1, protected=["sexx"], max_rows=5, n_jobs=1)
    by_index = compare_models(a, b, Xs, schema=schema, target=1, protected=[4], max_rows=5, n_jobs=1,
                              time_limit=20)
    by_name = compare_models(a, b, Xs, schema=schema, target=1, protected=["sex"], max_rows=5, n_jobs=1,
                             time_limit=20)
    assert by_index.params["protected"] == by_name.params["protected"] == {"sex": ["sex"]}
