"""The trees of an ONNX tree-ensemble operator, read exactly: :func:`read_tree_op`.

The operators: ai.onnx.ml ``TreeEnsembleClassifier`` and ``TreeEnsembleRegressor``
(opsets 1 and 3: ``nodes_*``, ``class_*`` / ``target_*`` attributes, the ``*_as_tensor``
double variants of opset 3) and ``TreeEnsemble`` (opset 5: ``tree_roots``, node and leaf
arrays, ``nodes_modes`` as a tensor, ``BRANCH_MEMBER`` sets in ``membership_values``,
``leaf_targetids`` / ``leaf_weights``, integer ``aggregate_function`` / ``post_transform``).
The semantics are onnxruntime's (the reference every reading is verified against):

* a node compares the value the operator receives with its threshold in the operator's
  input type: float32 for a float tensor (the float64 row value rounded to float32,
  the threshold a float32), float64 for a double tensor (a value that went through a
  float32 ``Cast`` first is a float32 value there);
* modes: ``BRANCH_LEQ`` ``x <= a``, ``LT``, ``GTE``, ``GT``, ``EQ``, ``NEQ``, ``MEMBER``
  (onnxruntime: ``x`` truncated to an integer is in the set, which holds integers only;
  so ``-0.5`` is a member of ``{0}``); true goes to the true child;
* a missing value (NaN) goes to the true child iff ``nodes_missing_value_tracks_true``
  is set, except at ``NEQ`` where ``NaN != a`` holds;
* the trees are the runs of consecutive ``nodes_treeids`` (each run's first node its
  root, children found by (tree id, node id)), a leaf's value the sum of its weights per
  target (weights on a node that is not a leaf are ignored).

Each comparison becomes the project's one split rule ``x <= T`` on the float64 row value
(:mod:`core.model`), with ``T`` the largest float64 for which the rule agrees with the
operator's own comparison (:func:`float32_le_bound` folds the float32 rounding); ``GTE``
and ``GT`` swap the children; ``EQ``, ``NEQ`` and ``MEMBER`` become the intervals where
the comparison holds, a short search tree over their bounds whose pieces lead to copies
of the true or false subtree (a budget on the nodes these copies add refuses what would
grow too large). A feature that is one category of a string column (a ``OneHotEncoder``
column, 0 or 1) becomes a split on that column's categories; a constant column sends
every row one way. Anything else is refused, never approximated.

How it is read. The operator's arrays (numpy, as
:func:`core.intake.parsing.onnx_graph.attributes` decodes them) become one index space of
nodes (:class:`_Graph`: opset 5 lists its leaves after its splits), children found at once
for every node. The converters' trees, every split a ``LEQ`` / ``LT`` / ``GTE`` / ``GT``
comparison of a number with a finite threshold, each node reached once from its root, are
then laid out level by level over all trees together (:func:`_walk`, :func:`_lay_out`: no
Python per node), in the preorder the project's trees use. A tree with anything else (an
equality or set split, a one-hot or constant column, a NaN or infinite threshold, a
damaged structure: a missing child, a cycle, a shared node) is walked node by node
(:class:`_Builder`), which also words every refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.intake.parsing.common import build_tree
from core.model.tree import MISSING_ONLY, float32_floor, float32_le_bound

try:  # the trees walked by the compiled kernel (core/intake/parsing/_wire.c); numpy walks them level by level
    from core.intake.parsing import _wire  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - built without a C compiler
    _wire = None

__all__ = ["Column", "TreeOpReading", "read_tree_op", "MODES", "POST_TRANSFORMS", "TREE_ARRAYS"]

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER", "LEAF")
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
_F32 = np.float32
_LEAF = MODES.index("LEAF")
_PLAIN = 4                      # modes 0..3 (LEQ, LT, GTE, GT): one threshold split each
#: the stacked arrays of :attr:`TreeOpReading.arrays`, as :meth:`core.model.TreeEnsemble.to_arrays` names them
TREE_ARRAYS = ("children_left", "children_right", "feature", "threshold", "value", "category_bits", "missing_left")


@dataclass(frozen=True)
class Column:
    """What one column of the tree operator's input is, in terms of the ensemble's features.

    ``kind`` is ``"num"`` (feature ``feature``'s number; ``through32``: it was rounded to
    float32 on the way), ``"hot"`` (1 iff feature ``feature``, a categorical one, holds its
    category code ``code``, else 0) or ``"const"`` (always ``value``).
    """

    kind: str
    feature: int = -1
    through32: bool = False
    code: int = -1
    value: float = 0.0


@dataclass
class TreeOpReading:
    """The trees of one operator and its output settings.

    ``arrays``: every tree's nodes stacked (``node_counts`` and :data:`TREE_ARRAYS`, each
    tree's children indexed within it, its root first and children after their parent, in
    preorder; ``value`` of shape (nodes, n_targets), zero at splits)."""

    arrays: dict[str, np.ndarray]
    n_targets: int                      # targets (regressor) or classes (classifier)
    base_values: np.ndarray             # as given (possibly empty)
    post_transform: str
    aggregate: str                      # "SUM" or "AVERAGE"
    class_labels: list[Any] | None      # classifier labels, else None
    used_targets: set[int] = field(default_factory=set)
    weights_all_positive: bool = True


def _enum(value: Any, names: Sequence[str], what: str) -> str:
    if isinstance(value, (bytes, str)):
        text = value.decode() if isinstance(value, bytes) else value
        if text not in names:
            raise UnsupportedModelError(f"The tree ensemble's {what} {text!r} is unknown; expected one of {list(names)}.")
        return text
    k = int(value)
    if not 0 <= k < len(names):
        raise UnsupportedModelError(f"The tree ensemble's {what} {k} is unknown.")
    return names[k]


def _mode_codes(values: Any) -> np.ndarray:
    """Node modes as their indices in :data:`MODES` (names, or numbers as opset 5 gives them)."""
    if values is None:
        return np.zeros(0, dtype=np.int64)
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        codes = values.astype(np.int64).ravel()
        bad = (codes < 0) | (codes >= len(MODES))
    elif isinstance(values, np.ndarray) and values.dtype.kind == "S":      # decoded at once (onnx_graph)
        codes = _name_codes(values, MODES)
        bad = codes < 0
    else:
        known: dict[Any, int] = {**{m: k for k, m in enumerate(MODES)}, **{m.encode(): k for k, m in enumerate(MODES)}}
        codes = np.array([known.get(m, -1) for m in values], dtype=np.int64)
        bad = codes < 0
    if bad.any():
        _enum(list(values)[int(np.argmax(bad))], MODES, "node mode")        # raises, naming it
    return codes


def _name_codes(values: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The index in ``names`` of each of the numpy bytes ``values`` (-1: none), names of at most
    16 bytes compared as two 64-bit words each."""
    codes = np.full(values.size, -1, dtype=np.int64)
    width = values.dtype.itemsize
    if _wire is not None and len(names) <= 16 and values.flags.c_contiguous:
        _wire.name_codes(values, width, tuple(m.encode() for m in names), codes)
        return codes
    if width > 16:
        for k, m in enumerate(names):
            codes[values == m.encode()] = k
        return codes
    padded = np.zeros((values.size, 16), dtype=np.uint8)
    padded[:, :width] = values.view(np.uint8).reshape(values.size, width)
    words = padded.view(np.uint64)
    for k, m in enumerate(names):
        want = np.frombuffer(m.encode().ljust(16, b"\0")[:16], dtype=np.uint64)
        if len(m) <= 16:
            codes[(words[:, 0] == want[0]) & (words[:, 1] == want[1])] = k
    return codes


