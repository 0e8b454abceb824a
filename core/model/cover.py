"""Rows that reach every leaf of a tree ensemble that other rows have not reached.

A reading of a model is checked against its library's own outputs on probe rows
(:func:`core.intake.parsing.verify_against_source`). A misreading confined to a leaf that no
probe row reaches would pass that check; :func:`covering_rows` gives rows that reach every
leaf the probe rows missed, so that each leaf value read is compared once at least.

Each such leaf's box is read off its path by the one split rule of :mod:`core.model` (a
number goes left iff ``x <= threshold``; a missing value (NaN) as each split routes it; a
category code by the split's set). Per feature the leaf asks for a number in ``(lo, hi]``,
or, where that interval is empty and every split of its path on the feature sends NaN its
way, a missing value; a categorical feature, a code its splits admit. The leaves are packed
first fit, tree by tree: a leaf joins the first row whose box meets its own and that holds
no leaf of its tree yet, so one row reaches a missed leaf in many trees at once. A leaf
whose box is empty (a path no row can follow) is counted as dead, not covered.

The packing runs in the compiled kernel (``cover`` in ``core/model/_treewalk.c``) when it is
built, else in :func:`_cover_numpy`, which follows it step by step (the tests compare them)
but places at most :data:`NUMPY_LEAVES` leaves, counting the rest as left: in Python a leaf
costs about 0.2 ms, and a 500-tree forest misses 16,000.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.model import flatwalk
from core.model.flatwalk import NAN_RIGHT

try:  # the compiled packing (core/model/_treewalk.c); _cover_numpy does the same more slowly
    from core.model import _treewalk  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - no C compiler at install time
    _treewalk = None

__all__ = ["Cover", "covering_rows", "reached_leaves"]

FREE, NUMBER, MISSING, CODE, DEAD = 0, 1, 2, 3, 4
#: the most values (rows x features) the packing may hold
MAX_VALUES = 2_000_000
#: the most leaves the numpy packing places (about 0.2 ms a leaf; the rest are counted as left)
NUMPY_LEAVES = 4_000


@dataclass(frozen=True)
class Cover:
    """What :func:`covering_rows` did: ``rows`` made, ``covered`` leaves placed in them,
    ``dead`` leaves no row can reach (an empty box), ``left`` leaves not placed because the
    rows allowed ran out."""

    rows: int
    covered: int
    dead: int
    left: int


def reached_leaves(ens: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ens.predict_raw(X), seen)``: the raw outputs, and per node of the walk's packed
    records 1 where a row of ``X`` reached that leaf (one walk for both)."""
    seen = np.zeros(ens._flat["packed"].shape[0], dtype=np.uint8)
    return ens.predict_raw(X, seen=seen), seen


