"""LightGBM boosters from their JSON dump (``Booster.dump_model``).

LightGBM compares in double precision: left iff ``x <= threshold``, which is
our rule, with one twist: its predictor reads dense rows as sparse ones and
treats every ``|x| <= kZeroThreshold`` (1e-35f) as exactly 0, so thresholds
inside that zone are moved to the bound the zone implies (:func:`_zero_zone`). Categorical splits, linear trees and links other than
sigmoid/softmax/identity are refused; ``missing_type == "Zero"`` is accepted
only where sending zero the default way agrees with the threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.ensemble import TreeEnsemble
from core.errors import UnsupportedModelError
from core.parsing import build_tree

KZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold, a float widened to double


def _zero_zone(t: float) -> float:
    """Threshold T with ``x <= T  <=>  z(x) <= t``, z mapping ``|x| <= KZERO`` to 0."""
    if -KZERO <= t < 0:
        return float(np.nextafter(-KZERO, -np.inf))
    if 0 <= t < KZERO:
        return KZERO
    return t


_IDENTITY = {"regression", "regression_l1", "huber", "fair", "quantile", "mape"}


def parse_lightgbm(model: Any) -> TreeEnsemble:
    import lightgbm as lgb

    if isinstance(model, lgb.Booster):
        booster, wrapper = model, None
    elif hasattr(model, "booster_"):
        try:
            booster = model.booster_
        except Exception as exc:  # sklearn's NotFittedError
            raise UnsupportedModelError(f"The {type(model).__name__} is not fitted: {exc}") from None
        wrapper = model
    else:
        from core.ensemble import describe_unsupported
        raise describe_unsupported(model)

    dump = booster.dump_model()
    obj = str(dump.get("objective", "")).split()
    kind = obj[0] if obj else ""
    params = dict(p.split(":", 1) for p in obj[1:] if ":" in p)
    k = int(dump.get("num_tree_per_iteration", 1))
    if kind == "binary":
        task, link, n_out, classes = "classification", "sigmoid", 1, np.arange(2)
    elif kind in ("multiclass", "softmax"):
        task, link, n_out, classes = "classification", "softmax", k, np.arange(k)
    elif kind in _IDENTITY:
        task, link, n_out, classes = "regression", "identity", 1, None
    else:
        raise UnsupportedModelError(
            f"LightGBM objective '{kind or 'custom'}' is not supported; supported: binary, "
            f"multiclass, {', '.join(sorted(_IDENTITY))}."
        )
    if any(ti.get("tree_structure", {}).get("is_linear") or "leaf_coeff" in ti.get("tree_structure", {})
           for ti in dump["tree_info"]) or dump.get("is_linear"):
        raise UnsupportedModelError("LightGBM linear trees are not supported.")
    # boosting="rf" averages over iterations instead of summing
    n_iter = max(1, len(dump["tree_info"]) // max(1, k))
    factor = 1.0 / n_iter if dump.get("average_output", False) else 1.0
    trees = [build_tree(_flatten(ti["tree_structure"], ti["tree_index"] % k if n_out > 1 else 0,
                                 n_out, factor), n_out)
             for ti in dump["tree_info"]]
    names = list(dump.get("feature_names") or [])
    if wrapper is not None and getattr(wrapper, "feature_names_in_", None) is not None:
        names = [str(n) for n in wrapper.feature_names_in_]
    d = int(dump["max_feature_idx"]) + 1
    if len(names) != d:
        names = [f"Column_{i}" for i in range(d)]
    if wrapper is not None and task == "classification":
        classes = np.asarray(wrapper.classes_)
    return TreeEnsemble(tuple(trees), n_features=d, feature_names=tuple(names), task=task,
                        aggregation="sum", link=link,
                        base_score=np.zeros(n_out), classes=classes,
                        sigmoid_scale=float(params.get("sigmoid", 1.0)),
                        source=f"lightgbm.{type(model).__name__}")


def _flatten(root: dict, out_index: int, n_out: int, factor: float) -> list[dict]:
    nodes: list[dict] = []

    def visit(nd: dict) -> int:
        i = len(nodes)
        nodes.append({})
        if "leaf_value" in nd:
            v = np.zeros(n_out)
            v[out_index] = float(nd["leaf_value"]) * factor
            nodes[i] = {"value": v}
            return i
        if nd.get("decision_type", "<=") != "<=":
            raise UnsupportedModelError(
                "This LightGBM model has categorical splits, which are not supported; "
                "one-hot encode categorical features (or pass them as numbers) and retrain."
            )
        t = _zero_zone(float(nd["threshold"]))
        if nd.get("missing_type") == "Zero" and bool(nd.get("default_left")) != (0.0 <= t):
            raise UnsupportedModelError(
                "This LightGBM model treats zero as missing (zero_as_missing) in a way no threshold "
                "reproduces; retrain with zero_as_missing=False."
            )
        l = visit(nd["left_child"])
        r = visit(nd["right_child"])
        nodes[i] = {"feature": int(nd["split_feature"]), "threshold": t, "left": l, "right": r}
        return i

    visit(root)
    return nodes
