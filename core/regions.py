"""Exact decision regions of a tree ensemble (Blanchart, "An exact
counterfactual-example-based approach to tree-ensemble models interpretability").

Every leaf is a box; the ensemble's output is constant on each *maximal
intersection box* (a pure region). The decomposition is built dimension by
dimension: on the current dimension, the alive leaves' intervals are cut into
maximal intersection intervals (``Intersect1D``, algorithm 1), each with the
leaves that cover it, and each becomes a child in a search tree over the
dimensions (algorithm 2); after the last dimension exactly one leaf per tree
is alive and the box is pure.

Here the leaves' intervals are expressed on the grid of the ensemble's split
levels (``core.optimal.build_problem``), so a maximal intersection interval is
a range of grid intervals, and the distance from the query to it is the cost
model's minimum over that range (squared L2, L1, L0 or a mix, per-feature and
asymmetric weights, fixed features).

* :func:`exact_counterfactual`: depth-first search with the children ordered by
  distance finds a first target region fast (the backtracking of algorithm 4,
  an upper bound), and the same search continued with pruning is the
  branch and bound of algorithm 5. A node is pruned when its distance exceeds
  the bound, and (stronger than the paper's "some alive leaf votes for the
  target") when even the best alive leaf of every tree within the remaining
  budget cannot give the target.
* :func:`counterfactual_set`: every target region within a radius (CF sets).
* :func:`slice_regions` / :func:`projection_regions`: 2-D views, the slice
  through ``x`` and the projection of target regions within a radius (Fig. 7).

A model that is not a tree ensemble (``model`` with its ``surrogate``, as
:meth:`core.intake.workspace.Workspace.query_model` gives them) has no pure
regions of its own: the regions are its surrogate's, exact for the surrogate and
labelled so (guarantee ``exact`` with the surrogate's fidelity), and each region's
point nearest the query is put to the model itself (``Region.on_model``, one
batched call). Its counterfactual is the surrogate's nearest region checked and
repaired on the model (:func:`core.surrogate.repair.checked_counterfactual`):
valid on the model, never called exact for it. A linear model's exact
counterfactual is its MILP (:func:`core.optimal.optimal_counterfactual`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Sequence

import numpy as np

from core.cells import CellProblem, QueryRun, best_start, build_problem, local_search, score_needs
from core.cells.bounds import radius_for, range_min, range_min_table, target_needs
from core.cells.problem import TreeBlock
from core.constraints import Constraints
from core.counterfactual import CounterfactualResult, QueryError, at_target, check_time_limit
from core.model import Guarantee, LinearModel, TreeEnsemble, as_ensemble, as_model, kind_of
from core.model.box import Box
from core.model.features import as_row, feature_index
from core.model.missing import indicator_of
from core.model.result import Reader, Result, Writer, older_name, settings
from core.optimal import optimal_counterfactual, other_models, query_door
from core.optimal.constrained import resolve_constraints
from core.settings import TIME_LIMIT, integer, nonnegative, norm_setting, open_probability, optional, seconds, validated
from core.surrogate import Surrogate
from core.surrogate.repair import ModelOnView, checked_counterfactual
from core.typing import ArrayLike, FeatureKey, ModelLike, Norm, Row, Rows, TargetSpec, Weights

if TYPE_CHECKING:
    from core.schema import Schema

__all__ = ["Region", "RegionSet", "exact_counterfactual", "counterfactual_set", "slice_regions",
           "projection_regions", "projection_reach", "decompose"]


@dataclass(frozen=True)
class Region(Box):
    """A pure region: the box ``lower < x <= upper`` on which the ensemble's output is constant."""

    raw: np.ndarray          # the ensemble's raw output (predict_raw) on the region
    prediction: Any          # label or value on the region
    distance: float          # cost from the query to the region (0 if no query)
    point: np.ndarray        # the region's point nearest the query (strictly inside)
    on_model: bool | None = None   # a surrogate's region: does the model itself agree at ``point``? (None: not asked)


@dataclass(frozen=True, eq=False)
class RegionSet(Result):
    """Regions found by a search, with how the search went (a :class:`core.model.result.Result`).

    regions : the pure regions, nearest first where there is a query.
    complete : False if the node or time limit stopped the search (the regions listed are
        exact; there may be more).
    n_nodes : nodes of the search tree visited; elapsed : seconds (``seconds``, its older
        name, reads the same); params : the search's settings.
    guarantee : ``exact`` (each region is read exactly off the trees).
    """

    kind: ClassVar[str] = "region_set"
    what: ClassVar[str] = "set of decision regions"

    regions: tuple[Region, ...]
    complete: bool           # False if the node or time limit stopped the search
    n_nodes: int
    elapsed: float
    params: dict[str, Any] = field(default_factory=dict)
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: exact, incomplete when stopped

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if self.guarantee is None:
            object.__setattr__(self, "guarantee", Guarantee("exact", note="" if self.complete else (
                "The search stopped at its limit: every region listed is exact, but there may be more.")))

    seconds = older_name("seconds")

    def _body(self) -> dict[str, Any]:
        return {"complete": bool(self.complete), "n_nodes": int(self.n_nodes),
                "regions": [_region_dict(r) for r in self.regions]}

    @classmethod
    def _from_body(cls, r: Reader) -> "RegionSet":
        return cls(tuple(_region_from(Reader(g, "region")) for g in r.get("regions")), bool(r.get("complete")),
                   int(r.get("n_nodes")), r.number("elapsed"), dict(r.get("params")),
                   Guarantee.from_dict(r.get("guarantee")))


