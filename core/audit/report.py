"""The audit report: one self-contained HTML file.

It opens with a summary a reader outside the field takes in within a minute
(:func:`plain_summary`: what was checked and what was found, in plain words,
and the key figure: the gap in recourse cost per group with its interval,
drawn as inline SVG), then the detail for an auditor. Everything is inside the
file: the styles (print styles too: A4 pages, the summary on a page of its
own, no table row or figure cut across pages), the figures (the summary's as
SVG; the detail's with Plotly, its JavaScript inlined once, so the report
opens without a network), the tables, the provenance (data and model SHA-256,
schema, every parameter, package versions) and the audit itself as JSON in a
``<script type="application/json" id="atlas-audit">`` block, from which the app
re-opens a saved audit.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from core.audit.constrained import lines_words, recorded
from core.audit.figures import cost_figure, metric_figure
from core.audit.metrics import METRICS, SHARES
from core.audit.shape import AuditLike
from core.errors import AuditError
from core.figures import interval_chart_svg
from core.model.guarantee import Guarantee, guarantee_line
from core.shown import approx_text, number_text, outcome_text

__all__ = ["audit_html", "extract_audit_json", "plain_summary", "REPORT_CSS", "parameters_table", "parameter_text",
           "whole", "model_text", "recourse_words", "precluded_table", "precluded_words", "precluded_note",
           "constraints_html"]

#: the reports' styles, on screen and in print (the comparison report and the story share them)
REPORT_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;color:#222;
line-height:1.45;padding:0 1rem}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.86rem;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f4f6f8}.muted{color:#666;font-size:.9rem}
.sig{background:#fdecea}code{font-size:.85rem;word-break:break-all}li{margin:.3rem 0}
.summary{border:1px solid #cfd8e3;background:#f5f8fb;border-radius:6px;padding:.4rem 1.2rem 1rem;margin:1rem 0}
.summary h2{border:0;margin-top:.6rem}.summary .lead{font-size:1.1rem;font-weight:600}
figure.chart{margin:.8rem 0}figure.chart svg{max-width:100%;height:auto}figcaption{font-size:.85rem;color:#555}
.figures{display:flex;flex-wrap:wrap;gap:1rem}
@page{size:A4;margin:12mm}
@media print{
*{box-sizing:border-box}body{max-width:none;margin:0;padding:0;font-size:10pt}figure.chart svg{width:100%}
.summary{break-after:page;break-inside:avoid;background:none}
h2,h3{break-after:avoid}table{font-size:7.5pt;width:100%}td,th{padding:.15rem .3rem;overflow-wrap:break-word}
thead{display:table-header-group}tr,figure,.plotly-graph-div,.js-plotly-plot{break-inside:avoid}
code{font-size:7pt}.modebar-container{display:none}
.wide table{table-layout:fixed;font-size:6pt}.wide td,.wide th{padding:.1rem;overflow-wrap:anywhere}
}
"""
_CSS = REPORT_CSS


def whole(v: object) -> object:
    """A setting as a saved result keeps it: a whole float as an integer (10, not 10.0),
    any other value exactly as it is (a budget of 0.0310303... stays that number: the
    rows within it were counted with it)."""
    if isinstance(v, (float, np.floating)) and np.isfinite(v) and float(v).is_integer():
        return int(v)
    return v


def _scalar_text(v: Any) -> str | None:
    """Nothing, yes/no or a number for a reader (None: ``v`` is none of these)."""
    if v is None:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return approx_text(v)
    return None


