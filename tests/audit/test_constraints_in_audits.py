"""Constraints between features in the audit, the case story and Compare models (issue #61):
``constraints=`` is taken by each, honoured (every recourse counted keeps the constraints and
is valid on the model; no recourse is cheaper than the one without them), recorded in the
parameters and the saved JSON; a row no action under them helps is counted *precluded* per
group, each count proven again by :func:`core.optimal.verify_recourse`; the report shows the
constraints by their lines and the precluded rows per group; the story of a precluded case
says so and names the constraints that block it; a comparison counts the rows precluded
under model A, under model B and under both."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from core.audit import Audit, run_audit
from core.audit.compare import ModelComparison, compare_models
from core.audit.story import case_story
from core.constraints import parse
from core.intake.models import from_model
from core.intake.workspace import build_workspace
from core.optimal import verify_recourse
from core.schema import infer_schema

# a comment and three constraints: the constraints sit on lines 2, 3 and 4
TEXT = "# people only grow older, and not by much\ndelta(age) >= 0\ndelta(age) <= 5\ndelta(income) <= 30"
TEXTS = ["delta(age) >= 0", "delta(age) <= 5", "delta(income) <= 30"]
LINES = {"delta(age) >= 0": 2, "delta(age) <= 5": 3, "delta(income) <= 30": 4}
AUDIT = dict(target=1, max_rows=24, n_jobs=1, time_limit=10, n_perm=200, n_boot=100, tcrex=False,
             local_rules_per_group=0, scan=False)


def _table(n: int, bias: float, seed: int = 0) -> pd.DataFrame:
    """Approval needs income + age / 2 - 20 debt to pass 70 (``bias`` more for sex = 1): a row
    far below it cannot get there with 30 more income and 5 more years."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"income": rng.uniform(0, 100, n).round(1), "age": rng.integers(18, 71, n).astype(float),
                       "debt": rng.uniform(0, 1, n).round(3), "sex": rng.integers(0, 2, n).astype(float)})
    df["approved"] = (df.income + 0.5 * df.age - 20 * df.debt - bias * df.sex > 70).astype(int)
    return df


@pytest.fixture(scope="module")
def toy():
    df = _table(1500, 25)
    X = df.drop(columns="approved")
    model_a = RandomForestClassifier(15, max_depth=5, random_state=0).fit(X, df.approved)
    late = _table(1500, 35, seed=1)
    model_b = RandomForestClassifier(15, max_depth=5, random_state=0).fit(late.drop(columns="approved"), late.approved)
    schema = infer_schema(X, protected=["sex"])
    return df, X, schema, model_a, model_b


@pytest.fixture(scope="module")
def audits(toy):
    df, X, schema, model_a, _ = toy
    ens = from_model(model_a)
    free = run_audit(ens, X, schema=schema, model=model_a, **AUDIT)
    kept = run_audit(ens, X, schema=schema, model=model_a, constraints=TEXT, **AUDIT)
    return free, kept


def test_the_audit_counts_only_recourse_that_keeps_the_constraints(toy, audits):
    df, X, schema, model_a, _ = toy
    free, a = audits
    cons = parse(TEXT, schema)
    assert a.params["constraints"] == TEXTS and a.meta["schema"]["constraints"] == TEXT.split("\n")
    assert free.params["constraints"] == []
    back = Audit.from_dict(json.loads(a.to_json()))                 # recorded in the saved audit
    assert back.params["constraints"] == TEXTS and back.precluded.equals(a.precluded)
    assert list(a.rows["row"]) == list(free.rows["row"])             # the same rows, with and without
    Xn = X.to_numpy(float)
    found = (a.rows["feasible"] == 1).to_numpy()
    pre = (a.rows["precluded"] == 1).to_numpy()
    assert found.any() and pre.any()
    for k in np.flatnonzero(found):                                  # every recourse counted keeps them
        i, cf = int(a.rows["row"].iloc[k]), a.counterfactuals[k]
        assert cons.violated(Xn[i], cf) == [], i
        assert model_a.predict(pd.DataFrame(cf[None, :], columns=X.columns))[0] == 1
    # the constrained points are among the free ones: no recourse under them is cheaper
    both = found & (free.rows["feasible"] == 1).to_numpy() & (free.rows["status"] == "optimal").to_numpy()
    assert both.any()
    # (up to where each solver places its point inside the optimal cell: the free path's points sit
    # further in than the constrained search's (1e-4 more cost seen here); both are valid on the model,
    # and tests/kernel/test_constraints_exact.py checks the infima themselves against an oracle)
    assert (a.rows["cost"].to_numpy()[both] >= free.rows["cost"].to_numpy()[both] - 1e-3).all()
    # a precluded row has no recourse and no cost, and counts against its group's share
    assert (a.rows.loc[pre, "feasible"] == 0).all() and a.rows.loc[pre, "cost"].isna().all()
    decided = a.rows["status"].isin(["optimal", "feasible", "time_limit_found", "infeasible"])
    for _, g in a.groups.iterrows():
        here = (a.rows["group:sex"].astype(str) == str(g["group"])) & decided
        assert g["feasible"] == pytest.approx(a.rows.loc[here, "feasible"].mean())
        assert g["precluded"] == pytest.approx(a.rows.loc[here, "precluded"].mean())