def _region_dict(reg: Region) -> dict[str, Any]:
    w = Writer().array("lower", reg.lower, -np.inf).array("upper", reg.upper, np.inf)
    w.array("raw", reg.raw).value("prediction", reg.prediction).number("distance", reg.distance, np.inf)
    w.array("point", reg.point)
    if reg.on_model is not None:
        w.value("on_model", bool(reg.on_model))
    return w.done()


def _region_from(r: Reader) -> Region:
    on_model = r.get("on_model", None)
    return Region(r.array("lower", -np.inf), r.array("upper", np.inf), r.array("raw"), r.get("prediction"),
                  r.number("distance", np.inf), r.array("point"), None if on_model is None else bool(on_model))


class _Search:
    """Depth-first search over dimensions (algorithms 2, 4 and 5)."""

    def __init__(self, prob: CellProblem, allowed: list[np.ndarray], order: Sequence[int], deadline: float,
                 max_nodes: int, block: tuple[TreeBlock, list[tuple[np.ndarray, float]]]):
        self.prob = prob
        self.blk, self.score_needs = block          # search_block(prob)
        self.order = list(order)
        self.deadline = deadline
        self.max_nodes = max_nodes
        self.nodes = 0
        self.stopped = False
        self.costs = [np.where(a, c, np.inf) for c, a in zip(prob.costs, allowed)]
        self.tables = [range_min_table(c) for c in self.costs]
        lo, hi = self.blk.lo, self.blk.hi
        mc = np.column_stack([range_min(self.tables[j], lo[:, j], hi[:, j]) for j in range(prob.n_features)])
        # remaining distance of each leaf over the dimensions after position k in the order
        ordered = mc[:, self.order]
        self.suffix = np.concatenate([np.cumsum(ordered[:, ::-1], axis=1)[:, ::-1],
                                      np.zeros((mc.shape[0], 1))], axis=1)

    def out_of_budget(self) -> bool:
        if self.nodes >= self.max_nodes or time.perf_counter() > self.deadline:
            self.stopped = True
        return self.stopped

    def children(self, k: int, alive: np.ndarray, dist: float):
        """Maximal intersection intervals of the alive leaves on dimension order[k]."""
        j = self.order[k]
        lo = self.blk.lo[alive, j]
        hi = self.blk.hi[alive, j]
        cuts = np.unique(np.concatenate([lo, hi + 1]))
        out = []
        for a, b in zip(cuts[:-1], cuts[1:] - 1):
            c = float(range_min(self.tables[j], np.array([a]), np.array([b]))[0])
            if not np.isfinite(c):
                continue
            members = alive[(lo <= a) & (hi >= b)]
            out.append((dist + c, int(a), int(b), members))
        out.sort(key=lambda t: t[0])
        return out

    def bound(self, k: int, members: np.ndarray, dist: float) -> float:
        """Lower bound on the cost of a valid point below this node."""
        leaf_d = dist + self.suffix[members, k + 1]
        r = dist
        for score, need in self.score_needs:
            r = max(r, radius_for(leaf_d, self.blk.tree_of[members], score[members], need))
            if not np.isfinite(r):
                break
        return r


def search_block(prob: CellProblem) -> tuple[TreeBlock, list[tuple[np.ndarray, float]]]:
    """The leaves the search decomposes and the target needs on them: the model's;
    with other models (``also_valid_for``), every model's trees side by side, so a
    pure region is pure for all of them, and each model's needs on its own rows
    (zero elsewhere), so the pruning bound holds for every target at once."""
    blk = prob.model_leaves
    if not prob.others:
        return blk, score_needs(prob)
    parts = [(blk, prob.ens, prob.target)] + [(o.leaves, o.ens, o.target) for o in prob.others]
    offsets = np.cumsum([0] + [b.n_trees for b, _, _ in parts])
    sizes = np.cumsum([0] + [b.tree_of.size for b, _, _ in parts])
    width = blk.value.shape[1]
    value = np.zeros((sizes[-1], width))
    value[:sizes[1]] = blk.value                        # other models' values never enter a region's raw
    combined = TreeBlock(np.concatenate([b.tree_of + off for (b, _, _), off in zip(parts, offsets)]),
                         np.concatenate([b.node for b, _, _ in parts]),
                         np.vstack([b.lo for b, _, _ in parts]), np.vstack([b.hi for b, _, _ in parts]),
                         value, int(offsets[-1]))
    needs = []
    for k, (b, ens, tgt) in enumerate(parts):
        for score, need in target_needs(ens, tgt, b.value):
            full = np.zeros(sizes[-1])
            full[sizes[k]:sizes[k + 1]] = score
            needs.append((full, need))
    return combined, needs


