"""Fairness audit of recourse (core.audit, core.audit.fairstats, core.audit.report): the
planted bias of the demo is found, shuffled groups do not raise false alarms,
every recourse is valid on the model, the report is self-contained and
re-opens, the CLI and a Dask cluster give the same answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import demo_credit

from core.audit import Audit, AuditError, run_audit
from core.audit import fairstats as fs
from core.audit.stats import _statistics


@pytest.fixture(scope="module")
def credit():
    return demo_credit()


@pytest.fixture(scope="module")
def credit_audit(credit):
    df, target, model, ens, X, schema = credit
    # one audit with everything on (labels for the group fairness, the subgroup scan by default),
    # read by every test of an audit's content, saving and drawing
    return run_audit(ens, X, schema=schema, target=1, max_rows=240, n_jobs=1, model=model, n_perm=1000,
                     n_boot=300, local_rules_per_group=4, y=df[target].to_numpy())


@pytest.mark.slow
def test_the_planted_bias_shows_as_a_significant_cost_gap(credit_audit):
    a = credit_audit
    t = a.tests[(a.tests["attribute"] == "sex") & (a.tests["metric"] == "cost")].iloc[0]
    assert t["significant"] and t["p_holm"] < 0.05
    # the demo raises the approval bar for sex = 1: its recourse is dearer
    worse = 1 if t["group"] == "1" else -1
    assert worse * t["gap"] > 0
    assert t["gap_lo"] * t["gap_hi"] > 0          # the interval excludes 0
    assert any(s.startswith("sex = 1 is worse off") and "mean recourse cost" in s for s in a.summary)


def test_every_recourse_is_valid_on_the_model_and_keeps_the_protected_column(credit, credit_audit):
    df, target, model, ens, X, schema = credit
    a = credit_audit
    found = a.rows["feasible"].to_numpy() == 1
    assert found.sum() > 200
    cf = a.counterfactuals[found]
    assert np.all(model.predict(pd.DataFrame(cf, columns=X.columns)) == 1)
    rows = a.rows["row"].to_numpy()[found]
    sex = list(X.columns).index("sex")
    assert np.array_equal(cf[:, sex], X.to_numpy()[rows, sex])
    assert np.all(model.predict(X.iloc[a.rows["row"]]) != 1)   # only unfavourable decisions are audited
    # costs are those of the cost model: recompute from the points
    from core.counterfactual import make_cost_model

    cm = make_cost_model(ens, "l1", schema=schema)
    X0 = X.to_numpy()[rows]
    costs = np.array([cm.cost(x0, x[None])[0] for x0, x in zip(X0, cf)])
    # the reported cost is the infimum over the point's cell; the point is the value with the fewest
    # digits inside that cell, at most SHOWN_TOLERANCE of a range from its cheapest point per changed feature
    from core.cells.result import SHOWN_TOLERANCE

    extra = costs - a.rows["cost"].to_numpy()[found]
    assert np.all(extra >= -1e-12)
    assert np.all(extra <= SHOWN_TOLERANCE * a.rows["n_changed"].to_numpy()[found] + 1e-9)


def test_shuffled_groups_do_not_cry_wolf(credit_audit):
    rows = credit_audit.rows.copy()
    rng = np.random.default_rng(1)
    alarms, rejections, n = 0, 0, 40
    keep = [c for c in rows.columns if not c.startswith("local")]
    rows = rows[keep]
    for _ in range(n):
        rows["group:sex"] = rng.permutation(rows["group:sex"].to_numpy())
        _, tests = _statistics(rows, ["sex"], n_boot=50, n_perm=200, alpha=0.05, seed=int(rng.integers(1e9)))
        alarms += int(tests["significant"].any())
        rejections += int((tests.loc[tests["metric"] == "cost", "p_value"] < 0.05).sum())
    assert alarms / n <= 0.10        # family-wise error, Holm at 0.05
    assert rejections / n <= 0.15    # the cost test alone, nominal 0.05


def test_a_model_without_bias_gives_no_significant_gap():
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    from core.schema import infer_schema

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :8].copy()
    X["group"] = np.random.default_rng(3).integers(0, 2, len(X))   # unrelated to anything
    # 10 trees, not 30: the group is as unrelated to a smaller forest, and CP-SAT proves each of
    # the 150 rows' recourse about ten times faster; the rows, tests and their sizes are unchanged.
    model = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(X, y)
    schema = infer_schema(X, protected=["group"])
    a = run_audit(model, X, schema=schema, target=1, max_rows=150, n_perm=1000, n_boot=200,
                  local_rules_per_group=0, tcrex=False)
    assert not a.tests["significant"].any(), a.tests
    assert a.summary[0].startswith("No significant gap")


def test_a_protected_column_with_one_group_is_not_reported_as_no_gap():
    """A protected column with one value in every row (an outside trial: credit's SEX, "Male"
    throughout) gives no test; the summary said "No significant gap … (0 tests …)" and the page
    showed it as a success. It now says that no gap could be tested and what to do."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    from core.schema import infer_schema

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :6].copy()
    X["group"] = 1
    model = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    a = run_audit(model, X, schema=infer_schema(X, protected=["group"]), target=1, max_rows=20, n_perm=50,
                  n_boot=20, local_rules_per_group=0, tcrex=False)
    assert len(a.tests) == 0
    assert a.summary[0].startswith("No gap could be tested between the groups of group") and \
        "No significant gap" not in " ".join(a.summary), a.summary