def _value_text(v: Any) -> str:
    """A parameter's value for a reader: numbers to 4 significant digits, integers as
    integers, yes/no, lists and objects in words (never JSON)."""
    scalar = _scalar_text(v)
    if scalar is not None:
        return scalar
    if isinstance(v, Mapping):
        return "; ".join(f"{k}: {_value_text(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple)):
        return ", ".join(_value_text(x) for x in v) or "none"
    return str(v)


def parameter_text(name: str, v: object) -> str:
    """A parameter of an audit or a comparison as a reader reads it: a protected attribute
    that is its own column by its name (``Sex``, not ``{"Sex": ["Sex"]}``), a one-hot group
    with its columns, a regressor's target interval as an interval, numbers rounded."""
    if name == "protected" and isinstance(v, Mapping):
        return "; ".join(str(a) if [str(c) for c in cols] == [str(a)] else f"{a} ({', '.join(map(str, cols))})"
                         for a, cols in v.items()) or "none"
    if name == "target" and isinstance(v, (list, tuple)) and len(v) == 2:
        return outcome_text((float(v[0]), float(v[1])))
    return _value_text(v)


def parameters_table(params: Mapping[str, Any]) -> pd.DataFrame:
    """Every parameter, in words (the exact values are in the JSON the report embeds)."""
    return pd.DataFrame([(k, parameter_text(k, v)) for k, v in params.items()], columns=["parameter", "value"])


_KIND_WORDS = {"tree_ensemble": "tree ensemble, read exactly", "linear": "linear model, read exactly",
               "black_box": "any other model, run in a sandbox; analysed through a surrogate, checked on the model"}


def model_text(model: Mapping[str, Any]) -> str:
    """A model of a report in words: what it is, its kind, and its trees (a tree ensemble's
    own, or its surrogate's with their agreement): never "None trees" for an MLP."""
    kind = str(model.get("kind") or "tree_ensemble")
    parts = [str(model.get("source") or "model"), _KIND_WORDS.get(kind, kind)]
    if kind == "tree_ensemble" and model.get("trees") is not None:
        parts.append(f"{number_text(model['trees'])} trees")
    sur = model.get("surrogate")
    if isinstance(sur, Mapping) and sur.get("fidelity") is not None:
        parts.append(f"surrogate of {number_text(sur.get('trees'))} trees agreeing with it on "
                     f"{100 * float(sur['fidelity']):.1f}% of held-out rows")
    if model.get("task"):
        parts.append(str(model["task"]))
    return " · ".join(parts)


def recourse_words(g: Guarantee | None, target: str) -> str:
    """What each audited case was given, as the recourses' guarantee allows it to be said:
    "the smallest change" only for an answer proven (or, at a time limit, sought) on the
    model itself; a surrogate's answer, checked on the model, is never called the smallest."""
    if g is not None and (g.model_kind == "black_box" or g.via_surrogate):
        return (f"a change to its data that gets it {target}, found through a surrogate of the model and checked "
                "on the model itself (not proven the cheapest)")
    return f"the smallest change to its data that would get it {target}"


def _ci(v: float, lo: float, hi: float, pct: bool | np.bool_ = False) -> str:
    if v is None or not np.isfinite(v):
        return "–"
    f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.4g}")
    if lo is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f(v)
    return f"{f(v)} [{f(lo)}, {f(hi)}]"


def group_table(audit: AuditLike) -> pd.DataFrame:
    """The per-group table with intervals, as display strings."""
    g = audit.groups
    out = pd.DataFrame({"attribute": g["attribute"], "group": g["group"] + np.where(g["reference"], " (ref.)", ""),
                        "rows": g["rows"]})
    for k, m in METRICS.items():
        if k in g:
            out[m.label] = [_ci(v, lo, hi, k in SHARES) for v, lo, hi in zip(g[k], g[f"{k}_lo"], g[f"{k}_hi"])]
    if "cost_q90" in g:
        out["cost q25 / q75 / q90"] = [f"{a:.3g} / {b:.3g} / {c:.3g}" if np.isfinite(a) else "–"
                                       for a, b, c in zip(g["cost_q25"], g["cost_q75"], g["cost_q90"])]
    return out


def tests_table(audit: AuditLike) -> pd.DataFrame:
    t = audit.tests
    if not len(t):
        return pd.DataFrame(columns=["attribute", "group vs reference", "metric", "gap [95% CI]", "p", "Holm p"])
    return pd.DataFrame({
        "attribute": t["attribute"], "group vs reference": t["group"] + " vs " + t["reference"],
        "metric": t["label"], "group / reference": [f"{a:.4g} / {b:.4g}" for a, b in
                                                  zip(t["group_value"], t["reference_value"])],
        "gap [95% CI]": [_ci(v, lo, hi) for v, lo, hi in zip(t["gap"], t["gap_lo"], t["gap_hi"])],
        "p": [f"{p:.3g}" for p in t["p_value"]], "Holm p": [f"{p:.3g}" for p in t["p_holm"]],
        "significant": np.where(t["significant"], "yes", "no")})