def _cells_nearest(prob: CellProblem, costs: list[np.ndarray], ranges: dict[int, tuple[int, int]]) -> np.ndarray:
    cells = np.zeros(prob.n_features, dtype=np.int64)
    for j in range(prob.n_features):
        a, b = ranges[j]
        cells[j] = a + int(np.argmin(costs[j][a:b + 1]))
    return cells


def _region(prob: CellProblem, ranges: dict[int, tuple[int, int]], members: np.ndarray, dist: float,
            costs: list[np.ndarray]) -> Region:
    d = prob.n_features
    lower, upper = np.empty(d), np.empty(d)
    for j in range(d):
        a, b = ranges[j]
        lv = prob.levels[j]
        lower[j] = lv[a - 1] if a >= 1 else -np.inf
        upper[j] = lv[b] if b < lv.size else np.inf
    point = prob.point_of(_cells_nearest(prob, costs, ranges))
    blk = prob.model_leaves
    raw = blk.value[members[members < blk.tree_of.size]].sum(axis=0) + prob.ens.base_score
    pred = prob.ens.predict(point[None, :])[0]
    return Region(lower, upper, raw, pred, dist, point)


def _feature_order(prob: CellProblem, blk: TreeBlock, allowed: list[np.ndarray]) -> list[int]:
    """Dimensions with one allowed interval first (they only filter leaves), then by
    how many leaves of ``blk`` they split, most first: the alive set shrinks fastest."""
    n_allowed = [int(a.sum()) for a in allowed]
    splits = [int(np.sum((blk.lo[:, j] > 0) | (blk.hi[:, j] < prob.levels[j].size))) for j in range(prob.n_features)]
    return sorted(range(prob.n_features), key=lambda j: (n_allowed[j] > 1, -splits[j]))


def _greedy_dive(s: _Search, prob: CellProblem) -> np.ndarray | None:
    """One descent choosing, on each dimension, the child whose alive leaves can
    best reach the target (largest worst-case slack over the score needs); the
    cells of a valid region, polished by the local search, or None."""
    blk = s.blk
    alive, ranges = np.arange(blk.tree_of.size), {}
    for k in range(len(s.order)):
        best, best_slack = None, -np.inf
        for _, a, b, members in s.children(k, alive, 0.0):
            slack = np.inf
            for score, need in s.score_needs:
                top = np.full(blk.n_trees, -np.inf)
                np.maximum.at(top, blk.tree_of[members], score[members])
                slack = min(slack, float(top.sum() - need))
            if slack > best_slack:
                best, best_slack = (a, b, members), slack
        if best is None:
            return None
        a, b, alive = best
        ranges[s.order[k]] = (a, b)
    cells = _cells_nearest(prob, s.costs, ranges)
    if not prob.is_valid(prob.point_of(cells)[None, :])[0]:
        return None
    return local_search(prob, cells)


def _run(prob: CellProblem, allowed: list[np.ndarray], *, mode: str, radius: float = np.inf,
         time_limit: float = TIME_LIMIT, max_nodes: int = 1_000_000, max_regions: int = 100_000,
         target_only: bool = True):
    """mode "best": the nearest valid region (branch and bound); mode "all": every
    region within ``radius`` (valid ones only if ``target_only``)."""
    block = search_block(prob)
    order = _feature_order(prob, block[0], allowed)
    s = _Search(prob, allowed, order, time.perf_counter() + check_time_limit(time_limit), max_nodes, block)
    out = _Found(mode, target_only, max_regions, radius)
    if mode == "best" and not np.isfinite(out.ub):  # an upper bound before the search (algorithm 4's role)
        cells = _greedy_dive(s, prob)
        if cells is not None:
            out.best = (prob.cost_of(cells), cells)
            out.ub = out.best[0]
    stack: list[tuple[int, np.ndarray, float, dict[int, tuple[int, int]]]] = [
        (0, np.arange(s.blk.tree_of.size), 0.0, {})]
    while stack:
        if s.out_of_budget():
            break
        k, alive, dist, ranges = stack.pop()
        if out.beyond(dist):  # the bound improved since this node was queued
            continue
        s.nodes += 1
        kids = _expand(s, out, k, alive, dist, ranges)
        kids.sort(key=lambda t: t[0])  # the child with the smallest lower bound is explored first
        stack.extend(kid[1:] for kid in reversed(kids))
    return out.best, out.regions, s


@dataclass
class _Found:
    """What the search has found: mode "best", the nearest valid region's cells and its
    distance (the bound ``ub``); mode "all", the regions within ``ub`` (valid ones only if
    ``target_only``), at most ``max_regions``."""

    mode: str
    target_only: bool
    max_regions: int
    ub: float
    best: tuple[float, np.ndarray] | None = None
    regions: list[Region] = field(default_factory=list)

    def beyond(self, dist: float) -> bool:
        """Is ``dist`` past the bound (up to rounding)?"""
        return dist > self.ub * (1 + 1e-12) + 1e-15

    def leaf(self, s: _Search, ranges: dict[int, tuple[int, int]], members: np.ndarray, dist: float) -> bool:
        """A region (every dimension decided) at ``dist``: kept as the best, or among the regions.
        True when the regions reach ``max_regions`` (the search stops)."""
        prob = s.prob
        reg_cells = _cells_nearest(prob, s.costs, ranges)
        point = prob.point_of(reg_cells)
        valid = bool(prob.is_valid(point[None, :])[0])
        if self.mode == "best":
            if valid and dist < (self.best[0] if self.best else np.inf):
                self.best = (dist, reg_cells)
                self.ub = dist
            return False
        if valid or not self.target_only:
            self.regions.append(_region(prob, ranges, members, dist, s.costs))
            if len(self.regions) >= self.max_regions:
                s.stopped = True
                return True
        return False


