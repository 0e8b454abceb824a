"""CatBoost models from CatBoost's own JSON export (``save_model(format="json")``).

No runtime dependency on ``catboost``: the JSON is read as it is documented by
CatBoost's exporter (``catboost/libs/model/model_export/json_model_helpers.cpp``)
and its Python export's applier, which this module follows:

* **Oblivious trees** (``oblivious_trees``): a tree of depth ``D`` has splits
  ``s_0 .. s_{D-1}``; a row's leaf is ``sum_d b_d << d`` with ``b_d = 1`` when
  split ``s_d`` holds. ``leaf_values`` are leaf-major (``dimension`` values per
  leaf). Non-symmetric trees (``trees``; Depthwise / Lossguide) are nested
  ``{"split", "left", "right"}`` / ``{"value"}`` nodes, ``right`` when the split
  holds. The raw score is ``scale * sum + bias`` (``scale_and_bias``).
* **Float splits** hold when ``float32(x) > border`` (borders are float32):
  our ``x <= T`` with ``T`` from :func:`core.model.tree.float32_le_bound`.
* **One-hot categorical splits** (``OneHotFeature``) hold when the category's
  hash equals ``value`` (:mod:`core.intake.parsing.cityhash`). A categorical feature's
  categories here are the values its splits name, then ``"(any other value)"``
  for every value no split names (all of them go the same way everywhere).
  Names come from the export's ``cat_features_hash`` (``save_model(...,
  pool=...)``); without it a level is ``"#<hash>"`` until the workspace finds
  the data's value with that hash. Missing values route as "any other value".
* **CTR features** (``OnlineCtr``: target statistics of categories, combinations
  of categories) are refused, naming the features; so are text and embedding
  features and losses whose link is not sigmoid, softmax or identity.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from core.errors import AtlasError, ModelError, UnsupportedModelError
from core.intake.parsing.catboostcheck import check_catboost_json
from core.intake.parsing.cityhash import cat_feature_hash
from core.intake.parsing.common import build_tree, drop_last_level
from core.intake.parsing.filecheck import load_json
from core.model.ensemble import Link, Task, TreeEnsemble
from core.model.tree import Tree, float32_le_bound
from core.typing import ModelLike

if TYPE_CHECKING:
    import pandas as pd

OTHER = "(any other value)"
_SIGMOID = {"Logloss", "CrossEntropy"}
_SOFTMAX = {"MultiClass"}
_IDENTITY = {"RMSE", "MAE", "Quantile", "MAPE", "Huber", "Lq", "Expectile", "LogLinQuantile", "SurvivalAft"}


@dataclass(frozen=True)
class CatBoostJSON:
    """A CatBoost model read from its JSON export; ``native`` is CatBoost's own model
    object when the ``catboost`` package is installed (for the parity checks), else None."""

    document: dict[str, Any] = field(repr=False)
    native: Any = field(default=None, repr=False, compare=False)

    def raw_scores(self, frame: pd.DataFrame) -> np.ndarray:
        """Raw formula values (n, dimension) of rows in the raw columns, by CatBoost's
        own model (when installed) or by applying the JSON document as CatBoost's
        Python export does: an applier independent of the parsed trees."""
        if self.native is not None:
            return self._native(frame, "RawFormulaVal")
        return apply_document(self.document, frame)

    def probabilities(self, frame: pd.DataFrame) -> np.ndarray | None:
        """CatBoost's own class probabilities (n, classes) of rows in the raw columns
        (its loss and class parameters applied to the raw values), or None without the
        ``catboost`` package."""
        return None if self.native is None else self._native(frame, "Probability")

    def _native(self, frame: pd.DataFrame, kind: str) -> np.ndarray:
        try:
            out = self.native.predict(frame, prediction_type=kind)
        except Exception as exc:  # noqa: BLE001 - CatBoostError: the model it read cannot predict
            raise ModelError(f"CatBoost itself cannot predict with this model ({_first_line(exc)}): the file is "
                             "damaged or was edited. Export it again with model.save_model(path, "
                             "format='json').") from None
        return np.asarray(out, dtype=np.float64).reshape(len(frame), -1)


def _first_line(exc: BaseException) -> str:
    """An exception's first line, without the source path CatBoost puts before it."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text.split(": ", 1)[1][:200] if text.startswith(("catboost/", "library/", "tools/", "util/")) \
        and ": " in text else text[:200]


