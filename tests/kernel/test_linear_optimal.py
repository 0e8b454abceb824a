"""Optimal counterfactuals of linear models (core.solvers.linear) are proven optimal:
their costs equal an independent brute force on the grid of discrete values (the
continuous moves by a fractional knapsack, a multiplier bisection or an LP,
tests/linear_oracles.py) and a second formulation in the features themselves solved by
Gurobi, for l0, l1, their mix and squared l2; on binary, multinomial and regression
models, with fixed, increase-only, decrease-only, integer, binary and categorical
features; every point gets the target from the original scikit-learn pipeline."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import carried_data
from linear_oracles import Query, brute_force, gurobi_x_space
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC

from core.counterfactual import QueryError
from core.model import LinearModel, as_ensemble, as_model
from core.model.native import model_input
from core.optimal import optimal_counterfactual
from core.schema import FeatureSpec, Schema

NORMS = ["l1", "l0", {"l0": 0.1, "l1": 1.0}, "l2"]


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(50, 10, n), "b": rng.normal(0, 1, n), "n": rng.integers(0, 9, n).astype(float),
                       "flag": rng.integers(0, 2, n).astype(float), "job": rng.choice(["cook", "nurse", "pilot", "vet"], n)})
    score = (df.a - 50) / 10 + df.b - 0.3 * df.n + df.flag + df.job.map({"cook": -1, "nurse": 0, "pilot": 1, "vet": 2})
    return df, score + rng.normal(0, 0.5, n)


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """The fits and scores here are of a few hundred rows and columns: OpenBLAS's second thread
    adds nothing but its spinning while it waits (this module: 13.9 CPU-s with two threads,
    11.0 with one). The models, and so every comparison, are the same."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@functools.cache
def _fitted(kind: str, seed: int):
    """(data, score, pipeline) fitted once for the module: the norms' cases of a test read the
    same model (nothing here changes a fitted pipeline)."""
    df, score = _data(seed=seed)
    if kind == "multinomial":
        return df, score, _pipe(LogisticRegression(max_iter=2000)).fit(df, np.digitize(score, [-1.0, 1.0]))
    est = LogisticRegression(max_iter=1000) if kind == "logistic" else LinearSVC()
    return df, score, _pipe(est).fit(df, (score > 0).astype(int))