def _expand(s: _Search, out: _Found, k: int, alive: np.ndarray, dist: float,
            ranges: dict[int, tuple[int, int]]) -> list[tuple[float, int, np.ndarray, float, dict[int, tuple[int, int]]]]:
    """The children of a node on dimension ``order[k]`` within the bound, each with its lower
    bound (the pruning bound when only valid regions count); at the last dimension, each is a
    region, handed to ``out``."""
    kids = []
    for cdist, a, b, members in s.children(k, alive, dist):
        if out.beyond(cdist):
            break  # children are sorted by distance
        lb = s.bound(k, members, cdist) if out.target_only else cdist
        if out.beyond(lb):
            continue
        r2 = dict(ranges)
        r2[s.order[k]] = (a, b)
        if k + 1 < len(s.order):
            kids.append((lb, k + 1, members, cdist, r2))
            continue
        if out.leaf(s, r2, members, cdist):
            break
    return kids


# ------------------------------------------------------------------ public API
def _problem(ensemble, x, target, norm, weights, schema, X_ref=None, also_valid_for=(), margin=None, **roles):
    """The ensemble, the query's problem, its reference rows and its actionability
    lists (feature names), checked at the door (:func:`core.optimal.query_door`)."""
    ens = as_ensemble(ensemble)
    x, X_ref, roles = query_door(ens, x, X_ref, schema, **roles)
    others = other_models(also_valid_for)
    return ens, build_problem(ens, x, target, schema=schema, norm=norm, weights=weights, also_valid_for=others,
                              margin=margin, **roles), X_ref, roles


@validated(QueryError, norm=norm_setting, time_limit=seconds, max_nodes=integer(1), margin=optional(open_probability))
def exact_counterfactual(ensemble: ModelLike, x: Row, target: TargetSpec, *, norm: Norm = "l1",
                         weights: Weights = None, fixed: Iterable[Any] | None = None,
                         increase_only: Iterable[Any] | None = None, decrease_only: Iterable[Any] | None = None,
                         time_limit: float = TIME_LIMIT, schema: Schema | None = None,
                         X_ref: Rows | None = None, model: ModelLike = None, max_nodes: int = 5_000_000,
                         also_valid_for: Iterable[Any] = (), margin: float | None = None,
                         surrogate: Surrogate | None = None,
                         constraints: Iterable[str] | Constraints | None = None) -> CounterfactualResult:
    """The closest point of a region where the ensemble gives ``target``, exactly.

    What "exact" means depends on the model, and the result's ``guarantee`` says it: a
    tree ensemble's nearest region is proven optimal; a linear model's counterfactual is
    its MILP (:func:`core.optimal.optimal_counterfactual`, proven optimal); any other
    model, given as ``model`` with its ``surrogate``, has no regions of its own: the
    surrogate's nearest region is checked and repaired on the model
    (:func:`core.surrogate.repair.checked_counterfactual`), valid on the model, optimal
    only for the surrogate.

    Parameters
    ----------
    ensemble : TreeEnsemble, LinearModel or a supported model (ignored with ``surrogate``:
        the surrogate's view is searched).
    x : array-like of shape (n_features,).
    target : class label, or ``(lo, hi)`` for a regressor.
    norm : {"l1", "l0", "l2"} or dict, default "l1" (as every analysis); "l2" is the squared
        Euclidean distance of the paper.
    weights : per-feature weights, as in ``core.optimal``.
    fixed, increase_only, decrease_only : features (names or indices) that must not move, may
        only go up, may only go down; a list replaces the schema's features of that role, None
        (default) keeps them (as in ``core.optimal``).
    X_ref : optional reference rows whose nearest valid one seeds the upper bound (a greedy
        start from the model seeds it too, so the search is fast without them).
    also_valid_for : further models reading the same features (TreeEnsembles or model
        objects): the region must give ``target`` on every one; the search runs over all
        their trees at once (:func:`search_block`).
    margin : a classifier's probability for ``target`` must be at least this (every model).
    model : the original model: a tree ensemble's point is also checked on it; with
        ``surrogate``, the model every point is checked and repaired on.
    surrogate : the :class:`core.surrogate.Surrogate` of ``model`` (a model that is not
        read exactly), or None.
    constraints : constraint texts between features (:mod:`core.constraints`), default None
        (the schema's own). The regions' search cannot take them: with constraints in force
        the query goes to the solver that can (:func:`core.optimal.optimal_counterfactual`'s
        constrained MILP), and ``params["notice"]`` says so.

    Returns
    -------
    CounterfactualResult with ``backend="regions"`` ("surrogate" through a surrogate, the
    linear solver's for a linear model); the same cost convention as ``core.optimal``
    (an open interval end counts at its infimum).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import exact_counterfactual, from_model, optimal_counterfactual
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(data.data, data.target)
    >>> ens, x = from_model(rf), data.data.to_numpy()[0]
    >>> exact = exact_counterfactual(ens, x, 1, norm="l1")
    >>> milp = optimal_counterfactual(ens, x, 1, norm="l1")
    >>> exact.status, abs(exact.cost - milp.cost) < 1e-9
    ('optimal', True)
    """
    query: dict[str, Any] = dict(norm=norm, weights=weights, fixed=fixed, increase_only=increase_only,
                                 decrease_only=decrease_only, time_limit=time_limit, schema=schema)
    cons = resolve_constraints(constraints, schema)
    if surrogate is not None:             # any other model: the surrogate's regions, checked on the model
        return _through_surrogate(model, x, target, surrogate, also_valid_for, margin, X_ref=X_ref,
                                  constraints=cons if len(cons) else None, **query)
    read = ensemble if isinstance(ensemble, (TreeEnsemble, LinearModel)) else as_model(ensemble)
    if len(cons) and isinstance(read, TreeEnsemble):   # the one solver that takes constraints between features
        res = optimal_counterfactual(read, x, target, also_valid_for=also_valid_for, margin=margin, model=model,
                                     X_ref=X_ref, constraints=cons, **query)
        notice = "Solved by the constrained MILP: the regions' search cannot take constraints between features."
        return replace(res, params={**res.params, "notice": res.params.get("notice") or notice})
    if isinstance(read, LinearModel):      # no regions to search: its MILP is exact (core.solvers.linear)
        original = model if model is not None or isinstance(ensemble, LinearModel) else ensemble
        return optimal_counterfactual(read, x, target, also_valid_for=also_valid_for, margin=margin, model=original,
                                      constraints=cons, **query)
    return _nearest_region(read, x, target, query, X_ref=X_ref, model=model, max_nodes=max_nodes,
                           also_valid_for=also_valid_for, margin=margin)