def precluded_table(audit: AuditLike) -> pd.DataFrame:
    """The audited rows proven *precluded* per group (no action under the constraints in
    force gives the target), as display strings; empty when no constraint was in force
    and no row is precluded (nothing to tell)."""
    p = audit.precluded
    if not len(p) or (not recorded(audit.meta) and not int(p["precluded"].sum())):
        return pd.DataFrame()
    return pd.DataFrame({"attribute": p["attribute"], "group": p["group"], "rows audited": p["rows"],
                         "precluded": p["precluded"],
                         "share precluded": [f"{100 * v:.1f}%" if np.isfinite(v) else "–" for v in p["share"]]})


def precluded_words(audit: AuditLike) -> str:
    """The rows precluded, overall and per group, in one sentence: "Precluded: 10 of the 20
    audited rows (sex = 1: 9 of 18; sex = 0: 1 of 2)."; "" when :func:`precluded_table` is empty."""
    if not len(precluded_table(audit)):
        return ""
    p = audit.precluded
    n = int(pd.to_numeric(audit.rows["precluded"], errors="coerce").fillna(0).sum()) if "precluded" in audit.rows else 0
    per = "; ".join(f"{group_name(a, g)}: {number_text(int(k))} of {number_text(int(r))}"
                    for a, g, k, r in zip(p["attribute"], p["group"], p["precluded"], p["rows"]))
    return f"Precluded: {number_text(n)} of the {number_text(len(audit.rows))} audited rows ({per})."


def precluded_note(audit: AuditLike) -> str:
    """What "precluded" means, and whether its gap between groups was tested (it is, with the
    audit's other gaps, when every compared group has at least two decided rows)."""
    tested = bool(len(audit.tests)) and bool((audit.tests["metric"] == "precluded").any())
    return ("A row is precluded when it is proven that no action keeping the constraints between features (and the "
            "features' own settings) gets it the favourable outcome; the share is of the rows whose recourse was "
            "decided. " + ("Its gap between groups is tested with the audit's other gaps." if tested else
                           "Its gap between groups is not tested: a comparison needs at least two audited rows in "
                           "each group, and a row precluded in one of them."))


def constraints_html(meta: Mapping[str, Any]) -> str:
    """The constraints between features a run was under, each by its line as written; a
    sentence when there were none (every feature moved on its own settings)."""
    cons = recorded(meta)
    if not cons:
        return ("<p>None: each feature moved within its own settings (kind, range, actionability), with no "
                "constraint linking features.</p>")
    return ("<ol class=\"constraints\">" + "".join(f'<li value="{n}"><code>{html.escape(t)}</code></li>' for n, t in cons)
            + "</ol>")


def _disparities_shown(d: pd.DataFrame) -> pd.DataFrame:
    """The disparities per attribute, each with its interval (empty without any)."""
    if not len(d):
        return pd.DataFrame()
    return pd.DataFrame({"attribute": d["attribute"], "measure": d["measure"],
                         "value [95% CI]": [_ci(v, lo, hi) for v, lo, hi in zip(d["value"], d["lo"], d["hi"])]})


