"""Structural checks of model files before any library reads them.

A library handed a damaged file may crash the process, loop or allocate
gigabytes (see :mod:`core.sandbox`, which contains what these checks miss).
These checks are cheap, linear in the file's size, allocate nothing the file
does not hold, and run first, in :func:`core.io.load_model` (so a script that
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
  below ``num_feature``, thresholds and leaf values are finite, ``tree_info``
  names an existing output, ``num_feature`` / ``num_class`` /
  ``num_parallel_tree`` / ``num_trees`` are bounded by what the file holds;
* :func:`check_lightgbm_text`: the same for LightGBM's text format (node and
  leaf arrays of ``num_leaves - 1`` / ``num_leaves`` entries, children as
  node ``k >= 0`` or leaf ``~k``, categorical boundaries, ``max_feature_idx``
  against ``feature_names``, ``num_tree_per_iteration`` against the trees);
* :func:`lightgbm_text`: line endings normalised (CRLF -> LF) and the
  ``tree_sizes`` index removed once it was found to list one size per tree,
  so that LightGBM parses tree by tree instead of trusting byte offsets that a
  Windows checkout or a hand edit has shifted (which aborts the process);
* :func:`check_skops_zip`: a ``.skops`` file is a zip: member count, the
  declared uncompressed sizes (a zip bomb) and ``schema.json``'s depth are
  bounded before skops opens it; :func:`check_sklearn_trees` then checks
  every fitted ``sklearn`` tree skops rebuilt (children in range, acyclic,
  features below ``n_features_in_``, finite thresholds) before anything
  predicts with it (a damaged node array makes sklearn's Cython walk read
  outside memory).

Each failure is a :class:`ModelError` that names the part of the file and
says to re-save the model from its library.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
import io as _io
from typing import Any

from core.errors import ModelError

__all__ = ["check_json_depth", "check_xgboost_json", "read_ubjson", "check_lightgbm_text", "lightgbm_text",
           "check_skops_zip", "check_sklearn_trees", "MAX_JSON_DEPTH", "MAX_FEATURES", "MAX_CLASSES"]

MAX_JSON_DEPTH = 64          # XGBoost JSON models nest about 8 deep, CatBoost's about 10
MAX_FEATURES = 1_000_000     # features a model may declare beyond those it names or splits on
MAX_CLASSES = 100_000        # classes (outputs) a model may declare at most
MAX_SKOPS_MEMBERS = 100_000
MAX_SKOPS_UNPACKED = 4 * 2**30   # bytes a .skops zip may unpack to
MAX_ZIP_RATIO = 1000             # uncompressed / compressed size of one member (a zip bomb)
_HOW = "Re-save the model from its library (Booster.save_model / model.save_model / skops.io.dump)."


def _damaged(filename: str, what: str) -> ModelError:
    return ModelError(f"{filename!r} is damaged: {what}. {_HOW}")


# ------------------------------------------------------------------ JSON
def check_json_depth(data: bytes | str, filename: str = "model", limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (a linear scan; strings skipped)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    # fast path: bytes between quotes are skipped with find(), brackets counted per chunk
    depth, i, n = 0, 0, len(data)
    find = data.find
    while i < n:
        q = find(b'"', i)
        end = n if q < 0 else q
        if end > i:
            chunk = data[i:end]
            if b"[" in chunk or b"{" in chunk or b"]" in chunk or b"}" in chunk:
                for b in chunk:
                    if b == 0x7B or b == 0x5B:
                        depth += 1
                        if depth > limit:
                            raise _damaged(filename, f"its JSON is nested more than {limit} levels deep")
                    elif b == 0x7D or b == 0x5D:
                        depth -= 1
        if q < 0:
            break
        j = q + 1                                    # inside a string: find its closing quote
        while True:
            j = find(b'"', j)
            if j < 0:
                return                                # unterminated string: the JSON reader says so
            k = j - 1
            while k > q and data[k] == 0x5C:         # count the backslashes before the quote
                k -= 1
            if (j - 1 - k) % 2 == 0:
                break
            j += 1
        i = j + 1


def load_json(data: bytes, filename: str, what: str = "JSON model") -> Any:
    """``json.loads`` after the depth check; a syntax error becomes a ModelError."""
    check_json_depth(data, filename)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _damaged(filename, f"it is not valid {what} ({str(exc)[:120]})") from None


# ------------------------------------------------------------------ UBJSON
_UBJ_NUM = {b"i": (">b", 1), b"U": (">B", 1), b"I": (">h", 2), b"l": (">i", 4), b"L": (">q", 8),
            b"d": (">f", 4), b"D": (">d", 8)}
_NP_DTYPE = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4", b"D": ">f8"}


def read_ubjson(data: bytes, filename: str = "model.ubj", limit: int = MAX_JSON_DEPTH) -> Any:
    """Decode XGBoost's UBJSON without recursion, every declared length bounded by
    the bytes that remain (typed numeric arrays become lists)."""
    import numpy as np

    mv = memoryview(data)
    n = len(data)
    pos = 0

    def bad(what: str) -> ModelError:
        return _damaged(filename, f"its UBJSON {what} (at byte {pos})")

    def take(k: int) -> memoryview:
        nonlocal pos
        if k < 0 or pos + k > n:
            raise bad("is cut short or declares a length beyond the file's end")
        out = mv[pos:pos + k]
        pos += k
        return out

    def marker() -> bytes:
        return bytes(take(1))

    def integer(m: bytes | None = None) -> int:
        m = m or marker()
        if m not in _UBJ_NUM or m in (b"d", b"D"):
            raise bad(f"has a length of type {m!r}, not an integer")
        fmt, k = _UBJ_NUM[m]
        return struct.unpack(fmt, take(k))[0]

    def string(m: bytes | None = None) -> str:
        k = integer(m)
        try:
            return bytes(take(k)).decode("utf-8")
        except UnicodeDecodeError:
            raise bad("holds a string that is not UTF-8") from None

    def scalar(m: bytes) -> Any:
        if m in _UBJ_NUM:
            fmt, k = _UBJ_NUM[m]
            return struct.unpack(fmt, take(k))[0]
        if m == b"S" or m == b"H":
            return string()
        if m == b"C":
            return bytes(take(1)).decode("latin-1")
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"Z":
            return None
        raise bad(f"has the unknown type marker {m!r}")

    def container_header() -> tuple[bytes | None, int | None]:
        """After '[' or '{': optional '$type' and '#count'."""
        typ = cnt = None
        if pos < n and data[pos:pos + 1] == b"$":
            take(1)
            typ = marker()
            if data[pos:pos + 1] != b"#":
                raise bad("has a typed container without a count")
        if pos < n and data[pos:pos + 1] == b"#":
            take(1)
            cnt = integer()
            if cnt < 0 or cnt > n - pos:           # each element takes a byte at least (typed: checked below)
                if not (typ in (b"T", b"F", b"Z") and 0 <= cnt <= 10**7):
                    raise bad(f"declares {cnt:,} elements, more than the file holds")
        return typ, cnt

    # stack frames: [container, kind, typ, remaining or None, pending key]
    root: list = []
    stack: list = [[root, "[", None, 1, None]]

    def add(value: Any) -> None:
        top = stack[-1]
        if top[1] == "[":
            top[0].append(value)
        else:
            top[0][top[4]] = value
        if top[3] is not None:
            top[3] -= 1

    def open_container(m: bytes) -> None:
        nonlocal pos
        typ, cnt = container_header()
        if m == b"[" and typ in _NP_DTYPE and cnt is not None:
            dt = np.dtype(_NP_DTYPE[typ])
            raw = take(cnt * dt.itemsize)
            add(np.frombuffer(raw, dtype=dt).tolist())
            return
        if len(stack) > limit:
            raise bad(f"is nested more than {limit} levels deep")
        new: Any = [] if m == b"[" else {}
        add(new)
        stack.append([new, "[" if m == b"[" else "{", typ, cnt, None])

    while True:
        top = stack[-1]
        if top[3] == 0:                             # a counted container (or the root) is complete
            if len(stack) == 1:
                break
            stack.pop()
            continue
        if top[3] is None and pos < n and data[pos:pos + 1] == (b"]" if top[1] == "[" else b"}"):
            take(1)
            stack.pop()
            continue
        if top[1] == "{":
            top[4] = string(marker())
        m = top[2] if top[2] is not None else marker()
        if m == b"N" and top[2] is None:            # no-op
            if top[1] == "{":
                raise bad("has a no-op where a value belongs")
            continue
        if m in (b"[", b"{"):
            open_container(m)
        else:
            add(scalar(m))
    if pos != n:
        raise _damaged(filename, f"its UBJSON has {n - pos:,} stray bytes after the model")
    return root[0]


# ------------------------------------------------------------------ XGBoost
def _int(v: Any, filename: str, what: str) -> int:
    try:
        if isinstance(v, float) and not v.is_integer():
            raise ValueError
        return int(v)
    except (TypeError, ValueError, OverflowError):
        raise _damaged(filename, f"{what} is {str(v)[:40]!r}, not a whole number") from None


def _number_list(v: Any, filename: str, what: str, n: int | None = None) -> list:
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


_XGB_NODE_ARRAYS = ("left_children", "right_children", "split_indices", "split_conditions", "parents",
                    "base_weights", "default_left", "loss_changes", "sum_hessian", "split_type")


def check_xgboost_json(obj: Any, filename: str = "model.json") -> None:
    """Check an XGBoost model (its JSON or UBJSON decoded) before XGBoost reads it."""
    if not isinstance(obj, dict) or "learner" not in obj:
        if isinstance(obj, dict):
            return                                 # not an XGBoost model: its reader says what it is
        raise _damaged(filename, "the model is not a JSON object")
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
    names = learner.get("feature_names") or []
    if not isinstance(names, list):
        raise _damaged(filename, "'feature_names' is not a list")
    n_feature = _int(mp.get("num_feature", 0), filename, "num_feature")
    n_class = _int(mp.get("num_class", 0), filename, "num_class")
    n_target = _int(mp.get("num_target", 1), filename, "num_target")
    if n_feature < 0 or n_class < 0 or not 1 <= n_target <= max(len(trees), 1):
        raise _damaged(filename, f"num_feature {n_feature}, num_class {n_class}, num_target {n_target} are "
                                 "out of range")
    base = mp.get("base_score", "0.5")
    try:
        vals = [float(v) for v in str(base).strip().strip("[]").split(",") if v.strip()]
    except ValueError:
        vals = [math.nan]
    if not vals or not all(math.isfinite(v) for v in vals) or len(vals) > max(n_class, n_target, 1):
        raise _damaged(filename, f"base_score is {str(base)[:40]!r}")
    gparam = model.get("gbtree_model_param", {}) or {}
    if not isinstance(gparam, dict):
        raise _damaged(filename, "gbtree_model_param is not an object")
    declared_trees = _int(gparam.get("num_trees", len(trees)), filename, "num_trees")
    if declared_trees != len(trees):
        raise _damaged(filename, f"num_trees is {declared_trees} but it holds {len(trees)} trees")
    n_parallel = _int(gparam.get("num_parallel_tree", 1), filename, "num_parallel_tree")
    if not 1 <= n_parallel <= max(len(trees), 1):
        raise _damaged(filename, f"num_parallel_tree is {n_parallel:,} but it holds only {len(trees)} trees")
    outputs = max(n_class, n_target, 1)
    tree_info = model.get("tree_info", [0] * len(trees))
    _number_list(tree_info, filename, "tree_info", len(trees))
    for t, g in enumerate(tree_info):
        if g != int(g) or not 0 <= g < outputs:
            raise _damaged(filename, f"tree {t} adds to output {g} but the model has {outputs}")
    indptr = model.get("iteration_indptr")
    if indptr is not None:
        _number_list(indptr, filename, "iteration_indptr")
        if indptr and (indptr[0] != 0 or indptr[-1] != len(trees)
                       or any(b < a for a, b in zip(indptr, indptr[1:]))):
            raise _damaged(filename, "iteration_indptr does not index its trees")
    max_index = -1
    for t, tree in enumerate(trees):
        if not isinstance(tree, dict):
            raise _damaged(filename, f"tree {t} is not an object")
        for key in ("left_children", "right_children", "split_indices", "split_conditions"):
            if key not in tree:
                raise _damaged(filename, f"tree {t} has no {key!r}")
        left = _number_list(tree["left_children"], filename, f"tree {t}'s left_children")
        n = len(left)
        if n == 0:
            raise _damaged(filename, f"tree {t} has no nodes")
        for key in _XGB_NODE_ARRAYS:
            if key in tree:
                _number_list(tree[key], filename, f"tree {t}'s {key}", n)
        right, feat, cond = tree["right_children"], tree["split_indices"], tree["split_conditions"]
        parents = tree.get("parents")
        tp = tree.get("tree_param", {}) or {}
        if not isinstance(tp, dict):
            raise _damaged(filename, f"tree {t}'s tree_param is not an object")
        declared = tp.get("num_nodes")
        if declared is not None and _int(declared, filename, f"tree {t}'s num_nodes") != n:
            raise _damaged(filename, f"tree {t} declares {declared} nodes and holds {n}")
        leaf_size = _int(tp.get("size_leaf_vector", 1), filename, f"tree {t}'s size_leaf_vector")
        if not 0 <= leaf_size <= outputs:
            raise _damaged(filename, f"tree {t}'s size_leaf_vector is {leaf_size:,} for {outputs} outputs")
        deleted = _int(tp.get("num_deleted", 0), filename, f"tree {t}'s num_deleted")
        if "categories_segments" in tree or "categories_sizes" in tree:
            cats = _number_list(tree.get("categories", []), filename, f"tree {t}'s categories")
            seg = _number_list(tree.get("categories_segments", []), filename, f"tree {t}'s categories_segments")
            size = _number_list(tree.get("categories_sizes", []), filename, f"tree {t}'s categories_sizes",
                                len(seg))
            nodes = _number_list(tree.get("categories_nodes", []), filename, f"tree {t}'s categories_nodes",
                                 len(seg))
            if any(not (0 <= s and 0 <= z and s + z <= len(cats)) for s, z in zip(seg, size)) \
                    or any(not 0 <= c < n for c in nodes):
                raise _damaged(filename, f"tree {t}'s category segments point outside its category list")
        seen = bytearray(n)
        stack = [0]
        reached = 0
        while stack:
            i = stack.pop()
            if seen[i]:
                raise _damaged(filename, f"tree {t}, node {i} is reached twice (a child points back to an "
                                         "ancestor or is shared)")
            seen[i] = 1
            reached += 1
            a, b = left[i], right[i]
            if not isinstance(a, int) or not isinstance(b, int):
                raise _damaged(filename, f"tree {t}, node {i} has a child index that is not a whole number")
            if a == -1 and b == -1:
                if not _finite(cond[i]):
                    raise _damaged(filename, f"tree {t}, leaf {i} has the value {cond[i]!r}")
                continue
            for side, c in (("left", a), ("right", b)):
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
            f = feat[i]
            if not isinstance(f, int) or f < 0:
                raise _damaged(filename, f"tree {t}, node {i} splits on feature {f!r}")
            max_index = max(max_index, f)
            if not _finite(cond[i]):
                raise _damaged(filename, f"tree {t}, node {i} has the threshold {cond[i]!r}")
            stack += (a, b)
        if reached + max(deleted, 0) < n:
            raise _damaged(filename, f"tree {t}: {n - reached} of its {n} nodes are not reached from the root")
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
    if n_class > max(len(trees), 2) or n_class > MAX_CLASSES:
        raise _damaged(filename, f"num_class is {n_class:,} but it holds only {len(trees)} trees")


# ------------------------------------------------------------------ LightGBM
def lightgbm_text(data: bytes, filename: str = "model.txt") -> str:
    """LightGBM model text ready for ``lgb.Booster(model_str=...)``: checked by
    :func:`check_lightgbm_text`, line endings normalised, ``tree_sizes`` dropped."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(filename, "it is not UTF-8 text") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    check_lightgbm_text(text, filename)
    return "\n".join(line for line in text.split("\n") if not line.startswith("tree_sizes="))


