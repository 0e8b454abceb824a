"""Audits, comparisons and stories of models that are not tree ensembles, trained outside the
project (an MLP pipeline run in its worker, a LogisticRegression pipeline read exactly): every
answer is checked on the models themselves, every report and export says what it guarantees
(never "the smallest" for a surrogate's answer), progress counts each row once, and the
parameters read as a person reads them."""

from __future__ import annotations

import html as htmllib
import io
import json
import re

import numpy as np
import pandas as pd
import pytest

from core.audit import run_audit
from core.audit.compare import compare_models
from core.audit.report import plain_summary
from core.audit.story import case_story
from core.model.guarantee import guarantee_line

COLS = ["age", "income", "job", "sex"]


@pytest.fixture(scope="module")
def any_kinds():
    """An MLP pipeline (any other model, in its worker) and a LogisticRegression pipeline
    (a linear model), trained outside the project, the MLP saved with skops, on one table."""
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from core.intake.worker import ModelWorker
    from core.intake.workspace import build_workspace

    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n), "sex": rng.integers(0, 2, n)})
    df["label"] = ((df.income - 50) / 15 + (df.job == "pilot") - 0.02 * (df.age - 45) - 0.3 * df.sex
                   + rng.normal(0, .5, n) > 0).astype(int)

    def pipe(final):
        pre = ColumnTransformer([("num", StandardScaler(), ["age", "income", "sex"]),
                                 ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
        return make_pipeline(pre, final).fit(df.drop(columns="label"), df.label)

    mlp = pipe(MLPClassifier(hidden_layer_sizes=(16,), max_iter=800, random_state=0))
    lr = pipe(LogisticRegression(C=0.05))
    worker = ModelWorker(sio.dumps(mlp), "mlp.skops")
    wa = build_workspace(df, "label", worker.model("mlp"), name="mlp", protected=["sex"])
    wb = build_workspace(df, "label", lr, name="lr", protected=["sex"])
    yield df, mlp, lr, wa, wb
    worker.stop()


@pytest.fixture(scope="module")
def mlp_audit(any_kinds):
    """An audit of the MLP, with the progress it reported."""
    df, mlp, lr, wa, wb = any_kinds
    seen: list[tuple[str, int, int]] = []
    on, extra = wa.query_model()
    audit = run_audit(on, wa.X, schema=wa.schema, target=1, max_rows=16, n_jobs=1, time_limit=10, tcrex=False,
                      local_rules_per_group=0, min_subgroup=4, n_boot=100, n_perm=200, y=wa.y,
                      progress=lambda stage, d, t: seen.append((stage, d, t)), **extra)
    return audit, seen


def _summary(html: str) -> str:
    part = html.split('<section class="summary">', 1)[1].split("</section>", 1)[0]
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part)))


def test_a_black_box_against_a_linear_model_has_a_recourse_valid_under_both_and_no_errors(any_kinds):
    """'Valid under both' for models of other kinds: a row whose recourse under A model B
    honours has that recourse valid under both (extra cost 0); the others get one checked
    (and repaired) on both models themselves; no row is in error, and the extra cost of
    every row with both recourses is there."""
    df, mlp, lr, wa, wb = any_kinds
    assert wa.model_kind == "black_box" and wb.model_kind == "linear"
    X = wa.X.to_numpy(float)
    c = compare_models(wa.ensemble, wb.linear, X, schema=wa.schema, target=1, max_rows=24, time_limit=10, n_jobs=1,
                       model_a=wa.model, model_b=wb.model, surrogate_a=wa.surrogate, surrogate_b=wb.surrogate,
                       n_boot=100, n_perm=200)
    r = c.rows
    assert "error" not in set(r["status_a"]) | set(r["status_both"]), r[["status_a", "status_both"]]
    found = r["found_a"].to_numpy() == 1
    assert found.all() and r["invalidated"].sum() >= 1 and (r["invalidated"] == 0).sum() >= 1
    kept = found & (r["invalidated"].to_numpy() == 0)
    assert (r["extra_cost"].to_numpy()[kept] == 0).all()
    assert np.array_equal(c.points_both[kept], c.points_a[kept])
    both = r["found_both"].to_numpy() == 1
    assert both.all() and np.isfinite(r["extra_cost"].to_numpy()[both]).all()
    raw = wa.to_raw(c.points_both)[COLS]
    assert (mlp.predict(raw) == 1).all() and (lr.predict(raw) == 1).all()      # valid on both models themselves
    assert (raw["sex"].to_numpy() == df["sex"].to_numpy()[r["row"].to_numpy()]).all()   # protected: held fixed
    # the report says what the recourses guarantee, and never calls A's answer the smallest
    html = c.to_html()
    brief = _summary(html)
    assert "smallest" not in brief and "through its surrogate, checked on model A" in brief, brief
    assert "What each of model A's recourses guarantees: Valid on the uploaded model (checked on it)" in brief
    assert "What each recourse valid under both guarantees: Valid on the uploaded model (checked on it)" in brief
    assert "{&quot;" not in html.split("<h3>Parameters</h3>", 1)[1].split("<script", 1)[0]
    back = pd.read_csv(io.StringIO(c.rows_csv()))
    assert set(back["guarantee"]) == {"valid_on_model"} and back["guarantee_text"].str.contains("checked on it").all()


