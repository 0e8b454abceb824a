"""T-CREx: counterfactual rules and metarules (Bewley et al., ICML 2024, section 3).

Steps (figure 2 of the paper):

a. a surrogate tree (or forest) on ``(X, f(X))`` with leaves of at least
   ``rho * N`` points; every node, leaf or internal, is a candidate rule
   (a hyperrectangle ``lower < x <= upper``);
b. rules with accuracy ``>= tau`` for the target outputs ``Y*`` (the share of
   the fitting points in the rule whose *model output* is in ``Y*``, eq. 2) are
   valid; the maximal-valid rules are those that are no strict subset of
   another valid rule (eqs. 11-12);
c. the grid: along each feature, every bound of the maximal-valid rules
   (eq. 13); cells are products of consecutive bounds;
d. one prototype per cell and its optimal rule, minimising
   ``cost = changes(x, R) - feasibility(R)`` (eqs. 9-10), ties to the first rule;
e. a CART on the prototypes' grid coordinates, grown to purity, so every
   split lies on a grid bound: its leaves are the metarules;
g. a local explanation is a lookup of ``x`` in the metarule tree.

One-hot categorical features follow appendix A: a rule's bounds on a group
are either one-hot (hot column ``> 0.5``) or multi-cold (cold columns
``<= 0.5``); hot specifications clear the group's cold bounds, all-but-one-cold
becomes one-hot, the subset relation of eq. 12 uses upper bounds of 0.5 on the
cold columns of one-hot rules, and grid cells with two hot columns of one
group (impossible points) are skipped. Regression (section 5.4): ``Y*`` is an
interval of outputs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Sequence

import numpy as np
import pandas as pd

from core.counterfactual import continuous_outputs, output_mask
from core.dot import label as dot_label
from core.errors import DataError, GridTooLargeError, NotFittedError, NoValidRuleError, QueryError
from core.jsonable import plain
from core.model import Guarantee, node_boxes
from core.model.box import Box
from core.model.features import as_table, feature_indices, fit_table, model_outputs
from core.model.guarantee import guarantee_line
from core.model.result import Reader, Result, Writer, export, older_name, settings, to_json_value
from core.rules.onmodel import EdgeSettings, OnModel, edge_points
from core.rules.reach import reach_of
from core.ruletext import conditions
from core.settings import RANDOM_STATE, integer, optional, probability, validated
from core.shown import bound_text, number_text, outcome_text
from core.typing import ArrayLike, FeatureKey, Label, Row, Rows, TargetSpec

if TYPE_CHECKING:
    from core.constraints import Constraints
    from core.schema import Schema

__all__ = ["TCREx", "TCRExResult", "Rule", "Metarule", "NoValidRuleError"]


@dataclass(frozen=True)
class Rule(Box):
    """A counterfactual rule (the box ``lower < x <= upper``), its accuracy and feasibility (eqs. 5-6).

    edge_rows, edge_accepted : when the fit was given the model (``fit(..., model=)``), the
        rows the rule is prescribed to that lack the target, moved into it at its edge
        (:mod:`core.rules.onmodel`; under constraints between features, by the least move
        that keeps them, :mod:`core.rules.reach`), and the share of them the model itself
        accepts (NaN: not checked, or no such row).
    unreachable_rows : under constraints between features, the fitting rows lacking the
        target whose metarule gives them this rule but that cannot reach it under them (the
        rule is dropped for them: they are prescribed the cheapest rule they can reach)."""

    accuracy: float
    feasibility: float
    edge_rows: int = 0
    edge_accepted: float = math.nan
    unreachable_rows: int = 0


@dataclass(frozen=True)
class Metarule(Box):
    """A leaf of the metarule tree: its box and the rule it assigns (eq. 9)."""

    rule: int
    worst_case_changes: int
    node: int


@dataclass(frozen=True, eq=False)
class TCRExResult(Result):
    """What a fitted :class:`TCREx` found, as one result (a :class:`core.model.result.Result`):
    the estimator's ``result_``. :meth:`TCREx.from_result` makes an estimator of it again.

    feature_names, groups : the fitted columns and one-hot groups (column indices).
    target : the target outputs Y* as given (a class, ``"other"``, ``("other", c)``, ``(lo, hi)``).
    rules, metarules : the maximal-valid rules and the metarule tree's leaves.
    metarule_tree : dict of arrays (feature, threshold, left, right, rule).
    grid : the grid bounds per feature; n_cells : grid cells with a prototype.
    params, elapsed : the settings and the seconds of the fit; ``params["constraints"]`` the
        constraints between features in force (their texts), ``params["unreachable_rules"]``
        the rules dropped for every fitting row lacking the target that their metarule gives them.
    guarantee : ``estimated`` (accuracy and feasibility are shares of the fitting rows); when
        fitted with the model (``fit(..., model=)``), of that model's kind, saying what share of
        the rules' moves it accepted (``valid_on_model`` when it accepted all of them).
    """

    kind: ClassVar[str] = "tcrex"
    what: ClassVar[str] = "T-CREx result"

    feature_names: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]
    target: Any
    rules: tuple[Rule, ...]
    metarules: tuple[Metarule, ...]
    metarule_tree: dict[str, np.ndarray]
    grid: tuple[np.ndarray, ...]
    n_cells: int
    params: dict[str, Any]
    elapsed: float
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: estimated on the fitting rows
    schema: Schema | None = None     # under constraints between features: the schema they are read against
    edges: EdgeSettings | None = None     # how a row moves to a rule's edge (kinds, spans, ones in the data)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if self.guarantee is None:
            n = self.params.get("n_rows")
            rows = f"the {n:,} rows" if isinstance(n, int) else "the rows"
            object.__setattr__(self, "guarantee", Guarantee("estimated", note=(
                f"Each rule's accuracy and feasibility are shares of {rows} it was fitted on, with the model's "
                "outputs on them; the metarules assign each region its best rule exactly.")))

    def _body(self) -> dict[str, Any]:
        groups = [list(g) for g in self.groups]

        def text(lower: np.ndarray, upper: np.ndarray) -> str:
            return " and ".join(t for _, t in conditions(lower, upper, list(self.feature_names), groups)[0]) \
                or "anything"

        rules = [Writer().array("lower", r.lower, -np.inf).array("upper", r.upper, np.inf)
                 .number("accuracy", r.accuracy).number("feasibility", r.feasibility)
                 .value("edge_rows", int(r.edge_rows)).number("edge_accepted", r.edge_accepted)
                 .value("unreachable_rows", int(r.unreachable_rows))
                 .value("text", text(r.lower, r.upper)).done() for r in self.rules]
        metas = [Writer().array("lower", m.lower, -np.inf).array("upper", m.upper, np.inf).value("rule", m.rule)
                 .value("worst_case_changes", m.worst_case_changes).value("node", m.node).done()
                 for m in self.metarules]
        tree = Writer()
        for k, a in self.metarule_tree.items():
            tree.array(k, a)
        return {"feature_names": list(self.feature_names), "groups": groups, "target": to_json_value(self.target),
                "rules": rules, "metarules": metas, "metarule_tree": tree.done(),
                "grid": [to_json_value(g) for g in self.grid], "n_cells": int(self.n_cells),
                **({} if self.schema is None else {"schema": self.schema.to_dict()}),
                **({} if self.edges is None else {"edges": {
                    "integral": [bool(v) for v in self.edges.integral], "span": to_json_value(self.edges.span),
                    "ones": to_json_value(self.edges.ones)}})}

    @classmethod
    def _from_body(cls, r: Reader) -> "TCRExResult":
        rules, metas = _read_rules(r), _read_metarules(r)
        t = Reader(r.get("metarule_tree"), "metarule tree")
        tree = {k: t.array(k, dtype=float if k == "threshold" else np.int64)
                for k in ("feature", "threshold", "left", "right", "rule")}
        target = r.get("target")
        schema = r.get("schema", None)
        edges = r.get("edges", None)              # absent: saved before moves were kept
        return cls(tuple(str(n) for n in r.get("feature_names")), tuple(tuple(int(j) for j in g) for g in r.get("groups")),
                   tuple(target) if isinstance(target, list) else target, rules, metas, tree,
                   tuple(np.asarray(g, dtype=float) for g in r.get("grid")), int(r.get("n_cells")),
                   dict(r.get("params")), r.number("elapsed"), Guarantee.from_dict(r.get("guarantee")),
                   None if schema is None else _schema_of(schema),
                   None if edges is None else _read_edges(edges, r.get("groups")))


def _with_edge_checks(rules: list[Rule], rows: list[np.ndarray], ok: np.ndarray) -> list[Rule]:
    """Each rule with its ``edge_rows`` and ``edge_accepted``: ``ok`` holds the model's answers
    for every rule's rows, one rule after the other."""
    starts = np.cumsum([0] + [len(r) for r in rows])
    return [replace(rule, edge_rows=len(r), edge_accepted=float(ok[a:b].mean()) if len(r) else math.nan)
            for rule, r, a, b in zip(rules, rows, starts[:-1], starts[1:])]


