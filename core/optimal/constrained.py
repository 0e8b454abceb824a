"""Optimal counterfactuals and recourse verification under constraints between features.

The analyst's constraints (:mod:`core.constraints`) couple features, so the query is
answered by the one solver that encodes them exactly, :mod:`core.solvers.constrained`
(a MILP, solved by the LP box search under the constraints for a tree ensemble it takes,
:mod:`core.solvers.constrained_box`, else by HiGHS), for a tree ensemble and for a linear model;
any other model's query is solved on its surrogate under the same constraints and the
repaired point checked against them (:mod:`core.surrogate.repair`).

:func:`constrained_counterfactual` is what :func:`core.optimal.optimal_counterfactual`
calls when constraints are in force (given, or in the schema); its result's
``backend`` is "milp" and, when another backend was asked for, ``params["notice"]``
says that the constraints needed this one. ``binding`` lists the constraints that hold
with equality at the optimum.

:func:`verify_recourse` asks only whether any action satisfying the constraints brings
the row to the target (Kothari, Kulynych & Ustun, "Prediction without preclusion",
ICLR 2024: a row with none is *precluded*). It is a feasibility question, a program
with no objective, and on a tree ensemble or a linear model its "precluded" is proven;
``blocking`` then names the smallest set of constraints without which the row would
have recourse (empty when the model and the features' own settings preclude it alone).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable

import numpy as np

from core.cells.problem import build_problem, feature_actions
from core.counterfactual import CounterfactualResult, QueryError, changes_between
from core.model import Guarantee, LinearModel, TreeEnsemble, kind_of
from core.model.guarantee import ModelKind
from core.model.result import Reader, Result, Writer
from core.solvers import constrained as cmilp
from core.typing import FeatureKey, ModelLike, Row, TargetSpec

if TYPE_CHECKING:
    from core.constraints import Constraints
    from core.schema import Schema

__all__ = ["constrained_counterfactual", "verify_recourse", "RecourseCheck", "resolve_constraints"]


def resolve_constraints(constraints: Iterable[str] | str | Constraints | None, schema: Schema | None) -> Constraints:
    """The constraints in force: ``constraints`` (texts or parsed) read against ``schema``,
    else the schema's own; an empty :class:`core.constraints.Constraints` when none."""
    from core.constraints import Constraints, parse
    from core.schema import Schema

    if constraints is None:      # the schema's own (a schema of another type is refused by the query's own check)
        return schema.parsed_constraints() if isinstance(schema, Schema) else Constraints()
    if isinstance(constraints, Constraints):
        return constraints
    texts = constraints if isinstance(constraints, str) else list(constraints)
    if not texts:
        return Constraints()
    if schema is None:
        raise QueryError("Constraints between features are read against the features' schema (their names, kinds "
                         "and ranges); pass schema= as well, e.g. infer_schema(table).")
    return parse(texts, schema)


def _tree_problem(ens: TreeEnsemble, x: np.ndarray, target: Any, schema: Any, kw: dict[str, Any]) -> Any:
    from core.optimal import _held_states

    action = feature_actions(ens, schema, x, fixed=kw["fixed"], increase_only=kw["increase_only"],
                             decrease_only=kw["decrease_only"])
    held = _held_states(ens, x, action)
    prob = build_problem(held, x, target, schema=schema, norm=kw["norm"], weights=kw["weights"], fixed=kw["fixed"],
                         increase_only=kw["increase_only"], decrease_only=kw["decrease_only"],
                         plausibility=kw.get("plausibility"), also_valid_for=kw.get("others", ()))
    return prob, action


def _solve(read: Any, x: np.ndarray, target: Any, cons: Any, schema: Any, kw: dict[str, Any], time_limit: float,
           starts: list[np.ndarray] | None = None, tree: tuple[Any, Any] | None = None
           ) -> tuple[cmilp.Solved, Any, Any]:
    """(what the program found, the model's view that checks a point, the domain); ``tree``: a
    tree ensemble's problem and actionability, when already built."""
    if isinstance(read, LinearModel):
        from core.solvers.linear import build_linear_problem

        lp = build_linear_problem(read, x, target, schema=schema, norm=kw["norm"], weights=kw["weights"],
                                  fixed=kw["fixed"], increase_only=kw["increase_only"],
                                  decrease_only=kw["decrease_only"])
        dom = cmilp.linear_domain(lp)
        return cmilp.solve_linear_model(lp, dom, cons, time_limit=time_limit), lp, dom
    prob, action = tree if tree is not None else _tree_problem(read, x, target, schema, kw)
    dom = cmilp.tree_domain(prob, action)
    X_ref = kw.get("X_ref")
    return cmilp.solve_cells(prob, dom, cons, time_limit=time_limit, starts=starts or (),
                             X_ref=None if X_ref is None else np.asarray(X_ref, dtype=float)), prob, dom


