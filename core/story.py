"""A case story: one row walked through its decision, in plain language.

For a row and a target outcome: the model's decision (and its probability), the
region of inputs around the row where the ensemble's answer cannot change (the
intersection of the row's leaves over all trees: an exact pure region), the
optimal counterfactual (:mod:`core.optimal`, re-checked on the original model),
the local counterfactual rule when a fitted :class:`core.rules.CounterfactualRules`
is given (flagged when below pi_C), and how the row's protected groups fare in a
fairness audit when one is given (:mod:`core.audit`). Everything is shown in the
raw columns of the workspace; :meth:`CaseStory.to_html` is one self-contained
file (no script, no external resource).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.optimal import optimal_counterfactual

__all__ = ["CaseStory", "case_story"]


@dataclass(frozen=True)
class CaseStory:
    """``sections``: (heading, paragraphs) in reading order; ``table``: the row and
    its counterfactual in the raw columns (rows "this case" and "counterfactual")."""

    row: int
    title: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    table: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)

    def to_markdown(self) -> str:
        out = [f"## {self.title}"]
        for head, paras in self.sections:
            out += [f"### {head}", *paras]
        return "\n\n".join(out)

    def to_html(self) -> str:
        esc = html.escape
        body = [f"<h1>{esc(self.title)}</h1>"]
        for head, paras in self.sections:
            body.append(f"<h2>{esc(head)}</h2>")
            body += [f"<p>{esc(p).replace('**', '')}</p>" for p in paras]
        body.append("<h2>The case and its counterfactual</h2>")
        body.append(self.table.to_html(border=0, classes="cases", na_rep="", escape=True))
        style = ("body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;line-height:1.5;color:#222}"
                 "h1{font-size:1.6rem}h2{font-size:1.15rem;margin-top:1.6rem}"
                 "table.cases{border-collapse:collapse}table.cases td,table.cases th{padding:.25rem .6rem;"
                 "border-bottom:1px solid #ddd;text-align:left}")
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                f"<title>{esc(self.title)}</title><style>{style}</style></head><body>"
                + "".join(body) + "</body></html>")


def _num(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}"
    return str(v)


def _region(ens: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The box of inputs reaching the same leaf as ``x`` in every tree."""
    lower, upper = np.full(ens.n_features, -np.inf), np.full(ens.n_features, np.inf)
    leaves = ens.apply(x[None, :])[0]
    for t, (ids, lo, hi) in enumerate(ens.leaf_boxes()):
        k = int(np.searchsorted(ids, leaves[t]))
        lower, upper = np.maximum(lower, lo[k]), np.minimum(upper, hi[k])
    return lower, upper


def _conditions(schema: Any, names: list[str], bounded: list[int], lower: np.ndarray, upper: np.ndarray
                ) -> list[str]:
    """The region's bounds as plain conditions: a one-hot column as "group is (not)
    level", whole numbers as values, LightGBM's +-1e-35 zero zone as 0."""
    spec = {f.name: f for f in schema.features}
    out = []
    for j in bounded:
        f = spec.get(names[j])
        lo, hi = (0.0 if abs(v) < 1e-30 else v for v in (lower[j], upper[j]))
        if f is not None and f.kind == "one-hot" and f.group:
            level = names[j].split("=", 1)[1] if "=" in names[j] else names[j]
            if hi < 1:
                out.append(f"{f.group} not {level}")
            elif lo >= 0:
                out.append(f"{f.group} = {level}")
            continue
        if f is not None and f.kind in ("integer", "binary"):
            a = int(np.floor(lo)) + 1 if np.isfinite(lo) else None
            b = int(np.floor(hi)) if np.isfinite(hi) else None
            if f.kind == "binary":                 # 0/1: a bound on either side is a value
                a, b = (a if a is not None else 0), (b if b is not None else 1)
            if a is not None and b is not None:
                out.append(f"{names[j]} = {a}" if a == b else f"{names[j]} from {a} to {b}")
            elif b is not None:
                out.append(f"{names[j]} at most {b}")
            else:
                out.append(f"{names[j]} at least {a}")
            continue
        if np.isfinite(lo) and np.isfinite(hi):
            out.append(f"{names[j]} above {_num(lo)} and at most {_num(hi)}")
        elif np.isfinite(hi):
            out.append(f"{names[j]} at most {_num(hi)}")
        else:
            out.append(f"{names[j]} above {_num(lo)}")
    return out