def catboost_document(native: ModelLike, filename: str) -> CatBoostJSON:
    """CatBoost's own model ``native`` (read from a ``.cbm`` file) with its JSON export,
    checked (:func:`~core.intake.parsing.catboostcheck.check_catboost_json`): what the
    parser reads. A model CatBoost cannot write as JSON (a border beyond float32 read
    as infinity) is refused with a message."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model.json"
            native.save_model(str(path), format="json")
            data = path.read_bytes()
    except Exception as exc:  # noqa: BLE001 - CatBoostError
        raise ModelError(f"{filename!r} is damaged: CatBoost reads it but cannot write it as JSON "
                         f"({_first_line(exc)}). Re-save the model from CatBoost.") from None
    document = load_json(data, filename, "CatBoost JSON")
    check_catboost_json(document, filename)
    return CatBoostJSON(document=document, native=native)


def _loss(doc: dict[str, Any]) -> str:
    info = doc.get("model_info") or {}
    lf = (info.get("params") or {}).get("loss_function") or {}
    return str(lf.get("type") if isinstance(lf, dict) else lf or "")


def parse_catboost(model: ModelLike) -> TreeEnsemble:
    if type(model).__module__.split(".")[0] == "catboost":       # CatBoost's own model object
        model = _exported(model)
    doc = model.document if isinstance(model, CatBoostJSON) else model
    check_catboost_json(doc, "the CatBoost model")
    try:
        return _parse(doc)
    except AtlasError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"The CatBoost JSON is damaged or not as CatBoost writes it ({type(exc).__name__}: "
                         f"{str(exc)[:120]}). Export it again with model.save_model(path, format='json').") from None


def _parse(doc: Any) -> TreeEnsemble:
    if not isinstance(doc, dict) or not ({"oblivious_trees", "trees"} & set(doc)):
        raise ModelError("This is not a CatBoost JSON model (no 'oblivious_trees' or 'trees').")
    fi = doc.get("features_info") or {}
    names, float_flat, cat_flat = _features(fi)
    d = len(names)
    trees_json = _trees_json(doc)
    splits = _every_split(trees_json)
    categories, hashes = _categories(splits, fi, cat_flat, names)
    n_codes = max((len(c) + 1 for c in categories if c is not None), default=None)

    loss = _loss(doc)
    class_params = _class_params(doc)
    scale, bias = _scale_and_bias(doc)
    task, link, n_out, bias = _link(loss, class_params, bias)

    split_node = _SplitNodes.of(splits, float_flat, cat_flat, categories, hashes)
    trees = [_tree(t, n_out, scale, split_node, n_codes) for t in trees_json]
    classes = _classes(class_params, n_out) if task == "classification" else None
    meta: dict[str, Any] = {"loss": loss}
    if n_codes is not None:
        meta.update(_category_meta(names, hashes))
    return TreeEnsemble(tuple(trees), n_features=d, feature_names=tuple(names), task=task, aggregation="sum",
                        link=link, base_score=np.asarray(bias, dtype=float), classes=classes,
                        source="catboost.CatBoost", meta=meta,
                        categories=tuple(categories) if n_codes is not None else ())


def _trees_json(doc: dict[str, Any]) -> list[Any]:
    """The export's trees: oblivious ones, or else non-symmetric ones."""
    return doc.get("oblivious_trees") or doc.get("trees") or []


def _class_params(doc: dict[str, Any]) -> dict[str, Any]:
    return (doc.get("model_info") or {}).get("class_params") or {}


def _classes(class_params: dict[str, Any], n_out: int) -> np.ndarray:
    """A classifier's class names, else its class indices (at least two)."""
    return np.asarray(class_params.get("class_names") or list(range(max(n_out, 2))))


def _category_meta(names: list[str], hashes: dict[int, list[int]]) -> dict[str, Any]:
    """What a model with categorical features adds to its meta: its raw frame input, each
    feature's hashes, the name of the "any other value" level."""
    return {"input": "frame-object", "category_hashes": {names[j]: hs for j, hs in hashes.items()},
            "other_level": OTHER}