def _checked_note(fitted: int, n: int, good: int) -> str:
    """What the rules' check on the model found: ``good`` of the ``n`` moves accepted."""
    note = (f"Each rule's accuracy and feasibility are shares of the {fitted:,} rows it was fitted on, with the "
            "model's outputs on them. ")
    if n:
        return note + (f"Applied at its edge to the {n:,} rows it is prescribed to that lack the target, the rules "
                       f"are accepted by the model itself for {good:,} ({good / n:.1%}); each rule's share is beside "
                       "it.")
    return note + "No row lacking the target is prescribed a rule, so no move was checked on the model."


def _read_rules(r: Reader) -> tuple[Rule, ...]:
    """The rules of a saved result (a rule saved unchecked has no ``edge_rows``)."""
    return tuple(Rule(q.array("lower", -np.inf), q.array("upper", np.inf), q.number("accuracy"),
                      q.number("feasibility"), int(q.get("edge_rows", 0)),     # absent: saved unchecked
                      q.number("edge_accepted", default=math.nan), int(q.get("unreachable_rows", 0)))
                 for q in (Reader(d, "rule") for d in r.get("rules")))


def _read_metarules(r: Reader) -> tuple[Metarule, ...]:
    return tuple(Metarule(q.array("lower", -np.inf), q.array("upper", np.inf), int(q.get("rule")),
                          int(q.get("worst_case_changes")), int(q.get("node")))
                 for q in (Reader(d, "metarule") for d in r.get("metarules")))


def _read_edges(edges: dict[str, Any], groups: Any) -> EdgeSettings:
    """How rows move to a rule's edge, as saved (the one-hot groups of two columns or more)."""
    return EdgeSettings(np.asarray(edges["integral"], dtype=bool), np.asarray(edges["span"], dtype=float),
                        tuple(tuple(int(j) for j in g) for g in groups if len(g) >= 2),
                        np.asarray(edges["ones"], dtype=float))


def _groups(groups: Any, names: list[str]) -> list[list[int]]:
    """One-hot groups as lists of column indices (each given by name or index)."""
    if groups is None:
        return []
    if isinstance(groups, (str, bytes)) or not isinstance(groups, (list, tuple)):
        raise QueryError(f"groups is a list of one-hot groups, each a list of columns (names or indices); got "
                         f"{type(groups).__name__}.")
    return [feature_indices(names, g, error=QueryError, what="groups") for g in groups]


