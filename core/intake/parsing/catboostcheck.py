"""Structural checks of CatBoost's JSON export, before CatBoost (or the parser) reads it.

CatBoost's JSON loader (``ConvertJsonToCatboostModel`` in
``catboost/libs/model/model_export/json_model_helpers.cpp``) trusts the file: a split
is read by its ``split_index`` alone, an index into the model's binary features
(every float feature's ``borders`` in the order of ``features_info.float_features``,
then every one-hot feature's ``values``), and a leaf count by ``leaf_values``' length.
So an index out of range, a subtree removed or a leaf count that is no power of two
made CatBoost read outside its arrays and end the process; and a split whose own
``border`` or ``float_feature_index`` differs from the binary feature its
``split_index`` names is another model for CatBoost than for a reader of those
fields (a border edited to 3.4e38: CatBoost went on splitting at 1.3, the
parser at 3.4e38). :func:`check_catboost_json` refuses, naming the part of the file:

* ``features_info``: float and categorical features each an object whose
  ``feature_index`` is its place in its list, with a distinct ``flat_feature_index``
  among all of them; borders numbers in increasing order that float32 holds
  (CatBoost reads them so: 1e39 becomes infinity), ``nan_value_treatment`` one of
  CatBoost's; one-hot ``values`` whole numbers of 32 bits;
* trees (``oblivious_trees`` or ``trees``, one of them): an oblivious tree's
  ``leaf_values`` ``dimension << depth`` numbers (depth at most
  :data:`MAX_DEPTH`), a non-symmetric tree's nodes each a leaf (``value``: one
  number or ``dimension`` of them) or a split with ``left`` and ``right``;
  the same dimension in every tree; leaf values finite and within
  :data:`~core.intake.parsing.filecheck.MAX_LEAF_VALUE`;
* splits: a ``split_index`` naming a binary feature, its ``split_type`` and
  fields those of that feature (target statistics, ``OnlineCtr``, are left to the
  parser, which refuses them by name);
* ``scale_and_bias``: a finite scale and one finite bias, or one per dimension;
* ``model_info``: an object; its ``params`` and ``class_params`` objects (CatBoost
  parses them as JSON), ``class_params``' ``class_names`` one per class of a
  multi-class model.

Importable from :mod:`core.intake.parsing.validate`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from core.errors import UnsupportedModelError
from core.intake.parsing.filecheck import FLOAT32_LIMIT, MAX_CLASSES, MAX_LEAF_VALUE, _damaged, _shown

__all__ = ["check_catboost_json", "check_catboost_cbm", "refuse_ctrs", "MAX_DEPTH"]

MAX_DEPTH = 16           # CatBoost grows trees of depth 16 at most; an oblivious tree holds 2**depth leaves
_NAN_TREATMENTS = ("AsIs", "AsFalse", "AsTrue")
_LABEL_TYPES = ("Boolean", "Integer", "Float", "String", "None")
_INT32 = 2**31


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_catboost_json(doc: object, filename: str = "model.json") -> None:
    """Check a CatBoost JSON export (decoded) before CatBoost or the parser reads it."""
    if not isinstance(doc, dict):
        raise _damaged(filename, "the CatBoost model is not a JSON object")
    fi = doc.get("features_info", {})
    if not isinstance(fi, dict):
        raise _damaged(filename, "its features_info is not an object")
    bins = _binary_features(fi, filename)
    if fi.get("ctrs") or "ctr_data" in doc:
        raise refuse_ctrs(fi)
    oblivious, trees = _trees(doc, filename)
    dims = {(_oblivious_tree if oblivious else _nested_tree)(tree, t, bins, filename)
            for t, tree in enumerate(trees)}
    if len(dims) != 1:
        raise _damaged(filename, f"its trees hold {sorted(dims)} values per leaf, not one number for all")
    _check_scale_and_bias(doc, dims.pop(), filename)
    _check_model_info(doc, filename)


def _trees(doc: dict[str, Any], filename: str) -> tuple[bool, list[Any]]:
    """Whether the trees are oblivious, and the trees: one of the two lists, not empty."""
    if ("oblivious_trees" in doc) == ("trees" in doc):
        raise _damaged(filename, "it holds neither or both of 'oblivious_trees' and 'trees'")
    oblivious = "oblivious_trees" in doc
    trees = doc["oblivious_trees" if oblivious else "trees"]
    if not isinstance(trees, list) or not trees:
        raise _damaged(filename, "its trees are not a list of trees")
    return oblivious, trees


def refuse_ctrs(fi: dict[str, Any]) -> UnsupportedModelError:
    """The refusal of a model whose splits read target statistics (CTRs) of its categorical
    features, naming the features they read (all categorical ones when the file does not say)."""
    name = _categorical_names(fi)
    read = {name.get(i) for i in _ctr_features(fi)}
    used = sorted(str(n) for n in read if n is not None) or sorted(name.values())
    return UnsupportedModelError(
        f"This CatBoost model turns categorical features into target statistics (CTRs) on {used}: those "
        "splits depend on counts stored in the model, not on the category alone, and are not supported. "
        "Retrain with one_hot_max_size above the number of categories of these features (one-hot splits).")


def _categorical_names(fi: dict[str, Any]) -> dict[Any, str]:
    """Each categorical feature's name (or id, or column) by its ``feature_index``."""
    cats = [f for f in fi.get("categorical_features") or [] if isinstance(f, dict)]
    return {f.get("feature_index"): str(f.get("feature_name") or f.get("feature_id") or f.get("flat_feature_index"))
            for f in cats}