def test_every_row_counted_precluded_is_proven_and_its_gap_tested(toy, audits):
    df, X, schema, model_a, _ = toy
    a = audits[1]
    kept = schema.with_constraints(TEXT)
    Xn = X.to_numpy(float)
    for i in a.rows.loc[a.rows["precluded"] == 1, "row"].astype(int)[:6]:
        assert verify_recourse(model_a, Xn[i], 1, schema=kept, fixed=["sex"], explain=False).precluded, i
    p = a.precluded
    assert int(p["precluded"].sum()) == int(a.rows["precluded"].sum()) > 0
    t = a.tests[a.tests["metric"] == "precluded"]
    assert len(t) == 1                                               # the gap between the two groups, tested
    shares = dict(zip(p["group"].astype(str), p["share"]))
    assert t["group_value"].iloc[0] == pytest.approx(shares[str(t["group"].iloc[0])])
    assert t["reference_value"].iloc[0] == pytest.approx(shares[str(t["reference"].iloc[0])])
    assert 0 < t["p_value"].iloc[0] <= t["p_holm"].iloc[0] <= 1


def test_constraints_given_replace_the_schemas_own(toy):
    df, X, schema, model_a, _ = toy
    few = {**AUDIT, "max_rows": 6}
    a = run_audit(from_model(model_a), X, schema=schema.with_constraints(TEXT), model=model_a, constraints=[], **few)
    assert a.params["constraints"] == [] and "constraints" not in a.meta["schema"]
    cons = parse(TEXT, schema)                                      # parsed: each keeps its line
    a = run_audit(from_model(model_a), X, schema=schema, model=model_a, constraints=cons, **few)
    assert a.params["constraints"] == TEXTS
    assert a.meta["schema"]["constraints"] == ["", "delta(age) >= 0", "delta(age) <= 5", "delta(income) <= 30"]


def test_the_report_shows_the_constraints_by_line_and_the_precluded_rows_per_group(audits):
    a = audits[1]
    html = a.to_html()
    part = html.split("<h2>Constraints between features</h2>", 1)[1].split("<h2>", 1)[0]
    for text, line in LINES.items():
        assert f'<li value="{line}"><code>{text.replace(">", "&gt;").replace("<", "&lt;")}</code></li>' in part
    table = html.split("<h2>Rows precluded per group</h2>", 1)[1].split("</table>", 1)[0]
    for _, r in a.precluded.iterrows():
        assert f"<td>{r['group']}</td><td>{r['rows']}</td><td>{r['precluded']}</td>" in table
    n = int(a.rows["precluded"].sum())
    assert f"For {n} cases it is proven that no change within them gets 1: they are precluded." in html
    assert "<h2>Rows precluded per group</h2>" not in audits[0].to_html()     # none in force, none precluded


def test_the_story_of_a_precluded_case_says_so_and_what_blocks_it(toy, audits):
    df, X, schema, model_a, _ = toy
    a = audits[1]
    ws = build_workspace(df, "approved", model_a, name="toy", protected=["sex"])
    assert not ws.schema.constraints
    row = int(a.rows.loc[a.rows["precluded"] == 1, "row"].iloc[0])
    story = case_story(ws.with_schema(ws.schema.with_constraints(TEXT)), row, 1, time_limit=20, audit=a)
    change = dict(story.sections)["The smallest change"]
    assert change[0] == ("This case has no recourse under the constraints between features: no change that keeps "
                         "them gets 1 (proven).")
    blocking = story.facts["blocking"]
    assert story.facts["precluded"] and blocking, story.facts
    assert all(LINES[b["text"]] == b["line"] for b in blocking)
    said = " and ".join(f"line {b['line']} ({b['text']})" for b in blocking)
    assert change[1].startswith(f"What blocks it: {said}: ")
    assert change[1] in story.summary and change[0] in story.summary
    # the set blocks the row, and none of its constraints can be left out
    texts = [b["text"] for b in blocking]
    x = X.to_numpy(float)[row]
    assert verify_recourse(model_a, x, 1, schema=schema, constraints=texts, fixed=["sex"], explain=False).precluded
    for k in range(len(texts)):
        rest = texts[:k] + texts[k + 1:]
        assert verify_recourse(model_a, x, 1, schema=schema, constraints=rest, fixed=["sex"],
                               explain=False).status == "reachable"
    assert story.params["constraints"] == TEXTS
    assert "are precluded" in " ".join(dict(story.sections)["How the case's group fares"])
    assert "What blocks it: line" in story.to_html()