def test_report_is_self_contained_and_reopens(credit_audit, tmp_path):
    import re

    html = credit_audit.to_html()
    # nothing is fetched: no script or stylesheet loaded from elsewhere (plotly.js is inlined)
    assert not re.search(r"<script[^>]*\ssrc=", html) and not re.search(r"<link[^>]*\shref=", html)
    assert "Plotly" in html and "Recourse audit" in html
    for needle in ("SHA-256", "Package versions", "Feature settings", "Parameters", credit_audit.summary[0][:40]):
        assert needle in html
    again = Audit.from_file(html.encode())
    pd.testing.assert_frame_equal(again.groups, credit_audit.groups)
    pd.testing.assert_frame_equal(again.tests, credit_audit.tests)
    assert again.summary == credit_audit.summary
    again_json = Audit.from_file(credit_audit.to_json().encode())
    pd.testing.assert_frame_equal(again_json.rows, credit_audit.rows)
    with pytest.raises(AuditError, match="not"):
        Audit.from_file(b"<html><body>hello</body></html>")
    with pytest.raises(AuditError):
        Audit.from_file(b"a,b\n1,2\n")
    with pytest.raises(AuditError, match="incomplete"):
        Audit.from_file(b'{"format": "counterfactual-atlas-audit", "rows": {"columns": ["x"], "data": [[1]]}}')


def test_crafted_or_damaged_saved_audits_are_refused_before_drawing(credit_audit):
    import copy
    import json

    good = credit_audit.to_dict()
    attr = next(iter(good["meta"]["parameters"]["protected"]))

    def mutated(fn):
        d = copy.deepcopy(json.loads(json.dumps(good, default=str)))
        fn(d)
        return json.dumps(d).encode()

    def col(table, name):
        return table["columns"].index(name)

    attacks = [
        lambda d: d["meta"].__setitem__("timings", "fast"),
        lambda d: d["meta"].__setitem__("timings", {"total": "soon"}),
        lambda d: d["meta"].__setitem__("notes", [{"a": 1}]),
        lambda d: d.__setitem__("summary", [1, 2]),
        lambda d: d["meta"]["parameters"].__setitem__("protected", {"nonexistent": [0]}),
        lambda d: [r.__setitem__(col(d["rows"], "cost"), "expensive") for r in d["rows"]["data"]],
        lambda d: [r.__setitem__(col(d["tests"], "p_value"), "small") for r in d["tests"]["data"]],
        lambda d: [r.__setitem__(col(d["tests"], "significant"), "yes") for r in d["tests"]["data"]],
        lambda d: d["meta"]["schema"].__setitem__("features", "all"),
        lambda d: [r.__setitem__(col(d["rows"], f"group:{attr}"), None) for r in d["rows"]["data"]],
    ]
    for attack in attacks:
        data = mutated(attack)
        try:
            Audit.from_file(data)
        except AuditError:
            continue
        # accepted: then it must draw in full, as the page and report do
        Audit.from_file(data).to_html()


def test_report_json_survives_script_tags_in_values(credit_audit):
    import dataclasses

    hostile = dataclasses.replace(credit_audit, summary=["<!--<script>", "</script><script>alert(1)</script>&"]
                                  + credit_audit.summary)
    html = hostile.to_html()
    start = html.index('<script type="application/json" id="atlas-audit">')
    body = html[start:html.index("</script>", start)]
    assert "<" not in body[len('<script type="application/json" id="atlas-audit">'):]
    assert Audit.from_file(html.encode()).summary == hostile.summary