def _nearest_region(read: ModelLike, x: Row, target: TargetSpec, query: dict[str, Any], *, X_ref: Rows | None,
                    model: ModelLike, max_nodes: int, also_valid_for: Iterable[Any],
                    margin: float | None) -> CounterfactualResult:
    """A tree ensemble's nearest region giving ``target`` (branch and bound from the best
    start), or the start it did not beat; else out of time, or infeasible (proven)."""
    t0 = time.perf_counter()
    time_limit = check_time_limit(query["time_limit"])
    norm = query["norm"]
    ens, prob, ref, roles = _problem(read, x, target, norm, query["weights"], query["schema"], X_ref, also_valid_for,
                                     margin, fixed=query["fixed"], increase_only=query["increase_only"],
                                     decrease_only=query["decrease_only"])
    params = dict(norm=norm if isinstance(norm, str) else dict(norm), **roles,
                  time_limit=time_limit, target=str(target), method="branch and bound (Blanchart)",
                  margin=margin, also_valid_for=len(prob.others))
    ws_x, ub = best_start(prob, ref, deadline=t0 + 0.25 * time_limit)
    allowed = [np.isfinite(c) for c in prob.costs]
    best, _, s = _run(prob, allowed, mode="best", radius=ub, time_limit=time_limit, max_nodes=max_nodes)
    run = QueryRun(prob, params, t0, {"search": time.perf_counter() - t0, "nodes": s.nodes}, model)
    status = "optimal" if not s.stopped else "time_limit"
    if best is not None or ws_x is not None:   # the best region found, or the start it did not beat
        point, cost = (prob.point_of(best[1]), prob.cost_of(best[1])) if best is not None else (ws_x, ub)
        return run.result(point, cost, status, backend="regions", gap=0.0 if status == "optimal" else np.nan,
                          lower_bound=cost if status == "optimal" else 0.0)
    if s.stopped:
        return run.out_of_time("regions")
    return run.infeasible("regions")


def _needs_model(model: ModelLike, surrogate: Any) -> None:
    if model is None:
        raise QueryError("A surrogate is given without the model it stands for: pass model= as well.")
    if not isinstance(surrogate, Surrogate):
        raise QueryError("surrogate is the core.surrogate.Surrogate distilled from the model (a workspace's "
                         f"ws.surrogate); got {type(surrogate).__name__}.")


def _through_surrogate(model: ModelLike, x: Row, target: TargetSpec, surrogate: Surrogate,
                       also_valid_for: Iterable[Any], margin: float | None, **query: Any) -> CounterfactualResult:
    """:func:`exact_counterfactual` of a model known by its answers: the surrogate's
    nearest region, checked and repaired on the model (the surrogate refitted where the
    model refuses), as :func:`core.optimal.optimal_counterfactual` does with its solver."""
    _needs_model(model, surrogate)
    unsupported = [what for what, used in (("also_valid_for", bool(tuple(also_valid_for or ()))),
                                           ("a probability margin", margin is not None)) if used]
    if unsupported:
        raise QueryError(f"Through a surrogate the exact counterfactual does not take {', '.join(unsupported)} "
                         "yet; leave them out.")
    return checked_counterfactual(model, x, target, surrogate=surrogate, solve=_on_surrogate, **query)


