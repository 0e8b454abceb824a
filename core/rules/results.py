"""What counterfactual rules return: boxes, local and regional rules, the levels
of a query, and the paper's metrics.

A local or a regional rule is a :class:`core.model.result.Result`: its ``params``
(the query's target, levels and actionability), ``elapsed`` (the seconds of its
search) and ``guarantee`` (``estimated``: CDP and CRP are estimates of the
random-forest surrogate on the rows it was fitted on), and ``to_json`` /
``from_json`` (kinds ``"local_rule"`` and ``"regional_rule"``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Sequence

import numpy as np

from core.jsonable import finite_or_none, plain
from core.model import box as model_box
from core.model.guarantee import Guarantee
from core.model.result import Reader, Result, Writer, older_name, settings
from core.rules.filters import parse_filter
from core.ruletext import rule_text


class Bounded(Protocol):
    """What a rule query reads of a rule: its bounds ``lower < x <= upper`` (a
    :class:`LocalRule`, a :class:`Box`, a T-CREx rule)."""

    @property
    def lower(self) -> np.ndarray: ...

    @property
    def upper(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Box(model_box.Box):
    """One rule on the features of ``S``: ``lower < x <= upper``; +-inf elsewhere."""

    crp: float
    n_cells: int


def rule_guarantee(params: dict[str, Any], checks: dict[str, Any] | None = None) -> Guarantee:
    """What a counterfactual rule guarantees: its CDP and CRP are estimates of the
    surrogate forest on the rows it was fitted on (``params``' ``n_rows`` and
    ``fidelity``, when given). With ``checks`` (:func:`edge_checks` of rules checked on the
    model, ``params["checked_on"]`` its kind) it says what the model itself accepted, and
    is ``valid_on_model`` when the model accepted every move checked; otherwise the rule
    is not checked on the model itself."""
    n, fid = params.get("n_rows"), params.get("fidelity")
    rows = f"the {n:,} rows" if isinstance(n, int) else "the rows"
    agree = (f" (it reproduces the model on {fid:.1%} of them)" if isinstance(fid, float) and 0 <= fid <= 1
             and not params.get("regression") else "")
    note = f"CDP and CRP are estimated by a random-forest surrogate of the model on {rows} it was fitted on{agree}"
    kind = params.get("checked_on")
    if kind is None or checks is None:
        return Guarantee("estimated", note=note + "; the rule is not checked on the model itself.")
    moved, ok = int(checks["edge_rows"]), int(checks["edge_ok"])
    words = (f"; applied at its edge to the {moved:,} row{'s' * (moved != 1)} lacking the target, the rule is accepted "
             f"by the model itself for {ok:,} ({ok / moved:.1%})" if moved else
             "; no row lacking the target was there to move, so no move was checked on the model")
    if checks.get("crp_rows"):
        words += (f"; with the data's values of its features inside it and the row's other values, the model gives "
                  f"the target for {checks['crp']:.1%} of {int(checks['crp_rows']):,} points")
    return Guarantee("valid_on_model" if moved and ok == moved else "estimated", kind, note=note + words + ".")


def edge_checks(rules: Sequence[Any]) -> dict[str, Any]:
    """The checks on the model of one or more rules, pooled: rows moved to the rules' edges
    and how many the model accepted (and, for one local rule, its CRP on the model)."""
    moved = sum(int(r.edge_rows) for r in rules)
    ok = sum(int(round(r.edge_accepted * r.edge_rows)) for r in rules if r.edge_rows)
    out: dict[str, Any] = {"edge_rows": moved, "edge_ok": ok}
    crp_rows = int(getattr(rules[0], "model_crp_rows", 0)) if len(rules) == 1 else 0
    if crp_rows:
        out.update(crp=float(rules[0].model_crp), crp_rows=crp_rows)
    return out


def rules_guarantee(rules: Sequence[Any]) -> Guarantee:
    """One guarantee for a table of regional rules (a page's table, its CSV): the checks of
    every rule pooled (:func:`edge_checks`)."""
    found = [r for r in rules if getattr(r, "found", True)]     # a sub-population with no rule moves no row
    if not found:
        return Guarantee("not_found", note="No rule was found" + (
            f" for any of the {len(rules)} sub-populations (each one's note says why)" if rules else "") +
            ", so nothing is claimed or checked on the model.")
    return rule_guarantee(found[0].params, edge_checks(found) if "checked_on" in found[0].params else None)


def _target(v: Any) -> Any:
    """A target as read back from JSON: a list (a pair, an interval) as a tuple."""
    return tuple(_target(t) for t in v) if isinstance(v, list) else v


def _boxes_out(boxes: Sequence[Box]) -> list[dict[str, Any]]:
    return [Writer().array("lower", b.lower, -math.inf).array("upper", b.upper, math.inf).number("crp", b.crp)
            .value("n_cells", b.n_cells).done() for b in boxes]


def _boxes_in(items: Sequence[Any]) -> tuple[Box, ...]:
    return tuple(Box(q.array("lower", -math.inf), q.array("upper", math.inf), q.number("crp"), int(q.get("n_cells")))
                 for q in (Reader(d, "rule box") for d in items))


@dataclass(frozen=True, eq=False)
class LocalRule(Result):
    """A local counterfactual rule for one row.

    features : column indices of S (the minimal divergent explanation).
    lower, upper : float arrays of length n_features, -inf / +inf outside S.
    cdp : CDP of S for the row; crp : CRP of the rule (surrogate estimates).
    divergent : False when no subset of the top_k features reached ``pi``
        (S is then the subset with the highest CDP).
    alternatives : other rules (disconnected parts of the possible leaves).
    divergent_sets : every minimal divergent explanation found, with its CDP.
    below_pi_c : no possible region reached the estimator's pi_c; the rule is the
        possible cell with the highest CRP (its ``crp`` says how likely it works).
    note : when below pi_c, why: the best CRP any set of the changeable features
        reaches, and the fixed features reaching pi_c would need, if any.
    edge_rows, edge_accepted : when checked on the model (``CounterfactualRules.fit(...,
        model=)``): 1 when the row lacks the target, and whether the model accepts the row
        moved into the rule at its edge (:mod:`core.rules.onmodel`; NaN: not checked).
    model_crp, model_crp_rows : the model's own share of the target over points made of the
        row with the values of S taken from the fitted rows that lie in the rule (NaN, 0:
        not checked); under constraints between features, only the points that keep them.
    unreachable_cells : under constraints between features (``params["constraints"]``), the
        possible regions left out because the row cannot reach them under those constraints
        with the other features kept (:mod:`core.rules.reach`); the rule and its alternatives
        are all reachable.
    """

    kind: ClassVar[str] = "local_rule"
    what: ClassVar[str] = "local counterfactual rule"
    old_kinds: ClassVar[tuple[str, ...]] = ("",)     # written with no kind of its own before

    x: np.ndarray
    target: Any
    features: tuple[int, ...]
    lower: np.ndarray
    upper: np.ndarray
    cdp: float
    crp: float
    divergent: bool
    n_cells: int
    alternatives: tuple[Box, ...] = ()
    divergent_sets: tuple[tuple[tuple[int, ...], float], ...] = ()
    elapsed: float = 0.0
    below_pi_c: bool = False
    note: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: estimated (rule_guarantee)
    edge_rows: int = 0
    edge_accepted: float = math.nan
    model_crp: float = math.nan
    model_crp_rows: int = 0
    unreachable_cells: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if self.guarantee is None:
            object.__setattr__(self, "guarantee", rule_guarantee(self.params))

    time = older_name("time")

    def _body(self) -> dict[str, Any]:
        w = Writer().array("x", self.x).value("target", self.target).value("features", list(self.features))
        w.array("lower", self.lower, -math.inf).array("upper", self.upper, math.inf)
        w.number("cdp", self.cdp).number("crp", self.crp).value("divergent", self.divergent)
        w.value("n_cells", self.n_cells).value("alternatives", _boxes_out(self.alternatives))
        w.value("divergent_sets", [[list(S), float(c)] for S, c in self.divergent_sets])
        w.value("edge_rows", int(self.edge_rows)).number("edge_accepted", self.edge_accepted)
        w.number("model_crp", self.model_crp).value("model_crp_rows", int(self.model_crp_rows))
        w.value("unreachable_cells", int(self.unreachable_cells))
        return w.value("below_pi_c", self.below_pi_c).value("note", self.note).done()

    @classmethod
    def _from_body(cls, r: Reader) -> "LocalRule":
        return cls(x=r.array("x"), target=_target(r.get("target")), features=tuple(int(j) for j in r.get("features")),
                   lower=r.array("lower", -math.inf), upper=r.array("upper", math.inf), cdp=r.number("cdp"),
                   crp=r.number("crp"), divergent=bool(r.get("divergent")), n_cells=int(r.get("n_cells")),
                   alternatives=_boxes_in(r.get("alternatives")),
                   divergent_sets=tuple((tuple(int(j) for j in S), float(c)) for S, c in r.get("divergent_sets")),
                   elapsed=r.number("elapsed"), below_pi_c=bool(r.get("below_pi_c")), note=str(r.get("note")),
                   params=dict(r.get("params")), guarantee=Guarantee.from_dict(r.get("guarantee")),
                   edge_rows=int(r.get("edge_rows", 0)), edge_accepted=r.number("edge_accepted", default=math.nan),
                   model_crp=r.number("model_crp", default=math.nan),
                   model_crp_rows=int(r.get("model_crp_rows", 0)),
                   unreachable_cells=int(r.get("unreachable_cells", 0)))

    @property
    def constrained(self) -> tuple[int, ...]:
        """The features of S the rule bounds (the others may keep any value)."""
        return tuple(j for j in self.features if np.isfinite(self.lower[j]) or np.isfinite(self.upper[j]))

    def contains(self, X: np.ndarray) -> np.ndarray:
        """Rows whose S-values satisfy the rule (other features ignored)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return np.all((X > self.lower) & (X <= self.upper), axis=1)

    def to_dict(self, names: Sequence[str] | None = None,  # type: ignore[override]
                conditions: Callable[[np.ndarray, np.ndarray, Sequence[int]], list[dict[str, Any]]] | None = None
                ) -> dict[str, Any]:
        """Without ``names``: the result (:meth:`core.model.result.Result.to_dict`, read
        back by :meth:`from_dict`). With ``names``: :meth:`record`."""
        return super().to_dict() if names is None else self.record(names, conditions)

    def record(self, names: Sequence[str],
               conditions: Callable[[np.ndarray, np.ndarray, Sequence[int]], list[dict[str, Any]]] | None = None
               ) -> dict[str, Any]:
        """JSON-able view of the rule, nested (alternatives as objects, never as text). With
        ``conditions`` (a box ``(lower, upper, features)`` -> conditions on the
        analyst's columns, e.g. ``functools.partial(core.intake.columns.box_record,
        columns)``) the rule and its alternatives are those conditions (a category
        column as its set of categories, a missing state as ``"missing"``);
        without, intervals ``[lower, upper]`` on the model's features ``names``."""
        def box(lower: np.ndarray, upper: np.ndarray) -> dict[str, Any]:
            if conditions is not None:
                return {"conditions": conditions(lower, upper, self.features)}
            return {"intervals": {names[j]: [finite_or_none(lower[j]), finite_or_none(upper[j])]
                                  for j in self.features}}

        out = {"target": plain(self.target), **box(self.lower, self.upper),
               "cdp": float(self.cdp), "crp": float(self.crp), "divergent": bool(self.divergent),
               "below_pi_c": bool(self.below_pi_c), "note": self.note,
               "alternatives": [{**box(b.lower, b.upper), "crp": float(b.crp)} for b in self.alternatives]}
        if conditions is None:
            out["features"] = [names[j] for j in self.features]
        return out

    def to_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        return rule_text(self.features, self.lower, self.upper, names, groups)


@dataclass(frozen=True, eq=False)
class RegionalRule(Result):
    """A regional counterfactual rule for the box ``region_lower < x <= region_upper``.

    coverage : share of the fitted rows inside the region; n_rows their count.
    The rule fields are those of :class:`LocalRule`; ``features`` is empty and
    ``note`` says why when no rule was found, or that the rule's set falls short of pi (``divergent`` False). ``params``, ``elapsed`` (seconds of
    this region's search) and ``guarantee`` as for :class:`LocalRule`.
    edge_rows, edge_accepted : when checked on the model, the region's fitted rows lacking
    the target moved into the rule at its edge, and the share of them the model accepts;
    under constraints between features, only the rows that can reach the rule, each by its
    least move that keeps them (:mod:`core.rules.reach`).
    unreachable : under constraints between features (``params["constraints"]``), the rules
    found (boxes) that none of the region's fitted rows lacking the target can reach under
    them, the other features kept: dropped, never the rule nor an alternative.
    reachable_rows : under constraints, how many of the region's fitted rows lacking the target
    can reach the rule.
    """

    kind: ClassVar[str] = "regional_rule"
    what: ClassVar[str] = "regional counterfactual rule"

    region_lower: np.ndarray
    region_upper: np.ndarray
    target: Any
    coverage: float
    n_rows: int
    features: tuple[int, ...] = ()
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    cdp: float = 0.0
    crp: float = 0.0
    divergent: bool = False
    alternatives: tuple[Box, ...] = ()
    note: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: estimated (rule_guarantee)
    edge_rows: int = 0
    edge_accepted: float = math.nan
    unreachable: tuple[Box, ...] = ()
    reachable_rows: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if self.guarantee is None:
            object.__setattr__(self, "guarantee", rule_guarantee(self.params))

    def _body(self) -> dict[str, Any]:
        w = Writer().array("region_lower", self.region_lower, -math.inf).array("region_upper", self.region_upper,
                                                                               math.inf)
        w.value("target", self.target).number("coverage", self.coverage).value("n_rows", self.n_rows)
        w.value("features", list(self.features)).array("lower", self.lower, -math.inf)
        w.array("upper", self.upper, math.inf).number("cdp", self.cdp).number("crp", self.crp)
        w.value("divergent", self.divergent).value("alternatives", _boxes_out(self.alternatives))
        w.value("edge_rows", int(self.edge_rows)).number("edge_accepted", self.edge_accepted)
        w.value("unreachable", _boxes_out(self.unreachable)).value("reachable_rows", int(self.reachable_rows))
        return w.value("note", self.note).done()

    @classmethod
    def _from_body(cls, r: Reader) -> "RegionalRule":
        return cls(region_lower=r.array("region_lower", -math.inf), region_upper=r.array("region_upper", math.inf),
                   target=_target(r.get("target")), coverage=r.number("coverage"), n_rows=int(r.get("n_rows")),
                   features=tuple(int(j) for j in r.get("features")), lower=r.array("lower", -math.inf),
                   upper=r.array("upper", math.inf), cdp=r.number("cdp"), crp=r.number("crp"),
                   divergent=bool(r.get("divergent")), alternatives=_boxes_in(r.get("alternatives")),
                   note=str(r.get("note")), params=dict(r.get("params")), elapsed=r.number("elapsed"),
                   guarantee=Guarantee.from_dict(r.get("guarantee")), edge_rows=int(r.get("edge_rows", 0)),
                   edge_accepted=r.number("edge_accepted", default=math.nan),
                   unreachable=_boxes_in(r.get("unreachable", [])), reachable_rows=int(r.get("reachable_rows", 0)))

    @property
    def found(self) -> bool:
        return self.lower is not None

    def region_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        cols = [j for j in range(len(self.region_lower))
                if np.isfinite(self.region_lower[j]) or np.isfinite(self.region_upper[j])]
        return rule_text(cols, self.region_lower, self.region_upper, names, groups) or "all rows"

    def to_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        if not self.found or self.lower is None or self.upper is None:
            return ""
        return rule_text(self.features, self.lower, self.upper, names, groups)


@dataclass(frozen=True)
class RuleLevels:
    """A query's levels: pi (CDP of a divergent set), pi_c (CRP of a rule), and
    the number of most-used features searched (top_k)."""

    pi: float = 0.9
    pi_c: float = 0.9
    top_k: int = 10


def region_from_filter(text: str, feature_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A box from a filter such as ``"Age >= 30 and Income < 5e4"``: ``(lower, upper)``
    with ``lower < x <= upper`` (the grammar and its errors: :mod:`core.rules.filters`)."""
    return parse_filter(text, feature_names)


def rule_metrics(X: np.ndarray, X_cf: np.ndarray, in_target: np.ndarray, inlier: np.ndarray,
                 found: np.ndarray) -> dict[str, float]:
    """The paper's correctness, plausibility, sparsity and coverage.

    X, X_cf : queried rows and their counterfactual samples (rows without a
    rule are ignored except in coverage); in_target : the audited model's
    output of each sample is in Y*; inlier : the Isolation Forest calls it an
    inlier; found : a rule and a sample exist for the row.
    """
    found = np.asarray(found, dtype=bool)
    k = int(found.sum())
    if k == 0:
        return {"correctness": float("nan"), "plausibility": float("nan"), "sparsity": float("nan"),
                "coverage": 0.0, "n": int(len(found))}
    changed = (np.asarray(X)[found] != np.asarray(X_cf)[found]).sum(axis=1)
    return {"correctness": float(np.mean(np.asarray(in_target)[found])),
            "plausibility": float(np.mean(np.asarray(inlier)[found])),
            "sparsity": float(changed.mean()), "coverage": k / len(found), "n": int(len(found))}
