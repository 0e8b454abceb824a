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
from core.model.tree import float32_le_bound
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

    document: dict = field(repr=False)
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


def _loss(doc: dict) -> str:
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
    trees_json = doc.get("oblivious_trees") or doc.get("trees") or []
    splits = [s for t in trees_json for s in _all_splits(t)]
    categories, hashes = _categories(splits, fi, cat_flat, names)
    code_of = {j: {h: k for k, h in enumerate(hs)} for j, hs in hashes.items()}
    n_codes = max((len(c) + 1 for c in categories if c is not None), default=None)

    loss = _loss(doc)
    class_params = (doc.get("model_info") or {}).get("class_params") or {}
    scale, bias = _scale_and_bias(doc)
    task, link, n_out, bias = _link(loss, class_params, bias)

    borders = sorted({float(s["border"]) for s in splits if s.get("split_type") == "FloatFeature"})
    bound = dict(zip(borders, float32_le_bound(np.asarray(borders, dtype=np.float32)).tolist()))

    def split_node(s: dict, left: Any, right: Any) -> dict:
        if s.get("split_type") == "FloatFeature":
            j = float_flat[int(s["float_feature_index"])]
            return {"feature": j, "threshold": bound[float(s["border"])], "left": left, "right": right}
        j = cat_flat[int(s["cat_feature_index"])]
        hit = code_of[j][int(s["value"]) & 0xFFFFFFFF]
        return {"feature": j, "categories_left": [c for c in range(len(categories[j]) + 1) if c != hit],
                "left": left, "right": right}

    trees = []
    for t in trees_json:
        nodes: list[dict] = []
        if "splits" in t:
            _oblivious(t, n_out, scale, split_node, nodes)
        else:
            _nested(t, n_out, scale, split_node, nodes)
        trees.append(build_tree(nodes, n_out, n_codes))
    classes = None
    if task == "classification":
        labels = class_params.get("class_names") or list(range(max(n_out, 2)))
        classes = np.asarray(labels)
    meta: dict[str, Any] = {"loss": loss}
    if n_codes is not None:
        meta["input"] = "frame-object"
        meta["category_hashes"] = {names[j]: hs for j, hs in hashes.items()}
        meta["other_level"] = OTHER
    return TreeEnsemble(tuple(trees), n_features=d, feature_names=tuple(names), task=task, aggregation="sum",
                        link=link, base_score=np.asarray(bias, dtype=float), classes=classes,
                        source="catboost.CatBoost", meta=meta,
                        categories=tuple(categories) if n_codes is not None else ())


def _features(fi: dict) -> tuple[list[str], dict[int, int], dict[int, int]]:
    """The feature names in flat order, and the flat index of each float and
    each categorical feature (by its index among features of its kind)."""
    floats = fi.get("float_features") or []
    cats = fi.get("categorical_features") or []
    for kind in ("text_features", "embedding_features"):
        if fi.get(kind):
            raise UnsupportedModelError(f"This CatBoost model uses {kind.replace('_', ' ')}, which are not supported.")
    listed = len(floats) + len(cats)
    for f in floats + cats:                # indices bounded by the file's own list, before any allocation
        if not 0 <= int(f["flat_feature_index"]) < listed or not 0 <= int(f["feature_index"]) < listed:
            raise ModelError(f"Feature {str(f.get('feature_id'))[:40]!r} has index {f['flat_feature_index']} "
                             f"but the model lists {listed} features.")
    names_of = {int(f["flat_feature_index"]): str(f.get("feature_name") or f.get("feature_id") or "")
                for f in floats + cats}
    d = max(names_of, default=-1) + 1
    names = [names_of.get(j) or f"f{j}" for j in range(d)]
    float_flat = {int(f["feature_index"]): int(f["flat_feature_index"]) for f in floats}
    cat_flat = {int(f["feature_index"]): int(f["flat_feature_index"]) for f in cats}
    return names, float_flat, cat_flat


