"""ONNX tree ensembles as one :class:`TreeEnsemble` on the table's columns: :func:`parse_onnx`.

An ``.onnx`` file is read and checked without running it by
:mod:`core.intake.parsing.onnx_graph` and loaded as an
:class:`core.intake.parsing.onnx_runner.OnnxModel`. When its graph is one tree-ensemble
operator (:mod:`core.intake.parsing.onnx_trees` reads its trees exactly) with the nodes the
converters put around it, :func:`parse_onnx` follows the graph:

In front (table columns to the operator's input), each column of every tensor is known
symbolically: the number of an input column (rounded to float32 on the way or not), one
category of a string column, or a constant. Accepted: ``Identity``, ``Cast`` (to float
or double), ``Concat`` along the columns, ``OneHotEncoder`` (ai.onnx.ml, on a string
column: it becomes a categorical feature with the encoder's categories, an unknown or
missing value its missing code), ``Reshape`` / ``Flatten`` keeping the columns.

* One input ``[rows, n]`` of floats or doubles (the usual ``float_input``): the features
  are that tensor's columns in order; their names are not in the file, so they are
  ``f0 .. f{n-1}`` and the columns are matched by position once the user confirms
  (:class:`core.errors.PositionalMatchRequired`, :mod:`core.intake.matching`);
  ``meta["input"] = "array"``.
* One input per column (skl2onnx's pipeline export): each input is a table column,
  matched by name; numbers as ``[rows, 1]`` floats or doubles, categories as strings;
  ``meta["input"] = "frame-object"``. Integer inputs are refused (a counterfactual's
  value between two integers could not be fed); re-export them as floats.

Behind (the operator's outputs to the graph's), ``Identity``, ``Cast``, ``ZipMap``,
``Normalizer`` (L1), ``Mul`` by one (onnxmltools' LightGBM export) and ``ArgMax`` (the label of a ``TreeEnsemble`` of several targets).
The outputs as the project represents them (onnxruntime's, see its tree aggregator):

* a classifier of 3 or more classes: ``SOFTMAX`` -> softmax link; ``NONE`` with
  non-negative weights (forests: the mean of the trees' class frequencies) -> the
  scores themselves (identity link);
* a binary classifier scoring one class ``s``: with weights of both signs and
  ``LOGISTIC``, a sigmoid link (label ``s > 0``); with non-negative weights and
  ``NONE``, the scores ``[1 - s, s]`` (label ``s > 0.5``); other combinations give a
  label that is not the larger probability (or no probabilities at all) and are refused;
* a regressor of one target, ``SUM`` or ``AVERAGE`` of the trees, no post transform.

``PROBIT``, ``SOFTMAX_ZERO``, ``MIN``/``MAX`` aggregation, several regression targets and
binary classifiers weighting both classes (onnxruntime labels them by ``score_1 > 0``)
are refused with a message. The reading is verified against onnxruntime like every
format against its library (probabilities or values, and labels, on random points and
points exactly on the thresholds): :func:`run_probes` runs the graph and walks the ensemble
once on them for both halves, :func:`check_labels` is the label half.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.intake.parsing.onnx_graph import LIMITS, TREE_OPS, attributes, node_attribute_bytes, tree_op_nodes
from core.intake.parsing.onnx_runner import OnnxModel, load_onnx
from core.intake.parsing.onnx_trees import Column, TreeOpReading, read_tree_op
from core.model.ensemble import TreeEnsemble
from core.model.native import model_input, onnx_compared
from core.model.tree import Tree, stacked_trees
from core.typing import ModelLike

__all__ = ["parse_onnx", "load_onnx", "check_labels", "run_probes", "OnnxRun", "NOT_TREES"]

NOT_TREES = ("This ONNX graph is not a tree ensemble read exactly; it is analysed as any other model instead: run in a "
             "sandboxed worker, the exact analyses on a tree-ensemble surrogate of it and every answer checked on "
             "the graph itself (core.open_workspace(path, data, target) and the Data & model page do so).")
_NODE_BUDGET = LIMITS.max_tree_nodes      # nodes read exactly, counted in the file before any is built


@dataclass
class _Value:
    """A tensor of the front part: its columns (last axis), rank and element type."""

    columns: list[Column]
    rank: int
    elem: str
    string_input: int = -1        # a string input column not yet encoded: its feature index


@dataclass
class _Front:
    columns: list[Column]
    tree_f32: bool
    names: list[str]
    categories: list[tuple | None]
    kind: str                               # "array" or "frame-object"
    extra: list[str] = field(default_factory=list)
    no_missing: list[str] = field(default_factory=list)


def _refuse_op(node: Any, where: str) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"The ONNX graph has a {node.op_type} node {where} its tree ensemble, which is not read exactly (accepted in "
        "front: Identity, Cast, Concat, OneHotEncoder, Reshape, Flatten; behind: Identity, Cast, ZipMap, Normalizer, "
        f"ArgMax, Mul by one). {NOT_TREES}")


def _initializers(proto: ModelLike) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}


@dataclass
class _FrontState:
    """What the inputs and the nodes read so far in front of the tree operator make: each
    tensor's :class:`_Value`, the features' names and categories, how the input is taken,
    the string inputs one-hot encoded and the columns whose encoder has no missing code."""

    values: dict[str, _Value]
    names: list[str]
    cats: list[tuple | None]
    kind: str                                   # "array" or "frame-object"
    inits: dict[str, np.ndarray]
    strings_used: set[int] = field(default_factory=set)
    no_missing: list[str] = field(default_factory=list)


def _front(model: OnnxModel, tree: Any) -> _Front:
    """The tree operator's input columns in terms of the table's (see the module docstring)."""
    st = _front_inputs(model.info, _initializers(model.proto))
    for node in model.proto.graph.node:
        if node is tree:
            break
        out = _front_node(node, st)
        st.values.update({o: out for o in node.output if o})
    src = st.values.get(tree.input[0])
    if src is None or src.string_input >= 0:
        raise UnsupportedModelError(f"The input of the ONNX tree ensemble is not made of the model's inputs by the "
                                    f"nodes read in front of it. {NOT_TREES}")
    if src.rank != 2 and not (src.rank == 1 and len(src.columns) == 1):
        raise UnsupportedModelError(f"The ONNX tree ensemble takes a tensor of rank {src.rank}; rows of columns "
                                    f"(rank 2) are read. {NOT_TREES}")
    return _Front(src.columns, src.elem == "float", st.names, st.cats, st.kind, _unused_strings(st, model.info),
                  st.no_missing)


def _unused_strings(st: _FrontState, info: Any) -> list[str]:
    """The string input columns no node in front of the trees reads (fed, but not predicted from)."""
    if st.kind != "frame-object":
        return []
    return [st.names[k] for k, (_, elem, _) in enumerate(info.inputs) if elem == "string" and k not in st.strings_used]


def _front_inputs(info: Any, inits: dict[str, np.ndarray]) -> _FrontState:
    """The graph's inputs as columns: one ``[rows, n]`` tensor of numbers, or one input per column."""
    if len(info.inputs) == 1 and len(info.inputs[0][2]) == 2:
        name, elem, dims = info.inputs[0]
        if elem not in ("float", "double"):
            raise UnsupportedModelError(f"The ONNX model takes its input {name!r} as {elem} values; a tree ensemble "
                                        "is read with float or double inputs. Re-export it with FloatTensorType "
                                        "(or DoubleTensorType).")
        n = int(dims[1] or 0)
        value = _Value([Column("num", k, through32=elem == "float") for k in range(n)], 2, elem)
        return _FrontState({name: value}, [f"f{k}" for k in range(n)], [None] * n, "array", inits)
    st = _FrontState({}, [], [], "frame-object", inits)
    for k, (name, elem, dims) in enumerate(info.inputs):
        if len(dims) == 2 and dims[1] != 1:
            raise UnsupportedModelError(f"The ONNX model takes {len(info.inputs)} inputs, and {name!r} has "
                                        f"{dims[1]} columns; a model read per column takes one column per input.")
        st.names.append(name)
        st.cats.append(None)
        if elem in ("float", "double"):
            st.values[name] = _Value([Column("num", k, through32=elem == "float")], len(dims), elem)
        elif elem == "string":
            st.values[name] = _Value([], len(dims), "string", string_input=k)
        else:
            raise UnsupportedModelError(
                f"The ONNX model takes the column {name!r} as {elem} values; numbers are read as float or "
                "double inputs (a counterfactual's value between two integers could not be fed to an integer "
                f"input). Re-export it with FloatTensorType for {name!r}.")
    return st