def _on_surrogate(ens: TreeEnsemble, x: Row, target: TargetSpec, *, n_workers: int = 1,
                  **query: Any) -> CounterfactualResult:   # constraints= among the query's settings
    """The exact search on a surrogate's trees, called as
    :func:`core.surrogate.repair.checked_counterfactual` calls its solver (the search
    runs in one thread: ``n_workers`` does not apply)."""
    return exact_counterfactual(ens, x, target, **query)


def _checked(regions: Sequence[Region], model: ModelLike, ens: TreeEnsemble,
             target: TargetSpec | None) -> tuple[Region, ...]:
    """Surrogate's regions with ``on_model``: does the model itself give ``target`` at
    each region's nearest point (``target`` None: the region's own class; a regressor's
    region without a target is not asked)? One batched call to the model."""
    if not regions or (target is None and ens.task != "classification"):
        return tuple(regions)
    oracle = ModelOnView(model, ens, target)
    answers = np.asarray(model.predict(oracle.native(np.array([r.point for r in regions]))))
    if target is not None:
        ok = at_target(ens, target, answers)
    else:
        ok = np.array([str(a) == str(r.prediction) for a, r in zip(answers, regions)], dtype=bool)
    return tuple(replace(r, on_model=bool(o)) for r, o in zip(regions, ok))


def _surrogate_guarantee(model: ModelLike, surrogate: Surrogate, regions: Sequence[Region], complete: bool,
                         what: str) -> Guarantee:
    """A surrogate's regions: exact for the surrogate (its fidelity), not for the model,
    with how many of them the model itself agrees with at their nearest point."""
    asked = [r.on_model for r in regions if r.on_model is not None]
    notes = []
    if asked:
        notes.append(f"The model itself {what} at the nearest point of {sum(asked):,} of these {len(asked):,} "
                     "regions.")
    if not complete:
        notes.append("The search stopped at its limit: there may be more regions.")
    return Guarantee("exact", model_kind=kind_of(model),
                     surrogate_fidelity=surrogate.fidelity, boundary_fidelity=surrogate.boundary_fidelity,
                     note=" ".join(notes))


@validated(QueryError, radius=nonnegative, norm=norm_setting, time_limit=seconds, max_regions=integer(1))
def counterfactual_set(ensemble: ModelLike, x: Row, target: TargetSpec, radius: float, *, norm: Norm = "l1",
                       weights: Weights = None, fixed: Iterable[Any] | None = None,
                       increase_only: Iterable[Any] | None = None, decrease_only: Iterable[Any] | None = None,
                       schema: Schema | None = None, time_limit: float = TIME_LIMIT,
                       max_regions: int = 10_000, model: ModelLike = None,
                       surrogate: Surrogate | None = None) -> RegionSet:
    """Every region within ``radius`` (cost) of ``x`` where the ensemble gives ``target``.

    Parameters
    ----------
    ensemble : TreeEnsemble or a supported model (ignored with ``surrogate``: its view is searched).
    x : array-like of shape (n_features,), the query.
    target : a class label, or ``(lo, hi)`` for a regressor.
    radius : float, the largest cost of a region (its point nearest ``x``): a finite number >= 0.
    norm, weights, fixed, increase_only, decrease_only, schema : as in :func:`exact_counterfactual`
        (default norm "l1").
    time_limit : float, default 30.0, seconds for the search.
    max_regions : int, default 10_000, stop after this many regions.
    model, surrogate : a model that is not a tree ensemble and its
        :class:`core.surrogate.Surrogate` (a workspace's ``query_model()`` extras, with
        ``model`` the linear model itself for a linear one): the regions are the
        surrogate's, each one's nearest point put to the model (``Region.on_model``), and
        the guarantee says they are exact for the surrogate, not for the model. A tree
        ensemble's own model (``model`` alone) adds nothing: its regions are read off it.

    Returns
    -------
    RegionSet
        The pure regions found, nearest first, and whether the search completed.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import counterfactual_set, from_model
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(data.data, data.target)
    >>> found = counterfactual_set(from_model(rf), data.data.to_numpy()[0], 1, radius=50.0, norm="l1")
    >>> found.complete, all(r.prediction == 1 and r.distance <= 50.0 for r in found.regions)
    (True, True)
    """
    t0 = time.perf_counter()
    if surrogate is not None:
        _needs_model(model, surrogate)
        ensemble = surrogate.ensemble
    ens, prob, _, roles = _problem(ensemble, x, target, norm, weights, schema, fixed=fixed,
                                   increase_only=increase_only, decrease_only=decrease_only)
    allowed = [np.isfinite(c) for c in prob.costs]
    _, found, s = _run(prob, allowed, mode="all", radius=float(radius), time_limit=time_limit,
                       max_regions=max_regions)
    found.sort(key=lambda r: r.distance)
    params = dict(radius=radius, target=str(target), norm=str(norm), **roles)
    if surrogate is None:
        return RegionSet(tuple(found), not s.stopped, s.nodes, time.perf_counter() - t0, params)
    regions = _checked(found, model, ens, target)
    return RegionSet(regions, not s.stopped, s.nodes, time.perf_counter() - t0, params,
                     _surrogate_guarantee(model, surrogate, regions, not s.stopped, "gives the target"))