def _arr(attrs: dict[str, Any], name: str, dtype: Any, n: int | None = None) -> np.ndarray:
    v = attrs.get(name)
    out = np.asarray([] if v is None else v, dtype=dtype).ravel()
    if n is not None and out.size not in (0, n):
        raise ModelError(f"The tree ensemble's attribute {name} has {out.size} entries for {n} nodes.")
    return out


# ------------------------------------------------------------- comparisons
Bounds = dict[tuple[float, bool], tuple[float, float]]


def _precompute(values: np.ndarray, tree_f32: bool) -> Bounds:
    """(threshold, float32 values) -> (le bound, lt bound) for every threshold of an operator,
    computed at once (see :class:`_Domain`)."""
    out: Bounds = {}
    a = np.unique(values[np.isfinite(values)])
    if tree_f32:
        a = np.unique(a.astype(_F32).astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        below = np.nextafter(a, -np.inf)
        le32 = float32_le_bound(float32_floor(a))
        lt32 = float32_le_bound(float32_floor(below))
    for v, l32, t32, b in zip(a.tolist(), le32.tolist(), lt32.tolist(), below.tolist()):
        out[(v, True)] = (l32, t32)
        if not tree_f32:
            out[(v, False)] = (v, b)
    return out


class _Domain:
    """The values a compared input takes: float32 (``f32``: float32 values, compared as such)
    or float64, and bounds ``T`` of the float64 row values for comparisons in that domain."""

    def __init__(self, tree_f32: bool, through32: bool, bounds: Bounds | None = None):
        self.tree_f32 = tree_f32
        self.f32_values = tree_f32 or through32
        self.bounds = bounds or {}

    def threshold(self, a: float) -> float:
        """The threshold as the operator holds it."""
        return float(_F32(a)) if self.tree_f32 else float(a)

    def le(self, a: float) -> float:
        """Largest float64 ``T`` with ``value <= a  <=>  x <= T``."""
        hit = self.bounds.get((a, self.f32_values))
        if hit is not None:
            return hit[0]
        if not self.f32_values:
            return float(a)
        return float(float32_le_bound(np.array([float32_floor(np.array([a]))[0]]))[0])

    def lt(self, a: float) -> float:
        """Largest float64 ``T`` with ``value < a  <=>  x <= T``."""
        hit = self.bounds.get((a, self.f32_values))
        if hit is not None:
            return hit[1]
        below = float(np.nextafter(a, -np.inf))
        return self.le(below)


def _holds(mode: str, v: float, a: float, members: np.ndarray | None) -> bool:
    """The operator's comparison on a value ``v`` already in its input type."""
    if mode == "BRANCH_LEQ":
        return bool(v <= a)
    if mode == "BRANCH_LT":
        return bool(v < a)
    if mode == "BRANCH_GTE":
        return bool(v >= a)
    if mode == "BRANCH_GT":
        return bool(v > a)
    if mode == "BRANCH_EQ":
        return bool(v == a)
    if mode == "BRANCH_NEQ":
        return bool(v != a)
    return bool(members is not None and v == v and np.any(members == np.trunc(v)))


def _pieces(mode: str, a: float, dom: _Domain, members: np.ndarray | None) -> tuple[list[float], list[bool]]:
    """The real line cut at bounds ``T_1 < .. < T_m`` (``x <= T``), with whether the
    comparison holds on each of the m+1 pieces; empty pieces dropped, equal neighbours merged."""
    if mode == "BRANCH_MEMBER":             # onnxruntime: the value truncated to an integer is in the set
        vals = np.unique(np.asarray(members, dtype=np.float64))
        vals = vals[~np.isnan(vals)]
        if np.any(vals != np.trunc(vals)):
            raise UnsupportedModelError("A set-membership split lists values that are not integers; onnxruntime "
                                        "tests membership of the value truncated to an integer only.")
        spans: list[list[float]] = []
        for v in vals:
            lo, hi = ((dom.lt(v), dom.lt(v + 1)) if v > 0 else (dom.le(-1.0), dom.lt(1.0)) if v == 0
                      else (dom.le(v - 1), dom.le(v)))
            if spans and lo <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], hi)
            else:
                spans.append([lo, hi])
        bounds: list[float] = []
        labels = [False]
        for lo, hi in spans:
            bounds += [lo, hi]
            labels += [True, False]
    elif a != a:                                # a NaN threshold: every comparison false (NEQ true)
        bounds, labels = [], [mode == "BRANCH_NEQ"]
    elif mode in ("BRANCH_LEQ", "BRANCH_GT"):
        bounds, labels = [dom.le(a)], [True, False]
    elif mode in ("BRANCH_LT", "BRANCH_GTE"):
        bounds, labels = [dom.lt(a)], [True, False]
    else:                                       # EQ / NEQ: the interval of the value a
        bounds, labels = [dom.lt(a), dom.le(a)], [False, True, False]
    if mode in ("BRANCH_GTE", "BRANCH_GT", "BRANCH_NEQ"):
        labels = [not v for v in labels]
    # drop pieces no finite number is in, then merge neighbours that agree
    keep_b: list[float] = []
    keep_l: list[bool] = [labels[0]]
    lo = -np.inf
    for t, lab in zip(bounds, labels[1:]):
        if not np.isfinite(t) or t <= lo:       # the piece before t is empty, or t bounds nothing finite
            if t == np.inf:
                continue
            keep_l[-1] = lab
            continue
        keep_b.append(float(t))
        keep_l.append(lab)
        lo = t
    out_b, out_l = [], [keep_l[0]]
    for t, lab in zip(keep_b, keep_l[1:]):
        if lab == out_l[-1]:
            continue
        out_b.append(t)
        out_l.append(lab)
    return out_b, out_l


