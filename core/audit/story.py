"""A case story: one row walked through its decision, in plain language.

For a row and a target outcome: the model's decision (and its probability), the
region of inputs around the row where the ensemble's answer cannot change (the
intersection of the row's leaves over all trees: an exact pure region), the
optimal counterfactual (:mod:`core.optimal`, re-checked on the original model),
the local counterfactual rule when a fitted :class:`core.rules.CounterfactualRules`
is given (flagged when below pi_C), and how the row's protected groups fare in a
fairness audit when one is given (:mod:`core.audit`): every significant gap that
involves the case's group, in the direction it goes, whether or not the group is
the audit's reference. A section the story cannot write says why.

Everything is shown in the raw columns of the workspace, numbers as
:mod:`core.shown` writes them; :meth:`CaseStory.to_html` is one self-contained,
printable file (no script, no external resource) that opens with a summary.

A story is a :class:`core.model.result.Result` (kind ``"case_story"``): its
``params`` (row, target, time limit, fixed features, whether rules and an audit were
told), ``elapsed`` and ``guarantee`` (what holds for every section: the weakest of the
counterfactual's guarantee and, when a rule or an audit is told, ``estimated``:
:func:`story_guarantee`).
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from core.audit.constrained import in_force, lines_words, numbered
from core.audit.metrics import METRICS, SHARES
from core.audit.stats import group_labels
from core.counterfactual import CounterfactualResult
from core.errors import NoCounterfactualRuleError, QueryError
from core.figures import interval_chart_svg
from core.model.guarantee import GUARANTEE_KINDS, Guarantee, guarantee_line
from core.model.result import Reader, Result, frame_from_dict, frame_to_dict, settings, to_json_value
from core.optimal import optimal_counterfactual, verify_recourse
from core.rules.results import LocalRule
from core.ruletext import missing_condition
from core.settings import TIME_LIMIT
from core.shown import BOUND_DIGITS, approx_text, number_text, outcome_text, round_sig
from core.typing import TargetSpec

if TYPE_CHECKING:
    from core.audit.result import Audit
    from core.constraints import Constraints
    from core.intake.workspace import Workspace
    from core.model import TreeEnsemble
    from core.rules.estimator import CounterfactualRules
    from core.schema import FeatureSpec, Schema

__all__ = ["CaseStory", "case_story"]

Section = tuple[str, tuple[str, ...]]   # (heading, paragraphs)
GROUPS = "How the case's group fares"

_STYLE = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:52rem;margin:2rem auto;"
    "padding:0 1rem;line-height:1.5;color:#222}h1{font-size:1.6rem;margin-bottom:.3rem}"
    "h2{font-size:1.15rem;margin-top:1.6rem;break-after:avoid}"
    ".summary{border:1px solid #cfd8e3;background:#f5f8fb;border-radius:6px;padding:.6rem 1.1rem;margin:1rem 0}"
    ".summary h2{margin-top:.4rem}.summary li{margin:.35rem 0}"
    "figure.chart{margin:.8rem 0;break-inside:avoid}figure.chart svg{max-width:100%;height:auto}"
    "figcaption{font-size:.85rem;color:#555}.muted{color:#666;font-size:.9rem}"
    "table.cases{border-collapse:collapse;font-size:.9rem}table.cases td,table.cases th{padding:.25rem .6rem;"
    "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}table.cases tr{break-inside:avoid}"
    "@page{size:A4;margin:14mm}"
    "@media print{body{max-width:none;margin:0;padding:0;font-size:11pt}.summary{break-inside:avoid}"
    "p{orphans:3;widows:3}table.cases{font-size:9pt}table.cases td,table.cases th{word-break:break-word}}"
)


def _bold_html(text: str) -> str:
    """A story paragraph as HTML: escaped, its ``**bold**`` runs as <strong>."""
    parts = html.escape(text).split("**")
    if len(parts) % 2 == 0:                      # unpaired markers: nothing is bold
        return html.escape(text.replace("**", ""))
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))


def _cell(v: Any) -> str:
    """A table cell as shown: a number as :func:`core.shown.number_text` writes it
    (integers as integers, thousands grouped, missing as "missing"), text as is."""
    if v is None or isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return number_text(v)
    return str(v)


@dataclass(frozen=True, eq=False)
class CaseStory(Result):
    """``sections``: (heading, paragraphs) in reading order; ``table``: the row and
    its counterfactual in the raw columns (rows "this case" and "counterfactual"),
    as values; ``facts``: the row, target, prediction, the counterfactual's result
    (and the columns changed, the local rule when told); ``summary``: the story in a
    few sentences (the HTML opens with them); ``figure``: the key figure (inline SVG
    markup; empty when there is none); ``params``, ``elapsed``, ``guarantee``: the
    result shape (module docstring)."""

    kind: ClassVar[str] = "case_story"
    what: ClassVar[str] = "case story"

    row: int
    title: str
    sections: tuple[Section, ...]
    table: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)
    summary: tuple[str, ...] = ()
    figure: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: story_guarantee of the facts

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if self.guarantee is None:
            object.__setattr__(self, "guarantee", story_guarantee(
                self.facts.get("counterfactual"), self.params.get("model_kind") == "tree_ensemble",
                "rule" in self.facts, bool(self.params.get("audit"))))

    def _body(self) -> dict[str, Any]:
        facts = {k: (v.to_dict() if isinstance(v, Result) else to_json_value(v)) for k, v in self.facts.items()}
        return {"row": int(self.row), "title": self.title, "sections": [[h, list(p)] for h, p in self.sections],
                "table": frame_to_dict(self.table), "facts": facts, "summary": list(self.summary),
                "figure": self.figure}

    @classmethod
    def _from_body(cls, r: Reader) -> "CaseStory":
        facts = dict(r.get("facts"))
        if isinstance(facts.get("counterfactual"), dict):
            facts["counterfactual"] = CounterfactualResult.from_dict(facts["counterfactual"])
        if isinstance(facts.get("rule"), dict):
            facts["rule"] = LocalRule.from_dict(facts["rule"])
        if isinstance(facts.get("target"), list):               # a regressor's (lo, hi)
            facts["target"] = tuple(facts["target"])
        return cls(row=int(r.get("row")), title=str(r.get("title")),
                   sections=tuple((str(h), tuple(str(p) for p in ps)) for h, ps in r.get("sections")),
                   table=frame_from_dict(r.get("table")), facts=facts,
                   summary=tuple(str(t) for t in r.get("summary")), figure=str(r.get("figure")),
                   params=dict(r.get("params")), elapsed=r.number("elapsed"),
                   guarantee=Guarantee.from_dict(r.get("guarantee")))

    def shown_table(self) -> pd.DataFrame:
        """:attr:`table` as text, each cell as the story writes it (8,256, not 8256.0;
        20, not 20.0): the same in the page and in the HTML, and safe for any table widget."""
        return self.table.apply(lambda col: col.map(_cell)).astype(str)

    def to_markdown(self) -> str:
        out = [f"## {self.title}", guarantee_line(self.guarantee, "this story")]
        for head, paras in self.sections:
            out += [f"### {head}", *paras]
        return "\n\n".join(out)

    def to_html(self) -> str:
        esc = html.escape
        body = [f"<h1>{esc(self.title)}</h1>", f'<p class="guarantee">{esc(guarantee_line(self.guarantee, "this story"))}</p>']
        if self.summary:
            body.append('<section class="summary"><h2>In brief</h2><ul>'
                        + "".join(f"<li>{_bold_html(s)}</li>" for s in self.summary) + "</ul>"
                        + self.figure + "</section>")
        for head, paras in self.sections:
            body.append(f"<h2>{esc(head)}</h2>")
            body += [f"<p>{_bold_html(p)}</p>" for p in paras]
        body.append("<h2>The case and its counterfactual</h2>")
        lines = self.shown_table().T           # one line per column: long tables fit a printed page
        lines.index.name = "column"
        body.append(lines.reset_index().to_html(border=0, classes="cases", index=False, escape=True))
        body.append('<p class="muted">Written by Counterfactual Atlas. Costs measure each change against the '
                    "feature's range (0.1: a tenth of the range of one feature).</p>")
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                f"<title>{esc(self.title)}</title><style>{_STYLE}</style></head><body>"
                + "".join(body) + "</body></html>")


def story_guarantee(res: CounterfactualResult | None, exact_model: bool, rule: bool, audit: bool) -> Guarantee:
    """What holds for a whole story: the counterfactual's guarantee (``res``'s), or
    ``estimated`` when a rule or an audit's figures are told (estimates from data,
    whatever the counterfactual's); the note says what each part is. ``exact_model``:
    the region is read off the model itself (a tree ensemble), not off a surrogate."""
    cf = res.guarantee if isinstance(res, CounterfactualResult) else Guarantee("not_found")
    told = [w for w, on in (("the local rule's probabilities", rule), ("the audit's group figures", audit)) if on]
    region = f"The region the case sits in is exact on {'the model' if exact_model else 'its surrogate'}."
    estimates = f" {' and '.join(told).capitalize()} are estimated from the data." if told else ""
    if not told or GUARANTEE_KINDS.index(cf.kind) >= GUARANTEE_KINDS.index("estimated"):   # already the weaker
        return Guarantee(cf.kind, cf.model_kind, gap=cf.gap, bound=cf.bound, surrogate_fidelity=cf.surrogate_fidelity,
                         boundary_fidelity=cf.boundary_fidelity, note=f"{cf.note} {region}{estimates}".strip())
    return Guarantee("estimated", cf.model_kind, note=f"{estimates.strip()} The smallest change: {cf.text()} {region}")


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


def _inward(lo: float, hi: float, v: float) -> tuple[float, float]:
    """The bounds of ``lo < x <= hi`` as written: each to :data:`core.shown.BOUND_DIGITS`
    significant digits (more when the case's own value ``v`` would fall outside),
    the lower rounded up and the upper rounded down, so the box written lies inside the
    exact one (every case in it gets the same answer) and reads true of ``v``; a bound
    that is a short number but for float noise (32.650000000000006) is that number."""
    def near(t: float, digits: int, inward: str) -> float:
        if not np.isfinite(t):
            return t
        short = round_sig(t, digits)
        return short if abs(short - t) <= 1e-12 * abs(t) else round_sig(t, digits, inward)

    for digits in range(BOUND_DIGITS, 18):
        a, b = near(lo, digits, "up"), near(hi, digits, "down")
        if a < v <= b:
            return a, b
    return lo, hi


def _one_hot_group(f: FeatureSpec | None) -> str | None:
    """The one-hot group of a schema feature (None: not a one-hot column, or no feature)."""
    return f.group if f is not None and f.kind == "one-hot" and f.group else None


@dataclass(frozen=True)
class _Levels:
    """What the region says of each one-hot group: its one level (``hot``), or the
    levels it excludes (``cold``)."""

    hot: dict[str, str]
    cold: dict[str, list[str]]

    def text(self, group: str, features: list[FeatureSpec]) -> str:
        """The group's one condition: its level, that it is missing (every level
        excluded), or the levels it is not."""
        if group in self.hot:
            return f"{group} = {self.hot[group]}"
        if len(self.cold.get(group, ())) == len([s_ for s_ in features if s_.group == group]):
            return f"{group} missing"
        return f"{group} not {' or '.join(self.cold[group])}"


def _levels(spec: dict[str, FeatureSpec], names: list[str], bounded: list[int], lower: np.ndarray,
            upper: np.ndarray) -> _Levels:
    """The one-hot groups the region bounds, read off their columns' bounds."""
    levels = _Levels({}, {})
    for j in bounded:
        group = _one_hot_group(spec.get(names[j]))
        if group is None:
            continue
        level = names[j].split("=", 1)[1] if "=" in names[j] else names[j]
        if upper[j] < 1:
            levels.cold.setdefault(group, []).append(level)
        elif lower[j] >= 0:
            levels.hot[group] = level
    return levels


