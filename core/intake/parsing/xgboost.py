"""XGBoost boosters (gbtree) from their JSON model dump.

XGBoost stores X as float32 and sends a sample left ("yes") iff
``float32(x) < t`` with a float32 ``t``; that is ``float32(x) <= prev32(t)``,
converted to a float64 bound by :func:`core.model.tree.float32_le_bound`.
DART, gblinear and multi-target trees are refused.

Categorical splits (``enable_categorical``; ``split_type`` 1, both one-hot and
partition-based; XGBoost's ``common::Decision`` in ``src/common/categorical.h``
and ``GetNextNode`` in ``src/predictor/predict_fn.h``): a node lists the
category codes in ``categories[categories_segments[k]:+categories_sizes[k]]``
for ``categories_nodes[k]``; a listed code goes *right*, any other valid code
left, and a missing value to the node's default child. The categories are the
model's own (``gradient_booster.model.cats``, saved since XGBoost 3.1: strings
as UTF-8 bytes with offsets, or numbers); XGBoost re-codes a DataFrame's
categories by value and sends an unseen category the way of a missing value,
which is our missing code (:mod:`core.model`).

A model without saved categories (fitted on an array of codes, or on a
DataFrame by XGBoost before 3.1) takes the codes themselves: its categories
are the codes ``0..max`` its splits name, then
:data:`core.model.categorical.OTHER_CODE`. XGBoost
reads a number as the code ``int(x)`` and sends a code no split lists (above
``max``, negative: ``InvalidCat``) *left* at every categorical split, unlike a
missing value, which takes the node's default; that last level stands for all
of them (``meta["open_codes"]``: ``[feature, stand-in code]`` pairs, the code
given to the library for it). :func:`core.intake.matching.match_open_codes` reads the
data's values onto these levels; :func:`drop_other_code` removes the level
when the data holds no such value.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np

from core.errors import ModelError, UnsupportedModelError, need
from core.intake.parsing.common import build_tree, describe_unsupported, drop_last_level
from core.model.categorical import OTHER_CODE
from core.model.ensemble import Link, Task, TreeEnsemble
from core.model.tree import Tree, float32_le_bound
from core.typing import ModelLike

__all__ = ["parse_xgboost", "drop_other_code"]

_CLASSIF: dict[str, Link] = {"binary:logistic": "sigmoid", "multi:softprob": "softmax", "multi:softmax": "softmax"}
_REGRESS = {"reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror", "reg:linear"}


def _parse_floats(s: Any) -> np.ndarray:
    if isinstance(s, (int, float)):
        return np.array([float(s)])
    s = str(s).strip().strip("[]")
    return np.array([float(v) for v in s.split(",") if v.strip()])


def parse_xgboost(model: ModelLike) -> TreeEnsemble:
    booster, wrapper = _booster(model)
    cfg = _learner(booster)
    objective = cfg["objective"]["name"]
    gb = cfg["gradient_booster"]
    mp = cfg["learner_model_param"]
    _check_booster(gb, mp)
    n_class = int(mp.get("num_class", "0"))
    d = int(mp["num_feature"])
    task, link, n_out, classes, base = _objective(objective, mp, n_class)

    model_json = gb["model"]
    trees_json = model_json["trees"]
    tree_info = model_json["tree_info"]
    meta: dict[str, Any] = {"objective": objective}
    best_trees = _trees_used(wrapper, booster, gb, n_out, meta)
    n_trees = len(trees_json) if best_trees is None else best_trees
    categories = _categories(model_json, cfg.get("feature_types") or [], d, trees_json[:n_trees])
    n_codes = max((len(c) + 1 for c in categories if c is not None), default=None)
    if n_codes is not None:
        meta.update(_category_meta(categories))
    trees = [_tree(tj, grp, n_out, categories, n_codes)
             for tj, grp in zip(trees_json[:n_trees], tree_info[:n_trees])]
    names = _feature_names(cfg, wrapper, d)
    source = f"xgboost.{type(model).__name__}"
    if task == "classification":
        classes = _wrapper_classes(wrapper, classes)
    return TreeEnsemble(tuple(trees), n_features=d, feature_names=tuple(names), task=task,
                        aggregation="sum", link=link, base_score=base, classes=classes,
                        source=source, meta=meta,
                        categories=tuple(categories) if n_codes is not None else ())


def _wrapper_classes(wrapper: Any, classes: np.ndarray | None) -> np.ndarray | None:
    """A classifier's class labels: the wrapper's if it has them, else the objective's."""
    if wrapper is not None and hasattr(wrapper, "classes_"):
        return np.asarray(wrapper.classes_)
    return classes


def _learner(booster: Any) -> dict[str, Any]:
    """The ``learner`` object of the booster's own JSON."""
    try:
        cfg: dict[str, Any] = json.loads(bytes(booster.save_raw("json")))["learner"]
    except Exception as exc:  # noqa: BLE001 - XGBoostError: a model it read but cannot write out
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ModelError(f"XGBoost cannot write this model out as JSON ({first}): it is damaged. Re-save the "
                         "model from XGBoost.") from None
    return cfg