def _front_node(node: Any, st: _FrontState) -> _Value:
    """What one node in front of the tree operator makes of the tensors read so far."""
    ins = [st.values.get(i) for i in node.input if i]
    v = ins[0] if ins else None
    read = _FRONT_OPS.get(node.op_type)
    if v is None or read is None:           # an input not made by the nodes read so far, or another operator
        raise _refuse_op(node, "in front of")
    return read(node, v, attributes(node), st)


def _front_identity(node: Any, v: _Value, a: dict[str, Any], st: _FrontState) -> _Value:
    """``Identity``, or ``Flatten`` keeping the columns (axis 1)."""
    flatten = node.op_type == "Flatten"
    if flatten and (int(a.get("axis", 1)) != 1 or v.string_input >= 0):
        raise _refuse_op(node, "in front of")
    return _Value(v.columns, 2 if flatten else v.rank, v.elem, v.string_input)


def _front_cast(node: Any, v: _Value, a: dict[str, Any], st: _FrontState) -> _Value:
    """``Cast`` of numbers to float (the values rounded to float32 from then on) or double."""
    to = int(a.get("to", 0))
    if v.string_input >= 0 or to not in (1, 11):
        raise UnsupportedModelError(f"The ONNX graph casts a column to type {to} in front of its tree "
                                    f"ensemble; only casts of numbers to float or double are read. {NOT_TREES}")
    cols = [Column(c.kind, c.feature, c.through32 or to == 1, c.code, c.value) for c in v.columns]
    return _Value(cols, v.rank, "float" if to == 1 else "double")