@dataclass(frozen=True)
class _SplitNodes:
    """Turns a CatBoost split into a node dict: a float split on its float32 border read as an
    ``x <= t`` bound, a one-hot split as every code but the one its hash names going left."""

    float_flat: dict[int, int]                  # float feature index -> flat feature index
    cat_flat: dict[int, int]                    # categorical feature index -> flat feature index
    bound: dict[float, float]                   # border -> its ``x <= t`` bound
    code_of: dict[int, dict[int, int]]          # flat feature -> hash -> code
    categories: list[Any]

    @classmethod
    def of(cls, splits: list[dict[str, Any]], float_flat: dict[int, int], cat_flat: dict[int, int],
           categories: list[Any],
           hashes: dict[int, list[int]]) -> _SplitNodes:
        borders = sorted({float(s["border"]) for s in splits if s.get("split_type") == "FloatFeature"})
        bound = dict(zip(borders, float32_le_bound(np.asarray(borders, dtype=np.float32)).tolist()))
        code_of = {j: {h: k for k, h in enumerate(hs)} for j, hs in hashes.items()}
        return cls(float_flat, cat_flat, bound, code_of, categories)

    def __call__(self, s: dict[str, Any], left: Any, right: Any) -> dict[str, Any]:
        if s.get("split_type") == "FloatFeature":
            j = self.float_flat[int(s["float_feature_index"])]
            return {"feature": j, "threshold": self.bound[float(s["border"])], "left": left, "right": right}
        j = self.cat_flat[int(s["cat_feature_index"])]
        hit = self.code_of[j][int(s["value"]) & 0xFFFFFFFF]
        return {"feature": j, "categories_left": [c for c in range(len(self.categories[j]) + 1) if c != hit],
                "left": left, "right": right}


def _tree(t: dict[str, Any], n_out: int, scale: float, split_node: _SplitNodes, n_codes: int | None) -> Tree:
    """One tree of the export, oblivious (``splits``) or not."""
    nodes: list[dict[str, Any]] = []
    if "splits" in t:
        _oblivious(t, n_out, scale, split_node, nodes)
    else:
        _nested(t, n_out, scale, split_node, nodes)
    return build_tree(nodes, n_out, n_codes)


def _features(fi: dict[str, Any]) -> tuple[list[str], dict[int, int], dict[int, int]]:
    """The feature names in flat order, and the flat index of each float and
    each categorical feature (by its index among features of its kind)."""
    floats = fi.get("float_features") or []
    cats = fi.get("categorical_features") or []
    for kind in ("text_features", "embedding_features"):
        if fi.get(kind):
            raise UnsupportedModelError(f"This CatBoost model uses {kind.replace('_', ' ')}, which are not supported.")
    _check_indices(floats + cats)
    names = _flat_names(floats + cats)
    float_flat = {int(f["feature_index"]): int(f["flat_feature_index"]) for f in floats}
    cat_flat = {int(f["feature_index"]): int(f["flat_feature_index"]) for f in cats}
    return names, float_flat, cat_flat


def _flat_names(features: list[dict[str, Any]]) -> list[str]:
    """The feature names in flat order; ``f<j>`` where the export names none."""
    names_of = {int(f["flat_feature_index"]): str(f.get("feature_name") or f.get("feature_id") or "")
                for f in features}
    d = max(names_of, default=-1) + 1
    return [names_of.get(j) or f"f{j}" for j in range(d)]


def _check_indices(features: list[dict[str, Any]]) -> None:
    """Each feature's indices within the file's own list, before any allocation."""
    listed = len(features)
    for f in features:
        if not 0 <= int(f["flat_feature_index"]) < listed or not 0 <= int(f["feature_index"]) < listed:
            raise ModelError(f"Feature {str(f.get('feature_id'))[:40]!r} has index {f['flat_feature_index']} "
                             f"but the model lists {listed} features.")


