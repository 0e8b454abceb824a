"""What counterfactual rules return: boxes, local and regional rules, the levels
of a query, and the paper's metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from core.jsonable import finite_or_none, plain
from core.model import box as model_box
from core.rules.filters import parse_filter
from core.ruletext import rule_text


@dataclass(frozen=True)
class Box(model_box.Box):
    """One rule on the features of ``S``: ``lower < x <= upper``; +-inf elsewhere."""

    crp: float
    n_cells: int


@dataclass(frozen=True)
class LocalRule:
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
    """

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
    time: float = 0.0
    below_pi_c: bool = False
    note: str = ""

    @property
    def constrained(self) -> tuple[int, ...]:
        """The features of S the rule bounds (the others may keep any value)."""
        return tuple(j for j in self.features if np.isfinite(self.lower[j]) or np.isfinite(self.upper[j]))

    def contains(self, X: np.ndarray) -> np.ndarray:
        """Rows whose S-values satisfy the rule (other features ignored)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return np.all((X > self.lower) & (X <= self.upper), axis=1)

    def to_dict(self, names: Sequence[str],
                conditions: Callable[[np.ndarray, np.ndarray, Sequence[int]], list[dict[str, Any]]] | None = None
                ) -> dict[str, Any]:
        """JSON-able rule, nested (alternatives as objects, never as text). With
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


@dataclass(frozen=True)
class RegionalRule:
    """A regional counterfactual rule for the box ``region_lower < x <= region_upper``.

    coverage : share of the fitted rows inside the region; n_rows their count.
    The rule fields are those of :class:`LocalRule`; ``features`` is empty and
    ``note`` says why when no rule was found.
    """

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

    @property
    def found(self) -> bool:
        return self.lower is not None

    def region_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        cols = [j for j in range(len(self.region_lower))
                if np.isfinite(self.region_lower[j]) or np.isfinite(self.region_upper[j])]
        return rule_text(cols, self.region_lower, self.region_upper, names, groups) or "all rows"

    def to_text(self, names: Sequence[str], groups: Sequence[Sequence[int]] = ()) -> str:
        return rule_text(self.features, self.lower, self.upper, names, groups) if self.found else ""


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
