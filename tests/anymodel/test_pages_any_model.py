"""The app with a model that is not a tree ensemble: uploaded as a user would (skops), read as
what it is, and every page's own computation runs on it and says what its answers guarantee."""

from __future__ import annotations

import io
import operator

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from conftest import ROOT
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")
PAGES = sorted(p.name for p in (ROOT / "pages").glob("*.py"))


def _table(seed: int = 0, n: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n), "sex": rng.integers(0, 2, n)})
    df["label"] = ((df.income - 50) / 15 + (df.job == "pilot") - 0.02 * (df.age - 45) - 0.3 * df.sex
                   + rng.normal(0, .5, n) > 0).astype(int)
    return df


def _pipe(final, df):
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income", "sex"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    return make_pipeline(pre, final).fit(df.drop(columns="label"), df.label)


@pytest.fixture(scope="module")
def files():
    df = _table()
    mlp = _pipe(MLPClassifier(hidden_layer_sizes=(16,), max_iter=500, random_state=0), df)
    lr = _pipe(LogisticRegression(), df)
    bad = make_pipeline(FunctionTransformer(operator.neg), LogisticRegression()).fit(df[["age"]], df.label)
    return df, mlp, lr, {"mlp.skops": sio.dumps(mlp), "lr.skops": sio.dumps(lr), "bad.skops": sio.dumps(bad)}


def _upload(at, df, name, data):
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", df.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value("label").run()
    at.file_uploader(key="dm_model_file").upload(name, data)
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception, at.exception


def _app():
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    return at


def test_an_mlp_is_read_as_any_other_model_answered_by_itself(files):
    df, mlp, _, data = files
    at = _app()
    _upload(at, df, "mlp.skops", data["mlp.skops"])
    assert not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert ws.model_kind == "black_box" and ws.surrogate.fidelity > 0.9
    assert np.array_equal(ws.predictions, mlp.predict(df.drop(columns="label")))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Kind"] == "Any other" and metrics["Surrogate agreement"].endswith("%")
    assert any("not read exactly" in i.value for i in at.info)


def test_a_model_with_an_unsafe_type_is_refused_and_the_workspace_kept(files):
    df, _, _, data = files
    at = _app()
    before = at.session_state["workspace"]
    _upload(at, df, "bad.skops", data["bad.skops"])
    assert any("allow-list" in e.value for e in at.error), [e.value for e in at.error]
    assert at.session_state["workspace"] is before


def _click(at, label: str):
    next(b for b in at.button if b.label == label).click().run()


def _actions(at, page: str, ws, other: bytes) -> list[str]:
    """Run the page's own computation, small; return the captions and messages it shows."""
    refused = int(np.flatnonzero(ws.predictions == 0)[0])
    if page == "optimal_cf.py":
        at.number_input(key="ocf_row").set_value(refused).run()
        _click(at, "Find the optimal counterfactual")
        res = at.session_state["ocf_result"]
        assert res.found and res.guarantee is not None
        at.number_input(key="ocb_n").set_value(3).run()
        _click(at, "Run on 3 rows")
    elif page == "counterfactual_rules.py":
        at.number_input(key="cr_row").set_value(refused).run()
        at.button(key="cr_go").click().run()
    elif page == "decision_regions.py":
        # The page opened in the slice view and drew it: a second run in the same view (as
        # before) only drew the same 2,000 surrogate regions again.
        assert at.radio(key="dr_mode").value == "slice"
    elif page == "fcca.py":
        at.number_input(key="fcca_max").set_value(30)
        at.number_input(key="fcca_jobs").set_value(1)
        _click(at, "Compute counterfactuals and thresholds")
    elif page == "case_story.py":
        at.number_input(key="cs_row").set_value(refused).run()
        at.button(key="cs_go").click().run()
    elif page == "fairness_audit.py":
        at.multiselect(key="fa_protected").set_value(["sex"])
        at.number_input(key="fa_perm").set_value(200)
        at.number_input(key="fa_boot").set_value(100)
        at.number_input(key="fa_local").set_value(2)
        at.number_input(key="fa_jobs").set_value(1)
        at.number_input(key="fa_rows").set_value(12).run()
        at.button(key="fa_go").click().run()
        audit = at.session_state["fa_result"]["audit"]
        assert len(audit.rows) == 12
    elif page == "compare_models.py":
        at.radio(key="cm_source").set_value("Upload a model file").run()
        at.file_uploader(key="cm_model_file").upload("other.skops", other)
        at.run()
        at.button(key="cm_load_file").click().run()
        assert not at.error, [e.value for e in at.error]
        at.multiselect(key="cm_protected").set_value(["sex"]).run()
        # 10 is the least the page takes: 6 (as before) was refused, and the study took all 200 rows.
        at.number_input(key="cm_rows").set_value(10)
        at.number_input(key="cm_jobs").set_value(1).run()
        at.button(key="cm_go").click().run()
        assert any(b.label == "Study 10 rows" for b in at.button), [b.label for b in at.button]
        c = at.session_state["cm_result"]["c"]                # 'valid under both': an extra cost, no error
        assert "error" not in set(c.rows["status_a"]) | set(c.rows["status_both"]), c.rows
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Valid under both"] == f"{int((c.rows['found_both'] == 1).sum()):,}", metrics
        assert metrics["Mean extra cost"] != "–", metrics
    assert not at.exception, (page, at.exception)
    return [e.value for e in [*at.caption, *at.success, *at.info, *at.warning, *at.markdown]]