def constrained_counterfactual(read: TreeEnsemble | LinearModel, x: Row, target: TargetSpec, *, cons: Constraints,
                               schema: Schema | None, params: dict[str, Any], model: ModelLike = None,
                               time_limit: float = 30.0,
                               free: Callable[[float], CounterfactualResult] | None = None,
                               **kw: object) -> CounterfactualResult:
    """The cheapest change of ``x`` giving ``target`` under ``cons``, proven (see the module
    docstring). ``kw``: norm, weights, fixed, increase_only, decrease_only (and, for trees,
    plausibility and others). ``free(time_limit)``: the same query without the constraints,
    by the solvers made for it; when its proven optimum already satisfies every constraint,
    it is the optimum under them too (the constrained points are a subset), and is returned
    at once; when it proves that no point exists, none exists under the constraints either.
    A tree ensemble's query that the LP box search takes under the constraints
    (:func:`core.solvers.constrained.by_boxes`) goes to it directly: it finds the free optimum
    as fast as the free search when that keeps the constraints."""
    t0 = time.perf_counter()
    x = np.asarray(x, dtype=float).ravel()
    params = dict(params, constraints=cons.texts, backend="milp")
    model_kind = kind_of(read, "tree_ensemble")
    if schema is not None:
        _row_notes(cons, x, params)
    starts: list[np.ndarray] = []
    tree = _tree_of(read, x, target, schema, kw)
    if free is not None and not (tree is not None and cmilp.by_boxes(tree[0], cons)):
        first = _free_start(free, time_limit, cons, x, params, model_kind, starts)
        if first is not None:
            return replace(first, elapsed=time.perf_counter() - t0)
    try:
        solved, view, dom = _solve(read, x, target, cons, schema, kw, time_limit - (time.perf_counter() - t0), starts,
                                   tree)
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    if solved.x is None:
        return _nothing(solved, x, params, model_kind, time.perf_counter() - t0, cons)
    if model is not None and not _convinces(model, read, view, solved.x):
        return _disagrees(x, params, model_kind, time.perf_counter() - t0)
    return _found(read, x, solved, cons, params, model_kind, time.perf_counter() - t0)


def _tree_of(read: TreeEnsemble | LinearModel, x: np.ndarray, target: TargetSpec, schema: Schema | None,
             kw: dict[str, Any]) -> tuple[Any, Any] | None:
    """A tree ensemble's cell problem and the features' actions (None for a linear model)."""
    if isinstance(read, LinearModel):
        return None
    try:
        tree: tuple[Any, Any] = _tree_problem(read, x, target, schema, kw)
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    return tree


def _disagrees(x: np.ndarray, params: dict[str, Any], model_kind: ModelKind, elapsed: float) -> CounterfactualResult:
    """No point: the model as loaded disagrees with its exact reading at the program's point."""
    return CounterfactualResult(
        x=None, cost=float("inf"), status="error", gap=float("inf"), elapsed=elapsed,
        changes=(), backend="milp", params=params, x_query=x.copy(),
        message="The model as loaded disagrees with its exact reading at the program's point; nothing is "
                "returned.", guarantee=Guarantee("not_found", model_kind))


