"""LightGBM boosters from their JSON dump (``Booster.dump_model``).

LightGBM compares in double precision: left iff ``x <= threshold``, which is
our rule, with one twist: its predictor reads dense rows as sparse ones and
treats every ``|x| <= kZeroThreshold`` (1e-35f) as exactly 0, so thresholds
inside that zone are moved to the bound the zone implies (:func:`_zero_zone`).
Linear trees and links other than sigmoid/softmax/identity are refused;
``missing_type == "Zero"`` is accepted only where sending zero the default way
agrees with the threshold. A threshold of ``inf`` (written 1e300 in the dump),
which LightGBM learns on data with missing values to send every number left and
NaN to its default side, is a split on missing values only
(:data:`core.model.tree.MISSING_ONLY`).

Categorical splits (``decision_type "=="``; LightGBM's ``CategoricalDecision``
in ``include/LightGBM/tree.h``): the integer category value goes left iff it
is in the node's bitset (the dump lists those values, ``"1||4||7"``); NaN,
negative values and values outside the bitset go right. A feature is
categorical when LightGBM recorded its category values (``feature_infos``).
Its categories are the model's own: for a model fitted on pandas ``category``
columns, ``pandas_categorical`` (category value -> its index, which is the
integer LightGBM saw, and our code); otherwise the integers ``0..max`` seen in
training, given as numbers. Missing and unseen values get the missing code
(``TreeEnsemble.missing_code``), which is in no bitset: they go right, as in
LightGBM (pandas maps an unseen category to NaN).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.intake.parsing.common import build_tree, describe_unsupported
from core.model.ensemble import Link, Task, TreeEnsemble
from core.model.tree import MISSING_ONLY
from core.typing import ModelLike

KZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold, a float widened to double


def _zero_zone(t: float) -> float:
    """Threshold T with ``x <= T  <=>  z(x) <= t``, z mapping ``|x| <= KZERO`` to 0."""
    if -KZERO <= t < 0:
        return float(np.nextafter(-KZERO, -np.inf))
    if 0 <= t < KZERO:
        return KZERO
    return t


_IDENTITY = {"regression", "regression_l1", "huber", "fair", "quantile", "mape"}


class _Objective(NamedTuple):
    """What the dump's objective line says of the model's outputs."""

    kind: str
    params: dict[str, str]
    task: Task
    link: Link
    n_out: int
    classes: np.ndarray | None
    per_iter: int


def parse_lightgbm(model: ModelLike) -> TreeEnsemble:
    booster, wrapper = _booster_of(model)
    dump = _dump_of(booster)
    obj = _objective(dump)
    k = obj.per_iter
    _check_outputs(obj.kind, obj.params, k, int(dump.get("num_class", 1)))
    _refuse_linear(dump)
    # boosting="rf" averages over iterations instead of summing
    n_iter = max(1, len(dump["tree_info"]) // max(1, k))
    factor = 1.0 / n_iter if dump.get("average_output", False) else 1.0
    names = list(dump.get("feature_names") or [])
    d = int(dump["max_feature_idx"]) + 1
    categories, meta = _categories(dump, booster, names, d)
    n_codes = max((len(c) + 1 for c in categories if c is not None), default=None)
    n_out = obj.n_out
    trees = [build_tree(_flatten(ti["tree_structure"], ti["tree_index"] % k if n_out > 1 else 0,
                                 n_out, factor, categories), n_out, n_codes, routes_missing=True)
             for ti in dump["tree_info"]]
    names = _feature_names(wrapper, names, d)
    classes = _classes(model, wrapper, obj)
    return TreeEnsemble(tuple(trees), n_features=d, feature_names=tuple(names), task=obj.task,
                        aggregation="sum", link=obj.link,
                        base_score=np.zeros(n_out), classes=classes,
                        sigmoid_scale=float(obj.params.get("sigmoid", 1.0)),
                        source=f"lightgbm.{type(model).__name__}", meta=meta,
                        categories=tuple(categories) if any(c is not None for c in categories) else ())


def _booster_of(model: ModelLike) -> tuple[Any, Any]:
    """The model's booster, and the scikit-learn wrapper it came in (None for a bare Booster)."""
    import lightgbm as lgb  # optional and heavy: imported only when a LightGBM model arrives

    if isinstance(model, lgb.Booster):
        return model, None
    if not hasattr(model, "booster_"):
        raise describe_unsupported(model)
    try:
        booster = model.booster_
    except Exception as exc:  # sklearn's NotFittedError
        raise UnsupportedModelError(f"The {type(model).__name__} is not fitted: {exc}") from None
    return booster, model