def _check_booster(gb: dict[str, Any], mp: dict[str, Any]) -> None:
    """Only single-target gbtree boosters."""
    if gb.get("name") != "gbtree":
        raise UnsupportedModelError(
            f"XGBoost booster '{gb.get('name')}' is not supported; only 'gbtree' (not dart or gblinear)."
        )
    if int(mp.get("num_target", "1")) > 1:
        raise UnsupportedModelError("Multi-target XGBoost models are not supported.")


def _trees_used(wrapper: Any, booster: Any, gb: dict[str, Any], n_out: int, meta: dict[str, Any]) -> int | None:
    """The number of trees up to the wrapper's best iteration (early stopping, which its
    ``predict`` stops at; noted in ``meta``), or None: all of them."""
    if wrapper is None:
        return None
    best = getattr(wrapper, "best_iteration", None) if _has_best(booster) else None
    if best is None:
        return None
    per_iter = int(gb["model"]["gbtree_model_param"].get("num_parallel_tree", "1")) * max(1, n_out)
    meta["iteration_range"] = (0, int(best) + 1)
    return (int(best) + 1) * per_iter


def _category_meta(categories: list[Any]) -> dict[str, Any]:
    """The ensemble's input kind, and its open-code levels (categories not saved with the model)."""
    meta: dict[str, Any] = {}
    open_codes = [[j, len(c) - 1] for j, c in enumerate(categories) if c is not None and c[-1] == OTHER_CODE]
    saved = len(open_codes) < sum(c is not None for c in categories)
    meta["input"] = "frame" if saved else "array"   # saved categories: XGBoost re-codes a frame by value
    if open_codes:
        meta["open_codes"] = open_codes
    return meta


def _feature_names(cfg: dict[str, Any], wrapper: Any, d: int) -> list[Any]:
    """The wrapper's fitted column names, else the model's, else XGBoost's default ``f<i>``."""
    names = cfg.get("feature_names") or []
    if wrapper is not None and getattr(wrapper, "feature_names_in_", None) is not None:
        names = list(wrapper.feature_names_in_)
    if len(names) != d:
        names = [f"f{i}" for i in range(d)]
    return names


def _booster(model: ModelLike) -> tuple[Any, Any]:
    """The model's Booster, and the scikit-learn wrapper it came from (or None)."""
    xgb = need("xgboost", "reading an XGBoost model")  # optional and heavy: only when one arrives

    if isinstance(model, xgb.Booster):
        return model, None
    if hasattr(model, "get_booster"):
        try:
            booster = model.get_booster()
        except Exception as exc:  # xgboost raises NotFittedError (a ValueError) or XGBoostError
            raise UnsupportedModelError(f"The {type(model).__name__} is not fitted: {exc}") from None
        return booster, model
    raise describe_unsupported(model)


def _objective(objective: str, mp: dict[str, Any],
               n_class: int) -> tuple[Task, Link, int, np.ndarray | None, np.ndarray]:
    """``(task, link, n_outputs, classes, base_score)`` of an objective, the base
    score (``learner_model_param``'s) as a margin."""
    base = _parse_floats(mp["base_score"])
    task: Task
    link: Link
    if objective in _CLASSIF:
        link = _CLASSIF[objective]
        n_out = 1 if link == "sigmoid" else n_class
        if link == "sigmoid":       # a probability, turned into a margin as XGBoost does (ProbToMargin)
            p = float(base[0])
            if not 0 < p < 1:
                raise ModelError(f"This XGBoost model's base_score is {p!r}, but binary:logistic takes a "
                                 "probability strictly between 0 and 1. The file was edited or is damaged; re-save "
                                 "the model from XGBoost.")
            base = np.array([-np.log(1.0 / p - 1.0)])
        task = "classification"
        classes = np.arange(2 if link == "sigmoid" else n_class)
    elif objective in _REGRESS:
        link, n_out, task, classes = "identity", 1, "regression", None
    else:
        raise UnsupportedModelError(
            f"XGBoost objective '{objective}' is not supported; supported: "
            f"{', '.join(sorted(_CLASSIF) + sorted(_REGRESS))}."
        )
    if base.size == 1 and n_out > 1:
        base = np.full(n_out, base[0])
    if base.size != n_out:
        raise UnsupportedModelError(f"Unexpected XGBoost base_score {mp['base_score']!r} for {n_out} outputs.")
    return task, link, n_out, classes, base


