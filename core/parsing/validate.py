"""Structural checks of model files before any library reads them.

A library handed a damaged file may crash the process, loop or allocate
gigabytes (see :mod:`core.sandbox`, which contains what these checks miss).
These checks are cheap, linear in the file's size, and run first:

* :func:`check_json_depth`: JSON nested deeper than any model file is refused
  before a recursive parser sees it (100,000 nested brackets crash parsers);
* :func:`check_xgboost_json`: every tree's arrays have the declared length,
  children are in range and each node is reached once from the root (no
  cycle), split features are below ``num_feature``, thresholds are finite,
  ``num_feature`` / ``num_class`` are bounded by what the file holds;
* :func:`lightgbm_text`: line endings normalised (CRLF -> LF) and the
  ``tree_sizes`` index removed, so that LightGBM parses tree by tree instead of
  trusting byte offsets that a Windows checkout or a hand edit has shifted
  (which aborts the process).
"""

from __future__ import annotations

import math
from typing import Any

from core.errors import ModelError

__all__ = ["check_json_depth", "check_xgboost_json", "lightgbm_text", "MAX_JSON_DEPTH", "MAX_FEATURES"]

MAX_JSON_DEPTH = 64          # XGBoost JSON models nest about 8 deep
MAX_FEATURES = 1_000_000     # features a model may declare beyond those it names or splits on


def _damaged(filename: str, what: str) -> ModelError:
    return ModelError(f"{filename!r} is damaged: {what}. Re-save the model from its library "
                      "(Booster.save_model / model.save_model).")


def check_json_depth(data: bytes, filename: str = "model", limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (a linear scan; strings skipped)."""
    depth, in_str, esc = 0, False, False
    opening, closing = ord("{"), ord("}")
    for b in memoryview(data).cast("B"):
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:      # backslash
                esc = True
            elif b == 0x22:      # quote
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b == opening or b == 0x5B:
            depth += 1
            if depth > limit:
                raise _damaged(filename, f"its JSON is nested more than {limit} levels deep")
        elif b == closing or b == 0x5D:
            depth -= 1


def _int(v: Any, filename: str, what: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        raise _damaged(filename, f"{what} is {v!r}, not a whole number") from None


def check_xgboost_json(obj: Any, filename: str = "model.json") -> None:
    """Check an XGBoost JSON model (``json.loads`` of the file) before XGBoost reads it."""
    try:
        learner = obj["learner"]
        mp = learner["learner_model_param"]
        model = learner["gradient_booster"]["model"]
        trees = model["trees"]
    except (KeyError, TypeError):
        if isinstance(obj, dict) and "learner" not in obj:
            return                                 # not an XGBoost model: its reader says what it is
        raise _damaged(filename, "the XGBoost model lacks its learner, booster or trees") from None
    if not isinstance(trees, list):
        raise _damaged(filename, "'trees' is not a list")
    names = learner.get("feature_names") or []
    n_feature = _int(mp.get("num_feature", 0), filename, "num_feature")
    n_class = _int(mp.get("num_class", 0), filename, "num_class")
    max_index = -1
    for t, tree in enumerate(trees):
        if not isinstance(tree, dict):
            raise _damaged(filename, f"tree {t} is not an object")
        try:
            left, right = tree["left_children"], tree["right_children"]
            feat, cond = tree["split_indices"], tree["split_conditions"]
        except KeyError as exc:
            raise _damaged(filename, f"tree {t} has no {exc.args[0]!r}") from None
        n = len(left)
        if not (len(right) == len(feat) == len(cond) == n) or n == 0:
            raise _damaged(filename, f"tree {t}'s node arrays differ in length")
        declared = tree.get("tree_param", {}).get("num_nodes")
        if declared is not None and _int(declared, filename, f"tree {t}'s num_nodes") != n:
            raise _damaged(filename, f"tree {t} declares {declared} nodes and holds {n}")
        seen = bytearray(n)
        stack = [0]
        while stack:
            i = stack.pop()
            if seen[i]:
                raise _damaged(filename, f"tree {t}, node {i} is reached twice (a child points back to an "
                                         "ancestor or is shared)")
            seen[i] = 1
            a, b = left[i], right[i]
            if not isinstance(a, int) or not isinstance(b, int):
                raise _damaged(filename, f"tree {t}, node {i} has a child index that is not a whole number")
            if a == -1 and b == -1:
                if not isinstance(cond[i], (int, float)) or not math.isfinite(cond[i]):
                    raise _damaged(filename, f"tree {t}, leaf {i} has the value {cond[i]!r}")
                continue
            for c in (a, b):
                if not 0 < c < n:
                    raise _damaged(filename, f"tree {t}, node {i} has the child {c}, outside 1..{n - 1}")
            f = feat[i]
            if not isinstance(f, int) or f < 0:
                raise _damaged(filename, f"tree {t}, node {i} splits on feature {f!r}")
            max_index = max(max_index, f)
            if not isinstance(cond[i], (int, float)) or not math.isfinite(cond[i]):
                raise _damaged(filename, f"tree {t}, node {i} has the threshold {cond[i]!r}")
            stack += (a, b)
    if max_index >= n_feature:
        raise _damaged(filename, f"a split uses feature {max_index} but num_feature is {n_feature}")
    if n_feature > max(len(names), max_index + 1) + MAX_FEATURES:
        raise _damaged(filename, f"num_feature is {n_feature:,}, far more than the {max_index + 1} features its "
                                 "trees use")
    if n_class > max(len(trees), 2):
        raise _damaged(filename, f"num_class is {n_class:,} but it holds only {len(trees)} trees")


def lightgbm_text(data: bytes, filename: str = "model.txt") -> str:
    """LightGBM model text ready for ``lgb.Booster(model_str=...)`` (see the module docstring)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(filename, "it is not UTF-8 text") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line for line in text.split("\n") if not line.startswith("tree_sizes="))