def _pipe(est):
    pre = ColumnTransformer([("num", StandardScaler(), ["a", "b", "n", "flag"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    return Pipeline([("pre", pre), ("m", est)])


def _schema(lin: LinearModel) -> Schema:
    kinds = {"a": ("numerical", 20, 80), "b": ("numerical", -3, 3), "n": ("integer", 0, 8), "flag": ("binary", 0, 1)}
    feats = []
    for j, name in enumerate(lin.feature_names):
        if lin.categories[j] is not None:
            feats.append(FeatureSpec(name, "categorical", 0, len(lin.categories[j]),
                                     levels=tuple(str(c) for c in lin.categories[j])))
        else:
            k, lo, hi = kinds[name]
            feats.append(FeatureSpec(name, k, lo, hi))
    return Schema(tuple(feats))


def _codes(lin: LinearModel, df: pd.DataFrame) -> np.ndarray:
    return np.column_stack([df[c].to_numpy(float) if lin.categories[j] is None else
                            np.array([list(lin.categories[j]).index(v) for v in df[c]], dtype=float)
                            for j, c in enumerate(lin.feature_names)])


def _query(lin, schema, x_hat, rows, rhs, norm, fixed=(), inc=(), dec=(), weights=None) -> Query:
    mix = {"l0": (1, 0, 0), "l1": (0, 1, 0), "l2": (0, 0, 1)}
    l0, l1, l2 = mix[norm] if isinstance(norm, str) else (norm.get("l0", 0), norm.get("l1", 0), norm.get("l2", 0))
    d = lin.n_features
    lo, hi, kind, codes = np.zeros(d), np.zeros(d), [], []
    for j, f in enumerate(schema.features):
        lo[j], hi[j] = min(f.lower, x_hat[j]), max(f.upper, x_hat[j])
        if f.name in inc:
            lo[j] = x_hat[j]
        if f.name in dec:
            hi[j] = x_hat[j]
        if lin.categories[j] is not None:
            kind.append("categorical")
            codes.append([int(x_hat[j])] if f.name in fixed else list(range(len(lin.categories[j]))))
            continue
        codes.append(None)
        kind.append("fixed" if f.name in fixed else "integer" if f.kind in ("integer", "binary") else "continuous")
    wu, wd = np.ones(d), np.ones(d)
    for name, (down, up) in (weights or {}).items():
        j = lin.feature_names.index(name)
        wd[j], wu[j] = down, up
    return Query(lin.coef, lin.intercept, list(lin.category_scores), np.asarray(rows, float), np.asarray(rhs, float),
                 x_hat.copy(), lo, hi, kind, codes, schema.arrays()["span"], l0, l1, l2, wu, wd)


def _gets(pipe, lin, x, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = pipe.predict(model_input(lin, x[None, :]))[0]
    if isinstance(target, tuple):
        return target[0] <= out <= target[1]
    return out == target


def _check(pipe, lin, schema, x_hat, target, rows, rhs, norm, **roles):
    res = optimal_counterfactual(lin, x_hat, target, schema=schema, norm=norm, model=pipe,
                                 fixed=list(roles.get("fixed", [])), increase_only=list(roles.get("inc", [])),
                                 decrease_only=list(roles.get("dec", [])), weights=roles.get("weights"))
    q = _query(lin, schema, x_hat, rows, rhs, norm, **roles)
    assert res.status == "optimal" and res.found, res.message
    assert res.guarantee is not None and res.guarantee.kind == "proven_optimal" and res.guarantee.model_kind == "linear"
    assert _gets(pipe, lin, res.x, target)
    for name in roles.get("fixed", []):
        j = lin.feature_names.index(name)
        assert res.x[j] == x_hat[j]
    for name in roles.get("inc", []):
        assert res.x[lin.feature_names.index(name)] >= x_hat[lin.feature_names.index(name)]
    for name in roles.get("dec", []):
        assert res.x[lin.feature_names.index(name)] <= x_hat[lin.feature_names.index(name)]
    for j, f in enumerate(schema.features):
        if f.kind in ("integer", "binary", "categorical"):
            assert res.x[j] == np.floor(res.x[j])
        if f.kind == "binary":
            assert res.x[j] in (0.0, 1.0)
    second = gurobi_x_space(q)
    assert res.cost == pytest.approx(second, rel=1e-6, abs=1e-9), (res.cost, second)
    if not (q.l2 > 0 and len(q.rhs) > 1):
        brute, _ = brute_force(q)
        assert res.cost == pytest.approx(brute, rel=1e-6, abs=1e-9), (res.cost, brute)
    # the point shown is within the shown tolerance of the infimum
    assert q.cost_of(res.x) <= res.cost + 3e-4 * len(x_hat) + 1e-9     # weights up to 3
    return res


ROLES = [{}, {"fixed": ["b"]}, {"inc": ["a"], "dec": ["n"]}, {"fixed": ["job"], "inc": ["b"]},
         {"weights": {"a": (3.0, 0.5), "b": (0.2, 2.0), "n": (1.5, 0.7), "job": (2.0, 2.0)}}]


@pytest.mark.parametrize("norm", NORMS, ids=str)
@pytest.mark.parametrize("est", ["logistic", "svm"])
def test_binary_costs_equal_brute_force_and_a_second_formulation(norm, est):
    df, score, pipe = _fitted(est, 0)
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    pred = lin.predict(X)
    for k, i in enumerate(np.flatnonzero(pred == 0)[:5]):
        _check(pipe, lin, schema, X[i], 1, [[1.0]], [0.0], norm, **ROLES[k % len(ROLES)])
    for k, i in enumerate(np.flatnonzero(pred == 1)[:2]):      # towards the negative class: s <= 0
        _check(pipe, lin, schema, X[i], 0, [[-1.0]], [0.0], norm, **ROLES[(k + 1) % len(ROLES)])


@pytest.mark.parametrize("norm", NORMS, ids=str)
def test_multinomial_costs_equal_brute_force_and_a_second_formulation(norm):
    df, score, pipe = _fitted("multinomial", 1)
    lin = as_model(pipe)
    assert lin.link == "softmax" and lin.n_outputs == 3
    schema = _schema(lin)
    X = _codes(lin, df)
    pred = lin.predict(X)
    done = 0
    for k, i in enumerate(np.flatnonzero(pred != 2)[:5]):
        c = 2 if k % 2 == 0 else (1 if pred[i] != 1 else 0)
        rows = [np.eye(3)[c] - np.eye(3)[o] for o in range(3) if o != c]
        _check(pipe, lin, schema, X[i], c, rows, [0.0, 0.0], norm, **ROLES[k % len(ROLES)])
        done += 1
    assert done == 5


@pytest.mark.parametrize("norm", NORMS, ids=str)
def test_regression_costs_equal_brute_force_and_a_second_formulation(norm):
    df, score = _data(seed=2)
    pipe = _pipe(Ridge(alpha=1.0)).fit(df, 10 * score + 100)
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    pred = lin.predict(X)
    hi_q = float(np.quantile(pred, 0.75))
    for k, i in enumerate(np.flatnonzero(pred < np.quantile(pred, 0.3))[:5]):
        target = (hi_q, hi_q + 5.0)
        _check(pipe, lin, schema, X[i], target, [[1.0], [-1.0]], [target[0], -target[1]], norm,
               **ROLES[k % len(ROLES)])


@functools.cache
def _adult():
    df = pd.read_csv(carried_data("adult_sample.csv"), skiprows=[1])
    y = df.pop("Class")
    cats = ["MaritalStatus", "NativeCountry", "Occupation", "Relationship", "Sex", "WorkClass"]
    nums = [c for c in df.columns if c not in cats]
    pre = ColumnTransformer([("num", StandardScaler(), nums), ("cat", OneHotEncoder(handle_unknown="ignore"), cats)])
    pipe = Pipeline([("pre", pre), ("lr", LogisticRegression(max_iter=3000))]).fit(df, y)
    return df, pipe


@pytest.mark.parametrize("norm", NORMS, ids=str)
def test_adult_pipeline_costs_equal_brute_force_and_a_second_formulation(norm):
    df, pipe = _adult()
    lin = as_model(pipe)
    X = _codes(lin, df)
    feats = []
    for j, name in enumerate(lin.feature_names):
        if lin.categories[j] is not None:
            feats.append(FeatureSpec(name, "categorical", 0, len(lin.categories[j]),
                                     levels=tuple(str(c) for c in lin.categories[j])))
        else:
            kind = "integer" if name in ("Age", "HoursPerWeek") else "numerical"
            feats.append(FeatureSpec(name, kind, float(df[name].min()), float(df[name].max())))
    schema = Schema(tuple(feats))
    free = {"CapitalGain", "CapitalLoss", "EducationNumber", "HoursPerWeek", "Relationship"}
    fixed = [n for n in lin.feature_names if n not in free]
    pred = lin.predict(X)
    assert (pred == pipe.predict(df)).all()
    for k, i in enumerate(np.flatnonzero(pred == 0)[:3]):
        roles = {"fixed": fixed, "inc": ["CapitalGain"] if k == 1 else [], "dec": ["CapitalLoss"] if k == 2 else []}
        _check(pipe, lin, schema, X[i], 1, [[1.0]], [0.0], norm, **roles)


def test_margin_is_a_bound_on_the_logit_and_other_links_refuse_it():
    df, score = _data(seed=3)
    pipe = _pipe(LogisticRegression(max_iter=1000)).fit(df, (score > 0).astype(int))
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    i = int(np.flatnonzero(lin.predict(X) == 0)[0])
    plain = optimal_counterfactual(lin, X[i], 1, schema=schema, model=pipe)
    sure = optimal_counterfactual(lin, X[i], 1, schema=schema, model=pipe, margin=0.8)
    assert sure.found and sure.cost > plain.cost
    assert pipe.predict_proba(model_input(lin, sure.x[None, :]))[0, 1] >= 0.8 - 1e-12
    q = _query(lin, schema, X[i], [[1.0]], [np.log(0.8 / 0.2)], "l1")
    assert sure.cost == pytest.approx(brute_force(q)[0], rel=1e-6)
    svm = as_model(_pipe(LinearSVC()).fit(df, (score > 0).astype(int)))
    with pytest.raises(QueryError, match="margin needs a binary logistic"):
        optimal_counterfactual(svm, X[i], 1, margin=0.8)


def test_infeasible_query_names_what_blocks_it():
    df, score = _data(seed=4)
    pipe = _pipe(LogisticRegression(max_iter=1000)).fit(df, (score > 0).astype(int))
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    i = int(np.argmin(lin.decision_function(X)))
    res = optimal_counterfactual(lin, X[i], 1, schema=schema, model=pipe, fixed=["a", "b", "job"],
                                 decrease_only=["flag"])
    assert res.status == "infeasible" and not res.found
    assert res.guarantee.kind == "infeasible"
    assert "a, b, job fixed" in res.message and "flag decrease-only" in res.message


def test_only_integer_moves_clear_the_boundary():
    """No continuous feature may move: the strict side is met by a score margin, and the
    answer equals the brute force among points with a positive decision."""
    df, score = _data(seed=5)
    pipe = _pipe(LogisticRegression(max_iter=1000)).fit(df, (score > 0).astype(int))
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    solved = 0
    for i in np.flatnonzero(lin.predict(X) == 0)[:6]:
        res = optimal_counterfactual(lin, X[i], 1, schema=schema, model=pipe, fixed=["a", "b"])
        q = _query(lin, schema, X[i], [[1.0]], [1e-7], "l1", fixed=["a", "b"])
        brute, _ = brute_force(q)
        assert res.found == np.isfinite(brute)
        solved += res.found
        assert res.cost == pytest.approx(brute, rel=1e-9)
        assert not res.found or _gets(pipe, lin, res.x, 1)
    assert solved >= 2


def test_analyses_that_need_trees_refuse_a_linear_model_by_name():
    df, score = _data(seed=6)
    lin = as_model(_pipe(LogisticRegression(max_iter=1000)).fit(df, (score > 0).astype(int)))
    assert lin.kind == "linear"
    with pytest.raises(Exception, match="optimal counterfactual.*decision-region slices"):
        as_ensemble(lin)


def test_l2_without_gurobi_is_refused_with_the_reason(monkeypatch):
    import builtins

    df, score = _data(seed=7)
    pipe = _pipe(LogisticRegression(max_iter=1000)).fit(df, (score > 0).astype(int))
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    i = int(np.flatnonzero(lin.predict(X) == 0)[0])
    real = builtins.__import__

    def no_gurobi(name, *a, **k):
        if name == "gurobipy":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_gurobi)
    # continuous moves only and one row: exact by KKT, no Gurobi needed
    kkt = optimal_counterfactual(lin, X[i], 1, schema=schema, norm="l2", model=pipe, fixed=["n", "flag", "job"])
    assert kkt.status == "optimal" and kkt.backend == "kkt"
    with pytest.raises(QueryError, match="Gurobi"):
        optimal_counterfactual(lin, X[i], 1, schema=schema, norm="l2", model=pipe)


def test_one_row_kkt_solver_equals_an_lp_and_a_bisection():
    """The exact one-row solver (fractional knapsack / KKT) on random instances, ties of
    cost per gain included, equals scipy's LP (l1) and a bisection on the multiplier (l2)."""
    from linear_oracles import _quadratic
    from scipy.optimize import linprog

    from core.solvers.linear import _one_row

    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 7))
        gain = rng.choice([0.3, 0.64, 1.0, 2.5, 3.69], n) * rng.choice([1.0, 1.0, 0.1], n)
        cap = rng.choice([1.0, 2.0, 5.0, np.inf], n)
        c1 = rng.choice([0.0, 0.125, 0.2, 1.0], n) * (trial % 3 != 0)
        need = float(rng.uniform(0.1, 0.99) * np.sum(gain * np.where(np.isfinite(cap), cap, 3.0)))
        d = _one_row(gain, cap, c1 if trial % 2 else c1 + 1e-3, np.zeros(n), need)
        costs = c1 if trial % 2 else c1 + 1e-3
        lp = linprog(costs, A_ub=-gain[None, :], b_ub=[-need], bounds=list(zip(np.zeros(n), cap)), method="highs")
        assert lp.status == 0 and d is not None
        assert np.all((d >= 0) & (d <= cap)) and gain @ d >= need * (1 - 1e-12)
        assert costs @ d == pytest.approx(lp.fun, rel=1e-9, abs=1e-12)
        c2 = rng.choice([0.5, 1.0, 4.0], n)
        dq = _one_row(gain, cap, c1, c2, need)
        ref, _ = _quadratic(gain, np.where(np.isfinite(cap), cap, 1e12), c1, c2, need)
        assert gain @ dq >= need * (1 - 1e-9)
        assert c1 @ dq + c2 @ (dq * dq) == pytest.approx(ref, rel=1e-7)
    assert _one_row(np.array([1.0, 2.0]), np.array([1.0, 1.0]), np.ones(2), np.zeros(2), 3.5) is None


@pytest.mark.parametrize("norm", ["l1", "l0", {"l0": 0.1, "l1": 1.0}])
def test_one_hot_groups_cost_as_the_categorical_feature_they_encode(norm):
    """The same logistic model on a categorical feature (a pipeline's encoder) and on its
    one-hot columns (a schema group): the same optimal costs and the same points."""
    df, score, pipe = _fitted("logistic", 8)
    lin = as_model(pipe)
    schema = _schema(lin)
    X = _codes(lin, df)
    jc = lin.feature_names.index("job")
    levels = list(lin.categories[jc])
    hot = pd.DataFrame({f"job={v}": (df.job == v).astype(float) for v in levels})
    wide = pd.concat([df[["a", "b", "n", "flag"]], hot], axis=1)
    est = LogisticRegression().fit(wide, (score > 0).astype(int))
    est.coef_ = np.concatenate([lin.coef[:, :jc], lin.category_scores[jc][:-1].T], axis=1)
    est.intercept_ = lin.intercept.copy()
    flat = as_model(est)
    feats = [f for f in schema.features if f.name != "job"] + [
        FeatureSpec(c, "one-hot", 0, 1, group="job") for c in hot.columns]
    wide_schema = Schema(tuple(feats))
    W = wide.to_numpy(float)
    for i in np.flatnonzero(lin.predict(X) == 0)[:4]:
        a = optimal_counterfactual(lin, X[i], 1, schema=schema, norm=norm, model=pipe, fixed=["b"])
        b = optimal_counterfactual(flat, W[i], 1, schema=wide_schema, norm=norm, model=est, fixed=["b"])
        assert a.status == b.status == "optimal"
        assert a.cost == pytest.approx(b.cost, rel=1e-6, abs=1e-9)
        assert b.x[4:].sum() == 1 and est.predict(pd.DataFrame([b.x], columns=wide.columns))[0] == 1