def _two_features(ens: TreeEnsemble, features: Any) -> tuple[int, int]:
    """The two features of a 2-D view (names or indices), different."""
    if isinstance(features, (str, bytes)) or not hasattr(features, "__len__") or len(features) != 2:
        raise QueryError(f"features are the two features of the view, e.g. ({ens.feature_names[0]!r}, "
                         f"{ens.feature_names[-1]!r}); got {features!r:.60}.")
    fa, fb = (feature_index(ens.feature_names, f, error=QueryError, what="features") for f in features)
    if fa == fb:
        raise QueryError(f"Choose two different features (both are {ens.feature_names[fa]!r}).")
    return fa, fb


def _range(v: Any, key: Any) -> tuple[float, float]:
    """A view's range (lo, hi) of numbers with lo <= hi."""
    try:
        lo, hi = (float(t) for t in v)
    except (TypeError, ValueError):
        raise QueryError(f"bounds[{key!r}] is a range (lo, hi) of numbers; got {v!r:.60}.") from None
    if not lo <= hi:
        raise QueryError(f"bounds[{key!r}] = ({lo}, {hi}) is upside down (or NaN): lo must be <= hi.")
    return lo, hi


def _any_target(ens: TreeEnsemble) -> Any:
    if ens.task == "classification" and ens.classes is not None:
        return ens.classes[0]
    return (-np.inf, np.inf)


@validated(QueryError, time_limit=seconds, max_regions=integer(1))
def slice_regions(ensemble: ModelLike, x: Row, features: tuple[FeatureKey, FeatureKey], *, bounds: dict[Any, tuple[float, float]]
                  | None = None, time_limit: float = TIME_LIMIT, max_regions: int = 20_000, model: ModelLike = None,
                  surrogate: Surrogate | None = None) -> RegionSet:
    """The pure regions of the 2-D slice through ``x`` on two features (the
    others fixed at ``x``); they tile the slice. ``bounds`` optionally limits
    each of the two features to a range (the view). ``model`` with its ``surrogate``:
    the surrogate's slice, labelled so, each region's class put to the model at its
    point (``Region.on_model``; as :func:`counterfactual_set`)."""
    t0 = time.perf_counter()
    if surrogate is not None:
        _needs_model(model, surrogate)
        ensemble = surrogate.ensemble
    ens = as_ensemble(ensemble)
    fa, fb = _two_features(ens, features)
    x = as_row(x, ens.feature_names, error=QueryError, what="x")
    view = {feature_index(ens.feature_names, k, error=QueryError, what="bounds"): _range(v, k)
            for k, v in (bounds or {}).items()}
    prob = build_problem(ens, x, _any_target(ens))
    allowed = []
    for j in range(prob.n_features):
        a = np.zeros(prob.levels[j].size + 1, dtype=bool)
        if j in (fa, fb):
            a[:] = True
            if j in view:
                lo, hi = view[j]
                lv = prob.levels[j]
                a[:] = False
                a[np.searchsorted(lv, lo, side="left"):np.searchsorted(lv, hi, side="left") + 1] = True
        else:
            a[prob.hat[j]] = True
        allowed.append(a)
    prob.costs = [np.where(a, 0.0, np.inf) for a in allowed]
    _, found, s = _run(prob, allowed, mode="all", time_limit=time_limit, max_regions=max_regions,
                       target_only=False)
    params = dict(features=[ens.feature_names[fa], ens.feature_names[fb]], mode="slice")
    if surrogate is None:
        return RegionSet(tuple(found), not s.stopped, s.nodes, time.perf_counter() - t0, params)
    regions = _checked(found, model, ens, None)
    return RegionSet(regions, not s.stopped, s.nodes, time.perf_counter() - t0, params,
                     _surrogate_guarantee(model, surrogate, regions, not s.stopped, "gives the region's class"))


@validated(QueryError, radius=nonnegative, norm=norm_setting, time_limit=seconds, max_regions=integer(1))
def projection_regions(ensemble: ModelLike, x: Row, target: TargetSpec, features: tuple[FeatureKey, FeatureKey],
                       radius: float, *, norm: Norm = "l1", weights: Weights = None, fixed: Iterable[Any] | None = None,
                       increase_only: Iterable[Any] | None = None, decrease_only: Iterable[Any] | None = None,
                       schema: Schema | None = None, time_limit: float = TIME_LIMIT, max_regions: int = 5_000,
                       model: ModelLike = None, surrogate: Surrogate | None = None) -> RegionSet:
    """Regions within ``radius`` of ``x`` giving ``target``, for projection on two
    features (the paper's Fig. 7): the same regions as :func:`counterfactual_set`
    (``model`` and ``surrogate`` as there: a surrogate's regions, labelled so)."""
    ens = as_ensemble(surrogate.ensemble if isinstance(surrogate, Surrogate) else ensemble)
    fa, fb = _two_features(ens, features)
    rs = counterfactual_set(ens, x, target, radius, norm=norm, weights=weights, fixed=fixed,
                            increase_only=increase_only, decrease_only=decrease_only, schema=schema,
                            time_limit=time_limit, max_regions=max_regions, model=model, surrogate=surrogate)
    return RegionSet(rs.regions, rs.complete, rs.n_nodes, rs.elapsed,
                     dict(rs.params, features=[ens.feature_names[fa], ens.feature_names[fb]], mode="projection"),
                     rs.guarantee)