def test_bad_requests_say_what_to_do(credit):
    df, target, model, ens, X, schema = credit
    with pytest.raises(AuditError, match="neither a column"):
        run_audit(ens, X, schema=schema, target=1, protected=["gender"])
    plain = schema
    for f in schema.features:
        if f.protected:
            plain = plain.with_updates(f.name, protected=False)
    with pytest.raises(AuditError, match="No protected attribute"):
        run_audit(ens, X, schema=plain, target=1)
    everyone = X[ens.predict(X.to_numpy()) == 1]
    with pytest.raises(AuditError, match="no unfavourable decision"):
        run_audit(ens, everyone, schema=schema, target=1)


def test_one_hot_and_numerical_attributes_become_groups(credit):
    from core.audit import group_labels, protected_attributes

    df, target, model, ens, X, schema = credit
    attrs = protected_attributes(schema, ["employment", "age"])
    assert len(attrs["employment"]) == 4 and len(attrs["age"]) == 1
    names = list(X.columns)
    emp = group_labels(X.to_numpy(), names, attrs["employment"], "employment")
    assert set(emp) <= {"employed", "self_employed", "unemployed", "student"}
    age = group_labels(X.to_numpy(), names, attrs["age"], "age")
    assert 2 <= len(set(age)) <= 4 and all(s[0] in "[(" and s.endswith("]") for s in set(age))
    assert sum(s.startswith("[") for s in set(age)) == 1


def test_statistics_helpers():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 200), rng.normal(0, 1, 200)
    assert fs.permutation_p(a, b, n_perm=500, rng=rng) > 0.05
    assert fs.permutation_p(a + 1.0, b, n_perm=500, rng=rng) == pytest.approx(1 / 501)
    lo, hi = fs.bootstrap_ci(a, "mean", 500, rng=rng)
    assert lo < a.mean() < hi
    lo, hi = fs.gap_ci(a + 1, b, "median", 500, rng=rng)
    assert lo < 1 < hi + 0.3 and lo > 0.5
    assert np.allclose(fs.holm(np.array([0.01, 0.04, 0.03, np.nan])), [0.03, 0.06, 0.06, np.nan], equal_nan=True)


def test_a_share_of_rows_has_wilsons_interval_even_for_a_small_group():
    """The bootstrap of a share of 1 is one point: 2 rows out of 2 read [100%, 100%]. Wilson's
    score interval, from its formula (values of Brown, Cai & DasGupta 2001 / scipy's binomtest)."""
    from scipy.stats import binomtest

    for k, n in ((2, 2), (0, 3), (1, 1), (7, 20), (40, 41), (0, 500)):
        v = np.r_[np.ones(k), np.zeros(n - k)]
        ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert fs.share_ci(v) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)
        assert fs.is_share(v)
    assert fs.share_ci(np.ones(2)) == pytest.approx((0.3424, 1.0), abs=1e-4)
    assert all(np.isnan(fs.share_ci(np.array([]))))
    assert not fs.is_share(np.array([0.5, 1.0])) and not fs.is_share(np.array([]))


def test_the_audits_group_shares_carry_wilsons_interval(credit_audit):
    g = credit_audit.groups
    for _, r in g.iterrows():
        n, share = int(r["feasible_n"]), float(r["feasible"])
        assert (r["feasible_lo"], r["feasible_hi"]) == pytest.approx(
            fs.share_ci(np.r_[np.ones(round(share * n)), np.zeros(n - round(share * n))]), abs=1e-12)