def _ctr_features(fi: dict[str, Any]) -> list[Any]:
    """The ``cat_feature_index`` of every element of every target statistic the file lists."""
    ctrs = [c for c in fi.get("ctrs") or [] if isinstance(c, dict)]
    return [e.get("cat_feature_index") for c in ctrs
            for e in c.get("elements") or [] if isinstance(e, dict) and "cat_feature_index" in e]


def _binary_features(fi: dict[str, Any], filename: str) -> list[tuple[str, int, float]]:
    """The model's binary features, as CatBoost numbers them for ``split_index``:
    ``("FloatFeature", float feature, border as float32)`` for every border of every
    float feature, then ``("OneHotFeature", categorical feature, value mod 2**32)``."""
    floats, cats = fi.get("float_features", []), fi.get("categorical_features", [])
    if not isinstance(floats, list) or not isinstance(cats, list):
        raise _damaged(filename, "its features_info lists are not lists")
    listed = len(floats) + len(cats)
    flat: set[int] = set()
    bins: list[tuple[str, int, float]] = []
    for kind, features in (("float", floats), ("categorical", cats)):
        for i, f in enumerate(features):
            where = f"its {kind} feature {i}"
            _check_feature_place(f, i, where, listed, flat, filename)
            if kind == "float":
                bins += [("FloatFeature", i, b) for b in _borders(f, where, filename)]
            elif "values" in f:
                bins += [("OneHotFeature", i, v) for v in _one_hot_values(f["values"], where, filename)]
    return bins


def _check_feature_place(f: Any, i: int, where: str, listed: int, flat: set[int], filename: str) -> None:
    """Feature ``i`` is an object at its place in its list, with a column of its own (added to ``flat``)."""
    if not isinstance(f, dict):
        raise _damaged(filename, f"{where} is not an object")
    index: Any = f.get("feature_index")
    at: Any = f.get("flat_feature_index")
    if not _whole(index) or index != i:
        raise _damaged(filename, f"{where} has the feature_index {_shown(index)}, not {i}")
    if not _whole(at) or not 0 <= at < listed or at in flat:
        raise _damaged(filename, f"{where} has the flat_feature_index {_shown(at)}, but the model lists "
                                 f"{listed} features (each with a column of its own)")
    flat.add(at)


def _one_hot_values(values: Any, where: str, filename: str) -> list[float]:
    """A categorical feature's one-hot values (whole numbers of 32 bits), each modulo 2**32."""
    if not isinstance(values, list) or not all(_whole(v) and -_INT32 <= v < 2 * _INT32 for v in values):
        raise _damaged(filename, f"{where}'s one-hot values are not whole numbers of 32 bits")
    return [float(v & 0xFFFFFFFF) for v in values]


