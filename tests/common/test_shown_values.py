"""Values that work as written (#29): every recourse a page, story, table or
export SHOWS is typed back into the original model as text and must give
the target; thresholds read true for the number shown."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from conftest import demo_credit

from core.audit import run_audit
from core.audit.story import case_story
from core.counterfactual import describe_changes
from core.intake.columns import analyst_columns, apply_values
from core.intake.workspace import build_workspace, changes_line
from core.optimal import optimal_counterfactual
from core.shown import bound_text, number_text, parse_number, round_sig, shortest_inside


# ------------------------------------------------------------------ the rules
def test_number_text_reads_back_exactly():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.lognormal(3, 3, 300), -rng.lognormal(0, 4, 100), [0.1 + 0.2, 10290.0, 32.0]])
    inside = (np.abs(values) >= 1e-4) & (np.abs(values) < 1e15)
    for v, plain in zip(values, inside):
        assert parse_number(number_text(v)) == v
        if plain:                                   # written in full
            assert "e" not in number_text(v), number_text(v)
    # the values outside [1e-4, 1e15) (one here, -2.8e-07) are written in scientific notation
    assert [number_text(v) for v in values[~inside]] == ["-2.7982522516971197e-07"]
    assert number_text(10290.0) == "10,290" and number_text(32.0) == "32" and number_text(47.26) == "47.26"
    assert number_text(np.int64(1)) == "1" and number_text(float("nan")) == "missing"


@pytest.mark.parametrize("t", [5095.5, 1.4099999666213989, 123456.5, -0.35000001, 0.1 + 0.2, 7.0, -12.75])
def test_bound_text_is_true_for_the_number_shown(t):
    shown = parse_number(bound_text(t))
    assert shown <= t                      # "x <= shown" holds for shown, "x > shown" does not, as for t
    assert bound_text(5095.5) == "5,095.5"
    assert abs(shown - t) <= 1e-5 * max(1.0, abs(t))


def test_shortest_inside_never_on_a_split():
    assert shortest_inside(47.250149, 47.25, 60.0, ref=47.25, tol=0.1) == 47.3
    assert shortest_inside(47.250149, 47.25, 60.0, ref=47.25, tol=0.01) == 47.26
    assert shortest_inside(1.4100001, 1.41, 1.5, ref=1.41, tol=0.002) == 1.411
    assert shortest_inside(5.0, 4.0, 6.0, lo=5.5) == 5.0          # nothing shorter in range: the value itself
    for k in range(1, 8):
        assert round_sig(123.456, k, "down") <= 123.456 <= round_sig(123.456, k, "up")


# ----------------------------------------------------- applying the texts
def _apply(ws, x, text: str) -> pd.DataFrame:
    """The model's input for row ``x`` with the changes of ``text``
    ("col: a → b; ...", in the analyst's columns or the model's features) typed in as written."""
    cols = {c.name: c for c in analyst_columns(ws.ensemble, ws.schema)}
    names = list(ws.ensemble.feature_names)
    x = np.asarray(x, dtype=float).copy()
    for part in filter(None, (p.strip() for p in re.split(r";\s(?=[^;]*: )", text))):
        col, _, move = part.rpartition(": ")
        after = move.split(" → ", 1)[1]
        if col in cols:
            value = after if cols[col].categories is not None else parse_number(after)
            x = apply_values(list(cols.values()), x, {col: value})
        else:
            x[names.index(col)] = parse_number(after)
    return ws.to_raw(x[None, :])


def _meets(ws, target, raw: pd.DataFrame) -> bool:
    out = np.ravel(ws.model.predict(raw))[0]
    if isinstance(target, tuple):
        return target[0] <= float(out) <= target[1]
    return out == target


def _wine_ws():
    from sklearn.datasets import load_wine
    from xgboost import XGBClassifier

    d = load_wine(as_frame=True)
    df = d.frame.rename(columns={"target": "cultivar"})
    model = XGBClassifier(n_estimators=60, max_depth=3, learning_rate=0.2, random_state=0)
    model.fit(df.drop(columns="cultivar"), df["cultivar"])
    return build_workspace(df, "cultivar", model, name="wine"), 2


def _diabetes_ws():
    from lightgbm import LGBMRegressor
    from sklearn.datasets import load_diabetes

    d = load_diabetes(as_frame=True, scaled=False)
    df = d.frame.rename(columns={"target": "progression"})
    model = LGBMRegressor(n_estimators=80, num_leaves=8, random_state=0, verbose=-1)
    model.fit(df.drop(columns="progression"), df["progression"])
    return build_workspace(df, "progression", model, name="diabetes"), (200.0, 400.0)


def _credit_ws():
    df, target, model, *_ = demo_credit()
    return build_workspace(df, target, model, name="credit", protected=["sex"]), 1


def _misses(ws, target) -> np.ndarray:
    p = ws.predictions
    miss = ~((p >= target[0]) & (p <= target[1])) if isinstance(target, tuple) else p != target
    return np.flatnonzero(miss)


@pytest.mark.parametrize("make", [_credit_ws, _wine_ws, _diabetes_ws], ids=["demo", "wine", "diabetes"])
def test_every_shown_recourse_works_as_written(make):
    ws, target = make()
    X = ws.X.to_numpy(float)
    rows = _misses(ws, target)[:25]
    assert rows.size >= 10
    failed = []
    for r in rows:
        res = optimal_counterfactual(ws.ensemble, X[r], target, schema=ws.schema, model=ws.model, X_ref=X,
                                     time_limit=20)
        assert res.found, res.message
        for where, text in (("batch table", changes_line(ws.raw_changes(X[r], res.x))),
                            ("changes", describe_changes(res.changes)),
                            ("JSON", "; ".join(f"{c['feature']}: {c['from_text']} → {c['to_text']}"
                                               for c in json.loads(json.dumps(res.to_dict()))["changes"]))):
            if not _meets(ws, target, _apply(ws, X[r], text)):
                failed.append((int(r), where, text))
    assert not failed, failed[:5]


@pytest.mark.parametrize("make", [_credit_ws, _wine_ws, _diabetes_ws], ids=["demo", "wine", "diabetes"])
def test_story_and_audit_recourse_work_as_written(make):
    ws, target = make()
    X = ws.X.to_numpy(float)
    row = int(_misses(ws, target)[0])
    story = case_story(ws, row, target, time_limit=20)
    text = " ".join(dict(story.sections)["The smallest change"])
    steps = re.search(r"Changing (.*) gives the outcome", text).group(1)
    moves = "; ".join(f"{m.group(1)}: x → {m.group(2)}" for m in re.finditer(r"(\S+) from \S+ to (\S+)", steps))
    assert moves and _meets(ws, target, _apply(ws, X[row], moves)), text
    schema = ws.schema
    if not any(f.protected for f in schema.features):   # wine, diabetes: audit groups by a column
        schema = schema.with_updates(schema.names[0], protected=True)
    audit = run_audit(ws.ensemble, X, schema=schema, target=target, max_rows=30, n_jobs=1, model=ws.model,
                      n_perm=50, n_boot=20, tcrex=False, local_rules_per_group=0, scan=False)
    rows = pd.read_csv(__import__("io").StringIO(audit.rows_csv()))
    report = audit.to_html()
    saved = json.loads(audit.to_json())
    n = 0
    for _, rec in rows[rows["feasible"] == 1].iterrows():
        assert _meets(ws, target, _apply(ws, X[int(rec["row"])], rec["changes"])), rec["changes"]
        n += 1
    assert n >= 10
    m = 0
    for rec in (dict(zip(saved["rows"]["columns"], r)) for r in saved["rows"]["data"]):
        if rec["feasible"] == 1:                       # the saved JSON's per-row changes, as written, too
            assert _meets(ws, target, _apply(ws, X[int(rec["row"])], rec["changes"])), rec["changes"]
            m += 1
    assert m == n
    assert "<html" in report.lower()
    assert not math.isnan(float(rows["cost"].dropna().iloc[0]))


@pytest.mark.parametrize("value, level, shown", [
    (0.5993, 0.6, "0.599"), (0.5998, 0.6, "0.5998"), (0.45, 0.9, "0.45"), (0.8949, 0.9, "0.89"),
    (0.89999999, 0.9, "0.899999"), (0.0, 0.5, "0.00")])
def test_a_figure_short_of_its_level_never_reads_as_reaching_it(value, level, shown):
    """A rule's CRP 0.5993 below pi_C 0.6 read "best 0.60": shown with as few decimals as keep it below."""
    from core.shown import below_text

    assert below_text(value, level) == shown and float(shown) < level