def _categories(splits: list[dict], fi: dict, cat_flat: dict[int, int],
                names: list[str]) -> tuple[list, dict[int, list[int]]]:
    """Per feature None or its categories: the hashes its one-hot splits name, in
    order of appearance (as text when the export lists it), then "any other
    value"; and per categorical feature those hashes."""
    lookup = {int(h["hash"]) & 0xFFFFFFFF: str(h["value"]) for h in fi.get("cat_features_hash") or []}
    hashes: dict[int, list[int]] = {j: [] for j in cat_flat.values()}
    for s in splits:
        if s.get("split_type") == "OneHotFeature":
            j = cat_flat[int(s["cat_feature_index"])]
            h = int(s["value"]) & 0xFFFFFFFF
            if h not in hashes[j]:
                hashes[j].append(h)
    categories: list = [None] * len(names)
    for j, hs in hashes.items():
        categories[j] = tuple(lookup.get(h, f"#{h}") for h in hs) + (OTHER,)
    for j, hs in hashes.items():
        if cat_feature_hash(OTHER) in hs:       # never in practice; the stand-in must route as "other"
            raise UnsupportedModelError(f"Feature {names[j]!r} names a category whose hash collides with the "
                                        f"stand-in {OTHER!r}.")
    return categories, hashes


def _link(loss: str, class_params: dict, bias: list[float]) -> tuple[Task, Link, int, list[float]]:
    """``(task, link, n_outputs, biases)`` of a loss, one bias per output."""
    task: Task
    link: Link
    if loss in _SIGMOID:
        task, link, n_out = "classification", "sigmoid", 1
    elif loss in _SOFTMAX:
        task, link = "classification", "softmax"
        n_out = max(len(bias), len(class_params.get("class_names") or []))
        if n_out < 2:
            raise ModelError(f"The CatBoost model's loss is {loss} but it holds one output per leaf and names no "
                             "classes: the loss and the trees disagree. Export the model again with "
                             "model.save_model(path, format='json').")
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


def apply_document(doc: dict, frame: pd.DataFrame) -> np.ndarray:
    """The model's raw values on ``frame`` (columns named as the model's features),
    straight from the JSON document: split ``d`` of an oblivious tree sets bit ``d``
    of the leaf index when ``float32(x) > border`` or ``hash(category) == value``."""
    fi = doc.get("features_info") or {}
    columns = list(frame.columns)
    floats = {int(f["feature_index"]): np.asarray(frame[columns[int(f["flat_feature_index"])]], dtype=np.float32)
              for f in fi.get("float_features") or []}
    hashed = {int(f["feature_index"]): np.array([cat_feature_hash(v) for v in frame[columns[int(f["flat_feature_index"])]]],
                                                dtype=np.int64)
              for f in fi.get("categorical_features") or []}
    n = len(frame)

    def holds(s: dict) -> np.ndarray:
        if s["split_type"] == "FloatFeature":
            return floats[int(s["float_feature_index"])] > np.float32(float(s["border"]))
        return hashed[int(s["cat_feature_index"])] == (int(s["value"]) & 0xFFFFFFFF)

    scale, bias = _scale_and_bias(doc)
    total = np.zeros((n, len(bias)))
    for t in doc.get("oblivious_trees") or []:
        index = np.zeros(n, dtype=np.int64)
        for d, s in enumerate(t["splits"] or []):
            index |= holds(s).astype(np.int64) << d
        total += np.asarray(t["leaf_values"], dtype=float).reshape(-1, len(bias))[index]
    for t in doc.get("trees") or []:
        stack = [(t, np.arange(n))]
        while stack:
            nd, rows = stack.pop()
            if "split" not in nd:
                total[rows] += np.resize(np.atleast_1d(np.asarray(nd["value"], dtype=float)), len(bias))
                continue
            go = holds(nd["split"])[rows]
            stack += [(nd["left"], rows[~go]), (nd["right"], rows[go])]
    return scale * total + np.asarray(bias)


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


def _scale_and_bias(doc: dict) -> tuple[float, list[float]]:
    sb = doc.get("scale_and_bias") or [1, [0]]
    scale = float(sb[0])
    bias = sb[1] if isinstance(sb[1], list) else [sb[1]]
    return scale, [float(b) for b in bias]


def _all_splits(tree: dict) -> list[dict]:
    if "splits" in tree:
        return list(tree["splits"] or [])
    out, stack = [], [tree]
    while stack:
        nd = stack.pop()
        if "split" in nd:
            out.append(nd["split"])
            stack += [nd["left"], nd["right"]]
    return out


def _oblivious(tree: dict, n_out: int, scale: float, split_node: Any, nodes: list[dict]) -> None:
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


def _nested(tree: dict, n_out: int, scale: float, split_node: Any, nodes: list[dict]) -> None:
    def visit(nd: dict) -> int:
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