def _borders(f: dict[str, Any], where: str, filename: str) -> list[float]:
    """A float feature's borders as CatBoost holds them (float32), checked."""
    borders = f.get("borders", [])
    if not isinstance(borders, list) or not all(_number(b) and abs(b) < FLOAT32_LIMIT for b in borders):
        raise _damaged(filename, f"{where}'s borders are not numbers that float32 holds")
    held = np.asarray(borders, dtype=np.float32).astype(np.float64)
    if np.any(np.diff(held) <= 0):
        raise _damaged(filename, f"{where}'s borders are not in increasing order")
    if f.get("nan_value_treatment", "AsIs") not in _NAN_TREATMENTS:
        raise _damaged(filename, f"{where}'s nan_value_treatment is {_shown(f.get('nan_value_treatment'))}, not "
                                 f"one of {', '.join(_NAN_TREATMENTS)}")
    return held.tolist()


def _check_split(s: Any, where: str, bins: list[Any], filename: str) -> None:
    """A split against the binary feature its ``split_index`` names (CatBoost reads the index only)."""
    if not isinstance(s, dict):
        raise _damaged(filename, f"{where} is not an object")
    kind = s.get("split_type")
    index: Any = s.get("split_index")
    if kind not in ("FloatFeature", "OneHotFeature"):
        raise _damaged(filename, f"{where} has the split_type {_shown(kind)}")
    if not _whole(index) or not 0 <= index < len(bins):
        raise _damaged(filename, f"{where} has the split_index {_shown(index)}, outside the model's "
                                 f"{len(bins)} binary features")
    own = _own_feature(s, kind)
    if own != bins[index] or not _whole(own[1]):
        feature, at = bins[index][1], bins[index][2]
        raise _damaged(filename, f"{where} says {kind} of feature {str(own[1])[:20]} at {str(own[2])[:30]}, but its "
                                 f"split_index {index} is feature {feature} at {at!r} (CatBoost reads the index)")


def _own_feature(s: dict[str, Any], kind: str) -> tuple[str, Any, float | None]:
    """The binary feature a split's own fields describe: its kind, feature and border (or value mod 2**32),
    None where the field is not one CatBoost could hold."""
    if kind == "FloatFeature":
        border: Any = s.get("border")
        return ("FloatFeature", s.get("float_feature_index"),
                float(np.float32(border)) if _number(border) and abs(border) < FLOAT32_LIMIT else None)
    value: Any = s.get("value")
    return ("OneHotFeature", s.get("cat_feature_index"), float(value & 0xFFFFFFFF) if _whole(value) else None)


def _leaf_values(values: Any, where: str, filename: str) -> list[Any]:
    if not isinstance(values, list) or not all(_number(v) and abs(v) <= MAX_LEAF_VALUE for v in values):
        raise _damaged(filename, f"{where}'s leaf values are not finite numbers within {MAX_LEAF_VALUE:.0e}")
    return values


def _oblivious_tree(tree: Any, t: int, bins: list[Any], filename: str) -> int:
    """An oblivious tree's splits and leaf values; return its values per leaf."""
    where = f"tree {t}"
    splits = _oblivious_splits(tree, where, filename)
    if len(splits) > MAX_DEPTH:
        raise _damaged(filename, f"{where} has {len(splits)} splits; CatBoost's trees are at most {MAX_DEPTH} deep")
    for k, s in enumerate(splits):
        _check_split(s, f"{where}, split {k}", bins, filename)
    values = _leaf_values(tree.get("leaf_values"), where, filename)
    leaves = 1 << len(splits)
    if not values or len(values) % leaves:
        raise _damaged(filename, f"{where} has {len(values)} leaf values for {leaves} leaves")
    _check_leaf_weights(tree.get("leaf_weights"), leaves, where, filename)
    return len(values) // leaves


def _oblivious_splits(tree: Any, where: str, filename: str) -> list[Any]:
    """An oblivious tree's list of splits (``null`` for a tree of depth 0)."""
    splits = tree.get("splits") if isinstance(tree, dict) else None
    if splits is None and isinstance(tree, dict) and "splits" in tree:
        splits = []                                   # a tree of depth 0: CatBoost writes "splits": null
    if not isinstance(splits, list):
        raise _damaged(filename, f"{where} has no list of splits")
    return splits


def _check_leaf_weights(weights: Any, leaves: int, where: str, filename: str) -> None:
    """The leaf weights, if given: one per leaf."""
    if weights is not None and (not isinstance(weights, list) or len(weights) != leaves):
        raise _damaged(filename, f"{where} has {len(weights) if isinstance(weights, list) else 'no list of'} leaf "
                                 f"weights for {leaves} leaves")


