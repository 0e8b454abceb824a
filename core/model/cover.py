"""Rows that reach every leaf of a tree ensemble that other rows have not reached.

A reading of a model is checked against its library's own outputs on probe rows
(:func:`core.intake.parsing.verify_against_source`). A misreading confined to a leaf that no
probe row reaches would pass that check; :func:`covering_rows` gives rows that reach every
leaf the probe rows missed, so that each leaf value read is compared once at least.

The rows are made one at a time. A row starts free and, tree by tree, descends depth first
to a leaf still missed whose box meets the row's own, by the one split rule of
:mod:`core.model` (a number goes left iff ``x <= threshold``; a missing value (NaN) as each
split routes it; a category code by the split's set); the row's box is then narrowed to that
leaf's path, so one row reaches a missed leaf in many trees at once. Per feature a row holds
a number in ``(lo, hi]``, a missing value (where the feature is still free and NaN goes the
way sought), or for a categorical feature the codes its splits leave (the first is taken). A
leaf whose own box is empty (a path no row can follow) is counted as dead and not looked for.
A descent backs out of a subtree its row cannot follow and tries a missing value where it
tried a number; it gives up on its tree past twice the tree's nodes in narrowings. The work
is bounded: at most :data:`MAX_WORK` narrowings in all (about 0.3 s; judging which leaves are
dead counts too, and a leaf not judged by then is taken as alive) and :data:`MAX_STEPS` rows
times trees, :data:`MAX_VALUES` values; the leaves past them stay missed and are counted as
left. A missing value is tried only where it could get through (a free numerical feature of
a model that takes NaN, NaN going that way). A 500-tree XGBoost's 386 missed leaves take 42
rows and 10,304 narrowings; a 20-tree forest grown in full on Adult misses 133,087 of its
135,318 leaves and gets all of them in 19,400 rows (0.25 s); one of 100 trees, 118,184 of
664,518 (``bench/cover.py``). Placing each leaf in the first row it fits, tried first, took
5 s for the 20 trees.

The rows are made by the compiled kernel (``cover`` in ``core/model/_treewalk.c``) when it
is built, else by :func:`_cover_numpy`, which follows it step by step (the tests compare
them) but judges and reaches at most :data:`NUMPY_LEAVES` leaves each, counting the rest as
left (0.8 s for a 100-tree forest grown in full).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from core.model import flatwalk
from core.model.flatwalk import NAN_RIGHT

try:  # the compiled rows (core/model/_treewalk.c); _cover_numpy makes the same more slowly
    from core.model import _treewalk  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - no C compiler at install time
    _treewalk = None

if TYPE_CHECKING:
    from core.model.ensemble import TreeEnsemble

__all__ = ["Cover", "covering_rows", "reached_leaves"]

FREE, NUMBER, MISSING, CODE = 0, 1, 2, 3            # what a row holds of a feature (the kernel's)
#: the most values (rows x features) the rows may hold, and the most steps (rows x trees) they
#: may cost each reading of the model (at least MIN_ROWS rows): a 500-tree model gets 8,000 rows
MAX_VALUES, MAX_STEPS, MIN_ROWS = 2_000_000, 4_000_000, 1_000
#: the most narrowings of a row's box tried in all (about 0.3 s of the compiled kernel)
MAX_WORK = 20_000_000
#: the most leaves the numpy rows judge (dead or not) and reach on purpose (the rest are left)
NUMPY_LEAVES = 4_000


@dataclass(frozen=True)
class Cover:
    """What :func:`covering_rows` did: ``rows`` made, ``covered`` leaves they reach on
    purpose, ``dead`` leaves no row can reach (an empty box), ``left`` leaves still missed
    (the rows or the steps allowed ran out), ``steps`` the narrowings of a row's box tried."""

    rows: int
    covered: int
    dead: int
    left: int
    steps: int


