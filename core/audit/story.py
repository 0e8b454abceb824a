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
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from core.errors import NoCounterfactualRuleError
from core.optimal import optimal_counterfactual
from core.ruletext import missing_condition
from core.shown import approx_text, bound_text, number_text

if TYPE_CHECKING:
    from core.intake.workspace import Workspace
    from core.model import TreeEnsemble
    from core.schema import Schema

__all__ = ["CaseStory", "case_story"]

Section = tuple[str, tuple[str, ...]]   # (heading, paragraphs)


@dataclass(frozen=True)
class CaseStory:
    """``sections``: (heading, paragraphs) in reading order; ``table``: the row and
    its counterfactual in the raw columns (rows "this case" and "counterfactual")."""

    row: int
    title: str
    sections: tuple[Section, ...]
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
    """A case's value in full (:func:`core.shown.number_text`): the story's
    recourse values are the checked ones, digit for digit."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return number_text(v)
    return str(v)


def _short(v: Any) -> str:
    """A case's own value, for reading: 6 significant digits."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return approx_text(v, 6)
    return str(v)


def _region(ens: TreeEnsemble, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The box of inputs reaching the same leaf as ``x`` in every tree."""
    lower, upper = np.full(ens.n_features, -np.inf), np.full(ens.n_features, np.inf)
    leaves = ens.apply(x[None, :])[0]
    for t, (ids, lo, hi) in enumerate(ens.leaf_boxes()):
        k = int(np.searchsorted(ids, leaves[t]))
        lower, upper = np.maximum(lower, lo[k]), np.minimum(upper, hi[k])
    return lower, upper


def _conditions(schema: Schema | None, names: list[str], bounded: list[int], lower: np.ndarray, upper: np.ndarray
                ) -> list[str]:
    """The region's bounds as plain conditions: a one-hot column as "group is (not)
    level", whole numbers as values, LightGBM's +-1e-35 zero zone as 0."""
    spec = {f.name: f for f in schema.features}
    out: list[str] = []
    hot: dict[str, str] = {}                       # group -> its one level, when the region names it
    cold: dict[str, list[str]] = {}                # group -> levels the region excludes
    for j in bounded:
        f = spec.get(names[j])
        if f is not None and f.kind == "one-hot" and f.group:
            level = names[j].split("=", 1)[1] if "=" in names[j] else names[j]
            if upper[j] < 1:
                cold.setdefault(f.group, []).append(level)
            elif lower[j] >= 0:
                hot[f.group] = level
    said: set[str] = set()
    for j in bounded:
        f = spec.get(names[j])
        lo, hi = (0.0 if abs(v) < 1e-30 else v for v in (lower[j], upper[j]))
        if f is not None and f.kind == "one-hot" and f.group:
            g = f.group
            if g not in said and (g in hot or g in cold):   # one condition per group: its level, or those it is not
                said.add(g)
                every = len(cold.get(g, ())) == sum(1 for s_ in schema.features if s_.group == g)
                out.append(f"{g} = {hot[g]}" if g in hot else f"{g} missing" if every else
                           f"{g} not {' or '.join(cold[g])}")
            continue
        state = missing_condition(str(names[j]), lo, hi)
        if state is not None:                      # "income is missing" / "income has a value"
            out.append(state)
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
            out.append(f"{names[j]} above {bound_text(lo)} and at most {bound_text(hi)}")
        elif np.isfinite(hi):
            out.append(f"{names[j]} at most {bound_text(hi)}")
        else:
            out.append(f"{names[j]} above {bound_text(lo)}")
    return out


def _columns_text(schema: Schema | None, features: list[str]) -> str:
    """Feature names as the analyst's columns: a one-hot group's columns as its group, once."""
    group = {f.name: f.group for f in schema.features if f.kind == "one-hot" and f.group}
    out: list[str] = []
    for name in features:
        col = group.get(name, name)
        if col not in out:
            out.append(col)
    return ", ".join(out) if out else "none"


@dataclass(frozen=True)
class _Case:
    """The row being told, resolved once and read by every section."""

    ws: Workspace
    row: int
    target: Any
    names: list[str]       # the model's features
    X: np.ndarray          # every row of the workspace, in those features
    x: np.ndarray          # the row
    raw: pd.Series         # the row in the analyst's columns (Workspace.analyst_view)
    fixed: list[str]       # the feature names that may not change

    @property
    def ens(self) -> Any:
        return self.ws.ensemble

    @property
    def schema(self) -> Any:
        return self.ws.schema


def _case(ws: Workspace, row: int, target: Any, fixed: Any) -> _Case:
    """Check the row and resolve it, its raw columns and the features held fixed."""
    X = ws.X.to_numpy(dtype=float)
    if not 0 <= row < len(X):
        raise IndexError(f"Row {row} is outside 0..{len(X) - 1}.")
    x = X[row]
    raw = ws.analyst_view(x[None, :], [row]).iloc[0]
    fixed = [f.name for f in ws.schema.features if f.actionability == "fixed"] if fixed is None else list(fixed)
    return _Case(ws, row, target, list(ws.ensemble.feature_names), X, x, raw, fixed)


def _share_text(p: float) -> str:
    """A score as a percentage that never reads 100% or 0% unless it is: 99.6%, not 100%."""
    for digits in range(0, 4):
        text = f"{p:.{digits}%}"
        if (text not in (f"{1:.{digits}%}", f"{0:.{digits}%}")) or p in (0.0, 1.0):
            return text
    return "over 99.99%" if p > 0.5 else "under 0.01%"


def _decision(case: _Case) -> tuple[Section, Any]:
    """1. The decision, and the model's prediction."""
    ens, x, target = case.ens, case.x, case.target
    pred = ens.predict(x[None, :])[0]
    if ens.is_classifier:
        proba = ens.predict_proba(x[None, :])[0]
        p = float(proba[list(ens.classes).index(pred)])
        decision = (f"The model decides **{case.ws.outcome_text(pred)}** for this case, with a score of "
                    f"{_share_text(p)} for that outcome.")
    else:
        decision = f"The model predicts **{approx_text(float(pred))}** for this case."
    want = (f"The outcome asked for is **{case.ws.outcome_text(target)}**." if ens.is_classifier else
            f"The outcome asked for is a prediction between {approx_text(float(target[0]))} and "
            f"{approx_text(float(target[1]))}.")
    return ("The decision", (decision, want)), pred


def _where(case: _Case) -> Section:
    """2. The region the case sits in."""
    ens, X = case.ens, case.X
    lower, upper = _region(ens, case.x)
    bounded = [j for j in range(ens.n_features) if np.isfinite(lower[j]) or np.isfinite(upper[j])]
    same = int(np.all((X > lower) & (X <= upper), axis=1).sum())
    parts = _conditions(case.schema, case.names, bounded, lower, upper)
    if not parts:
        return ("Where the case sits", ("The model gives the same answer to every input.",))
    region = (f"Every case with {', '.join(parts[:8])}{' (and more conditions)' if len(parts) > 8 else ''} gets "
              f"exactly the same answer from every tree of the model; of the {len(X)} cases in the data, {same} "
              f"{'lies' if same == 1 else 'lie'} in this region.")
    return ("Where the case sits", (region,))


def _smallest_change(case: _Case, time_limit: float) -> tuple[Section, pd.DataFrame, Any, list[str] | None]:
    """3. The smallest change: the section, the table of the case (and its
    counterfactual), the solver's result and the raw columns changed (None: no change found)."""
    ws, raw, fixed = case.ws, case.raw, case.fixed
    res = optimal_counterfactual(case.ens, case.x, case.target, schema=case.schema, fixed=fixed, X_ref=case.X,
                                 model=ws.model, time_limit=time_limit)
    table = pd.DataFrame([raw], index=["this case"])
    if not res.found:
        cf_text = f"No change of the features that may change gives the outcome asked for: {res.message}"
        return ("The smallest change", (cf_text,)), table, res, None
    cf_raw = ws.analyst_view(np.asarray(res.x, dtype=float)[None, :], [case.row]).iloc[0]
    changed = [c for c in cf_raw.index if _num(cf_raw[c]) != _num(raw[c])]
    steps = "; ".join(f"{c} from {_short(raw[c])} to {_num(cf_raw[c])}" for c in changed)
    proven = ("This is proven to be the smallest such change" if res.status == "optimal" else
              "This is the best change found in the time allowed (not proven the smallest)")
    checked = " The original model was asked again and agrees." if res.valid else ""
    cf_text = (f"Changing {steps} gives the outcome asked for. {proven} (cost {res.cost:.3g}, with each "
               f"feature measured against its range; fixed: {_columns_text(case.schema, fixed)}).{checked}")
    table = pd.concat([table, pd.DataFrame([cf_raw], index=["counterfactual"])])
    return ("The smallest change", (cf_text,)), table, res, changed


def _rule(case: _Case, rules: Any) -> tuple[Section, Any]:
    """4. A rule instead of a point, and the rule (None when there is none)."""
    names, target = case.names, case.target
    groups = list(case.schema.groups().values())
    try:
        rule = rules.local_rule(case.x, target, fixed=[n for n in case.fixed if n in names])
    except NoCounterfactualRuleError as exc:
        return ("A rule for cases like this one", (f"No counterfactual rule was found: {exc}",)), None
    weak_set = rule.cdp < rules.pi - 1e-12
    text = (f"A rule rather than one point: if {rule.to_text(names, groups)}, the other features kept, the "
            f"outcome becomes {case.ws.outcome_text(target)} with probability {rule.crp:.2f} (estimated by a "
            "surrogate forest).")
    if rule.below_pi_c:
        text += (f" Caveat: no rule reaches the level asked for ({rules.pi_c:.2f}); this is the best one found, "
                 "so it is less sure.")
    if weak_set:
        text += (f" Caveat: changing only these features gives the outcome for {rule.cdp:.0%} of cases like this "
                 f"one (below the {rules.pi:.0%} asked for), so the rule speaks for few of them; read it as a "
                 "hint, and the smallest change above as the answer for this case.")
    return ("A rule for cases like this one", (text,)), rule


def _group_label(case: _Case, audited: pd.DataFrame | None, attr: str) -> str | None:
    """The case's group of attribute ``attr``: as the audit labelled it, or a whole value of its column."""
    if audited is not None and case.row in audited.index and f"group:{attr}" in audited.columns:
        return str(audited.at[case.row, f"group:{attr}"])
    if attr in case.names:
        v = case.x[case.names.index(attr)]
        return str(int(v)) if float(v).is_integer() else None
    return None


def _audit_paragraph(audit: Any, attr: str, label: str, g: pd.Series) -> str:
    """How group ``attr = label`` (its row ``g`` of the audit's groups) fares, and its gap in cost."""
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
    return text


def _groups(case: _Case, audit: Any) -> Section | None:
    """5. How the case's groups fare in the audit, or which they are when no audit is given."""
    features = case.schema.features
    if audit is not None and len(audit.groups):
        paras = []
        audited = audit.rows.set_index("row") if "row" in audit.rows else None
        for attr in sorted(set(audit.groups["attribute"])):
            label = _group_label(case, audited, attr)
            g = audit.groups[(audit.groups["attribute"] == attr) & (audit.groups["group"].astype(str) == label)]
            if label is None or g.empty:
                continue
            paras.append(_audit_paragraph(audit, attr, label, g.iloc[0]))
        return ("How the case's group fares", tuple(paras)) if paras else None
    group_cols = sorted({(f.group or f.name) for f in features if f.protected})
    if not group_cols:
        return None
    protected = [f.name for f in features if f.protected]
    values = ", ".join(f"{c} = {_short(case.raw[c])}" for c in group_cols if c in case.raw.index)
    return ("How the case's group fares", (
        f"The case's protected attributes: {values or ', '.join(protected)}. Run the fairness audit to see how "
        "its group fares.",))


def case_story(ws: Workspace, row: int, target: Any, *, time_limit: float = 30.0, rules: Any = None,
               audit: Any = None, fixed: Any = None) -> CaseStory:
    """Tell the story of row ``row`` of workspace ``ws`` for ``target`` (a class, or
    ``(lo, hi)`` for a regressor). ``rules``: a fitted CounterfactualRules (its
    local rule is told); ``audit``: a fairness Audit on this workspace (the row's
    groups are told); ``fixed``: feature names that may not change (default: the
    schema's fixed features)."""
    case = _case(ws, row, target, fixed)
    decision, pred = _decision(case)
    where = _where(case)
    change, table, res, changed = _smallest_change(case, time_limit)
    sections = [decision, where, change]
    facts: dict[str, Any] = {"row": row, "target": target, "prediction": pred, "counterfactual": res}
    if changed is not None:
        facts["changed"] = changed
    if rules is not None:
        told, rule = _rule(case, rules)
        sections.append(told)
        if rule is not None:
            facts["rule"] = rule
    groups = _groups(case, audit)
    if groups is not None:
        sections.append(groups)
    title = (f"Case {row}: {case.ws.outcome_text(pred)} → {case.ws.outcome_text(target)}" if case.ens.is_classifier
             else f"Case {row}")
    return CaseStory(row=row, title=title, sections=tuple(sections), table=table, facts=facts)