class TCREx:
    """Counterfactual rules and metarules (scikit-learn style estimator).

    Parameters
    ----------
    rho : minimum share of the data in a surrogate leaf (and in a rule).
    tau : minimum accuracy of a valid rule.
    n_trees : 1 for a single surrogate tree, more for a random forest.
    max_cells : refuse grids of more cells than this (step c).
    groups : one-hot groups as lists of features (names or indices; appendix A).
    random_state : for the surrogate.

    Attributes (after ``fit``)
    --------------------------
    rules_ : list of Rule, the maximal-valid rules.
    metarules_ : list of Metarule, the leaves of the metarule tree.
    metarule_tree_ : dict of arrays (feature, threshold, left, right, rule).
    grid_ : list of ndarray, the grid bounds per feature (finite ones).
    n_cells_ : number of grid cells with a prototype.
    result_ : TCRExResult, all of the above as one result (params, elapsed, guarantee, JSON).
    elapsed_ : seconds the fit took (``result_.elapsed``; ``fit_time_``, its older name, reads the
        same and warns).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import TCREx
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(10, max_depth=3, random_state=0).fit(data.data, data.target)
    >>> tc = TCREx(rho=0.05, tau=0.9, random_state=0).fit(data.data, rf.predict(data.data), 1)
    >>> len(tc.rules_) > 0, all(r.accuracy >= 0.9 for r in tc.rules_)
    (True, True)
    """

    fit_time_ = older_name("fit_time_", "elapsed_")

    @validated(QueryError, rho=probability, tau=probability, n_trees=integer(1), max_cells=integer(1),
               random_state=optional(integer(0)))
    def __init__(self, *, rho: float = 0.02, tau: float = 0.9, n_trees: int = 1, max_cells: int = 100_000,
                 groups: Sequence[Sequence[int]] | None = None, random_state: int | None = RANDOM_STATE):
        self.rho = rho
        self.tau = tau
        self.n_trees = n_trees
        self.max_cells = max_cells
        self.groups = groups
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    @validated(QueryError)
    def fit(self, X: Rows, y_model: ArrayLike, target: TargetSpec, feature_names: Sequence[str] | None = None, *,
            fixed: Iterable[FeatureKey] | None = None, increase_only: Iterable[FeatureKey] | None = None,
            decrease_only: Iterable[FeatureKey] | None = None, model: OnModel | None = None,
            schema: Schema | None = None, constraints: Iterable[str] | str | Constraints | None = None) -> "TCREx":
        """Learn the rules and the metarule tree on ``(X, y_model)`` for ``target``.

        ``model`` (keyword-only; :func:`core.rules.onmodel.on_model`, e.g. of a workspace's
        ``query_model()``): the model itself, to check the prescriptions on. Each rule is
        applied at its edge to the rows of ``X`` it is prescribed to that lack the target
        (one batched call of the model for all of them); the share the model accepts is the
        rule's ``edge_accepted``, and the result's guarantee says what kind of model it was
        and how many it accepted. ``schema`` gives the features' kinds and spans for the
        edge (default: read from ``X``).

        ``fixed``, ``increase_only``, ``decrease_only`` (feature names or indices,
        keyword-only): the rules are learnt as without them, but a row is only ever
        prescribed a rule it can reach moving no fixed feature, increase-only features
        only up and decrease-only features only down (the actionability constraints the
        paper's conclusion names as missing, added to eq. 9 as an infinite cost of an
        unreachable rule). A row with no reachable rule is prescribed none: :meth:`explain` gives
        -1 for it. A fixed one-hot column fixes its whole group.

        ``constraints`` (keyword-only): the analyst's constraints between features
        (:mod:`core.constraints`: texts, or a parsed ``Constraints``), read against ``schema``;
        default None: the schema's own. The rules and the metarule tree are learnt as without
        them; a row is prescribed its metarule's rule only when some point of that rule keeps
        every constraint for the row (and the roles above), else the cheapest rule (eq. 9,
        ties to the first) it can reach so, else none (-1): :mod:`core.rules.reach`. Each
        prescription's move (:meth:`moves`) is the least move into the rule that keeps them;
        the rules' checks on the model count only those moves. A rule the metarule tree gives
        to fitting rows lacking the target that none of them can reach is dropped as
        unreachable (``result_.params["unreachable_rules"]``; each rule's ``unreachable_rows``)."""
        t0 = time.perf_counter()
        if not 0 < self.rho <= 1 or not 0 < self.tau <= 1:
            raise QueryError(f"rho and tau must lie in (0, 1]; got rho={self.rho!r}, tau={self.tau!r}.")
        X, names = fit_table(X, feature_names, error=DataError, missing=True)   # NaN: outside every box
        y = model_outputs(y_model, len(X))
        groups = _groups(self.groups, names)
        roles = {role: feature_indices(names, keys, error=QueryError, what=role) for role, keys in
                 (("fixed", fixed), ("increase_only", increase_only), ("decrease_only", decrease_only))}
        self.n_features_in_ = X.shape[1]
        self.feature_names_ = names
        self.target_ = target
        self.groups_ = [g for g in groups if len(g) >= 2]
        self._set_roles(roles, names)
        self._set_reach(X, schema, constraints)
        mask = output_mask(y, target)
        if not mask.any():
            raise NoValidRuleError(f"No fitting point has a model output in the target {_target_text(target)}.")
        self.rules_ = self._maximal_valid_rules(X, y, mask)               # steps a-b
        try:
            self._build_metarules(X.shape[1])                             # steps c-e
            dropped = self._count_unreachable(X, ~mask)
            guarantee = None if model is None else self._check_on_model(X, mask, model, schema)
        except Exception:
            del self.rules_  # never half fitted
            raise
        self.result_ = self._fitted_result(len(X), model, dropped, guarantee, t0)
        self.elapsed_ = self.result_.elapsed
        return self

    def _set_reach(self, X: np.ndarray, schema: Schema | None,
                   constraints: Iterable[str] | str | Constraints | None) -> None:
        """The constraints between features read against the schema (``reach_``), and the edge settings."""
        self.reach_ = reach_of(constraints, schema, self.feature_names_, fixed=self.fixed_,
                               increase_only=self.increase_only_, decrease_only=self.decrease_only_)
        self.schema_ = schema if self.reach_ is not None else None
        self._seen: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        described = schema is not None and len(schema.features) == X.shape[1]
        self._edges = EdgeSettings.of(X, schema if described else None, self.groups_)

    def _fitted_result(self, n: int, model: OnModel | None, dropped: list[str], guarantee: Guarantee | None,
                       t0: float) -> TCRExResult:
        """The fit's result (its time counted from ``t0``), the constraints' note added to its guarantee."""
        names = self.feature_names_
        result = TCRExResult(
            tuple(str(v) for v in names), tuple(tuple(int(j) for j in g) for g in self.groups_), self.target_,
            tuple(self.rules_), tuple(self.metarules_), dict(self.metarule_tree_), tuple(self.grid_), self.n_cells_,
            self._fit_params(n, None if model is None else model.kind, dropped),
            time.perf_counter() - t0, **({} if guarantee is None else {"guarantee": guarantee}), schema=self.schema_,
            edges=self._edges)
        self.result_ = result          # _reach_note reads the params of the result
        if self.reach_ is None:
            return result
        said = result.guarantee
        return replace(result, guarantee=replace(said, note=f"{said.note} {self._reach_note()}"))

    def _set_roles(self, roles: dict[str, list[int]], names: list[str]) -> None:
        """The fitted roles: a fixed one-hot column fixes its whole group, and a feature both
        increase-only and decrease-only is refused (it is fixed)."""
        held = set(roles["fixed"])
        for g in self.groups_:                                           # a category moves as one column
            if held & set(g):
                held |= set(g)
        self.fixed_ = sorted(held)
        self.increase_only_ = [j for j in roles["increase_only"] if j not in held]
        self.decrease_only_ = [j for j in roles["decrease_only"] if j not in held]
        both = sorted(set(self.increase_only_) & set(self.decrease_only_))
        if both:
            raise QueryError(f"{[names[j] for j in both]} are both increase-only and decrease-only; a feature that "
                             "may move neither way is fixed: list it in fixed.")

    def _maximal_valid_rules(self, X: np.ndarray, y: np.ndarray, mask: np.ndarray) -> list[Rule]:
        """Steps a-b: the surrogate's candidate rules, those valid for ``tau`` and ``rho``
        (eq. 2), and of them the maximal ones (eqs. 11-12), in the candidates' order."""
        n, d = X.shape
        lower, upper = self._candidates(X, y, n, d)                      # step a
        lower, upper = self._categorical_fix(lower, upper)
        inside = self._contains(X, lower, upper)
        count = np.count_nonzero(inside, axis=1)
        acc = np.where(count > 0, np.count_nonzero(inside & mask[None, :], axis=1) / np.maximum(count, 1), 0.0)
        feas = count / n
        valid = (acc >= self.tau) & (feas >= self.rho - 1e-12)           # step b, eq. 2
        if not valid.any():
            raise NoValidRuleError(
                f"No rule reaches accuracy {self.tau} with at least {self.rho:.0%} of the data for target "
                f"{_target_text(self.target_)}; lower tau or rho.")
        idx = np.flatnonzero(valid)
        lo_v, hi_v = lower[idx], upper[idx]
        keep = self._maximal(lo_v, hi_v)                                  # eqs. 11-12
        order = idx[keep]
        return [Rule(lower[i].copy(), upper[i].copy(), float(acc[i]), float(feas[i])) for i in order]

    def _fit_params(self, n: int, checked_on: str | None, dropped: list[str]) -> dict[str, Any]:
        """The result's ``params``: the settings, the roles and constraints, what the rules were checked on."""
        names = self.feature_names_
        return {"rho": self.rho, "tau": self.tau, "n_trees": self.n_trees, "max_cells": self.max_cells,
                "groups": [[names[j] for j in g] for g in self.groups_], "random_state": self.random_state,
                "target": self.target_, "n_rows": int(n),
                **{role: [names[j] for j in cols] for role, cols in self._roles().items() if cols},
                **({} if checked_on is None else {"checked_on": checked_on}),
                **({} if self.reach_ is None else {"constraints": self.reach_.texts, "unreachable_rules": dropped})}

    def _count_unreachable(self, X: np.ndarray, lacking: np.ndarray) -> list[str]:
        """Under constraints: each rule's ``unreachable_rows`` (fitting rows lacking the target whose
        metarule gives them the rule but that cannot reach it), and the rules dropped for all of them."""
        if self.reach_ is None:
            return []
        A = X[lacking]
        given = self.metarule_tree_["rule"][self.apply(A)]
        got = self.explain(A)
        lost = (given >= 0) & (got != given)
        counts = np.bincount(given[lost], minlength=len(self.rules_))
        had = np.bincount(given[given >= 0], minlength=len(self.rules_))
        self.rules_ = [replace(r, unreachable_rows=int(c)) for r, c in zip(self.rules_, counts)]
        return [f"R{k}" for k in range(len(self.rules_)) if had[k] and counts[k] == had[k]]

    def _reach_note(self) -> str:
        """What the constraints between features did to the prescriptions, in a sentence."""
        assert self.reach_ is not None
        n = len(self.reach_.cons)
        lost = sum(r.unreachable_rows for r in self.rules_)
        dropped = self.result_.params.get("unreachable_rules", [])
        words = (f"Under the {n} constraint{'s' * (n != 1)} between features, a row is prescribed a rule only when "
                 "some point of it keeps them; ")
        if not lost:
            return words + "every fitting row lacking the target can reach the rule its metarule gives it."
        return words + (f"{lost:,} fitting row{'s' * (lost != 1)} lacking the target cannot reach the rule their "
                        "metarule gives them and are prescribed the cheapest rule they can reach (or none)"
                        + (f"; dropped as unreachable for every such row: {', '.join(dropped)}." if dropped else "."))

    def _check_on_model(self, X: np.ndarray, at_target: np.ndarray, model: OnModel,
                        schema: Schema | None) -> Guarantee:
        """Each rule applied at its edge (:func:`core.rules.onmodel.edge_points`) to the rows
        prescribed it that lack the target, answered by the model in one call; the rules
        get their ``edge_rows`` and ``edge_accepted``, and the guarantee of the whole."""
        if not isinstance(model, OnModel):
            raise QueryError(f"model is the model to check the rules on (core.rules.onmodel.on_model(...)); got "
                             f"{type(model).__name__}.")
        if schema is not None and len(schema.features) != X.shape[1]:
            raise QueryError(f"The schema describes {len(schema.features)} features; X has {X.shape[1]}.")
        assigned, moved = self._prescribe(X)
        rows = [np.flatnonzero((assigned == k) & ~at_target) for k in range(len(self.rules_))]
        Z = np.vstack([X[:0]] + [moved[r] for r in rows])
        ok = model.accepts(Z, self.target_)
        self.rules_ = _with_edge_checks(self.rules_, rows, ok)
        n, good = len(ok), int(ok.sum())
        return Guarantee("valid_on_model" if n and good == n else "estimated", model.kind,
                         note=_checked_note(len(X), n, good))

    @classmethod
    def from_result(cls, result: TCRExResult) -> "TCREx":
        """A fitted estimator of a T-CREx result (e.g. one read back with
        :meth:`TCRExResult.from_json`): its rules, metarules and explanations are the result's."""
        p = result.params
        est = cls(rho=p.get("rho", 0.02), tau=p.get("tau", 0.9), n_trees=p.get("n_trees", 1),
                  max_cells=p.get("max_cells", 100_000), groups=[list(g) for g in result.groups] or None,
                  random_state=p.get("random_state"))
        est.n_features_in_ = len(result.feature_names)
        est.feature_names_ = list(result.feature_names)
        est.target_ = result.target
        est.groups_ = [list(g) for g in result.groups]
        names = list(result.feature_names)
        for role in ("fixed", "increase_only", "decrease_only"):
            setattr(est, role + "_", feature_indices(names, p.get(role), error=QueryError, what=role))
        est._read_reach(result, names)
        est._seen = {}
        est._edges = result.edges if result.edges is not None else EdgeSettings(     # saved without: continuous
            np.zeros(len(names), dtype=bool), np.ones(len(names)), tuple(tuple(g) for g in est.groups_),
            np.zeros(len(names)))
        est.rules_ = list(result.rules)
        est.metarules_ = list(result.metarules)
        est.metarule_tree_ = dict(result.metarule_tree)
        est.grid_ = list(result.grid)
        est.n_cells_ = result.n_cells
        est.result_ = result
        est.elapsed_ = result.elapsed
        return est

    def _read_reach(self, result: TCRExResult, names: list[str]) -> None:
        """The constraints between features a result names, read against its schema (``reach_``)."""
        texts = result.params.get("constraints") or []
        if texts and result.schema is None:
            raise QueryError("This T-CREx result names constraints between features but not the schema they are read "
                             "against; it cannot be read back.")
        self.reach_ = reach_of(texts, result.schema, names, fixed=self.fixed_, increase_only=self.increase_only_,
                               decrease_only=self.decrease_only_) if texts else None
        self.schema_ = result.schema if self.reach_ is not None else None

    def _candidates(self, X, y, n, d):
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        leaf = max(1, math.ceil(self.rho * n))
        regression = continuous_outputs(y)
        if self.n_trees == 1:
            cls = DecisionTreeRegressor if regression else DecisionTreeClassifier
            trees = [cls(min_samples_leaf=leaf, random_state=self.random_state).fit(X, y)]
        else:
            cls = RandomForestRegressor if regression else RandomForestClassifier
            trees = cls(self.n_trees, min_samples_leaf=leaf, random_state=self.random_state).fit(X, y).estimators_
        boxes = [node_boxes(t.tree_.children_left, t.tree_.children_right, t.tree_.feature, t.tree_.threshold, d)
                 for t in trees]
        lower = np.vstack([b[0] for b in boxes])
        upper = np.vstack([b[1] for b in boxes])
        # the same box from different trees is one candidate
        key = np.hstack([lower, upper])
        _, first = np.unique(key, axis=0, return_index=True)
        first = np.sort(first)
        return lower[first], upper[first]

    def _categorical_fix(self, lower, upper):
        """Appendix A: clear cold bounds beside a hot one; all-but-one-cold -> one-hot."""
        for g in self.groups_:
            g = np.asarray(g)
            hot = lower[:, g] >= 0.5 - 1e-12          # column > 0.5 (a split at 0.5 or any threshold in [0,1))
            cold = upper[:, g] < 1.0                   # column <= t < 1: must be 0
            lower[:, g] = np.where(hot, 0.5, -np.inf)
            upper[:, g] = np.where(cold & ~hot.any(axis=1, keepdims=True), 0.5, np.inf)
            one_left = (cold.sum(axis=1) == len(g) - 1) & ~hot.any(axis=1)
            for r in np.flatnonzero(one_left):
                j = g[~cold[r]][0]
                lower[r, g] = -np.inf
                upper[r, g] = np.inf
                lower[r, j] = 0.5
        return lower, upper

    @staticmethod
    def _contains(X: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """``inside[r, i]``: is row ``i`` in box ``r`` (``lower < x <= upper`` on every feature)?

        The same as comparing every row with every bound, but only a box's nontrivial bounds
        are compared, each (feature, bound) once for all boxes: a bound of -inf below or +inf
        above only excludes rows holding a NaN or -inf, which ``ok`` excludes for every box."""
        ok = np.all(X > -np.inf, axis=1)             # NaN > -inf and -inf > -inf are False
        out = np.empty((len(lower), len(X)), dtype=bool)
        cache: dict[tuple[int, bool, float], np.ndarray] = {}
        for r in range(len(lower)):
            m = ok.copy()
            for above, bounds, trivial in ((True, lower[r], -np.inf), (False, upper[r], np.inf)):
                for j in np.flatnonzero(bounds != trivial):
                    key = (int(j), above, float(bounds[j]))
                    c = cache.get(key)
                    if c is None:
                        c = X[:, j] > bounds[j] if above else X[:, j] <= bounds[j]
                        if (len(cache) + 1) * len(X) <= 2**28:   # at most 256 MB of cached comparisons
                            cache[key] = c
                    m &= c
            out[r] = m
        return out

    def _maximal(self, lo, hi):
        """Rules that are no strict subset of another valid rule (eq. 12; appendix A's u-hat)."""
        hi_hat = hi.copy()
        for g in self.groups_:
            g = np.asarray(g)
            one_hot = np.isfinite(lo[:, g]).any(axis=1)
            sub = hi_hat[:, g]
            sub[one_hot] = np.where(np.isfinite(lo[np.ix_(one_hot, g)]), sub[one_hot], 0.5)
            hi_hat[:, g] = sub
        le_lo = np.all(lo[None, :, :] <= lo[:, None, :], axis=2)      # [i, j]: l_j <= l_i
        le_hi = np.all(hi_hat[:, None, :] <= hi_hat[None, :, :], axis=2)  # [i, j]: u_i <= u_j
        same = np.all(lo[:, None, :] == lo[None, :, :], axis=2) & np.all(hi_hat[:, None, :] == hi_hat[None, :, :],
                                                                           axis=2)
        strict_subset = le_lo & le_hi & ~same
        return ~strict_subset.any(axis=1)

    # ------------------------------------------------------------- grid etc.
    def _build_metarules(self, d):
        from sklearn.tree import DecisionTreeClassifier

        R = len(self.rules_)
        L = np.array([r.lower for r in self.rules_])
        U = np.array([r.upper for r in self.rules_])
        feas = np.array([r.feasibility for r in self.rules_])
        grid = []
        for j in range(d):                                             # step c, eq. 13
            b = np.concatenate([L[:, j], U[:, j]])
            grid.append(np.unique(b[np.isfinite(b)]))
        self.grid_ = grid
        sizes = [g.size + 1 for g in grid]
        n_cells = int(np.prod(np.array(sizes, dtype=float)))
        if n_cells > self.max_cells:
            raise GridTooLargeError(
                f"The grid would have {n_cells:,} cells (limit {self.max_cells:,}); raise tau or rho to get "
                "fewer rules, or raise max_cells.")
        # per feature and interval: is the interval inside rule r? (interval k = (g[k-1], g[k]])
        inside = []
        for j in range(d):
            g = grid[j]
            a = np.concatenate([[-np.inf], g])
            b = np.concatenate([g, [np.inf]])
            inside.append((a[:, None] >= L[None, :, j]) & (b[:, None] <= U[None, :, j]))  # (k_j, R)
        cells = np.empty((n_cells, d), dtype=np.int64)  # every combination (no 32-dimension limit)
        rest = np.arange(n_cells, dtype=np.int64)
        for j in range(d - 1, -1, -1):
            cells[:, j] = rest % sizes[j]
            rest //= sizes[j]
        cells = self._possible_cells(cells)                            # appendix A: skip impossible cells
        changes = np.zeros((len(cells), R))
        for j in range(d):
            changes += ~inside[j][cells[:, j]]
        cost = changes - feas[None, :]                                 # eqs. 9-10
        reach = self._reachable(cells, grid, L, U)
        if reach is not None:                                          # an unreachable rule costs infinitely
            cost = np.where(reach, cost, np.inf)
        best = np.argmin(cost, axis=1)                                 # ties: first rule
        if reach is not None:
            best = np.where(reach.any(axis=1), best, -1)               # no rule reachable: none prescribed
        self.n_cells_ = len(cells)
        tree = DecisionTreeClassifier(random_state=0).fit(cells, best)  # step e, to purity on cells
        self._inside = inside
        self._from_sklearn_tree(tree.tree_, cells, best, inside)

    def _roles(self) -> dict[str, list[int]]:
        return {role: list(getattr(self, role + "_", [])) for role in ("fixed", "increase_only", "decrease_only")}

    def _reachable(self, cells, grid, L, U):
        """``reach[c, r]``: can every point of cell ``c`` reach rule ``r`` moving no fixed
        feature, increase-only ones only up, decrease-only ones only down? None when
        nothing is constrained. A cell's interval on feature j is (a, b] between
        consecutive grid bounds, and every rule bound is a grid bound, so the interval
        lies on one side of each bound: a point x reaches (l, u] going up iff x <= u
        (iff b <= u), going down iff x > l (iff a >= l), not moving iff a >= l and b <= u."""
        roles = self._roles()
        if not any(roles.values()):
            return None
        reach = np.ones((len(cells), len(L)), dtype=bool)
        for role, cols in roles.items():
            for j in cols:
                g = grid[j]
                a = np.concatenate([[-np.inf], g])[cells[:, j]][:, None]
                b = np.concatenate([g, [np.inf]])[cells[:, j]][:, None]
                if role != "increase_only":                            # may not go up: x > l already
                    reach &= a >= L[None, :, j]
                if role != "decrease_only":                            # may not go down: x <= u already
                    reach &= b <= U[None, :, j]
        return reach

    def _possible_cells(self, cells):
        if not self.groups_:
            return cells
        ok = np.ones(len(cells), dtype=bool)
        for g in self.groups_:
            hot = np.zeros(len(cells), dtype=int)
            for j in g:
                gj = self.grid_[j]
                if gj.size == 0:
                    continue
                k_half = int(np.searchsorted(gj, 0.5, side="left"))  # cells above 0.5 hold the value 1
                hot += cells[:, j] > k_half
            ok &= hot <= 1
        return cells[ok]

    def _from_sklearn_tree(self, tr, cells, best, inside):
        """Metarule tree with thresholds mapped from grid coordinates to grid bounds."""
        n = tr.node_count
        feat = np.where(tr.children_left < 0, -1, tr.feature).astype(np.int64)
        thr = np.full(n, np.nan)
        for i in np.flatnonzero(feat >= 0):
            k = int(math.floor(tr.threshold[i]))  # cell index <= k  <=>  x <= grid[k]
            thr[i] = self.grid_[feat[i]][k]
        rule = np.full(n, -1)
        leaves = np.flatnonzero(feat < 0)
        rule[leaves] = tr.value[leaves, 0, :].argmax(axis=1)
        classes = np.unique(best)
        rule[leaves] = classes[rule[leaves]]
        self.metarule_tree_ = {"feature": feat, "threshold": thr, "left": tr.children_left.astype(np.int64),
                               "right": tr.children_right.astype(np.int64), "rule": rule}
        d = self.n_features_in_
        lo = np.full((n, d), -np.inf)
        hi = np.full((n, d), np.inf)
        klo = np.zeros((n, d), dtype=int)
        khi = np.array([[g.size for g in self.grid_]] * n)
        for i in range(n):
            left, right = tr.children_left[i], tr.children_right[i]
            if left < 0:
                continue
            f = feat[i]
            k = int(math.floor(tr.threshold[i]))
            for c in (left, right):
                lo[c], hi[c], klo[c], khi[c] = lo[i], hi[i], klo[i], khi[i]
            hi[left, f], khi[left, f] = thr[i], k
            lo[right, f], klo[right, f] = thr[i], k + 1
        metas = []
        for i in leaves:
            r = int(rule[i])
            worst = sum(int(not inside[j][klo[i, j]:khi[i, j] + 1, r].all()) for j in range(d)) if r >= 0 else 0
            metas.append(Metarule(lo[i], hi[i], r, worst, int(i)))
        self.metarules_ = metas

    # --------------------------------------------------------------- explain
    def _check(self, X: Rows) -> np.ndarray:
        if not hasattr(self, "rules_"):
            raise NotFittedError("This TCREx is not fitted yet; call fit first.")
        if isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2 and X.shape[1] == self.n_features_in_:
            return X
        return as_table(X, self.feature_names_, error=DataError, one_row=True, min_rows=0, missing=True,
                        infinite=True)   # read by name, as fitted

    def _rule(self, k: Any) -> int:
        """A rule's index, checked."""
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) \
                or not 0 <= int(k) < len(self.rules_):
            raise QueryError(f"No rule {k!r}: the rules are numbered 0..{len(self.rules_) - 1}.")
        return int(k)

    def apply(self, X: Rows) -> np.ndarray:
        """Metarule-tree leaf (node index) of each row, vectorised."""
        A = self._check(X)
        t = self.metarule_tree_
        node = np.zeros(len(A), dtype=np.int64)
        for _ in range(len(t["feature"])):
            f = t["feature"][node]
            active = f >= 0
            if not active.any():
                break
            rows = np.flatnonzero(active)
            go_left = A[rows, f[rows]] <= t["threshold"][node[rows]]
            node[rows] = np.where(go_left, t["left"][node[rows]], t["right"][node[rows]])
        return node

    def explain(self, X: Rows) -> np.ndarray:
        """Index into ``rules_`` of the optimal rule for each row (step g); -1 for a row
        that can reach no rule under the fit's ``fixed`` / one-way features. Under
        constraints between features, the metarule's rule when the row can reach it under
        them, else the cheapest rule it can reach (see :meth:`fit`)."""
        A = self._check(X)
        if getattr(self, "reach_", None) is None:
            return self.metarule_tree_["rule"][self.apply(A)]
        return self._prescribe(A)[0]

    def moves(self, X: Rows) -> np.ndarray:
        """Each row moved into its prescribed rule (:meth:`explain`): the least move into it
        (:func:`core.rules.onmodel.edge_points`, at its edge); under constraints between
        features, the least move that keeps them (:mod:`core.rules.reach`). A row prescribed
        no rule stays as it is. Shape (n, d)."""
        return self._prescribe(self._check(X))[1]

    def _prescribe(self, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each row's rule, each row's move into it). Under constraints the last few answers
        are kept (deciding them takes programs, and a page asks the same rows several times)."""
        given = self.metarule_tree_["rule"][self.apply(A)]
        if getattr(self, "reach_", None) is None:          # each row at its rule's edge
            Z = A.copy()
            for k in np.unique(given[given >= 0]):
                rows = np.flatnonzero(given == k)
                Z[rows] = edge_points(A[rows], self.rules_[k].lower, self.rules_[k].upper, self._edges)
            return given, Z
        key = A.tobytes() + bytes(str(A.shape), "ascii")
        seen = getattr(self, "_seen", None)
        if seen is None:
            seen = self._seen = {}
        if key not in seen:
            while len(seen) >= 4:
                seen.pop(next(iter(seen)))
            seen[key] = self._reachable_rules(A, given)
        out, Z = seen[key]
        return out.copy(), Z.copy()

    def _reachable_rules(self, A: np.ndarray, given: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Under constraints: the metarule's rule where the row reaches it, else the cheapest it
        reaches (eq. 9, ties to the first), else -1; and the least moves."""
        reach = self.reach_
        assert reach is not None
        n = len(A)
        out = np.full(n, -1, dtype=np.int64)
        Z = A.copy()
        tried = np.zeros((n, len(self.rules_)), dtype=bool)
        cost = self._costs(A)
        order = np.argsort(cost, axis=1, kind="stable")
        rank = np.zeros(n, dtype=np.int64)
        cand = given.copy()
        pending = np.flatnonzero(cand >= 0)
        while pending.size:
            for k in np.unique(cand[pending]):
                rows = pending[cand[pending] == k]
                r = self.rules_[k]
                first = edge_points(A[rows], r.lower, r.upper, self._edges)
                ok, moved = reach.moves(A[rows], r.lower, r.upper, first=first, ones=self._edges.ones)
                out[rows[ok]], Z[rows[ok]] = k, moved[ok]
                tried[rows, k] = True
            pending = pending[out[pending] < 0]
            for i in pending:                                  # the next cheapest rule not tried yet
                while rank[i] < order.shape[1] and tried[i, order[i, rank[i]]]:
                    rank[i] += 1
                cand[i] = order[i, rank[i]] if rank[i] < order.shape[1] and np.isfinite(cost[i, order[i, rank[i]]]) \
                    else -1
            pending = pending[cand[pending] >= 0]
        return out, Z

    def _costs(self, A: np.ndarray) -> np.ndarray:
        """changes - feasibility of every rule for every row (eq. 9); inf where the fit's fixed
        and one-way features keep the row from it."""
        out = np.empty((len(A), len(self.rules_)))
        for k in range(len(self.rules_)):
            out[:, k] = self.changes(A, np.full(len(A), k)) - self.rules_[k].feasibility
        if any(self._roles().values()):
            out[~self._role_reachable(A)] = np.inf
        return out

    def rule_table(self, X: Rows) -> pd.DataFrame:
        """One row per rule: its text, accuracy, feasibility, complexity, how many
        rows of ``X`` it is prescribed to, and their mean number of changes; when the
        rules were checked on the model (``fit(..., model=)``), also the rows moved to the
        rule's edge and the share of them the model accepts (NaN: none was moved)."""
        A = self._check(X)
        assigned = self.explain(A)
        checked = "checked_on" in self.result_.params if hasattr(self, "result_") else False
        recs = []
        for k, r in enumerate(self.rules_):
            mine = assigned == k
            n = int(mine.sum())
            rec = {"rule": f"R{k}", "if": self.rule_text(k), "accuracy": round(r.accuracy, 3),
                   "feasibility": round(r.feasibility, 3), "complexity": r.complexity, "rows prescribed": n,
                   "mean changes": float(np.round(self.changes(A[mine], np.full(n, k)).mean(), 2)) if n else 0.0}
            if getattr(self, "reach_", None) is not None:
                rec["fitting rows it is out of reach for"] = int(r.unreachable_rows)
            if checked:
                rec["rows moved to its edge"] = int(r.edge_rows)
                rec["accepted by the model at its edge"] = round(r.edge_accepted, 3)
            recs.append(rec)
        return pd.DataFrame(recs)

    def reachable(self, X: Rows) -> np.ndarray:
        """``[i, r]``: can row i reach rule r moving no fixed feature, increase-only
        features only up and decrease-only ones only down (the fit's settings), and, under
        constraints between features, by a move that keeps them (:mod:`core.rules.reach`)?
        Every rule when nothing is constrained."""
        A = self._check(X)
        out = self._role_reachable(A)
        reach = getattr(self, "reach_", None)
        if reach is not None:
            for k, r in enumerate(self.rules_):
                rows = np.flatnonzero(out[:, k])
                first = edge_points(A[rows], r.lower, r.upper, self._edges)
                out[rows, k] = reach.moves(A[rows], r.lower, r.upper, first=first, ones=self._edges.ones)[0]
        return out

    def _role_reachable(self, A: np.ndarray) -> np.ndarray:
        out = np.ones((len(A), len(self.rules_)), dtype=bool)
        for role, cols in self._roles().items():
            for j in cols:
                x = A[:, j][:, None]
                L = np.array([r.lower[j] for r in self.rules_])[None, :]
                U = np.array([r.upper[j] for r in self.rules_])[None, :]
                if role != "increase_only":
                    out &= x > L
                if role != "decrease_only":
                    out &= x <= U
        return out

    def changes(self, X: Rows, rules: np.ndarray | None = None) -> np.ndarray:
        """Number of features outside the rule's bounds (eq. 10), per row; -1 for a
        row prescribed no rule (none reachable, see :meth:`explain`)."""
        A = self._check(X)
        r = self.explain(A) if rules is None else np.asarray(rules)
        if rules is not None:
            if r.shape != (len(A),):
                raise QueryError(f"rules has shape {r.shape}; give one rule index (0..{len(self.rules_) - 1}) per "
                                 f"row of X ({len(A)} rows).")
            for k in set(r.tolist()) - {-1}:                           # -1: no rule prescribed
                self._rule(k)
        none = r < 0
        L = np.array([self.rules_[i].lower for i in r[~none]]).reshape(-1, A.shape[1])
        U = np.array([self.rules_[i].upper for i in r[~none]]).reshape(-1, A.shape[1])
        ch = (A[~none] <= L) | (A[~none] > U)
        for grp in self.groups_:  # a categorical counts once (appendix A)
            g = np.asarray(grp)
            ch[:, g[0]] = ch[:, g].any(axis=1)
            ch[:, g[1:]] = False
        if not none.any():
            return ch.sum(axis=1)
        out = np.full(len(A), -1, dtype=np.int64)
        out[~none] = ch.sum(axis=1)
        return out

    def cost(self, X: Rows) -> np.ndarray:
        """changes - feasibility of each row's rule (eq. 9); inf for a row prescribed none."""
        r = self.explain(X)
        if not (r < 0).any():
            return self.changes(X, r) - np.array([self.rules_[i].feasibility for i in r])
        feas = np.array([self.rules_[i].feasibility if i >= 0 else 0.0 for i in r])
        return np.where(r < 0, np.inf, self.changes(X, r) - feas)

    def cost_matrix(self, X: Rows) -> np.ndarray:
        """Cost of every rule for every row, shape (n_samples, n_rules); inf where the
        row cannot reach the rule (:meth:`reachable`)."""
        A = self._check(X)
        out = self._costs(A)
        if getattr(self, "reach_", None) is not None:
            out[~self.reachable(A)] = np.inf
        return out

    # ----------------------------------------------------------------- text
    def _conditions(self, lower: np.ndarray, upper: np.ndarray) -> list[tuple[list[int], str]]:
        return conditions(lower, upper, self.feature_names_, self.groups_)[0]

    def rule_text(self, k: int) -> str:
        r = self.rules_[self._rule(k)]
        return " and ".join(t for _, t in self._conditions(r.lower, r.upper)) or "anything"

    def recourse_text(self, x: Row, decision: Label | None = None) -> str:
        """'change A to ..., keep B within ...' for one row; under constraints between
        features, also the features the least move that keeps them changes outside the
        rule's conditions, and the metarule's rule when the row cannot reach it.

        ``decision`` (optional): the model's output for the row. A row already inside its
        rule is told "no change needed" only when that output is in the target; a rule is an
        estimate (its accuracy a share of the fitting rows), so where the model's output is
        not in the target, the text says the rule does not hold for this row, and without
        ``decision`` it says the model's decision is to be checked."""
        a = self._check(x)[0]
        k = int(self.explain(a[None, :])[0])
        reach = getattr(self, "reach_", None)
        given = int(self.metarule_tree_["rule"][self.apply(a[None, :])][0])
        lost = (f"R{given}, the rule of its metarule, cannot be reached under the constraints between features. "
                if reach is not None and given >= 0 and given != k else "")
        if k < 0:
            return lost + ("No rule is reachable without moving a fixed feature or moving a one-way feature the "
                           "wrong way" + (" or breaking a constraint between features." if reach is not None
                                          else "."))
        rule = self.rules_[k]
        change, keep, ruled = self._change_keep(rule, a)
        out = f"{lost}Rule {k}: "
        if change:
            out += "change " + ", ".join(change)
        elif decision is not None and bool(output_mask(model_outputs([decision], 1), self.target_)[0]):
            out += "no change needed"
        else:
            right = f"(right for {rule.accuracy:.0%} of the fitting rows inside it)"
            met = f" ({', '.join(keep)})" if keep else ""
            out += (f"this row already meets every condition of the rule{met}, " +
                    (f"yet the model does not give it the target: the rule {right} does not hold for this row "
                     "and prescribes no change" if decision is not None else
                     f"and the rule is an estimate {right}: check the model's decision for this row"))
            keep = []
        if keep:
            out += "; keep " + ", ".join(keep)
        if reach is not None:
            out += self._moved_too(a, ruled)
        return out

    def _change_keep(self, r: Rule, a: np.ndarray) -> tuple[list[str], list[str], set[int]]:
        """The rule's conditions the row must change to meet, those it already meets, and their columns."""
        change: list[str] = []
        keep: list[str] = []
        ruled: set[int] = set()
        for cols, txt in self._conditions(r.lower, r.upper):
            inside = all(r.lower[j] < a[j] <= r.upper[j] for j in cols)
            (keep if inside else change).append(txt)
            ruled |= set(cols)
        return change, keep, ruled

    def _moved_too(self, a: np.ndarray, ruled: set[int]) -> str:
        """Under constraints: the features outside the rule's conditions the row's least move changes."""
        z = self.moves(a[None, :])[0]
        also = [f"{self.feature_names_[j]} to {number_text(z[j])}" for j in range(len(a))
                if j not in ruled and not (z[j] == a[j] or np.isnan(z[j]) and np.isnan(a[j]))]
        return "; with " + ", ".join(also) + ", as the constraints between features ask" if also else ""

    def to_text(self, outcome: str | None = None) -> str:
        """The rules and metarules as text; ``outcome``: the target as the analyst
        names it (default :func:`core.shown.outcome_text` of the target: ``1``,
        never ``np.int64(1)``)."""
        target = outcome if outcome is not None else _target_text(self.target_)
        lines = [f"T-CREx rules for target {target} (tau={self.tau}, rho={self.rho}):"]
        lines += [self._rule_line(k, r) for k, r in enumerate(self.rules_)]
        lines.append("Metarules (for whom each rule is the best option):")
        lines += [self._metarule_line(m) for m in self.metarules_]
        reach = getattr(self, "reach_", None)
        if reach is not None:
            lines.append("Constraints between features in force: " + "; ".join(reach.texts) + ".")
        if hasattr(self, "result_"):
            lines.append(guarantee_line(self.result_.guarantee, "this set of rules"))
        return "\n".join(lines)

    def _rule_line(self, k: int, r: Rule) -> str:
        """Rule ``k`` as a line of :meth:`to_text`: its conditions, accuracy, feasibility and checks."""
        edge = (f", accepted by the model at its edge for {r.edge_accepted:.1%} of {r.edge_rows:,} rows"
                if r.edge_rows else "")
        lost = (f", out of reach under the constraints for {r.unreachable_rows:,} fitting rows its metarule "
                "gives it" if r.unreachable_rows else "")
        return (f"  R{k}: IF {self.rule_text(k)}  [accuracy {r.accuracy:.3f}, feasibility "
                f"{r.feasibility:.3f}{edge}{lost}]")

    def _metarule_line(self, m: Metarule) -> str:
        """A metarule as a line of :meth:`to_text`: its conditions and its rule (or none reachable)."""
        conds = [t for _, t in self._conditions(m.lower, m.upper)]
        return (f"  IF {' and '.join(conds) or 'anything'} THEN R{m.rule} "
                f"(at most {m.worst_case_changes} change(s))" if m.rule >= 0 else
                f"  IF {' and '.join(conds) or 'anything'} THEN no reachable rule")

    def to_dict(self, conditions: Callable[[np.ndarray, np.ndarray], list[dict[str, Any]]] | None = None,
                outcome: str | None = None) -> dict[str, Any]:
        """JSON-able rules and metarules, the export of :attr:`result_`
        (:func:`core.model.result.export`: its kind, params, elapsed and guarantee;
        ``result_.to_json()`` is the result itself). With ``conditions`` (a box ``(lower, upper)``
        -> conditions on the analyst's columns, e.g. ``functools.partial(
        core.intake.columns.box_record, columns)``) each rule and metarule is written
        as those conditions (a category column as its set of categories); without,
        as its bounds on the model's features. ``outcome``: the target as named."""
        def num(v):
            return None if not np.isfinite(v) else float(v)

        def box(lower: np.ndarray, upper: np.ndarray) -> dict[str, Any]:
            if conditions is not None:
                return {"conditions": conditions(lower, upper)}
            return {"lower": [num(v) for v in lower], "upper": [num(v) for v in upper]}

        if not hasattr(self, "result_"):
            raise NotFittedError("This TCREx is not fitted yet; call fit first.")
        target = plain(self.target_)
        if isinstance(target, list):
            target = [num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in target]
        return export(self.result_, {
            "params": {**self.result_.params, "rho": self.rho, "tau": self.tau, "n_trees": self.n_trees,
                       "target": target, "outcome": outcome if outcome is not None else _target_text(self.target_)},
            **({} if conditions is not None else {"features": list(self.feature_names_)}),
            "rules": [{"rule": f"R{k}", **box(r.lower, r.upper), "accuracy": float(r.accuracy),
                       "feasibility": float(r.feasibility), "complexity": int(r.complexity),
                       "edge_rows": int(r.edge_rows), "edge_accepted": num(r.edge_accepted),
                       "unreachable_rows": int(r.unreachable_rows), "text": self.rule_text(k)} for k, r in enumerate(self.rules_)],
            "metarules": [{**box(m.lower, m.upper), "rule": f"R{int(m.rule)}" if m.rule >= 0 else None,
                           "worst_case_changes": int(m.worst_case_changes)} for m in self.metarules_],
        })

    def to_graphviz(self, highlight: Sequence[int] = (), palette: Sequence[str] | None = None) -> str:
        """DOT source of the metarule tree; leaves coloured by rule; ``highlight``
        node indices (a path) drawn bold."""
        palette = palette or ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
                              "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"]
        t = self.metarule_tree_
        hl = set(int(i) for i in highlight)
        lines = ["digraph metarules {", '  node [shape=box, style="rounded,filled", fontname="Helvetica"];']
        for i in range(len(t["feature"])):
            pen = ', penwidth=3, color="#d62728"' if i in hl else ""
            if t["feature"][i] >= 0:
                lines += self._split_lines(i, hl, pen)
            else:
                r = int(t["rule"][i])
                label, fill = (f"R{r}", palette[r % len(palette)]) if r >= 0 else ("no reachable rule", "#ffffff")
                lines.append(f'  n{i} [label="{label}", fillcolor="{fill}"{pen}];')
        lines.append("}")
        return "\n".join(lines)

    def _split_lines(self, i: int, hl: set[int], pen: str) -> list[str]:
        """Split node ``i`` of the metarule tree and its two edges, in DOT (a one-hot column asked as
        "is the category c?", its yes on the right)."""
        t = self.metarule_tree_
        j = int(t["feature"][i])
        label, yes_no = f"{self.feature_names_[j]} <= {bound_text(t['threshold'][i])}", ("yes", "no")
        group = next((g for g in self.groups_ if j in g), None)
        if group is not None and 0 <= t["threshold"][i] < 1:   # a one-hot column: "is the category c?"
            name = str(self.feature_names_[j])
            label, yes_no = (f"{name.split('=', 1)[0]} = {name.split('=', 1)[1]}?" if "=" in name
                             else f"{name}?"), ("no", "yes")
        lines = [f'  n{i} [label="{dot_label(label)}", fillcolor="#ffffff"{pen}];']
        for child, lab in zip((t["left"][i], t["right"][i]), yes_no):
            edge_pen = ', penwidth=3, color="#d62728"' if (i in hl and int(child) in hl) else ""
            lines.append(f'  n{i} -> n{int(child)} [label="{lab}"{edge_pen}];')
        return lines

    def decision_path(self, x: Row) -> list[int]:
        a = self._check(x)[0]
        t = self.metarule_tree_
        path, node = [0], 0
        while t["feature"][node] >= 0:
            node = int(t["left"][node] if a[t["feature"][node]] <= t["threshold"][node] else t["right"][node])
            path.append(node)
        return path


def _schema_of(d: Any) -> Schema:
    """The schema a saved result's constraints are read against."""
    from core.schema import Schema

    return Schema.from_dict(d)


def _target_text(target: Any) -> str:
    """A T-CREx target in words: a class or an interval as :func:`core.shown.outcome_text`
    writes it, ``"other"`` as any outcome but the most frequent."""
    if isinstance(target, str) and target == "other":
        return "any outcome but the most frequent"
    if isinstance(target, tuple) and len(target) == 2 and isinstance(target[0], str) and target[0] == "other":
        return f"any outcome but {outcome_text(target[1])}"
    return outcome_text(target)