def _found(read: TreeEnsemble | LinearModel, x: np.ndarray, solved: cmilp.Solved, cons: Constraints,
           params: dict[str, Any], model_kind: ModelKind, elapsed: float) -> CounterfactualResult:
    """The program's point, proven optimal or within its gap, with the constraints that bind there."""
    point = solved.x
    assert point is not None
    status = "optimal" if solved.status == "optimal" else "feasible"
    gap = 0.0 if status == "optimal" else max(0.0, (solved.cost - solved.bound) / max(solved.cost, 1e-12))
    g = Guarantee("proven_optimal" if status == "optimal" else "time_limited", model_kind,
                  gap=gap, bound=solved.bound, note=_binding_note(cons, solved.binding))
    return CounterfactualResult(
        x=point, cost=solved.cost, status=status, gap=gap, elapsed=elapsed,
        changes=changes_between(read, x, point),   # type: ignore[arg-type]   # a linear model reads as one
        backend="milp", params=params, x_query=x.copy(), lower_bound=solved.bound, valid=True,
        prediction=read.predict(point[None, :])[0], timings=solved.timings, guarantee=g,
        binding=tuple(cons[k].text for k in solved.binding))


def _free_start(free: Callable[[float], CounterfactualResult], time_limit: float, cons: Constraints, x: np.ndarray,
                params: dict[str, Any], model_kind: ModelKind, starts: list[np.ndarray]) -> CounterfactualResult | None:
    """The free query, in half the time: its answer when it answers the constrained one too
    (:func:`_free_first`), else None with its point (if any) added to ``starts``."""
    unconstrained = free(0.5 * time_limit)
    first = _free_first(unconstrained, cons, x, params, model_kind)
    if first is None and unconstrained.found and unconstrained.x is not None:
        starts.append(unconstrained.x)
    return first


def _free_first(res: CounterfactualResult, cons: Constraints, x: np.ndarray, params: dict[str, Any],
                model_kind: ModelKind) -> CounterfactualResult | None:
    """The free query's answer, when it answers the constrained one too (see
    :func:`constrained_counterfactual`); else None."""
    params = dict(params, backend=res.backend, notice="The optimum without the constraints between features "
                  "already satisfies them: it is the optimum under them.")
    if res.status == "infeasible":
        params["notice"] = "No point gives the target even without the constraints between features."
        return replace(res, params=params, message="No action gives the target: this row is precluded by the "
                       "model and the features' own settings (proven).", guarantee=Guarantee("infeasible", model_kind))
    if res.status != "optimal" or not res.found or res.x is None or cons.violated(x, res.x):
        return None
    binding = cmilp.binding(cons, x, res.x)
    note = _binding_note(cons, binding)
    return replace(res, params=params, binding=tuple(cons[k].text for k in binding),
                   guarantee=replace(res.guarantee, note=f"{res.guarantee.note} {note}".strip()))


def _convinces(model: Any, read: Any, view: Any, point: np.ndarray) -> bool:
    """Does the original model, as loaded, give the target at ``point`` too?"""
    from core.cells.result import check_on_model

    if isinstance(read, LinearModel):
        from core.solvers.linear import _on_model

        return _on_model(model, view, point)
    return check_on_model(model, view.ens, point, view.target)


def _binding_note(cons: Any, binding: tuple[int, ...]) -> str:
    if not binding:
        return "No constraint between features binds at this point."
    return "Binding constraints: " + "; ".join(cons[k].text for k in binding) + "."


def _row_notes(cons: Any, x: np.ndarray, params: dict[str, Any]) -> None:
    """A row that already breaks a constraint on new values as it stands: say so (the
    answer is a point that satisfies it)."""
    broken = cons.violated(x, x)
    if broken:
        params["notice"] = ("The row as it stands breaks " + "; ".join(repr(cons[k].text) for k in broken)
                            + ": the answer is a point that satisfies " + ("it." if len(broken) == 1 else "them."))


def _nothing(solved: cmilp.Solved, x: np.ndarray, params: dict[str, Any], model_kind: ModelKind, elapsed: float,
             cons: Any) -> CounterfactualResult:
    if solved.status == "infeasible":
        msg = "No action satisfying the constraints gives the target: this row is precluded (proven)."
        g = Guarantee("infeasible", model_kind)
        return CounterfactualResult(x=None, cost=float("inf"), status="infeasible", gap=float("inf"), elapsed=elapsed,
                                    changes=(), backend="milp", params=params, x_query=x.copy(),
                                    lower_bound=float("inf"), message=msg, guarantee=g)
    msg = solved.message or "No counterfactual was found within the time limit; allow more time."
    return CounterfactualResult(x=None, cost=float("inf"), status="time_limit" if solved.status == "time_limit"
                                else "error", gap=float("inf"), elapsed=elapsed, changes=(), backend="milp",
                                params=params, x_query=x.copy(), message=msg,
                                guarantee=Guarantee("not_found", model_kind))