def _front_concat(node: Any, v: _Value, a: dict[str, Any], st: _FrontState) -> _Value:
    """``Concat`` of number tensors of one type along their columns."""
    given = [st.values.get(i) for i in node.input]
    parts = [p for p in given if p is not None and p.string_input < 0]
    if len(parts) != len(given):
        raise _refuse_op(node, "in front of")
    rank = parts[0].rank
    along_columns = int(a.get("axis", 1)) % rank == rank - 1
    if any(p.rank != rank for p in parts) or not along_columns or rank < 2:
        raise UnsupportedModelError("The ONNX graph concatenates tensors along another axis than their "
                                    f"columns in front of its tree ensemble. {NOT_TREES}")
    if len({p.elem for p in parts}) != 1:
        raise ModelError("The ONNX graph concatenates tensors of different types.")
    return _Value([c for p in parts for c in p.columns], rank, parts[0].elem)


def _front_one_hot(node: Any, v: _Value, a: dict[str, Any], st: _FrontState) -> _Value:
    """``OneHotEncoder`` of a string input by its string categories: a categorical feature."""
    strs = a.get("cats_strings")
    if v.string_input < 0 or strs is None or len(strs) == 0:
        raise UnsupportedModelError("The ONNX graph one-hot encodes a column that is not a string input "
                                    f"(or by integer categories) in front of its tree ensemble. {NOT_TREES}")
    k = v.string_input
    levels = tuple(s.decode() if isinstance(s, bytes) else str(s) for s in strs)
    if len(set(levels)) != len(levels):
        raise ModelError(f"The OneHotEncoder of {st.names[k]!r} lists a category twice.")
    if st.cats[k] is not None and st.cats[k] != levels:
        raise UnsupportedModelError(f"The column {st.names[k]!r} is one-hot encoded twice with different "
                                    f"categories. {NOT_TREES}")
    st.cats[k] = levels
    st.strings_used.add(k)
    if not int(a.get("zeros", 1)):
        st.no_missing.append(st.names[k])
    return _Value([Column("hot", k, code=c) for c in range(len(levels))], v.rank + 1, "float")