def _whole_condition(name: str, kind: str, lo: float, hi: float) -> str:
    """An integer or 0/1 column's bounds ``lo < x <= hi`` as whole values."""
    a = int(np.floor(lo)) + 1 if np.isfinite(lo) else None
    b = int(np.floor(hi)) if np.isfinite(hi) else None
    if kind == "binary":                       # 0/1: a bound on either side is a value
        a, b = (a if a is not None else 0), (b if b is not None else 1)
    if a is not None and b is not None:
        return f"{name} = {number_text(a)}" if a == b else f"{name} from {number_text(a)} to {number_text(b)}"
    if b is not None:
        return f"{name} at most {number_text(b)}"
    return f"{name} at least {number_text(a)}"


def _number_condition(name: str, lo: float, hi: float, exact_lo: float, v: float) -> tuple[str, float, float]:
    """A number's bounds ``lo < x <= hi`` (``exact_lo``: the lower bound before
    LightGBM's zero zone was read as 0) written by :func:`_inward` around the case's
    value ``v``: the condition, and the box it describes (lower, upper)."""
    if lo == 0.0 and exact_lo != 0.0 and not v > 0:      # x > -1e-35: the case's 0 is in, "above 0" is not
        low_word, lo = "at least", 0.0
    else:
        low_word = "above"
        lo, _ = _inward(lo, np.inf, v)
    _, hi = _inward(-np.inf, hi, v)
    box_lo = float(np.nextafter(lo, -np.inf)) if low_word == "at least" else lo
    if np.isfinite(lo) and np.isfinite(hi):
        return f"{name} {low_word} {number_text(lo)} and at most {number_text(hi)}", box_lo, hi
    if np.isfinite(hi):
        return f"{name} at most {number_text(hi)}", box_lo, hi
    return f"{name} {low_word} {number_text(lo)}", box_lo, hi