# ------------------------------------------------------------------ recourse verification
@dataclass(frozen=True, eq=False)
class RecourseCheck(Result):
    """Whether a row has recourse under the constraints (a :class:`core.model.result.Result`).

    status : "reachable" (a witness point exists), "precluded" (proven: no action
        satisfying the constraints gives the target) or "unknown" (time ran out).
    x_query : the row.  witness : a point that gives the target (not the cheapest), or None.
    blocking : the smallest set of constraints (texts) under which the row stays
        precluded; () when the model and the features' own settings preclude it alone;
        None when not computed or not known.
    """

    kind: ClassVar[str] = "recourse_check"
    what: ClassVar[str] = "recourse check"

    status: str
    x_query: np.ndarray
    witness: np.ndarray | None
    blocking: tuple[str, ...] | None
    params: dict[str, Any]
    elapsed: float
    guarantee: Guarantee

    @property
    def precluded(self) -> bool:
        return self.status == "precluded"

    def explain(self) -> str:
        """The answer in one sentence."""
        if self.status == "reachable":
            return "This row has recourse: an action satisfying the constraints gives the target."
        if self.status == "unknown":
            return "Not decided within the time limit: allow more time."
        if not self.blocking:
            return "No recourse: the model and the features' own settings (fixed features, ranges) leave no action."
        return "No recourse because of " + "; ".join(repr(t) for t in self.blocking) + "."

    def _body(self) -> dict[str, Any]:
        w = Writer()
        w.value("status", self.status).array("x_query", self.x_query).array("witness", self.witness)
        w.value("blocking", None if self.blocking is None else list(self.blocking))
        return w.done()

    @classmethod
    def _from_body(cls, r: Reader) -> "RecourseCheck":
        b = r.get("blocking")
        return cls(status=str(r.get("status")), x_query=r.array("x_query"), witness=r.array("witness"),
                   blocking=None if b is None else tuple(str(t) for t in b), params=dict(r.get("params")),
                   elapsed=r.number("elapsed"), guarantee=Guarantee.from_dict(r.get("guarantee")))


def verify_recourse(model: ModelLike, x: Row, target: TargetSpec, *, schema: Schema | None = None,
                    constraints: Iterable[str] | str | Constraints | None = None,
                    fixed: Iterable[FeatureKey] | None = None, increase_only: Iterable[FeatureKey] | None = None,
                    decrease_only: Iterable[FeatureKey] | None = None, time_limit: float = 30.0,
                    explain: bool = True) -> RecourseCheck:
    """Does any action satisfying the constraints bring ``x`` to ``target``? (module docstring)

    Parameters
    ----------
    model : a tree ensemble or a linear model (or a fitted model read as one).
    x : array-like (n_features,), the row (codes view).
    target : the class (or a regressor's interval) to reach.
    schema : the features' schema; its constraints are used unless ``constraints`` is given.
    constraints : constraint texts (:mod:`core.constraints`), or None for the schema's.
    fixed, increase_only, decrease_only : as :func:`core.optimal.optimal_counterfactual`.
    explain : for a precluded row, also find the smallest blocking set of constraints.
    """
    from core.counterfactual import check_time_limit
    from core.model import as_model

    t0 = time.perf_counter()
    time_limit = check_time_limit(time_limit)
    read = model if isinstance(model, (TreeEnsemble, LinearModel)) else as_model(model)
    if not isinstance(read, (TreeEnsemble, LinearModel)):
        raise QueryError("Recourse is verified (proven) on a tree ensemble or a linear model; a model known only by "
                         "its answers cannot prove that no action exists.")
    cons = resolve_constraints(constraints, schema)
    x = np.asarray(x, dtype=float).ravel()
    kw = dict(norm="l1", weights=None, fixed=fixed, increase_only=increase_only, decrease_only=decrease_only)
    build, (view, dom) = _builder(read, x, target, cons, schema, kw)
    boxed = isinstance(read, TreeEnsemble) and cmilp.by_boxes(view, cons)    # the box search decides alone
    status, witness = ("unknown", None) if boxed else _free_witness(read, x, target, cons, schema, kw,
                                                                      0.5 * time_limit)
    if status == "unknown":
        status, witness = _program_witness(read, view, dom, cons, time_limit, t0)
    model_kind = kind_of(read, "tree_ensemble")
    params = dict(constraints=cons.texts, target=str(target), time_limit=time_limit, fixed=_names(fixed),
                  increase_only=_names(increase_only), decrease_only=_names(decrease_only))
    blocking = _blocking_texts(build, cons, t0 + time_limit) if status == "infeasible" and explain else None
    verdict = {"feasible": "reachable", "infeasible": "precluded"}.get(status, "unknown")
    return RecourseCheck(verdict, x.copy(), witness, blocking, params, time.perf_counter() - t0,
                         _verdict_guarantee(verdict, model_kind))