def _front_reshape(node: Any, v: _Value, a: dict[str, Any], st: _FrontState) -> _Value:
    """``Reshape`` to ``[-1, columns]`` by a shape stored in the file."""
    given_shape = st.inits.get(node.input[1]) if len(node.input) > 1 else None
    if given_shape is None or v.string_input >= 0:
        raise _refuse_op(node, "in front of")
    shape = [int(s) for s in np.asarray(given_shape).ravel()]
    if len(shape) != 2 or shape[1] != len(v.columns) or shape[0] not in (-1, 0):
        raise UnsupportedModelError(f"The ONNX graph reshapes its columns to {shape} in front of its tree "
                                    f"ensemble; only [-1, columns] is read. {NOT_TREES}")
    return _Value(v.columns, 2, v.elem)


_FRONT_OPS: dict[str, Callable[[Any, _Value, dict[str, Any], _FrontState], _Value]] = {
    "Identity": _front_identity, "Flatten": _front_identity, "Cast": _front_cast, "Concat": _front_concat,
    "OneHotEncoder": _front_one_hot, "Reshape": _front_reshape}


def _back(model: OnnxModel, tree: Any) -> dict[str, str]:
    """The role of each tensor behind the tree operator: "label", "scores", "normalized"
    (L1-normalized scores); the graph's label and scores outputs must have one."""
    inits = _initializers(model.proto)
    roles = _tree_outputs(tree)
    nodes = list(model.proto.graph.node)
    after = next(k for k, node in enumerate(nodes) if node is tree) + 1
    for node in nodes[after:]:
        role = roles.get(node.input[0]) if node.input else None
        read = _BACK_OPS.get(node.op_type)
        if role is None or read is None:
            raise _refuse_op(node, "behind")
        new = read(node, role, attributes(node), inits)
        roles.update({o: new for o in node.output if o})
    return {"label": _role_of(model.info.label, roles), "scores": _role_of(model.info.scores, roles)}


def _role_of(output: str | None, roles: dict[str, str]) -> str:
    """The role of a graph output the prediction is read from ("" for none); it must come from the trees."""
    if output is None:
        return ""
    if output not in roles:
        raise UnsupportedModelError(f"The ONNX graph's output {output!r} does not come from its tree ensemble. "
                                    f"{NOT_TREES}")
    return roles[output]


def _tree_outputs(tree: Any) -> dict[str, str]:
    """The roles of the tree operator's own outputs: a classifier's labels and scores, a
    regressor's (or opset 5's) scores."""
    outs = list(tree.output)
    if tree.op_type != "TreeEnsembleClassifier":
        return {outs[0]: "scores"}
    roles = {outs[0]: "label"}
    if len(outs) > 1 and outs[1]:
        roles[outs[1]] = "scores"
    return roles


def _back_same(node: Any, role: str, a: dict[str, Any], inits: dict[str, np.ndarray]) -> str:
    """``Identity``, ``ZipMap``: the same outputs."""
    return role


def _back_cast(node: Any, role: str, a: dict[str, Any], inits: dict[str, np.ndarray]) -> str:
    """``Cast`` of labels to integers or strings, of scores to float or double."""
    to = int(a.get("to", 0))
    if role == "label" and to not in (7, 8, 6):
        raise UnsupportedModelError(f"The ONNX graph casts its labels to type {to}. {NOT_TREES}")
    if role != "label" and to not in (1, 11):
        raise UnsupportedModelError(f"The ONNX graph casts its scores to type {to}. {NOT_TREES}")
    return role


def _back_normalizer(node: Any, role: str, a: dict[str, Any], inits: dict[str, np.ndarray]) -> str:
    """``Normalizer`` (L1) of the scores: their sum made one."""
    norm = a.get("norm", b"MAX")
    norm = norm.decode() if isinstance(norm, bytes) else str(norm)
    if role == "label" or norm != "L1":
        raise UnsupportedModelError(f"The ONNX graph normalizes its scores by {norm}; only L1 (scores "
                                    f"divided by their sum) is read. {NOT_TREES}")
    return "normalized"