def _nested_tree(tree: Any, t: int, bins: list[Any], filename: str) -> int:
    """A non-symmetric tree, walked from its root; return its values per leaf."""
    dims: set[int] = set()
    stack = [(tree, f"tree {t}")]
    while stack:
        node, where = stack.pop()
        if not isinstance(node, dict):
            raise _damaged(filename, f"{where} is not an object")
        if "value" in node:
            value = node["value"]
            dims.add(len(_leaf_values(value if isinstance(value, list) else [value], where, filename)))
            continue
        if "split" not in node or not isinstance(node.get("left"), dict) or not isinstance(node.get("right"), dict):
            raise _damaged(filename, f"{where} is neither a leaf (value) nor a split with left and right subtrees")
        _check_split(node["split"], f"{where}'s split", bins, filename)
        stack += [(node["right"], f"{where}, right"), (node["left"], f"{where}, left")]
    if len(dims) != 1 or 0 in dims:
        raise _damaged(filename, f"tree {t}'s leaves hold {sorted(dims)} values each, not one number for all")
    return dims.pop()


def _check_scale_and_bias(doc: dict[str, Any], dim: int, filename: str) -> None:
    sb = doc.get("scale_and_bias", [1, [0]])
    if not (isinstance(sb, list) and len(sb) == 2 and _number(sb[0]) and isinstance(sb[1], list)
            and len(sb[1]) in (1, dim) and all(_number(b) and abs(b) <= MAX_LEAF_VALUE for b in sb[1])
            and abs(sb[0]) <= MAX_LEAF_VALUE):
        raise _damaged(filename, f"its scale_and_bias {str(sb)[:60]} is not a finite scale and a list of one bias or "
                                 f"{dim}")


def _names_of_type(names: list[Any], kind: str) -> bool:
    """Class names of the label type CatBoost writes them with, each once: whole numbers
    for ``Integer``, float32 values for ``Float`` (CatBoost gives the float32 of any other,
    0.7 as 0.699999988), text, ``true``/``false``."""
    if len(set(map(repr, names))) != len(names):
        return False
    label = _LABEL_CHECKS.get(kind)
    if label is None:
        return not names
    with np.errstate(over="ignore"):
        return all(label(n) for n in names)


#: class_label_type -> whether one class name is a label of that type as CatBoost writes it
_LABEL_CHECKS: dict[str, Callable[[Any], bool]] = {
    "Integer": _whole,
    "Float": lambda n: _number(n) and float(np.float32(n)) == n,
    "String": lambda n: isinstance(n, str),
    "Boolean": lambda n: isinstance(n, bool),
}


def _check_model_info(doc: dict[str, Any], filename: str) -> None:
    """``model_info``: what CatBoost parses of it when it predicts (its ``params`` and
    ``class_params``), as CatBoost writes them."""
    info = doc.get("model_info", {})
    if not isinstance(info, dict):
        raise _damaged(filename, "its model_info is not an object")
    for key in ("params", "class_params"):
        if key in info and not isinstance(info[key], dict):
            raise _damaged(filename, f"its model_info's {key} is not an object")
    loss = (info.get("params") or {}).get("loss_function", {})
    if not isinstance(loss, (dict, str)) or isinstance(loss, dict) and not isinstance(loss.get("type", ""), str):
        raise _damaged(filename, "its loss_function is not a name")
    _check_class_params(info.get("class_params") or {}, filename)


def _check_class_params(cp: dict[str, Any], filename: str) -> None:
    """``class_params``: a label type, a class count and class names as CatBoost writes them, and
    ``class_to_label`` the identity."""
    kind, count = cp.get("class_label_type", "None"), cp.get("classes_count", 0)
    names, labels = cp.get("class_names", []), cp.get("class_to_label", None)
    if kind not in _LABEL_TYPES or not _whole(count) or not 0 <= count <= MAX_CLASSES \
            or not isinstance(names, list) or not all(isinstance(n, (str, int, float)) for n in names):
        raise _damaged(filename, f"its class_params (class_label_type {_shown(kind)}, classes_count {_shown(count)}, "
                                 f"class_names {_shown(names)}) are not as CatBoost writes them (class_label_type one "
                                 f"of {', '.join(_LABEL_TYPES)}, a whole classes_count, a list of class_names)")
    if not _names_of_type(names, kind):
        raise _damaged(filename, f"its class_names {str(names)[:60]} are not distinct {kind} labels as CatBoost writes "
                                 "them (it gives a label of another value than the name then)")
    _check_class_to_label(labels, names, filename)


