"""One door (issue #64 item 2): ``core.open_workspace(model, data, target)`` makes a workspace
of a model file or a fitted object of any kind, and every analysis runs from it with its own
keywords. Each answer equals the old path's (the model loaded, ``build_workspace``, the
analysis called with ``query_model()``'s extras) on a tree ensemble (a file's path), a linear
pipeline (a file's bytes) and an MLP (the fitted object, run in a worker), and each
counterfactual is fed back to the scikit-learn model itself. A workspace whose model runs in
a worker stops it when closed, and leaves nothing running; an ONNX graph without feature
names opens once its positional mapping is confirmed by a keyword."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import core
from core.audit import run_audit
from core.audit.compare import compare_models
from core.audit.story import case_story
from core.compression import fcca
from core.errors import PositionalMatchRequired, SchemaError, UnsupportedModelError, WorkerCancelled
from core.intake import door
from core.intake.sandbox import load_vetted
from core.intake.worker import ModelWorker
from core.optimal import optimal_counterfactual
from core.optimal.batch import batch_counterfactuals
from core.regions import exact_counterfactual
from core.rules import CounterfactualRules
from core.rules.onmodel import on_model
from core.tcrex import TCREx

RAW = ["age", "income", "debt", "job", "group"]
#: what differs between two runs of the same analysis: the time it took (and, through a surrogate, the
#: time left of its budget when the query was posed)
TIMES = {"elapsed", "timings", "fit_time", "solve_time", "time_limit"}
#: a query compared point for point with another run of it: one solver thread. On two, CP-SAT keeps
#: the first of two equally cheap points its threads find, which thread timing decides; on one, the
#: same query gives the same point on any machine (within its time limit)
ONE_THREAD = dict(time_limit=20, n_workers=1)


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(1),
                       "debt": rng.gamma(2.0, 5.0, n).round(1), "job": rng.choice(["clerk", "nurse", "pilot"], n),
                       "group": rng.choice(["a", "b"], n)})
    score = 0.08 * (df.income - 50) - 0.15 * (df.debt - 10) + 0.03 * (df.age - 45) + (df.job == "pilot") * 1.2
    return df, (score + rng.normal(0, 0.4, n) > 0).astype(int).to_numpy()


def _scaled():
    return ColumnTransformer([("num", StandardScaler(), ["age", "income", "debt"]),
                              ("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "group"])])


@pytest.fixture(scope="module")
def models():
    """Three models a data scientist trains on the same table: a forest, a linear pipeline, an MLP."""
    df, y = _frame()
    coded = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "group"])],
                              remainder="passthrough")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # the MLP stops at max_iter, as small ones do
        fitted = {"tree": make_pipeline(coded, RandomForestClassifier(20, max_depth=4, random_state=0)).fit(df, y),
                  "linear": make_pipeline(_scaled(), LogisticRegression()).fit(df, y),
                  "mlp": make_pipeline(_scaled(), MLPClassifier((8,), max_iter=300, random_state=0)).fit(df, y)}
    return df.assign(y=y), fitted


def _old_and_new(kind, table, fitted, tmp_path):
    """(the old path's workspace, the door's, what to stop): the forest from its file's path,
    the linear pipeline from its file's bytes, the MLP as the fitted object."""
    model = fitted[kind]
    if kind == "tree":
        path = tmp_path / "forest.skops"
        path.write_bytes(sio.dumps(model))
        old = core.build_workspace(table, "y", core.load_model(path), name="old")
        return old, core.open_workspace(path, table, "y"), None
    if kind == "linear":
        data = sio.dumps(model)
        old = core.build_workspace(table, "y", core.load_model(data, "linear.skops"), name="old")
        return old, core.open_workspace(data, table, "y", filename="linear.skops"), None
    worker = ModelWorker(sio.dumps(model), "mlp.skops")
    old = core.build_workspace(table, "y", worker.model(identity="mlp"), name="old")
    return old, core.open_workspace(model, table, "y"), worker