def _column_condition(f: FeatureSpec | None, name: str, exact: tuple[float, float],
                      v: float) -> tuple[str, float, float]:
    """One column's bounds ``exact`` as a condition true of the case's value ``v``,
    and the box it describes (lower, upper: the exact bounds unless a number's were
    rounded inward)."""
    lo, hi = (0.0 if abs(b) < 1e-30 else b for b in exact)
    state = missing_condition(str(name), lo, hi)
    if state is not None:                      # "income is missing" / "income has a value"
        return state, *exact
    if f is not None and f.kind in ("integer", "binary"):
        return _whole_condition(name, f.kind, lo, hi), *exact
    return _number_condition(name, lo, hi, exact[0], v)


def _conditions(schema: Schema | None, names: list[str], bounded: list[int], lower: np.ndarray, upper: np.ndarray,
                x: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The region's bounds as plain conditions true of the case ``x``: a one-hot column
    as "group is (not) level", whole numbers as values, LightGBM's +-1e-35 zero zone as
    0, other numbers by :func:`_inward`; and the box they describe (lower, upper)."""
    features = [] if schema is None else list(schema.features)
    spec = {f.name: f for f in features}
    out: list[str] = []
    lower, upper = lower.copy(), upper.copy()
    levels = _levels(spec, names, bounded, lower, upper)
    said: set[str] = set()
    for j in bounded:
        f = spec.get(names[j])
        group = _one_hot_group(f)
        if group is None:
            text, lower[j], upper[j] = _column_condition(f, names[j], (lower[j], upper[j]), float(x[j]))
            out.append(text)
        elif group not in said and (group in levels.hot or group in levels.cold):
            said.add(group)                    # one condition per group: its level, or those it is not
            out.append(levels.text(group, features))
    return out, lower, upper


def _columns_text(schema: Schema | None, features: list[str]) -> str:
    """Feature names as the analyst's columns: a one-hot group's columns as its group, once."""
    group = {} if schema is None else {f.name: f.group for f in schema.features if f.kind == "one-hot" and f.group}
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
    schema: Any            # the workspace's schema with the constraints between features in force

    @property
    def ens(self) -> Any:
        return self.ws.ensemble

    @property
    def constraints(self) -> list[tuple[int, str]]:
        """The constraints in force, each by its line as written."""
        return numbered(self.schema.constraints)


def _case(ws: Workspace, row: int, target: Any, fixed: Any, constraints: Any = None) -> _Case:
    """Check the row and resolve it, its raw columns, the features held fixed and the
    constraints in force."""
    X = ws.X.to_numpy(dtype=float)
    if not 0 <= row < len(X):
        raise IndexError(f"Row {row} is outside 0..{len(X) - 1}.")
    x = X[row]
    raw = ws.analyst_view(x[None, :], [row]).iloc[0]
    fixed = [f.name for f in ws.schema.features if f.actionability == "fixed"] if fixed is None else list(fixed)
    schema = in_force(ws.schema, constraints, error=QueryError)
    return _Case(ws, row, target, list(ws.ensemble.feature_names), X, x, raw, fixed, schema)


def _share_text(p: float) -> str:
    """A score as a percentage that never reads 100% or 0% unless it is: 99.6%, not 100%."""
    for digits in range(0, 4):
        text = f"{p:.{digits}%}"
        if (text not in (f"{1:.{digits}%}", f"{0:.{digits}%}")) or p in (0.0, 1.0):
            return text
    return "over 99.99%" if p > 0.5 else "under 0.01%"


def _proba(ws: Any, x: np.ndarray) -> np.ndarray | None:
    """The model's own class probabilities for one row (None when it gives none)."""
    p = ws.predict_proba(x[None, :])
    return None if p is None else p[0]


def _decision(case: _Case) -> tuple[Section, Any]:
    """1. The decision, and the model's prediction."""
    ens, x, target = case.ens, case.x, case.target
    pred = case.ws.predict(x[None, :])[0]
    if ens.is_classifier:
        proba = _proba(case.ws, x)
        p = None if proba is None else float(proba[[str(c) for c in ens.classes].index(str(pred))])
        decision = (f"The model decides **{case.ws.outcome_text(pred)}** for this case"
                    + (f", with a score of {_share_text(p)} for that outcome." if p is not None else "."))
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
    parts, lower, upper = _conditions(case.schema, case.names, bounded, lower, upper, case.x)
    if not parts:
        return ("Where the case sits", ("The model gives the same answer to every input.",))
    same = int(np.all((X > lower) & (X <= upper), axis=1).sum())   # in the box as written
    surrogate = case.ws.surrogate
    itself = ("the linear model's own regions are not boxes" if case.ws.model_kind == "linear"
              else "the model itself was not read exactly")
    whose = ("every tree of the model" if case.ws.model_kind == "tree_ensemble" or surrogate is None else
             f"every tree of the model's surrogate (a tree ensemble that agrees with the model on "
             f"{_share_text(surrogate.fidelity)} of held-out cases; {itself})")
    region = (f"Every case with {', '.join(parts[:8])}{' (and more conditions)' if len(parts) > 8 else ''} gets "
              f"exactly the same answer from {whose}; of the {number_text(len(X))} cases in the "
              f"data, {number_text(same)} {'lies' if same == 1 else 'lie'} in this region.")
    return ("Where the case sits", (region,))


def _smallest_change(case: _Case, time_limit: float) -> tuple[Section, pd.DataFrame, Any, list[str] | None, Any]:
    """3. The smallest change: the section, the table of the case (and its
    counterfactual), the solver's result, the raw columns changed (None: no change found)
    and, for a case proven precluded, the constraints that block it (by line; None: not
    settled in time)."""
    ws, raw, fixed = case.ws, case.raw, case.fixed
    solve_on, extra = ws.query_model()
    res = optimal_counterfactual(solve_on, case.x, case.target, schema=case.schema, fixed=fixed, X_ref=case.X,
                                 time_limit=time_limit, **extra)
    table = pd.DataFrame([raw], index=["this case"])
    if not res.found:
        if res.guarantee is not None and res.guarantee.kind == "infeasible":   # proven: no action helps
            paras, blocking = _precluded(case, time_limit)
            return ("The smallest change", paras), table, res, None, blocking
        cf_text = f"No change of the features that may change gives the outcome asked for: {res.message}"
        return ("The smallest change", (cf_text,)), table, res, None, None
    cf_raw = ws.analyst_view(np.asarray(res.x, dtype=float)[None, :], [case.row]).iloc[0]
    changed = [c for c in cf_raw.index if _cell(cf_raw[c]) != _cell(raw[c])]
    steps = "; ".join(f"{c} from {_short(raw[c])} to {_cell(cf_raw[c])}" for c in changed)
    kind = res.guarantee.kind if res.guarantee is not None else ""
    proven = {"proven_optimal": "This is proven to be the smallest such change",
              "valid_on_model": "The model itself was asked and gives the outcome asked for; the change is the "
                                "smallest found through its surrogate, not proven the smallest for the model"
              }.get(kind, "This is the best change found in the time allowed (not proven the smallest)")
    checked = " The original model was asked again and agrees." if res.valid else ""
    cf_text = (f"Changing {steps} gives the outcome asked for. {proven} (cost {approx_text(res.cost, 3)}, with "
               f"each feature measured against its range; fixed: {_columns_text(case.schema, fixed)}).{checked}")
    table = pd.concat([table, pd.DataFrame([cf_raw], index=["counterfactual"])])
    kept = _kept(case, res)
    return ("The smallest change", (cf_text, kept) if kept else (cf_text,)), table, res, changed, None


def _lines_of(case: _Case, texts: Sequence[str]) -> list[tuple[int, str]]:
    """Constraints named by their texts, each with its line as written."""
    line: dict[str, int] = {}
    for n, t in case.constraints:
        line.setdefault(t, n)
    return [(line.get(t, 0), t) for t in texts]


def _kept(case: _Case, res: CounterfactualResult) -> str:
    """The constraints between features the change keeps, and those binding at it ("" with none)."""
    cons = case.constraints
    if not cons:
        return ""
    binding = _lines_of(case, res.binding or ())
    return (f"The change keeps the constraints between features in force: {lines_words(cons)}. "
            + (f"Binding at it (holding with equality): {lines_words(binding)}." if binding else
               "None of them binds at it."))


def _precluded(case: _Case, time_limit: float) -> tuple[tuple[str, ...], list[tuple[int, str]] | None]:
    """A case proven to have no recourse: said, and what blocks it (the smallest set of
    constraints under which it stays precluded, :func:`core.optimal.verify_recourse`):
    the paragraphs, and the blocking constraints by line (None: not settled in time)."""
    want = case.ws.outcome_text(case.target) if case.ens.is_classifier else "the outcome asked for"
    if not case.constraints:
        return (f"This case has no recourse: no change of the features that may change gets {want} (proven; fixed: "
                f"{_columns_text(case.schema, case.fixed)}).",), []
    first = (f"This case has no recourse under the constraints between features: no change that keeps them gets "
             f"{want} (proven).")
    solve_on, _ = case.ws.query_model()
    check = verify_recourse(solve_on, case.x, case.target, schema=case.schema, fixed=case.fixed,
                            time_limit=time_limit)
    if check.blocking is None:
        why = ("Which constraints block it was not settled within the time limit; the constraints in force are "
               f"{lines_words(case.constraints)}.")
    elif not check.blocking:
        why = ("No constraint is needed to block it: the model and the features' own settings (fixed: "
               f"{_columns_text(case.schema, case.fixed)}; ranges) leave no change that gets {want}.")
    else:
        blocking = _lines_of(case, check.blocking)
        why = f"What blocks it: {lines_words(blocking)}: " + (
            f"this constraint alone leaves no change that gets {want}." if len(blocking) == 1 else
            f"together these constraints leave no change that gets {want}, and with any one of them left out the "
            "others of this set no longer do.")
    return (first, why), None if check.blocking is None else _lines_of(case, check.blocking)


def _how_many(share: float) -> str:
    """For how many cases a rule speaks, in words that match the share: "few" only when few."""
    if share < 0.25:
        return "few of them"
    if share < 0.5:
        return "fewer than half of them"
    return "many of them, but not as many as asked"


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
        text += (f" Caveat: no rule reaches the rule search's level π_C ({rules.pi_c:.2f}); this is the best one "
                 "found, so it is less sure.")
    if weak_set:
        text += (f" Caveat: changing only these features gives the outcome for {rule.cdp:.0%} of cases like this "
                 f"one (below the rule search's level π, {rules.pi:.0%}), so the rule speaks for "
                 f"{_how_many(rule.cdp)}; read "
                 "it as a hint, and the smallest change above as the answer for this case.")
    return ("A rule for cases like this one", (text,)), rule


def _group_name(attr: str, label: str) -> str:
    """``sex = 1``; a numeric attribute's quartile bin reads ``age in (30, 45]``."""
    return f"{attr} in {label}" if label[:1] in "[(" else f"{attr} = {label}"


def _attributes(case: _Case, audit: Any) -> dict[str, list[int] | None]:
    """The audit's protected attributes -> their features in this model (None: not found)."""
    chosen = (audit.meta.get("parameters") or {}).get("protected") or {}
    out: dict[str, list[int] | None] = {}
    for attr in sorted({str(a) for a in audit.groups["attribute"]} | set(chosen)):
        cols = chosen.get(attr)
        out[attr] = [case.names.index(c) for c in cols] if cols and all(c in case.names for c in cols) else None
    return out


def _group_label(case: _Case, audit: Any, attr: str, cols: list[int] | None) -> str | None:
    """The case's group of ``attr``: as the audit labelled it when it audited the case,
    otherwise as the audit labels every row of the data (:func:`core.audit.stats.group_labels`:
    a one-hot or categorical column's level, a value, or a quartile bin of the same data)."""
    rows, col = audit.rows, f"group:{attr}"
    if "row" in rows and col in rows:
        hit = rows.loc[rows["row"] == case.row, col]
        if len(hit):
            return str(hit.iloc[0])
    if cols is None:
        return None
    return str(group_labels(case.X, case.names, cols, attr)[case.row])


def _value_text(metric: str, v: float) -> str:
    return _share_text(v) if metric in SHARES else approx_text(v, 3)


def _diff_text(metric: str, d: float) -> str:
    return f"{approx_text(100 * d, 3)} points" if metric in SHARES else approx_text(d, 3)


def _gap_sentence(t: pd.Series, attr: str, label: str) -> str:
    """One comparison of the audit told from the side of the group ``label``, whichever
    of the two is the reference: who is worse off, on what, by how much, how sure."""
    mine = str(t["group"]) == label
    other = str(t["reference"] if mine else t["group"])
    a, b = (t["group_value"], t["reference_value"]) if mine else (t["reference_value"], t["group_value"])
    gap, lo, hi = (t["gap"], t["gap_lo"], t["gap_hi"]) if mine else (-t["gap"], -t["gap_hi"], -t["gap_lo"])
    key = str(t["metric"])
    m = METRICS[key]
    who, them = _group_name(attr, label), _group_name(attr, other)
    how = (f"{'higher' if gap > 0 else 'lower'} by {_diff_text(key, abs(gap))}" if gap != 0 else "no difference")
    sure = (f"95% interval of the difference {_diff_text(key, lo)} to {_diff_text(key, hi)}; permutation "
            f"p = {approx_text(t['p_value'], 2)}, Holm-adjusted p = {approx_text(t['p_holm'], 2)}")
    if bool(t["significant"]):
        worse = gap < 0 if m.higher_is_better else gap > 0
        return (f"**{who} is {'worse' if worse else 'better'} off than {them} on the {m.label}**: "
                f"{_value_text(key, a)} against {_value_text(key, b)} ({how}; {sure}), significant after "
                "correcting for the number of tests.")
    return (f"On the {m.label}, {who} has {_value_text(key, a)} against {_value_text(key, b)} for {them} ({how}; "
            f"{sure}), not significant after correcting for the number of tests.")


def _recourse_paragraph(attr: str, who: str, g: pd.Series) -> str:
    """How often group ``who`` of ``attr`` (its row ``g`` of the audit's groups) has a
    recourse, at what cost, how many of its cases are precluded, and whether it is the
    reference."""
    cost = (f", at a mean cost of {approx_text(g['cost'], 3)} (median {approx_text(g['cost_median'], 3)})"
            if "cost" in g and np.isfinite(g["cost"]) else "")
    first = (f"In the audit, the group {who} ({number_text(int(g['rows']))} audited cases) has a recourse for "
             f"{_share_text(float(g['feasible']))} of its cases{cost}.")
    if "precluded" in g and np.isfinite(g["precluded"]) and g["precluded"] > 0:
        first += (f" For {_share_text(float(g['precluded']))} of its cases it is proven that no change under the "
                  "constraints between features gets the outcome: they are precluded.")
    if bool(g.get("reference", False)):
        first += (f" It is the largest group of {attr}, so the audit compares the other groups with it; each "
                  "comparison is told here from this group's side.")
    return first


def _group_tests(tests: pd.DataFrame, attr: str, label: str) -> pd.DataFrame:
    """The audit's comparisons of ``attr`` with group ``label`` on either side."""
    if not len(tests):
        return tests
    return tests[(tests["attribute"].astype(str) == attr) & ((tests["group"].astype(str) == label)
                                                             | (tests["reference"].astype(str) == label))]


def _fares(audit: Any, attr: str, label: str, g: pd.Series) -> tuple[list[str], str]:
    """How group ``attr = label`` (its row ``g`` of the audit's groups) fares: paragraphs,
    and the headline for the summary (its most significant gap, or that there is none)."""
    who = _group_name(attr, label)
    tests = _group_tests(audit.tests, attr, label)
    sig = tests[tests["significant"].astype(bool)].sort_values("p_holm") if len(tests) else tests
    paras = [_recourse_paragraph(attr, who, g)] + [_gap_sentence(t, attr, label) for _, t in sig.iterrows()]
    if len(sig):
        return paras, paras[1]
    if not len(tests):
        none = (f"The audit compared no other group with {who}: a comparison needs at least two audited cases "
                "with a recourse in each group.")
        return paras + [none], none
    none = (f"No gap between {who} and another group of {attr} is significant after correcting for the "
            f"{number_text(len(audit.tests))} tests of the audit.")
    costs = [_gap_sentence(t, attr, label) for _, t in tests[tests["metric"] == "cost"].iterrows()]
    return paras + [" ".join([none, *costs])], none


def _cost_figure(audit: Any, attr: str, label: str) -> str:
    """The audit's mean recourse cost per group of ``attr`` with its interval, the case's group marked."""
    g = audit.groups[audit.groups["attribute"].astype(str) == attr]
    if not len(g) or "cost" not in g:
        return ""
    return interval_chart_svg(
        [f"{_group_name(attr, str(v))} (n = {number_text(int(n))})" for v, n in zip(g["group"], g["rows"])],
        g["cost"], g["cost_lo"], g["cost_hi"], highlight=[str(v) == label for v in g["group"]],
        title=f"Mean recourse cost per group of {attr} in the audit, with 95% bootstrap intervals (this case's "
              "group in red)", axis="mean recourse cost (each change measured against its feature's range)")


def _no_audit(case: _Case) -> str:
    """Why the story tells no group without an audit: the case's protected attributes
    (or that none is marked protected)."""
    group_cols = sorted({(f.group or f.name) for f in case.schema.features if f.protected})
    if not group_cols:
        return ("No column is marked protected in the feature settings, so the story has no group to "
                "tell. Mark one on the Data & model page and run the fairness audit.")
    values = ", ".join(f"{c} = {_short(case.raw[c])}" for c in group_cols if c in case.raw.index)
    return (f"The case's protected attributes: {values or ', '.join(group_cols)}. No fairness audit "
            "of this data was given, so how its group fares is not told; run the fairness audit to "
            "include it.")


def _attribute_told(case: _Case, audit: Any, attr: str, cols: list[int] | None) -> tuple[list[str], str | None, str]:
    """How the case's group of one attribute fares: paragraphs, the headline for the
    summary (None: none), and the cost figure (SVG markup, or "")."""
    label = _group_label(case, audit, attr, cols)
    if label is None:
        return [f"The audit's attribute {attr} is not among this model's features, so the story cannot "
                "place the case in one of its groups."], None, ""
    g = audit.groups[(audit.groups["attribute"].astype(str) == attr) & (audit.groups["group"].astype(str) == label)]
    if g.empty:
        text = (f"The audit has no case of the group {_group_name(attr, label)}: it audited cases decided "
                "unfavourably and none of them is in this group, so it says nothing about how the group fares.")
        return [text], text, ""
    told, head = _fares(audit, attr, label, g.iloc[0])
    return told, head, _cost_figure(audit, attr, label)


def _groups(case: _Case, audit: Any) -> tuple[Section, list[str], str]:
    """5. How the case's groups fare in the audit (or why the story cannot tell): the
    section, its headlines for the summary, and its figure (SVG markup, or "")."""
    if audit is None:
        return (GROUPS, (_no_audit(case),)), [], ""
    if not len(audit.groups):
        text = "The audit has no per-group results to tell (none of its groups had an audited case)."
        return (GROUPS, (text,)), [text], ""
    paras: list[str] = []
    heads: list[str] = []
    figures: list[str] = []
    asked = (audit.meta.get("parameters") or {}).get("target")
    if case.ens.is_classifier and asked is not None and str(asked) != outcome_text(case.target):
        paras.append(f"The audit measured the recourse towards {case.ws.outcome_text(asked)} of the cases decided "
                     f"otherwise; this story asks for {case.ws.outcome_text(case.target)}.")
    for attr, cols in _attributes(case, audit).items():
        told, head, figure = _attribute_told(case, audit, attr, cols)
        paras += told
        heads += [head] if head is not None else []
        figures.append(figure)
    return (GROUPS, tuple(paras)), heads, "".join(figures)


def case_story(ws: Workspace, row: int, target: TargetSpec, *, time_limit: float = TIME_LIMIT,
               rules: CounterfactualRules | None = None, audit: Audit | None = None,
               fixed: Sequence[str] | None = None,
               constraints: Iterable[str] | str | Constraints | None = None) -> CaseStory:
    """Tell the story of row ``row`` of workspace ``ws`` for ``target`` (a class, or
    ``(lo, hi)`` for a regressor). ``rules``: a fitted CounterfactualRules (its
    local rule is told); ``audit``: a fairness Audit on this workspace (the row's
    groups are told); ``fixed``: feature names that may not change (default: the
    schema's fixed features); ``constraints``: constraints between features (texts of
    :mod:`core.constraints`, or parsed; default None: the schema's own) the change keeps.
    A case no change under them helps is told as such, with what blocks it (the
    constraints by their lines)."""
    t0 = time.perf_counter()
    case = _case(ws, row, target, fixed, constraints)
    decision, pred = _decision(case)
    where = _where(case)
    change, table, res, changed, blocking = _smallest_change(case, time_limit)
    sections = [decision, where, change]
    facts: dict[str, Any] = {"row": row, "target": target, "prediction": pred, "counterfactual": res,
                             **_change_facts(res, changed, blocking)}
    if rules is not None:
        told, rule = _rule(case, rules)
        sections.append(told)
        if rule is not None:
            facts["rule"] = rule
    groups, heads, figure = _groups(case, audit)
    sections.append(groups)
    said = [_first_sentence(change[1][0])] + ([change[1][1]] if facts.get("precluded") and len(change[1]) > 1 else [])
    summary = [decision[1][0], _model_sentence(ws), *said, guarantee_line(res.guarantee, "this change"), *heads]
    title = (f"Case {row}: {case.ws.outcome_text(pred)} → {case.ws.outcome_text(target)}" if case.ens.is_classifier
             else f"Case {row}")
    params = {"row": row, "target": target, "time_limit": time_limit, "fixed": case.fixed,
              "model_kind": ws.model_kind, "rules": rules is not None, "audit": audit is not None,
              "constraints": [t for _, t in case.constraints]}
    return CaseStory(row=row, title=title, sections=tuple(sections), table=table, facts=facts,
                     summary=tuple(summary), figure=figure, params=params, elapsed=time.perf_counter() - t0)


def _change_facts(res: CounterfactualResult, changed: list[str] | None,
                  blocking: list[tuple[int, str]] | None) -> dict[str, Any]:
    """The facts of the smallest change beyond its result: the columns changed, and for
    a case proven precluded, that it is and the constraints that block it."""
    facts: dict[str, Any] = {}
    if changed is not None:
        facts["changed"] = changed
    if res.guarantee is not None and res.guarantee.kind == "infeasible":
        facts["precluded"] = True
        facts["blocking"] = None if blocking is None else [{"line": n, "text": t} for n, t in blocking]
    return facts


def _model_sentence(ws: Workspace) -> str:
    """Which model the story is about, and how it is read (exactly, or through a surrogate)."""
    return f"The model: {ws.own_model.source or 'the model loaded'}, {ws.kind_text}."


def _first_sentence(text: str) -> str:
    """A paragraph's first sentence (up to ". " before a capital letter)."""
    return re.split(r"(?<=[.:])\s+(?=[A-Z])", text, maxsplit=1)[0]