def _check_class_to_label(labels: Any, names: list[Any], filename: str) -> None:
    """``class_to_label``, if given: 0, 1, ... one per class."""
    # CatBoost maps its outputs to classes by class_to_label when it gives probabilities: [2, 1, 0]
    # reversed them, [0, 1, 5] dropped one, 1e9 ended the process; CatBoost writes 0, 1, ..., k-1
    if labels is not None and (not isinstance(labels, list) or labels != list(range(len(labels)))
                               or names and len(labels) != len(names)):
        raise _damaged(filename, f"its class_to_label is {str(labels)[:40]}, not 0, 1, ... for each of its "
                                 f"{len(names) or 'its'} classes")


# ------------------------------------------------------------------ .cbm files
class _Flat:
    """A FlatBuffers buffer read with every offset and length checked against its size
    (a damaged one raises the file's ModelError, never IndexError or struct.error)."""

    def __init__(self, buf: bytes, filename: str):
        self.buf, self.filename = buf, filename

    def _at(self, p: int, width: int) -> int:
        if not 0 <= p <= len(self.buf) - width:
            raise _damaged(self.filename, "its model points outside the file (a FlatBuffers offset)")
        return p

    def u32(self, p: int) -> int:
        return int.from_bytes(self.buf[self._at(p, 4):p + 4], "little")

    def table(self, p: int) -> tuple[int, list[int]]:
        """Table at ``p``: its position and the offsets of its fields (0: absent)."""
        vt = p - int.from_bytes(self.buf[self._at(p, 4):p + 4], "little", signed=True)
        size = int.from_bytes(self.buf[self._at(vt, 4):vt + 2], "little")
        if size < 4 or size % 2:
            raise _damaged(self.filename, "its model holds a FlatBuffers table of an impossible size")
        n = (size - 4) // 2
        raw = self.buf[self._at(vt + 4, 2 * n):vt + 4 + 2 * n]
        return p, [int.from_bytes(raw[2 * i:2 * i + 2], "little") for i in range(n)]

    def field(self, t: tuple[int, list[int]], i: int) -> int | None:
        return t[0] + t[1][i] if i < len(t[1]) and t[1][i] else None

    def ref(self, at: int) -> int:
        return at + self.u32(at)

    def sub(self, t: tuple[int, list[int]], i: int) -> tuple[int, list[int]] | None:
        at = self.field(t, i)
        return None if at is None else self.table(self.ref(at))

    def vector(self, t: tuple[int, list[int]] | None, i: int, dtype: str, per: int = 1) -> np.ndarray:
        """Field ``i`` of ``t``, a vector of ``dtype`` numbers, ``per`` of them in each element
        (a struct), as ``(n, per)`` when ``per > 1``; empty when absent."""
        at = None if t is None else self.field(t, i)
        if at is None:
            return np.zeros((0, per) if per > 1 else 0, dtype=dtype)
        v = self.ref(at)
        n, width = self.u32(v) * per, np.dtype(dtype).itemsize
        self._at(v + 4, n * width)
        out = np.frombuffer(self.buf, dtype=np.dtype(dtype).newbyteorder("<"), count=n, offset=v + 4)
        return out.reshape(-1, per) if per > 1 else out

    def tables(self, t: tuple[int, list[int]], i: int) -> list[tuple[int, list[int]]]:
        """Field ``i`` of ``t``, a vector of tables (each element an offset from itself)."""
        at = self.field(t, i)
        if at is None:
            return []
        first = self.ref(at) + 4
        return [self.table(first + 4 * k + int(r)) for k, r in enumerate(self.vector(t, i, "u4"))]

    def scalar(self, t: tuple[int, list[int]], i: int, dtype: str, default: float) -> float:
        at = self.field(t, i)
        if at is None:
            return default
        width = np.dtype(dtype).itemsize
        return float(np.frombuffer(self.buf, dtype=np.dtype(dtype).newbyteorder("<"), count=1,
                                   offset=self._at(at, width))[0])


