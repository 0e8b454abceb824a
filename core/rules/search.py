"""The search for counterfactual rules: minimal divergent explanations (subsets
of the top_k features by increasing size), possible cells and their greedy
merging, a beam search over every feature for a set whose cells reach pi_c,
local and regional rules, and proposed sub-populations."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable, Sequence

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from core.errors import NoCounterfactualRuleError, QueryError
from core.model import node_boxes
from core.rules import bitsets
from core.rules.results import Box, LocalRule, RegionalRule, RuleLevels


class _RuleSearch:
    """Divergent sets, local and regional rules (mixed into CounterfactualRules)."""

    def _search(self, cdp_of: Callable[[np.ndarray, int], np.ndarray], cand: list[int], pi: float, keep: int = 10):
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
        top = sorted(seen[:keep], key=lambda p: (p[1], -p[0]))    # the sparsest of the best first
        return [(u, c) for c, _, u in top], False

    # --------------------------------------------------------------- search
    def minimal_divergent_explanations(self, x: Any, target: Any, fixed: Sequence[int] = (), *,
                                       pi: float | None = None, top_k: int | None = None
                                       ) -> list[tuple[tuple[int, ...], float]]:
        """All minimal S (column tuples) with CDP >= pi among the top_k
        actionable features, best first, with their CDP; [] if none."""
        found, ok = self._local_search(self._row(x), target, fixed, self._levels(pi, None, top_k))
        return [(self._columns(u), c) for u, c in found] if ok else []

    def _local_search(self, x: np.ndarray, target: Any, fixed: Sequence[int], lv: "RuleLevels"):
        self._check_fitted()
        _, ybits, _ = self._target(target)
        cand = self.candidate_units(fixed, lv.top_k)
        if not cand:
            raise NoCounterfactualRuleError("No feature can change: every feature the surrogate uses is "
                                            "immutable (fixed).")

        def cdp_of(subsets: np.ndarray, level: int) -> np.ndarray:
            if bitsets.USE_COMPILED:
                cnt, pos, _ = self._counts(x, self._free_columns(cand, subsets), target)
                return self._mean_share(cnt, pos)
            return self._cdp_from_cells(self._cells(x, cand, subsets, level), ybits, len(subsets))

        return self._search(cdp_of, cand, lv.pi)

    def _possible_cells(self, rows: np.ndarray, S: tuple[int, ...], x: np.ndarray | None = None,
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
            rows = np.sort(np.random.default_rng(self.random_state).choice(rows, limit, replace=False))
        Z = self.X_[rows].copy()
        if x is not None:
            rest = np.setdiff1d(np.arange(self.n_features_in_), S)
            Z[:, rest] = x[rest]
        g = self._global_leaves(Z) if x is not None else self._Lg[rows]
        lo = self._LO[g][:, :, S].max(axis=1)
        hi = self._HI[g][:, :, S].min(axis=1)
        key, first, mass = np.unique(np.hstack([lo, hi]), axis=0, return_index=True, return_counts=True)
        k = len(S)
        crp = None
        if x is not None and pos is not None:
            gg = g[first]
            crp = np.mean(pos[gg] / np.maximum(self._cnt[gg], 1), axis=1)
        return key[:, :k], key[:, k:], mass.astype(float), crp

    def _merge(self, lo: np.ndarray, hi: np.ndarray, crp: np.ndarray, mass: np.ndarray,
               crp_of: Callable[[np.ndarray, np.ndarray], np.ndarray], pi_c: float,
               xs: np.ndarray | None = None, max_cells: int = 200) -> list[Box]:
        """Greedy merging of possible cells (see the module docstring); with
        ``xs``, a merged box must not contain the row's own values on S."""
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

    # ----------------------------------------------------------------- rules
    def _local_cells(self, x: np.ndarray, S: tuple[int, ...], mask: np.ndarray, pos: np.ndarray, pi_c: float):
        """Possible cells for ``x`` on ``S`` and their CRP, and whether one reaches
        pi_c; when none does, the candidate set with the highest CRP (None when
        there is no possible cell at all)."""
        w = self.projected_weights(x, S)
        Sarr = np.asarray(S)
        rest = np.setdiff1d(np.arange(self.n_features_in_), Sarr)
        base = np.all((self._LO[:, rest] < x[rest]) & (x[rest] <= self._HI[:, rest]), axis=1)

        crp_of = self._crp_fn(pos, base, Sarr)

        # the paper's possible leaves come from the target rows with positive
        # projected weight; when none of them gives a rule, from every target row
        best = None
        for rows in (np.flatnonzero((w > 0) & mask), np.flatnonzero(mask)):
            if not len(rows):
                continue
            lo, hi, mass, crp = self._possible_cells(rows, S, x=x, pos=pos)
            xs = x[Sarr]
            crp = np.where(np.all((xs > lo) & (xs <= hi), axis=1), 0.0, crp)   # x's own cell is no recourse
            cells = (lo, hi, crp, mass, crp_of)
            if np.any(crp >= pi_c - 1e-12):
                return cells, True
            if best is None or crp.max() > best[2].max():
                best = cells
        return best, False

    def _cdp_of_sets(self, x: np.ndarray, target: Any, sets: list[tuple[int, ...]]) -> np.ndarray:
        """CDP of each set of units in ``sets`` (compiled kernel or bitsets)."""
        cand = sorted({u for S in sets for u in S})
        at = {u: k for k, u in enumerate(cand)}
        sub = np.zeros((len(sets), len(cand)), dtype=bool)
        for i, S in enumerate(sets):
            sub[i, [at[u] for u in S]] = True
        if bitsets.USE_COMPILED:
            cnt, pos, _ = self._counts(x, self._free_columns(cand, sub), target)
            return self._mean_share(cnt, pos)
        _, ybits, _ = self._target(target)
        return self._cdp_from_cells(self._cells(x, cand, sub, max(map(len, sets))), ybits, len(sets))

    def _grow_rule(self, x: np.ndarray, target: Any, units: list[int], mask: np.ndarray, pos: np.ndarray,
                   pi_c: float, width: int = 8, n_rows: int = 128, tries: int = 3, support: int = 10):
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
        ``support``.
        Returns (S columns, cells, True), or (best S columns, its best cell CRP,
        False) when no set of any size reaches ``pi_c``."""
        rows = np.flatnonzero(mask)
        if len(rows) > n_rows:
            scale = self.X_.std(axis=0)
            dist = np.sum(np.abs(self.X_[rows] - x) / np.where(scale > 0, scale, 1.0), axis=1)
            rows = rows[np.argsort(dist, kind="stable")[:n_rows]]
        XR = self.X_[rows]
        share = pos / np.maximum(self._cnt, 1)
        best: tuple[float, tuple[int, ...]] = (-1.0, ())
        weak = None                      # a set reaching pi_c with fewer than ``support`` cells
        beam: list[tuple[int, ...]] = [()]
        for _ in range(len(units)):
            sets = sorted({tuple(sorted(b + (u,))) for b in beam for u in units if u not in b})
            if not sets:
                break
            Z = np.repeat(x[None, None, :], len(sets), axis=0).repeat(len(rows), axis=1)
            for i, S in enumerate(sets):
                cols = list(self._columns(S))
                Z[i][:, cols] = XR[:, cols]
            g = share[self._global_leaves(Z.reshape(-1, len(x)))].mean(axis=1).reshape(len(sets), len(rows))
            top = g.max(axis=1)
            reach = (g >= pi_c - 1e-12).sum(axis=1)
            key = np.minimum(reach, support) + self._cdp_of_sets(x, target, sets)   # support, then CDP
            order = np.argsort(-key, kind="stable")
            if top.max() > best[0]:
                best = (float(top.max()), sets[int(np.argmax(top))])
            for o in order[:tries]:
                if reach[o] == 0 or (reach[o] < support and weak is not None):
                    break
                S = self._columns(sets[o])
                cells, reached = self._local_cells(x, S, mask, pos, pi_c)
                if reached and reach[o] >= support:
                    return S, cells, True
                if reached and weak is None:
                    weak = (S, cells)
            beam = [sets[o] for o in order[:width]]
        if weak is not None:
            return weak[0], weak[1], True
        return self._columns(best[1]), best[0], False

    def _why_below(self, x: np.ndarray, target: Any, fixed: Sequence[int], mask: np.ndarray, pos: np.ndarray,
                   lv: "RuleLevels", best: tuple[tuple[int, ...], float]) -> str:
        """Why no rule reaches pi_c: which features reaching it would need."""
        names = self.feature_names_
        S, q = best
        text = (f"No region reaches CRP {lv.pi_c:g} when changing only features that may change (searched over "
                f"all of them; best {q:.2f}, changing {[names[j] for j in S]}).")
        frozen = {int(self._unit_of[j]) for j in fixed}
        if frozen:
            every = [u for u in np.argsort(-self._unit_usage, kind="stable") if self._unit_usage[u] > 0]
            S2, got, ok = self._grow_rule(x, target, [int(u) for u in every], mask, pos, lv.pi_c)
            need = [names[j] for j in S2 if int(self._unit_of[j]) in frozen]
            if ok:
                also = [names[j] for j in S2 if int(self._unit_of[j]) not in frozen]
                return text + f" Reaching it would need changing the fixed feature(s) {need}" + (
                    f" (with {also})." if also else ".")
        return text + (" The surrogate gives no region near this row the target with that probability; "
                       "a lower pi_C gives a rule.")

    def local_rule(self, x: Any, target: Any, fixed: Sequence[int] = (), *, pi: float | None = None,
                   pi_c: float | None = None, top_k: int | None = None) -> LocalRule:
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
        default to the estimator's."""
        t0 = time.perf_counter()
        x = self._row(x)
        lv = self._levels(pi, pi_c, top_k)
        found, divergent = self._local_search(x, target, fixed, lv)
        if not found:
            raise NoCounterfactualRuleError("No subset of the actionable features changes the surrogate's output.")
        sets = tuple((self._columns(u), c) for u, c in found) if divergent else ()
        mask, _, pos = self._target(target)
        fallback, note = None, ""
        for units, cdp in found:            # the best explanation that yields a rule
            S = self._columns(units)
            cells, reached = self._local_cells(x, S, mask, pos, lv.pi_c)
            if reached:
                break
            if cells is not None and (fallback is None or cells[2].max() > fallback[1][2].max()):
                fallback = (S, cells, cdp)
        else:
            # no explanation's cells reach pi_c: a set whose best cell does, over every actionable feature
            S, got, reached = self._grow_rule(x, target, self.candidate_units(fixed, len(self._units)), mask, pos,
                                              lv.pi_c)
            if reached:
                cells, cdp = got, self.cdp(x, S, target)
                divergent = divergent and cdp >= lv.pi - 1e-12
            else:
                if S:
                    grown, _ = self._local_cells(x, S, mask, pos, lv.pi_c)
                    if grown is not None and (fallback is None or grown[2].max() > fallback[1][2].max()):
                        fallback = (S, grown, self.cdp(x, S, target))
                        divergent = divergent and fallback[2] >= lv.pi - 1e-12
                if fallback is None or fallback[1][2].max() <= 0:
                    names = [self.feature_names_[j] for j in self._columns(found[0][0])]
                    raise NoCounterfactualRuleError(
                        f"No region on {names} leads to the target ({len(found)} feature set(s) tried); "
                        "allow more features to change. " + self._why_below(x, target, fixed, mask, pos, lv, (S, got)))
                S, cells, cdp = fallback
                note = self._why_below(x, target, fixed, mask, pos, lv, (S, float(cells[2].max())))
        lo, hi, crp, mass, crp_of = cells
        sarr = np.asarray(S)
        if reached:
            keep = crp >= lv.pi_c - 1e-12
            boxes = self._merge(lo[keep], hi[keep], crp[keep], mass[keep], crp_of, lv.pi_c, xs=x[sarr])
        else:                               # below pi_c: the best cells themselves, unmerged
            order = np.lexsort((-mass, -crp))[:5]
            boxes = [Box(lo[i], hi[i], float(crp[i]), 1) for i in order if crp[i] > 0]
        full = [Box(self._full(S, b.lower, -np.inf), self._full(S, b.upper, np.inf), b.crp, b.n_cells)
                for b in boxes]
        return LocalRule(x=x, target=target, features=S, lower=full[0].lower, upper=full[0].upper, cdp=cdp,
                         crp=full[0].crp, divergent=divergent, n_cells=full[0].n_cells,
                         alternatives=tuple(full[1:]), divergent_sets=sets, time=time.perf_counter() - t0,
                         below_pi_c=not reached, note=note)

    def regional_rules(self, regions: Sequence[Any], target: Any, fixed: Sequence[int] = (), *,
                       pi: float | None = None, pi_c: float | None = None, top_k: int | None = None
                       ) -> list[RegionalRule]:
        """A regional counterfactual rule for each region: a ``(lower, upper)``
        pair of arrays (``lower < x <= upper``) or an object with ``lower`` and
        ``upper`` (a T-CREx rule or metarule, a leaf box)."""
        self._check_fitted()
        lv = self._levels(pi, pi_c, top_k)
        mask, _, pos = self._target(target)
        cand = self.candidate_units(fixed, lv.top_k)
        d = self.n_features_in_
        out = []
        for reg in regions:
            rlo, rhi = (reg.lower, reg.upper) if hasattr(reg, "lower") else reg
            rlo, rhi = np.asarray(rlo, float), np.asarray(rhi, float)
            if rlo.shape != (d,) or rhi.shape != (d,):
                raise QueryError(f"A region needs lower and upper arrays of length {d}.")
            inside = np.all((self.X_ > rlo) & (self.X_ <= rhi), axis=1)
            base = dict(region_lower=rlo, region_upper=rhi, target=target, coverage=float(inside.mean()),
                        n_rows=int(inside.sum()))
            if not inside.any():
                out.append(RegionalRule(**base, note="No fitted row lies in this region."))
                continue
            if not cand:
                out.append(RegionalRule(**base, note="No feature can change."))
                continue
            ovl = (rlo[None, :] < self._HI) & (rhi[None, :] > self._LO)        # (Nl, d)
            pos_of_unit = np.full(len(self._units), -1)
            pos_of_unit[cand] = np.arange(len(cand))
            colpos = pos_of_unit[self._unit_of]
            blocked = np.any(~ovl[:, colpos < 0], axis=1)
            badbits = np.zeros(len(ovl), dtype=np.int64)
            for j in np.flatnonzero(colpos >= 0):
                badbits |= np.where(~ovl[:, j], 1 << int(colpos[j]), 0)

            def cdp_of(subsets: np.ndarray, level: int) -> np.ndarray:
                smask = (subsets.astype(np.int64) << np.arange(subsets.shape[1])).sum(axis=1)
                reach = ((badbits[None, :] & ~smask[:, None]) == 0) & ~blocked[None, :]
                return self._crp_from_reach(reach, pos)

            found, divergent = self._search(cdp_of, cand, lv.pi)
            if not found:
                out.append(RegionalRule(**base, note="No subset of the actionable features changes the output."))
                continue
            got, best = None, 0.0
            for units, cdp in found:        # the best explanation that yields a rule
                S = self._columns(units)
                Sarr = np.asarray(S)
                rest = np.setdiff1d(np.arange(d), Sarr)
                crp_of = self._crp_fn(pos, np.all(ovl[:, rest], axis=1), Sarr)
                compatible = np.all((self.X_[:, rest] > rlo[rest]) & (self.X_[:, rest] <= rhi[rest]), axis=1)
                for rows in (np.flatnonzero(compatible & mask), np.flatnonzero(mask)):
                    if not len(rows):
                        continue
                    lo, hi, mass, _ = self._possible_cells(rows, S)
                    crp = crp_of(lo, hi)
                    best = max(best, float(crp.max()))
                    if np.any(crp >= lv.pi_c - 1e-12):
                        got = (S, cdp, lo, hi, mass, crp, crp_of)
                        break
                if got:
                    break
            if got is None:
                out.append(RegionalRule(**base, cdp=found[0][1], divergent=divergent,
                                        note=f"No rule reaches probability {lv.pi_c} (best {best:.2f}); "
                                             "lower pi_c or allow more features to change."))
                continue
            S, cdp, lo, hi, mass, crp, crp_of = got
            keep = crp >= lv.pi_c - 1e-12
            boxes = self._merge(lo[keep], hi[keep], crp[keep], mass[keep], crp_of, lv.pi_c)
            full = [Box(self._full(S, b.lower, -np.inf), self._full(S, b.upper, np.inf), b.crp, b.n_cells)
                    for b in boxes]
            out.append(RegionalRule(**base, features=S, lower=full[0].lower, upper=full[0].upper, cdp=cdp,
                                    crp=full[0].crp, divergent=divergent, alternatives=tuple(full[1:])))
        return out

    def propose_regions(self, target: Any, max_depth: int = 3, min_share: float = 0.02
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Sub-populations needing recourse: the leaves of a shallow tree on the
        model's outputs where most rows are not in the target, largest first."""
        self._check_fitted()
        mask, _, _ = self._target(target)
        leaf = max(1, math.ceil(min_share * self._n))
        tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=leaf,
                                      random_state=self.random_state).fit(self.X_, mask)
        t = tree.tree_
        lo, hi = node_boxes(t.children_left, t.children_right, t.feature, t.threshold, self.n_features_in_)
        leaves = np.flatnonzero(t.children_left < 0)
        ids = tree.apply(self.X_)
        out = []
        for lf in leaves:
            rows = ids == lf
            if rows.any() and mask[rows].mean() < 0.5:
                out.append((rows.sum(), lo[lf], hi[lf]))
        out.sort(key=lambda r: -r[0])
        return [(a, b) for _, a, b in out]