def fairness_tables(audit: AuditLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Group fairness of the decisions (core.audit.groupfair) as display strings: the
    disparities per attribute and the per-group metrics, each with its interval."""
    d, g = audit.disparities, audit.fairness
    if d is None or g is None or not len(g):
        return pd.DataFrame(), pd.DataFrame()
    disp = _disparities_shown(d)
    metrics = [c for c in g.columns if c not in ("attribute", "group", "n") and not c.endswith(("_lo", "_hi"))]
    by = pd.DataFrame({"attribute": g["attribute"], "group": g["group"], "rows": g["n"]})
    for m in metrics:
        by[m] = [_ci(v, lo, hi, pct=m != "mean prediction" and m != "MAE")
                 for v, lo, hi in zip(g[m], g[f"{m}_lo"], g[f"{m}_hi"])]
    return disp, by


# room for tick labels and titles: a figure in the report is drawn once, at its own width, and
# must not clip its axes (plotly's automargin grows the margins to fit the labels)


def _p_text(p: float) -> str:
    return "–" if p != p else f"{p:.3g}"


def subgroup_table(audit: AuditLike) -> pd.DataFrame:
    """The subgroup scan (core.audit.subgroups) as display strings."""
    t = audit.subgroups
    if t is None or not len(t):
        return pd.DataFrame()
    share = t["metric"].isin(["feasible", "effective"]).to_numpy()
    return pd.DataFrame({
        "subgroup": t["subgroup"], "rows": t["size"], "metric": t["label"],
        "subgroup / rest": [f"{100 * a:.1f}% / {100 * b:.1f}%" if s else f"{a:.4g} / {b:.4g}"
                            for a, b, s in zip(t["value"], t["rest"], share)],
        "gap [95% CI]": [_ci(v, lo, hi, s) for v, lo, hi, s in zip(t["gap"], t["gap_lo"], t["gap_hi"], share)],
        # no p-value where the measure does not vary (e.g. every row has a recourse): nothing to test
        "p": [_p_text(p) for p in t["p_value"]], "adjusted p": [_p_text(p) for p in t["p_adjusted"]],
        "worse off": np.where(t["worse"], "yes", "no"), "significant": np.where(t["significant"], "yes", "no")})


def table_html(df: pd.DataFrame, highlight: np.ndarray | None = None) -> str:
    """A table for a self-contained report: text escaped, measured numbers to 4 digits
    (:func:`core.shown.approx_text`), ``highlight`` rows marked ``sig``."""
    def cell(v: Any) -> str:
        return approx_text(v) if isinstance(v, (float, np.floating)) else str(v)

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for i, (_, r) in enumerate(df.iterrows()):
        cls = ' class="sig"' if highlight is not None and highlight[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in r) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def group_name(attribute: str, label: object) -> str:
    """A group in words: ``sex = 1``; a numeric attribute's quartile bin ``age in (30, 45]``."""
    label = str(label)
    return f"{attribute} in {label}" if label[:1] in "[(" else f"{attribute} = {label}"


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%" if np.isfinite(v) else "–"


def _plain_gap(t: Any, target: str) -> str:
    """A significant gap of the audit in plain words, from the worse-off group's side."""
    key = str(t["metric"])
    m = METRICS[key]
    group_worse = (t["gap"] < 0) if m.higher_is_better else (t["gap"] > 0)
    (wg, wv), (bg, bv) = ((t["group"], t["group_value"]), (t["reference"], t["reference_value"]))
    if not group_worse:
        (wg, wv), (bg, bv) = (bg, bv), (wg, wv)
    worse, better = group_name(t["attribute"], wg), group_name(t["attribute"], bg)
    if key in ("cost", "cost_median"):
        more = f" ({_pct(wv / bv - 1)} more)" if bv > 0 else ""
        return (f"{worse} must change more than {better} to get {target}: a {m.label} of {approx_text(wv, 3)} "
                f"against {approx_text(bv, 3)}{more}.")
    if key == "feasible":
        return f"Fewer cases of {worse} can get {target} at all: {_pct(wv)} against {_pct(bv)} for {better}."
    if key == "precluded":
        return (f"More cases of {worse} have no change at all that gets them {target} under the constraints between "
                f"features (proven): {_pct(wv)} against {_pct(bv)} for {better}.")
    if key == "changes":
        return (f"{worse} must change more features than {better} to get {target}: {approx_text(wv, 3)} against "
                f"{approx_text(bv, 3)} on average.")
    shown = (lambda v: _pct(v)) if key in SHARES else (lambda v: approx_text(v, 3))
    return f"{worse} is worse off than {better} on the {m.label}: {shown(wv)} against {shown(bv)}."


_LEAD_ORDER = ("feasible", "precluded", "cost", "cost_median", "changes")   # which gap a reader hears first


def _gaps_told(tests: pd.DataFrame, target: str) -> list[str]:
    """The audit's significant gaps in plain words, those a reader hears first first
    (:data:`_LEAD_ORDER`), then the largest relative to the reference."""
    sig = tests[tests["significant"].astype(bool)].copy() if len(tests) else tests
    if not len(sig):
        return []
    sig["rel"] = (sig["gap"].abs() / sig["reference_value"].abs().clip(lower=1e-12)).fillna(np.inf)
    sig["kind"] = [_LEAD_ORDER.index(k) if k in _LEAD_ORDER else len(_LEAD_ORDER) for k in sig["metric"]]
    return [_plain_gap(t, target) for _, t in sig.sort_values(["kind", "rel"], ascending=[True, False]).iterrows()]


def plain_summary(audit: AuditLike) -> tuple[str, list[str]]:
    """The audit for a reader outside the field: a headline and a few sentences
    (what was checked, who can reach the outcome, each significant gap from the
    worse-off group's side, how sure, what a cost is)."""
    meta = audit.meta
    params = meta.get("parameters", {})
    target = _target_text(meta)
    attrs = list(params.get("protected", {})) or sorted({str(a) for a in audit.groups.get("attribute", [])})
    n, tests = len(audit.rows), audit.tests
    alpha = params.get("alpha", 0.05)
    g = audit.recourse_guarantee
    checked = (f"What was checked: {number_text(n)} cases the model did not give {target} to. For each, "
               f"{recourse_words(g, target)}, with {', '.join(attrs)} held fixed. A model that treats its groups "
               "alike asks comparable changes of each of them.")
    feasible = float(audit.rows["feasible"].mean()) if n else float("nan")
    reach = f"{_pct(feasible)} of these cases can get {target} by changing what may change." + _within(audit, target)
    found = _gaps_told(tests, target)
    if found:
        lead = found[0]
        sure = (f"{'This difference survives' if len(found) == 1 else 'Each of these differences survives'} a "
                f"correction for the {number_text(len(tests))} comparisons the audit made, so it is unlikely to "
                f"be chance (Holm-adjusted p at most {alpha}).")
        body = [checked, reach, *found[1:], sure]
    else:
        lead = f"No group has to change significantly more than another to get {target}."
        body = [checked, reach,
                f"None of the {number_text(len(tests))} comparisons shows a difference that survives the correction "
                f"for multiple comparisons (α = {alpha}). With {number_text(n)} cases audited, small differences may "
                "go unseen: the intervals in the figure show how large a difference the data still allow."]
    body.append("Cost is the size of the change, each feature measured against its range: 0.1 is a tenth of the "
                "range of one feature; switching a category counts 1.")
    limit = time_limit_text(audit.rows)
    if limit:
        body.append(limit)
    # the kind, in one sentence: the count of rows per kind (the note) is in the per-row table
    body.append(guarantee_line(None if g is None else replace(g, note=""), "each case's change"))
    return lead, body


def _within(audit: AuditLike, target: str) -> str:
    """The constraints the recourses kept and the cases they preclude, in plain words ("" with none)."""
    cons = recorded(audit.meta)
    n_pre = int(pd.to_numeric(audit.rows["precluded"], errors="coerce").fillna(0).sum()) \
        if "precluded" in audit.rows else 0
    said = ""
    if cons:
        said = (f" Every change counted keeps the {number_text(len(cons))} constraint{'s' * (len(cons) != 1)} "
                f"between features: {lines_words(cons)}.")
    if n_pre:
        said += (f" For {number_text(n_pre)} case{'s' * (n_pre != 1)} it is proven that no change "
                 f"{'within them ' if cons else ''}gets {target}: {'they are' if n_pre != 1 else 'it is'} "
                 "precluded.")
    return said


def time_limit_text(rows: pd.DataFrame) -> str:
    """The rows whose recourse search ended at its time limit, in words: those with a
    recourse carry a cost that may be above the optimum by their gap (the largest is
    said); those without are left out of the shares. Empty when every search ended."""
    status = rows["status"].astype(str) if "status" in rows else pd.Series([], dtype=str)
    found = rows[status == "time_limit_found"]
    lost = int((status == "time_limit").sum())
    parts = []
    if len(found):
        gaps = pd.to_numeric(found["gap"], errors="coerce") if "gap" in found else pd.Series([np.nan])
        worst = float(gaps.max()) if gaps.notna().any() else float("nan")
        # gap = (cost - proven lower bound) / cost: the optimum is at least (1 - gap) of the cost
        within = (f"the cheapest possible change costs at least {_pct(max(0.0, 1 - worst))} of it (the proven "
                  f"bound)" if np.isfinite(worst) else "how much cheaper the best change could be is not proven")
        parts.append(f"For {number_text(len(found))} case{'s' * (len(found) != 1)} the search for the cheapest "
                     f"change reached its time limit: the change shown is valid, and {within}.")
    if lost:
        parts.append(f"For {number_text(lost)} case{'s' * (lost != 1)} no change was found within the time limit; "
                     f"{'they are' if lost != 1 else 'it is'} left out of the shares. A longer time limit per "
                     "case may find one.")
    return " ".join(parts)


def key_figures(audit: AuditLike) -> str:
    """The summary's figure per attribute (inline SVG): each group's gap in mean recourse
    cost to the attribute's largest group, with its 95% interval, significant gaps in red;
    the mean cost per group where the audit made no comparison."""
    out = []
    for attr in dict.fromkeys(str(a) for a in audit.groups.get("attribute", [])):
        t = audit.tests[(audit.tests["attribute"].astype(str) == attr) & (audit.tests["metric"] == "cost")] \
            if len(audit.tests) else audit.tests
        if len(t):
            ref = group_name(attr, t["reference"].iloc[0])
            out.append(interval_chart_svg(
                [f"{group_name(attr, g)} compared with {ref}" for g in t["group"]], t["gap"], t["gap_lo"],
                t["gap_hi"], highlight=t["significant"].astype(bool).tolist(),
                title=f"Difference in mean recourse cost from {ref} (the largest group), with 95% intervals; red: "
                      "significant after correction",
                axis=f"mean cost of the group minus that of {ref} (below 0: the group needs less change)"))
            continue
        g = audit.groups[audit.groups["attribute"].astype(str) == attr]
        if "cost" in g:
            out.append(interval_chart_svg(
                [f"{group_name(attr, v)} (n = {number_text(int(r))})" for v, r in zip(g["group"], g["rows"])],
                g["cost"], g["cost_lo"], g["cost_hi"], title=f"Mean recourse cost per group of {attr}, with 95% "
                "intervals", axis="mean recourse cost"))
    return "".join(out)


def audit_html(audit: AuditLike) -> str:
    meta = audit.meta
    attrs = list(meta.get("parameters", {}).get("protected", {}))
    figs = _figures_html(audit, attrs)
    data = meta.get("data", {})
    prov = _provenance_table(meta)
    params = parameters_table(meta.get("parameters", {}))
    versions = pd.DataFrame(list(meta.get("versions", {}).items()), columns=["package", "version"])
    schema = pd.DataFrame(meta.get("schema", {}).get("features", [])).fillna("")
    rules = _rules_shown(audit.rules)
    # no "<" at all inside the script element: "</script>" and "<!--<script>" in a value
    # would otherwise end it or change how the HTML parser reads it; JSON reads \u003c back
    payload = audit.to_json().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    summary = "".join(f"<li>{html.escape(s)}</li>" for s in audit.summary)
    lead, plain = plain_summary(audit)
    brief = "".join(f"<li>{html.escape(s)}</li>" for s in plain)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in meta.get("notes", []))
    sig = audit.tests["significant"].to_numpy(dtype=bool) if len(audit.tests) else None
    disp, by_group = fairness_tables(audit)
    pre_t = precluded_table(audit)
    sub_t = subgroup_table(audit)
    sub_sig = (audit.subgroups["significant"].to_numpy(dtype=bool)
               if len(sub_t) and audit.subgroups is not None else None)    # a table: the scan ran
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in meta.get("timings", {}).items())
    costs = _costs_words(audit.recourse_guarantee)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Recourse audit · {html.escape(str(data.get('name') or ''))}</title>