def _kv(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        if "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), v.strip())
    return out


def _ints(s: str, filename: str, what: str) -> list[int]:
    try:
        return [int(v) for v in s.split()]
    except ValueError:
        raise _damaged(filename, f"{what} holds something that is not a whole number") from None


def _floats(s: str, filename: str, what: str) -> list[float]:
    try:
        out = [float(v) for v in s.split()]
    except ValueError:
        raise _damaged(filename, f"{what} holds something that is not a number") from None
    if not all(math.isfinite(v) for v in out):
        raise _damaged(filename, f"{what} holds an infinite or NaN value")
    return out


def check_lightgbm_text(text: str, filename: str = "model.txt") -> None:
    """Check LightGBM model text (LF line endings) before LightGBM reads it."""
    head, sep, rest = text.partition("\nTree=")
    if not text.startswith("tree") or not sep:
        if "Tree=" not in text:
            raise _damaged(filename, "it is not LightGBM model text (no 'tree' header or no 'Tree=' block)")
        raise _damaged(filename, "its header does not start with 'tree'")
    hdr = _kv(head.split("\n"))
    for key in ("max_feature_idx", "num_class", "num_tree_per_iteration"):
        if key not in hdr:
            raise _damaged(filename, f"its header has no {key}")
    max_idx = _int(hdr["max_feature_idx"], filename, "max_feature_idx")
    n_class = _int(hdr["num_class"], filename, "num_class")
    per_iter = _int(hdr["num_tree_per_iteration"], filename, "num_tree_per_iteration")
    names = hdr.get("feature_names", "").split()
    if max_idx < 0 or len(names) != max_idx + 1:
        raise _damaged(filename, f"max_feature_idx is {max_idx} but it names {len(names)} features")
    infos = hdr.get("feature_infos")
    if infos is not None and len(infos.split()) != max_idx + 1:
        raise _damaged(filename, f"feature_infos has {len(infos.split())} entries for {max_idx + 1} features")
    body, _, tail = ("Tree=" + rest).partition("\nend of trees")
    blocks = [b for b in body.split("\nTree=") if b.strip()]
    n_trees = len(blocks)
    if not 1 <= per_iter <= n_trees or n_trees % per_iter:
        raise _damaged(filename, f"num_tree_per_iteration is {per_iter:,} but it holds {n_trees} trees")
    if not 1 <= n_class <= max(per_iter, 1) or n_class > MAX_CLASSES:
        raise _damaged(filename, f"num_class is {n_class:,} with {per_iter} trees per iteration")
    sizes = hdr.get("tree_sizes")
    if sizes is not None and len(sizes.split()) != n_trees:
        raise _damaged(filename, f"tree_sizes lists {len(sizes.split())} trees but it holds {n_trees}")
    for t, block in enumerate(blocks):
        lines = block.split("\n")
        first = lines[0].removeprefix("Tree=").strip()
        if _int(first, filename, f"tree {t}'s number") != t:
            raise _damaged(filename, f"tree {t} is numbered {first!r}")
        _check_lightgbm_tree(_kv(lines[1:]), t, max_idx, filename)
    if "pandas_categorical:" in tail:
        check_json_depth(tail.split("pandas_categorical:", 1)[1].encode(), filename)


def _check_lightgbm_tree(kv: dict[str, str], t: int, max_idx: int, filename: str) -> None:
    where = f"tree {t}"
    if "num_leaves" not in kv:
        raise _damaged(filename, f"{where} has no num_leaves")
    n_leaves = _int(kv["num_leaves"], filename, f"{where}'s num_leaves")
    if n_leaves < 1:
        raise _damaged(filename, f"{where} has num_leaves {n_leaves}")
    leaf_value = _floats(kv.get("leaf_value", ""), filename, f"{where}'s leaf_value")
    if len(leaf_value) != n_leaves:
        raise _damaged(filename, f"{where} has num_leaves={n_leaves} but {len(leaf_value)} leaf values")
    for key in ("leaf_weight", "leaf_count"):
        if key in kv and len(kv[key].split()) != n_leaves:
            raise _damaged(filename, f"{where} has num_leaves={n_leaves} but {len(kv[key].split())} {key}")
    if kv.get("is_linear", "0").strip() not in ("0", ""):
        for key in ("leaf_const", "num_features"):
            if key in kv and len(kv[key].split()) != n_leaves:
                raise _damaged(filename, f"{where}'s {key} does not have {n_leaves} entries")
    m = n_leaves - 1
    if m == 0:
        return
    arrays = {}
    for key in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
        if key not in kv:
            raise _damaged(filename, f"{where} has no {key}")
        arrays[key] = (_floats if key == "threshold" else _ints)(kv[key], filename, f"{where}'s {key}")
        if len(arrays[key]) != m:
            raise _damaged(filename, f"{where} has num_leaves={n_leaves}, so {m} {key} entries, but holds "
                                     f"{len(arrays[key])}")
    for key in ("split_gain", "internal_value", "internal_weight", "internal_count"):
        if key in kv and len(kv[key].split()) != m:
            raise _damaged(filename, f"{where} has {m} internal nodes but {len(kv[key].split())} {key}")
    n_cat = _int(kv.get("num_cat", "0"), filename, f"{where}'s num_cat")
    if not 0 <= n_cat <= m:
        raise _damaged(filename, f"{where} has num_cat={n_cat} for {m} internal nodes")
    bounds: list[int] = []
    cat_words = 0
    if n_cat:
        bounds = _ints(kv.get("cat_boundaries", ""), filename, f"{where}'s cat_boundaries")
        cat_words = len(_ints(kv.get("cat_threshold", ""), filename, f"{where}'s cat_threshold"))
        if (len(bounds) != n_cat + 1 or bounds[0] != 0 or bounds[-1] != cat_words
                or any(b < a for a, b in zip(bounds, bounds[1:]))):
            raise _damaged(filename, f"{where}'s cat_boundaries do not index its cat_threshold")
    feat, thr, dec = arrays["split_feature"], arrays["threshold"], arrays["decision_type"]
    left, right = arrays["left_child"], arrays["right_child"]
    seen_node, seen_leaf = bytearray(m), bytearray(n_leaves)
    stack = [0]
    while stack:
        i = stack.pop()
        if seen_node[i]:
            raise _damaged(filename, f"{where}, node {i} is reached twice (a child points back to an ancestor "
                                     "or is shared)")
        seen_node[i] = 1
        if not 0 <= feat[i] <= max_idx:
            raise _damaged(filename, f"{where}, node {i} splits on feature {feat[i]}, outside 0..{max_idx}")
        if not 0 <= dec[i] <= 255:
            raise _damaged(filename, f"{where}, node {i} has decision_type {dec[i]}")
        if dec[i] & 1:                                   # categorical: threshold indexes cat_boundaries
            if thr[i] != int(thr[i]) or not 0 <= thr[i] < n_cat:
                raise _damaged(filename, f"{where}, node {i} is categorical with category set {thr[i]!r}, "
                                         f"outside 0..{n_cat - 1}")
        for side, c in (("left", left[i]), ("right", right[i])):
            if c >= 0:
                if c >= m:
                    raise _damaged(filename, f"{where}, node {i}: {side} child {c} is outside 0..{m - 1}")
                if c == 0 or seen_node[c]:
                    raise _damaged(filename, f"{where}, node {i}: {side} child {c} points back to an ancestor "
                                             "or is shared")
                stack.append(c)
            else:
                leaf = ~c
                if leaf >= n_leaves:
                    raise _damaged(filename, f"{where}, node {i}: {side} child is leaf {leaf}, outside "
                                             f"0..{n_leaves - 1}")
                if seen_leaf[leaf]:
                    raise _damaged(filename, f"{where}, leaf {leaf} is reached twice")
                seen_leaf[leaf] = 1
    if not all(seen_node) or not all(seen_leaf):
        raise _damaged(filename, f"{where}: {m - sum(seen_node)} nodes and {n_leaves - sum(seen_leaf)} leaves "
                                 "are not reached from the root")


# ------------------------------------------------------------------ skops / sklearn
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


def _sklearn_trees(obj: Any, depth: int = 0):
    """Every fitted ``sklearn.tree._tree.Tree`` inside a model (ensembles, pipelines)."""
    import numpy as np

    if depth > 8 or obj is None:
        return
    tree = getattr(obj, "tree_", None)
    if tree is not None and type(tree).__module__.startswith("sklearn.tree"):
        yield obj, tree
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
                yield from _sklearn_trees(it, depth + 1)


def check_sklearn_trees(model: Any, filename: str = "model.skops") -> None:
    """Check the node arrays of every sklearn tree skops rebuilt, before any predict."""
    import numpy as np

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
        tbad = split & ~np.isfinite(thr)
        if tbad.any():
            i = int(np.flatnonzero(tbad)[0])
            raise _damaged(filename, f"{where}, node {i} has the threshold {thr[i]!r}")
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