def test_the_audit_of_a_black_box_counts_each_row_once_and_never_calls_its_answers_the_smallest(any_kinds,
                                                                                                  mlp_audit):
    df, mlp, lr, wa, wb = any_kinds
    audit, seen = mlp_audit
    recourse = [(d, t) for stage, d, t in seen if stage == "recourse"]
    assert {t for _, t in recourse} == {16} and recourse[-1] == (16, 16)      # each audited row once
    assert [d for d, _ in recourse] == sorted(d for d, _ in recourse)
    found = audit.rows[audit.rows["feasible"] == 1]
    assert len(found) >= 12
    raw = wa.to_raw(audit.counterfactuals[audit.rows["feasible"].to_numpy() == 1])[COLS]
    assert (mlp.predict(raw) == 1).all()                                      # valid on the MLP itself
    g = audit.recourse_guarantee
    assert g.kind == "valid_on_model" and g.model_kind == "black_box" and g.surrogate_fidelity is not None
    html = audit.to_html()
    brief = _summary(html)
    assert "smallest" not in brief and "found through a surrogate of the model and checked on the model itself" \
        in brief, brief
    assert "What each case's change guarantees: Valid on the uploaded model (checked on it); optimal for its " \
           "surrogate" in brief
    assert guarantee_line(audit.guarantee, "each group's figures") in htmllib.unescape(html)
    assert "None trees" not in html and "surrogate of 100 trees agreeing with it on" in html
    lead, body = plain_summary(audit)
    assert not any("smallest change to its data" in b for b in body)
    back = pd.read_csv(io.StringIO(audit.rows_csv()))
    assert set(back["guarantee"]) == {"valid_on_model"} and back["guarantee_text"].str.contains("surrogate").all()