def test_cli_writes_the_report_and_the_rows(credit, tmp_path, capsys):
    from core.audit.cli import main

    df, target, model, ens, X, schema = credit
    data = tmp_path / "credit.csv"
    df.to_csv(data, index=False)
    mfile = tmp_path / "model.txt"
    model.booster_.save_model(str(mfile))
    out = tmp_path / "audit.html"
    rc = main(["--data", str(data), "--model", str(mfile), "--protected", "sex", "--target", "1",
               "--target-column", target, "--rows", "60", "--permutations", "300", "--bootstrap", "100",
               "--local-rules", "0", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "is not audited" not in text                  # sex is given
    assert out.exists() and out.with_suffix(".csv").exists()
    again = Audit.from_file(out.read_bytes())
    assert len(again.rows) == 60 and again.meta["model"]["sha256"] and again.meta["data"]["sha256"]
    rows = pd.read_csv(out.with_suffix(".csv"))
    assert len(rows) == 60 and {"row", "group:sex", "cost", "feasible"} <= set(rows.columns)
    rc = main(["--data", str(data), "--model", str(mfile), "--protected", "sex", "--rows", "20",   # no label named
               "--permutations", "100", "--bootstrap", "50", "--local-rules", "0", "--no-tcrex", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and f"column {target!r} is read as the label column" in text, text
    assert "Ignored columns" not in text                 # the label column is used, not ignored
    pkl = tmp_path / "model.pkl"
    import pickle

    pkl.write_bytes(pickle.dumps(model))
    rc = main(["--data", str(data), "--model", str(pkl), "--protected", "sex", "--out", str(out)])
    assert rc == 2 and "pickle" in capsys.readouterr().out.lower()


def test_cli_audits_what_it_is_given_and_names_what_reads_protected(credit, tmp_path, capsys):
    """--protected decides: a column whose name reads like a protected attribute is neither
    audited nor held fixed unless given, and the CLI says so, with the flag that would."""
    from core.audit.cli import main

    df, target, model, ens, X, schema = credit
    data = tmp_path / "credit.csv"
    df.to_csv(data, index=False)
    mfile = tmp_path / "model.txt"
    model.booster_.save_model(str(mfile))
    out = tmp_path / "audit.html"
    rc = main(["--data", str(data), "--model", str(mfile), "--protected", "owns_home", "--target", "1",
               "--target-column", target, "--rows", "30", "--permutations", "50", "--bootstrap", "20",
               "--local-rules", "0", "--no-tcrex", "--no-scan", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert ("note: column 'sex' is not audited and may change in counterfactuals, though its name reads like a "
            "protected attribute (sex); add --protected sex to audit it and hold it fixed.") in text
    audit = Audit.from_file(out.read_bytes())
    assert list(audit.meta["parameters"]["protected"]) == ["owns_home"]
    rows = pd.read_csv(out.with_suffix(".csv"))
    assert "group:owns_home" in rows.columns and "group:sex" not in rows.columns


def test_group_fairness_beside_recourse(credit, credit_audit, tmp_path):
    """fairlearn's group metrics on every row, kept through save and re-open, in the report."""
    from fairlearn.metrics import demographic_parity_difference

    df, target, model, ens, X, schema = credit
    a = credit_audit                                          # audited with the labels y
    d = a.disparities.set_index(["attribute", "measure"])["value"]
    assert "sex" in X and schema["sex"].protected             # the demo's protected attribute
    expected = demographic_parity_difference(df[target], ens.predict(X.to_numpy(float)) == 1,
                                             sensitive_features=X["sex"].to_numpy().astype(int).astype(str))
    assert d[("sex", "demographic parity difference")] == pytest.approx(expected)
    assert {"TPR", "FPR", "selection rate"} <= set(a.fairness.columns)
    again = Audit.from_file(a.to_html().encode())
    assert again.disparities.equals(a.disparities.astype(again.disparities.dtypes.to_dict()))
    assert "Group fairness of the decisions" in a.to_html()
    old = a.to_dict()
    old.pop("fairness"), old.pop("disparities")
    assert Audit.from_dict(old).fairness is None                 # audits saved before still open


def test_subgroup_scan_in_the_audit(credit_audit):
    a = credit_audit                                          # scanned by default, min_subgroup 20
    assert a.meta["parameters"]["scan"] and a.meta["parameters"]["min_subgroup"] == 20
    assert a.subgroups is not None and len(a.subgroups)
    assert {"subgroup", "p_adjusted", "significant", "worse"} <= set(a.subgroups.columns)
    assert a.meta["parameters"]["budget"] is not None
    html = a.to_html()
    assert "Subgroups where recourse differs most" in html
    again = Audit.from_file(html.encode())
    assert list(again.subgroups["subgroup"]) == list(a.subgroups["subgroup"])


def test_rows_at_the_time_limit_carry_their_gap_and_the_summary_says_so(credit):
    """(#41 item 3) An audit whose searches end at the time limit reports each row's gap
    (cost minus the proven lower bound, over the cost): 0 for a proven optimum, and a
    bound that holds - the optimum found with time to spare is at least (1 - gap) times
    the cost; the summary says how many rows ended so and how far their cost may be."""
    from sklearn.ensemble import RandomForestClassifier

    from core.audit.report import plain_summary, time_limit_text
    from core.intake.models import from_model
    from core.optimal import optimal_counterfactual

    df, target, _, _, X, schema = credit
    # The rows must take longer to prove than the limit on any machine. The demo's LightGBM model
    # proves each of them in 20-40 ms here, and CP-SAT searches for at least 10 ms however short
    # the limit: a machine three times faster would prove nearly all within it. A deeper forest's
    # 30 rows take one solver thread a median 57 ms here and the third longest 0.25 s (25 times
    # that shortest search), on a 2-core machine shared with other work.
    model = RandomForestClassifier(50, max_depth=8, random_state=0).fit(X, df[target].to_numpy())
    ens = from_model(model)
    # the limit is shortened until 3 rows or more end at it (the first already, on this machine)
    for limit in (0.02, 0.008, 0.003, 0.001):
        a = run_audit(ens, X, schema=schema, target=1, max_rows=30, n_jobs=1, time_limit=limit, n_perm=50,
                      n_boot=50, tcrex=False, local_rules_per_group=0)
        rows = a.rows
        late = rows[rows["status"] == "time_limit_found"]
        if len(late) >= 3:
            break
    assert len(late) >= 3, rows["status"].value_counts()
    assert (rows.loc[rows["status"] == "optimal", "gap"] == 0).all()
    assert late["gap"].between(0, 1).all() and (late["gap"] > 0).any()
    for _, r in late.head(4).iterrows():
        best = optimal_counterfactual(ens, np.asarray(X, float)[int(r["row"])], 1, schema=schema, fixed=["sex"],
                                      X_ref=np.asarray(X, float), time_limit=60)
        assert best.status == "optimal"
        assert best.cost >= r["cost"] * (1 - r["gap"]) - 1e-6 and best.cost <= r["cost"] + 1e-6
    text = time_limit_text(rows)
    assert f"For {len(late)} cases the search for the cheapest change reached its time limit" in text
    assert text in " ".join(plain_summary(a)[1])


# Last in the module: the module's Dask cluster ticks on from its first test to the module's end.
def test_dask_cluster_gives_the_same_audit(credit, dask_scheduler):
    df, target, model, ens, X, schema = credit
    kw = dict(schema=schema, target=1, max_rows=40, n_perm=300, n_boot=100, local_rules_per_group=0, tcrex=False)
    local = run_audit(ens, X, n_jobs=1, **kw)
    remote = run_audit(ens, X, scheduler=dask_scheduler, **kw)
    cols = ["row", "status", "feasible", "cost", "n_changed", "changes"]
    pd.testing.assert_frame_equal(local.rows[cols], remote.rows[cols])
    pd.testing.assert_frame_equal(local.tests, remote.tests)


def test_the_reference_group_can_be_asked_for_and_is_kept(credit):
    """An audit's gaps are measured against a group asked for (as comparing two models' audits
    needs); a group or attribute the audit does not have is refused by name; a group with no
    audited row falls back to the largest, and a note says so."""
    from core.audit.history import rerun_arguments

    df, target, model, ens, X, schema = credit
    kw = dict(schema=schema, target=1, protected=["employment"], max_rows=80, n_jobs=1, n_perm=50, n_boot=20,
              tcrex=False, local_rules_per_group=0, scan=False)
    plain = run_audit(ens, X, **kw)
    largest = plain.references["employment"]
    sizes = plain.rows["group:employment"].astype(str).value_counts()
    assert largest == sizes.index[0]
    other = str(sizes.index[-1])
    pinned = run_audit(ens, X, reference={"employment": other}, **kw)
    assert pinned.references == {"employment": other}
    assert set(pinned.tests["reference"]) == {other} and other not in set(pinned.tests["group"])
    assert pinned.params["reference"] == {"employment": other}
    assert rerun_arguments(pinned, ens)["reference"] == {"employment": other}
    g = pinned.groups.set_index("group")
    for t in pinned.tests.itertuples():                    # each gap is its group's figure less the reference's
        assert t.reference_value == pytest.approx(g.loc[other, t.metric]) or not np.isfinite(t.reference_value)
    with pytest.raises(AuditError, match="not a group of 'employment'; its groups are"):
        run_audit(ens, X, reference={"employment": "retired"}, **kw)
    with pytest.raises(AuditError, match="not a protected attribute of this audit"):
        run_audit(ens, X, reference={"sex": "0"}, **kw)
    labels = plain.rows.set_index("row")["group:employment"].astype(str)
    rows = [int(r) for r, v in labels.items() if v != other]
    absent = run_audit(ens, X, reference={"employment": other}, **{**kw, "max_rows": None}, rows=rows)
    assert absent.references["employment"] != other
    assert any(f"No audited row is in employment = {other}" in n for n in absent.meta["notes"])