def _categories(splits: list[dict[str, Any]], fi: dict[str, Any], cat_flat: dict[int, int],
                names: list[str]) -> tuple[list[Any], dict[int, list[int]]]:
    """Per feature None or its categories: the hashes its one-hot splits name, in
    order of appearance (as text when the export lists it), then "any other
    value"; and per categorical feature those hashes."""
    lookup = {int(h["hash"]) & 0xFFFFFFFF: str(h["value"]) for h in fi.get("cat_features_hash") or []}
    hashes = _split_hashes(splits, cat_flat)
    categories: list[Any] = [None] * len(names)
    for j, hs in hashes.items():
        categories[j] = tuple(lookup.get(h, f"#{h}") for h in hs) + (OTHER,)
    for j, hs in hashes.items():
        if cat_feature_hash(OTHER) in hs:       # never in practice; the stand-in must route as "other"
            raise UnsupportedModelError(f"Feature {names[j]!r} names a category whose hash collides with the "
                                        f"stand-in {OTHER!r}.")
    return categories, hashes


def _split_hashes(splits: list[dict[str, Any]], cat_flat: dict[int, int]) -> dict[int, list[int]]:
    """Per categorical feature, the hashes its one-hot splits name, in order of appearance."""
    hashes: dict[int, list[int]] = {j: [] for j in cat_flat.values()}
    for s in splits:
        if s.get("split_type") == "OneHotFeature":
            j = cat_flat[int(s["cat_feature_index"])]
            h = int(s["value"]) & 0xFFFFFFFF
            if h not in hashes[j]:
                hashes[j].append(h)
    return hashes


def _link(loss: str, class_params: dict[str, Any], bias: list[float]) -> tuple[Task, Link, int, list[float]]:
    """``(task, link, n_outputs, biases)`` of a loss, one bias per output."""
    task: Task
    link: Link
    if loss in _SIGMOID:
        task, link, n_out = "classification", "sigmoid", 1
    elif loss in _SOFTMAX:
        task, link, n_out = "classification", "softmax", _softmax_outputs(loss, class_params, bias)
    elif loss in _IDENTITY or loss.startswith(("Quantile", "Expectile", "Lq", "Huber")):
        task, link, n_out = "regression", "identity", 1
    else:
        raise UnsupportedModelError(f"CatBoost loss {loss or 'unknown'!r} is not supported; supported: "
                                    f"{', '.join(sorted(_SIGMOID | _SOFTMAX | _IDENTITY))}.")
    if len(bias) == 1 and n_out > 1:
        bias = bias * n_out
    if len(bias) != n_out:
        raise ModelError(f"The CatBoost model's scale_and_bias has {len(bias)} biases for {n_out} outputs.")
    return task, link, n_out, bias


def _softmax_outputs(loss: str, class_params: dict[str, Any], bias: list[float]) -> int:
    """A multiclass model's outputs: its biases or its classes, at least two."""
    n_out = max(len(bias), len(class_params.get("class_names") or []))
    if n_out < 2:
        raise ModelError(f"The CatBoost model's loss is {loss} but it holds one output per leaf and names no "
                         "classes: the loss and the trees disagree. Export the model again with "
                         "model.save_model(path, format='json').")
    return n_out


def apply_document(doc: dict[str, Any], frame: pd.DataFrame) -> np.ndarray:
    """The model's raw values on ``frame`` (columns named as the model's features),
    straight from the JSON document: split ``d`` of an oblivious tree sets bit ``d``
    of the leaf index when ``float32(x) > border`` or ``hash(category) == value``."""
    holds = _SplitHolds.of(doc.get("features_info") or {}, frame)
    n = len(frame)
    scale, bias = _scale_and_bias(doc)
    total = np.zeros((n, len(bias)))
    for t in doc.get("oblivious_trees") or []:
        index = np.zeros(n, dtype=np.int64)
        for d, s in enumerate(t["splits"] or []):
            index |= holds(s).astype(np.int64) << d
        total += np.asarray(t["leaf_values"], dtype=float).reshape(-1, len(bias))[index]
    for t in doc.get("trees") or []:
        _add_nested(t, holds, total)
    return scale * total + np.asarray(bias)