def test_the_parameters_read_as_a_person_reads_them_and_stay_exact_in_the_saved_audit(mlp_audit):
    from core.audit.report import parameter_text

    audit, _ = mlp_audit
    params = audit.meta["parameters"]
    assert params["protected"] == {"sex": ["sex"]} and params["time_limit"] == 10     # an integer stays one
    assert isinstance(params["time_limit"], int) and '"time_limit": 10,' in audit.to_json()
    budget = params["budget"]
    assert isinstance(budget, float) and len(repr(budget)) > 6                # the budget used, exactly
    html = audit.to_html()
    table = html.split("<h3>Parameters</h3>", 1)[1].split("</table>", 1)[0]
    cells = dict(re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", table))
    assert cells["protected"] == "sex" and cells["time_limit"] == "10" and cells["scan"] == "yes"
    assert cells["budget"] == parameter_text("budget", budget) and len(cells["budget"].replace("0.", "")) <= 4
    assert cells["held_fixed"] == "sex" and "{" not in table and "[" not in table
    assert parameter_text("protected", {"job": ["job=clerk", "job=nurse"], "sex": ["sex"]}) == \
        "job (job=clerk, job=nurse); sex"
    assert parameter_text("budget", 0.03103031030310303) == "0.03103"
    assert parameter_text("target", [194.6, 313.64]) == "(194.6, 313.6)" and parameter_text("max_rows", None) == "–"
    saved = json.loads(audit.to_json())
    assert saved["meta"]["parameters"]["budget"] == budget                    # exact where it must be


def test_the_story_of_a_case_names_its_model_and_what_its_change_guarantees(any_kinds):
    df, mlp, lr, wa, wb = any_kinds
    row = int(np.flatnonzero(wa.predictions == 0)[0])
    story = case_story(wa, row, 1, time_limit=10)
    res = story.facts["counterfactual"]
    assert res.found and mlp.predict(wa.to_raw(res.x[None, :])[COLS])[0] == 1
    brief = " ".join(story.summary)
    assert f"The model: {wa.model.source}, any other model" in brief and "surrogate" in brief
    assert guarantee_line(res.guarantee, "this change") in story.summary
    assert "What this change guarantees: Valid on the uploaded model (checked on it)" in _summary(story.to_html())
    lin = case_story(wb, row, 1, time_limit=10)
    assert f"The model: {wb.linear.source}, linear model, read exactly." in lin.summary
    assert "What this change guarantees: Proven optimal (exact for a linear model)." in " ".join(lin.summary)


def test_the_command_line_audits_a_linear_model_exactly_and_says_so(any_kinds, tmp_path, capsys):
    """``python -m core.audit`` on a LogisticRegression pipeline: the linear model itself is
    audited (not its surrogate), and the report says its recourses are proven optimal."""
    import skops.io as sio

    from core.audit.cli import main
    from core.audit.result import Audit

    df, mlp, lr, wa, wb = any_kinds
    data, model, out = tmp_path / "table.csv", tmp_path / "lr.skops", tmp_path / "audit.html"
    df.to_csv(data, index=False)
    model.write_bytes(sio.dumps(lr))
    rc = main(["--data", str(data), "--model", str(model), "--protected", "sex", "--target", "1",
               "--target-column", "label", "--rows", "12", "--permutations", "100", "--bootstrap", "50",
               "--local-rules", "0", "--no-tcrex", "--no-scan", "--jobs", "1", "--out", str(out)])
    assert rc == 0, capsys.readouterr().out
    audit = Audit.from_file(out.read_bytes())
    assert audit.meta["model"]["kind"] == "linear" and audit.recourse_guarantee.kind == "proven_optimal"
    assert "What each case's change guarantees: Proven optimal (exact for a linear model)." in \
        _summary(out.read_text())
    back = pd.read_csv(out.with_suffix(".csv"))
    found = back[back["feasible"] == 1]
    raw = pd.DataFrame({c: found[f"cf:{c}"].to_numpy() for c in COLS})        # the recourses, as the CSV has them
    assert len(found) >= 10 and (lr.predict(raw) == 1).all() and set(back["guarantee"]) == {"proven_optimal"}


def test_under_constraints_every_recourse_of_a_black_box_and_a_linear_model_keeps_them(any_kinds):
    """Constraints between features in a comparison of models not read as trees: A's recourse
    (through the MLP's surrogate, checked on the MLP) and the one valid under both (repaired on
    both models) keep every constraint; a row the linear model B precludes is proven so, and
    the MLP, known by its answers, proves nothing."""
    from core.optimal import verify_recourse

    df, mlp, lr, wa, wb = any_kinds
    texts = ["delta(age) >= 0", "delta(income) <= 12"]
    X = wa.X.to_numpy(float)
    c = compare_models(wa.ensemble, wb.linear, X, schema=wa.schema, target=1, max_rows=12, time_limit=10, n_jobs=1,
                       model_a=wa.model, model_b=wb.model, surrogate_a=wa.surrogate, surrogate_b=wb.surrogate,
                       n_boot=50, n_perm=50, constraints=texts)
    assert c.params["constraints"] == texts
    kept = wa.schema.with_constraints(texts)
    cons, r = kept.parsed_constraints(), c.rows
    rows = r["row"].to_numpy(int)
    for pts, found in ((c.points_a, r["found_a"]), (c.points_both, r["found_both"])):
        got = np.flatnonzero(found.to_numpy() == 1)
        assert got.size
        for k in got:
            assert cons.violated(X[rows[k]], pts[k]) == [], (k, pts[k])
        raw = wa.to_raw(pts[got])[COLS]
        assert (mlp.predict(raw) == 1).all()
    both = np.flatnonzero(r["found_both"].to_numpy() == 1)
    assert (lr.predict(wa.to_raw(c.points_both[both])[COLS]) == 1).all()
    assert r.loc[r["found_a"] == 0, "precluded_a"].isna().all()        # the MLP proves nothing
    b = r["precluded_b"].to_numpy()
    assert np.isin(b, [0, 1]).all() and (b == 1).any()
    for k in np.flatnonzero(b == 1)[:3]:
        assert verify_recourse(wb.linear, X[rows[k]], 1, schema=kept, fixed=["sex"], explain=False).precluded