def _dump_of(booster: Any) -> dict[str, Any]:
    try:
        dump: dict[str, Any] = booster.dump_model()
    except ValueError as exc:     # JSONDecodeError: LightGBM wrote a dump its own reader refuses
        raise ModelError(f"LightGBM cannot describe this model's trees ({str(exc)[:120]}): the model is damaged. "
                         "Re-save it from LightGBM.") from None
    return dump


def _objective(dump: dict[str, Any]) -> _Objective:
    """The task, link and outputs of the dump's objective; refuses flags that change the output."""
    obj = str(dump.get("objective", "")).split()
    kind = obj[0] if obj else ""
    _refuse_flags(obj)
    params = dict(p.split(":", 1) for p in obj[1:] if ":" in p)
    k = int(dump.get("num_tree_per_iteration", 1))
    if kind == "binary":
        return _Objective(kind, params, "classification", "sigmoid", 1, np.arange(2), k)
    if kind in ("multiclass", "softmax"):
        return _Objective(kind, params, "classification", "softmax", k, np.arange(k), k)
    if kind in _IDENTITY:
        return _Objective(kind, params, "regression", "identity", 1, None, k)
    raise UnsupportedModelError(
        f"LightGBM objective '{kind or 'custom'}' is not supported; supported: binary, "
        f"multiclass, {', '.join(sorted(_IDENTITY))}."
    )


def _refuse_flags(obj: list[str]) -> None:
    """Refuses the objective's bare flags (words without ``:``): each changes what the trees' sum means."""
    flags = [t for t in obj[1:] if ":" not in t]
    if "sqrt" in flags:
        raise UnsupportedModelError("This LightGBM model was trained with reg_sqrt=True: its predictions are the "
                                    "square of the trees' sum, which the analyses cannot read exactly yet. Retrain "
                                    "without reg_sqrt (or transform the target yourself) and upload again.")
    if flags:
        raise UnsupportedModelError(f"LightGBM objective '{' '.join(obj)}' changes the trees' output in a way "
                                    f"('{flags[0]}') the analyses do not read; retrain without it.")


def _refuse_linear(dump: dict[str, Any]) -> None:
    if any(ti.get("tree_structure", {}).get("is_linear") or "leaf_coeff" in ti.get("tree_structure", {})
           for ti in dump["tree_info"]) or dump.get("is_linear"):
        raise UnsupportedModelError("LightGBM linear trees are not supported.")


def _feature_names(wrapper: Any, names: list[str], d: int) -> list[str]:
    """The wrapper's fitted column names, else the dump's, else LightGBM's default ``Column_i``."""
    if wrapper is not None and getattr(wrapper, "feature_names_in_", None) is not None:
        names = [str(n) for n in wrapper.feature_names_in_]
    if len(names) != d:
        names = [f"Column_{i}" for i in range(d)]
    return names


def _classes(model: ModelLike, wrapper: Any, obj: _Objective) -> np.ndarray | None:
    """The wrapper's class labels (checked against the booster's outputs), else the objective's."""
    if wrapper is None or obj.task != "classification":
        return obj.classes
    classes = np.asarray(wrapper.classes_)
    n_out = obj.n_out
    if len(classes) != max(n_out, 2):
        raise UnsupportedModelError(f"This {type(model).__name__} names {len(classes)} classes but its booster "
                                    f"has {n_out} output{'s' if n_out > 1 else ''} ({obj.kind}); the file is damaged "
                                    "or was edited: re-fit and save the model.")
    return classes


def _check_outputs(kind: str, params: dict[str, str], per_iter: int, n_class: int) -> None:
    """LightGBM's own reading of the header against its objective (the text checks in
    :mod:`core.intake.parsing.lightgbmcheck` refuse the same before LightGBM reads a
    file; this covers a booster handed over in memory): one tree per class and
    iteration, and the objective's number of classes."""
    want = params.get("num_class") if kind in ("multiclass", "softmax", "multiclassova") else "1"
    if per_iter != n_class or str(want).strip() != str(n_class):
        raise UnsupportedModelError(
            f"This LightGBM model's num_class ({n_class}), trees per iteration ({per_iter}) and objective "
            f"('{kind}' with num_class {want}) disagree; LightGBM would predict with the wrong number of outputs. "
            "The file is damaged or was edited: re-save the model from LightGBM.")