def test_the_story_of_a_case_with_recourse_keeps_the_constraints_given(toy, audits):
    df, X, schema, model_a, _ = toy
    a = audits[1]
    ws = build_workspace(df, "approved", model_a, name="toy", protected=["sex"])
    row = int(a.rows.loc[a.rows["feasible"] == 1, "row"].iloc[0])
    story = case_story(ws, row, 1, time_limit=20, constraints=TEXTS)          # given, not the schema's
    res = story.facts["counterfactual"]
    assert res.found and parse(TEXTS, schema).violated(X.to_numpy(float)[row], res.x) == []
    kept = dict(story.sections)["The smallest change"][1]
    assert kept.startswith("The change keeps the constraints between features in force: line 1 (delta(age) >= 0), "
                           "line 2 (delta(age) <= 5) and line 3 (delta(income) <= 30).")
    assert story.params["constraints"] == TEXTS and "precluded" not in story.facts


def test_compare_models_counts_rows_precluded_under_each_model(toy):
    df, X, schema, model_a, model_b = toy
    c = compare_models(model_a, model_b, X, schema=schema, target=1, max_rows=20, model_a=model_a, model_b=model_b,
                       n_boot=100, n_perm=100, constraints=TEXT, n_jobs=1)
    assert c.params["constraints"] == TEXTS
    r, Xn, kept = c.rows, X.to_numpy(float), schema.with_constraints(TEXT)
    cons = kept.parsed_constraints()
    rows = r["row"].to_numpy(int)
    checked = 0
    for k in range(len(r)):                                          # every recourse keeps the constraints
        for pts in (c.points_a, c.points_both):
            if np.isfinite(pts[k]).all():
                assert cons.violated(Xn[rows[k]], pts[k]) == []
                checked += 1
    assert checked > 0, "no recourse was found: the constraints were not checked on any point"
    a, b = r["precluded_a"].to_numpy(), r["precluded_b"].to_numpy()
    assert np.isin(a, [0, 1]).all() and np.isin(b, [0, 1]).all()   # two forests: every row settled
    assert a.sum() >= 1 and (b > a).any()                          # B, stricter for sex = 1, precludes more
    assert (r.loc[a == 1, "found_a"] == 0).all()
    for k in np.flatnonzero((a == 1) | (b == 1) | ((b == 0) & (r["found_both"].to_numpy() == 0)))[:6]:
        for model, flag in ((model_a, a[k]), (model_b, b[k])):
            check = verify_recourse(model, Xn[rows[k]], 1, schema=kept, fixed=["sex"], explain=False)
            assert check.status == ("precluded" if flag == 1 else "reachable"), (k, flag)
    p = c.precluded
    every = p.iloc[0]
    assert (every["attribute"], every["rows"]) == ("(all rows)", len(r))
    assert (every["precluded_a"], every["precluded_b"], every["precluded_both"]) == (a.sum(), b.sum(), (a * b).sum())
    groups = p[p["attribute"] == "sex"]
    assert groups[["rows", "precluded_a", "precluded_b", "precluded_both"]].sum().tolist() == \
        [every["rows"], every["precluded_a"], every["precluded_b"], every["precluded_both"]]
    back = ModelComparison.from_dict(json.loads(c.to_json()))
    assert back.precluded.equals(p) and back.params["constraints"] == TEXTS
    html = c.to_html()
    assert "<h2>Rows precluded under A and under B</h2>" in html and '<li value="2"><code>delta(age) &gt;= 0' in html
    assert (f"{int(a.sum())} under model A, {int(b.sum())} under model B, {int((a * b).sum())} under both."
            in html)
