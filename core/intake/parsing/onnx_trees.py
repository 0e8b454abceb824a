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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.model.tree import MISSING_ONLY, float32_floor, float32_le_bound

__all__ = ["Column", "TreeOpReading", "read_tree_op", "MODES", "POST_TRANSFORMS"]

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER", "LEAF")
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
_F32 = np.float32


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
    """The trees of one operator as node dicts for :func:`core.intake.parsing.common.build_tree`,
    and the operator's output settings."""

    trees: list[list[dict[str, Any]]]
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


# ------------------------------------------------------------- the operators
def read_tree_op(op_type: str, attrs: dict[str, Any], columns: Sequence[Column], tree_f32: bool,
                 budget: int) -> TreeOpReading:
    """The trees and output settings of a tree-ensemble node (see the module docstring).

    Parameters
    ----------
    op_type : "TreeEnsembleClassifier", "TreeEnsembleRegressor" or "TreeEnsemble".
    attrs : the node's attributes (:func:`core.intake.parsing.onnx_graph.attributes`).
    columns : what each column of the operator's input is.
    tree_f32 : the operator's input is a float tensor (else double).
    budget : the most nodes all trees may have once written as threshold splits.
    """
    if op_type == "TreeEnsemble":
        return _read_v5(attrs, columns, tree_f32, budget)
    return _read_v1(op_type, attrs, columns, tree_f32, budget)


def _read_v1(op_type: str, attrs: dict[str, Any], columns: Sequence[Column], tree_f32: bool,
             budget: int) -> TreeOpReading:
    clf = op_type == "TreeEnsembleClassifier"
    tree_ids = _arr(attrs, "nodes_treeids", np.int64)
    n = tree_ids.size
    if n == 0:
        raise ModelError("The tree ensemble has no nodes.")
    node_ids = _arr(attrs, "nodes_nodeids", np.int64, n)
    feats = _arr(attrs, "nodes_featureids", np.int64, n)
    modes = [_enum(m, MODES, "node mode") for m in (attrs.get("nodes_modes") or [])]
    true_ids = _arr(attrs, "nodes_truenodeids", np.int64, n)
    false_ids = _arr(attrs, "nodes_falsenodeids", np.int64, n)
    if "nodes_values_as_tensor" in attrs:
        values = _arr(attrs, "nodes_values_as_tensor", np.float64, n)
    else:
        values = _arr(attrs, "nodes_values", np.float32, n).astype(np.float64)
    tracks = _arr(attrs, "nodes_missing_value_tracks_true", np.int64, n)
    if len(modes) != n or node_ids.size != n or feats.size != n or true_ids.size != n or false_ids.size != n \
            or values.size != n:
        raise ModelError("The tree ensemble's node attributes have different lengths.")
    if "BRANCH_MEMBER" in modes:
        raise UnsupportedModelError(f"{op_type} has no BRANCH_MEMBER mode (it belongs to TreeEnsemble, ai.onnx.ml "
                                    "opset 5).")
    p = "class_" if clf else "target_"
    w_tree = _arr(attrs, p + "treeids", np.int64)
    w_node = _arr(attrs, p + "nodeids", np.int64, w_tree.size)
    w_id = _arr(attrs, p + "ids", np.int64, w_tree.size)
    if p + "weights_as_tensor" in attrs:
        w_val = _arr(attrs, p + "weights_as_tensor", np.float64, w_tree.size)
    else:
        w_val = _arr(attrs, p + "weights", np.float32, w_tree.size).astype(np.float64)
    if not w_node.size == w_id.size == w_val.size == w_tree.size:
        raise ModelError("The tree ensemble's leaf weight attributes have different lengths.")
    if clf:
        ints, strs = attrs.get("classlabels_int64s"), attrs.get("classlabels_strings")
        labels: list[Any] | None
        if ints and not strs:
            labels = [int(v) for v in ints]
        elif strs and not ints:
            labels = [s.decode() if isinstance(s, bytes) else str(s) for s in strs]
        else:
            raise ModelError("A TreeEnsembleClassifier needs exactly one of classlabels_int64s and classlabels_strings.")
        n_targets = len(labels)
    else:
        labels = None
        n_targets = int(attrs.get("n_targets", 1) or 1)
    if "base_values_as_tensor" in attrs:
        base = _arr(attrs, "base_values_as_tensor", np.float64)
    else:
        base = _arr(attrs, "base_values", np.float32).astype(np.float64)
    if np.any(w_id < 0) or np.any(w_id >= n_targets):
        raise ModelError(f"A leaf weight names target {int(w_id[(w_id < 0) | (w_id >= n_targets)][0])}; the "
                         f"ensemble has {n_targets}.")
    index = {ti: k for k, ti in enumerate(zip(tree_ids.tolist(), node_ids.tolist()))}
    if len(index) != n:
        raise ModelError("The tree ensemble lists a node twice (the same tree and node ids).")
    leaf = np.array([m == "LEAF" for m in modes])
    value = np.zeros((n, n_targets))
    has = np.zeros(n, dtype=bool)
    for t, i, c, w in zip(w_tree.tolist(), w_node.tolist(), w_id.tolist(), w_val.tolist()):
        k = index.get((t, i))
        if k is None:
            raise ModelError(f"A leaf weight is for node {int(i)} of tree {int(t)}, which does not exist.")
        if leaf[k]:                               # onnxruntime ignores weights on a node that is not a leaf
            value[k, c] += w
            has[k] = True
    if np.any(leaf & ~has):
        raise ModelError("A leaf of the tree ensemble has no weight.")
    tree_f32_values = tree_f32

    def node(k: int) -> tuple:
        if leaf[k]:
            return ("leaf", value[k])
        tree = int(tree_ids[k])
        kt, kf = index.get((tree, int(true_ids[k]))), index.get((tree, int(false_ids[k])))
        if kt is None or kf is None:
            raise ModelError(f"Node {int(node_ids[k])} of tree {tree} points to a node that does not exist.")
        if kt == k or kf == k:
            raise ModelError(f"Node {int(node_ids[k])} of tree {tree} points to itself.")
        return ("split", modes[k], int(feats[k]), float(values[k]), bool(tracks[k]) if tracks.size else False, None,
                kt, kf)

    starts = [0] + (np.flatnonzero(tree_ids[1:] != tree_ids[:-1]) + 1).tolist()   # onnxruntime: one root per run
    bounds = _precompute(values, tree_f32)
    trees = [_build(node, s, columns, tree_f32_values, budget, n, bounds) for s in starts]
    _spend(trees, budget)
    agg = _enum(attrs.get("aggregate_function", b"SUM"), _AGGREGATES, "aggregate function")
    post = _enum(attrs.get("post_transform", b"NONE"), POST_TRANSFORMS, "post transform")
    return TreeOpReading(trees=trees, n_targets=n_targets, base_values=base, post_transform=post, aggregate=agg,
                         class_labels=labels, used_targets={int(c) for c in w_id},
                         weights_all_positive=bool(np.all(w_val >= 0)))