@pytest.fixture(scope="module", params=["tree", "linear", "mlp"])
def pair(request, models, tmp_path_factory):
    table, fitted = models
    old, new, worker = _old_and_new(request.param, table, fitted, tmp_path_factory.mktemp("door"))
    yield request.param, fitted[request.param], old, new
    new.close()
    if worker is not None:
        worker.stop()


@pytest.fixture(scope="module")
def forests(models):
    """Model B of the comparisons, by the old path and through the door."""
    table, fitted = models
    return core.build_workspace(table, "y", fitted["tree"], name="old B"), core.open_workspace(fitted["tree"], table, "y")


def _plain(v):
    """A result's JSON values without the seconds it took (the one thing two runs differ in)."""
    if hasattr(v, "to_dict"):
        v = v.to_dict()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if k not in TIMES}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _same(a, b):
    assert _plain(a) == _plain(b)


def _same_table(a, b):
    """Two tables of results alike, but for the seconds each row took."""
    drop = [c for c in a.columns if c in TIMES]
    pd.testing.assert_frame_equal(a.drop(columns=drop), b.drop(columns=drop))


def _proven_cost(r):
    """The cost a counterfactual's solve proved optimal: its own on a model read exactly; through a
    surrogate, that of the surrogate's answer, before any repair on the model. Two equally cheap
    points are both optimal, and a batch through a surrogate starts each row's solve without the
    reference rows (``core.optimal.batch``): the proven cost, not the point, is the same whichever
    start a solve took."""
    return r.cost if r.guarantee.proven else r.params["surrogate"]["cost"]


def _moving_rows(ws, k):
    """The first ``k`` rows the model refuses (target 1)."""
    return [int(i) for i in np.flatnonzero(ws.predictions == 0)[:k]]


def test_the_door_reads_each_kind_as_the_old_path_does(pair):
    kind, model, old, new = pair
    assert new.model_kind == old.model_kind == {"tree": "tree_ensemble", "linear": "linear", "mlp": "black_box"}[kind]
    assert new.ensemble.content_hash() == old.ensemble.content_hash()
    assert new.X.equals(old.X) and new.schema == old.schema
    table = old.raw
    assert np.array_equal(new.predictions, model.predict(table[RAW]))           # the model's own answers
    assert (new.worker is not None) == (kind == "mlp")


def test_counterfactuals_through_the_door_are_the_old_paths_and_valid_on_the_model(pair):
    kind, model, old, new = pair
    X = old.X.to_numpy(dtype=float)
    on, extra = old.query_model()
    rows = _moving_rows(old, 2)
    for i in rows:
        got = new.optimal_counterfactual(i, 1, **ONE_THREAD)
        _same(got, optimal_counterfactual(on, X[i], 1, schema=old.schema, X_ref=X, **ONE_THREAD, **extra))
        assert got.valid and model.predict(new.to_raw(got.x[None, :])[RAW])[0] == 1
        near = new.exact_counterfactual(i, time_limit=20)            # default target: the other class
        _same(near, exact_counterfactual(on, X[i], 1, schema=old.schema, X_ref=X, time_limit=20, **extra))
        assert near.valid and model.predict(new.to_raw(near.x[None, :])[RAW])[0] == 1
    batch = new.batch_counterfactuals(rows, 1, n_jobs=1, **ONE_THREAD)
    _same(batch, batch_counterfactuals(on, X[rows], 1, schema=old.schema, X_ref=X, n_jobs=1, **ONE_THREAD, **extra))
    for i, r in zip(rows, batch):                  # each row of the batch answered as its own query answers it
        alone = new.optimal_counterfactual(i, 1, **ONE_THREAD)
        assert r.valid and model.predict(new.to_raw(r.x[None, :])[RAW])[0] == 1
        assert r.guarantee.kind == alone.guarantee.kind and _proven_cost(alone) is not None
        assert _proven_cost(r) == pytest.approx(_proven_cost(alone), rel=1e-6)