def case_story(ws: Any, row: int, target: Any, *, time_limit: float = 30.0, rules: Any = None,
               audit: Any = None, fixed: Any = None) -> CaseStory:
    """Tell the story of row ``row`` of workspace ``ws`` for ``target`` (a class, or
    ``(lo, hi)`` for a regressor). ``rules``: a fitted CounterfactualRules (its
    local rule is told); ``audit``: a fairness Audit on this workspace (the row's
    groups are told); ``fixed``: feature names that may not change (default: the
    schema's fixed features)."""
    ens, schema, names = ws.ensemble, ws.schema, list(ws.ensemble.feature_names)
    X = ws.X.to_numpy(dtype=float)
    if not 0 <= row < len(X):
        raise IndexError(f"Row {row} is outside 0..{len(X) - 1}.")
    x = X[row]
    raw = ws.to_raw(x[None, :]).iloc[0]
    fixed = [f.name for f in schema.features if f.actionability == "fixed"] if fixed is None else list(fixed)
    sections: list[tuple[str, tuple[str, ...]]] = []
    facts: dict[str, Any] = {"row": row, "target": target}

    # 1. the decision
    pred = ens.predict(x[None, :])[0]
    facts["prediction"] = pred
    if ens.is_classifier:
        proba = ens.predict_proba(x[None, :])[0]
        p = float(proba[list(ens.classes).index(pred)])
        decision = f"The model decides **{pred}** for this case, with a score of {p:.0%} for that outcome."
    else:
        decision = f"The model predicts **{_num(float(pred))}** for this case."
    want = (f"The outcome asked for is **{target}**." if ens.is_classifier else
            f"The outcome asked for is a prediction between {_num(target[0])} and {_num(target[1])}.")
    sections.append(("The decision", (decision, want)))

    # 2. the region the case sits in
    lower, upper = _region(ens, x)
    bounded = [j for j in range(ens.n_features) if np.isfinite(lower[j]) or np.isfinite(upper[j])]
    same = int(np.all((X > lower) & (X <= upper), axis=1).sum())
    parts = _conditions(schema, names, bounded, lower, upper)
    region = (f"Every case with {', '.join(parts[:8])}{' (and more conditions)' if len(parts) > 8 else ''} gets "
              f"exactly the same answer from every tree of the model; of the {len(X)} cases in the data, {same} "
              f"{'lies' if same == 1 else 'lie'} in this region." if parts else "The model gives the same answer to every input.")
    sections.append(("Where the case sits", (region,)))

    # 3. the smallest change
    res = optimal_counterfactual(ens, x, target, schema=schema, fixed=fixed, X_ref=X, model=ws.model,
                                 time_limit=time_limit)
    facts["counterfactual"] = res
    table = pd.DataFrame([raw], index=["this case"])
    if res.found:
        cf_raw = ws.to_raw(np.asarray(res.x, dtype=float)[None, :]).iloc[0]
        changed = [c for c in cf_raw.index if _num(cf_raw[c]) != _num(raw[c])]
        steps = "; ".join(f"{c} from {_num(raw[c])} to {_num(cf_raw[c])}" for c in changed)
        proven = ("This is proven to be the smallest such change" if res.status == "optimal" else
                  "This is the best change found in the time allowed (not proven the smallest)")
        checked = " The original model was asked again and agrees." if res.valid else ""
        cf_text = (f"Changing {steps} gives the outcome asked for. {proven} (cost {res.cost:.3g}, with each "
                   f"feature measured against its range; fixed: {', '.join(fixed) if fixed else 'none'}).{checked}")
        table = pd.concat([table, pd.DataFrame([cf_raw], index=["counterfactual"])])
        facts["changed"] = changed
    else:
        cf_text = f"No change of the features that may change gives the outcome asked for: {res.message}"
    sections.append(("The smallest change", (cf_text,)))

    # 4. a rule instead of a point
    if rules is not None:
        from core.rules import NoCounterfactualRuleError

        groups = list(schema.groups().values())
        try:
            rule = rules.local_rule(x, target, fixed=[names.index(n) for n in fixed if n in names])
        except NoCounterfactualRuleError as exc:
            text = f"No counterfactual rule was found: {exc}"
        else:
            text = (f"A rule rather than one point: if {rule.to_text(names, groups)}, the other features kept, the "
                    f"outcome becomes {target} with probability {rule.crp:.2f} (estimated by a surrogate forest).")
            if rule.below_pi_c:
                text += (f" No rule reaches the level asked for ({rules.pi_c}); this is the best one found, so it "
                         "is less sure.")
            facts["rule"] = rule
        sections.append(("A rule for cases like this one", (text,)))

    # 5. the case's groups in the audit
    protected = [f.name for f in schema.features if f.protected]
    group_cols = sorted({(f.group or f.name) for f in schema.features if f.protected})
    if audit is not None and len(audit.groups):
        paras = []
        audited = audit.rows.set_index("row") if "row" in audit.rows else None
        for attr in sorted(set(audit.groups["attribute"])):
            label = None
            if audited is not None and row in audited.index and f"group:{attr}" in audited.columns:
                label = str(audited.at[row, f"group:{attr}"])
            elif attr in names:
                v = x[names.index(attr)]
                label = str(int(v)) if float(v).is_integer() else None
            g = audit.groups[(audit.groups["attribute"] == attr) & (audit.groups["group"].astype(str) == label)]
            if label is None or g.empty:
                continue
            g = g.iloc[0]
            text = (f"In the audit, the group {attr} = {label} ({int(g['rows'])} audited cases) has a recourse for "
                    f"{g['feasible']:.0%} of its cases, at a mean cost of {g['cost']:.3g}.")
            t = audit.tests[(audit.tests["attribute"] == attr) & (audit.tests["group"].astype(str) == label)
                            & (audit.tests["metric"] == "cost")]
            if len(t):
                t = t.iloc[0]
                text += (f" The reference group ({attr} = {t['reference']}) pays {t['reference_value']:.3g}; the gap "
                         f"is {t['gap']:+.3g} (95% interval {t['gap_lo']:+.3g} to {t['gap_hi']:+.3g}), "
                         + ("significant after correcting for the number of tests." if bool(t["significant"]) else
                            "not significant after correcting for the number of tests."))
            elif bool(g.get("reference", False)):
                text += " It is the reference group the others are compared with."
            paras.append(text)
        if paras:
            sections.append(("How the case's group fares", tuple(paras)))
    elif group_cols:
        values = ", ".join(f"{c} = {_num(raw[c])}" for c in group_cols if c in raw.index)
        sections.append(("How the case's group fares", (
            f"The case's protected attributes: {values or ', '.join(protected)}. Run the fairness audit to see how "
            "its group fares.",)))
    title = f"Case {row}: {pred} → {target}" if ens.is_classifier else f"Case {row}"
    return CaseStory(row=row, title=title, sections=tuple(sections), table=table, facts=facts)