def _blocking_texts(build: Any, cons: Any, deadline: float) -> tuple[str, ...] | None:
    """The smallest set of constraints under which the row stays precluded, as texts (None: not found in time)."""
    keep = cmilp.blocking(build, len(cons), deadline=deadline)
    return None if keep is None else tuple(cons[k].text for k in keep)


def _program_witness(read: Any, view: Any, dom: Any, cons: Any, time_limit: float, t0: float
                     ) -> tuple[str, np.ndarray | None]:
    """The constrained program's answer to "is there any point": ("feasible", a witness),
    or its status without one (the tree's search within what is left of the time)."""
    if isinstance(read, LinearModel):
        found = cmilp.solve_linear_model(view, dom, cons, time_limit=time_limit, objective=False)
        return ("feasible", found.x) if found.x is not None else (found.status, None)
    return cmilp.tree_witness(view, dom, cons, time_limit=max(0.01, t0 + time_limit - time.perf_counter()))


def _verdict_guarantee(verdict: str, model_kind: ModelKind) -> Guarantee:
    """A recourse check's guarantee: infeasible (proven) when precluded, exact when a witness
    was found, not found when undecided."""
    if verdict == "precluded":
        return Guarantee("infeasible", model_kind, note="No recourse exists under the constraints.")
    return Guarantee("exact" if verdict == "reachable" else "not_found", model_kind, note="")


def _free_witness(read: Any, x: np.ndarray, target: Any, cons: Any, schema: Any, kw: dict[str, Any],
                  time_limit: float) -> tuple[str, np.ndarray | None]:
    """The question without the constraints, by the solvers made for it: a row with no point
    at all is precluded whatever the constraints ("infeasible"); a free optimum that keeps
    every constraint is a witness ("feasible"); else "unknown" (the constrained program
    decides)."""
    from core.optimal import optimal_counterfactual

    free = optimal_counterfactual(read, x, target, schema=schema, constraints=(), time_limit=time_limit,
                                  fixed=kw["fixed"], increase_only=kw["increase_only"],
                                  decrease_only=kw["decrease_only"])
    if free.status == "infeasible":
        return "infeasible", None
    if free.found and free.x is not None and not cons.violated(x, free.x):
        return "feasible", free.x
    return "unknown", None


def _names(items: Iterable[Any] | None) -> list[str] | None:
    return None if items is None else [str(v) for v in items]


def _builder(read: Any, x: np.ndarray, target: Any, cons: Any, schema: Any, kw: dict[str, Any]) -> tuple[Any, Any]:
    """A function making the feasibility program with a subset of the constraints, and (view, domain)."""
    if isinstance(read, LinearModel):
        from core.solvers.linear import build_linear_problem

        lp = build_linear_problem(read, x, target, schema=schema, **kw)
        dom = cmilp.linear_domain(lp)
        taus = cmilp._taus(lp, 0)
        return (lambda keep: cmilp._linear_program(lp, dom, cons, taus, with_cost=False, subset=keep)), (lp, dom)
    prob, action = _tree_problem(read, x, target, schema, kw)
    dom = cmilp.tree_domain(prob, action)

    def build(keep: Any) -> Any:
        P, cols, _ = cmilp._program(prob, dom, cons, strict=True, with_cost=False, subset=keep)
        return P, cols
    return build, (prob, dom)