# fields of TModelTrees (catboost/libs/model/flatbuffers/model.fbs), by their place in it
_SPLITS, _SIZES, _STARTS, _CATS, _FLOATS, _ONE_HOT, _CTRS, _VALUES, _WEIGHTS, _STEPS, _LEAF_IDS, _TEXTS, \
    _ESTIMATED = range(1, 14)
_MULTI_BIAS, _EMBEDDINGS = 16, 18


def check_catboost_cbm(data: bytes, filename: str = "model.cbm") -> None:
    """Check a CatBoost ``.cbm`` file before CatBoost reads it: the FlatBuffers of its model
    (``TModelCore``, its ``TModelTrees``) read with every offset bounded, then what CatBoost
    indexes with unchecked: every ``TreeSplits`` entry names a binary feature, tree sizes
    and offsets tile the splits, an oblivious model holds ``dimension << depth`` leaf values
    per tree, a non-symmetric tree's steps stay inside it and its leaves' ids inside the leaf
    values. One split index beyond the model's binary features ended the process.
    Target statistics (CTRs), text and embedding features are refused here (the parser
    refuses them too), since their data follow the model in parts not checked."""
    fb, trees = _cbm_trees(data, filename)
    n_bins = _cbm_features(fb, trees, filename)
    dim = int(fb.scalar(trees, 0, "i4", 0))
    if not 1 <= dim <= MAX_CLASSES:
        raise _damaged(filename, f"its ApproxDimension is {dim}")
    sizes, starts = _cbm_tiling(fb, trees, n_bins, filename)
    values = fb.vector(trees, _VALUES, "f8")
    weights = fb.vector(trees, _WEIGHTS, "f8")
    steps = fb.vector(trees, _STEPS, "u2", per=2).astype(np.int64)
    if not steps.size:
        _cbm_oblivious(sizes, dim, values.size, weights.size, filename)
    else:
        _cbm_steps(steps, fb.vector(trees, _LEAF_IDS, "u4").astype(np.int64), sizes, starts, dim, values.size,
                   weights.size, filename)
    if not np.all(np.abs(values) <= MAX_LEAF_VALUE) or fb.vector(trees, _MULTI_BIAS, "f8").size not in (0, 1, dim):
        raise _damaged(filename, "its leaf values or biases are not finite numbers of its outputs")


def _cbm_tiling(fb: _Flat, trees: tuple[int, list[int]], n_bins: int,
                filename: str) -> tuple[np.ndarray, np.ndarray]:
    """The trees' sizes and offsets, tiling the splits, each split naming one of the ``n_bins`` binary features."""
    splits, sizes, starts = (fb.vector(trees, i, "i4").astype(np.int64) for i in (_SPLITS, _SIZES, _STARTS))
    if splits.size and not np.all((splits >= 0) & (splits < n_bins)):
        bad = int(splits[(splits < 0) | (splits >= n_bins)][0])
        raise _damaged(filename, f"a split of its trees names binary feature {bad}, outside its {n_bins}")
    if sizes.size == 0 or np.any(sizes < 0) or starts.shape != sizes.shape \
            or not np.array_equal(starts, np.cumsum(sizes) - sizes) or sizes.sum() != splits.size:
        raise _damaged(filename, "its tree sizes and offsets do not tile its splits")
    return sizes, starts


def _cbm_trees(data: bytes, filename: str) -> tuple[_Flat, tuple[int, list[int]]]:
    """The model of a ``.cbm`` file (its FlatBuffers, bounded to the size it declares) and
    its ``TModelTrees``; a model whose data follow it in parts (CTRs, text) is refused."""
    if data[:4] != b"CBM1" or len(data) < 8:
        raise _damaged(filename, "it is not a CatBoost model (.cbm files start with 'CBM1')")
    size = int.from_bytes(data[4:8], "little")
    if size + 8 > len(data):
        raise _damaged(filename, f"its model is declared as {size:,} bytes but the file holds {len(data) - 8:,}")
    fb = _Flat(data[8:8 + size], filename)
    core = fb.table(fb.u32(0))
    trees = fb.sub(core, 1)
    if trees is None:
        raise _damaged(filename, "it holds no trees")
    if fb.vector(core, 3, "u4").size or any(fb.vector(trees, i, "u4").size for i in (_CTRS, _TEXTS, _ESTIMATED,
                                                                                      _EMBEDDINGS)):
        raise UnsupportedModelError(f"{filename!r} uses target statistics (CTRs), text or embedding features, which "
                                    "are not supported. Retrain with one_hot_max_size above the number of categories "
                                    "of each categorical feature (one-hot splits) and numbers only.")
    if size + 8 != len(data):
        raise _damaged(filename, f"it holds {len(data) - 8 - size:,} bytes after its model, which lists no parts")
    return fb, trees


