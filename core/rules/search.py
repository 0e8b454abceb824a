"""The search for counterfactual rules, as plain functions of the fitted state
(:class:`core.rules.state.FittedRules`): minimal divergent explanations
(subsets of the top_k features by increasing size), possible cells and their
greedy merging, a beam search over every feature for a set whose cells reach
pi_c, local and regional rules, and proposed sub-populations.

Actionability. ``fixed``, ``increase_only`` and ``decrease_only`` take feature
names or column indices (:meth:`FittedRules.features`; an unknown name or an
index out of range raises QueryError listing the features). A fixed feature is
never a candidate for S; a feature named both increase-only and decrease-only is
refused (:func:`core.model.features.feature_roles`: one that may move neither way
is listed in ``fixed``). A direction is a restriction of the admissible cells (the paper's
possible leaves), the CRP computation itself being unchanged: with the
admissible box ``(alo, ahi]`` (``alo_j`` just below ``a_j`` on an increase-only
feature, ``ahi_j = b_j`` on a decrease-only one, unbounded elsewhere),

* the possible cells come only from the target rows inside the admissible box
  on S (a row that would need an increase-only feature to go down is not a
  possible counterfactual), and
* every cell is intersected with the admissible box, so a rule's interval on an
  increase-only feature of S lies at or above ``a_j`` (``lower_j`` just below
  ``a_j``, ``upper_j >= a_j``), on a decrease-only one at or below ``b_j``.

For a local rule ``a_j = b_j = x_j``. The cell of a hybrid point is one leaf per
tree, and a sub-box of it reaches the same leaves in the Regional RF, so its
CRP is that of the whole cell; merged boxes are the bounding boxes of
admissible cells (hence admissible) and their CRP is computed by the Regional
RF as before. The counterfactual samples lie inside the rule, so they never
move a feature against its direction. For a regional rule ``a_j`` is the largest
and ``b_j`` the smallest value of the feature among the fitted rows of the
region (every such row can reach the rule by moving in the allowed direction),
and the CRP of the clipped cells is computed by the Regional RF. Not
direction-aware: the CDP that selects S (the Projected Forest lets the features
of S vary both ways, the paper's definition) and the beam search's CDP
tie-break; the beam search's count of cells reaching pi_c counts only the
admissible target rows.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from core.errors import NoCounterfactualRuleError, QueryError
from core.model import node_boxes
from core.model.features import feature_roles
from core.rules import bitsets, engines
from core.rules.bitsets import _below
from core.rules.reach import rule_reach
from core.rules.results import Box, LocalRule, RegionalRule, RuleLevels, rule_guarantee
from core.rules.state import FittedRules
from core.shown import below_text
from core.typing import Features, Row, TargetSpec

if TYPE_CHECKING:
    from core.constraints import Constraints

__all__ = ["search_subsets", "candidate_units", "actionability", "minimal_divergent_explanations", "cdp_of_sets",
           "local_rule", "regional_rules", "propose_regions"]


def rule_params(state: FittedRules, target: TargetSpec, levels: RuleLevels, fixed: Sequence[int], increase_only: Sequence[int],
                decrease_only: Sequence[int], constraints: Constraints | None = None) -> dict[str, Any]:
    """A rule query's ``params``: the target, the levels, the actionability (feature
    names), the constraints between features in force (their texts, when any), and the
    surrogate's rows and fidelity the estimates rest on."""
    names = list(state.feature_names)
    return {"target": target, "pi": levels.pi, "pi_c": levels.pi_c, "top_k": levels.top_k,
            "fixed": [names[j] for j in fixed], "increase_only": [names[j] for j in increase_only],
            "decrease_only": [names[j] for j in decrease_only], "n_rows": int(state.n),
            "fidelity": float(state.fidelity), "regression": bool(state.regression),
            **({"constraints": constraints.texts} if constraints is not None and len(constraints) else {})}


def search_subsets(cdp_of: Callable[[np.ndarray, int], np.ndarray], cand: list[int], pi: float, keep: int = 10):
    """Subsets of ``cand`` by increasing size; stop at the first size with
    CDP >= pi and return all of them (the minimal divergent explanations),
    best first, with True. When no subset reaches pi: the ``keep`` subsets
    with the highest CDP, smallest first, and False."""
    seen: list[tuple[float, int, tuple[int, ...]]] = []
    for s in range(1, len(cand) + 1):
        combos = list(itertools.combinations(range(len(cand)), s))
        subsets = np.zeros((len(combos), len(cand)), dtype=bool)
        for i, cmb in enumerate(combos):
            subsets[i, list(cmb)] = True
        cdp = cdp_of(subsets, s)
        hits = np.flatnonzero(cdp >= pi - 1e-12)
        if len(hits):
            found = sorted(((tuple(cand[k] for k in combos[h]), float(cdp[h])) for h in hits),
                           key=lambda p: -p[1])
            return found, True
        top = np.argsort(-cdp, kind="stable")[:keep]
        seen.extend((float(cdp[i]), s, tuple(cand[k] for k in combos[i])) for i in top)
    seen.sort(key=lambda p: (-p[0], p[1]))
    best = sorted(seen[:keep], key=lambda p: (p[1], -p[0]))    # the sparsest of the best first
    return [(u, c) for c, _, u in best], False