def covering_rows(ens: Any, seen: np.ndarray, base: np.ndarray, top: float) -> tuple[np.ndarray, Cover]:
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
    cap = max(min(missed, MAX_VALUES // max(d, 1)), 1)      # a row per leaf at most
    kind = np.empty((cap, d), dtype=np.int8)                # each row set when it is first used
    lo = np.empty((cap, d))
    hi = np.empty((cap, d))
    run = _treewalk.cover if flatwalk.USE_COMPILED and _treewalk is not None else _cover_numpy
    rows, covered, dead, left = run(fl["packed"], fl["packed_roots"], fl["packed_bits"], seen, codes, float(top),
                                    bool(ens.routes_missing), kind, lo, hi)
    return _values(kind[:rows], lo[:rows], hi[:rows], base, top), Cover(rows, covered, dead, left)


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
                 top: float, nan_ok: bool, kind: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[int, int, int, int]:
    """The compiled kernel's ``cover``, step by step in Python (its header says what it does)."""
    n, T, cap = nodes.shape[0], roots.shape[0], kind.shape[0]
    feat, thr, left_of = nodes["feature"].astype(np.int64), nodes["threshold"], nodes["left"].astype(np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    inner = np.flatnonzero(feat != -1)
    parent[left_of[inner]] = inner
    parent[left_of[inner] + 1] = inner
    row_tree: list[int] = []
    counts = {"covered": 0, "dead": 0, "left": 0}
    for t in range(T):
        root, end = int(roots[t]), int(roots[t + 1]) if t + 1 < T else n
        for leaf in range(root, end):
            if feat[leaf] != -1 or seen[leaf]:
                continue
            if sum(counts.values()) >= NUMPY_LEAVES:
                counts["left"] += 1
                continue
            path = []
            c = leaf
            while c != root:
                p = int(parent[c])
                path.append((p, int(c != left_of[p])))
                c = p
            want = _leaf_wants(path, feat, thr, bits, codes, top, nan_ok)
            if want is None:
                counts["dead"] += 1
                continue
            r = next((r for r in range(len(row_tree))
                      if row_tree[r] != t and _fits(want, kind[r], lo[r], hi[r], path, feat, thr, bits)),
                     len(row_tree))
            if r == len(row_tree):
                if r == cap:
                    counts["left"] += 1
                    continue
                kind[r] = FREE
                row_tree.append(t)
            row_tree[r] = t
            counts["covered"] += 1
            for j, (w, a, b, code) in want.items():
                if kind[r, j] == FREE:
                    kind[r, j], lo[r, j], hi[r, j] = w & 7, (code if w == CODE else a), b
                elif kind[r, j] == NUMBER:
                    lo[r, j], hi[r, j] = max(lo[r, j], a), min(hi[r, j], b)
    return len(row_tree), counts["covered"], counts["dead"], counts["left"]


def _leaf_wants(path: list[tuple[int, int]], feat: np.ndarray, thr: np.ndarray, bits: np.ndarray,
                codes: np.ndarray, top: float, nan_ok: bool) -> dict[int, tuple[int, float, float, int]] | None:
    """Per feature the path splits on, what the leaf asks ``(kind, lo, hi, code)``, the kind
    :data:`NUMBER` or'ed with 8 where NaN reaches the leaf too; None: its box is empty."""
    box: dict[int, list[Any]] = {}
    for p, go in path:
        f = int(feat[p])
        j = f & ~NAN_RIGHT if f >= 0 else -f - 2
        entry = box.setdefault(j, [-np.inf, top, True, False])
        if f < 0:
            entry[3] = entry[3] or codes[j] < 0
            continue
        if go == 0:
            entry[1] = min(entry[1], float(thr[p]))
        else:
            entry[0] = max(entry[0], float(thr[p]))
        entry[2] = entry[2] and go == int((f & NAN_RIGHT) != 0)
    want = {}
    for j, (a, b, nan_way, set_on_numbers) in box.items():
        if set_on_numbers:
            return None
        if codes[j] >= 0:
            code = _first_code(j, a, b, path, feat, thr, bits, codes)
            if code < 0:
                return None
            want[j] = (CODE, a, b, code)
        elif a < b and b >= -top:
            want[j] = (NUMBER | (8 if nan_ok and nan_way else 0), a, b, -1)
        elif nan_ok and nan_way:
            want[j] = (MISSING, a, b, -1)
        else:
            return None
    return want


def _admits(j: int, c: int, a: float, b: float, path: list[tuple[int, int]], feat: np.ndarray, thr: np.ndarray,
            bits: np.ndarray) -> bool:
    """Is code ``c`` of feature ``j`` in ``(a, b]`` and on the path's side of each of its sets?"""
    if not a < c <= b:
        return False
    for p, go in path:
        if int(feat[p]) != -(j + 2):
            continue
        o = int(thr[p])
        count = int(bits[o])
        held = (c >> 6) < count and bool((int(bits[o + 1 + (c >> 6)]) >> (c & 63)) & 1)
        if held == bool(go):
            return False
    return True


def _first_code(j: int, a: float, b: float, path: list[tuple[int, int]], feat: np.ndarray, thr: np.ndarray,
                bits: np.ndarray, codes: np.ndarray) -> int:
    return next((c for c in range(int(codes[j])) if _admits(j, c, a, b, path, feat, thr, bits)), -1)


def _fits(want: dict[int, tuple[int, float, float, int]], kind: np.ndarray, lo: np.ndarray, hi: np.ndarray,
          path: list[tuple[int, int]], feat: np.ndarray, thr: np.ndarray, bits: np.ndarray) -> bool:
    """Does the leaf's box (``want``) meet a row's (``kind``, ``lo``, ``hi``)?"""
    for j, (w, a, b, _) in want.items():
        k = kind[j]
        if k == FREE:
            continue
        if (w & 7) == NUMBER:
            ok = bool(w & 8) if k == MISSING else max(a, lo[j]) < min(b, hi[j])
        elif w == MISSING:
            ok = k == MISSING
        else:
            ok = _admits(j, int(lo[j]), a, b, path, feat, thr, bits)
        if not ok:
            return False
    return True