def _cbm_features(fb: _Flat, trees: tuple[int, list[int]], filename: str) -> int:
    """The features of a ``.cbm`` model, checked as :func:`check_catboost_json` checks a
    JSON export's; return its number of binary features."""
    floats, cats, one_hot = fb.tables(trees, _FLOATS), fb.tables(trees, _CATS), fb.tables(trees, _ONE_HOT)
    listed = len(floats) + len(cats)
    flat: set[int] = set()
    n_bins = 0
    for kind, features in (("float", floats), ("categorical", cats)):
        for i, f in enumerate(features):
            index, at = (int(fb.scalar(f, k + (kind == "float"), "i4", -1)) for k in (0, 1))
            if index != i or not 0 <= at < listed or at in flat:
                raise _damaged(filename, f"its {kind} feature {i} has the index {index} and column {at}: not its "
                                         f"place and a distinct column among its {listed} features")
            flat.add(at)
            if kind == "float":
                n_bins += _cbm_borders(fb, f, i, filename)
    for k, f in enumerate(one_hot):
        if not 0 <= fb.scalar(f, 0, "i4", -1) < len(cats):
            raise _damaged(filename, f"its one-hot feature {k} names no categorical feature")
        n_bins += fb.vector(f, 1, "i4").size
    return n_bins


def _cbm_borders(fb: _Flat, f: tuple[int, list[int]], i: int, filename: str) -> int:
    """Float feature ``i``'s borders (finite, increasing) and missing-value treatment; return its number of borders."""
    borders = fb.vector(f, 3, "f4").astype(np.float64)
    if not np.all(np.isfinite(borders)) or np.any(np.diff(borders) <= 0) \
            or not 0 <= fb.scalar(f, 5, "i1", 0) < len(_NAN_TREATMENTS):
        raise _damaged(filename, f"its float feature {i}'s borders are not finite numbers in increasing "
                                 "order, or its treatment of missing values is none of CatBoost's")
    return int(borders.size)


def _cbm_oblivious(sizes: np.ndarray, dim: int, n_values: int, n_weights: int, filename: str) -> None:
    """An oblivious model's trees: at most :data:`MAX_DEPTH` deep, ``dimension << depth``
    leaf values each (and one weight per leaf, if any)."""
    if np.any(sizes > MAX_DEPTH):
        raise _damaged(filename, f"a tree has {int(sizes.max())} splits; CatBoost's trees are at most {MAX_DEPTH} deep")
    leaves = int(np.sum(np.left_shift(1, sizes)))
    if n_values != dim * leaves or n_weights not in (0, leaves):
        raise _damaged(filename, f"its trees have {leaves} leaves but it holds {n_values} leaf values for "
                                 f"{dim} outputs and {n_weights} leaf weights")


def _cbm_steps(steps: np.ndarray, leaf_ids: np.ndarray, sizes: np.ndarray, starts: np.ndarray, dim: int,
               n_values: int, n_weights: int, filename: str) -> None:
    """A non-symmetric model's steps: each node's steps to its children stay inside its tree,
    and a node where a step is 0 (a leaf there) has a leaf id inside the leaf values."""
    n = int(sizes.sum())
    if steps.shape[0] != n or leaf_ids.size != n or np.any(sizes < 1):
        raise _damaged(filename, f"it holds {steps.shape[0]} tree steps and {leaf_ids.size} leaf ids for {n} nodes")
    ends = np.repeat(starts + sizes, sizes)
    node = np.arange(n)
    if np.any(node + steps.max(axis=1) >= ends):
        raise _damaged(filename, "a step of its trees leads outside its tree")
    leaf = steps.min(axis=1) == 0
    ids = leaf_ids[leaf]
    if np.any(ids % dim) or np.any(ids + dim > n_values) or (n_weights and np.any(ids // dim >= n_weights)):
        raise _damaged(filename, f"a leaf of its trees has an id outside its {n_values} leaf values")