@pytest.mark.slow
@pytest.mark.parametrize("model_file, other, kind, says", [
    ("mlp.skops", "lr.skops", "black_box", "Valid on the uploaded model (checked on it)"),
    ("lr.skops", "mlp.skops", "linear", "Proven optimal (exact for a linear model)"),
])
def test_every_page_runs_on_the_model_and_says_what_it_guarantees(files, model_file, other, kind, says):
    df, mlp, lr, data = files
    at = _app()
    _upload(at, df, model_file, data[model_file])
    ws = at.session_state["workspace"]
    assert ws.model_kind == kind
    original = mlp if kind == "black_box" else lr
    assert {"optimal_cf.py", "fairness_audit.py", "case_story.py", "compare_models.py"} <= set(PAGES)   # checked below
    for page in PAGES:
        at.switch_page(str(ROOT / "pages" / page)).run()
        assert not at.exception, (page, at.exception)
        shown = _actions(at, page, ws, data[other])
        if page == "optimal_cf.py":
            assert any(says in s for s in shown), shown
            bound = next(m.proto.help for m in at.metric if m.label == "Lower bound")   # "proven" only of what is
            assert ("proven by the solver" in bound) == (kind == "linear") and \
                ("surrogate" in bound) == (kind == "black_box"), bound
            res = at.session_state["ocf_result"]
            raw = ws.to_raw(res.x[None, :])[["age", "income", "sex", "job"]]
            assert original.predict(raw)[0] == 1                      # valid on the uploaded model itself
        if page == "fairness_audit.py":
            table = at.session_state["fa_result"]["audit"].rows
            found = table[table["feasible"] == 1]
            assert len(found)
            assert any(s.startswith("What each row") and says in s for s in shown), shown
        if page in ("case_story.py", "compare_models.py"):
            assert any(s.startswith("What ") and " guarantees: " in s for s in shown), (page, shown)
        if page == "compare_models.py":       # both slices are surrogates' (one model each kind): said so
            drawn = [s for s in shown if s.startswith("What this drawing guarantees: ")]
            assert len(drawn) == 2 and all("Exact on its surrogate" in s for s in drawn), shown
        if page in ("fcca.py", "decision_regions.py") and kind == "black_box":
            assert any("surrogate" in s for s in shown), (page, shown)


def test_a_batch_of_counterfactuals_says_and_exports_what_it_guarantees(files, downloads):
    """The Many rows tab on an MLP: beside the table and in its CSV, what the batch guarantees
    (valid on the model, never proven optimal); each counterfactual exported is the MLP's target."""
    df, mlp, _, data = files
    at = _app()
    _upload(at, df, "mlp.skops", data["mlp.skops"])
    at.switch_page(str(ROOT / "pages" / "optimal_cf.py")).run()
    at.number_input(key="ocb_n").set_value(3).run()
    _click(at, "Run on 3 rows")
    assert not at.exception, at.exception
    says = [c.value for c in at.caption if c.value.startswith("What this batch guarantees: ")]
    assert len(says) == 1 and "Valid on the uploaded model (checked on it)" in says[0], says
    table = pd.read_csv(io.StringIO(downloads["ocb_dl"]))
    assert len(table) == 3 and set(table["guarantee"]) == {"valid_on_model"}
    assert set(table["guarantee_text"]) == {says[0].split(": ", 1)[1]}
    cf = table[[f"cf:{c}" for c in ("age", "income", "job", "sex")]].rename(columns=lambda c: c[3:])
    assert (mlp.predict(cf) == 1).all()


def test_a_model_not_read_exactly_is_never_kept_as_its_surrogate(files, fresh_history, tmp_path):
    """An MLP's surrogate is not the MLP: no link offers to keep it (a link would open the surrogate
    in the model's place, claiming proven optimal), and its audit is stored without a model (Compare
    models would load the surrogate as "the model of audit #n"), titled by the model, not the surrogate."""
    from core.audit.history import AuditStore, HistoryError
    from dashboard import history

    df, _, _, data = files
    at = _app()
    _upload(at, df, "mlp.skops", data["mlp.skops"])
    assert not [b for b in at.sidebar.button if b.key == "share_view"]
    assert any("A link cannot keep this model" in c.value for c in at.sidebar.caption), \
        [c.value for c in at.sidebar.caption]
    ws = at.session_state["workspace"]
    at.switch_page(str(ROOT / "pages" / "fairness_audit.py")).run()
    _actions(at, "fairness_audit.py", ws, b"")
    audit = at.session_state["fa_result"]["audit"]
    db = history.store()
    listed = db.list()
    assert len(listed) == 1 and "surrogate" not in listed["title"].iloc[0], listed
    assert db.with_models() == []
    with pytest.raises(HistoryError, match="not a tree ensemble"):
        AuditStore(f"sqlite:///{tmp_path / 'other.sqlite'}").save(audit, ensemble=ws.ensemble)
