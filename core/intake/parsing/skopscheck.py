"""Checks of scikit-learn models read from ``.skops`` files (or trusted pickles).

:func:`check_skops_zip` bounds the zip before skops opens it (member count,
declared uncompressed sizes, ``schema.json``'s depth); :func:`check_sklearn_trees`
checks the node arrays of every fitted tree skops rebuilt (``tree_`` of the
trees and forests, the ``TreePredictor`` nodes and category bitsets of the
histogram gradient boosting models) before anything predicts with it. Both are
importable from :mod:`core.intake.parsing.validate`.
"""

from __future__ import annotations

import io as _io
import json
import zipfile
from typing import Any

import numpy as np

from core.intake.parsing.filecheck import MAX_JSON_DEPTH, _damaged, check_json_depth
from core.typing import ModelLike

__all__ = ["check_skops_zip", "check_sklearn_trees"]

MAX_SKOPS_MEMBERS = 100_000
MAX_SKOPS_UNPACKED = 4 * 2**30   # bytes a .skops zip may unpack to
MAX_ZIP_RATIO = 1000             # uncompressed / compressed size of one member (a zip bomb)


def check_skops_zip(data: bytes, filename: str = "model.skops") -> None:
    """Bound a .skops zip before skops opens it: members, unpacked size, schema depth."""
    try:
        zf = zipfile.ZipFile(_io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise _damaged(filename, f"it is not a readable .skops (zip) file ({exc})") from None
    if len(infos) > MAX_SKOPS_MEMBERS:
        raise _damaged(filename, f"it holds {len(infos):,} members")
    total = sum(i.file_size for i in infos)
    if total > MAX_SKOPS_UNPACKED:
        raise _damaged(filename, f"it unpacks to {total / 2**30:.1f} GB")
    for i in infos:
        if i.file_size > MAX_ZIP_RATIO * max(i.compress_size, 1) + 2**20:
            raise _damaged(filename, f"its member {i.filename!r} claims to unpack {i.file_size:,} bytes from "
                                     f"{i.compress_size:,} (a zip bomb?)")
    try:
        schema = zf.read("schema.json")
    except KeyError:
        raise _damaged(filename, "it has no schema.json") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise _damaged(filename, f"its schema.json cannot be unpacked ({exc})") from None
    check_json_depth(schema, filename, limit=4 * MAX_JSON_DEPTH)
    try:                                      # what skops and the booster checks parse next
        json.loads(schema.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _damaged(filename, f"its schema.json is not UTF-8 text (byte {exc.start:,})") from None
    except ValueError as exc:
        raise _damaged(filename, f"its schema.json is not readable JSON ({str(exc)[:120]})") from None


def _sklearn_objects(obj: Any, depth: int = 0):
    """``obj`` and every fitted scikit-learn object inside it (ensembles, pipelines)."""
    if depth > 8 or obj is None:
        return
    yield obj
    for attr in ("estimators_", "steps", "transformers_", "estimator_", "base_estimator_", "init_"):
        sub = getattr(obj, attr, None) if attr != "estimators_" or hasattr(obj, "estimators_") else None
        if sub is None or isinstance(sub, str):
            continue
        items = sub.ravel().tolist() if isinstance(sub, np.ndarray) else sub if isinstance(sub, (list, tuple)) \
            else [sub]
        for it in items:
            if isinstance(it, tuple):              # (name, step) or (name, transformer, columns)
                it = it[1] if len(it) > 1 else None
            if it is not None and not isinstance(it, str) and type(it).__module__.startswith("sklearn"):
                yield from _sklearn_objects(it, depth + 1)


def _sklearn_trees(obj: Any):
    """Every fitted ``sklearn.tree._tree.Tree`` inside a model (ensembles, pipelines)."""
    for est in _sklearn_objects(obj):
        tree = getattr(est, "tree_", None)
        if tree is not None and type(tree).__module__.startswith("sklearn.tree"):
            yield est, tree


def check_sklearn_trees(model: ModelLike, filename: str = "model.skops") -> None:
    """Check the node arrays of every sklearn tree skops rebuilt, before any predict."""
    for est in _sklearn_objects(model):
        if type(est).__name__.startswith("HistGradientBoosting") and hasattr(est, "_predictors"):
            _check_hgb(est, filename)
    for k, (est, tree) in enumerate(_sklearn_trees(model)):
        where = f"tree {k} ({type(est).__name__})"
        try:
            left = np.asarray(tree.children_left)
            right = np.asarray(tree.children_right)
            feat = np.asarray(tree.feature)
            thr = np.asarray(tree.threshold)
            value = np.asarray(tree.value)
            n_features = int(tree.n_features)
        except Exception as exc:  # noqa: BLE001 - a Tree whose state skops could not restore
            raise _damaged(filename, f"{where} cannot be read ({type(exc).__name__})") from None
        n = left.shape[0]
        if n == 0 or not (right.shape[0] == feat.shape[0] == thr.shape[0] == value.shape[0] == n):
            raise _damaged(filename, f"{where}'s node arrays differ in length")
        n_in = getattr(est, "n_features_in_", n_features)
        if n_features != n_in:
            raise _damaged(filename, f"{where} has {n_features} features but its estimator {n_in}")
        split = left != -1
        if np.any(split != (right != -1)):
            raise _damaged(filename, f"{where} has a node with one child")
        bad = split & ((left <= 0) | (left >= n) | (right <= 0) | (right >= n))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _damaged(filename, f"{where}, node {i}: a child ({left[i]}, {right[i]}) is outside 1..{n - 1}")
        fbad = split & ((feat < 0) | (feat >= n_features))
        if fbad.any():
            i = int(np.flatnonzero(fbad)[0])
            raise _damaged(filename, f"{where}, node {i} splits on feature {feat[i]}, outside 0..{n_features - 1}")
        # +inf is scikit-learn's split of missing values from numbers (every number left,
        # NaN to its missing_go_to_left side); NaN or -inf is no threshold it writes
        tbad = split & (np.isnan(thr) | np.isneginf(thr))
        if tbad.any():
            i = int(np.flatnonzero(tbad)[0])
            raise _damaged(filename, f"{where}, node {i} has the threshold {float(thr[i])!r}")
        try:
            miss = np.asarray(tree.missing_go_to_left)
        except AttributeError:                  # a scikit-learn before 1.3: no missing-value routing
            miss = None
        if miss is not None and miss.shape != (n,):
            raise _damaged(filename, f"{where}'s missing_go_to_left has {miss.size} entries for {n} nodes")
        # every node reached exactly once from the root: counts of incoming edges
        incoming = np.bincount(np.concatenate([left[split], right[split]]), minlength=n)
        wrong = incoming != 1
        wrong[0] = incoming[0] != 0
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            raise _damaged(filename, f"{where}, node {i} is reached {int(incoming[i])} times (a child points back "
                                     "to an ancestor, is shared or is orphaned)")
        # in-degree one everywhere and none into the root: a cycle would be a component without the root
        order = np.zeros(n, dtype=bool)
        order[0] = True
        frontier = np.array([0])
        count = 1
        while frontier.size:
            kids = np.concatenate([left[frontier], right[frontier]])
            kids = kids[kids != -1]
            kids = kids[~order[kids]]
            order[kids] = True
            count += kids.size
            frontier = kids
        if count != n:
            raise _damaged(filename, f"{where}: {n - count} nodes form a cycle apart from the root")
        if not np.all(np.isfinite(value)):
            raise _damaged(filename, f"{where} has a non-finite leaf value")


def _hgb_record_dtype() -> np.dtype:
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE  # the model's own library

    return np.dtype(PREDICTOR_RECORD_DTYPE)


_HGB_FIELDS = ("value", "feature_idx", "num_threshold", "missing_go_to_left", "left", "right", "is_leaf",
               "is_categorical", "bitset_idx")


def _check_hgb(est: ModelLike, filename: str) -> None:
    """A HistGradientBoosting model's predictors, before its Cython walk reads them
    (unchecked: a child or feature index, a bitset row or a known category out of range
    reads or writes outside memory; a child pointing back loops forever)."""
    name = type(est).__name__
    mapper = getattr(est, "_bin_mapper", None)
    lacks = [a for a in ("n_features_in_", "n_trees_per_iteration_", "_bin_mapper", "_predictors")
             if not hasattr(est, a)]
    lacks += [f"_bin_mapper.{a}" for a in ("is_categorical_", "bin_thresholds_") if mapper is not None
              and not hasattr(mapper, a)]
    if lacks:
        raise _damaged(filename, f"its {name} lacks part of what a fitted model keeps ({', '.join(lacks)})")
    unread = (f"its {name}'s number of features, trees per iteration, categorical features or iterations are not "
              "what scikit-learn keeps")
    if mapper is None:                 # kept but emptied: a fitted model holds a bin mapper
        raise _damaged(filename, unread)
    try:
        n_features = int(est.n_features_in_)
        k = int(est.n_trees_per_iteration_)
        is_cat = np.asarray(mapper.is_categorical_, dtype=np.bool_) if mapper.is_categorical_ is not None \
            else np.zeros(n_features, dtype=bool)
        known = list(mapper.bin_thresholds_) if is_cat.any() else []
        iterations = list(est._predictors)
    except Exception:  # noqa: BLE001 - a model whose state skops could not restore
        raise _damaged(filename, unread) from None
    if is_cat.shape != (n_features,) or (is_cat.any() and len(known) != n_features):
        raise _damaged(filename, f"its {name}'s categorical features do not match its {n_features} features")
    for f in np.flatnonzero(is_cat):
        v = np.asarray(known[f], dtype=np.float64)
        if v.ndim != 1 or not np.all((v >= 0) & (v < 256) & (v == np.floor(v))):
            raise _damaged(filename, f"its {name}'s known categories of feature {f} are outside 0..255")
    for i, per_class in enumerate(iterations):
        if len(per_class) != k:
            raise _damaged(filename, f"its {name}'s iteration {i} has {len(per_class)} trees, not {k}")
        for c, pred in enumerate(per_class):
            _check_hgb_tree(pred, f"{name}, iteration {i}, tree {c}", n_features, is_cat, filename)


def _check_hgb_tree(pred: Any, where: str, n_features: int, is_cat: np.ndarray, filename: str) -> None:
    try:
        nodes = np.asarray(pred.nodes)
        bitsets = np.asarray(pred.raw_left_cat_bitsets)
    except Exception:  # noqa: BLE001 - a TreePredictor whose state skops could not restore
        raise _damaged(filename, f"{where} has no node array or no category sets") from None
    # the library's walk takes exactly its own record layout and 8 words of 32 bits per category set
    if nodes.dtype != _hgb_record_dtype():
        raise _damaged(filename, f"{where}'s node array is not scikit-learn's (fields {nodes.dtype.names or '-'}, "
                                 f"dtype {nodes.dtype})")
    if bitsets.dtype != np.uint32 or bitsets.ndim != 2 or bitsets.shape[1] != 8 or not bitsets.flags.c_contiguous:
        raise _damaged(filename, f"{where}'s category bitsets have the shape {bitsets.shape} and dtype "
                                 f"{bitsets.dtype}, not (n, 8) uint32")
    cols = {f: np.asarray(nodes[f]) for f in _HGB_FIELDS}
    n = nodes.shape[0] if nodes.ndim == 1 else 0
    if n == 0:
        raise _damaged(filename, f"{where} has no nodes")
    split = cols["is_leaf"] == 0
    idx = np.arange(n)
    left, right = cols["left"].astype(np.int64), cols["right"].astype(np.int64)
    # children after their parent (as scikit-learn writes them): no cycle, every walk ends
    bad = split & ((left <= idx) | (left >= n) | (right <= idx) | (right >= n))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _damaged(filename, f"{where}, node {i}: a child ({left[i]}, {right[i]}) is outside {i + 1}..{n - 1}")
    feat = cols["feature_idx"].astype(np.int64)
    fbad = split & ((feat < 0) | (feat >= n_features))
    if fbad.any():
        i = int(np.flatnonzero(fbad)[0])
        raise _damaged(filename, f"{where}, node {i} splits on feature {feat[i]}, outside 0..{n_features - 1}")
    cat = split & (cols["is_categorical"] != 0)
    on_cat = is_cat[np.clip(feat, 0, n_features - 1)]
    cbad = cat & ((cols["bitset_idx"].astype(np.int64) >= bitsets.shape[0]) | ~on_cat)
    if cbad.any():
        i = int(np.flatnonzero(cbad)[0])
        raise _damaged(filename, f"{where}, node {i}: a categorical split on a feature that is not categorical "
                                 "or with a category set the tree does not hold")
    nbad = split & ~cat & on_cat       # scikit-learn splits a categorical feature by category set only
    if nbad.any():
        i = int(np.flatnonzero(nbad)[0])
        raise _damaged(filename, f"{where}, node {i} splits the categorical feature {feat[i]} by a threshold")
    if np.any(~split & ~np.isfinite(cols["value"])):
        raise _damaged(filename, f"{where} has a non-finite leaf value")
    if np.any(split & ~cat & np.isnan(cols["num_threshold"])):
        raise _damaged(filename, f"{where} has a NaN threshold")