# ------------------------------------------------------------- tree building
class _Builder:
    """Node dicts of one tree, with copies of subtrees where a comparison has several pieces."""

    def __init__(self, columns: Sequence[Column], tree_f32: bool, budget: int, bounds: Bounds):
        self.bounds = bounds
        self.columns = columns
        self.tree_f32 = tree_f32
        self.budget = budget
        self.nodes: list[dict[str, Any]] = []
        self.made = 0                       # nodes of the tree (redirect placeholders are not nodes)

    def new(self, d: dict[str, Any]) -> int:
        if "pending" not in d:
            if self.made >= self.budget:
                raise UnsupportedModelError(
                    f"The tree ensemble's equality or set-membership splits would need more than {self.budget:,} "
                    "nodes once written as threshold splits; it is too large to analyse exactly.")
            self.made += 1
        self.nodes.append(d)
        return len(self.nodes) - 1

    def split(self, mode: str, feature: int, a: float, nan_true: bool, members: np.ndarray | None,
              true_src: Any, false_src: Any, push: Any) -> int:
        """Create the split(s) of one operator node; ``push(src, parent, side)`` schedules a child."""
        if not 0 <= feature < len(self.columns):
            raise ModelError(f"A tree node splits on input column {feature}, but the tree ensemble's input has "
                             f"{len(self.columns)} columns.")
        col = self.columns[feature]
        if col.kind != "num":
            v = float(_F32(col.value)) if col.kind == "const" else 0.0
            if mode == "BRANCH_MEMBER" and members is not None and self.tree_f32:
                members = members.astype(_F32).astype(np.float64)
            a_t = float(_F32(a)) if self.tree_f32 else float(a)
            if col.kind == "const":
                return self.redirect(true_src if _holds(mode, v, a_t, members) else false_src, push)
            hot, cold = _holds(mode, 1.0, a_t, members), _holds(mode, 0.0, a_t, members)
            if hot == cold:
                return self.redirect(true_src if hot else false_src, push)
            i = self.new({"feature": col.feature, "categories_left": [col.code], "left": None, "right": None})
            push(true_src if hot else false_src, i, "left")
            push(false_src if hot else true_src, i, "right")
            return i
        dom = _Domain(self.tree_f32, col.through32, self.bounds)
        if members is not None and self.tree_f32:
            members = members.astype(_F32).astype(np.float64)
        bounds, labels = _pieces(mode, dom.threshold(a) if a == a else a, dom, members)
        nan_goes = True if mode == "BRANCH_NEQ" else nan_true
        src = {True: true_src, False: false_src}
        if not bounds:                              # every number one way
            if labels[0] == nan_goes:
                return self.redirect(src[labels[0]], push)
            i = self.new({"feature": col.feature, "threshold": MISSING_ONLY, "missing_left": False,
                          "left": None, "right": None})
            push(src[labels[0]], i, "left")
            push(src[nan_goes], i, "right")
            return i
        return self.search(col.feature, bounds, labels, 0, len(labels) - 1, nan_goes, src, push)

    def search(self, feature: int, bounds: list[float], labels: list[bool], lo: int, hi: int, nan_goes: bool,
               src: dict[bool, Any], push: Any) -> int:
        """A search tree over pieces lo..hi (bounds between them), NaN sent toward a piece of its label."""
        if lo == hi:
            return self.redirect(src[labels[lo]], push)
        mid = (lo + hi + 1) // 2                    # pieces lo..mid-1 left (x <= bounds[mid-1]), mid..hi right
        nan_left = nan_goes in labels[lo:mid]
        i = self.new({"feature": feature, "threshold": bounds[mid - 1], "missing_left": nan_left,
                      "left": None, "right": None})
        self.nodes[i]["left"] = self.search(feature, bounds, labels, lo, mid - 1, nan_goes, src, push)
        self.nodes[i]["right"] = self.search(feature, bounds, labels, mid, hi, nan_goes, src, push)
        return i

    def redirect(self, src: Any, push: Any) -> int:
        i = self.new({"pending": True})
        push(src, i, "self")
        return i


def _build(reading_nodes: Any, root: Any, columns: Sequence[Column], tree_f32: bool, budget: int,
           max_depth: int, bounds: Bounds) -> list[dict[str, Any]]:
    """One tree as node dicts, walked from ``root`` without recursion into the operator's nodes.

    ``reading_nodes(src)`` gives an operator node: ("leaf", value vector) or
    ("split", mode, feature, threshold, nan_true, members, true_src, false_src)."""
    b = _Builder(columns, tree_f32, budget, bounds)
    stack: list[tuple[Any, int, str, int]] = []

    def make(src: Any, depth: int) -> int:
        if depth > max_depth:
            raise ModelError("A tree of the model loops back on itself (a node leads to one of its ancestors): the "
                             "file is damaged. Export the model again from its library.")
        nd = reading_nodes(src)
        if nd[0] == "leaf":
            return b.new({"value": nd[1]})

        def push(child: Any, parent: int, side: str) -> None:
            stack.append((child, parent, side, depth + 1))
        _, mode, feature, a, nan_true, members, t_src, f_src = nd
        return b.split(mode, feature, a, nan_true, members, t_src, f_src, push)

    top = make(root, 0)
    while stack:
        src, parent, side, depth = stack.pop()
        i = make(src, depth)
        if side == "self":                          # a redirect placeholder takes the child's place
            b.nodes[parent] = {"redirect": i}
        else:
            b.nodes[parent][side] = i
    return _resolve(b.nodes, top)