def projection_reach(cf: CounterfactualResult, ensemble: ModelLike, x: Row, target: TargetSpec, *,
                     norm: Norm = "l1", weights: Weights = None, schema: Schema | None = None,
                     time_limit: float = TIME_LIMIT) -> float:
    """The distance a projection's radius is a multiple of: the exact counterfactual's
    cost when it is ``ensemble``'s own nearest region; for a surrogate's regions
    (``ensemble`` a surrogate's view, ``cf`` the model's counterfactual, checked on it or
    exact for a linear model), the farther of ``cf`` and the surrogate's own nearest
    target region, so that both are drawn (the model's point may lie nearer than any
    region of the surrogate, or farther); ``inf`` when neither exists."""
    own = cf.cost if cf.found else np.inf
    if cf.backend == "regions":
        return float(own)
    if "surrogate" in cf.params:          # checked_counterfactual kept its surrogate's own answer
        near = cf.params["surrogate"].get("cost")
        near = np.inf if near is None else float(near)
    else:
        near = exact_counterfactual(ensemble, x, target, norm=norm, weights=weights, schema=schema,
                                    time_limit=time_limit).cost
    finite = [float(v) for v in (own, near) if np.isfinite(v)]
    return max(finite) if finite else float("inf")


@validated(QueryError, time_limit=seconds, max_regions=integer(1))
def decompose(ensemble: ModelLike, lower: ArrayLike | None = None, upper: ArrayLike | None = None, *, time_limit: float = 60.0,
              max_regions: int = 100_000) -> RegionSet:
    """All pure regions (maximal intersection boxes) inside the box
    ``lower < x <= upper`` (whole space by default), algorithms 1-2."""
    t0 = time.perf_counter()
    ens = as_ensemble(ensemble)
    d = ens.n_features
    lower = np.full(d, -np.inf) if lower is None else np.asarray(lower, dtype=float)
    upper = np.full(d, np.inf) if upper is None else np.asarray(upper, dtype=float)
    prob = build_problem(ens, np.zeros(d), _any_target(ens))
    allowed = []
    for j in range(d):
        lv = prob.levels[j]
        a = np.zeros(lv.size + 1, dtype=bool)
        # interval i = (lv[i-1], lv[i]] meets (lower, upper] iff lv[i-1] < upper and lv[i] > lower
        left = np.concatenate([[-np.inf], lv])
        right = np.concatenate([lv, [np.inf]])
        a[(left < upper[j]) & (right > lower[j])] = True
        allowed.append(a)
    prob.costs = [np.where(a, 0.0, np.inf) for a in allowed]
    _, found, s = _run(prob, allowed, mode="all", time_limit=time_limit, max_regions=max_regions,
                       target_only=False)
    clipped = tuple(Region(np.maximum(r.lower, lower), np.minimum(r.upper, upper), r.raw, r.prediction, 0.0,
                           r.point) for r in found)
    return RegionSet(clipped, not s.stopped, s.nodes, time.perf_counter() - t0, dict(mode="decompose"))


def default_axes(ens: TreeEnsemble) -> tuple[int, int]:
    """The two features a 2-D view draws until the analyst picks: the two the ensemble
    splits on most (ties: the first in order); a model of one feature draws it twice."""
    top = [int(j) for j in np.argsort(-ens.split_counts(), kind="stable")[:2]]
    return top[0], top[1] if len(top) > 1 else 0


def slice_view(schema: Schema, x: np.ndarray, axes: tuple[int, int],
               pad: float = 0.05) -> tuple[tuple[float, float], tuple[float, float]]:
    """The box a 2-D view of ``axes`` draws around row ``x``: each feature's range in
    ``schema`` stretched to hold the row, with ``pad`` of the range either side."""
    spans = schema.arrays()
    margin = pad * spans["span"]
    lo, hi = spans["lower"], spans["upper"]
    (a, b) = [(float(min(lo[j], x[j]) - margin[j]), float(max(hi[j], x[j]) + margin[j])) for j in axes]
    return a, b


def slice_point(ens: TreeEnsemble, x: np.ndarray, axes: tuple[int, int]) -> tuple[np.ndarray, list[int]]:
    """The point a slice through row ``x`` goes through, and the drawn features the row
    lacks. A drawn feature whose value is missing ("is missing" = 1) is read by no split,
    so a slice through the row would not change along it: the slice gives it a value
    instead (its indicator 0; its column holds the median, where a counterfactual giving
    a value starts from)."""
    states = indicator_of(ens)
    unknown = [j for j in axes if j in states and x[states[j]] > 0.5]
    point = np.array(x, dtype=float, copy=True)
    point[[states[j] for j in unknown]] = 0.0
    return point, unknown