def _tree(tj: dict[str, Any], grp: Any, n_out: int, categories: list[Any], n_codes: int | None) -> Tree:
    """One tree of the JSON dump, its leaf values on output ``grp``."""
    right_sets = _right_sets(tj)
    if int(tj["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise UnsupportedModelError("XGBoost vector-leaf trees are not supported.")
    left, right = tj["left_children"], tj["right_children"]
    feat, cond = tj["split_indices"], tj["split_conditions"]
    _check_finite(tj, left, cond)
    thr = float32_le_bound(np.nextafter(np.asarray(cond, dtype=np.float32), np.float32(-np.inf)))
    nodes: list[dict[str, Any]] = []
    for i in range(len(left)):
        if left[i] == -1:
            v = np.zeros(n_out)
            v[int(grp) if n_out > 1 else 0] = float(np.float32(cond[i]))
            nodes.append({"value": v})
        elif i in right_sets:
            nodes.append(_categorical_node(tj, i, categories, right_sets[i]))
        else:                         # a missing value takes the node's default child
            nodes.append({"feature": int(feat[i]), "threshold": float(thr[i]),
                          "left": int(left[i]), "right": int(right[i]),
                          "missing_left": bool(tj.get("default_left", [0] * len(left))[i])})
    return build_tree(nodes, n_out, n_codes, routes_missing=True)


def _check_finite(tj: dict[str, Any], left: list[Any], cond: list[Any]) -> None:
    """Every split and leaf value finite: an infinite one would be read as the largest float32."""
    raw = np.asarray(cond, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(raw))
    if bad.size:
        i = int(bad[0])
        what = f"leaf {i} has the value" if left[i] == -1 else f"node {i} has the threshold"
        raise ModelError(f"This XGBoost model is damaged: tree {tj.get('id', '?')}, {what} {raw[i]}. Re-save the "
                         "model from XGBoost.")


def _categorical_node(tj: dict[str, Any], i: int, categories: list[Any], go_right: set[int]) -> dict[str, Any]:
    """Node ``i``'s categorical split: every code not in ``go_right`` goes left, the missing code too
    if the node's default is left."""
    left, right = tj["left_children"], tj["right_children"]
    j = int(tj["split_indices"][i])
    cats = categories[j] if j < len(categories) else None
    if cats is None:
        raise UnsupportedModelError(f"This XGBoost model splits feature {j} by category but does not "
                                    "mark it categorical; re-save it with XGBoost 1.6 or later.")
    default_left = bool(tj.get("default_left", [0] * len(left))[i])
    return {"feature": j, "left": int(left[i]), "right": int(right[i]),
            "categories_left": [c for c in range(len(cats)) if c not in go_right]
            + ([len(cats)] if default_left else [])}


def _right_sets(tree: dict[str, Any]) -> dict[int, set[int]]:
    """Node -> the category codes its categorical split sends right."""
    types = tree.get("split_type", [])
    if not any(int(t) != 0 for t in types):
        return {}
    cats = tree.get("categories", [])
    out = {int(n): {int(c) for c in cats[int(s):int(s) + int(z)]}
           for n, s, z in zip(tree.get("categories_nodes", []), tree.get("categories_segments", []),
                              tree.get("categories_sizes", []))}
    for i, t in enumerate(types):
        if int(t) != 0 and tree["left_children"][i] != -1:
            out.setdefault(i, set())
    return out


def _categories(model_json: dict[str, Any], types: list[Any], d: int, trees: list[Any]) -> list[Any]:
    """Per feature None or its categories: the saved ones (strings or numbers, in
    code order), else the codes ``0..max`` named by the splits and :data:`OTHER_CODE`."""
    out: list[Any] = [None] * d
    enc = (model_json.get("cats") or {}).get("enc") or []
    for j in range(d):
        if j < len(types) and types[j] == "c":
            out[j] = _saved_levels(_encoding(enc, j))
    for j, top in _top_codes(trees).items():
        if 0 <= j < d and out[j] is None:
            out[j] = tuple(range(top + 1)) + (OTHER_CODE,)
    return out


def _encoding(enc: list[Any], j: int) -> dict[str, Any]:
    """Feature ``j``'s entry of the saved categories (empty if there is none)."""
    return enc[j] if j < len(enc) and isinstance(enc[j], dict) else {}


def _saved_levels(e: dict[str, Any]) -> tuple[Any, ...] | None:
    """A categorical feature's saved categories: UTF-8 strings cut at their offsets, or numbers; None if not saved."""
    if e.get("offsets"):
        raw, off = bytes(int(v) for v in e["values"]), [int(o) for o in e["offsets"]]
        return tuple(raw[a:b].decode("utf-8", "replace") for a, b in zip(off, off[1:]))
    if e.get("values"):
        return tuple(int(v) if float(v).is_integer() else float(v) for v in e["values"])
    return None


def _top_codes(trees: list[Any]) -> dict[int, int]:
    """Per feature split by category, the largest code any split lists (-1 if none)."""
    used: dict[int, int] = {}
    for tj in trees:
        for i, codes in _right_sets(tj).items():
            j = int(tj["split_indices"][i])
            used[j] = max(used.get(j, -1), max(codes, default=-1))
    return used


def drop_other_code(ens: TreeEnsemble, features: list[int]) -> TreeEnsemble:
    """The ensemble without the :data:`OTHER_CODE` level (the last) of each of
    ``features``: the missing code moves down into its place and keeps its own
    route at every split, so every remaining code and the missing value are
    predicted as before; the level is no longer offered."""
    if not features:
        return ens
    ens = drop_last_level(ens, features, "missing")
    meta = {**ens.meta, "open_codes": [p for p in ens.meta.get("open_codes", []) if p[0] not in features]}
    if not meta["open_codes"]:
        del meta["open_codes"]
    return replace(ens, meta=meta)


def _has_best(booster: Any) -> bool:
    return booster.attr("best_iteration") is not None