def _resolve(nodes: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """Node dicts with redirects followed and the root at index 0."""
    def target(i: int) -> int:
        seen = 0
        while "redirect" in nodes[i]:
            i = nodes[i]["redirect"]
            seen += 1
            if seen > len(nodes):
                raise ModelError("A tree of the model loops back on itself: the file is damaged.")
        return i

    out = []
    for nd in nodes:
        nd = dict(nd)
        if "left" in nd:
            nd["left"], nd["right"] = target(nd["left"]), target(nd["right"])
        out.append(nd)
    root = target(top)
    if root != 0:
        out[0], out[root] = out[root], out[0]
        for nd in out:
            if "left" in nd:
                nd["left"] = {0: root, root: 0}.get(nd["left"], nd["left"])
                nd["right"] = {0: root, root: 0}.get(nd["right"], nd["right"])
    return out


# ------------------------------------------------------------- the trees at once
@dataclass
class _Graph:
    """An operator's trees in one index space of N nodes (opset 5: its splits, then its leaves).

    Per node: ``leaf``; ``mode`` (index in :data:`MODES`), ``feature`` (input column),
    ``threshold``, ``nan_true`` at splits; the ``true`` and ``false`` child (-1: none there);
    ``value`` (N, n_targets), the summed weights at leaves. ``roots``: each tree's root (-1:
    none). ``node`` and ``root_source`` read one tree node by node for :func:`_build`."""

    leaf: np.ndarray
    mode: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    nan_true: np.ndarray
    true: np.ndarray
    false: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    node: Callable[[Any], tuple]
    root_source: Callable[[int], Any]
    depth_limit: int                        # deeper, a walk node by node has met a cycle


def _walk(g: _Graph) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Every tree walked from its root, one level of all trees at a time: (the tree that
    reached each node, -1 for none; the levels' nodes; which trees are no plain tree: a
    missing child, or a node reached twice, by a cycle, two parents or two trees)."""
    owner = np.full(g.leaf.size, -1, dtype=np.int64)
    stamp = np.full(g.leaf.size, -1, dtype=np.int64)
    bad = g.roots < 0
    cur, tree = g.roots[~bad], np.flatnonzero(~bad)
    levels = []
    while cur.size:
        at = np.arange(cur.size)
        stamp[cur] = at                    # a node listed twice in the level keeps one place: the others clash
        bad[tree[(stamp[cur] != at) | (owner[cur] >= 0)]] = True
        keep = ~bad[tree]
        cur, tree = cur[keep], tree[keep]
        owner[cur] = tree
        levels.append(cur)
        inner = ~g.leaf[cur]
        kids = np.concatenate([g.true[cur[inner]], g.false[cur[inner]]])
        kid_tree = np.concatenate([tree[inner], tree[inner]])
        bad[kid_tree[kids < 0]] = True
        cur, tree = kids[kids >= 0], kid_tree[kids >= 0]
    return owner, levels, bad


def _plain_bounds(g: _Graph, columns: Sequence[Column], tree_f32: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every node: whether it is a plain split (``LEQ`` / ``LT`` / ``GTE`` / ``GT`` of a
    number column by a finite threshold, at a finite bound), its bound ``T`` (``x <= T`` iff the
    comparison holds: see :class:`_Domain`, whose bounds these are, computed at once) and the
    ensemble feature it reads."""
    num = np.array([c.kind == "num" for c in columns] + [False], dtype=bool)
    through = np.array([c.through32 for c in columns] + [False], dtype=bool)
    feat_of = np.array([c.feature for c in columns] + [-1], dtype=np.int64)
    if _wire is not None:                 # one pass over the nodes instead of numpy's thirty steps
        n = g.leaf.size
        plain, bound, feature = np.empty(n, dtype=bool), np.empty(n), np.empty(n, dtype=np.int64)
        _wire.plain_bounds(*(np.ascontiguousarray(a, dtype=t) for a, t in ((g.mode, np.int64), (g.feature, np.int64),
                                                                           (g.threshold, np.float64), (g.leaf, bool))),
                           num, through, feat_of, bool(tree_f32), _PLAIN, plain, bound, feature)
        return plain, bound, feature
    col = np.where((g.feature >= 0) & (g.feature < len(columns)), g.feature, len(columns))
    split = np.flatnonzero(~g.leaf)
    a = g.threshold[split]
    a = a.astype(_F32).astype(np.float64) if tree_f32 else a
    strict = (g.mode[split] == 1) | (g.mode[split] == 2)                 # LT, GTE: x < a
    bound = np.full(g.leaf.size, np.nan)
    plain = np.zeros(g.leaf.size, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        below = np.where(strict, np.nextafter(a, -np.inf), a)
        in32 = tree_f32 | through[col[split]]
        bound[split] = np.where(in32, float32_le_bound(float32_floor(np.where(in32, below, 0.0))), below)
        plain[split] = (g.mode[split] < _PLAIN) & num[col[split]] & np.isfinite(a) & np.isfinite(bound[split])
    return plain, bound, feat_of[col]


def _lay_out(g: _Graph, levels: list[np.ndarray], owner: np.ndarray, good: np.ndarray, bound: np.ndarray,
             feature: np.ndarray) -> dict[str, np.ndarray]:
    """The good trees' nodes stacked in tree order, each tree in preorder (a node, its left
    subtree, its right subtree: as :func:`core.intake.parsing.common.build_tree` numbers them),
    computed level by level: subtree sizes bottom up, then positions top down."""
    left, right, swap = sides = _sides(g)
    levels = [lv[good[owner[lv]]] for lv in levels]
    size = np.ones(g.leaf.size, dtype=np.int64)
    for lv in reversed(levels):
        p = lv[~g.leaf[lv]]
        size[p] = 1 + size[left[p]] + size[right[p]]
    pos = np.zeros(g.leaf.size, dtype=np.int64)
    for lv in levels:
        p = lv[~g.leaf[lv]]
        pos[left[p]] = pos[p] + 1
        pos[right[p]] = pos[p] + 1 + size[left[p]]
    nodes = np.concatenate(levels) if levels else np.zeros(0, dtype=np.int64)
    return _stacked_out(g, sides, nodes, owner, pos, size[g.roots[good]], good, bound, feature)


def _sides(g: _Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each node's (left, right) child, and whether they are swapped: the true child is on the
    right for GTE and GT."""
    swap = (g.mode == 2) | (g.mode == 3)
    return np.where(swap, g.false, g.true), np.where(swap, g.true, g.false), swap


def _stacked_out(g: _Graph, sides: tuple[np.ndarray, np.ndarray, np.ndarray], nodes: np.ndarray, owner: np.ndarray,
                 pos: np.ndarray, counts: np.ndarray, good: np.ndarray, bound: np.ndarray,
                 feature: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of the good trees' ``nodes`` (``counts`` nodes each, in tree order), each node at
    its place ``pos`` in its tree (``owner``); ``sides``: :func:`_sides`."""
    left, right, swap = sides
    start = np.zeros(g.roots.size, dtype=np.int64)
    start[good] = np.cumsum(counts) - counts
    at = start[owner[nodes]] + pos[nodes]
    inner, leaves = nodes[~g.leaf[nodes]], nodes[g.leaf[nodes]]
    i_at, l_at = at[~g.leaf[nodes]], at[g.leaf[nodes]]
    out = _unfilled(counts, g.value.shape[1])
    out["children_left"][i_at] = pos[left[inner]]
    out["children_right"][i_at] = pos[right[inner]]
    out["feature"][i_at] = feature[inner]
    out["threshold"][i_at] = bound[inner]
    out["missing_left"][i_at] = g.nan_true[inner] != swap[inner]
    out["value"][l_at] = g.value[leaves]
    return out


def _good(g: _Graph, owner: np.ndarray, bad: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """The trees laid out at once: walked as plain trees (not ``bad``), every split of theirs plain
    (the others are walked node by node)."""
    bad[owner[(owner >= 0) & ~g.leaf & ~plain]] = True
    return ~bad


def _unfilled(counts: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """The stacked arrays of trees of ``counts`` nodes (``k`` values a leaf) as every node starts:
    a leaf (no children, no feature, no threshold, values 0), missing values going right."""
    m = int(counts.sum())
    return {"node_counts": counts, "children_left": np.full(m, -1, dtype=np.int32),
            "children_right": np.full(m, -1, dtype=np.int32), "feature": np.full(m, -1, dtype=np.int32),
            "threshold": np.full(m, np.nan), "value": np.zeros((m, k)),
            "category_bits": np.zeros((m, 0), dtype=np.uint64), "missing_left": np.zeros(m, dtype=bool)}


def _compiled_lay_out(g: _Graph, plain: np.ndarray, bound: np.ndarray,
                      feature: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """What :func:`_walk` and :func:`_lay_out` give, each tree walked once depth first by the
    compiled kernel (``_wire.preorder``), its nodes put in place by ``_wire.scatter`` (as
    :func:`_stacked_out` puts them): (the good trees' arrays, which trees are good)."""
    left, right, swap = _sides(g)
    leaf, left, right = (np.ascontiguousarray(a, dtype=t) for a, t in ((g.leaf, bool), (left, np.int64),
                                                                      (right, np.int64)))
    n, trees = g.leaf.size, g.roots.size
    owner, pos = np.empty(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    counts, bad = np.zeros(trees, dtype=np.int64), np.zeros(trees, dtype=bool)
    _wire.preorder(leaf, left, right, np.ascontiguousarray(g.roots, dtype=np.int64), owner, pos, counts, bad)
    good = _good(g, owner, bad, plain)
    counts = counts[good]
    start = np.full(trees, -1, dtype=np.int64)
    start[good] = np.cumsum(counts) - counts
    k = g.value.shape[1]
    out = _unfilled(counts, k)
    _wire.scatter(owner, pos, start, leaf, left, right, np.ascontiguousarray(feature, dtype=np.int64),
                  np.ascontiguousarray(bound, dtype=np.float64), np.ascontiguousarray(g.nan_true != swap, dtype=bool),
                  np.ascontiguousarray(g.value, dtype=np.float64).reshape(-1), k, out["children_left"],
                  out["children_right"], out["feature"], out["threshold"], out["missing_left"],
                  out["value"].reshape(-1))
    return out, good


def _trees(g: _Graph, columns: Sequence[Column], tree_f32: bool, budget: int, n_codes: int | None,
           thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """All trees of the operator as stacked arrays (:attr:`TreeOpReading.arrays`): the plain
    ones laid out at once, any other walked node by node (see the module docstring)."""
    plain, bound, feature = _plain_bounds(g, columns, tree_f32)
    if _wire is not None:
        out, good = _compiled_lay_out(g, plain, bound, feature)
    else:
        owner, levels, bad = _walk(g)
        good = _good(g, owner, bad, plain)
        out = _lay_out(g, levels, owner, good, bound, feature)
    if not good.all():
        out = _with_walked(out, g, good, columns, tree_f32, budget, n_codes, thresholds)
    total = int(out["node_counts"].sum())
    if total > budget:
        raise UnsupportedModelError(f"The tree ensemble would have {total:,} nodes once its equality or "
                                    f"set-membership splits are written as threshold splits; at most {budget:,} "
                                    "are analysed exactly.")
    return out


def _with_walked(laid: dict[str, np.ndarray], g: _Graph, good: np.ndarray, columns: Sequence[Column],
                 tree_f32: bool, budget: int, n_codes: int | None, thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """The laid-out trees with the others, walked node by node (:func:`_build`), in tree order."""
    bounds = _precompute(thresholds, tree_f32)
    ends = np.cumsum(laid["node_counts"])
    starts = ends - laid["node_counts"]
    parts: list[dict[str, np.ndarray]] = []
    k = 0
    for r in range(g.roots.size):
        if good[r]:
            parts.append({name: laid[name][starts[k]:ends[k]] for name in TREE_ARRAYS})
            k += 1
            continue
        nodes = _build(g.node, g.root_source(r), columns, tree_f32, budget, g.depth_limit, bounds)
        t = build_tree(nodes, g.value.shape[1], n_codes, routes_missing=True)
        parts.append({"children_left": t.children_left, "children_right": t.children_right, "feature": t.feature,
                      "threshold": t.threshold, "value": t.value, "category_bits": t.bits,
                      "missing_left": np.asarray(t.missing_left, dtype=bool)})
    words = max(p["category_bits"].shape[1] for p in parts)
    out = {name: np.concatenate([p[name] for p in parts]) for name in TREE_ARRAYS if name != "category_bits"}
    out["category_bits"] = np.concatenate([np.pad(p["category_bits"], ((0, 0), (0, words - p["category_bits"].shape[1])))
                                           for p in parts]).astype(np.uint64)
    out["node_counts"] = np.array([len(p["children_left"]) for p in parts], dtype=np.int64)
    return out


# ------------------------------------------------------------- the operators
def read_tree_op(op_type: str, attrs: dict[str, Any], columns: Sequence[Column], tree_f32: bool,
                 budget: int, n_codes: int | None = None) -> TreeOpReading:
    """The trees and output settings of a tree-ensemble node (see the module docstring).

    Parameters
    ----------
    op_type : "TreeEnsembleClassifier", "TreeEnsembleRegressor" or "TreeEnsemble".
    attrs : the node's attributes (:func:`core.intake.parsing.onnx_graph.attributes`).
    columns : what each column of the operator's input is.
    tree_f32 : the operator's input is a float tensor (else double).
    budget : the most nodes all trees may have once written as threshold splits.
    n_codes : the most codes (missing code included) of a categorical feature, for the bitsets
        of the splits on one-hot columns.
    """
    v5 = op_type == "TreeEnsemble"
    g, given = _read_v5(attrs) if v5 else _read_v1(op_type, attrs)
    arrays = _trees(g, columns, tree_f32, budget, n_codes, g.threshold)
    agg, post = (1, 0) if v5 else (b"SUM", b"NONE")          # the defaults: opset 5 numbers its enums
    return TreeOpReading(arrays=arrays, **given,
                         aggregate=_enum(attrs.get("aggregate_function", agg), _AGGREGATES, "aggregate function"),
                         post_transform=_enum(attrs.get("post_transform", post), POST_TRANSFORMS, "post transform"))


def _settings(weights: np.ndarray, targets: np.ndarray, **given: Any) -> dict[str, Any]:
    """The operator's output settings for :class:`TreeOpReading` that its weights say."""
    small = targets.size and 0 <= targets.min() and targets.max() < 1 << 16     # counted, not sorted
    used = np.flatnonzero(np.bincount(targets)) if small else np.unique(targets)
    return {"used_targets": set(used.tolist()), "weights_all_positive": bool(np.all(weights >= 0)), **given}


def _v1_nodes(attrs: dict[str, Any], op_type: str) -> dict[str, np.ndarray]:
    """The ``nodes_*`` arrays of an opset 1/3 operator, checked for equal lengths."""
    tree_ids = _arr(attrs, "nodes_treeids", np.int64)
    n = tree_ids.size
    if n == 0:
        raise ModelError("The tree ensemble has no nodes.")
    a = {"tree": tree_ids, "node": _arr(attrs, "nodes_nodeids", np.int64, n),
         "feature": _arr(attrs, "nodes_featureids", np.int64, n), "mode": _mode_codes(attrs.get("nodes_modes")),
         "true": _arr(attrs, "nodes_truenodeids", np.int64, n), "false": _arr(attrs, "nodes_falsenodeids", np.int64, n)}
    if "nodes_values_as_tensor" in attrs:
        a["threshold"] = _arr(attrs, "nodes_values_as_tensor", np.float64, n)
    else:
        a["threshold"] = _arr(attrs, "nodes_values", np.float32, n).astype(np.float64)
    a["tracks"] = _arr(attrs, "nodes_missing_value_tracks_true", np.int64, n)
    if any(a[k].size != n for k in ("node", "feature", "mode", "true", "false", "threshold")):
        raise ModelError("The tree ensemble's node attributes have different lengths.")
    if np.any(a["mode"] == MODES.index("BRANCH_MEMBER")):
        raise UnsupportedModelError(f"{op_type} has no BRANCH_MEMBER mode (it belongs to TreeEnsemble, ai.onnx.ml "
                                    "opset 5).")
    return a


def _v1_weights(attrs: dict[str, Any], p: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(tree ids, node ids, target ids, weights) of the leaf weights (``class_*`` or ``target_*``)."""
    w_tree = _arr(attrs, p + "treeids", np.int64)
    w_node = _arr(attrs, p + "nodeids", np.int64, w_tree.size)
    w_id = _arr(attrs, p + "ids", np.int64, w_tree.size)
    if p + "weights_as_tensor" in attrs:
        w_val = _arr(attrs, p + "weights_as_tensor", np.float64, w_tree.size)
    else:
        w_val = _arr(attrs, p + "weights", np.float32, w_tree.size).astype(np.float64)
    if not w_node.size == w_id.size == w_val.size == w_tree.size:
        raise ModelError("The tree ensemble's leaf weight attributes have different lengths.")
    return w_tree, w_node, w_id, w_val


def _class_labels(attrs: dict[str, Any]) -> list[Any]:
    ints, strs = attrs.get("classlabels_int64s"), attrs.get("classlabels_strings")
    n_ints, n_strs = (0 if v is None else len(v) for v in (ints, strs))
    if n_ints and not n_strs:
        return [int(v) for v in np.asarray(ints).ravel()]
    if n_strs and not n_ints:
        return [s.decode() if isinstance(s, bytes) else str(s) for s in (strs if strs is not None else ())]
    raise ModelError("A TreeEnsembleClassifier needs exactly one of classlabels_int64s and classlabels_strings.")


class _NodeIndex:
    """Nodes found by (tree id, node id), as onnxruntime finds a node's children and a weight's
    leaf: the pairs as one sorted key each (ids in 0..2^31 packed, else their ranks); when the
    nodes are listed as converters list them (trees 0, 1, .. in turn, each its nodes 0, 1, ..
    in order), by their place alone (``first``: where each tree starts)."""

    def __init__(self, tree_ids: np.ndarray, node_ids: np.ndarray):
        self.first = _dense(tree_ids, node_ids)
        if self.first is not None:
            return
        self.packed = bool(tree_ids.min() >= 0 and node_ids.min() >= 0 and tree_ids.max() < 2**31
                           and node_ids.max() < 2**31)
        self.trees: np.ndarray | None = None if self.packed else np.unique(tree_ids)
        self.nodes: np.ndarray | None = None if self.packed else np.unique(node_ids)
        key, _ = self._key(tree_ids, node_ids)
        self.order = None if np.all(key[1:] > key[:-1]) else np.argsort(key, kind="stable")
        self.keys = key if self.order is None else key[self.order]
        if np.any(self.keys[1:] == self.keys[:-1]):
            raise ModelError("The tree ensemble lists a node twice (the same tree and node ids).")

    def _key(self, t: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.packed:
            ok = (i >= 0) & (i < 2**31) & (t >= 0) & (t < 2**31)
            return (np.where(ok, t, 0) << 31) | np.where(ok, i, 0), ok
        assert self.trees is not None and self.nodes is not None
        rt, ri = np.searchsorted(self.trees, t), np.searchsorted(self.nodes, i)
        ok = (rt < self.trees.size) & (ri < self.nodes.size)
        ok &= (self.trees[np.minimum(rt, self.trees.size - 1)] == t) & (self.nodes[np.minimum(ri, self.nodes.size - 1)] == i)
        return rt * self.nodes.size + ri, ok

    def find(self, t: np.ndarray, i: np.ndarray) -> np.ndarray:
        """The index of node (t, i) for each pair, -1 where there is none."""
        if self.first is not None:
            trees = self.first.size - 1
            ok = (t >= 0) & (t < trees)
            start = self.first[np.where(ok, t, 0)]
            ok &= (i >= 0) & (i < self.first[np.where(ok, t, 0) + 1] - start)
            return np.where(ok, start + i, -1)
        key, ok = self._key(t, i)
        at = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        ok &= self.keys[at] == key
        return np.where(ok, at if self.order is None else self.order[at], -1)


def _dense(tree_ids: np.ndarray, node_ids: np.ndarray) -> np.ndarray | None:
    """Where each tree starts (and the end), when the trees are 0, 1, .. in turn, each listing
    its nodes 0, 1, .. in order; else None."""
    step = np.diff(tree_ids)
    if tree_ids[0] != 0 or np.any((step != 0) & (step != 1)):
        return None
    first = np.concatenate(([0], np.flatnonzero(step) + 1, [tree_ids.size]))
    if not np.array_equal(node_ids, np.arange(tree_ids.size) - np.repeat(first[:-1], np.diff(first))):
        return None
    return first


def _read_v1(op_type: str, attrs: dict[str, Any]) -> tuple[_Graph, dict[str, Any]]:
    clf = op_type == "TreeEnsembleClassifier"
    a = _v1_nodes(attrs, op_type)
    w_tree, w_node, w_id, w_val = _v1_weights(attrs, "class_" if clf else "target_")
    labels = _class_labels(attrs) if clf else None
    n_targets = len(labels) if labels is not None else int(attrs.get("n_targets", 1) or 1)
    if "base_values_as_tensor" in attrs:
        base = _arr(attrs, "base_values_as_tensor", np.float64)
    else:
        base = _arr(attrs, "base_values", np.float32).astype(np.float64)
    if np.any(w_id < 0) or np.any(w_id >= n_targets):
        raise ModelError(f"A leaf weight names target {int(w_id[(w_id < 0) | (w_id >= n_targets)][0])}; the "
                         f"ensemble has {n_targets}.")
    index = _NodeIndex(a["tree"], a["node"])
    leaf = a["mode"] == _LEAF
    value = _v1_leaf_values(index, leaf, w_tree, w_node, w_id, w_val, n_targets)
    true, false = index.find(a["tree"], a["true"]), index.find(a["tree"], a["false"])
    own = np.arange(leaf.size)
    tracks = a["tracks"].astype(bool) if a["tracks"].size else np.zeros(leaf.size, dtype=bool)
    starts = np.concatenate(([0], np.flatnonzero(a["tree"][1:] != a["tree"][:-1]) + 1))   # onnxruntime: one root per run

    def node(k: int) -> tuple:
        if leaf[k]:
            return ("leaf", value[k])
        tree = int(a["tree"][k])
        kt, kf = int(true[k]), int(false[k])
        if kt < 0 or kf < 0:
            raise ModelError(f"Node {int(a['node'][k])} of tree {tree} points to a node that does not exist.")
        if kt == k or kf == k:
            raise ModelError(f"Node {int(a['node'][k])} of tree {tree} points to itself.")
        return ("split", MODES[a["mode"][k]], int(a["feature"][k]), float(a["threshold"][k]), bool(tracks[k]), None,
                kt, kf)

    g = _Graph(leaf=leaf, mode=a["mode"], feature=a["feature"], threshold=a["threshold"], nan_true=tracks,
               true=np.where(true == own, -1, true), false=np.where(false == own, -1, false), value=value,
               roots=starts, node=node, root_source=lambda r: int(starts[r]), depth_limit=leaf.size)
    return g, _settings(w_val, w_id, n_targets=n_targets, base_values=base, class_labels=labels)


def _v1_leaf_values(index: _NodeIndex, leaf: np.ndarray, w_tree: np.ndarray, w_node: np.ndarray, w_id: np.ndarray,
                    w_val: np.ndarray, n_targets: int) -> np.ndarray:
    """Each leaf's weights summed per target, in the order given (weights on a node that is not
    a leaf ignored, as onnxruntime ignores them)."""
    at = index.find(w_tree, w_node)
    if np.any(at < 0):
        first = int(np.argmax(at < 0))
        raise ModelError(f"A leaf weight is for node {int(w_node[first])} of tree {int(w_tree[first])}, which does "
                         "not exist.")
    on_leaf = leaf[at]
    cell = at[on_leaf] * n_targets + w_id[on_leaf]       # summed in the order given, from 0.0, as one by one
    value = np.bincount(cell, weights=w_val[on_leaf], minlength=leaf.size * n_targets).reshape(leaf.size, n_targets)
    has = np.zeros(leaf.size, dtype=bool)
    has[at[on_leaf]] = True
    if np.any(leaf & ~has):
        raise ModelError("A leaf of the tree ensemble has no weight.")
    return value


def _read_v5(attrs: dict[str, Any]) -> tuple[_Graph, dict[str, Any]]:
    a = _v5_nodes(attrs)
    n = a["feature"].size
    leaf_t = _arr(attrs, "leaf_targetids", np.int64)
    leaf_w = _arr(attrs, "leaf_weights", np.float64, leaf_t.size)
    n_targets = int(attrs.get("n_targets", 1) or 1)
    if leaf_w.size != leaf_t.size or leaf_t.size == 0:
        raise ModelError("The tree ensemble's leaves have no weights.")
    if np.any(leaf_t < 0) or np.any(leaf_t >= n_targets):
        raise ModelError(f"A leaf names a target outside 0..{n_targets - 1}.")
    members = _v5_members(attrs, a["mode"])
    n_leaves = leaf_t.size
    value = np.zeros((n + n_leaves, n_targets))
    value[n + np.arange(n_leaves), leaf_t] = leaf_w
    roots = _arr(attrs, "tree_roots", np.int64)

    def child(ids: np.ndarray, is_leaf: np.ndarray) -> np.ndarray:
        ok = np.where(is_leaf, (ids >= 0) & (ids < n_leaves), (ids >= 0) & (ids < n))
        return np.where(ok, np.where(is_leaf, ids + n, ids), -1)

    def node(src: tuple[bool, int]) -> tuple:
        is_leaf, k = src
        if is_leaf:
            if not 0 <= k < n_leaves:
                raise ModelError(f"A node points to leaf {k}; the ensemble has {n_leaves} leaves.")
            return ("leaf", value[n + k])
        if not 0 <= k < n:
            raise ModelError(f"A node points to node {k}; the ensemble has {n} nodes.")
        return ("split", MODES[a["mode"][k]], int(a["feature"][k]), float(a["splits"][k]), bool(a["tracks"][k]),
                members.get(k), (bool(a["true_leaf"][k]), int(a["true"][k])),
                (bool(a["false_leaf"][k]), int(a["false"][k])))

    pad = np.zeros(n_leaves, dtype=np.int64)
    g = _Graph(leaf=np.arange(n + n_leaves) >= n, mode=np.concatenate([a["mode"], pad + _LEAF]),
               feature=np.concatenate([a["feature"], pad - 1]),
               threshold=np.concatenate([a["splits"], np.full(n_leaves, np.nan)]),
               nan_true=np.concatenate([a["tracks"], pad.astype(bool)]),
               true=np.concatenate([child(a["true"], a["true_leaf"]), pad - 1]),
               false=np.concatenate([child(a["false"], a["false_leaf"]), pad - 1]), value=value,
               roots=np.where((roots >= 0) & (roots < n), roots, -1), node=node,
               root_source=lambda r: (False, int(roots[r])), depth_limit=n)
    return g, _settings(leaf_w, leaf_t, n_targets=n_targets, base_values=np.zeros(0), class_labels=None)


def _v5_nodes(attrs: dict[str, Any]) -> dict[str, np.ndarray]:
    """The ``nodes_*`` arrays of an opset 5 ``TreeEnsemble``, checked."""
    roots = _arr(attrs, "tree_roots", np.int64)
    feats = _arr(attrs, "nodes_featureids", np.int64)
    n = feats.size
    if n == 0 or roots.size == 0:
        raise ModelError("The tree ensemble has no nodes.")
    a = {"feature": feats, "mode": _mode_codes(_arr(attrs, "nodes_modes", np.int64, n)),
         "splits": _arr(attrs, "nodes_splits", np.float64, n), "true": _arr(attrs, "nodes_truenodeids", np.int64, n),
         "false": _arr(attrs, "nodes_falsenodeids", np.int64, n),
         "true_leaf": _arr(attrs, "nodes_trueleafs", np.int64, n).astype(bool),
         "false_leaf": _arr(attrs, "nodes_falseleafs", np.int64, n).astype(bool)}
    tracks = _arr(attrs, "nodes_missing_value_tracks_true", np.int64, n)
    if not all(a[k].size == n for k in a):
        raise ModelError("The tree ensemble's node attributes have different lengths.")
    if np.any(a["mode"] == _LEAF):
        raise ModelError("TreeEnsemble nodes cannot have the LEAF mode (leaves are listed apart).")
    a["tracks"] = tracks.astype(bool) if tracks.size else np.zeros(n, dtype=bool)
    return a


def _v5_members(attrs: dict[str, Any], modes: np.ndarray) -> dict[int, np.ndarray]:
    """The set of each ``BRANCH_MEMBER`` node: ``membership_values`` cut at its NaNs, in node order."""
    flat = _arr(attrs, "membership_values", np.float64)
    cuts = np.flatnonzero(np.isnan(flat))
    sets = [s for s in np.split(flat, cuts)]
    sets = [sets[0]] + [s[1:] for s in sets[1:]]
    if sets and sets[-1].size == 0:
        sets.pop()
    member_nodes = np.flatnonzero(modes == MODES.index("BRANCH_MEMBER")).tolist()
    if len(sets) < len(member_nodes):
        raise ModelError(f"The tree ensemble has {len(member_nodes)} set-membership nodes but "
                         f"{len(sets)} sets of members.")
    return dict(zip(member_nodes, sets))