<style>{_CSS}</style></head><body>
<h1>Recourse audit</h1>
<p class="muted">Counterfactual Atlas · {html.escape(meta.get('created', ''))} · {len(audit.rows)} rows with an
unfavourable decision audited · favourable outcome: {html.escape(_target_text(meta))} · protected:
{html.escape(', '.join(attrs))} (held fixed in every recourse)</p>
<section class="summary"><h2>In one minute</h2><p class="lead">{html.escape(lead)}</p>
<ul>{brief}</ul>{key_figures(audit)}</section>
<h2>Findings of the statistical tests</h2><ul>{summary}</ul>
<p class="muted">{html.escape(guarantee_line(audit.guarantee, "each group's figures"))}</p>{f'<p class="muted">Notes:</p><ul>{notes}</ul>' if notes else ''}
<h2>Constraints between features</h2>{constraints_html(meta)}
<h2>Per group</h2>{table_html(group_table(audit))}
<p class="muted">Shares of rows with 95% Wilson score intervals, means with 95% percentile-bootstrap intervals. Costs are {html.escape(costs)} of the
rows that have one; the reference group of each attribute is its largest group.</p>
{_precluded_section(audit, pre_t)}
<h2>Gaps to the reference group</h2>{table_html(tests_table(audit), sig)}
<p class="muted">Two-sided permutation tests of the group labels; Holm-adjusted over all {len(audit.tests)} tests.</p>
<h2>Figures</h2><div class="figures">{figs}</div>
<h2>Group fairness of the decisions</h2>{_table_or(disp)}
<p class="muted">On every row of the data, with fairlearn's metrics: demographic parity and equalised odds between
the groups of each attribute and of each intersection, with 95% percentile-bootstrap intervals.</p>
{_table_or(by_group, none='')}
<h2>Subgroups where recourse differs most</h2>{_table_or(sub_t, sub_sig)}
<p class="muted">Subgroups of up to two conditions on the protected and other columns, each against the rest of the
audited rows; burden counts a row without recourse at the largest cost any row needed; effectiveness is the share
with a recourse within the budget {html.escape(approx_text(meta.get('parameters', {}).get('budget')))}. p-values adjusted
over the whole scan (Westfall-Young max-T).</p>
<h2>Rules most often prescribed (T-CREx)</h2>{_table_or(rules)}
<h2>Provenance</h2>{table_html(prov)}
<h3>Parameters</h3>{table_html(params)}
<h3>Package versions</h3>{table_html(versions)}
<h3>Feature settings (schema)</h3>{_table_or(schema)}
<p class="muted">Timings: {html.escape(timings)}. The per-row results are in the CSV saved beside this report; this
file also embeds the whole audit, which the app re-opens (Fairness audit → Open a saved audit).</p>
<script type="application/json" id="atlas-audit">{payload}</script>
</body></html>"""


def _figures_html(audit: AuditLike, attrs: list[str]) -> str:
    """Each protected attribute's figures (recourse cost, share with a recourse) as plotly
    HTML at a printable width, plotly's script in the first only."""
    figs: list[str] = []
    for a in attrs:
        for fig in (cost_figure(audit, a), metric_figure(audit, a, "feasible")):
            if fig is None:
                continue
            fig.update_layout(width=700)          # fits an A4 page in print
            figs.append(fig.to_html(full_html=False, include_plotlyjs=not figs,
                                    config={"displaylogo": False, "responsive": False}))
    return "".join(figs)


