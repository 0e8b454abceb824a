"""Checks of scikit-learn models read from ``.skops`` files (or trusted pickles).

:func:`check_skops_zip` bounds the zip before skops opens it (member count,
declared uncompressed sizes, ``schema.json``'s depth); :func:`check_sklearn_trees`
checks the node arrays of every fitted tree skops rebuilt (``tree_`` of the
trees and forests, the ``TreePredictor`` nodes and category bitsets of the
histogram gradient boosting models) before anything predicts with it, and what
``predict`` reads besides: a classifier tree's leaves are class fractions (each in
0..1, summing to 1: scikit-learn returns them as they are, so a leaf of 1e300 was
"probabilities" up to 1e299), a regressor's leaves below
:data:`~core.intake.parsing.filecheck.MAX_LEAF_VALUE`; every tree of an ensemble a
fitted one, taking the model's features and classes; a forest's settings, a
gradient boosting model's trees per stage and its baseline (``init_``). Both are
importable from :mod:`core.intake.parsing.validate`.
"""

from __future__ import annotations

import io as _io
import json
import zipfile
import zlib
from typing import Any, NamedTuple

import numpy as np

from core.intake.parsing.filecheck import (
    MAX_FEATURES,
    MAX_JSON_DEPTH,
    MAX_LEAF_VALUE,
    PROBABILITY_SLACK,
    _damaged,
    _shown,
    check_json_depth,
)
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
    _check_zip_sizes(infos, filename)
    try:
        schema = zf.read("schema.json")
    except KeyError:
        raise _damaged(filename, "it has no schema.json") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, zlib.error) as exc:
        raise _damaged(filename, f"its schema.json cannot be unpacked ({exc})") from None
    check_json_depth(schema, filename, limit=4 * MAX_JSON_DEPTH)
    try:                                      # what skops and the booster checks parse next
        json.loads(schema.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _damaged(filename, f"its schema.json is not UTF-8 text (byte {exc.start:,})") from None
    except ValueError as exc:
        raise _damaged(filename, f"its schema.json is not readable JSON ({str(exc)[:120]})") from None


def _check_zip_sizes(infos: list[zipfile.ZipInfo], filename: str) -> None:
    """The zip's members: how many, how large unpacked in all, and each against its compressed size."""
    if len(infos) > MAX_SKOPS_MEMBERS:
        raise _damaged(filename, f"it holds {len(infos):,} members")
    total = sum(i.file_size for i in infos)
    if total > MAX_SKOPS_UNPACKED:
        raise _damaged(filename, f"it unpacks to {total / 2**30:.1f} GB")
    for i in infos:
        if i.file_size > MAX_ZIP_RATIO * max(i.compress_size, 1) + 2**20:
            raise _damaged(filename, f"its member {i.filename!r} claims to unpack {i.file_size:,} bytes from "
                                     f"{i.compress_size:,} (a zip bomb?)")


def _sklearn_objects(obj: Any, depth: int = 0):
    """``obj`` and every fitted scikit-learn object inside it (ensembles, pipelines)."""
    if depth > 8 or obj is None:
        return
    yield obj
    for attr in ("estimators_", "steps", "transformers_", "estimator_", "base_estimator_", "init_"):
        sub = getattr(obj, attr, None) if attr != "estimators_" or hasattr(obj, "estimators_") else None
        if sub is None or isinstance(sub, str):
            continue
        for it in _parts(sub):
            yield from _sklearn_objects(it, depth + 1)


def _parts(sub: Any) -> list[Any]:
    """The scikit-learn objects an attribute holds: itself, or the items of an array, list or
    tuple (a step's object out of ``(name, step)`` or ``(name, transformer, columns)``)."""
    items = sub.ravel().tolist() if isinstance(sub, np.ndarray) else sub if isinstance(sub, (list, tuple)) \
        else [sub]
    out = []
    for it in items:
        if isinstance(it, tuple):              # (name, step) or (name, transformer, columns)
            it = it[1] if len(it) > 1 else None
        if it is not None and not isinstance(it, str) and type(it).__module__.startswith("sklearn"):
            out.append(it)
    return out


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
        arrays = _node_arrays(tree, where, filename)
        n = _check_lengths(arrays, est, where, filename)
        split = arrays.left != -1
        _check_tree_splits(arrays, split, where, filename)
        _check_missing_routes(tree, n, where, filename)
        _check_reached_once(arrays.left, arrays.right, split, where, filename)
        if not np.all(np.isfinite(arrays.value)):
            raise _damaged(filename, f"{where} has a non-finite leaf value")
        _check_leaf_values(est, arrays.value, ~split, where, filename)
    for est in _sklearn_objects(model):
        _check_ensemble(est, filename)


class _NodeArrays(NamedTuple):
    """A scikit-learn tree's node arrays, as numpy arrays."""

    left: np.ndarray
    right: np.ndarray
    feat: np.ndarray
    thr: np.ndarray
    value: np.ndarray
    n_features: int


def _node_arrays(tree: Any, where: str, filename: str) -> _NodeArrays:
    try:
        return _NodeArrays(np.asarray(tree.children_left), np.asarray(tree.children_right), np.asarray(tree.feature),
                           np.asarray(tree.threshold), np.asarray(tree.value), int(tree.n_features))
    except Exception as exc:  # noqa: BLE001 - a Tree whose state skops could not restore
        raise _damaged(filename, f"{where} cannot be read ({type(exc).__name__})") from None


def _check_lengths(a: _NodeArrays, est: Any, where: str, filename: str) -> int:
    """The node arrays' common length (at least one node); the tree's features are its estimator's."""
    n = a.left.shape[0]
    if n == 0 or not (a.right.shape[0] == a.feat.shape[0] == a.thr.shape[0] == a.value.shape[0] == n):
        raise _damaged(filename, f"{where}'s node arrays differ in length")
    n_in = getattr(est, "n_features_in_", a.n_features)
    if a.n_features != n_in:
        raise _damaged(filename, f"{where} has {a.n_features} features but its estimator {n_in}")
    return int(n)


def _check_tree_splits(a: _NodeArrays, split: np.ndarray, where: str, filename: str) -> None:
    """Every split node: two children in range, a feature in range, a threshold scikit-learn writes."""
    left, right, feat, thr, n_features, n = a.left, a.right, a.feat, a.thr, a.n_features, a.left.shape[0]
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


def _check_missing_routes(tree: Any, n: int, where: str, filename: str) -> None:
    """``missing_go_to_left``, where the tree has it (scikit-learn 1.3 and later): one flag per node."""
    try:
        miss = np.asarray(tree.missing_go_to_left)
    except AttributeError:                  # a scikit-learn before 1.3: no missing-value routing
        return
    if miss.shape != (n,):
        raise _damaged(filename, f"{where}'s missing_go_to_left has {miss.size} entries for {n} nodes")


def _check_reached_once(left: np.ndarray, right: np.ndarray, split: np.ndarray, where: str, filename: str) -> None:
    """Every node reached exactly once from the root: no child shared, orphaned or pointing back."""
    n = left.shape[0]
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


def _check_leaf_values(est: Any, value: np.ndarray, leaf: np.ndarray, where: str, filename: str) -> None:
    """The leaves of one tree against what its estimator predicts with them. A
    classifier's tree (scikit-learn 1.4 and later) holds each leaf's class fractions,
    which ``predict_proba`` returns as they are: each in 0..1, summing to 1. Anything
    else is no probability: scikit-learn would return it (a leaf of 1e300 gave
    "probabilities" up to 1e299), and a reading of it as a probability would be another
    model. A regressor's leaf holds one value, finite and below :data:`MAX_LEAF_VALUE`."""
    n_outputs = _whole(getattr(est, "n_outputs_", 1))
    if value.ndim != 3 or value.shape[1] != n_outputs:
        raise _damaged(filename, f"{where}'s leaf values have the shape {value.shape}, not (nodes, {n_outputs}, "
                                 "classes)")
    leaves = value[leaf]
    if type(est).__name__.endswith("Classifier") and n_outputs == 1:
        _check_class_fractions(est, value, leaf, where, filename)
        return
    if value.shape[2] != 1 and type(est).__name__.endswith("Regressor"):
        raise _damaged(filename, f"{where} holds {value.shape[2]} values per leaf, not one")
    big = np.flatnonzero(np.any(np.abs(leaves) > MAX_LEAF_VALUE, axis=(1, 2)))
    if big.size:
        i = int(np.flatnonzero(leaf)[big[0]])
        raise _damaged(filename, f"{where}, leaf {i} holds the value {float(np.abs(leaves[big[0]]).max()):.6g} "
                                 f"in size, beyond the {MAX_LEAF_VALUE:.0e} a model's sums of leaves can hold")


def _check_class_fractions(est: Any, value: np.ndarray, leaf: np.ndarray, where: str, filename: str) -> None:
    """A single-output classifier's leaves: one fraction per class, each a probability, summing to 1."""
    k = _whole(getattr(est, "n_classes_", -1))
    if value.shape[2] != k or len(np.atleast_1d(getattr(est, "classes_", ()))) != k:
        raise _damaged(filename, f"{where} holds {value.shape[2]} class fractions per leaf for "
                                 f"{k} classes ({len(np.atleast_1d(getattr(est, 'classes_', ())))} named)")
    fractions = value[leaf][:, 0, :]
    sums = fractions.sum(axis=1)
    bad = np.flatnonzero(np.any((fractions < 0) | (fractions > 1), axis=1) | (np.abs(sums - 1) > PROBABILITY_SLACK))
    if bad.size:
        i = int(np.flatnonzero(leaf)[bad[0]])
        shown = ", ".join(f"{v:.6g}" for v in fractions[bad[0]][:6])
        raise _damaged(filename, f"{where}, leaf {i} holds the class fractions [{shown}], which are no "
                                 "probabilities (each between 0 and 1, summing to 1; a model saved by "
                                 "scikit-learn before 1.4 holds counts instead)")


def _whole(v: Any) -> int:
    """``v`` as a whole number, -1 when it is none (an array, text, a fraction)."""
    try:
        a = np.asarray(v)
        if a.ndim != 0 or a.dtype.kind not in "iuf" or not float(a).is_integer():
            return -1
        return int(a)
    except (TypeError, ValueError, OverflowError):
        return -1


def _check_ensemble(est: Any, filename: str) -> None:
    """What a fitted estimator's ``predict`` reads besides its node arrays: its number of
    features, its tree (a tree estimator), and for an ensemble its trees, settings and
    classes (:func:`_check_trees`, :func:`_check_classes`). scikit-learn trusts them: a
    forest whose tree says 2 classes of 3, or a tree saying 0, made ``predict_proba``
    fail on arrays of different shapes; an estimator without its tree, on None."""
    name = type(est).__name__
    if hasattr(est, "n_features_in_") and not 1 <= _whole(est.n_features_in_) <= MAX_FEATURES:
        raise _damaged(filename, f"its {name} has n_features_in_ {_shown(est.n_features_in_)}, not a number of "
                                 "features")
    if name in _TREES and hasattr(est, "n_features_in_") and not _has_tree(est):
        raise _damaged(filename, f"its fitted {name} holds no tree")
    trees = getattr(est, "estimators_", None)
    if trees is None or not name.endswith(("Classifier", "Regressor")) or not hasattr(est, "n_features_in_"):
        return
    listed = np.ravel(np.asarray(trees, dtype=object))
    _check_trees(est, listed, filename)
    _check_classes(est, trees, listed, filename)


def _check_trees(est: Any, listed: np.ndarray, filename: str) -> None:
    """An ensemble's trees: each a fitted scikit-learn tree taking the model's features; a
    forest's ``n_estimators``, ``n_jobs`` and ``verbose``, which its ``predict`` hands to
    joblib (0 estimators divided by zero there, text in ``n_jobs`` failed to compare)."""
    name, d = type(est).__name__, _whole(est.n_features_in_)
    if name.startswith(("RandomForest", "ExtraTrees")):
        _check_forest_settings(est, name, listed, filename)
    for t, tree in enumerate(listed):
        if not _has_tree(tree):
            raise _damaged(filename, f"its {name}'s tree {t} is not a fitted scikit-learn tree")
        if hasattr(tree, "n_features_in_") and _whole(tree.n_features_in_) != d:
            raise _damaged(filename, f"its {name}'s tree {t} takes {_shown(tree.n_features_in_)} features but the "
                                     f"model {d} (scikit-learn hands the tree the model's rows unchecked)")


def _check_forest_settings(est: Any, name: str, listed: np.ndarray, filename: str) -> None:
    """A forest's ``n_estimators`` (its trees), ``n_jobs`` (a whole number but 0, or None) and ``verbose``."""
    jobs, verbose = getattr(est, "n_jobs", None), getattr(est, "verbose", 0)
    whole_jobs = jobs is None or isinstance(jobs, (int, np.integer)) and not isinstance(jobs, bool) and jobs != 0
    if _whole(getattr(est, "n_estimators", None)) != listed.size or not whole_jobs or _whole(verbose) < 0:
        raise _damaged(filename, f"its {name} has n_estimators {_shown(getattr(est, 'n_estimators', None))}, "
                                 f"n_jobs {_shown(jobs)} and verbose {_shown(verbose)} for its "
                                 f"{listed.size} trees")


def _check_classes(est: Any, trees: Any, listed: np.ndarray, filename: str) -> None:
    """An ensemble's classes against its trees: a forest's ``n_classes_`` and ``classes_``
    against every tree's, a gradient boosting model's trees per stage against its classes
    (one for two classes, one per class otherwise; one for a regressor) and its baseline."""
    name = type(est).__name__
    classifier = name.endswith("Classifier")
    k = _whole(getattr(est, "n_classes_", -1)) if classifier else 1
    if classifier and (k < 2 or len(np.atleast_1d(getattr(est, "classes_", ()))) != k):
        raise _damaged(filename, f"its {name} has n_classes_ {_shown(getattr(est, 'n_classes_', None))} and "
                                 f"{len(np.atleast_1d(getattr(est, 'classes_', ())))} classes")
    if name.startswith("GradientBoosting"):
        _check_stages(est, trees, k, classifier, filename)
    elif classifier and name.startswith(("RandomForest", "ExtraTrees")):
        _check_forest_classes(name, listed, k, filename)


def _check_stages(est: Any, trees: Any, k: int, classifier: bool, filename: str) -> None:
    """A gradient boosting model's trees per stage (one for two classes or a regressor, one per
    class otherwise) and its baseline."""
    name = type(est).__name__
    per_stage = 1 if k <= 2 else k
    shape = np.shape(trees)
    if len(shape) != 2 or shape[1] != per_stage or shape[0] < 1:
        raise _damaged(filename, f"its {name} holds trees in the shape {shape}, not (stages, {per_stage}) "
                                 f"for {f'{k} classes' if classifier else 'one output'}")
    _check_boosting_init(est, k if classifier else 0, filename)


def _check_forest_classes(name: str, listed: np.ndarray, k: int, filename: str) -> None:
    """Each tree of a forest classifier knows the forest's ``k`` classes."""
    for t, tree in enumerate(listed):
        if _whole(getattr(tree, "n_classes_", -1)) != k:
            said = _shown(getattr(tree, "n_classes_", None))
            raise _damaged(filename, f"its {name}'s tree {t} has n_classes_ {said} but the forest {k}")


_TREES = ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor")


def _has_tree(est: Any) -> bool:
    """Is ``est`` a scikit-learn tree estimator holding its fitted ``tree_``? (A schema edit
    gave a forest an estimator without one, or None in its place.)"""
    tree = getattr(est, "tree_", None)
    return type(est).__module__.startswith("sklearn.tree") and type(tree).__module__.startswith("sklearn.tree")


def _check_boosting_init(est: Any, k: int, filename: str) -> None:
    """A gradient boosting model's baseline (``init_``), which scikit-learn predicts with
    unchecked: a ``DummyRegressor``'s one finite constant, a ``DummyClassifier``'s prior of
    each of the ``k`` classes (a probability each, summing to 1; its ``"prior"`` strategy,
    the same for every row). Other baselines are left to the parser, which refuses them."""
    init = getattr(est, "init_", None)
    name = type(init).__name__
    if name not in ("DummyRegressor", "DummyClassifier"):
        return
    what = f"its {type(est).__name__}'s baseline ({name})"
    if _whole(getattr(init, "n_outputs_", None)) != 1:
        raise _damaged(filename, f"{what} has n_outputs_ {_shown(getattr(init, 'n_outputs_', None))}, not 1")
    if name == "DummyRegressor":
        _check_constant(init, what, filename)
    else:
        _check_prior(init, k, what, filename)


def _check_constant(init: Any, what: str, filename: str) -> None:
    """A ``DummyRegressor``'s constant: one finite number."""
    c = np.asarray(getattr(init, "constant_", None))
    if c.shape != (1, 1) or c.dtype.kind not in "fiu" or not abs(float(c.ravel()[0])) <= MAX_LEAF_VALUE:
        raise _damaged(filename, f"{what} is not one finite number")


def _check_prior(init: Any, k: int, what: str, filename: str) -> None:
    """A ``DummyClassifier``'s prior strategy: a probability for each of the ``k`` classes, summing to 1."""
    prior = np.asarray(getattr(init, "class_prior_", None))
    if getattr(init, "_strategy", getattr(init, "strategy", None)) != "prior" or prior.shape != (k,) \
            or prior.dtype.kind not in "fiu" or _whole(getattr(init, "n_classes_", None)) != k \
            or not np.all((prior >= 0) & (prior <= 1)) or abs(float(prior.sum()) - 1) > PROBABILITY_SLACK:
        raise _damaged(filename, f"{what} is not the prior of each of its {k} classes")


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
    _check_hgb_parts(est, name, mapper, filename)
    n_features, k, is_cat, known, iterations = _hgb_state(est, name, mapper, filename)
    _check_known_categories(name, n_features, is_cat, known, filename)
    for i, per_class in enumerate(iterations):
        if len(per_class) != k:
            raise _damaged(filename, f"its {name}'s iteration {i} has {len(per_class)} trees, not {k}")
        for c, pred in enumerate(per_class):
            _check_hgb_tree(pred, f"{name}, iteration {i}, tree {c}", n_features, is_cat, filename)


def _check_hgb_parts(est: ModelLike, name: str, mapper: Any, filename: str) -> None:
    """The model holds what a fitted one keeps, its bin mapper included."""
    lacks = [a for a in ("n_features_in_", "n_trees_per_iteration_", "_bin_mapper", "_predictors")
             if not hasattr(est, a)]
    lacks += [f"_bin_mapper.{a}" for a in ("is_categorical_", "bin_thresholds_") if mapper is not None
              and not hasattr(mapper, a)]
    if lacks:
        raise _damaged(filename, f"its {name} lacks part of what a fitted model keeps ({', '.join(lacks)})")


def _hgb_state(est: ModelLike, name: str, mapper: Any,
               filename: str) -> tuple[int, int, np.ndarray, list[Any], list[Any]]:
    """The number of features, trees per iteration, categorical flags, known categories (if any
    feature is categorical) and iterations, as the model keeps them."""
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
    return n_features, k, is_cat, known, iterations


def _check_known_categories(name: str, n_features: int, is_cat: np.ndarray, known: list[Any], filename: str) -> None:
    """One flag per feature; each categorical feature's known categories in 0..255."""
    if is_cat.shape != (n_features,) or (is_cat.any() and len(known) != n_features):
        raise _damaged(filename, f"its {name}'s categorical features do not match its {n_features} features")
    for f in np.flatnonzero(is_cat):
        v = np.asarray(known[f], dtype=np.float64)
        if v.ndim != 1 or not np.all((v >= 0) & (v < 256) & (v == np.floor(v))):
            raise _damaged(filename, f"its {name}'s known categories of feature {f} are outside 0..255")


def _check_hgb_tree(pred: Any, where: str, n_features: int, is_cat: np.ndarray, filename: str) -> None:
    nodes, bitsets = _hgb_arrays(pred, where, filename)
    cols = {f: np.asarray(nodes[f]) for f in _HGB_FIELDS}
    n = nodes.shape[0] if nodes.ndim == 1 else 0
    if n == 0:
        raise _damaged(filename, f"{where} has no nodes")
    split = cols["is_leaf"] == 0
    _check_hgb_children(cols, split, n, where, filename)
    feat = cols["feature_idx"].astype(np.int64)
    fbad = split & ((feat < 0) | (feat >= n_features))
    if fbad.any():
        i = int(np.flatnonzero(fbad)[0])
        raise _damaged(filename, f"{where}, node {i} splits on feature {feat[i]}, outside 0..{n_features - 1}")
    cat = split & (cols["is_categorical"] != 0)
    _check_hgb_categorical(cols, split, cat, is_cat[np.clip(feat, 0, n_features - 1)], bitsets.shape[0], where,
                           filename)
    if np.any(~split & ~np.isfinite(cols["value"])):
        raise _damaged(filename, f"{where} has a non-finite leaf value")
    if np.any(split & ~cat & np.isnan(cols["num_threshold"])):
        raise _damaged(filename, f"{where} has a NaN threshold")


def _hgb_arrays(pred: Any, where: str, filename: str) -> tuple[np.ndarray, np.ndarray]:
    """A predictor's node records and category bitsets, in the layout the library's walk takes."""
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
    return nodes, bitsets


def _check_hgb_children(cols: dict[str, np.ndarray], split: np.ndarray, n: int, where: str, filename: str) -> None:
    """Children after their parent (as scikit-learn writes them): no cycle, every walk ends."""
    idx = np.arange(n)
    left, right = cols["left"].astype(np.int64), cols["right"].astype(np.int64)
    bad = split & ((left <= idx) | (left >= n) | (right <= idx) | (right >= n))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _damaged(filename, f"{where}, node {i}: a child ({left[i]}, {right[i]}) is outside {i + 1}..{n - 1}")


def _check_hgb_categorical(cols: dict[str, np.ndarray], split: np.ndarray, cat: np.ndarray, on_cat: np.ndarray,
                           n_bitsets: int, where: str, filename: str) -> None:
    """Categorical splits on categorical features with a category set the tree holds, and
    categorical features split by category set only (``on_cat``: each node's feature is categorical)."""
    cbad = cat & ((cols["bitset_idx"].astype(np.int64) >= n_bitsets) | ~on_cat)
    if cbad.any():
        i = int(np.flatnonzero(cbad)[0])
        raise _damaged(filename, f"{where}, node {i}: a categorical split on a feature that is not categorical "
                                 "or with a category set the tree does not hold")
    nbad = split & ~cat & on_cat       # scikit-learn splits a categorical feature by category set only
    if nbad.any():
        i = int(np.flatnonzero(nbad)[0])
        feat = cols["feature_idx"].astype(np.int64)
        raise _damaged(filename, f"{where}, node {i} splits the categorical feature {feat[i]} by a threshold")