def _spend(trees: list[list[dict]], budget: int) -> None:
    total = sum(sum(1 for nd in t if "redirect" not in nd) for t in trees)
    if total > budget:
        raise UnsupportedModelError(f"The tree ensemble would have {total:,} nodes once its equality or "
                                    f"set-membership splits are written as threshold splits; at most {budget:,} "
                                    "are analysed exactly.")


def _read_v5(attrs: dict[str, Any], columns: Sequence[Column], tree_f32: bool, budget: int) -> TreeOpReading:
    roots = _arr(attrs, "tree_roots", np.int64)
    feats = _arr(attrs, "nodes_featureids", np.int64)
    n = feats.size
    if n == 0 or roots.size == 0:
        raise ModelError("The tree ensemble has no nodes.")
    modes = [_enum(int(m), MODES, "node mode") for m in _arr(attrs, "nodes_modes", np.int64, n)]
    splits = _arr(attrs, "nodes_splits", np.float64, n)
    true_ids = _arr(attrs, "nodes_truenodeids", np.int64, n)
    false_ids = _arr(attrs, "nodes_falsenodeids", np.int64, n)
    true_leaf = _arr(attrs, "nodes_trueleafs", np.int64, n)
    false_leaf = _arr(attrs, "nodes_falseleafs", np.int64, n)
    tracks = _arr(attrs, "nodes_missing_value_tracks_true", np.int64, n)
    if not len(modes) == splits.size == true_ids.size == false_ids.size == true_leaf.size == false_leaf.size == n:
        raise ModelError("The tree ensemble's node attributes have different lengths.")
    if "LEAF" in modes:
        raise ModelError("TreeEnsemble nodes cannot have the LEAF mode (leaves are listed apart).")
    leaf_t = _arr(attrs, "leaf_targetids", np.int64)
    leaf_w = _arr(attrs, "leaf_weights", np.float64, leaf_t.size)
    n_targets = int(attrs.get("n_targets", 1) or 1)
    if leaf_w.size != leaf_t.size or leaf_t.size == 0:
        raise ModelError("The tree ensemble's leaves have no weights.")
    if np.any(leaf_t < 0) or np.any(leaf_t >= n_targets):
        raise ModelError(f"A leaf names a target outside 0..{n_targets - 1}.")
    members: dict[int, np.ndarray] = {}
    flat = _arr(attrs, "membership_values", np.float64)
    sets: list[np.ndarray] = []
    cur: list[float] = []
    for v in flat:
        if v != v:
            sets.append(np.array(cur))
            cur = []
        else:
            cur.append(v)
    if cur:
        sets.append(np.array(cur))
    member_nodes = [k for k, m in enumerate(modes) if m == "BRANCH_MEMBER"]
    if len(sets) < len(member_nodes):
        raise ModelError(f"The tree ensemble has {len(member_nodes)} set-membership nodes but "
                         f"{len(sets)} sets of members.")
    for k, s in zip(member_nodes, sets):
        members[k] = s
    value = np.zeros((leaf_t.size, n_targets))
    value[np.arange(leaf_t.size), leaf_t] = leaf_w

    def node(src: tuple[bool, int]) -> tuple:
        is_leaf, k = src
        if is_leaf:
            if not 0 <= k < leaf_t.size:
                raise ModelError(f"A node points to leaf {k}; the ensemble has {leaf_t.size} leaves.")
            return ("leaf", value[k])
        if not 0 <= k < n:
            raise ModelError(f"A node points to node {k}; the ensemble has {n} nodes.")
        return ("split", modes[k], int(feats[k]), float(splits[k]), bool(tracks[k]) if tracks.size else False,
                members.get(k), (bool(true_leaf[k]), int(true_ids[k])), (bool(false_leaf[k]), int(false_ids[k])))

    bounds = _precompute(splits, tree_f32)
    trees = [_build(node, (False, int(r)), columns, tree_f32, budget, n, bounds) for r in roots]
    _spend(trees, budget)
    agg = _enum(attrs.get("aggregate_function", 1), _AGGREGATES, "aggregate function")
    post = _enum(attrs.get("post_transform", 0), POST_TRANSFORMS, "post transform")
    return TreeOpReading(trees=trees, n_targets=n_targets, base_values=np.zeros(0), post_transform=post,
                         aggregate=agg, class_labels=None, used_targets={int(c) for c in leaf_t},
                         weights_all_positive=bool(np.all(leaf_w >= 0)))