@dataclass(frozen=True)
class _SplitHolds:
    """Per row of a frame, whether a CatBoost split holds (the row goes right)."""

    floats: dict[int, np.ndarray]               # float feature index -> the column as float32
    hashed: dict[int, np.ndarray]               # categorical feature index -> the column's hashes

    @classmethod
    def of(cls, fi: dict[str, Any], frame: pd.DataFrame) -> _SplitHolds:
        columns = list(frame.columns)
        floats = {int(f["feature_index"]): np.asarray(frame[columns[int(f["flat_feature_index"])]],
                                                      dtype=np.float32)
                  for f in fi.get("float_features") or []}
        hashed = {int(f["feature_index"]): np.array([cat_feature_hash(v)
                                                     for v in frame[columns[int(f["flat_feature_index"])]]],
                                                    dtype=np.int64)
                  for f in fi.get("categorical_features") or []}
        return cls(floats, hashed)

    def __call__(self, s: dict[str, Any]) -> np.ndarray:
        if s["split_type"] == "FloatFeature":
            return np.asarray(self.floats[int(s["float_feature_index"])] > np.float32(float(s["border"])))
        return np.asarray(self.hashed[int(s["cat_feature_index"])] == (int(s["value"]) & 0xFFFFFFFF))


def _add_nested(t: dict[str, Any], holds: _SplitHolds, total: np.ndarray) -> None:
    """Adds a non-oblivious tree's leaf values to each row's ``total``."""
    stack = [(t, np.arange(len(total)))]
    while stack:
        nd, rows = stack.pop()
        if "split" not in nd:
            total[rows] += np.resize(np.atleast_1d(np.asarray(nd["value"], dtype=float)), total.shape[1])
            continue
        go = holds(nd["split"])[rows]
        stack += [(nd["left"], rows[~go]), (nd["right"], rows[go])]


def fold_other_level(ens: TreeEnsemble, features: list[int]) -> TreeEnsemble:
    """The ensemble with the "any other value" level (the last) of each of
    ``features`` folded into the missing code: both go the same way at every split,
    so predictions do not change; the data then offers no such level to choose."""
    return drop_last_level(ens, features, "level")


def _exported(model: ModelLike) -> CatBoostJSON:
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model.json"
            model.save_model(str(path), format="json")
            return CatBoostJSON(document=json.loads(path.read_text()), native=model)
    except Exception as exc:  # noqa: BLE001 - CatBoostError: not fitted
        raise UnsupportedModelError(f"The {type(model).__name__} could not be exported (is it fitted?): "
                                    f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}") from None


def _scale_and_bias(doc: dict[str, Any]) -> tuple[float, list[float]]:
    sb = doc.get("scale_and_bias") or [1, [0]]
    scale = float(sb[0])
    bias = sb[1] if isinstance(sb[1], list) else [sb[1]]
    return scale, [float(b) for b in bias]


def _every_split(trees: list[Any]) -> list[dict[str, Any]]:
    return [s for t in trees for s in _all_splits(t)]


def _all_splits(tree: dict[str, Any]) -> list[dict[str, Any]]:
    if "splits" in tree:
        return list(tree["splits"] or [])
    out, stack = [], [tree]
    while stack:
        nd = stack.pop()
        if "split" in nd:
            out.append(nd["split"])
            stack += [nd["left"], nd["right"]]
    return out


def _oblivious(tree: dict[str, Any], n_out: int, scale: float, split_node: Any, nodes: list[dict[str, Any]]) -> None:
    splits = tree["splits"] or []
    values = np.asarray(tree["leaf_values"], dtype=float) * scale
    depth = len(splits)
    if values.size != n_out << depth:
        raise ModelError(f"A CatBoost tree of depth {depth} holds {values.size} leaf values, not {n_out << depth}.")
    values = values.reshape(1 << depth, n_out)

    def visit(level: int, index: int) -> int:
        i = len(nodes)
        nodes.append({})
        if level == depth:
            nodes[i] = {"value": values[index]}
            return i
        left = visit(level + 1, index)
        right = visit(level + 1, index | (1 << level))
        nodes[i] = split_node(splits[level], left, right)
        return i

    visit(0, 0)


def _nested(tree: dict[str, Any], n_out: int, scale: float, split_node: Any, nodes: list[dict[str, Any]]) -> None:
    def visit(nd: dict[str, Any]) -> int:
        i = len(nodes)
        nodes.append({})
        if "split" not in nd:
            v = np.atleast_1d(np.asarray(nd["value"], dtype=float)) * scale
            nodes[i] = {"value": np.resize(v, n_out)}
            return i
        left = visit(nd["left"])
        right = visit(nd["right"])
        nodes[i] = split_node(nd["split"], left, right)
        return i

    visit(tree)
