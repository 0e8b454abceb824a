"""Results (issue #64 item 5): ``core.load_result`` reads a saved result of any kind back,
dispatching on its ``kind``; a local counterfactual rule has a kind of its own (a file written
before, with none, still reads); a surrogate and the subgroup scan are results (params, elapsed,
guarantee, a JSON round trip that reads back equal); the older names for the elapsed time warn
before they are removed, and the audit's per-row seconds are its ``elapsed`` column.

Every result is a real one, made on a small forest, and read back through the one call."""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import core
from core.audit import Audit, run_audit
from core.audit.compare import compare_models
from core.audit.story import case_story
from core.audit.subgroups import SubgroupScan, scan_subgroups
from core.compression import fcca
from core.errors import ResultFileError
from core.intake.workspace import build_workspace
from core.model.result import FORMAT, RESULT_MODULES, Result
from core.optimal.batch import batch_counterfactuals
from core.optimal.constrained import verify_recourse
from core.regions import counterfactual_set
from core.rules import CounterfactualRules, LocalRule
from core.solvers.linear_regions import linear_slice
from core.surrogate import Surrogate, distill
from core.tcrex import TCREx

CORE = Path(__file__).resolve().parents[2] / "core"


def _people(n=300, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(20, 70, n).astype(float), "income": rng.integers(10, 100, n).astype(float),
                       "debt": rng.integers(0, 50, n).astype(float), "sex": rng.integers(0, 2, n).astype(float)})
    df["approved"] = (df.income - df.debt - 0.8 * df.age - 10 * df.sex > -15).astype(int)
    return df


@pytest.fixture(scope="module")
def small():
    df = _people()
    X = df.drop(columns="approved")
    rf = RandomForestClassifier(8, max_depth=3, random_state=0).fit(X, df.approved)
    ws = build_workspace(df, "approved", rf, name="people", protected=["sex"])
    ens, A = ws.ensemble, ws.X.to_numpy(dtype=float)
    refused = [int(i) for i in np.flatnonzero(ws.predictions == 0)[:3]]
    return df, rf, ws, ens, A, refused


@pytest.fixture(scope="module")
def results(small):
    """One real result of every kind."""
    df, rf, ws, ens, A, refused = small
    schema, names = ws.schema, list(ens.feature_names)
    x = A[refused[0]]
    cf = core.optimal_counterfactual(ens, x, 1, schema=schema, time_limit=20)
    cr = CounterfactualRules(n_estimators=5, random_state=0).fit(A, ws.predictions, feature_names=names)
    audit = run_audit(ens, A, schema=schema, target=1, max_rows=30, n_jobs=1, n_boot=30, n_perm=30, tcrex=False,
                      local_rules_per_group=0, min_subgroup=5)
    frame = pd.DataFrame(A[audit.rows["row"].to_numpy(dtype=int)], columns=names)
    lr = LogisticRegression(max_iter=1000).fit(ws.X, ws.predictions)
    second = RandomForestClassifier(8, max_depth=3, random_state=1).fit(df.drop(columns="approved"), df.approved)
    return {
        "counterfactual": cf,
        "counterfactual_batch": batch_counterfactuals(ens, A[refused], 1, schema=schema, n_jobs=1, time_limit=20),
        "recourse_check": verify_recourse(ens, x, 1, schema=schema, time_limit=20),
        "region_set": counterfactual_set(ens, x, 1, radius=cf.cost * 1.2, schema=schema),
        "linear_slice": linear_slice(lr, x, ("income", "debt")),
        "tcrex": TCREx(rho=0.05, random_state=0).fit(A, ws.predictions, 1, feature_names=names).result_,
        "local_rule": cr.local_rule(x, 1),
        "regional_rule": cr.regional_rules(cr.propose_regions(1)[:1], 1)[0],
        "fcca": fcca(ens, A[:40], ws.predictions[:40], schema=schema, n_jobs=1),
        "surrogate": distill(ens, A, n_estimators=10, num_leaves=4, random_state=0),
        "audit": audit,
        "subgroup_scan": scan_subgroups(audit.rows, frame, min_size=5, n_perm=50, n_boot=20),
        "model_comparison": compare_models(ens, second, A, schema=schema, target=1, max_rows=5, n_jobs=1,
                                           n_boot=20, n_perm=20),
        "case_story": case_story(ws, refused[0], 1, time_limit=20),
    }


