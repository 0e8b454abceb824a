"""The audit report: one self-contained HTML file.

Everything is inside the file: the styles, the figures (Plotly, with its
JavaScript inlined once, so the report opens without a network), the tables,
the provenance (data and model SHA-256, schema, every parameter, package
versions) and the audit itself as JSON in a ``<script type="application/json"
id="atlas-audit">`` block, from which the app re-opens a saved audit.
"""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import pandas as pd

from core.audit.metrics import METRICS, SHARES
from core.errors import AuditError
from core.figures import cost_figure, metric_figure
from core.shown import approx_text, outcome_text

__all__ = ["audit_html", "extract_audit_json"]

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;color:#222;
line-height:1.45;padding:0 1rem}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.86rem;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f4f6f8}.muted{color:#666;font-size:.9rem}
.sig{background:#fdecea}code{font-size:.85rem;word-break:break-all}li{margin:.3rem 0}
"""


def _ci(v: float, lo: float, hi: float, pct: bool = False) -> str:
    if v is None or not np.isfinite(v):
        return "–"
    f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.4g}")
    if lo is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f(v)
    return f"{f(v)} [{f(lo)}, {f(hi)}]"


def group_table(audit: Any) -> pd.DataFrame:
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


def tests_table(audit: Any) -> pd.DataFrame:
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


def fairness_tables(audit: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Group fairness of the decisions (core.audit.groupfair) as display strings: the
    disparities per attribute and the per-group metrics, each with its interval."""
    d, g = audit.disparities, audit.fairness
    if d is None or g is None or not len(g):
        return pd.DataFrame(), pd.DataFrame()
    disp = pd.DataFrame({"attribute": d["attribute"], "measure": d["measure"],
                         "value [95% CI]": [_ci(v, lo, hi) for v, lo, hi in zip(d["value"], d["lo"], d["hi"])]}) \
        if len(d) else pd.DataFrame()
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


def subgroup_table(audit: Any) -> pd.DataFrame:
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


def audit_html(audit: Any) -> str:
    meta = audit.meta
    attrs = list(meta.get("parameters", {}).get("protected", {}))
    figs = []
    first = True
    for a in attrs:
        for fig in (cost_figure(audit, a), metric_figure(audit, a, "feasible")):
            if fig is None:
                continue
            figs.append(fig.to_html(full_html=False, include_plotlyjs=True if first else False,
                                    config={"displaylogo": False}))
            first = False
    data, model = meta.get("data", {}), meta.get("model", {})
    prov = pd.DataFrame([
        ("data", f"{data.get('name') or '(array)'} · {data.get('rows')} rows"),
        ("data SHA-256", data.get("sha256", "")),
        ("model", f"{model.get('source')} · {model.get('trees')} trees · {model.get('task')}"),
        ("model SHA-256", model.get("sha256") or "(not given)"),
        ("created", meta.get("created", "")),
    ], columns=["", "value"])
    params = pd.DataFrame([(k, json.dumps(v, default=str)) for k, v in meta.get("parameters", {}).items()],
                          columns=["parameter", "value"])
    versions = pd.DataFrame(list(meta.get("versions", {}).items()), columns=["package", "version"])
    schema = pd.DataFrame(meta.get("schema", {}).get("features", [])).fillna("")
    rules = audit.rules.copy()
    if "share" in rules:
        rules["share"] = [f"{v:.1%}" for v in rules["share"]]
    # no "<" at all inside the script element: "</script>" and "<!--<script>" in a value
    # would otherwise end it or change how the HTML parser reads it; JSON reads \u003c back
    payload = audit.to_json().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    summary = "".join(f"<li>{html.escape(s)}</li>" for s in audit.summary)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in meta.get("notes", []))
    sig = audit.tests["significant"].to_numpy(dtype=bool) if len(audit.tests) else None
    disp, by_group = fairness_tables(audit)
    sub_t = subgroup_table(audit)
    sub_sig = audit.subgroups["significant"].to_numpy(dtype=bool) if len(sub_t) else None
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in meta.get("timings", {}).items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Recourse audit · {html.escape(str(data.get('name') or ''))}</title>
<style>{_CSS}</style></head><body>
<h1>Recourse audit</h1>
<p class="muted">Counterfactual Atlas · {html.escape(meta.get('created', ''))} · {len(audit.rows)} rows with an
unfavourable decision audited · favourable outcome: {html.escape(_target_text(meta))} · protected:
{html.escape(', '.join(attrs))} (held fixed in every recourse)</p>
<h2>Summary</h2><ul>{summary}</ul>{f'<p class="muted">Notes:</p><ul>{notes}</ul>' if notes else ''}
<h2>Per group</h2>{table_html(group_table(audit))}
<p class="muted">Shares and means with 95% percentile-bootstrap intervals. Costs are the optimal recourse costs
(OCEAN) of the rows that have one; the reference group of each attribute is its largest group.</p>
<h2>Gaps to the reference group</h2>{table_html(tests_table(audit), sig)}
<p class="muted">Two-sided permutation tests of the group labels; Holm-adjusted over all {len(audit.tests)} tests.</p>
<h2>Figures</h2>{''.join(figs)}
<h2>Group fairness of the decisions</h2>{table_html(disp) if len(disp) else '<p>–</p>'}
<p class="muted">On every row of the data, with fairlearn's metrics: demographic parity and equalised odds between
the groups of each attribute and of each intersection, with 95% percentile-bootstrap intervals.</p>
{table_html(by_group) if len(by_group) else ''}
<h2>Subgroups where recourse differs most</h2>{table_html(sub_t, sub_sig) if len(sub_t) else '<p>–</p>'}
<p class="muted">Subgroups of up to two conditions on the protected and other columns, each against the rest of the
audited rows; burden counts a row without recourse at the largest cost any row needed; effectiveness is the share
with a recourse within the budget {html.escape(approx_text(meta.get('parameters', {}).get('budget')))}. p-values adjusted
over the whole scan (Westfall-Young max-T).</p>
<h2>Rules most often prescribed (T-CREx)</h2>{table_html(rules) if len(rules) else '<p>–</p>'}
<h2>Provenance</h2>{table_html(prov)}
<h3>Parameters</h3>{table_html(params)}
<h3>Package versions</h3>{table_html(versions)}
<h3>Feature settings (schema)</h3>{table_html(schema) if len(schema) else '<p>–</p>'}
<p class="muted">Timings: {html.escape(timings)}. The per-row results are in the CSV saved beside this report; this
file also embeds the whole audit, which the app re-opens (Fairness audit → Open a saved audit).</p>
<script type="application/json" id="atlas-audit">{payload}</script>
</body></html>"""


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
