"""Decision regions on models trained outside the project (#59): an MLP in its sandboxed
worker, a LogisticRegression pipeline with a one-hot column, a linear SVM, a Ridge regressor.

In core: the exact counterfactual of a model known by its answers is its surrogate's nearest
region checked and repaired on the model (valid on it, never exact for it), and the regions
are the surrogate's, labelled so, each one's point put to the model. On the page, in both
views: it never fails, every counterfactual it shows is read off the page as the analyst
reads it, applied to the original model and gets the target, and a surrogate's point is
never called exact (before: the MLP's point was "Exact counterfactual", "optimal", and the
MLP refused it; the linear slice on a one-hot axis failed with an IndexError)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from conftest import ROOT
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC
from streamlit.testing.v1 import AppTest

from core.errors import QueryError
from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual
from core.regions import exact_counterfactual, projection_reach, projection_regions, slice_regions
from core.shown import parse_number

COLUMNS = ["age", "income", "debt", "job"]
CHANGE = re.compile(r"(age|income|debt|job): (.+?) → (.+?)(?=, (?:age|income|debt|job):|$)")


def _table(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "debt": rng.gamma(2.0, 5.0, n).round(2), "job": rng.choice(["clerk", "nurse", "pilot"], n)})
    score = 0.06 * (df.income - 50) - 0.12 * (df.debt - 10) + 0.03 * (df.age - 45) + (df.job == "pilot") * 1.2
    return df, (score + rng.normal(0, 0.3, n)).to_numpy()


def _pipe(final, df, y):
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income", "debt"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    return make_pipeline(pre, final).fit(df, y)


def _app_on(ws) -> AppTest:
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=300)
    app.run()
    app.session_state["workspace"] = ws
    app.session_state["demo_key"] = None
    app.run()
    app.switch_page("../pages/decision_regions.py").run()
    assert not app.exception, app.exception
    return app


def _shown_counterfactual(app, df: pd.DataFrame, row: int) -> pd.DataFrame:
    """The row with the changes the page shows ("**Counterfactual**: income: 48.4 → 57.71, job: nurse → pilot")
    written in, as an analyst would type them into the model."""
    lines = [m.value for m in app.markdown if "ounterfactual**:" in m.value]
    assert len(lines) == 1, [m.value for m in app.markdown]
    text = lines[0].split("**:", 1)[1].strip().replace("\\", "")
    changes = CHANGE.findall(text)
    assert changes, text
    out = df.iloc[[row]][COLUMNS].copy()
    for col, _, after in changes:
        out[col] = after if col == "job" else parse_number(after)
    return out


def _target(app, regressor: bool):
    if regressor:
        return app.number_input(key="dr_lo").value, app.number_input(key="dr_hi").value
    return app.selectbox(key="dr_target").value


def _gets(model, rows: pd.DataFrame, target, regressor: bool) -> bool:
    out = model.predict(rows)[0]
    return bool(target[0] <= out <= target[1]) if regressor else bool(out == target)


def _walk(app, df, model, regressor: bool, row: int, axes: tuple[str, str]) -> list[str]:
    """Both views of the page on ``axes`` for ``row``; every counterfactual shown is checked
    on ``model``; the guarantee sentences shown are returned."""
    app.number_input(key="dr_row").set_value(row).run()
    app.selectbox(key="dr_fa").set_value(axes[0])
    app.selectbox(key="dr_fb").set_value(axes[1])
    app.number_input(key="dr_max").set_value(200).run()
    said = []
    for mode in ("slice", "projection"):
        app.radio(key="dr_mode").set_value(mode).run()
        assert not app.exception and not app.error, (mode, app.exception, [e.value for e in app.error])
        assert _gets(model, _shown_counterfactual(app, df, row), _target(app, regressor), regressor), mode
        said += [c.value for c in app.caption if c.value.startswith("What ")]
    return said


@pytest.mark.parametrize("family", ["logistic", "linear_svm", "ridge"])
def test_a_linear_model_walks_both_views_with_its_counterfactual_valid_on_it(family):
    df, score = _table()
    regressor = family == "ridge"
    final = {"logistic": LogisticRegression(), "linear_svm": LinearSVC(), "ridge": Ridge()}[family]
    model = _pipe(final, df, score if regressor else (score > 0).astype(int))
    y = score if regressor else (score > 0).astype(int)
    ws = build_workspace(df.assign(y=y), "y", model, name=family)
    assert ws.model_kind == "linear"
    app = _app_on(ws)
    said = _walk(app, df, model, regressor, row=3, axes=("income", "job=pilot"))   # a one-hot axis, index 5
    assert any("Proven optimal (exact for a linear model)" in s for s in said), said
    assert any("Exact on its surrogate" in s and "not on the model itself" in s for s in said), said


@pytest.fixture(scope="module")
def mlp_app():
    from core.intake.worker import ModelWorker

    df, score = _table()
    y = (score > 0).astype(int)
    pipe = _pipe(MLPClassifier(hidden_layer_sizes=(16,), max_iter=500, random_state=0), df, y)
    worker = ModelWorker(sio.dumps(pipe), "mlp.skops")
    ws = build_workspace(df.assign(y=y), "y", worker.model("mlp"), name="mlp")
    yield df, pipe, ws
    worker.stop()


def test_an_mlps_counterfactual_is_checked_on_it_and_never_called_exact(mlp_app):
    df, pipe, ws = mlp_app
    assert ws.model_kind == "black_box"
    app = _app_on(ws)
    said = _walk(app, df, pipe, False, row=0, axes=("income", "debt"))
    assert not any("Exact counterfactual" in m.value for m in app.markdown)
    assert {m.label: m.value for m in app.metric}["Counterfactual"] != "optimal"
    assert any("Valid on the uploaded model (checked on it)" in s for s in said), said
    assert any("Exact on its surrogate" in s and "not on the model itself" in s for s in said), said


def _on_pipe(pipe, ws, X) -> np.ndarray:
    return pipe.predict(ws.to_raw(np.atleast_2d(X))[COLUMNS])


def test_an_mlps_exact_counterfactual_is_checked_and_repaired_on_it(mlp_app):
    df, pipe, ws = mlp_app
    X = ws.X.to_numpy(float)
    solve_on, extra = ws.query_model()
    refused = 0
    for i in range(4):
        t = 1 - ws.predictions[i]
        alone = exact_counterfactual(ws.ensemble, X[i], t, schema=ws.schema, X_ref=X)     # the surrogate's own answer
        refused += int(_on_pipe(pipe, ws, alone.x)[0] != t)
        r = exact_counterfactual(solve_on, X[i], t, schema=ws.schema, X_ref=X, **extra)
        assert r.found and _on_pipe(pipe, ws, r.x)[0] == t                      # valid on the MLP itself
        g = r.guarantee
        assert (g.kind, g.model_kind, g.surrogate_fidelity) == ("valid_on_model", "black_box", ws.surrogate.fidelity)
        assert r.status != "optimal" and "not proven optimal" in g.text()
        back = type(r).from_json(r.to_json())                     # what answered, in the JSON too
        assert back.backend == back.params["backend"] == "surrogate" and back.params["surrogate_backend"] == "regions"
        assert projection_reach(r, ws.ensemble, X[i], t) == max(r.cost, r.params["surrogate"]["cost"])
    assert refused >= 1            # the surrogate's answer alone is not the model's: the check is needed


def test_an_mlps_regions_are_its_surrogates_and_each_is_put_to_it(mlp_app):
    df, pipe, ws = mlp_app
    X = ws.X.to_numpy(float)
    x, t = X[0], 1 - ws.predictions[0]
    rs = projection_regions(ws.ensemble, x, t, ("income", "debt"), radius=0.5, schema=ws.schema, max_regions=150,
                            model=ws.model, surrogate=ws.surrogate)
    assert rs.regions
    g = rs.guarantee
    assert (g.kind, g.model_kind, g.surrogate_fidelity) == ("exact", "black_box", ws.surrogate.fidelity)
    assert "not on the model itself" in g.text()
    points = np.array([r.point for r in rs.regions])
    assert [r.on_model for r in rs.regions] == list(_on_pipe(pipe, ws, points) == t)
    assert type(rs).from_json(rs.to_json()).regions[0].on_model == rs.regions[0].on_model
    sl = slice_regions(ws.ensemble, x, ("income", "debt"), max_regions=150, model=ws.model, surrogate=ws.surrogate)
    said = _on_pipe(pipe, ws, np.array([r.point for r in sl.regions]))
    assert [r.on_model for r in sl.regions] == [str(a) == str(r.prediction) for a, r in zip(said, sl.regions)]
    assert sl.guarantee.via_surrogate and sl.guarantee.kind == "exact"
    with pytest.raises(QueryError, match="pass model="):
        exact_counterfactual(ws.ensemble, x, t, surrogate=ws.surrogate)
    with pytest.raises(QueryError, match="margin"):
        exact_counterfactual(ws.ensemble, x, t, model=ws.model, surrogate=ws.surrogate, margin=0.7)


def test_a_linear_models_exact_counterfactual_is_its_milp():
    df, score = _table()
    y = (score > 0).astype(int)
    pipe = _pipe(LogisticRegression(), df, y)
    ws = build_workspace(df.assign(y=y), "y", pipe, name="lr")
    X = ws.X.to_numpy(float)
    solve_on, extra = ws.query_model()
    for i in range(3):
        t = 1 - ws.predictions[i]
        r = exact_counterfactual(solve_on, X[i], t, schema=ws.schema, **extra)
        assert (r.guarantee.kind, r.guarantee.model_kind) == ("proven_optimal", "linear")
        assert _on_pipe(pipe, ws, r.x)[0] == t
        assert r.cost == pytest.approx(optimal_counterfactual(ws.linear, X[i], t, schema=ws.schema).cost, abs=1e-9)