def test_rules_through_the_door_are_the_old_paths(pair):
    _, _, old, new = pair
    X, pred, names = old.X.to_numpy(dtype=float), old.predictions, list(old.ensemble.feature_names)
    on, extra = old.query_model()
    groups = list(old.schema.groups().values())
    i = _moving_rows(old, 1)[0]
    cr = CounterfactualRules(groups=groups, n_estimators=10, random_state=0).fit(
        X, pred, feature_names=names, model=on_model(on, **extra), schema=old.schema)
    got = new.rules(n_estimators=10, random_state=0)
    _same(got.local_rule(X[i], 1, fixed=["group=a", "group=b"]), cr.local_rule(X[i], 1, fixed=["group=a", "group=b"]))
    tc = TCREx(rho=0.05, groups=groups, random_state=0).fit(X, pred, 1, feature_names=names,
                                                            model=on_model(on, **extra), schema=old.schema)
    _same(new.tcrex(rho=0.05, random_state=0).result_, tc.result_)          # default target: the favourable class


def test_fcca_through_the_door_is_the_old_paths(pair):
    kind, _, old, new = pair
    X = old.X.to_numpy(dtype=float)
    on, extra = old.query_model()
    checked = {} if kind == "tree" else {"model": on_model(on, **extra), "surrogate": old.surrogate}
    got = new.fcca(max_points=6, n_jobs=1, time_limit=10)
    _same(got, fcca(old.ensemble, X, old.y.to_numpy(), schema=old.schema, max_points=6, n_jobs=1, time_limit=10,
                    **checked))


AUDIT = dict(protected=["group"], max_rows=12, time_limit=10, n_jobs=1, n_boot=40, n_perm=40, tcrex=False,
             local_rules_per_group=0, scan=False)


def test_the_audit_and_the_story_through_the_door_are_the_old_paths(pair):
    _, _, old, new = pair
    on, extra = old.query_model()
    audit = new.audit(**AUDIT)
    before = run_audit(on, old.X.to_numpy(dtype=float), schema=old.schema, target=1, y=old.y, **extra, **AUDIT)
    for table in ("rows", "groups", "tests", "fairness", "disparities"):
        _same_table(getattr(audit, table), getattr(before, table))
    assert audit.summary == before.summary
    facts = {k: v for k, v in audit.meta["model"].items() if k != "sha256"}    # the door knows the file's hash
    _same(facts, {k: v for k, v in before.meta["model"].items() if k != "sha256"})
    assert audit.meta["model"]["sha256"] == new.model_sha256
    i = _moving_rows(old, 1)[0]
    _same(new.story(i, 1, time_limit=10), case_story(old, i, 1, time_limit=10))


def test_a_comparison_through_the_door_is_the_old_paths(pair, forests):
    _, _, old, new = pair
    old_b, new_b = forests
    (on_a, extra_a), (on_b, extra_b) = old.query_model(), old_b.query_model()
    kw = dict(max_rows=5, time_limit=10, n_jobs=1, n_boot=40, n_perm=40, protected=["group"])
    got = new.compare(new_b, 1, **kw)
    before = compare_models(on_a, on_b, old.X, schema=old.schema, target=1, model_a=extra_a["model"],
                            surrogate_a=old.surrogate, model_b=extra_b["model"], surrogate_b=None, **kw)
    for table in ("agreement", "rows", "groups", "tests"):
        _same_table(getattr(got, table), getattr(before, table))