def _back_mul(node: Any, role: str, a: dict[str, Any], inits: dict[str, np.ndarray]) -> str:
    """``Mul`` of the scores by one (onnxmltools multiplies LightGBM's probabilities by one)."""
    other = list(node.input[1:])
    const = inits.get(other[0]) if len(other) == 1 else None
    if role == "label" or const is None or not np.all(np.asarray(const) == 1):
        raise UnsupportedModelError(f"The ONNX graph multiplies its scores by something other than one. "
                                    f"{NOT_TREES}")
    return role


def _back_argmax(node: Any, role: str, a: dict[str, Any], inits: dict[str, np.ndarray]) -> str:
    """``ArgMax`` of each row's scores: the label (a ``TreeEnsemble`` of several targets)."""
    if role == "label" or int(a.get("axis", 0)) not in (1, -1) or int(a.get("select_last_index", 0)):
        raise UnsupportedModelError(f"The ONNX graph's ArgMax is not over the scores of each row. {NOT_TREES}")
    return "label"


_BACK_OPS: dict[str, Callable[[Any, str, dict[str, Any], dict[str, np.ndarray]], str]] = {
    "Identity": _back_same, "ZipMap": _back_same, "Cast": _back_cast, "Normalizer": _back_normalizer,
    "Mul": _back_mul, "ArgMax": _back_argmax}


def _representation(r: TreeOpReading, op: str, out: dict[str, str]) -> dict[str, Any]:
    """How the operator's outputs are represented: task, link, leaf values map, base score."""
    post, n = r.post_transform, r.n_targets
    if r.aggregate not in ("SUM", "AVERAGE"):
        raise UnsupportedModelError(f"The ONNX tree ensemble aggregates its trees by {r.aggregate}; only SUM and "
                                    "AVERAGE are analysed exactly.")
    if post in ("PROBIT", "SOFTMAX_ZERO"):
        raise UnsupportedModelError(f"The ONNX tree ensemble's post transform {post} is not one the project's "
                                    "models have (sigmoid, softmax or none); it cannot be analysed exactly.")
    if not (op == "TreeEnsembleClassifier" or (op == "TreeEnsemble" and n >= 2)):
        return _regressor(r)
    if op == "TreeEnsemble" and out.get("label") and out["label"] != "label":
        raise UnsupportedModelError(f"The ONNX tree ensemble's label is not the ArgMax of its scores. {NOT_TREES}")
    if n == 2 and op == "TreeEnsembleClassifier":
        return _binary(r)
    return _classes(r, out)


def _regressor(r: TreeOpReading) -> dict[str, Any]:
    """A regressor of one target, no post transform: the values as they are."""
    n, base = r.n_targets, r.base_values
    if n != 1:
        raise UnsupportedModelError(f"The ONNX tree ensemble predicts {n} targets; regressors of one target "
                                    "are analysed.")
    if r.post_transform != "NONE":
        raise UnsupportedModelError(f"The ONNX tree regressor has the post transform {r.post_transform}, which "
                                    "onnxruntime applies to no single-target regressor; it is refused as ambiguous.")
    if base.size not in (0, 1):
        raise ModelError(f"The ONNX tree regressor has {base.size} base values for one target.")
    return {"task": "regression", "link": "identity", "values": "as_is",
            "base": np.array([float(base[0]) if base.size else 0.0]), "scores": "values"}


def _binary(r: TreeOpReading) -> dict[str, Any]:
    """A binary classifier scoring one class ``s``: ``[1 - s, s]`` (non-negative weights, no
    transform) or a sigmoid of ``s`` (signed weights, ``LOGISTIC``); any other is refused."""
    post, base = r.post_transform, r.base_values
    if r.used_targets != {0}:
        raise UnsupportedModelError(
            "This binary ONNX tree classifier weights both classes at its leaves; onnxruntime then labels a row "
            "by 'score of the second class > 0', not by the larger score, so its labels and scores disagree. "
            "Re-export it scoring one class (skl2onnx and onnxmltools do).")
    if base.size not in (0, 1):
        raise UnsupportedModelError("This binary ONNX tree classifier scores one class but has two base "
                                    "values; onnxruntime's reading of that is ambiguous.")
    b = float(base[0]) if base.size else 0.0
    if r.weights_all_positive:
        if post != "NONE":
            raise UnsupportedModelError(
                f"This binary ONNX tree classifier has only non-negative weights and the post transform {post}: "
                "onnxruntime labels a row by 'score > 0.5' on the score before the transform, which is not the "
                "larger of the probabilities it outputs. It cannot be analysed exactly.")
        return {"task": "classification", "link": "identity", "values": "one_minus",
                "base": np.array([1.0 - b, b]), "scores": "raw"}
    if post != "LOGISTIC":
        raise UnsupportedModelError(
            f"This binary ONNX tree classifier gives signed scores with the post transform {post}; its outputs "
            "are not probabilities. Export it with a logistic output (LOGISTIC).")
    return {"task": "classification", "link": "sigmoid", "values": "first", "base": np.array([b]),
            "scores": "proba"}


