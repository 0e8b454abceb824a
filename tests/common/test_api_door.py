"""The public API checks its inputs at the door (issue #37 item 6), and one resolver
turns feature names or indices into features everywhere (issue #40 item 2).

A table of bad calls across the public face: wrong types (a list where a DataFrame
is expected, a string for a row, a dict for a row, a 2-D array where a row is
expected, rows of the wrong length, text in numeric columns, None), unknown feature
names, empty tables, a target that is not among the classes or an interval upside
down, NaN / infinite / negative radii and time limits, process counts of 0 or
below, unknown norms. Each raises the analysis's own error class from
:mod:`core.errors` (never AttributeError, TypeError, KeyError, IndexError or a plain
ValueError) with a message that says what arrived and what to give, and names the
closest features for an unknown name.

Good calls keep working: names and indices give the same answers, a DataFrame or
a Series is read by name, and ``fixed`` / ``increase_only`` / ``decrease_only``
act in every analysis that takes them. Rows with missing values go through the
audit, FCCA and the batch of counterfactuals on a model trained with NaN, and every
counterfactual is fed back to the original model.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression

from core import (
    CounterfactualRules,
    Schema,
    TCREx,
    already_at_target,
    counterfactual_set,
    default_target,
    exact_counterfactual,
    fcca,
    from_model,
    infer_schema,
    optimal_counterfactual,
    run_audit,
)
from core.errors import (
    AtlasError,
    AuditError,
    DataError,
    FCCAError,
    NoCounterfactualRuleError,
    NotFittedError,
    NoValidRuleError,
    QueryError,
    SchemaError,
    UnsupportedModelError,
)
from core.model.features import feature_index
from core.optimal.batch import batch_counterfactuals, map_rows
from core.regions import projection_regions, slice_regions

NAMES = ["age", "income", "debt", "hours", "sex"]


@pytest.fixture(scope="module")
def f():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=NAMES[:4])
    X["hours"] = rng.integers(0, 60, len(X)).astype(float)
    X["sex"] = rng.integers(0, 2, len(X)).astype(float)
    y = ((X.income - X.debt + 0.3 * X.sex) > 0).astype(int)
    rf = RandomForestClassifier(8, max_depth=3, random_state=0).fit(X, y)
    gb = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    reg = RandomForestRegressor(5, max_depth=3, random_state=0).fit(X, 2 * X.income)
    ens, A = from_model(rf), X.to_numpy(float)
    pred = ens.predict(A)
    x = A[np.flatnonzero(pred == 0)[0]]
    schema = infer_schema(X, protected=["sex"])
    tc = TCREx(rho=0.05, random_state=0).fit(X, pred, 1)
    cr = CounterfactualRules(n_estimators=5, max_depth=4, random_state=0).fit(X, pred)
    nan_rows = A[:20].copy()
    nan_rows[3, 1] = np.nan
    lin = LogisticRegression().fit(X, y)
    return SimpleNamespace(X=X, A=A, y=y, rf=rf, lin=lin, ens=ens, gb=from_model(gb), reg=from_model(reg), pred=pred, x=x,
                           schema=schema, tc=tc, cr=cr, rule=cr.local_rule(x, 1), nan_rows=nan_rows,
                           other_schema=infer_schema(X.rename(columns={"debt": "loans"})))


@dataclass(frozen=True)
class Bad:
    """A bad call, the error class it must raise and words its message must hold."""

    name: str
    call: Callable[[Any], Any]
    error: type[Exception]
    says: tuple[str, ...] = ()


def _nan(v, j=1):
    v = np.array(v, dtype=float)
    v[j] = np.nan
    return v


def _inf(v, j=2):
    v = np.array(v, dtype=float)
    v[j] = np.inf
    return v


BAD = [
    # ------------------------------------------------------------ the ensemble
    Bad("predict: 3 of 5 columns", lambda f: f.ens.predict(f.A[:, :3]), SchemaError, ("(n_samples, 5)",)),
    Bad("predict: rows of 2 values", lambda f: f.ens.predict([[1, 2]]), SchemaError, ("2 columns", "5 features")),
    Bad("predict: a string", lambda f: f.ens.predict("abc"), SchemaError, ("table", "str")),
    Bad("predict: a dict", lambda f: f.ens.predict({"age": [1.0]}), SchemaError, ("dict", "pd.DataFrame")),
    Bad("predict: None", lambda f: f.ens.predict(None), SchemaError, ("None",)),
    Bad("predict: a 3-D array", lambda f: f.ens.predict(np.zeros((2, 5, 1))), SchemaError, ("shape",)),
    Bad("predict: text in a row", lambda f: f.ens.predict([["a", 1, 2, 3, 0]]), DataError, ("'a'", "'age'")),
    Bad("predict: a frame without debt", lambda f: f.ens.predict(f.X.drop(columns="debt")), SchemaError,
        ("'debt'",)),
    Bad("predict: a text column", lambda f: f.ens.predict(f.X.assign(age="old")), DataError,
        ("'age'", "not numeric")),
    Bad("predict: NaN, model refuses it", lambda f: f.gb.predict(f.nan_rows), DataError, ("missing", "impute")),
    Bad("predict_proba of a regressor", lambda f: f.reg.predict_proba(f.A), UnsupportedModelError,
        ("classifier",)),
    Bad("apply: rows of 3 values", lambda f: f.ens.apply([[1, 2, 3]]), SchemaError, ("3 columns",)),
    Bad("feature_index: a misspelt name", lambda f: f.ens.feature_index("incme"), SchemaError, ("'income'",)),
    Bad("feature_index: index 9", lambda f: f.ens.feature_index(9), SchemaError, ("0..4",)),
    Bad("feature_index: a float", lambda f: f.ens.feature_index(1.5), SchemaError, ("neither",)),
    Bad("n_codes of a numerical feature", lambda f: f.ens.n_codes(0), SchemaError, ("numerical",)),
    # ---------------------------------------------------- optimal counterfactual
    Bad("optimal: x a string", lambda f: optimal_counterfactual(f.ens, "abc", 1), QueryError, ("one row", "str")),
    Bad("optimal: x a dict", lambda f: optimal_counterfactual(f.ens, dict(zip(NAMES, f.x)), 1), QueryError,
        ("dict", "pd.Series")),
    Bad("optimal: x None", lambda f: optimal_counterfactual(f.ens, None, 1), QueryError, ("one row",)),
    Bad("optimal: x two rows", lambda f: optimal_counterfactual(f.ens, f.A[:2], 1), QueryError,
        ("2 rows", "batch_counterfactuals")),
    Bad("optimal: x of 3 values", lambda f: optimal_counterfactual(f.ens, f.x[:3], 1), QueryError,
        ("3 values", "5 features")),
    Bad("optimal: text in x", lambda f: optimal_counterfactual(f.ens, [1, "a", 2, 3, 0], 1), QueryError, ("'a'",)),
    Bad("optimal: x infinite", lambda f: optimal_counterfactual(f.ens, _inf(f.x), 1), QueryError, ("infinite",)),
    Bad("optimal: x NaN", lambda f: optimal_counterfactual(f.ens, _nan(f.x), 1), QueryError,
        ("missing", "'income'")),
    Bad("optimal: fixed unknown", lambda f: optimal_counterfactual(f.ens, f.x, 1, fixed=["zzz"]), QueryError,
        ("'zzz'", "fixed")),
    Bad("optimal: fixed misspelt", lambda f: optimal_counterfactual(f.ens, f.x, 1, fixed=["incme"]), QueryError,
        ("did you mean 'income'",)),
    Bad("optimal: fixed index 7", lambda f: optimal_counterfactual(f.ens, f.x, 1, fixed=[7]), QueryError,
        ("outside 0..4",)),
    Bad("optimal: fixed a float", lambda f: optimal_counterfactual(f.ens, f.x, 1, fixed=[1.5]), QueryError,
        ("neither",)),
    Bad("optimal: fixed None inside", lambda f: optimal_counterfactual(f.ens, f.x, 1, fixed=[None]), QueryError,
        ("neither",)),
    Bad("optimal: fixed a dict", lambda f: optimal_counterfactual(f.ens, f.x, 1, fixed={"age": True}), QueryError,
        ("dict",)),
    Bad("optimal: increase_only misspelt", lambda f: optimal_counterfactual(f.ens, f.x, 1, increase_only=["dept"]),
        QueryError, ("increase_only", "'debt'")),
    Bad("optimal: decrease_only index -1", lambda f: optimal_counterfactual(f.ens, f.x, 1, decrease_only=[-1]),
        QueryError, ("decrease_only", "outside")),
    Bad("optimal: weights of an unknown feature", lambda f: optimal_counterfactual(f.ens, f.x, 1,
                                                                                   weights={"agee": 2}),
        QueryError, ("'age'",)),
    Bad("optimal: a weight in words", lambda f: optimal_counterfactual(f.ens, f.x, 1, weights={"age": "heavy"}),
        QueryError, ("'heavy'",)),
    Bad("optimal: weights a string", lambda f: optimal_counterfactual(f.ens, f.x, 1, weights="heavy"),
        QueryError, ("weights",)),
    Bad("optimal: weights of 2 values", lambda f: optimal_counterfactual(f.ens, f.x, 1, weights=[1, 2]),
        QueryError, ("shape",)),
    Bad("optimal: target not a class", lambda f: optimal_counterfactual(f.ens, f.x, 7), QueryError, ("classes",)),
    Bad("optimal: an interval to a classifier", lambda f: optimal_counterfactual(f.ens, f.x, (0, 1)), QueryError,
        ("interval",)),
    Bad("optimal: an interval upside down", lambda f: optimal_counterfactual(f.reg, f.x, (5.0, 1.0)), QueryError,
        ("upside down",)),
    Bad("optimal: a regressor given a class", lambda f: optimal_counterfactual(f.reg, f.x, 3), QueryError,
        ("interval",)),
    Bad("optimal: an interval with NaN", lambda f: optimal_counterfactual(f.reg, f.x, (np.nan, 1.0)), QueryError,
        ("nan",)),
    Bad("optimal: norm l3", lambda f: optimal_counterfactual(f.ens, f.x, 1, norm="l3"), QueryError, ("'l1'",)),
    Bad("optimal: a norm of zeros", lambda f: optimal_counterfactual(f.ens, f.x, 1, norm={"l0": 0}), QueryError,
        ("not all zero",)),
    Bad("optimal: norm l4 in a mix", lambda f: optimal_counterfactual(f.ens, f.x, 1, norm={"l4": 1}), QueryError,
        ("norm",)),
    Bad("optimal: time limit NaN", lambda f: optimal_counterfactual(f.ens, f.x, 1, time_limit=np.nan), QueryError,
        ("time limit",)),
    Bad("optimal: time limit -1", lambda f: optimal_counterfactual(f.ens, f.x, 1, time_limit=-1), QueryError,
        ("time limit",)),
    Bad("optimal: time limit inf", lambda f: optimal_counterfactual(f.ens, f.x, 1, time_limit=np.inf), QueryError,
        ("time limit",)),
    Bad("optimal: time limit in words", lambda f: optimal_counterfactual(f.ens, f.x, 1, time_limit="10"),
        QueryError, ("time limit",)),
    Bad("optimal: n_solutions 0", lambda f: optimal_counterfactual(f.ens, f.x, 1, n_solutions=0), QueryError,
        ("n_solutions",)),
    Bad("optimal: backend cplex", lambda f: optimal_counterfactual(f.ens, f.x, 1, backend="cplex"), QueryError,
        ("cpsat",)),
    Bad("optimal: n_workers 0", lambda f: optimal_counterfactual(f.ens, f.x, 1, n_workers=0), QueryError,
        ("n_workers",)),
    Bad("optimal: schema a DataFrame", lambda f: optimal_counterfactual(f.ens, f.x, 1, schema=f.X), QueryError,
        ("infer_schema",)),
    Bad("optimal: schema of other columns", lambda f: optimal_counterfactual(f.ens, f.x, 1, schema=f.other_schema),
        QueryError, ("'debt'", "'loans'")),
    Bad("optimal: a model that is a path", lambda f: optimal_counterfactual("model.json", f.x, 1),
        UnsupportedModelError, ("unsupported",)),
    Bad("optimal: X_ref of 3 columns", lambda f: optimal_counterfactual(f.ens, f.x, 1, X_ref=f.A[:, :3].tolist()),
        QueryError, ("x_ref", "3 columns")),
    Bad("optimal: margin 1.5", lambda f: optimal_counterfactual(f.ens, f.x, 1, margin=1.5), QueryError,
        ("margin",)),
    Bad("optimal: a misspelt setting", lambda f: optimal_counterfactual(f.ens, f.x, 1, time_limt=5), QueryError,
        ("'time_limit'",)),
    Bad("optimal: on_progress not a function", lambda f: optimal_counterfactual(f.ens, f.x, 1, on_progress="print"),
        QueryError, ("function",)),
    Bad("optimal: also_valid_for a number", lambda f: optimal_counterfactual(f.ens, f.x, 1, also_valid_for=5),
        QueryError, ("list",)),
    # ------------------------------------------------------------------ regions
    Bad("exact: x a string", lambda f: exact_counterfactual(f.ens, "abc", 1), QueryError, ("one row",)),
    Bad("exact: fixed unknown", lambda f: exact_counterfactual(f.ens, f.x, 1, fixed=["zzz"]), QueryError,
        ("'zzz'",)),
    Bad("exact: increase_only misspelt", lambda f: exact_counterfactual(f.ens, f.x, 1, increase_only=["incme"]),
        QueryError, ("'income'",)),
    Bad("exact: max_nodes 0", lambda f: exact_counterfactual(f.ens, f.x, 1, max_nodes=0), QueryError,
        ("max_nodes",)),
    Bad("exact: time limit -1", lambda f: exact_counterfactual(f.ens, f.x, 1, time_limit=-1), QueryError,
        ("time limit",)),
    Bad("exact: target not a class", lambda f: exact_counterfactual(f.ens, f.x, 7), QueryError, ("classes",)),
    Bad("set: radius NaN", lambda f: counterfactual_set(f.ens, f.x, 1, radius=np.nan), QueryError, ("radius",)),
    Bad("set: radius -1", lambda f: counterfactual_set(f.ens, f.x, 1, -1.0), QueryError, ("radius", ">= 0")),
    Bad("set: radius inf", lambda f: counterfactual_set(f.ens, f.x, 1, np.inf), QueryError, ("finite",)),
    Bad("set: radius in words", lambda f: counterfactual_set(f.ens, f.x, 1, "big"), QueryError, ("radius",)),
    Bad("set: x of 4 values", lambda f: counterfactual_set(f.ens, f.x[:4], 1, 1.0), QueryError, ("4 values",)),
    Bad("set: decrease_only unknown", lambda f: counterfactual_set(f.ens, f.x, 1, 1.0, decrease_only=["hrs"]),
        QueryError, ("'hrs'",)),
    Bad("set: max_regions 0", lambda f: counterfactual_set(f.ens, f.x, 1, 1.0, max_regions=0), QueryError,
        ("max_regions",)),
    Bad("slice: an unknown feature", lambda f: slice_regions(f.ens, f.x, ("agee", "income")), QueryError,
        ("'age'",)),
    Bad("slice: the same feature twice", lambda f: slice_regions(f.ens, f.x, ("age", 0)), QueryError,
        ("different",)),
    Bad("slice: one feature", lambda f: slice_regions(f.ens, f.x, "age"), QueryError, ("two features",)),
    Bad("slice: bounds upside down", lambda f: slice_regions(f.ens, f.x, ("age", "income"),
                                                              bounds={"age": (3, 1)}), QueryError,
        ("upside down",)),
    Bad("projection: an unknown feature", lambda f: projection_regions(f.ens, f.x, 1, ("age", "zzz"), 1.0),
        QueryError, ("'zzz'",)),
    # -------------------------------------------------------------------- batch
    Bad("batch: X a string", lambda f: batch_counterfactuals(f.ens, "abc", [1]), QueryError, ("table",)),
    Bad("batch: X a list of dicts", lambda f: batch_counterfactuals(f.ens, [dict(zip(NAMES, f.x))], [1]),
        QueryError, ("pd.DataFrame",)),
    Bad("batch: 2 targets for 3 rows", lambda f: batch_counterfactuals(f.ens, f.A[:3], [1, 1]), QueryError,
        ("one target per row",)),
    Bad("batch: n_jobs 0", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, n_jobs=0), QueryError,
        ("processes",)),
    Bad("batch: n_jobs -2", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, n_jobs=-2), QueryError,
        ("-1",)),
    Bad("batch: scheduler a number", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, scheduler=5), QueryError,
        ("dask",)),
    Bad("batch: fixed unknown", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, fixed=["zzz"]), QueryError,
        ("'zzz'",)),
    Bad("batch: an infinite value", lambda f: batch_counterfactuals(f.ens, [_inf(f.x)], 1), QueryError,
        ("infinite",)),
    Bad("batch: NaN, model refuses it", lambda f: batch_counterfactuals(f.gb, f.nan_rows, 1), QueryError,
        ("does not take missing",)),
    Bad("map_rows: n_jobs 0", lambda f: map_rows(abs, [1, 2], n_jobs=0), QueryError, ("processes",)),
    Bad("map_rows: chunk_size 0", lambda f: map_rows(abs, [1, 2], chunk_size=0), QueryError, ("auto",)),
    # -------------------------------------------------------------------- T-CREx
    Bad("tcrex: rho 2", lambda f: TCREx(rho=2), QueryError, ("rho",)),
    Bad("tcrex: tau in words", lambda f: TCREx(tau="high"), QueryError, ("tau",)),
    Bad("tcrex: n_trees 0", lambda f: TCREx(n_trees=0), QueryError, ("n_trees",)),
    Bad("tcrex: an unknown setting", lambda f: TCREx(colour=1), QueryError, ("colour",)),
    Bad("tcrex: rho 0", lambda f: TCREx(rho=0).fit(f.X, f.pred, 1), QueryError, ("rho",)),
    Bad("tcrex: X a list of dicts", lambda f: TCREx().fit(f.X.to_dict("records"), f.pred, 1), DataError,
        ("table",)),
    Bad("tcrex: 10 outputs for 300 rows", lambda f: TCREx().fit(f.X, f.pred[:10], 1), DataError, ("300 rows",)),
    Bad("tcrex: no outputs", lambda f: TCREx().fit(f.X, None, 1), DataError, ("y_model",)),
    Bad("tcrex: no target", lambda f: TCREx().fit(f.X, f.pred), QueryError, ("target",)),
    Bad("tcrex: one name for 5 columns", lambda f: TCREx().fit(f.A, f.pred, 1, feature_names=["a"]), DataError,
        ("1 names", "5 columns")),
    Bad("tcrex: a group of unknown columns", lambda f: TCREx(groups=[["zzz", "age"]]).fit(f.X, f.pred, 1),
        QueryError, ("'zzz'",)),
    Bad("tcrex: a group with index 9", lambda f: TCREx(groups=[[0, 9]]).fit(f.X, f.pred, 1), QueryError,
        ("outside",)),
    Bad("tcrex: text in X", lambda f: TCREx().fit(f.X.assign(debt="low"), f.pred, 1), DataError,
        ("'debt'", "not numeric")),
    Bad("tcrex: target no row has", lambda f: TCREx().fit(f.X, f.pred, 7), NoValidRuleError, ("7",)),
    Bad("tcrex: explain rows of 3", lambda f: f.tc.explain(f.A[:, :3]), DataError, ("3 columns",)),
    Bad("tcrex: explain a string", lambda f: f.tc.explain("abc"), DataError, ("str",)),
    Bad("tcrex: rule 99", lambda f: f.tc.rule_text(99), QueryError, ("numbered",)),
    Bad("tcrex: explain unfitted", lambda f: TCREx().explain(f.A), NotFittedError, ("fit",)),
    Bad("tcrex: one rule for 300 rows", lambda f: f.tc.changes(f.A, rules=[0]), QueryError, ("per row",)),
    # ------------------------------------------------------ counterfactual rules
    Bad("rules: pi 2", lambda f: CounterfactualRules(pi=2), QueryError, ("pi",)),
    Bad("rules: n_estimators 0", lambda f: CounterfactualRules(n_estimators=0), QueryError, ("n_estimators",)),
    Bad("rules: outputs of 10 rows", lambda f: CounterfactualRules().fit(f.X, f.pred[:10]), DataError,
        ("300 rows",)),
    Bad("rules: X a string", lambda f: CounterfactualRules().fit("abc", f.pred), DataError, ("table",)),
    Bad("rules: a group of an unknown column", lambda f: CounterfactualRules(groups=[["zzz", "age"]]).fit(
        f.X, f.pred), QueryError, ("'zzz'",)),
    Bad("rules: x a string", lambda f: f.cr.local_rule("abc", 1), QueryError, ("one row",)),
    Bad("rules: x of 3 values", lambda f: f.cr.local_rule(f.x[:3], 1), QueryError, ("3 values",)),
    Bad("rules: fixed misspelt", lambda f: f.cr.local_rule(f.x, 1, fixed=["incme"]), QueryError, ("'income'",)),
    Bad("rules: increase_only index 9", lambda f: f.cr.local_rule(f.x, 1, increase_only=[9]), QueryError,
        ("outside",)),
    Bad("rules: pi_c 0", lambda f: f.cr.local_rule(f.x, 1, pi_c=0), QueryError, ("pi_c",)),
    Bad("rules: fixed given by position", lambda f: f.cr.local_rule(f.x, 1, ["age"]), QueryError,
        ("positional",)),
    Bad("rules: regions a string", lambda f: f.cr.regional_rules("abc", 1), QueryError, ("list",)),
    Bad("rules: a region of 3 features", lambda f: f.cr.regional_rules([(np.zeros(3), np.ones(3))], 1), QueryError,
        ("5 features",)),
    Bad("rules: sample from a string", lambda f: f.cr.sample_counterfactuals(f.x, "rule"), QueryError,
        ("lower and upper",)),
    Bad("rules: 0 samples", lambda f: f.cr.sample_counterfactuals(f.x, f.rule, n=0), QueryError, ("n is",)),
    Bad("rules: unfitted", lambda f: CounterfactualRules().local_rule(f.x, 1), NotFittedError, ("fit",)),
    Bad("rules: target no row has", lambda f: f.cr.local_rule(f.x, 7), NoCounterfactualRuleError, ("7",)),
    # --------------------------------------------------------------------- FCCA
    Bad("fcca: X a string", lambda f: fcca(f.ens, "abc", f.y), FCCAError, ("table",)),
    Bad("fcca: X a list of dicts", lambda f: fcca(f.ens, f.X.to_dict("records"), f.y), FCCAError,
        ("pd.DataFrame",)),
    Bad("fcca: y None", lambda f: fcca(f.ens, f.X, None), FCCAError, ("labels",)),
    Bad("fcca: 10 labels for 300 rows", lambda f: fcca(f.ens, f.X, f.y[:10]), FCCAError, ("300 rows",)),
    Bad("fcca: eps of an unknown feature", lambda f: fcca(f.ens, f.X, f.y, eps={"zzz": 1.0}), FCCAError,
        ("'zzz'",)),
    Bad("fcca: eps of 2 values", lambda f: fcca(f.ens, f.X, f.y, eps=[1.0, 2.0]), FCCAError, ("shape",)),
    Bad("fcca: eps -1", lambda f: fcca(f.ens, f.X, f.y, eps=-1.0), FCCAError, ("eps",)),
    Bad("fcca: p0 above p1", lambda f: fcca(f.ens, f.X, f.y, p0=0.9, p1=0.2), FCCAError, ("p0 <= p1",)),
    Bad("fcca: lambdas all zero", lambda f: fcca(f.ens, f.X, f.y, lambda0=0, lambda1=0, lambda2=0), FCCAError,
        ("not all zero",)),
    Bad("fcca: n_jobs 0", lambda f: fcca(f.ens, f.X, f.y, n_jobs=0), FCCAError, ("processes",)),
    Bad("fcca: time limit NaN", lambda f: fcca(f.ens, f.X, f.y, time_limit=np.nan), FCCAError, ("time limit",)),
    Bad("fcca: a regressor", lambda f: fcca(f.reg, f.X, f.y), FCCAError, ("classifier",)),
    Bad("fcca: schema of other columns", lambda f: fcca(f.ens, f.X, f.y, schema=f.other_schema), FCCAError,
        ("'loans'",)),
    Bad("fcca: no rows", lambda f: fcca(f.ens, f.X.iloc[:0], f.y[:0]), FCCAError, ("0 rows",)),
    Bad("fcca: X without debt", lambda f: fcca(f.ens, f.X.drop(columns="debt"), f.y), FCCAError, ("'debt'",)),
    Bad("fcca: max_points 0", lambda f: fcca(f.ens, f.X, f.y, max_points=0), FCCAError, ("max_points",)),
    Bad("fcca: NaN, model refuses it", lambda f: fcca(f.gb, f.nan_rows, f.y[:20]), FCCAError,
        ("does not take missing",)),
    # ---------------------------------------------------------------- the audit
    Bad("audit: X a list of dicts", lambda f: run_audit(f.ens, f.X.to_dict("records"), schema=f.schema, target=1),
        AuditError, ("pd.DataFrame",)),
    Bad("audit: schema None", lambda f: run_audit(f.ens, f.X, schema=None, target=1), AuditError,
        ("infer_schema",)),
    Bad("audit: no schema", lambda f: run_audit(f.ens, f.X, target=1), AuditError, ("schema",)),
    Bad("audit: schema of other columns", lambda f: run_audit(f.ens, f.X, schema=f.other_schema, target=1),
        AuditError, ("'loans'",)),
    Bad("audit: target not a class", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=7), AuditError,
        ("classes",)),
    Bad("audit: protected misspelt", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, protected=["sexx"]),
        AuditError, ("'sex'",)),
    Bad("audit: protected index 9", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, protected=[9]),
        AuditError, ("outside",)),
    Bad("audit: row 9999", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, protected=["sex"],
                                               rows=[9999]), AuditError, ("0..299",)),
    Bad("audit: rows in words", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, protected=["sex"],
                                                    rows=["a"]), AuditError, ("row positions",)),
    Bad("audit: 10 labels for 300 rows", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1,
                                                             protected=["sex"], y=f.y[:10]), AuditError,
        ("300 rows",)),
    Bad("audit: n_jobs 0", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, n_jobs=0), AuditError,
        ("processes",)),
    Bad("audit: time limit -1", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, time_limit=-1),
        AuditError, ("time limit",)),
    Bad("audit: max_rows 0", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, max_rows=0), AuditError,
        ("max_rows",)),
    Bad("audit: norm l9", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, norm="l9"), AuditError,
        ("norm",)),
    Bad("audit: alpha 2", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, alpha=2), AuditError,
        ("alpha",)),
    Bad("audit: no rows", lambda f: run_audit(f.ens, f.X.iloc[:0], schema=f.schema, target=1), AuditError,
        ("0 rows",)),
    Bad("audit: a text column", lambda f: run_audit(f.ens, f.X.assign(income="high"), schema=f.schema, target=1),
        AuditError, ("'income'", "not numeric")),
    Bad("audit: NaN, model refuses it", lambda f: run_audit(f.gb, f.nan_rows, schema=f.schema, target=1,
                                                            protected=["sex"]), AuditError,
        ("does not take missing",)),
    # ------------------------------------------------------------------- schema
    Bad("infer_schema: a list", lambda f: infer_schema([[1, 2], [3, 4]]), SchemaError, ("dataframe", "list")),
    Bad("infer_schema: None", lambda f: infer_schema(None), SchemaError, ("dataframe",)),
    Bad("infer_schema: an array", lambda f: infer_schema(f.A), SchemaError, ("pd.DataFrame(array",)),
    Bad("infer_schema: target not a column", lambda f: infer_schema(f.X, "nope"), SchemaError, ("'nope'",)),
    Bad("infer_schema: target misspelt", lambda f: infer_schema(f.X, "incme"), SchemaError, ("'income'",)),
    Bad("infer_schema: no rows", lambda f: infer_schema(f.X.iloc[:0]), SchemaError, ("no rows",)),
    Bad("infer_schema: no columns", lambda f: infer_schema(pd.DataFrame()), SchemaError, ("no columns",)),
    Bad("infer_schema: the target alone", lambda f: infer_schema(f.X[["age"]], "age"), SchemaError,
        ("no feature columns",)),
    Bad("infer_schema: protected misspelt", lambda f: infer_schema(f.X, protected=["sexx"]), SchemaError,
        ("'sex'",)),
    Bad("infer_schema: kinds of an unknown column", lambda f: infer_schema(f.X, kinds={"zzz": "integer"}),
        SchemaError, ("'zzz'",)),
    Bad("infer_schema: an unknown kind", lambda f: infer_schema(f.X, kinds={"age": "weird"}), SchemaError,
        ("'weird'",)),
    Bad("infer_schema: kinds a list", lambda f: infer_schema(f.X, kinds=["age"]), SchemaError, ("dict",)),
    Bad("infer_schema: a group of unknown columns", lambda f: infer_schema(f.X, groups={"g": ["zzz"]}),
        SchemaError, ("'zzz'",)),
    Bad("infer_schema: levels of an unknown column", lambda f: infer_schema(f.X, levels={"job": ["a"]}),
        SchemaError, ("'job'",)),
    Bad("infer_schema: a text column", lambda f: infer_schema(f.X.assign(age="old")), SchemaError,
        ("not numeric",)),
    Bad("schema: index misspelt", lambda f: f.schema.index("incme"), SchemaError, ("'income'",)),
    Bad("schema: an unknown feature", lambda f: f.schema["zzz"], SchemaError, ("'zzz'",)),
    Bad("schema: an unknown setting", lambda f: f.schema.with_updates("age", colour="red"), SchemaError,
        ("'colour'",)),
    Bad("schema: updates of a misspelt feature", lambda f: f.schema.with_updates("agee", kind="integer"),
        SchemaError, ("'age'",)),
    Bad("schema: names, not FeatureSpecs", lambda f: Schema(["age"]), SchemaError, ("featurespec",)),
    Bad("schema: a string", lambda f: Schema("age"), SchemaError, ("featurespec",)),
    Bad("schema: not JSON", lambda f: Schema.from_json("nope"), SchemaError, ("json",)),
    # ------------------------------------------------------------------ targets
    Bad("default_target: a path", lambda f: default_target("model.json", [1.0]), QueryError, ("treeensemble",)),
    Bad("default_target: no predictions", lambda f: default_target(f.reg, []), QueryError, ("empty",)),
    Bad("default_target: words", lambda f: default_target(f.reg, ["a", "b"]), QueryError, ("numbers",)),
    Bad("default_target: a row in words", lambda f: default_target(f.reg, [1.0, 2.0], row_prediction="high"),
        QueryError, ("number",)),
    Bad("already_at_target: not a class", lambda f: already_at_target(f.ens, 0, 7), QueryError, ("classes",)),
    Bad("already_at_target: two predictions", lambda f: already_at_target(f.ens, [0, 1], 1), QueryError,
        ("one output",)),
    Bad("already_at_target: upside down", lambda f: already_at_target(f.reg, 1.0, (3.0, 1.0)), QueryError,
        ("upside down",)),
    Bad("already_at_target: None for ens", lambda f: already_at_target(None, 0, 1), QueryError,
        ("treeensemble",)),
    # ------------------------------------------- issue #60 item 9: what was raw or silently accepted
    Bad("from_model: one name for 5 features", lambda f: from_model(f.rf, feature_names=["a"]), SchemaError,
        ("1 name", "5 features", "'age'")),
    Bad("from_model: names as one string", lambda f: from_model(f.rf, feature_names="abcde"), SchemaError,
        ("list of 5 names", "str")),
    Bad("from_model: a name twice", lambda f: from_model(f.rf, feature_names=["a", "b", "a", "c", "d"]),
        SchemaError, ("repeats", "'a'")),
    Bad("rules: n_workers a million", lambda f: CounterfactualRules(n_workers=10**6), QueryError,
        ("CounterfactualRules()", "n_workers", "at most")),
    Bad("rules: n_jobs a million", lambda f: CounterfactualRules(n_jobs=10**6), QueryError, ("n_jobs", "at most")),
    Bad("rules: n_workers set after construction", lambda f: _with(CounterfactualRules(), n_workers=10**6).fit(
        f.X, f.pred), QueryError, ("n_workers", "at most")),
    Bad("rules: increase and decrease one feature", lambda f: f.cr.local_rule(f.x, 1, increase_only=["debt"],
                                                                               decrease_only=[2]),
        QueryError, ("'debt'", "increase_only", "decrease_only", "fixed")),
    Bad("optimal: increase and decrease one feature", lambda f: optimal_counterfactual(
        f.ens, f.x, 1, increase_only=["income"], decrease_only=["income", "debt"]), QueryError,
        ("'income'", "increase_only", "decrease_only", "fixed")),
    Bad("optimal: a linear model, increase and decrease one feature", lambda f: optimal_counterfactual(
        f.lin, f.x, 1, increase_only=[1], decrease_only="income"), QueryError, ("'income'", "fixed")),
    Bad("exact: increase and decrease one feature", lambda f: exact_counterfactual(
        f.ens, f.x, 1, increase_only=["age"], decrease_only=[0]), QueryError, ("'age'", "decrease_only")),
    Bad("set: increase and decrease one feature", lambda f: counterfactual_set(
        f.ens, f.x, 1, 1.0, increase_only=["age"], decrease_only=["age"]), QueryError, ("'age'",)),
    Bad("batch: increase and decrease one feature", lambda f: batch_counterfactuals(
        f.ens, f.A[:2], 1, increase_only=["age"], decrease_only=["age"], n_jobs=1), QueryError, ("'age'",)),
    Bad("optimal: X_ref without rows", lambda f: optimal_counterfactual(f.ens, f.x, 1, X_ref=f.X.iloc[:0]),
        QueryError, ("x_ref", "no rows")),
    Bad("optimal: X_ref an empty array", lambda f: optimal_counterfactual(f.ens, f.x, 1, X_ref=np.empty((0, 5))),
        QueryError, ("x_ref", "no rows")),
    Bad("optimal: X_ref all NaN", lambda f: optimal_counterfactual(f.ens, f.x, 1, X_ref=np.full((10, 5), np.nan)),
        QueryError, ("x_ref", "missing")),
    Bad("batch: X_ref all NaN", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, X_ref=f.X * np.nan, n_jobs=1),
        QueryError, ("x_ref", "missing")),
    Bad("optimal: a Series indexed c0..c4", lambda f: optimal_counterfactual(
        f.ens, pd.Series(f.x, index=[f"c{j}" for j in range(5)]), 1), QueryError,
        ("'age'", "'c0'", "Series", "to_numpy")),
    Bad("optimal: a linear model given a Series indexed c0..c4", lambda f: optimal_counterfactual(
        f.lin, pd.Series(f.x, index=[f"c{j}" for j in range(5)]), 1), QueryError, ("'age'", "'c0'")),
    Bad("predict: a frame of other names", lambda f: f.ens.predict(f.X.set_axis([f"c{j}" for j in range(5)],
                                                                                axis=1)), SchemaError, ("'c0'",)),
    Bad("batch: an unknown column", lambda f: batch_counterfactuals(f.ens, f.X.iloc[:2].rename(
        columns={"debt": "dept"}), 1, n_jobs=1), QueryError, ("'debt'", "'dept'", "did you mean")),
    Bad("batch: n_jobs a million", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, n_jobs=10**6), QueryError,
        ("n_jobs", "at most")),
    Bad("batch: n_workers a million", lambda f: batch_counterfactuals(f.ens, f.A[:2], 1, n_workers=10**6),
        QueryError, ("n_workers", "at most")),
    Bad("map_rows: n_jobs a million", lambda f: map_rows(abs, [1, 2], n_jobs=10**6), QueryError, ("at most",)),
    Bad("optimal: n_workers a million", lambda f: optimal_counterfactual(f.ens, f.x, 1, n_workers=10**6),
        QueryError, ("n_workers", "at most")),
    Bad("fcca: n_jobs a million", lambda f: fcca(f.ens, f.X, f.y, n_jobs=10**6), FCCAError, ("at most",)),
    Bad("audit: n_jobs a million", lambda f: run_audit(f.ens, f.X, schema=f.schema, target=1, n_jobs=10**6),
        AuditError, ("at most",)),
]


def _with(est, **attrs):
    """``est`` with attributes set after construction, as a script may."""
    for k, v in attrs.items():
        setattr(est, k, v)
    return est

def test_the_table_covers_the_public_face():
    assert len(BAD) >= 80 and len({b.name for b in BAD}) == len(BAD)
    fronts = {b.name.split(":")[0] for b in BAD}
    for front in ("predict", "optimal", "exact", "set", "batch", "tcrex", "rules", "fcca", "audit",
                  "infer_schema", "schema", "default_target", "already_at_target"):
        assert front in fronts, front


@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.name)
def test_a_bad_call_raises_its_own_error_with_a_hint(f, bad):
    with pytest.raises(Exception) as got:
        bad.call(f)
    exc = got.value
    assert isinstance(exc, AtlasError) and isinstance(exc, ValueError), f"{type(exc).__name__}: {exc}"
    assert type(exc).__module__ == "core.errors", f"{type(exc).__name__}: {exc}"      # never a raw exception
    assert isinstance(exc, bad.error), f"expected {bad.error.__name__}, got {type(exc).__name__}: {exc}"
    text = str(exc)
    assert len(text) >= 30 and "Traceback" not in text, text
    for word in bad.says:
        assert word.lower() in text.lower(), f"{word!r} not in: {text}"


# ------------------------------------------------------------------------ good calls
def test_one_resolver_names_and_indices_alike(f):
    names = list(f.ens.feature_names)
    assert [feature_index(names, n) for n in names] == list(range(5))
    assert feature_index(names, np.int64(3)) == 3 and f.ens.feature_index("debt") == f.schema.index("debt") == 2
    a = optimal_counterfactual(f.ens, f.x, 1, fixed=["income", "sex"], schema=f.schema)
    b = optimal_counterfactual(f.ens, f.x, 1, fixed=np.array([1, 4]), schema=f.schema)
    assert a.found and a.cost == b.cost and a.x[1] == f.x[1] and a.x[4] == f.x[4]
    assert a.params["fixed"] == b.params["fixed"] == ["income", "sex"]
    one = optimal_counterfactual(f.ens, f.x, 1, fixed="income", schema=f.schema)       # one name: a list of one
    assert one.cost == optimal_counterfactual(f.ens, f.x, 1, fixed=[1], schema=f.schema).cost
    assert f.ens.predict(a.x[None, :])[0] == 1


def test_rows_given_as_a_series_a_frame_or_one_row_read_by_name(f):
    shuffled = f.X[["sex", "hours", "debt", "income", "age"]]
    np.testing.assert_array_equal(f.ens.predict(shuffled), f.ens.predict(f.A))         # read by name
    np.testing.assert_array_equal(f.ens.predict(f.X.assign(extra=1.0)), f.pred)        # extra columns ignored
    series = pd.Series(dict(zip(NAMES, f.x)))[::-1]                                    # index in another order
    base = optimal_counterfactual(f.ens, f.x, 1, schema=f.schema)
    for row in (series, f.x[None, :], list(f.x), f.X.iloc[[int(np.flatnonzero((f.A == f.x).all(axis=1))[0])]]):
        res = optimal_counterfactual(f.ens, row, 1, schema=f.schema)
        assert res.found and res.cost == base.cost
        np.testing.assert_array_equal(res.x_query, f.x)
    out = batch_counterfactuals(f.ens, shuffled.iloc[:3], 1, schema=f.schema, n_jobs=1)   # one label, every row
    for r, x in zip(out, f.A[:3]):
        np.testing.assert_array_equal(r.x_query, x)
        assert f.ens.predict(r.x[None, :])[0] == 1
    # by position only when the labels say nothing of the features: plain positions 0..d-1, or a model whose
    # names are its library's placeholders (trained on an array); other labels are refused (BAD above)
    for row in (pd.Series(f.x), pd.DataFrame(f.x[None, :])):
        res = optimal_counterfactual(f.ens, row, 1, schema=f.schema)
        assert res.cost == base.cost and np.array_equal(res.x_query, f.x)
    plain = from_model(RandomForestClassifier(8, max_depth=3, random_state=0).fit(f.A, f.y))   # names x0..x4
    assert plain.feature_names == tuple(f"x{j}" for j in range(5))
    np.testing.assert_array_equal(plain.predict(f.X), plain.predict(f.A))                      # named columns
    named = pd.Series(f.x, index=NAMES)
    row = int(np.flatnonzero(plain.predict(f.A) == 0)[0])
    res = optimal_counterfactual(plain, f.X.iloc[row], 1)
    assert res.found and np.array_equal(res.x_query, f.A[row]) and plain.predict(res.x[None, :])[0] == 1
    assert np.array_equal(optimal_counterfactual(plain, named, 1).x_query, f.x)
    lin = optimal_counterfactual(f.lin, named[::-1], 1)                                          # linear: by name
    assert lin.found and np.array_equal(lin.x_query, f.x) and f.lin.predict(pd.DataFrame([lin.x], columns=NAMES))[0] == 1


def test_worker_counts_up_to_the_cap_are_taken(f):
    from core.settings import max_workers, n_jobs_setting, n_workers_setting, solver_threads

    cap = max_workers()
    assert cap >= 32
    for check in (n_jobs_setting, n_workers_setting, solver_threads):
        assert check(cap) is None and check(np.int64(1)) is None
        assert f"at most {cap:,}" in check(cap + 1) and f"at most {cap:,}" in check(0)
    assert n_jobs_setting(-1) is None and n_workers_setting(-1) is None and solver_threads(-1) is not None
    assert CounterfactualRules(n_workers=cap).n_workers == cap
    with pytest.raises(QueryError, match=f"at most {cap:,}"):
        map_rows(abs, [-1, 2], n_jobs=cap + 1)


def test_every_analysis_takes_the_three_roles_by_name(f):
    inc, dec = "income", "debt"
    res = exact_counterfactual(f.ens, f.x, 1, increase_only=[inc], decrease_only=[dec], fixed=["sex"])
    opt = optimal_counterfactual(f.ens, f.x, 1, increase_only=[1], decrease_only=[2], fixed=[4])
    assert res.found and opt.found and res.cost == pytest.approx(opt.cost, rel=1e-9, abs=1e-12)
    assert res.x[1] >= f.x[1] and res.x[2] <= f.x[2] and res.x[4] == f.x[4]
    assert f.ens.predict(res.x[None, :])[0] == 1
    free = counterfactual_set(f.ens, f.x, 1, 3.0)
    held = counterfactual_set(f.ens, f.x, 1, 3.0, increase_only=[inc], decrease_only=[dec])
    assert held.params["increase_only"] == [inc] and held.regions
    assert len(held.regions) <= len(free.regions)
    for r in held.regions:
        assert r.point[1] >= f.x[1] and r.point[2] <= f.x[2]
        assert f.ens.predict(r.point[None, :])[0] == 1
    rule = f.cr.local_rule(f.x, 1, increase_only=[inc], decrease_only=["debt"], fixed="sex")
    assert 4 not in rule.features
    assert np.all(rule.upper[1] > f.x[1]) and np.all(rule.lower[2] < f.x[2])


def test_groups_by_name_equal_groups_by_index(f):
    X = f.X.assign(**{"job=a": (f.X.age > 0).astype(float), "job=b": (f.X.age <= 0).astype(float)})
    by_name = TCREx(rho=0.05, groups=[["job=a", "job=b"]], random_state=0).fit(X, f.pred, 1)
    by_index = TCREx(rho=0.05, groups=[[5, 6]], random_state=0).fit(X, f.pred, 1)
    assert by_name.groups_ == by_index.groups_ == [[5, 6]]
    assert by_name.to_text() == by_index.to_text()
    ca = CounterfactualRules(n_estimators=5, groups=[["job=a", "job=b"]], random_state=0).fit(X, f.pred)
    cb = CounterfactualRules(n_estimators=5, groups=[[5, 6]], random_state=0).fit(X, f.pred)
    assert ca.state_.units == cb.state_.units and [5, 6] in ca.state_.units


def test_infer_schema_takes_its_target_and_one_protected_name(f):
    s = infer_schema(f.X.assign(y=f.y), "y", protected="sex")
    assert "y" not in s.names and s.target == "y" and s.protected() == ["sex"]
    assert s["sex"].actionability == "fixed"


# ---------------------------------------------------------------- rows with missing values
@pytest.fixture(scope="module")
def gappy():
    """HistGradientBoosting trained with missing values, rows with NaN in two features."""
    rng = np.random.default_rng(3)
    n = 400
    X = pd.DataFrame({"age": rng.integers(18, 70, n).astype(float), "income": rng.gamma(3, 10, n),
                      "debt": rng.normal(0, 1, n), "sex": rng.integers(0, 2, n).astype(float)})
    y = ((X.income > 30) & (X.debt < 0.5)).astype(int).to_numpy().copy()
    X.loc[rng.random(n) < 0.25, "income"] = np.nan
    X.loc[rng.random(n) < 0.15, "debt"] = np.nan
    y[X.income.isna().to_numpy() & (rng.random(n) < 0.7)] = 1        # a missing income tends to be approved
    model = HistGradientBoostingClassifier(max_iter=20, max_depth=3, random_state=0).fit(X, y)
    assert model.predict(X).tolist().count(0) >= 40
    return X, y, model


def _native(cf, X):
    """A counterfactual over the features and the "is missing" columns of the features
    missing somewhere in ``X`` (the rows the analysis read; appended in feature order)
    as a row of the original model: NaN where it stays missing."""
    cf = np.atleast_2d(np.asarray(cf, dtype=float))
    d = X.shape[1]
    gaps = [j for j in range(d) if X.iloc[:, j].isna().any()]
    assert cf.shape[1] == d + len(gaps)
    raw = cf[:, :d].copy()
    for k, j in enumerate(gaps):
        raw[cf[:, d + k] > 0.5, j] = np.nan
    return pd.DataFrame(raw, columns=X.columns)


def test_the_batch_takes_rows_with_missing_values(gappy):
    X, y, model = gappy
    ens = from_model(model)
    rows = np.flatnonzero((model.predict(X) == 0) & X.isna().any(axis=1).to_numpy())[:8]
    assert len(rows) == 8
    out = batch_counterfactuals(ens, X.iloc[rows], 1, X_ref=X, schema=infer_schema(X), model=model, n_jobs=1)
    found = [r for r in out if r.found]
    assert len(found) == len(rows)
    back = _native(np.array([r.x for r in found]), X)
    assert (model.predict(back) == 1).all()
    query = _native(np.array([r.x_query for r in found]), X)            # the query is the row itself
    pd.testing.assert_frame_equal(query, X.iloc[rows].reset_index(drop=True))
    kept = [r for r in found if np.isnan(_native(r.x, X).to_numpy()).any()]
    assert kept                                                         # some stay missing, as the model allows
    for r in found:                                                      # a value never becomes missing
        assert np.isnan(_native(r.x, X).to_numpy()).sum() <= np.isnan(_native(r.x_query, X).to_numpy()).sum()
    seen = X.iloc[rows]                                                  # no reference rows, no schema
    plain = batch_counterfactuals(ens, seen, [1] * len(rows), model=model, n_jobs=1)
    assert all(r.found for r in plain)
    assert (model.predict(_native(np.array([r.x for r in plain]), seen)) == 1).all()
    for r in plain:
        assert np.isnan(_native(r.x, seen).to_numpy()).sum() <= np.isnan(_native(r.x_query, seen).to_numpy()).sum()


def test_the_audit_takes_rows_with_missing_values(gappy):
    X, y, model = gappy
    audit = run_audit(from_model(model), X, schema=infer_schema(X), target=1, protected="sex", model=model, y=y,
                      max_rows=40, n_boot=50, n_perm=50, local_rules_per_group=2, scan=False, random_state=0)
    cfs = audit.counterfactuals
    found = audit.rows["feasible"].to_numpy(dtype=bool)
    audited = audit.rows["row"].to_numpy(dtype=int)
    assert found.sum() >= 30 and X.iloc[audited].isna().any(axis=1).sum() >= 5
    back = _native(cfs[found], X)
    assert (model.predict(back) == 1).all()
    np.testing.assert_array_equal(back["sex"].to_numpy(), X["sex"].to_numpy()[audited[found]])   # held fixed
    assert list(audit.meta["data"]["columns"][-2:]) == ["income is missing", "debt is missing"]


def test_fcca_takes_rows_with_missing_values(gappy):
    X, y, model = gappy
    res = fcca(from_model(model), X, y, max_points=40, n_jobs=1, time_limit=10.0)
    assert len(res.rows) >= 20
    assert X.iloc[res.rows].isna().any(axis=1).sum() >= 3
    back = _native(res.x_ce, X)
    own = model.predict(X.iloc[res.rows])
    assert (model.predict(back) != own).all()                          # each leaves its row's class


def test_reference_rows_given_again_are_read_once_and_a_bad_array_is_refused_each_time(f, monkeypatch):
    """The door's verdict on a float reference array is kept with the array (as its grid
    cells are): the same array given again is not read again. An array it refuses is
    refused at every query, never kept as passed."""
    import core.optimal as co

    reads = []
    real = co.reference_rows
    monkeypatch.setattr(co, "reference_rows", lambda *a, **k: reads.append(1) or real(*a, **k))
    good = np.array(f.A, dtype=float)
    first = optimal_counterfactual(f.ens, f.x, 1, X_ref=good)
    again = optimal_counterfactual(f.ens, f.x, 1, X_ref=good)
    assert len(reads) == 1 and first.cost == again.cost
    bad = good.copy()
    bad[len(bad) // 2, 1] = np.inf
    for _ in range(2):
        with pytest.raises(QueryError, match="(?i)infinite"):
            optimal_counterfactual(f.ens, f.x, 1, X_ref=bad)
    assert len(reads) == 3
    # an array the door converts (integers) is not kept as is, so it is read at every query
    ints = np.round(good).astype(np.int64)
    for _ in range(2):
        optimal_counterfactual(f.ens, f.x, 1, X_ref=ints)
    assert len(reads) == 3 + 3           # the first query reads it to learn it is not kept, then again