def reached_leaves(ens: TreeEnsemble, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ens.predict_raw(X), seen)``: the raw outputs, and per node of the walk's packed
    records 1 where a row of ``X`` reached that leaf (one walk for both)."""
    seen = np.zeros(ens._flat["packed"].shape[0], dtype=np.uint8)
    return ens.predict_raw(X, seen=seen), seen


def covering_rows(ens: TreeEnsemble, seen: np.ndarray, base: np.ndarray, top: float) -> tuple[np.ndarray, Cover]:
    """Rows (codes view) that reach every leaf of ``ens`` not marked in ``seen`` that a row
    can reach, and a :class:`Cover` of what was done.

    ``base``: rows whose values the new rows take where no leaf asks anything of a feature,
    or where a base value lies in the box asked for (row ``i`` takes ``base[i % len(base)]``;
    zeros when empty); ``top``: the largest number the model's library takes (a threshold
    beyond it has no number above it). A categorical feature takes the codes its rows may
    hold (the missing code not when the model refuses it, as in the probe rows).
    """
    d = ens.n_features
    no_missing = ens.meta.get("no_missing", ())
    codes = np.array([-1 if ens.categories[j] is None else ens.n_codes(j) - (ens.feature_names[j] in no_missing)
                      for j in range(d)], dtype=np.int64)
    fl = ens._flat
    missed = int(np.count_nonzero((fl["packed"]["feature"] == -1) & (seen == 0)))
    cap = max(min(missed, MAX_VALUES // max(d, 1), max(MIN_ROWS, MAX_STEPS // ens.n_trees)), 1)
    kind = np.empty((cap, d), dtype=np.int8)                # each row set when it is made
    lo = np.empty((cap, d))
    hi = np.empty((cap, d))
    run = _treewalk.cover if flatwalk.USE_COMPILED and _treewalk is not None else _cover_numpy
    rows, covered, dead, left, steps = run(fl["packed"], fl["packed_roots"], fl["packed_bits"], seen, codes,
                                           float(top), bool(ens.routes_missing), MAX_WORK, kind, lo, hi)
    return _values(kind[:rows], lo[:rows], hi[:rows], base, top), Cover(rows, covered, dead, left, steps)


def _values(kind: np.ndarray, lo: np.ndarray, hi: np.ndarray, base: np.ndarray, top: float) -> np.ndarray:
    """The rows' values: a base value where the feature is free or the base value lies in
    ``(lo, hi]``; else the middle of ``(lo, hi]``, its upper end (the threshold itself) when
    it has no lower one, a step above ``lo`` when it has no upper one; NaN; the code."""
    n, d = kind.shape
    base = np.asarray(base, dtype=np.float64)
    X = base[np.arange(n) % len(base)].copy() if len(base) else np.zeros((n, d))
    num = kind == NUMBER
    a, b, v = lo[num], hi[num], X[num]
    inside = (v > a) & (v <= b)
    bounded = np.isfinite(a) & (b < top)
    with np.errstate(over="ignore", invalid="ignore"):
        mid = np.where(bounded, a / 2 + b / 2, b)
        step = np.minimum(top, a + np.maximum(1.0, np.abs(a)))
        mid = np.where(np.isfinite(a) & (b >= top), a / 2 + step / 2, mid)
    mid = np.where((mid > a) & (mid <= b), mid, b)
    X[num] = np.where(inside, v, mid)
    X[kind == MISSING] = np.nan
    X[kind == CODE] = lo[kind == CODE]
    return X


def _cover_numpy(nodes: np.ndarray, roots: np.ndarray, bits: np.ndarray, seen: np.ndarray, codes: np.ndarray,
                 top: float, nan_ok: bool, budget: int, kind: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[int, int, int, int, int]:
    """The compiled kernel's ``cover``, step by step in Python (its header says what it does)."""
    n, T, cap = nodes.shape[0], roots.shape[0], kind.shape[0]
    row = _Row(nodes, bits, codes, top, nan_ok)
    left_of = row.left
    parent = np.full(n, -1, dtype=np.int64)
    inner = np.flatnonzero(row.feat != -1)
    parent[left_of[inner]] = inner
    parent[left_of[inner] + 1] = inner
    ends = [int(r) for r in roots[1:]] + [n]
    missed = np.flatnonzero((row.feat == -1) & (seen == 0))
    rem = np.zeros(n, dtype=np.int64)
    rem[missed] = 1
    dead = judged = 0
    tree_of = np.searchsorted(roots, missed, side="right") - 1
    order = np.lexsort((-missed, tree_of))                            # as the kernel: tree by tree, each
    for t, i in zip(tree_of[order].tolist(), missed[order].tolist()):  # from its last node
        if row.steps >= budget or judged >= NUMPY_LEAVES:              # past them: taken as alive
            break
        judged += 1
        if row.path_dead(parent, int(roots[t]), i):
            rem[i] = 0
            dead += 1
    level = np.asarray(roots, dtype=np.int64)                           # each subtree's leaves looked for,
    levels = []                                                       # summed level by level from the deepest
    while level.size:
        levels.append(level)
        inner_here = level[row.feat[level] != -1]
        level = np.concatenate([left_of[inner_here], left_of[inner_here] + 1])
    for level in levels[:0:-1]:
        np.add.at(rem, parent[level], rem[level])
    total = int(rem[roots].sum())
    rows = covered = 0
    while total > 0 and rows < cap and row.steps < budget and covered < NUMPY_LEAVES:
        row.reset()
        found_here = 0
        for t in range(T):
            path = row.descend(int(roots[t]), ends[t], rem)
            if path:
                rem[path] -= 1
                covered += 1
                found_here += 1
                total -= 1
            row.undo.clear()                                     # kept: the row is inside that leaf
        if not found_here:
            break
        kind[rows], lo[rows], hi[rows] = row.rk, row.rlo, row.rhi
        for j in np.flatnonzero(row.rk == CODE):
            m = row.mask[j]
            lo[rows, j] = (m & -m).bit_length() - 1                 # the first code left
        rows += 1
    return rows, covered, dead, total, row.steps