def _classes(r: TreeOpReading, out: dict[str, str]) -> dict[str, Any]:
    """A classifier scoring each class: softmax, or non-negative scores without a transform."""
    post, n, base = r.post_transform, r.n_targets, r.base_values
    if base.size not in (0, n):
        raise ModelError(f"The ONNX tree classifier has {base.size} base values for {n} classes.")
    full = base if base.size else np.zeros(n)
    if post == "SOFTMAX":
        return {"task": "classification", "link": "softmax", "values": "as_is", "base": full, "scores": "proba"}
    if post == "NONE":
        if not r.weights_all_positive or np.any(full < 0):
            raise UnsupportedModelError("This ONNX tree classifier outputs signed scores without a transform; they "
                                        "are not probabilities. Export it with a softmax output.")
        return {"task": "classification", "link": "identity", "values": "as_is", "base": full,
                "scores": "proba" if out.get("scores") == "normalized" else "raw"}
    raise UnsupportedModelError(f"This ONNX tree classifier of {n} classes has the post transform {post}, which "
                                "gives no class probabilities the project's models have (softmax or none).")


def parse_onnx(model: ModelLike) -> TreeEnsemble:
    """The ONNX model's tree ensemble as a :class:`TreeEnsemble` (no verification; see the module docstring).

    Raises
    ------
    UnsupportedModelError
        A graph that is not a tree ensemble (:data:`NOT_TREES`), or a tree ensemble whose
        semantics are not reproduced exactly.
    """
    if not isinstance(model, OnnxModel):
        raise UnsupportedModelError(f"Expected an ONNX model, got {type(model).__name__}.")
    if not model.info.is_tree_ensemble:
        raise UnsupportedModelError(f"{NOT_TREES} This graph: {model.info.describe()}.")
    at, tree = next((k, n) for k, n in enumerate(model.proto.graph.node) if n.op_type in TREE_OPS)
    size = tree_op_nodes(tree)              # from the arrays' lengths: nothing converted or built yet
    if size > _NODE_BUDGET:
        raise UnsupportedModelError(f"The ONNX tree ensemble has {size:,} nodes; at most {_NODE_BUDGET:,} are "
                                    "analysed exactly.")
    front = _front(model, tree)
    out = _back(model, tree)
    n_codes = max((len(c) + 1 for c in front.categories if c is not None), default=None)
    reading = read_tree_op(tree.op_type, attributes(tree, node_attribute_bytes(model.data, at)), front.columns,
                           front.tree_f32, _NODE_BUDGET, n_codes)
    rep = _representation(reading, tree.op_type, out)
    return TreeEnsemble(_trees(reading.arrays, rep["values"]), n_features=len(front.names),
                        feature_names=tuple(front.names), task=rep["task"],
                        aggregation="mean" if reading.aggregate == "AVERAGE" else "sum", link=rep["link"],
                        base_score=rep["base"], classes=_classes_of(reading, rep["task"]),
                        **_described(model, tree, front, rep["scores"]))


def _classes_of(reading: TreeOpReading, task: str) -> np.ndarray | None:
    """A classifier's labels: the operator's, else its class numbers."""
    if reading.class_labels is not None:
        return np.asarray(reading.class_labels)
    return np.arange(reading.n_targets) if task == "classification" else None