def _categories(dump: dict[str, Any], booster: Any, names: list[str],
                d: int) -> tuple[list[tuple[Any, ...] | None], dict[str, Any]]:
    """Per feature None or its category values, and the ensemble's meta."""
    infos = dump.get("feature_infos") or {}
    is_cat = _categorical_features(infos, names, d)
    if not any(is_cat):
        return [None] * d, {}
    pandas_cats = getattr(booster, "pandas_categorical", None) or []
    cat_idx = [j for j in range(d) if is_cat[j]]
    out: list[tuple[Any, ...] | None] = [None] * d
    if pandas_cats and len(pandas_cats) != len(cat_idx):
        # A category column LightGBM never split on (one value in every row) has no values in
        # ``feature_infos`` ("none") but its categories in ``pandas_categorical``: the columns
        # come from the categorical features the model declares.
        declared = _declared_categorical(booster, names, d)
        if len(declared) == len(pandas_cats) and set(cat_idx) <= set(declared):
            cat_idx = declared
    if pandas_cats and len(pandas_cats) == len(cat_idx):
        for j, cats in zip(cat_idx, pandas_cats):
            out[j] = tuple(cats)
        return out, {"input": "frame"}
    for j in cat_idx:                 # integer categories given as numbers
        top = int(infos[names[j]].get("max_value", -1))
        out[j] = tuple(range(max(top, 0) + 1))
    return out, {"input": "array", "categories": "integer values as fitted (no pandas categories saved)"}


def _declared_categorical(booster: Any, names: list[str], d: int) -> list[int]:
    """The indices of the features the model was told are categorical (its ``categorical_feature``
    parameter: in ``params`` for a booster read from a file, else in its text), sorted; [] when unknown."""
    value = (getattr(booster, "params", None) or {}).get("categorical_feature")
    if value is None:
        try:
            text = booster.model_to_string()
        except Exception:  # noqa: BLE001 - a booster that cannot write itself declares nothing here
            return []
        start = text.find("[categorical_feature: ")
        if start < 0:
            return []
        value = text[start + len("[categorical_feature: "):text.find("]", start)].split(",")
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out = set()
    for item in items:
        item = str(item).strip()
        if item.lstrip("-").isdigit():
            out.add(int(item))
        elif item in names:
            out.add(names.index(item))
        elif item:
            return []
    return sorted(j for j in out if 0 <= j < d)


def _categorical_features(infos: dict[str, Any], names: list[str], d: int) -> list[bool]:
    """Per feature whether LightGBM recorded its category values (``feature_infos``)."""
    is_cat = [bool(infos.get(n, {}).get("values")) if n in infos else False for n in names[:d]]
    return is_cat + [False] * (d - len(is_cat))


def _flatten(root: dict[str, Any], out_index: int, n_out: int, factor: float,
             categories: list[Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []

    def visit(nd: dict[str, Any]) -> int:
        i = len(nodes)
        nodes.append({})
        if "leaf_value" in nd:
            v = np.zeros(n_out)
            v[out_index] = float(nd["leaf_value"]) * factor
            nodes[i] = {"value": v}
            return i
        kind = nd.get("decision_type", "<=")
        if kind == "==":
            j = int(nd["split_feature"])
            cats = categories[j] if j < len(categories) else None
            if cats is None:
                raise UnsupportedModelError(f"This LightGBM model splits feature {j} by category but did not "
                                            "record its categories; re-save it with LightGBM 3 or later.")
            left = sorted({int(v) for v in str(nd["threshold"]).split("||") if v.strip()})
            l = visit(nd["left_child"])
            r = visit(nd["right_child"])
            nodes[i] = {"feature": j, "categories_left": [c for c in left if 0 <= c < len(cats)],
                        "left": l, "right": r}
            return i
        if kind != "<=":
            raise UnsupportedModelError(f"LightGBM decision type {kind!r} is not supported.")
        t = _zero_zone(float(nd["threshold"]))
        if t >= 1e300:          # LightGBM's inf (dump_model writes 1e300): every number left, NaN to its side
            t = MISSING_ONLY
        if nd.get("missing_type") == "Zero" and bool(nd.get("default_left")) != (0.0 <= t):
            raise UnsupportedModelError(
                "This LightGBM model treats zero as missing (zero_as_missing) in a way no threshold "
                "reproduces; retrain with zero_as_missing=False."
            )
        l = visit(nd["left_child"])
        r = visit(nd["right_child"])
        # NaN: the default child (missing_type NaN or Zero), or read as 0.0 (missing_type None)
        miss = bool(nd.get("default_left")) if nd.get("missing_type") in ("NaN", "Zero") else bool(0.0 <= t)
        nodes[i] = {"feature": int(nd["split_feature"]), "threshold": t, "left": l, "right": r,
                    "missing_left": miss}
        return i

    visit(root)
    return nodes
