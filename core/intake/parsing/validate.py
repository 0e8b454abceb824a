"""Structural checks of model files before any library reads them.

A library handed a damaged file may crash the process, loop or allocate
gigabytes (see :mod:`core.intake.sandbox`, which contains what these checks miss).
These checks are cheap, linear in the file's size, allocate nothing the file
does not hold, and run first, in :func:`core.intake.io.load_model` (so a script that
reads a model in-process gets them too) and again in the sandbox's child:

* :func:`check_json_depth`: JSON nested deeper than any model file is refused
  by a linear scan of the brackets outside strings, before a recursive parser
  sees it (100,000 nested brackets crash parsers); used for every JSON model
  (XGBoost, CatBoost) and for LightGBM's ``pandas_categorical`` line;
* :func:`read_ubjson`: XGBoost's UBJSON decoded without recursion, every
  declared length checked against the bytes that remain (a mutated length
  cannot make it allocate), nesting bounded as for JSON;
* :func:`check_xgboost_json`: every tree's arrays have the declared length,
  children are in range and each node is reached once from the root (no
  cycle, no shared child), parents agree with children, split features are
  below ``num_feature``, thresholds, leaf values and the base score are numbers
  float32 holds (XGBoost reads 1e39 as infinity), each tree's ``id`` is its place
  (two of one id ended the process), a categorical split lists its categories,
  ``tree_info`` names an existing output, ``num_feature`` / ``num_class`` /
  ``num_parallel_tree`` / ``num_trees`` are bounded by what the file holds;
* :func:`check_lightgbm_text`: the same for LightGBM's text format, and its
  header against itself, its objective and its trees (``num_class``,
  ``num_tree_per_iteration``, the objective's ``num_class``, ``feature_names``,
  ``feature_infos``, the tree count), its parameters and ``pandas_categorical``
  (see :mod:`core.intake.parsing.lightgbmcheck`);
* :func:`check_catboost_json` and :func:`check_catboost_cbm`: CatBoost's JSON
  export and its ``.cbm`` files (their FlatBuffers read with every offset
  bounded): every split's index names a binary feature and agrees with the
  split's own fields, leaf counts, tree steps, borders, class parameters (see
  :mod:`core.intake.parsing.catboostcheck`);
* :func:`lightgbm_text`: line endings normalised (CRLF -> LF) and the
  ``tree_sizes`` index removed once it was found to list one size per tree,
  so that LightGBM parses tree by tree instead of trusting byte offsets that a
  Windows checkout or a hand edit has shifted (which aborts the process);
* :func:`check_skops_zip`: a ``.skops`` file is a zip: member count, the
  declared uncompressed sizes (a zip bomb) and ``schema.json``'s depth are
  bounded before skops opens it; :func:`check_sklearn_trees` then checks
  every fitted ``sklearn`` tree skops rebuilt (children in range, acyclic,
  features below ``n_features_in_``, thresholds finite or ``+inf``, the
  split scikit-learn writes to separate missing values from numbers, and
  ``missing_go_to_left`` one flag per node) before anything predicts with it
  (a damaged node array makes sklearn's Cython walk read outside memory);
* :func:`check_skops_boosters`: the XGBoost and LightGBM checks above applied
  to every booster a ``.skops`` file holds, before skops restores it (its
  state goes to the library's own parser unchecked otherwise).

Each failure is a :class:`ModelError` that names the part of the file and
says to re-save the model from its library.

Where they live: the limits, the error and the JSON reader in
:mod:`core.intake.parsing.filecheck`, the UBJSON reader in :mod:`core.intake.parsing.ubjson`,
the skops and sklearn checks in :mod:`core.intake.parsing.skopscheck`, the LightGBM
checks in :mod:`core.intake.parsing.lightgbmcheck`, the CatBoost checks in
:mod:`core.intake.parsing.catboostcheck`, the XGBoost checks here; every name above
is importable from here.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
import zlib
from io import BytesIO
from typing import Any

from core.intake.parsing.catboostcheck import check_catboost_cbm, check_catboost_json
from core.intake.parsing.filecheck import (
    FLOAT32_LIMIT,
    MAX_CLASSES,
    MAX_FEATURES,
    MAX_JSON_DEPTH,
    _damaged,
    _first_visit,
    _int,
    check_json_depth,
    load_json,
)
from core.intake.parsing.lightgbmcheck import _ints, check_lightgbm_text, lightgbm_text
from core.intake.parsing.skopscheck import check_sklearn_trees, check_skops_zip
from core.intake.parsing.ubjson import read_ubjson

__all__ = ["check_json_depth", "check_xgboost_json", "read_ubjson", "check_lightgbm_text", "lightgbm_text",
           "check_skops_zip", "check_sklearn_trees", "check_skops_boosters", "xgboost_document", "check_catboost_json",
           "check_catboost_cbm", "MAX_JSON_DEPTH", "MAX_FEATURES", "MAX_CLASSES"]


def xgboost_document(data: bytes, filename: str, what: str = "JSON (an XGBoost or CatBoost export)") -> Any:
    """The decoded JSON or UBJSON of an XGBoost file or serialised booster (depth and
    lengths bounded): UBJSON unless the bytes (or a ``.json`` name) say JSON."""
    head = data[:64].lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    is_json = re.match(rb"[{\[]\s*(\"|[}\]]|$)", head) is not None or filename.lower().endswith(".json")
    if is_json and not head.startswith((b"{L", b"{i", b"{U", b"{I", b"{l", b"{$", b"{#")):
        return load_json(data, filename, what)
    return read_ubjson(data, filename)


# ------------------------------------------------------------------ XGBoost
def _number_list(v: Any, filename: str, what: str, n: int | None = None) -> list[Any]:
    if not isinstance(v, list):
        raise _damaged(filename, f"{what} is not a list")
    if n is not None and len(v) != n:
        raise _damaged(filename, f"{what} has {len(v)} entries, not {n}")
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise _damaged(filename, f"{what} holds {str(x)[:40]!r}, not a number")
    return v


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _float32(x: Any) -> bool:
    """A number float32 holds (XGBoost reads every threshold and leaf value into one):
    a larger one, 1e39 say, becomes infinity in XGBoost and a huge number elsewhere."""
    return _finite(x) and abs(x) < FLOAT32_LIMIT


_XGB_NODE_ARRAYS = ("left_children", "right_children", "split_indices", "split_conditions", "parents",
                    "base_weights", "default_left", "loss_changes", "sum_hessian", "split_type")


def check_xgboost_json(obj: object, filename: str = "model.json") -> None:
    """Check an XGBoost model (its JSON or UBJSON decoded) before XGBoost reads it."""
    if not isinstance(obj, dict) or "learner" not in obj:
        if isinstance(obj, dict):
            return                                 # not an XGBoost model: its reader says what it is
        raise _damaged(filename, "the model is not a JSON object")
    learner, mp, model, trees = _xgboost_parts(obj, filename)
    names = learner.get("feature_names") or []
    if not isinstance(names, list):
        raise _damaged(filename, "'feature_names' is not a list")
    n_feature, n_class, n_target = _xgboost_counts(mp, len(trees), filename)
    _check_base_score(mp, max(n_class, n_target, 1), filename)
    outputs = max(n_class, n_target, 1)
    _check_xgboost_index(model, trees, outputs, filename)
    max_index = max((_check_xgboost_tree(tree, t, outputs, filename) for t, tree in enumerate(trees)), default=-1)
    _check_xgboost_features(learner, names, n_feature, max_index, filename)
    if n_class > max(len(trees), 2) or n_class > MAX_CLASSES:
        raise _damaged(filename, f"num_class is {n_class:,} but it holds only {len(trees)} trees")


def _xgboost_counts(mp: dict[str, Any], n_trees: int, filename: str) -> tuple[int, int, int]:
    """``num_feature``, ``num_class`` and ``num_target``, in range for a model of ``n_trees`` trees."""
    n_feature = _int(mp.get("num_feature", 0), filename, "num_feature")
    n_class = _int(mp.get("num_class", 0), filename, "num_class")
    n_target = _int(mp.get("num_target", 1), filename, "num_target")
    if n_feature < 0 or n_class < 0 or not 1 <= n_target <= max(n_trees, 1):
        raise _damaged(filename, f"num_feature {n_feature}, num_class {n_class}, num_target {n_target} are "
                                 "out of range")
    return n_feature, n_class, n_target


def _check_base_score(mp: dict[str, Any], outputs: int, filename: str) -> None:
    """``base_score``: float32 numbers, at most one per output."""
    base = mp.get("base_score", "0.5")
    try:
        vals = [float(v) for v in str(base).strip().strip("[]").split(",") if v.strip()]
    except ValueError:
        vals = [math.nan]
    if not vals or not all(_float32(v) for v in vals) or len(vals) > outputs:
        raise _damaged(filename, f"base_score is {str(base)[:40]!r}")


def _check_xgboost_features(learner: dict[str, Any], names: list[Any], n_feature: int, max_index: int,
                            filename: str) -> None:
    """``num_feature`` against the features the trees split on, the names and the types."""
    if max_index >= n_feature:
        raise _damaged(filename, f"a split uses feature {max_index} but num_feature is {n_feature}")
    if n_feature > max(len(names), max_index + 1) + MAX_FEATURES:
        raise _damaged(filename, f"num_feature is {n_feature:,}, far more than the {max_index + 1} features its "
                                 "trees use")
    if names and len(names) != n_feature:
        raise _damaged(filename, f"it names {len(names)} features but num_feature is {n_feature}")
    types = learner.get("feature_types")
    if types and (not isinstance(types, list) or len(types) != n_feature):
        raise _damaged(filename, f"feature_types has {len(types) if isinstance(types, list) else '?'} entries "
                                 f"but num_feature is {n_feature}")


def _xgboost_parts(obj: dict[str, Any], filename: str) -> tuple[Any, Any, Any, list[Any]]:
    """The learner, its model parameters, the tree model and its trees."""
    try:
        learner = obj["learner"]
        mp = learner["learner_model_param"]
        gb = learner["gradient_booster"]
        model = gb["model"] if "model" in gb else gb["gbtree"]["model"]   # dart nests a gbtree
        trees = model["trees"]
    except (KeyError, TypeError):
        raise _damaged(filename, "the XGBoost model lacks its learner, booster or trees") from None
    if not isinstance(trees, list) or not isinstance(mp, dict) or not isinstance(model, dict):
        raise _damaged(filename, "'trees' is not a list")
    return learner, mp, model, trees


def _check_xgboost_index(model: dict[str, Any], trees: list[Any], outputs: int, filename: str) -> None:
    """The tree model's counts and indices against the trees it holds: ``num_trees``,
    ``num_parallel_tree``, the output each tree adds to and ``iteration_indptr``."""
    gparam = model.get("gbtree_model_param", {}) or {}
    if not isinstance(gparam, dict):
        raise _damaged(filename, "gbtree_model_param is not an object")
    _check_tree_counts(gparam, len(trees), filename)
    tree_info = model.get("tree_info", [0] * len(trees))
    _number_list(tree_info, filename, "tree_info", len(trees))
    for t, g in enumerate(tree_info):
        if g != int(g) or not 0 <= g < outputs:
            raise _damaged(filename, f"tree {t} adds to output {g} but the model has {outputs}")
    _check_indptr(model.get("iteration_indptr"), len(trees), filename)


def _check_tree_counts(gparam: dict[str, Any], n_trees: int, filename: str) -> None:
    """``num_trees`` and ``num_parallel_tree`` against the ``n_trees`` trees held."""
    declared_trees = _int(gparam.get("num_trees", n_trees), filename, "num_trees")
    if declared_trees != n_trees:
        raise _damaged(filename, f"num_trees is {declared_trees} but it holds {n_trees} trees")
    n_parallel = _int(gparam.get("num_parallel_tree", 1), filename, "num_parallel_tree")
    if not 1 <= n_parallel <= max(n_trees, 1):
        raise _damaged(filename, f"num_parallel_tree is {n_parallel:,} but it holds only {n_trees} trees")


def _check_indptr(indptr: Any, n_trees: int, filename: str) -> None:
    """``iteration_indptr``: if given, numbers from 0 up to the number of trees, never decreasing."""
    if indptr is None:
        return
    _number_list(indptr, filename, "iteration_indptr")
    if indptr and (indptr[0] != 0 or indptr[-1] != n_trees
                   or any(b < a for a, b in zip(indptr, indptr[1:]))):
        raise _damaged(filename, "iteration_indptr does not index its trees")


def _check_xgboost_tree(tree: Any, t: int, outputs: int, filename: str) -> int:
    """Check tree ``t``: its arrays, parameters and category segments, then its
    nodes; return the largest feature index it splits on (-1 if none)."""
    _check_tree_keys(tree, t, filename)
    n = _check_node_arrays(tree, t, filename)
    deleted = _check_tree_param(tree, t, n, outputs, filename)
    if "categories_segments" in tree or "categories_sizes" in tree:
        _check_category_segments(tree, t, n, filename)
    _check_split_types(tree, t, n, filename)
    reached, max_index = _walk_xgboost_tree(tree, t, n, filename)
    if reached + max(deleted, 0) < n:
        raise _damaged(filename, f"tree {t}: {n - reached} of its {n} nodes are not reached from the root")
    return max_index


def _check_tree_keys(tree: Any, t: int, filename: str) -> None:
    """Tree ``t`` is an object with its node arrays, and its ``id`` (if given) is ``t``."""
    if not isinstance(tree, dict):
        raise _damaged(filename, f"tree {t} is not an object")
    for key in ("left_children", "right_children", "split_indices", "split_conditions"):
        if key not in tree:
            raise _damaged(filename, f"tree {t} has no {key!r}")
    if "id" in tree and (not isinstance(tree["id"], int) or tree["id"] != t):
        # XGBoost stores each tree at the place its id names: two trees of one id ended the process
        raise _damaged(filename, f"tree {t} has the id {repr(tree['id'])[:20]}")


def _check_node_arrays(tree: dict[str, Any], t: int, filename: str) -> int:
    """The number of nodes (at least one); every node array given has one number per node."""
    left = _number_list(tree["left_children"], filename, f"tree {t}'s left_children")
    n = len(left)
    if n == 0:
        raise _damaged(filename, f"tree {t} has no nodes")
    for key in _XGB_NODE_ARRAYS:
        if key in tree:
            _number_list(tree[key], filename, f"tree {t}'s {key}", n)
    return n


def _check_tree_param(tree: dict[str, Any], t: int, n: int, outputs: int, filename: str) -> int:
    """``tree_param`` against the ``n`` nodes and ``outputs``; return its ``num_deleted``."""
    tp = tree.get("tree_param", {}) or {}
    if not isinstance(tp, dict):
        raise _damaged(filename, f"tree {t}'s tree_param is not an object")
    declared = tp.get("num_nodes")
    if declared is not None and _int(declared, filename, f"tree {t}'s num_nodes") != n:
        raise _damaged(filename, f"tree {t} declares {declared} nodes and holds {n}")
    leaf_size = _int(tp.get("size_leaf_vector", 1), filename, f"tree {t}'s size_leaf_vector")
    if not 0 <= leaf_size <= outputs:
        raise _damaged(filename, f"tree {t}'s size_leaf_vector is {leaf_size:,} for {outputs} outputs")
    return _int(tp.get("num_deleted", 0), filename, f"tree {t}'s num_deleted")


def _check_category_segments(tree: dict[str, Any], t: int, n: int, filename: str) -> None:
    """Each category segment inside the category list, each listed node inside the tree."""
    cats = _number_list(tree.get("categories", []), filename, f"tree {t}'s categories")
    seg = _number_list(tree.get("categories_segments", []), filename, f"tree {t}'s categories_segments")
    size = _number_list(tree.get("categories_sizes", []), filename, f"tree {t}'s categories_sizes",
                        len(seg))
    nodes = _number_list(tree.get("categories_nodes", []), filename, f"tree {t}'s categories_nodes",
                         len(seg))
    if any(not (0 <= s and 0 <= z and s + z <= len(cats)) for s, z in zip(seg, size)) \
            or any(not 0 <= c < n for c in nodes):
        raise _damaged(filename, f"tree {t}'s category segments point outside its category list")


def _check_split_types(tree: dict[str, Any], t: int, n: int, filename: str) -> None:
    """``split_type``: 0 (a threshold) or 1 (categories) per node, and a categorical split's
    category list among the tree's segments: XGBoost refuses a categorical split without one
    when it writes the model out (``Check failed: size != 0``)."""
    types = tree.get("split_type")
    if types is None:
        return
    if any(v not in (0, 1) for v in types):
        raise _damaged(filename, f"tree {t}'s split_type holds {next(v for v in types if v not in (0, 1))!r}, not 0 "
                                 "(threshold) or 1 (categories)")
    _check_categorical_lists(tree, types, t, n, filename)


def _check_categorical_lists(tree: dict[str, Any], types: list[Any], t: int, n: int, filename: str) -> None:
    """Every categorical split node is among ``categories_nodes``."""
    listed = set(tree.get("categories_nodes", []))
    left = tree["left_children"]
    missing = [i for i in range(n) if types[i] == 1 and left[i] != -1 and i not in listed]
    if missing:
        raise _damaged(filename, f"tree {t}, node {missing[0]} splits by categories but lists none")


def _walk_xgboost_tree(tree: dict[str, Any], t: int, n: int, filename: str) -> tuple[int, int]:
    """Walk tree ``t`` (``n`` nodes) from its root, each node once: children in
    range and agreeing with ``parents``, split features, finite thresholds and leaf
    values. Return how many nodes were reached and the largest feature split on."""
    left, right = tree["left_children"], tree["right_children"]
    cond = tree["split_conditions"]
    max_index = -1
    seen = bytearray(n)
    stack = [0]
    reached = 0
    where = f"tree {t}"
    while stack:
        i = stack.pop()
        _first_visit(seen, i, where, filename)
        reached += 1
        a, b = left[i], right[i]
        if not isinstance(a, int) or not isinstance(b, int):
            raise _damaged(filename, f"tree {t}, node {i} has a child index that is not a whole number")
        if a == -1 and b == -1:
            if not _float32(cond[i]):
                raise _damaged(filename, f"tree {t}, leaf {i} has the value {cond[i]!r}, which XGBoost's float32 "
                                         "leaves cannot hold")
            continue
        for side, c in (("left", a), ("right", b)):
            _check_xgboost_child(tree, t, i, side, c, seen, filename)
        max_index = max(max_index, _check_xgboost_split(tree, t, i, filename))
        stack += (a, b)
    return reached, max_index


def _check_xgboost_child(tree: dict[str, Any], t: int, i: int, side: str, c: int, seen: bytearray,
                         filename: str) -> None:
    """Child ``c`` of node ``i``: not the root, inside the tree, not reached before, and node ``i``
    its parent as ``parents`` says."""
    n = len(seen)
    parents = tree.get("parents")
    if c == 0:
        raise _damaged(filename, f"tree {t}, node {i}: {side} child 0 points back to the root")
    if not 0 < c < n:
        raise _damaged(filename, f"tree {t}, node {i}: {side} child {c} is outside 1..{n - 1}")
    if seen[c]:
        raise _damaged(filename, f"tree {t}, node {i}: {side} child {c} points back to an "
                                 "ancestor or is shared")
    if parents is not None and parents[c] != i:
        raise _damaged(filename, f"tree {t}, node {c}: its parent is {parents[c]}, but node {i} "
                                 "has it as a child")


def _check_xgboost_split(tree: dict[str, Any], t: int, i: int, filename: str) -> int:
    """Split node ``i``: a feature index and a float32 threshold; return the feature."""
    f, cond = tree["split_indices"][i], tree["split_conditions"][i]
    if not isinstance(f, int) or f < 0:
        raise _damaged(filename, f"tree {t}, node {i} splits on feature {f!r}")
    if not _float32(cond):
        raise _damaged(filename, f"tree {t}, node {i} has the threshold {cond!r}, which XGBoost's float32 "
                                 "thresholds cannot hold")
    return f


# ------------------------------------------------------------------ boosters inside .skops files
def check_skops_boosters(data: bytes, filename: str = "model.skops") -> None:
    """The checks of a standalone XGBoost or LightGBM file, applied to every booster
    a ``.skops`` file holds (an ``XGBClassifier``, an ``LGBMRegressor``, a pipeline
    ending in one), before skops hands its bytes to the library: skops restores a
    booster from its state (XGBoost: the serialised UBJSON in a zip member;
    LightGBM: the model text in ``schema.json``), which the library parses as it is.
    Call after :func:`check_skops_zip`."""
    zf = zipfile.ZipFile(BytesIO(data))
    raw = zf.read("schema.json")
    if b"Booster" not in raw and b"\\u" not in raw:      # no booster (a class name escaped would hide one)
        return
    schema = json.loads(raw)
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        module = str(node.get("__module__", ""))
        if node.get("__class__") == "Booster" and module.startswith(("xgboost", "lightgbm")):
            _check_embedded_booster(zf, node, module, filename)
        stack.extend(v for v in node.values() if isinstance(v, (dict, list)))


def _check_embedded_booster(zf: Any, node: dict[str, Any], module: str, filename: str) -> None:
    """One booster of the schema (``module``: xgboost or lightgbm), checked from its state."""
    state = node.get("content", {})
    state = state.get("content", {}) if isinstance(state, dict) else {}
    if not isinstance(state, dict):
        raise _damaged(filename, f"its {module} Booster has no readable state")
    if module.startswith("xgboost"):
        _check_embedded_xgboost(zf, state.get("handle"), filename)
    else:
        _check_embedded_lightgbm(state.get("_handle"), filename)


def _check_embedded_xgboost(zf: Any, handle: Any, filename: str) -> None:
    """XGBoost's serialised booster: UBJSON (or JSON) of ``{"Config", "Model"}``."""
    if handle is None or (isinstance(handle, dict) and handle.get("__loader__") == "NoneNode"):
        return                                    # an unfitted model: nothing for XGBoost to parse
    if not isinstance(handle, dict) or not isinstance(handle.get("file"), str):
        raise _damaged(filename, "its XGBoost booster is not stored as bytes")
    try:
        raw = zf.read(handle["file"])
    except KeyError:
        raise _damaged(filename, f"its XGBoost booster's member {handle['file']!r} is missing") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, zlib.error) as exc:
        raise _damaged(filename, f"its XGBoost booster's member cannot be unpacked ({exc})") from None
    if raw.lstrip()[:1] not in (b"{", b"["):      # XGBoost 1.x's binary format: no checks exist for it
        raise _damaged(filename, "its XGBoost booster is in a format that cannot be checked (re-save it with "
                                 "XGBoost 2 or later, or save the model itself as .json/.ubj)")
    document = xgboost_document(raw, f"{filename} (its XGBoost booster)", "JSON (an XGBoost booster)")
    model = document.get("Model", document) if isinstance(document, dict) else document
    check_xgboost_json(model, f"{filename} (its XGBoost booster)")