def _described(model: OnnxModel, tree: Any, front: _Front, scores: str) -> dict[str, Any]:
    """The ensemble's ``source``, ``meta`` (how its input is fed, the operator and its scores,
    the file) and ``categories``."""
    meta: dict[str, Any] = {"input": front.kind,
                            "onnx": {"op": tree.op_type, "scores": scores, "producer": model.info.producer,
                                     "sha256": model.sha256}}
    if front.extra:
        meta["extra_columns"] = front.extra
    if front.no_missing:
        meta["no_missing"] = front.no_missing
    source = f"onnx.{tree.op_type}" + (f"[{model.info.producer.split()[0]}]" if model.info.producer else "")
    return {"source": source, "meta": meta,
            "categories": tuple(front.categories) if any(c is not None for c in front.categories) else ()}


def _leaf_values(arrays: dict[str, np.ndarray], how: str) -> np.ndarray:
    """The leaves' values as the ensemble holds them: the operator's per target (``as_is``), or
    for a binary classifier scoring one class ``s``, ``[-s, s]`` (``one_minus``: the scores
    ``[1 - s, s]`` less the base) or ``s`` alone (``first``: its margin); zero at splits."""
    value = arrays["value"]
    if how == "first":
        return value[:, :1].copy()
    if how != "one_minus":
        return value
    out = np.zeros((value.shape[0], 2))
    leaf = arrays["children_left"] < 0
    out[leaf, 0], out[leaf, 1] = -value[leaf, 0], value[leaf, 0]
    return out


def _trees(arrays: dict[str, np.ndarray], how: str) -> tuple[Tree, ...]:
    """The operator's stacked trees (:attr:`TreeOpReading.arrays`) as :class:`Tree` objects."""
    return stacked_trees(arrays["node_counts"], arrays["children_left"], arrays["children_right"], arrays["feature"],
                         arrays["threshold"], _leaf_values(arrays, how), arrays["category_bits"],
                         arrays["missing_left"])


@dataclass(frozen=True)
class OnnxRun:
    """The graph's labels (None: it gives none) and the ensemble's raw outputs on probe rows,
    and their scores compared (``(ours, theirs, what)``, :func:`core.model.native.onnx_compared`):
    one run of the graph and one walk of the ensemble for the whole verification."""

    labels: np.ndarray | None
    raw: np.ndarray
    compared: tuple[np.ndarray, np.ndarray | None, str]


def run_probes(ens: TreeEnsemble, model: OnnxModel, X: np.ndarray, raw: np.ndarray | None = None) -> OnnxRun:
    """The graph and the ensemble on the probe rows ``X`` (codes-view rows), once each (``raw``:
    the ensemble's raw outputs on them, when the caller has walked them already)."""
    labels, scores = model.run(model_input(ens, X))
    raw = ens.predict_raw(X) if raw is None else raw
    return OnnxRun(labels, raw, onnx_compared(ens, raw, scores))


def check_labels(ens: TreeEnsemble, model: OnnxModel, X: np.ndarray, theirs: np.ndarray,
                 run: OnnxRun | None = None) -> None:
    """The graph's own labels must be the ensemble's on the probe rows ``X`` (away from ties
    of its scores ``theirs``, whose float32 rounding may decide them otherwise); ``run``: the
    graph's and the ensemble's outputs on them when already at hand (:func:`run_probes`)."""
    if not ens.is_classifier:
        return
    run = run_probes(ens, model, X) if run is None else run
    labels = run.labels
    if labels is None:
        labels = np.asarray(ens.classes)[np.argmax(theirs, axis=1)]
    raw = run.raw
    ours = ens.predict_from_raw(raw)
    if ens.link == "sigmoid":
        margin = np.abs(raw[:, 0])
    else:
        top = np.sort(raw, axis=1)
        margin = top[:, -1] - top[:, -2]
    clear = margin > 1e-5 * np.maximum(1.0, np.abs(raw).max(axis=1))
    bad = clear & (np.asarray(labels).astype(str) != np.asarray(ours).astype(str))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise UnsupportedModelError(
            f"This {ens.source} model was parsed but onnxruntime labels some rows otherwise (e.g. {labels[i]!r} where "
            f"its scores give {ours[i]!r}); it uses a labelling rule the parser does not reproduce. Please report it.")