# -------------------------------------------------------------- actionability
def actionability(state: FittedRules, *, fixed: Features = None, increase_only: Features = None,
                  decrease_only: Features = None
                  ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(fixed, increase-only, decrease-only) columns from names or indices; a
    feature both increase-only and decrease-only raises QueryError (module doc)."""
    roles = feature_roles(state.feature_names, error=QueryError, fixed=fixed, increase_only=increase_only,
                          decrease_only=decrease_only)
    held, inc, dec = (tuple(roles[r] or ()) for r in ("fixed", "increase_only", "decrease_only"))
    frozen = set(held)
    return held, tuple(j for j in inc if j not in frozen), tuple(j for j in dec if j not in frozen)


def _allowed(state: FittedRules, inc: Sequence[int], dec: Sequence[int], low: np.ndarray, high: np.ndarray):
    """The admissible box ``(alo, ahi]`` (module doc): values at or above
    ``low`` on the increase-only columns, at or below ``high`` on the
    decrease-only ones; None when there is no direction."""
    if not len(inc) and not len(dec):
        return None
    alo, ahi = np.full(state.d, -np.inf), np.full(state.d, np.inf)
    inc, dec = list(inc), list(dec)
    alo[inc] = _below(np.asarray(low, float)[inc])
    ahi[dec] = np.asarray(high, float)[dec]
    return alo, ahi


def _inside(X: np.ndarray, S: Sequence[int], allow) -> np.ndarray:
    """Rows of X inside the admissible box on the columns S."""
    S = list(S)
    return np.all((X[:, S] > allow[0][S]) & (X[:, S] <= allow[1][S]), axis=1)


def _clip(lo: np.ndarray, hi: np.ndarray, S: Sequence[int], allow):
    """Cells (on the columns S) intersected with the admissible box, and which
    are not empty."""
    S = list(S)
    lo, hi = np.maximum(lo, allow[0][S]), np.minimum(hi, allow[1][S])
    return lo, hi, np.all(lo < hi, axis=1)


# -------------------------------------------------------------------- search
def _candidates(state: FittedRules, fixed: Sequence[int], top_k: int) -> list[int]:
    frozen = {int(state.unit_of[j]) for j in fixed}
    order = [u for u in np.argsort(-state.unit_usage, kind="stable")
             if u not in frozen and state.unit_usage[u] > 0]
    return [int(u) for u in order[:top_k]]


def candidate_units(state: FittedRules, *, fixed: Features = None, top_k: int | None = None) -> list[int]:
    """The top_k actionable units (one-hot groups or columns) by split usage;
    ``fixed``: names or column indices."""
    top_k = state.query_levels(None, None, top_k).top_k
    return _candidates(state, state.features(fixed, "fixed"), top_k)


def minimal_divergent_explanations(state: FittedRules, x: Row, target: TargetSpec, *, fixed: Features = None,
                                   pi: float | None = None, top_k: int | None = None
                                   ) -> list[tuple[tuple[int, ...], float]]:
    """All minimal S (column tuples) with CDP >= pi among the top_k
    actionable features, best first, with their CDP; [] if none."""
    x, lv = state.row(x), state.query_levels(pi, None, top_k)
    found, ok = _local_search(state, x, target, state.features(fixed, "fixed"), lv)
    return [(state.columns(u), c) for u, c in found] if ok else []


def _local_search(state: FittedRules, x: np.ndarray, target: TargetSpec, fixed: Sequence[int], lv: RuleLevels):
    _, ybits, _ = state.target(target)
    cand = _candidates(state, fixed, lv.top_k)
    if not cand:
        raise NoCounterfactualRuleError("No feature can change: every feature the surrogate uses is "
                                        "immutable (fixed).")

    def cdp_of(subsets: np.ndarray, level: int) -> np.ndarray:
        if bitsets.USE_COMPILED:
            cnt, pos, _ = engines.counts(state, x, engines.free_columns(state, cand, subsets), target)
            return engines.mean_share(cnt, pos)
        return engines.cdp_from_cells(state, engines.cells(state, x, cand, subsets, level), ybits, len(subsets))

    return search_subsets(cdp_of, cand, lv.pi)


def _possible_cells(state: FittedRules, rows: np.ndarray, S: tuple[int, ...], x: np.ndarray | None = None,
                    pos: np.ndarray | None = None, limit: int = 2000
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Candidate boxes on the columns ``S``: for each row, the forest cell
    (intersection over trees of the leaves) of the hybrid point taking the
    row's values on ``S`` and ``x``'s elsewhere, restricted to ``S``;
    deduplicated, with the number of rows behind each (at most ``limit``
    rows, a seeded sample beyond). Without ``x``, the rows' own cells
    (regional rules). With ``x`` and ``pos``, also each cell's CRP: the box
    with ``x`` on the other columns reaches exactly the hybrid's leaf in
    every tree (any other leaf holding ``x`` there is disjoint from it on
    ``S``), so the Regional RF estimate is the mean of those leaves' shares."""
    if len(rows) > limit:
        rows = np.sort(np.random.default_rng(state.random_state).choice(rows, limit, replace=False))
    Z = state.X[rows].copy()
    if x is not None:
        rest = np.setdiff1d(np.arange(state.d), S)
        Z[:, rest] = x[rest]
    g = state.global_leaves(Z) if x is not None else state.row_leaves[rows]
    lo = state.leaf_lower[g][:, :, S].max(axis=1)
    hi = state.leaf_upper[g][:, :, S].min(axis=1)
    key, first, mass = np.unique(np.hstack([lo, hi]), axis=0, return_index=True, return_counts=True)
    k = len(S)
    crp = None
    if x is not None and pos is not None:
        gg = g[first]
        crp = np.mean(pos[gg] / np.maximum(state.leaf_counts[gg], 1), axis=1)
    return key[:, :k], key[:, k:], mass.astype(float), crp


def _merge(lo: np.ndarray, hi: np.ndarray, crp: np.ndarray, mass: np.ndarray,
           crp_of: Callable[[np.ndarray, np.ndarray], np.ndarray], pi_c: float,
           xs: np.ndarray | None = None, max_cells: int = 200) -> list[Box]:
    """Greedy merging of possible cells (see the module docstring of
    :mod:`core.rules`); with ``xs``, a merged box must not contain the row's
    own values on S."""
    order = np.lexsort((-mass, -crp))[:max_cells]
    remaining = list(order)
    comps: list[tuple[np.ndarray, np.ndarray, float, int]] = []
    while remaining:
        seed = remaining.pop(0)
        clo, chi, ccrp, merged = lo[seed].copy(), hi[seed].copy(), float(crp[seed]), 1
        while remaining:
            rem = np.asarray(remaining)
            inside = np.all((lo[rem] >= clo) & (hi[rem] <= chi), axis=1)
            if inside.any():
                merged += int(inside.sum())
                remaining = [r for r, i in zip(remaining, inside) if not i]
                rem = rem[~inside]
                if not len(rem):
                    break
            touch = np.all((lo[rem] <= chi) & (hi[rem] >= clo), axis=1)
            cands = rem[touch]
            if not len(cands):
                break
            nlo, nhi = np.minimum(clo, lo[cands]), np.maximum(chi, hi[cands])
            c = crp_of(nlo, nhi)
            good = c >= pi_c - 1e-12
            if xs is not None:
                good &= ~np.all((xs > nlo) & (xs <= nhi), axis=1)
            ok = np.flatnonzero(good)
            if not len(ok):
                break
            b = ok[np.argmax(c[ok])]
            clo, chi, ccrp, merged = nlo[b], nhi[b], float(c[b]), merged + 1
            remaining.remove(cands[b])
        comps.append((clo, chi, ccrp, merged))
    comps.sort(key=lambda c: (-c[3], -c[2]))
    return [Box(a, b, c, m) for a, b, c, m in comps]


# --------------------------------------------------------------------- rules
def _local_cells(state: FittedRules, x: np.ndarray, S: tuple[int, ...], mask: np.ndarray, pos: np.ndarray,
                 pi_c: float, allow=None, cons: _Reaching | None = None):
    """Possible cells for ``x`` on ``S`` and their CRP, and whether one reaches
    pi_c; when none does, the candidate set with the highest CRP (None when
    there is no possible cell at all). ``allow``: the admissible box (module doc).
    ``cons``: constraints between features; a cell the row cannot reach under them
    (the other features kept, :func:`core.rules.reach.rule_reach`) counts as CRP 0 (and is
    counted in ``cons.dropped``)."""
    w = engines.projected_weights(state, x, S)
    Sarr = np.asarray(S)
    rest = np.setdiff1d(np.arange(state.d), Sarr)
    base = np.all((state.leaf_lower[:, rest] < x[rest]) & (x[rest] <= state.leaf_upper[:, rest]), axis=1)

    crp_of = engines.crp_fn(state, pos, base, Sarr)
    if allow is not None:
        mask = mask & _inside(state.X, S, allow)

    # the paper's possible leaves come from the target rows with positive
    # projected weight; when none of them gives a rule, from every target row
    best = None
    for rows in (np.flatnonzero((w > 0) & mask), np.flatnonzero(mask)):
        if not len(rows):
            continue
        lo, hi, mass, crp = _possible_cells(state, rows, S, x=x, pos=pos)
        assert crp is not None      # given x and pos, every cell has its CRP
        if allow is not None:       # a sub-box of a cell: the same leaves, the same CRP
            lo, hi, ok = _clip(lo, hi, S, allow)
            lo, hi, mass, crp = lo[ok], hi[ok], mass[ok], crp[ok]
            if not len(lo):
                continue
        xs = x[Sarr]
        crp = np.where(np.all((xs > lo) & (xs <= hi), axis=1), 0.0, crp)   # x's own cell is no recourse
        if cons is not None:
            crp = _reachable_crp(state, x, S, lo, hi, crp, pi_c, cons)
        cells = (lo, hi, crp, mass, crp_of)
        if np.any(crp >= pi_c - 1e-12):
            return cells, True
        if best is None or crp.max() > best[2].max():
            best = cells
    return best, False


@dataclass
class _Reaching:
    """The constraints of a rule query, and how many possible cells they left out."""

    cons: Constraints
    dropped: int = 0


#: under constraints, at most this many of a row's possible cells are checked (best CRP first)
REACH_CELLS = 200
#: and below pi_c, the search stops once this many reachable cells are found (the rule shows 5)
REACH_BELOW = 5


def _reachable_crp(state: FittedRules, x: np.ndarray, S: tuple[int, ...], lo: np.ndarray, hi: np.ndarray,
                   crp: np.ndarray, pi_c: float, cons: _Reaching) -> np.ndarray:
    """The cells' CRP with each cell the row cannot reach under ``cons`` set to 0, best CRP
    first: every cell reaching ``pi_c`` is checked (at most :data:`REACH_CELLS`), then, when
    none of those is reachable, the next ones until :data:`REACH_BELOW` are; the cells not
    checked count as 0 (never a rule). The features outside ``S`` are kept (the rule's
    statement); a one-way feature of ``S`` is already held to its direction by the cells."""
    reach = rule_reach(cons.cons, S)
    assert reach is not None
    out = np.zeros_like(crp)
    found = 0
    for i in np.argsort(-crp, kind="stable")[:REACH_CELLS]:
        if crp[i] <= 0 or crp[i] < pi_c - 1e-12 and found >= REACH_BELOW:
            break
        if reach.reachable(x[None, :], state.full(S, lo[i], -np.inf), state.full(S, hi[i], np.inf))[0]:
            out[i] = crp[i]
            found += 1
        else:
            cons.dropped += 1
    return out


def cdp_of_sets(state: FittedRules, x: np.ndarray, target: TargetSpec, sets: list[tuple[int, ...]]) -> np.ndarray:
    """CDP of each set of units in ``sets`` (compiled kernel or bitsets)."""
    cand = sorted({u for S in sets for u in S})
    at = {u: k for k, u in enumerate(cand)}
    sub = np.zeros((len(sets), len(cand)), dtype=bool)
    for i, S in enumerate(sets):
        sub[i, [at[u] for u in S]] = True
    if bitsets.USE_COMPILED:
        cnt, pos, _ = engines.counts(state, x, engines.free_columns(state, cand, sub), target)
        return engines.mean_share(cnt, pos)
    _, ybits, _ = state.target(target)
    return engines.cdp_from_cells(state, engines.cells(state, x, cand, sub, max(map(len, sets))), ybits, len(sets))


def _grow_rule(state: FittedRules, x: np.ndarray, target: TargetSpec, units: list[int], mask: np.ndarray, pos: np.ndarray,
               pi_c: float, allow=None, width: int = 8, n_rows: int = 128, tries: int = 3, support: int = 10,
               cons: _Reaching | None = None):
    """A set S whose possible cells reach ``pi_c``, searched over every unit of
    ``units`` when no divergent set gave one: a beam search over sets grown
    one unit at a time, on the CRP of S's possible cells. That CRP is exact
    and cheap: the cell of a hybrid point (a target row's values on S,
    ``x``'s elsewhere), with ``x`` elsewhere, reaches exactly the hybrid's
    leaf in every tree (``_possible_cells``), so its CRP is the mean of those
    leaves' target shares. Scored on the ``n_rows`` target rows nearest
    ``x`` (scaled L1). A set is ranked by how many of those rows give a cell
    reaching ``pi_c`` (up to ``support``), then by its CDP: the single best
    cell among thousands is where the surrogate is most often wrong about
    the model, and a set under which the target is common among rows like
    ``x`` (the paper's criterion for S) gives surer rules. Seen on breast
    cancer with the paper's protocol, all 143 held-out rows, correctness of
    the sampled counterfactuals for rows predicted negative / positive:
    0.94 / 0.98 ranking by the best cell, 0.96 / 1.0 by 3 cells then CDP,
    0.98 / 1.0 by 10 cells then CDP. The first set (smallest size) with
    ``support`` such rows is checked with every target row by
    ``_local_cells``; a set with fewer is kept in case no set gets
    ``support``. With ``allow`` (the admissible box), a row outside it on S
    gives no cell.
    Returns (S columns, cells, True), or (best S columns, its best cell CRP,
    False) when no set of any size reaches ``pi_c``."""
    rows = _nearest_rows(state, x, mask, n_rows)
    XR = state.X[rows]
    share = pos / np.maximum(state.leaf_counts, 1)
    best: tuple[float, tuple[int, ...]] = (-1.0, ())
    weak = None                      # a set reaching pi_c with fewer than ``support`` cells
    beam: list[tuple[int, ...]] = [()]

    def cells_of(S: tuple[int, ...]) -> tuple[Any, bool]:
        found: tuple[Any, bool] = _local_cells(state, x, S, mask, pos, pi_c, allow, cons)
        return found

    for _ in range(len(units)):
        sets = _grown_sets(beam, units)
        if not sets:
            break
        g = _hybrid_crp(state, x, sets, XR, share, allow)
        top = g.max(axis=1)
        reach = (g >= pi_c - 1e-12).sum(axis=1)
        key = np.minimum(reach, support) + cdp_of_sets(state, x, target, sets)   # support, then CDP
        order = np.argsort(-key, kind="stable")
        if top.max() > best[0]:
            best = (float(top.max()), sets[int(np.argmax(top))])
        done, weak = _try_sets(state, [sets[o] for o in order[:tries]], reach[order[:tries]], support, weak, cells_of)
        if done is not None:
            return done
        beam = [sets[o] for o in order[:width]]
    if weak is not None:
        return weak[0], weak[1], True
    return state.columns(best[1]), best[0], False


def _grown_sets(beam: list[tuple[int, ...]], units: list[int]) -> list[tuple[int, ...]]:
    """Every set of the beam grown by one more unit, each once, sorted."""
    return sorted({tuple(sorted(b + (u,))) for b in beam for u in units if u not in b})


def _nearest_rows(state: FittedRules, x: np.ndarray, mask: np.ndarray, n_rows: int) -> np.ndarray:
    """The target rows, at most the ``n_rows`` nearest ``x`` (scaled L1, ties by row order)."""
    rows = np.flatnonzero(mask)
    if len(rows) > n_rows:
        scale = state.X.std(axis=0)
        dist = np.sum(np.abs(state.X[rows] - x) / np.where(scale > 0, scale, 1.0), axis=1)
        rows = rows[np.argsort(dist, kind="stable")[:n_rows]]
    return rows


def _hybrid_crp(state: FittedRules, x: np.ndarray, sets: list[tuple[int, ...]], XR: np.ndarray,
                share: np.ndarray, allow: Any) -> np.ndarray:
    """(sets, rows) the CRP of each hybrid point's cell: a row's values on the set, ``x``'s
    elsewhere (0 for a row outside the admissible box on the set)."""
    Z = np.repeat(x[None, None, :], len(sets), axis=0).repeat(len(XR), axis=1)
    for i, S in enumerate(sets):
        cols = list(state.columns(S))
        Z[i][:, cols] = XR[:, cols]
    g: np.ndarray = share[state.global_leaves(Z.reshape(-1, len(x)))].mean(axis=1).reshape(len(sets), len(XR))
    if allow is not None:
        g = np.where(np.stack([_inside(XR, state.columns(S), allow) for S in sets]), g, 0.0)
    return g


def _try_sets(state: FittedRules, sets: list[tuple[int, ...]], reach: np.ndarray, support: int, weak: Any,
              cells_of: Callable[[tuple[int, ...]], tuple[Any, bool]]) -> tuple[Any, Any]:
    """The best-ranked sets checked with every target row, in order: the first whose cells
    reach pi_c with ``support`` rows is the answer; the first reaching it with fewer is kept
    as ``weak``. Returns (answer or None, weak)."""
    for units, n in zip(sets, reach):
        if n == 0 or (n < support and weak is not None):
            break
        S = state.columns(units)
        cells, reached = cells_of(S)
        if reached and n >= support:
            return (S, cells, True), weak
        if reached and weak is None:
            weak = (S, cells)
    return None, weak


def _why_below(state: FittedRules, x: np.ndarray, target: TargetSpec, fixed: Sequence[int], mask: np.ndarray,
               pos: np.ndarray, lv: RuleLevels, best: tuple[tuple[int, ...], float], allow=None,
               cons: _Reaching | None = None) -> str:
    """Why no rule reaches pi_c: which features reaching it would need."""
    names = state.feature_names
    S, q = best
    how = ("" if allow is None else " in their allowed directions") + \
        ("" if cons is None else " and keeping the constraints between features")
    text = (f"No region reaches CRP {lv.pi_c:g} when changing only features that may change{how} (searched over "
            f"all of them; best {below_text(q, lv.pi_c)}, changing {[names[j] for j in S]}).")
    frozen = {int(state.unit_of[j]) for j in fixed}
    if frozen:
        S2, got, ok = _grow_rule(state, x, target, _used_units(state), mask, pos, lv.pi_c, allow,
                                 cons=None if cons is None else _Reaching(cons.cons))
        if ok:
            return text + _fixed_needed(state, S2, frozen)
    return text + (" The surrogate gives no region near this row the target with that probability; "
                   "a lower pi_C gives a rule.")


def _used_units(state: FittedRules) -> list[int]:
    """Every unit the surrogate splits on, most used first."""
    return [int(u) for u in np.argsort(-state.unit_usage, kind="stable") if state.unit_usage[u] > 0]


def _fixed_needed(state: FittedRules, S: tuple[int, ...], frozen: set[int]) -> str:
    """The fixed features (and the others) of a set S that reaches pi_c, in a sentence."""
    names = state.feature_names
    need = [names[j] for j in S if int(state.unit_of[j]) in frozen]
    also = [names[j] for j in S if int(state.unit_of[j]) not in frozen]
    return f" Reaching it would need changing the fixed feature(s) {need}" + (f" (with {also})." if also else ".")


def local_rule(state: FittedRules, x: Row, target: TargetSpec, *, fixed: Features = None,
               increase_only: Features = None, decrease_only: Features = None, pi: float | None = None, pi_c: float | None = None,
               top_k: int | None = None, constraints: Constraints | None = None) -> LocalRule:
    """The local counterfactual rule of ``x`` for ``target`` (a class,
    ``("other", c)``, or an interval ``(lo, hi)`` of outputs).

    S is the first minimal divergent explanation (top_k features) whose
    possible cells reach pi_c; when none does (or none exists), a set of any
    of the actionable features whose cells do (``_grow_rule``). When no set
    reaches pi_c, the rule is the possible cell with the highest CRP, flagged
    ``below_pi_c`` (the paper's protocol gives every row a rule and reports
    its CRP), and ``note`` says why (the best CRP, the fixed features pi_c
    would need). Raises NoCounterfactualRuleError only when there is no
    possible cell with a positive CRP at all. ``pi``, ``pi_c`` and ``top_k``
    default to the fitted ones.

    ``fixed``, ``increase_only``, ``decrease_only``: feature names or column
    indices (QueryError for an unknown one). A fixed feature never changes; on
    an increase-only feature of S the rule's interval lies at or above
    ``x_j`` (``lower_j`` just below ``x_j``: every value it allows is
    ``>= x_j``), on a decrease-only one at or below ``x_j``, and the possible
    cells come only from target rows reached that way (module doc: what is
    and is not direction-aware).

    ``constraints``: the analyst's constraints between features (a parsed
    :class:`core.constraints.Constraints` of the rules' features, or None): a possible
    cell the row cannot reach under them, the other features kept
    (:mod:`core.rules.reach`), is left out of the rule and its alternatives (counted in
    ``unreachable_cells``), so every rule returned can be reached."""
    t0 = time.perf_counter()
    x = state.row(x)
    lv = state.query_levels(pi, pi_c, top_k)
    fixed, inc, dec = actionability(state, fixed=fixed, increase_only=increase_only, decrease_only=decrease_only)
    allow = _allowed(state, inc, dec, x, x)
    cons = None if constraints is None or not len(constraints) else _Reaching(constraints)
    found, divergent = _local_search(state, x, target, fixed, lv)
    if not found:
        raise NoCounterfactualRuleError("No subset of the actionable features changes the surrogate's output.")
    sets = tuple((state.columns(u), c) for u, c in found) if divergent else ()
    mask, _, pos = state.target(target)
    q = _LocalQuery(state, x, target, fixed, lv, mask, pos, allow, cons)
    got = _choose_set(q, found, divergent)
    full = _rule_boxes(state, got.S, got.cells, got.reached, lv.pi_c, x)
    return LocalRule(x=x, target=target, features=got.S, lower=full[0].lower, upper=full[0].upper, cdp=got.cdp,
                     crp=full[0].crp, divergent=got.divergent, n_cells=full[0].n_cells,
                     alternatives=tuple(full[1:]), divergent_sets=sets, elapsed=time.perf_counter() - t0,
                     below_pi_c=not got.reached, note=got.note,
                     params=rule_params(state, target, lv, fixed, inc, dec, constraints),
                     unreachable_cells=0 if cons is None else cons.dropped)


@dataclass(frozen=True)
class _LocalQuery:
    """One local rule's query: the row, its target's rows and leaves' counts, the levels, its
    actionability (``fixed``, the admissible box ``allow``) and constraints."""

    state: FittedRules
    x: np.ndarray
    target: TargetSpec
    fixed: Sequence[int]
    lv: RuleLevels
    mask: np.ndarray
    pos: np.ndarray
    allow: Any
    cons: _Reaching | None

    def cells(self, S: tuple[int, ...]) -> tuple[Any, bool]:
        """S's possible cells and whether one reaches pi_c (:func:`_local_cells`)."""
        found: tuple[Any, bool] = _local_cells(self.state, self.x, S, self.mask, self.pos, self.lv.pi_c, self.allow,
                                               self.cons)
        return found

    def why_below(self, best: tuple[tuple[int, ...], float]) -> str:
        return _why_below(self.state, self.x, self.target, self.fixed, self.mask, self.pos, self.lv, best,
                          self.allow, self.cons)


@dataclass(frozen=True)
class _Choice:
    """The set S a local rule is made on, its possible cells, its CDP, and whether they reach pi_c."""

    S: tuple[int, ...]
    cells: Any
    cdp: float
    reached: bool
    divergent: bool
    note: str = ""


def _better(cells: Any, fallback: tuple[Any, Any, float] | None) -> bool:
    """Whether ``cells`` has a better best cell than the fallback's (or there is none yet)."""
    return fallback is None or cells[2].max() > fallback[1][2].max()


def _choose_set(q: _LocalQuery, found: list[tuple[Any, float]], divergent: bool) -> _Choice:
    """The best explanation whose cells reach pi_c; else :func:`_grown_set`."""
    fallback = None
    for units, cdp in found:
        S = q.state.columns(units)
        cells, reached = q.cells(S)
        if reached:
            return _Choice(S, cells, cdp, True, divergent)
        if cells is not None and _better(cells, fallback):
            fallback = (S, cells, cdp)
    return _grown_set(q, found, divergent, fallback)


def _grown_set(q: _LocalQuery, found: list[tuple[Any, float]], divergent: bool,
               fallback: tuple[Any, Any, float] | None) -> _Choice:
    """No explanation's cells reach pi_c: a set whose best cell does, over every actionable
    feature (:func:`_grow_rule`); else the best cells found, flagged below pi_c with why."""
    state = q.state
    S, got, reached = _grow_rule(state, q.x, q.target, _candidates(state, q.fixed, len(state.units)), q.mask, q.pos,
                                 q.lv.pi_c, q.allow, cons=q.cons)
    if reached:
        cdp = engines.cdp(state, q.x, S, q.target)
        return _Choice(S, got, cdp, True, divergent and cdp >= q.lv.pi - 1e-12)
    if S:
        grown, _ = q.cells(S)
        if grown is not None and _better(grown, fallback):
            fallback = (S, grown, engines.cdp(state, q.x, S, q.target))
            divergent = divergent and fallback[2] >= q.lv.pi - 1e-12
    if fallback is None or fallback[1][2].max() <= 0:
        raise _no_rule(q, found, (S, got))
    S, cells, cdp = fallback
    return _Choice(S, cells, cdp, False, divergent, q.why_below((S, float(cells[2].max()))))


def _no_rule(q: _LocalQuery, found: list[tuple[Any, float]],
             best: tuple[tuple[int, ...], float]) -> NoCounterfactualRuleError:
    """No possible cell with a positive CRP: which features were tried, and why."""
    names = [q.state.feature_names[j] for j in q.state.columns(found[0][0])]
    blocked = (f" that this row can reach under the constraints between features "
               f"({'; '.join(q.cons.cons.texts)})" if q.cons is not None else "")
    return NoCounterfactualRuleError(
        f"No region on {names}{blocked} leads to the target ({len(found)} feature set(s) tried); "
        "allow more features to change. " + q.why_below(best))


def _rule_boxes(state: FittedRules, S: tuple[int, ...], cells: Any, reached: bool, pi_c: float,
                x: np.ndarray) -> list[Box]:
    """The rule and its alternatives on all d features: the cells reaching pi_c merged, or,
    below pi_c, the best cells themselves, unmerged."""
    lo, hi, crp, mass, crp_of = cells
    if reached:
        keep = crp >= pi_c - 1e-12
        boxes = _merge(lo[keep], hi[keep], crp[keep], mass[keep], crp_of, pi_c, xs=x[np.asarray(S)])
    else:
        order = np.lexsort((-mass, -crp))[:5]
        boxes = [Box(lo[i], hi[i], float(crp[i]), 1) for i in order if crp[i] > 0]
    return [Box(state.full(S, b.lower, -np.inf), state.full(S, b.upper, np.inf), b.crp, b.n_cells) for b in boxes]


def regional_rules(state: FittedRules, regions: Sequence[Any], target: TargetSpec, *, fixed: Features = None,
                   increase_only: Features = None, decrease_only: Features = None, pi: float | None = None,
                   pi_c: float | None = None, top_k: int | None = None,
                   constraints: Constraints | None = None) -> list[RegionalRule]:
    """A regional counterfactual rule for each region: a ``(lower, upper)``
    pair of arrays (``lower < x <= upper``) or an object with ``lower`` and
    ``upper`` (a T-CREx rule or metarule, a leaf box).

    ``fixed``, ``increase_only``, ``decrease_only``: names or column indices.
    On an increase-only feature of S the rule's interval lies at or above the
    largest value of the feature among the region's fitted rows (every one
    of them reaches the rule by increasing it or keeping it), on a
    decrease-only one at or below the smallest (module doc).

    ``constraints``: the analyst's constraints between features (a parsed
    :class:`core.constraints.Constraints` of the rules' features, or None): a rule (the
    found box or an alternative) that none of the region's fitted rows lacking the target
    (all of its rows, when none lacks it) can reach under them, the other features kept, is
    dropped (``unreachable``); ``reachable_rows`` counts the rows that reach the rule."""
    lv = state.query_levels(pi, pi_c, top_k)
    mask, _, pos = state.target(target)
    fixed, inc, dec = actionability(state, fixed=fixed, increase_only=increase_only, decrease_only=decrease_only)
    q = _RegionQuery(state, target, lv, mask, pos, _candidates(state, fixed, lv.top_k), (fixed, inc, dec), constraints)
    out = []
    marks = []                          # each region's start (its rule's elapsed runs to the next one's)
    for reg in regions:
        marks.append(time.perf_counter())
        out.append(_regional_rule(q, reg))
    marks.append(time.perf_counter())
    params = rule_params(state, target, lv, fixed, inc, dec, constraints)
    return [replace(r, params=params, elapsed=marks[k + 1] - marks[k], guarantee=rule_guarantee(params))
            for k, r in enumerate(out)]


@dataclass(frozen=True)
class _RegionQuery:
    """The regional rules' query: the target's rows and leaves' counts, the levels, the
    candidate units, the roles (fixed, increase-only, decrease-only) and the constraints."""

    state: FittedRules
    target: TargetSpec
    lv: RuleLevels
    mask: np.ndarray
    pos: np.ndarray
    cand: list[int]
    roles: tuple[Sequence[int], Sequence[int], Sequence[int]]
    constraints: Constraints | None


def _region_bounds(reg: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    """A region's ``lower`` and ``upper`` arrays (of an object with them, or a pair), of length d."""
    rlo, rhi = (reg.lower, reg.upper) if hasattr(reg, "lower") else reg
    rlo, rhi = np.asarray(rlo, float), np.asarray(rhi, float)
    if rlo.shape != (d,) or rhi.shape != (d,):
        raise QueryError(f"A region needs lower and upper arrays of length {d}.")
    return rlo, rhi


def _regional_rule(q: _RegionQuery, reg: Any) -> RegionalRule:
    """The rule of one region: the best explanation whose merged cells reach pi_c and that
    the region's rows can reach, or a rule saying why there is none."""
    state, lv = q.state, q.lv
    rlo, rhi = _region_bounds(reg, state.d)
    inside = np.all((state.X > rlo) & (state.X <= rhi), axis=1)
    base = partial(RegionalRule, region_lower=rlo, region_upper=rhi, target=q.target,
                   coverage=float(inside.mean()), n_rows=int(inside.sum()))
    if not inside.any():
        return base(note="No fitted row lies in this region.")
    if not q.cand:
        return base(note="No feature can change.")
    _, inc, dec = q.roles
    allow = _allowed(state, inc, dec, state.X[inside].max(axis=0), state.X[inside].min(axis=0))
    ovl = (rlo[None, :] < state.leaf_upper) & (rhi[None, :] > state.leaf_lower)        # (Nl, d)
    found, divergent = search_subsets(_region_cdp(state, q.cand, ovl, q.pos), q.cand, lv.pi)
    if not found:
        return base(note="No subset of the actionable features changes the output.")
    lacking = inside & ~q.mask
    reach = _Movers(q.constraints, state.X[lacking] if lacking.any() else state.X[inside], q.roles)
    got, best = None, 0.0
    for units, cdp in found:        # the best explanation that yields a rule (one the rows can reach)
        S = state.columns(units)
        kept, best = _reachable_rules(q, S, (rlo, rhi, ovl), allow, reach, best)
        if kept:
            got = (S, cdp, kept)
            break
    if got is None:
        return base(cdp=found[0][1], divergent=divergent, note=reach.none(lv.pi_c, best),
                    unreachable=tuple(reach.dropped))
    S, cdp, kept = got
    below = "" if divergent else (f"No set of the changeable features reaches the level pi {lv.pi:g} (CDP); the "
                                  f"rule uses the best set found, CDP {below_text(cdp, lv.pi)}.")
    return base(features=S, lower=kept[0][0].lower, upper=kept[0][0].upper, cdp=cdp, crp=kept[0][0].crp,
                divergent=divergent, alternatives=tuple(b for b, _ in kept[1:]),
                unreachable=tuple(reach.dropped), reachable_rows=kept[0][1], note=below)


def _region_cdp(state: FittedRules, cand: list[int], ovl: np.ndarray,
                pos: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    """The regional CDP of subsets of the candidate units (for :func:`search_subsets`): a leaf
    is reached when it overlaps the region on every feature outside the subset."""
    pos_of_unit = np.full(len(state.units), -1)
    pos_of_unit[cand] = np.arange(len(cand))
    colpos = pos_of_unit[state.unit_of]
    blocked = np.any(~ovl[:, colpos < 0], axis=1)
    badbits = np.zeros(len(ovl), dtype=np.int64)
    for j in np.flatnonzero(colpos >= 0):
        badbits |= np.where(~ovl[:, j], 1 << int(colpos[j]), 0)

    def cdp_of(subsets: np.ndarray, level: int) -> np.ndarray:
        smask = (subsets.astype(np.int64) << np.arange(subsets.shape[1])).sum(axis=1)
        reach = ((badbits[None, :] & ~smask[:, None]) == 0) & ~blocked[None, :]
        return engines.crp_from_reach(state, reach, pos)

    return cdp_of


def _reachable_rules(q: _RegionQuery, S: tuple[int, ...], region: tuple[np.ndarray, np.ndarray, np.ndarray],
                     allow: Any, reach: _Movers, best: float) -> tuple[list[tuple[Box, int]], float]:
    """On set S: the merged cells reaching pi_c that the region's rows can reach (from the
    target rows compatible with the region outside S first, then from every target row), and
    the best CRP seen so far."""
    state, pi_c = q.state, q.lv.pi_c
    rlo, rhi, ovl = region
    Sarr = np.asarray(S)
    rest = np.setdiff1d(np.arange(state.d), Sarr)
    crp_of = engines.crp_fn(state, q.pos, np.all(ovl[:, rest], axis=1), Sarr)
    compatible = np.all((state.X[:, rest] > rlo[rest]) & (state.X[:, rest] <= rhi[rest]), axis=1)
    target_rows = q.mask if allow is None else q.mask & _inside(state.X, S, allow)
    for rows in (np.flatnonzero(compatible & target_rows), np.flatnonzero(target_rows)):
        cells = _allowed_cells(state, rows, S, allow)
        if cells is None:
            continue
        lo, hi, mass = cells
        crp = crp_of(lo, hi)
        best = max(best, float(crp.max()))
        if np.any(crp >= pi_c - 1e-12):
            keep = crp >= pi_c - 1e-12
            boxes = _merge(lo[keep], hi[keep], crp[keep], mass[keep], crp_of, pi_c)
            kept = reach.keep(S, [Box(state.full(S, b.lower, -np.inf), state.full(S, b.upper, np.inf), b.crp,
                                      b.n_cells) for b in boxes])
            if kept:
                return kept, best
    return [], best


def _allowed_cells(state: FittedRules, rows: np.ndarray, S: tuple[int, ...],
                   allow: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The possible cells of ``rows`` on S, clipped to the admissible box; None when none is left."""
    if not len(rows):
        return None
    lo, hi, mass, _ = _possible_cells(state, rows, S)
    if allow is not None:
        lo, hi, ok = _clip(lo, hi, S, allow)
        lo, hi, mass = lo[ok], hi[ok], mass[ok]
        if not len(lo):
            return None
    return lo, hi, mass


class _Movers:
    """The rows of a region that a regional rule moves, and the constraints between features
    they move under: which of a set's rules they can reach, and the rules none can (dropped)."""

    def __init__(self, constraints: Constraints | None, X: np.ndarray, roles: tuple[Any, ...]):
        self.constraints, self.X, self.roles = constraints, X, roles
        self.dropped: list[Box] = []

    def keep(self, S: tuple[int, ...], full: list[Box]) -> list[tuple[Box, int]]:
        """The rules (boxes, best first) some row reaches, with how many rows do (0 without
        constraints: every rule is kept)."""
        reach = rule_reach(self.constraints, S, *self.roles)
        if reach is None:
            return [(b, 0) for b in full]
        counts = [int(reach.reachable(self.X, b.lower, b.upper).sum()) for b in full]
        self.dropped += [b for b, c in zip(full, counts) if not c]
        return [(b, c) for b, c in zip(full, counts) if c]

    def none(self, pi_c: float, best: float) -> str:
        """Why the region got no rule."""
        if not self.dropped:
            return (f"No rule reaches probability {pi_c} (best {below_text(best, pi_c)}); lower pi_c or allow more "
                    "features to change.")
        return (f"No rule found for this region can be reached by its rows under the constraints between features "
                f"({len(self.dropped)} dropped as unreachable); loosen the constraints or allow more features to "
                "change.")


def propose_regions(state: FittedRules, target: TargetSpec, max_depth: int = 3, min_share: float = 0.02
                    ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Sub-populations needing recourse: the leaves of a shallow tree on the
    model's outputs where most rows are not in the target, largest first."""
    mask, _, _ = state.target(target)
    leaf = max(1, math.ceil(min_share * state.n))
    tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=leaf,
                                  random_state=state.random_state).fit(state.X, mask)
    t = tree.tree_
    lo, hi = node_boxes(t.children_left, t.children_right, t.feature, t.threshold, state.d)
    leaves = np.flatnonzero(t.children_left < 0)
    ids = tree.apply(state.X)
    out = []
    for lf in leaves:
        rows = ids == lf
        if rows.any() and mask[rows].mean() < 0.5:
            out.append((rows.sum(), lo[lf], hi[lf]))
    out.sort(key=lambda r: -r[0])
    return [(a, b) for _, a, b in out]