class _Row:
    """The row being made and its changes, undone when a descent backs out (the kernel's Row)."""

    def __init__(self, nodes: np.ndarray, bits: np.ndarray, codes: np.ndarray, top: float, nan_ok: bool):
        self.feat, self.thr = nodes["feature"].astype(np.int64), nodes["threshold"]
        self.left = nodes["left"].astype(np.int64)
        self.bits, self.codes, self.top, self.nan_ok = bits, codes, top, nan_ok
        d = codes.shape[0]
        self.rk, self.rlo, self.rhi = np.zeros(d, dtype=np.int8), np.zeros(d), np.zeros(d)
        self.mask: list[int] = [0] * d
        self.undo: list[tuple[int, int, float, float, int]] = []
        self.steps = 0
        self.reset()

    def reset(self) -> None:
        self.rk[:] = FREE
        self.rlo[:] = -np.inf
        self.rhi[:] = self.top
        self.mask = [(1 << int(c)) - 1 if c >= 0 else 0 for c in self.codes]

    def narrow(self, p: int, right: int, use_nan: int) -> bool:
        """Keep the row on side ``right`` of node ``p``'s split (``use_nan``: by a missing value)."""
        self.steps += 1
        f = int(self.feat[p])
        j = f & ~NAN_RIGHT if f >= 0 else -f - 2
        saved = (j, int(self.rk[j]), float(self.rlo[j]), float(self.rhi[j]), self.mask[j])
        if self.codes[j] >= 0:                                   # a categorical feature: its codes left
            if use_nan:
                return False
            if f < -1:
                o = int(self.thr[p])
                count = int(self.bits[o])
                side = sum(int(self.bits[o + 1 + w]) << (64 * w) for w in range(count))
            else:
                t = float(self.thr[p])
                side = 0 if t < 0 else (1 << (int(t) + 1)) - 1
            full = (1 << int(self.codes[j])) - 1
            new = self.mask[j] & ((full & ~side) if right else side)
            if not new:
                return False
            self.mask[j] = new
            self.rk[j] = CODE
        elif f < -1:
            return False                                         # a category set on numbers: no side
        else:
            nan_right = int((f & NAN_RIGHT) != 0)
            t = float(self.thr[p])
            if self.rk[j] == FREE:
                if use_nan:
                    if not self.nan_ok or right != nan_right:
                        return False
                    self.rk[j] = MISSING
                else:
                    a, b = (t, self.top) if right else (-np.inf, min(t, self.top))
                    if not (a < b and b >= -self.top):
                        return False
                    self.rk[j], self.rlo[j], self.rhi[j] = NUMBER, a, b
            elif use_nan:
                return False                                     # NaN only where the feature is free
            elif self.rk[j] == NUMBER:
                a = max(t, self.rlo[j]) if right else self.rlo[j]
                b = self.rhi[j] if right else min(t, self.rhi[j])
                if not a < b:
                    return False
                self.rlo[j], self.rhi[j] = a, b
            elif right != nan_right:
                return False                                     # NaN in the row goes the other way
        self.undo.append(saved)
        return True

    def nan_may(self, p: int, right: int) -> bool:
        """Could a missing value keep the row on side ``right`` of node ``p``'s split (the kernel's)?"""
        f = int(self.feat[p])
        if not self.nan_ok or f < 0:
            return False
        j = f & ~NAN_RIGHT
        return bool(self.codes[j] < 0 and self.rk[j] == FREE and right == int((f & NAN_RIGHT) != 0))

    def undo_to(self, height: int) -> None:
        while len(self.undo) > height:
            j, k, a, b, m = self.undo.pop()
            self.rk[j], self.rlo[j], self.rhi[j], self.mask[j] = k, a, b, m

    def path_dead(self, parent: np.ndarray, root: int, leaf: int) -> bool:
        """Is the box of the path root .. leaf empty (the kernel's path_dead: a number first at
        each split, a missing value then, backing out)?"""
        path = []
        c = leaf
        while c != root:
            path.append(c)
            c = int(parent[c])
        path.reverse()
        steps = [[0, len(self.undo)]] if path else []
        limit = self.steps + 8 * (len(path) + 1)
        i = 0
        while 0 <= i < len(path):
            if self.steps > limit:                               # not known dead: looked for
                self.undo_to(0)
                return False
            step, c = steps[i], path[i]
            p = int(parent[c])
            right, ok = int(c != self.left[p]), False
            while step[0] < 2 and not ok:
                if step[0] == 1 and not self.nan_may(p, right):
                    step[0] += 1
                    break
                ok = self.narrow(p, right, step[0])
                step[0] += 1
            if ok:
                i += 1
                if i < len(path):
                    steps[i:] = [[0, len(self.undo)]]
            else:
                i -= 1
                if i >= 0:
                    self.undo_to(steps[i][1])
        self.undo_to(0)
        return i < 0

    def descend(self, root: int, end: int, rem: np.ndarray) -> list[int]:
        """Depth first from ``root`` (the tree's nodes up to ``end``) to a leaf still missed whose
        box meets the row's: its path (the row narrowed to it), or [] (the row as it was; also
        past twice the tree's nodes in steps)."""
        if rem[root] == 0:
            return []
        limit = self.steps + 2 * (end - root)
        frames = [[root, 0, len(self.undo)]]
        while frames:
            if self.steps > limit:
                self.undo_to(frames[0][2])
                return []
            frame = frames[-1]
            node = frame[0]
            if self.feat[node] == -1:
                return [f[0] for f in frames]
            moved = False
            while frame[1] < 4 and not moved:
                k = frame[1]
                frame[1] += 1
                c = int(self.left[node]) + (k >> 1)
                if rem[c] == 0 or (k & 1 and not self.nan_may(node, k >> 1)):
                    continue
                height = len(self.undo)
                if self.narrow(node, k >> 1, k & 1):
                    frames.append([c, 0, height])
                    moved = True
            if not moved:
                self.undo_to(frame[2])
                frames.pop()
        return []