def _group_of(pid):
    """The process group of ``pid``, or None once it has ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[2])


def _in_group(pgid):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _group_of(int(p)) == pgid]


def test_a_workspace_run_in_a_worker_closes_it_and_leaves_nothing_running(models, tmp_path):
    table, fitted = models
    path = tmp_path / "mlp.skops"
    path.write_bytes(sio.dumps(fitted["mlp"]))
    with core.open_workspace(path, table, "y") as ws:              # a file of any other model: run in its worker
        assert ws.model_kind == "black_box" and not ws.closed
        worker = ws.worker.worker
        pid = worker._proc.pid
        assert _in_group(pid)                                   # the child leads a process group of its own
        derived = ws.with_protected(["group"])
        assert isinstance(derived, core.AnalysisWorkspace) and isinstance(ws, core.Workspace)
        assert derived.worker is ws.worker                      # shared, and closed with it
        first = ws.optimal_counterfactual(_moving_rows(ws, 1)[0], 1, time_limit=10)
        assert first.valid
    assert ws.closed and derived.closed and not worker.alive
    assert _in_group(pid) == []                                 # the child and all it started are gone
    starts = worker.starts
    for closed in (ws, derived):
        with pytest.raises(WorkerCancelled, match="closed"):
            closed.predict(closed.X.to_numpy(dtype=float)[:2])
    assert worker.starts == starts and not worker.alive         # no new process for a closed workspace
    ws.close()                                                  # twice: nothing to do


def test_a_workspace_that_cannot_be_opened_leaves_no_worker(models, monkeypatch):
    table, fitted = models
    started = []

    class Recorded(ModelWorker):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            started.append(self)

    monkeypatch.setattr(door, "ModelWorker", Recorded)
    with pytest.raises(SchemaError, match="debt"):              # the data lacks a column the model reads
        core.open_workspace(fitted["mlp"], table.drop(columns="debt"), "y")
    assert len(started) == 1 and not started[0].alive and started[0].starts == 1


def test_an_onnx_graph_without_names_opens_once_its_mapping_is_confirmed(models):
    from skl2onnx import to_onnx

    table, _ = models
    X = table[["age", "income", "debt"]].to_numpy(dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = make_pipeline(StandardScaler(), MLPClassifier((6,), max_iter=300, random_state=0)).fit(X, table.y)
    graph = to_onnx(mlp, X[:1], options={id(mlp): {"zipmap": False}}).SerializeToString()
    with pytest.raises(UnsupportedModelError, match="open_workspace"):     # not trees: said where it goes
        load_vetted(graph, "mlp.onnx")
    data = table[["age", "income", "debt", "y"]]
    with pytest.raises(PositionalMatchRequired, match="confirm_positions=True") as refused:
        core.open_workspace(graph, data, "y", filename="mlp.onnx")
    assert [c for _, c in refused.value.mapping] == ["age", "income", "debt"]
    with core.open_workspace(graph, data, "y", filename="mlp.onnx", confirm_positions=True) as ws:
        assert ws.model_kind == "black_box"
        assert np.array_equal(ws.predictions, mlp.predict(X))
        res = ws.optimal_counterfactual(_moving_rows(ws, 1)[0], 1, time_limit=10)
        assert res.valid and mlp.predict(res.x[None, :3].astype(np.float32))[0] == 1


def test_the_lower_calls_name_the_door_for_any_other_model(models):
    table, fitted = models
    with pytest.raises(UnsupportedModelError, match=r"core\.open_workspace\(model, data, target\)"):
        core.build_workspace(table, "y", fitted["mlp"], name="mlp")


def test_a_constant_text_column_opens_a_model_known_by_its_answers():
    """A one-hot pipeline fitted on a table with a text column holding one value in every row:
    the door's surrogate (LightGBM on the category codes) never splits on that column and is
    still read back exactly (before: "the file is damaged"), and the counterfactual is the
    fitted pipeline's own, checked on it."""
    from sklearn.pipeline import Pipeline

    rng = np.random.default_rng(4)
    n = 400
    table = pd.DataFrame({"income": rng.normal(50, 15, n).round(1), "job": rng.choice(["a", "b", "c"], n),
                          "country": ["here"] * n})
    table["y"] = ((table.income > 52) | (table.job == "c")).astype(int)
    X = table.drop(columns="y")
    pipe = Pipeline([("pre", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "country"]),
                                                ("num", StandardScaler(), ["income"])])),
                     ("clf", MLPClassifier((8,), max_iter=600, random_state=0))]).fit(X, table["y"])
    with core.open_workspace(pipe, table, "y") as ws:
        assert ws.model_kind == "black_box"
        np.testing.assert_array_equal(ws.predictions, pipe.predict(X))
        row = int(np.flatnonzero(ws.predictions == 0)[0])
        cf = ws.optimal_counterfactual(row, 1, time_limit=20)
        assert cf.found and cf.guarantee.kind == "valid_on_model"
        assert pipe.predict(ws.to_raw(cf.x[None])[X.columns])[0] == 1