def _check_embedded_lightgbm(handle: Any, filename: str) -> None:
    """LightGBM's model text as skops keeps it (a JSON string in schema.json)."""
    if handle is None or (isinstance(handle, dict) and handle.get("__loader__") == "NoneNode"):
        return
    text = _handle_text(handle, filename)
    where = f"{filename} (its LightGBM booster)"
    if "\r" in text:
        raise _damaged(filename, "its LightGBM booster's text has carriage returns, which shift LightGBM's "
                                 "tree offsets")
    check_lightgbm_text(text, where)
    _check_tree_sizes(text, where, filename)


def _handle_text(handle: Any, filename: str) -> str:
    """The model text skops stored for a LightGBM booster (a JSON string)."""
    try:
        text = json.loads(handle["content"]) if isinstance(handle, dict) else None
    except (KeyError, TypeError, ValueError):
        text = None
    if not isinstance(text, str):
        raise _damaged(filename, "its LightGBM booster's model text cannot be read")
    return text


def _check_tree_sizes(text: str, where: str, filename: str) -> None:
    """``tree_sizes``, if listed, gives each tree's length in characters: LightGBM reads trees at those offsets."""
    listed = re.search(r"^tree_sizes=(.*)$", text, re.M)
    if listed:
        starts = [m.start() for m in re.finditer(r"^Tree=", text, re.M)]
        end = text.find("end of trees")
        found = [b - a for a, b in zip(starts, starts[1:] + [end if end >= 0 else len(text)])]
        if _ints(listed.group(1), where, "tree_sizes") != found:
            raise _damaged(filename, "its LightGBM booster's tree_sizes do not match its trees (LightGBM would "
                                     "read trees at the wrong offsets)")