def _kinds_in_source() -> dict[str, str]:
    """Each ``kind: ClassVar[str] = "..."`` a class of core sets, and the module that sets it."""
    out = {}
    for path in sorted(CORE.rglob("*.py")):
        text = path.read_text()
        if "ClassVar" not in text:
            continue
        module = ".".join(path.relative_to(CORE.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for st in node.body:
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == "kind" \
                            and "ClassVar" in ast.unparse(st.annotation) and isinstance(st.value, ast.Constant) \
                            and st.value.value:
                        out[st.value.value] = module
    return out


def test_every_kind_of_result_is_known_to_load_result():
    assert _kinds_in_source() == RESULT_MODULES


def test_load_result_reads_every_kind_back_equal(results):
    assert set(results) == set(RESULT_MODULES)
    for kind, r in results.items():
        assert isinstance(r, Result) and type(r).kind == kind, kind
        text = r.to_json()
        assert json.loads(text)["kind"] == kind
        for saved in (text, text.encode(), json.loads(text)):
            back = core.load_result(saved)
            assert type(back) is type(r) and back == r, kind


def test_what_load_result_reads_back_answers_as_the_result_did(small, results):
    _, rf, ws, ens, A, _ = small
    cf = core.load_result(results["counterfactual"].to_json())
    assert rf.predict(pd.DataFrame(cf.x[None, :], columns=ws.X.columns))[0] == 1
    sur = core.load_result(results["surrogate"].to_json())
    assert np.array_equal(sur.native.predict(A), results["surrogate"].native.predict(A))
    scan = core.load_result(results["subgroup_scan"].to_json())
    pd.testing.assert_frame_equal(scan.table, results["subgroup_scan"].table)


def test_load_result_refuses_what_is_not_a_saved_result(results):
    cf = results["counterfactual"].to_dict()
    for bad, words in [("not json {", "not JSON"), ("[1, 2]", "JSON object"), (b"\xff\xfe", "not JSON"),
                       (json.dumps({"kind": "counterfactual"}), "not a saved result"),
                       (json.dumps({**cf, "kind": "telescope"}), "kind 'telescope'"),
                       (json.dumps({k: v for k, v in cf.items() if k != "status"}), "status"),
                       (3.5, "float")]:
        with pytest.raises(ResultFileError, match=words):
            core.load_result(bad)


def test_a_local_rule_has_its_kind_and_one_saved_without_it_still_reads(results):
    rule = results["local_rule"]
    assert LocalRule.kind == "local_rule" and rule.to_dict()["kind"] == "local_rule"
    before = {**rule.to_dict(), "kind": ""}            # as a local rule was written before it had a kind
    assert core.load_result(before) == rule and LocalRule.from_dict(before) == rule
    with pytest.raises(ResultFileError, match="regional counterfactual rule"):
        core.load_result({**rule.to_dict(), "kind": "regional_rule"})


def test_an_audit_saved_before_the_result_shape_reads_back_with_its_rows_seconds_as_elapsed(results):
    audit = results["audit"]
    assert "elapsed" in audit.rows and "solve_time" not in audit.rows
    assert (audit.rows["elapsed"] >= 0).all() and list(audit.rows.columns)[-1] == "elapsed"
    old = audit.to_dict()
    for k in ("kind", "format", "version", "params", "elapsed", "guarantee"):
        del old[k]
    old.update(format="counterfactual-atlas-audit", version=1)
    rows = old["rows"]
    rows["columns"] = ["solve_time" if c == "elapsed" else c for c in rows["columns"]]   # its older name
    back = core.load_result(old)
    assert isinstance(back, Audit) and back == audit


def test_a_surrogate_is_a_result(small, results):
    _, _, _, ens, A, _ = small
    s = results["surrogate"]
    assert isinstance(s, Surrogate) and s.params["n_estimators"] == 10 and s.elapsed > 0
    g = s.guarantee
    assert g.kind == "estimated" and g.surrogate_fidelity == s.fidelity and not g.proven
    assert g.model_kind == "tree_ensemble" and "agreement with the model" in g.text()
    hold = np.random.default_rng(0).permutation(len(A))[:round(0.2 * len(A))]     # distill's held-out rows
    assert s.fidelity == np.mean(s.native.predict(A[hold]) == ens.predict(A[hold]))
    back = Surrogate.from_json(s.to_json())
    assert back == s and back.X_fit is None and back.ensemble.content_hash() == s.native.content_hash()
    assert set(s.summary()) == {"fidelity", "boundary_fidelity", "n_fit", "trees", "leaves", "params", "elapsed"}


def test_the_subgroup_scan_is_a_result_that_still_reads_as_its_table_with_a_warning(results):
    scan = results["subgroup_scan"]
    assert isinstance(scan, SubgroupScan) and scan.params["min_size"] == 5 and scan.elapsed > 0
    assert scan.guarantee.kind == "estimated" and "max-T" in scan.guarantee.text()
    assert {"subgroup", "p_adjusted", "significant", "worse"} <= set(scan.table.columns) and len(scan.table)
    assert scan.table.attrs["budget"] == scan.budget
    with pytest.warns(DeprecationWarning, match=r"\.table"):
        assert len(scan) == len(scan.table)
    with pytest.warns(DeprecationWarning, match=r"\.table"):
        assert scan["gap"].equals(scan.table["gap"])
    with pytest.warns(DeprecationWarning, match=r"\.table"):
        assert scan.head(2).equals(scan.table.head(2))


def test_the_older_names_of_the_elapsed_time_warn(small, results):
    _, _, ws, ens, A, _ = small
    names = list(ens.feature_names)
    olds = [(results["counterfactual"], "solve_time", "elapsed"), (results["region_set"], "seconds", "elapsed"),
            (results["linear_slice"], "seconds", "elapsed"), (results["local_rule"], "time", "elapsed"),
            (TCREx(rho=0.05, random_state=0).fit(A, ws.predictions, 1, feature_names=names), "fit_time_", "elapsed_"),
            (CounterfactualRules(n_estimators=5, random_state=0).fit(A, ws.predictions), "fit_time_", "elapsed_")]
    for obj, old, new in olds:
        with pytest.warns(DeprecationWarning, match=f"{type(obj).__name__}.{old} is the older name of {new}"):
            assert getattr(obj, old) == getattr(obj, new) and getattr(obj, new) >= 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not hasattr(CounterfactualRules(), "fit_time_")    # not fitted: no time, and no warning for it


def test_the_public_face_reads_results(results):
    assert core.load_result is core.model.result.load_result and "load_result" in core.__all__
    assert core.load_result(results["case_story"].to_json()).to_html() == results["case_story"].to_html()
    assert FORMAT == json.loads(results["fcca"].to_json())["format"]