def _provenance_table(meta: Mapping[str, Any]) -> pd.DataFrame:
    """Where the audited data and model came from, and when the audit was made."""
    data, model = meta.get("data", {}), meta.get("model", {})
    return pd.DataFrame([
        ("data", f"{data.get('name') or '(array)'} · {_value_text(data.get('rows'))} rows"),
        ("data SHA-256", data.get("sha256", "")),
        ("model", model_text(model)),
        ("model SHA-256", model.get("sha256") or "(not given)"),
        ("created", meta.get("created", "")),
    ], columns=["", "value"])


def _rules_shown(rules: pd.DataFrame) -> pd.DataFrame:
    """The T-CREx rules with their share as a percentage."""
    rules = rules.copy()
    if "share" in rules:
        rules["share"] = [f"{v:.1%}" for v in rules["share"]]
    return rules


def _costs_words(g: Guarantee | None) -> str:
    """What the report's costs are: optimal, or found through a surrogate and checked."""
    if g is not None and (g.model_kind == "black_box" or g.via_surrogate):
        return ("the costs of the recourses found through the model's surrogate and checked on the model (not "
                "proven optimal for it)")
    return "the optimal recourse costs (OCEAN)"


def _table_or(df: pd.DataFrame, highlight: np.ndarray | None = None, none: str = "<p>–</p>") -> str:
    """A table of the report, or ``none`` when it is empty."""
    return table_html(df, highlight) if len(df) else none


def _precluded_section(audit: AuditLike, table: pd.DataFrame) -> str:
    """The report's table of rows precluded per group ("" when there is nothing to tell)."""
    if not len(table):
        return ""
    return ("<h2>Rows precluded per group</h2>" + table_html(table)
            + f'<p class="muted">{html.escape(precluded_note(audit))}</p>')


def _target_text(meta: dict[str, Any]) -> str:
    """The audit's favourable outcome, named as the analyst named its class."""
    target = meta.get("parameters", {}).get("target", "")
    if isinstance(target, list) and len(target) == 2:          # a regressor's interval
        return f"a prediction in {outcome_text(tuple(target))}"
    target = str(target)
    name = (meta.get("class_names") or {}).get(target)
    return f"{name} ({target})" if name else target


def extract_audit_json(text: str) -> str:
    """The embedded audit JSON of a report."""
    start_tag = '<script type="application/json" id="atlas-audit">'
    i = text.find(start_tag)
    if i < 0:
        raise AuditError("This HTML file is not an audit report of Counterfactual Atlas (no embedded audit).")
    j = text.find("</script>", i)
    return text[i + len(start_tag):j].replace("<\\/", "</")
