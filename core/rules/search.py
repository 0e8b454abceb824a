"""The search for counterfactual rules: minimal divergent explanations (subsets
of the top_k features by increasing size), possible cells and their greedy
merging, local and regional rules, and proposed sub-populations."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable, Sequence

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from core.ensemble import node_boxes
from core.errors import NoCounterfactualRuleError, QueryError
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

    def local_rule(self, x: Any, target: Any, fixed: Sequence[int] = (), *, pi: float | None = None,
                   pi_c: float | None = None, top_k: int | None = None) -> LocalRule:
        """The local counterfactual rule of ``x`` for ``target`` (a class,
        ``("other", c)``, or an interval ``(lo, hi)`` of outputs).

        When no possible region reaches pi_c, the rule is the possible cell with
        the highest CRP, flagged ``below_pi_c`` (the paper's protocol gives every
        row a rule and reports its CRP). Raises NoCounterfactualRuleError only when
        there is no possible cell with a positive CRP at all. ``pi``, ``pi_c`` and
        ``top_k`` default to the estimator's."""
        t0 = time.perf_counter()
        x = self._row(x)
        lv = self._levels(pi, pi_c, top_k)
        found, divergent = self._local_search(x, target, fixed, lv)
        if not found:
            raise NoCounterfactualRuleError("No subset of the actionable features changes the surrogate's output.")
        mask, _, pos = self._target(target)
        fallback = None
        for units, cdp in found:            # the best explanation that yields a rule
            S = self._columns(units)
            cells, reached = self._local_cells(x, S, mask, pos, lv.pi_c)
            if reached:
                break
            if cells is not None and (fallback is None or cells[2].max() > fallback[1][2].max()):
                fallback = (S, cells, cdp)
        else:
            if fallback is None or fallback[1][2].max() <= 0:
                names = [self.feature_names_[j] for j in self._columns(found[0][0])]
                raise NoCounterfactualRuleError(
                    f"No region on {names} leads to the target ({len(found)} feature set(s) tried); "
                    "allow more features to change.")
            S, cells, cdp = fallback
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
        sets = tuple((self._columns(u), c) for u, c in found) if divergent else ()
        return LocalRule(x=x, target=target, features=S, lower=full[0].lower, upper=full[0].upper, cdp=cdp,
                         crp=full[0].crp, divergent=divergent, n_cells=full[0].n_cells,
                         alternatives=tuple(full[1:]), divergent_sets=sets, time=time.perf_counter() - t0,
                         below_pi_c=not reached)

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
