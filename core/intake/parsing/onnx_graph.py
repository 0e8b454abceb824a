"""ONNX files read and checked without running them: :func:`read_onnx` and :func:`inspect_onnx`.

Reading an ONNX file runs no code from it (unlike a pickle), so any model in it can be
accepted, within limits checked here before anything else touches the graph:

* the bytes parse as an ONNX ``ModelProto`` (a truncated or corrupt file is refused);
* no tensor keeps its data outside the file (``data_location = EXTERNAL`` or
  ``external_data`` entries, on an initializer, a sparse initializer or any attribute
  tensor): such a model would make a reader open paths beside it, so it is refused
  before :mod:`onnx` or onnxruntime could try;
* the size budget: file bytes, graph nodes, total initializer elements, the elements
  of any one tensor (its declared dims, and its stored data matching them), tree
  nodes of the tree-ensemble operators;
* only the standard domains (``ai.onnx``, ``ai.onnx.ml``): a custom domain or a
  model-local function is a custom operator onnxruntime would not know;
* no subgraph: ``If``, ``Loop``, ``Scan`` and any other graph-valued attribute are refused;
* inputs are tensors of numbers or strings of rank 1 or 2 (a sequence, a map, an image
  of rank 4 is refused), outputs are tensors or ZipMap's sequence of maps;
* the prediction is a label output (integers or strings) and at most one output of
  numbers (probabilities, scores or a value): when several outputs could be it, none is
  guessed, and the analyst names the one to run the model on (``output=``,
  :func:`keep_outputs`).

:func:`inspect_onnx` returns :class:`OnnxGraphInfo`: the inputs (names, types,
shapes), the outputs and which one is the label and which the scores, the opsets, the
node count, the initializer bytes, and whether the graph is a tree ensemble. Running
a graph is :mod:`core.intake.parsing.onnx_runner`'s work.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from core.errors import ModelError, UnsupportedModelError, need
from core.typing import ModelLike

try:  # compiled reading of the wire runs (core/intake/parsing/_wire.c); numpy reads the same more slowly
    from core.intake.parsing import _wire  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - built without a C compiler
    _wire = None

if TYPE_CHECKING:
    from onnx import NodeProto

__all__ = ["OnnxGraphInfo", "OnnxLimits", "LIMITS", "read_onnx", "inspect_onnx", "keep_outputs", "TREE_OPS",
           "WRAPPER_OPS", "ELEM_TYPES", "attributes", "numpy_dtype", "tree_op_nodes", "output_names"]

#: the tree-ensemble operators of ai.onnx.ml
TREE_OPS = ("TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble")
#: operators the converters put around a tree ensemble (in front: columns in; behind: labels and scores out)
WRAPPER_OPS = ("Identity", "Cast", "Concat", "OneHotEncoder", "Reshape", "Flatten", "ZipMap", "Normalizer", "ArgMax",
               "Mul")
_DOMAINS = {"": "ai.onnx", "ai.onnx": "ai.onnx", "ai.onnx.ml": "ai.onnx.ml"}
_SUBGRAPH_OPS = ("If", "Loop", "Scan", "SequenceMap")
#: TensorProto element types by number, with the ones an input may have
ELEM_TYPES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
              9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16"}
_INPUT_TYPES = ("float", "double", "int64", "int32", "string", "bool", "float16")
_ITEM_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
_HOW = "Export the model again from its library (skl2onnx, onnxmltools, torch.onnx, tf2onnx)."


@dataclass(frozen=True)
class OnnxLimits:
    """The size budget of an ONNX file (see the module docstring)."""

    max_bytes: int = 500 * 2**20
    max_nodes: int = 20_000                 # graph nodes (a tree ensemble is one node)
    max_tree_nodes: int = 3_000_000         # nodes over all trees of all tree operators (all read exactly)
    max_initializer_elements: int = 200_000_000
    max_tensor_elements: int = 100_000_000  # any one tensor, by its declared dims
    max_dim: int = 2**31 - 1                # any declared dim of a tensor
    max_input_columns: int = 100_000


LIMITS = OnnxLimits()


@dataclass(frozen=True)
class OnnxGraphInfo:
    """What an ONNX graph is, read without running it.

    Attributes
    ----------
    inputs : tuple of (name, element type, shape), shape a tuple of int or None (free) per dim.
    outputs : tuple of (name, kind), kind ``"tensor[<type>]"`` or ``"zipmap"`` (a sequence of maps).
    label : name of the output holding the predicted labels, or None.
    scores : name of the output holding probabilities or scores (values for a regressor), or None.
    opsets : dict domain -> version.
    n_nodes : graph nodes; ``ops`` the count of each operator.
    initializer_bytes, initializer_elements : the weights stored in the file.
    tree_op : the tree-ensemble operator when the graph is one (with converter wrappers), else None.
    producer : who wrote the file (``producer_name producer_version``).
    """

    inputs: tuple[tuple[str, str, tuple[int | None, ...]], ...]
    outputs: tuple[tuple[str, str], ...]
    label: str | None
    scores: str | None
    opsets: dict[str, int]
    n_nodes: int
    ops: dict[str, int] = field(default_factory=dict)
    initializer_bytes: int = 0
    initializer_elements: int = 0
    tree_op: str | None = None
    producer: str = ""

    @property
    def is_tree_ensemble(self) -> bool:
        return self.tree_op is not None

    def describe(self) -> str:
        """One line about the graph, for messages."""
        top = ", ".join(f"{op}" + (f" ×{k}" if k > 1 else "") for op, k in Counter(self.ops).most_common(6))
        return (f"{self.n_nodes} node{'s' if self.n_nodes != 1 else ''} ({top}), inputs "
                + ", ".join(f"{n} {t}{list(s)}" for n, t, s in self.inputs[:4])
                + (" …" if len(self.inputs) > 4 else ""))


def _damaged(filename: str, what: str) -> ModelError:
    return ModelError(f"{filename!r} is not a readable ONNX model: {what}. {_HOW}")


def read_onnx(data: bytes | bytearray, filename: str = "model.onnx", limits: OnnxLimits = LIMITS) -> Any:
    """Parse ONNX bytes into a checked ``onnx.ModelProto`` (see the module docstring).

    Raises
    ------
    ModelError
        Empty, oversize, truncated or corrupt bytes; tensors stored outside the file;
        a graph over the size budget.
    UnsupportedModelError
        Custom domains or functions, subgraphs, inputs or outputs of kinds no table column gives.
    """
    onnx = need("onnx", "reading an ONNX model")  # optional and heavy: only when an ONNX file arrives

    if not data:
        raise ModelError(f"{filename!r} is empty. Upload a saved model file.")
    if len(data) > limits.max_bytes:
        raise ModelError(f"{filename!r} is {len(data) / 2**20:.0f} MB; ONNX models are accepted up to "
                         f"{limits.max_bytes // 2**20} MB.")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(bytes(data))
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and its recursion limit
        raise _damaged(filename, f"the protobuf does not parse ({type(exc).__name__}: {str(exc)[:120]}); the "
                                 "file is truncated or is not an ONNX file") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise _damaged(filename, "it holds no graph")
    _check_tensors(model, filename, limits)
    _check_graph(model, filename, limits)
    return model


def _tensor_elements(t: Any, filename: str, limits: OnnxLimits, where: str) -> int:
    """Elements of a TensorProto by its dims, checked against the budget and its stored data."""
    dims = list(t.dims)
    if any(d < 0 or d > limits.max_dim for d in dims):
        raise _damaged(filename, f"the tensor {where} declares the dims {dims[:6]}")
    n = 1
    for d in dims:
        n *= int(d)
    if n > limits.max_tensor_elements:
        raise ModelError(f"{filename!r}: the tensor {where} has {n:,} elements; at most "
                         f"{limits.max_tensor_elements:,} are accepted in one tensor.")
    stored = _stored_elements(t)
    if stored is not None and stored != n:
        raise _damaged(filename, f"the tensor {where} declares {n:,} elements but stores {stored:,}")
    return n


def _stored_elements(t: Any) -> int | None:
    """Elements a TensorProto stores (None when its type is not one this check knows)."""
    if t.HasField("raw_data") or t.raw_data:
        size = _ITEM_BYTES.get(int(t.data_type))
        return None if size is None else len(t.raw_data) // size
    for name in ("float_data", "double_data", "int32_data", "int64_data", "uint64_data", "string_data"):
        k = len(getattr(t, name))
        if k:
            return k // 2 if int(t.data_type) in (14, 15) and name in ("float_data", "double_data") else k
    return 0


def _external(t: Any) -> bool:
    return int(t.data_location) == 1 or len(t.external_data) > 0


def _attribute_tensors(node: Any) -> list[tuple[str, Any]]:
    out = []
    for a in node.attribute:
        if a.HasField("t"):
            out.append((a.name, a.t))
        out.extend((a.name, t) for t in a.tensors)
        if a.HasField("sparse_tensor"):
            out.extend([(a.name, a.sparse_tensor.values), (a.name, a.sparse_tensor.indices)])
        for s in a.sparse_tensors:
            out.extend([(a.name, s.values), (a.name, s.indices)])
    return out


def _check_tensors(model: ModelLike, filename: str, limits: OnnxLimits) -> None:
    """External data refused, every tensor within the budget."""
    g = model.graph
    tensors: list[tuple[str, Any]] = [(f"initializer {t.name!r}", t) for t in g.initializer]
    for s in g.sparse_initializer:
        tensors += [(f"sparse initializer {s.values.name!r}", s.values), ("sparse initializer indices", s.indices)]
    for node in g.node:
        tensors += [(f"attribute {a!r} of node {node.name or node.op_type!r}", t) for a, t in _attribute_tensors(node)]
    for f in model.functions:
        for node in f.node:
            tensors += [(f"attribute {a!r} of function {f.name!r}", t) for a, t in _attribute_tensors(node)]
    total = 0
    for where, t in tensors:
        if _external(t):
            raise UnsupportedModelError(
                f"{filename!r} keeps the data of its {where} in a file beside the model (external data, "
                f"{_location(t)}). Such a model makes the reader open paths on this server, so it is not read. Save "
                "it as one file: onnx.save_model(model, 'model.onnx', save_as_external_data=False) (models under 2 GB).")
    for where, t in tensors:
        total += _tensor_elements(t, filename, limits, where)
    if total > limits.max_initializer_elements:
        raise ModelError(f"{filename!r} stores {total:,} weights; ONNX models are accepted with at most "
                         f"{limits.max_initializer_elements:,}.")


def _location(t: Any) -> str:
    for e in t.external_data:
        if e.key == "location":
            return f"location {e.value[:80]!r}"
    return "no location given"


def _check_graph(model: ModelLike, filename: str, limits: OnnxLimits) -> None:
    g = model.graph
    if len(g.node) > limits.max_nodes:
        raise ModelError(f"{filename!r} has {len(g.node):,} graph nodes; ONNX models are accepted with at most "
                         f"{limits.max_nodes:,}.")
    if len(model.functions):
        raise UnsupportedModelError(f"{filename!r} defines its own functions ({model.functions[0].name!r}, …), "
                                    "custom operators this reader does not run. Export the model with standard "
                                    "ONNX operators only.")
    opsets = {}
    for o in model.opset_import:
        dom = o.domain or ""
        if dom not in _DOMAINS:
            raise UnsupportedModelError(
                f"{filename!r} uses operators of the custom domain {dom!r}; only the standard domains ai.onnx and "
                "ai.onnx.ml are accepted. Export the model without custom or runtime-specific operators.")
        opsets[_DOMAINS[dom]] = int(o.version)
    tree_nodes = 0
    for node in g.node:
        dom = node.domain or ""
        if dom not in _DOMAINS or _DOMAINS[dom] not in opsets:
            raise UnsupportedModelError(
                f"{filename!r} has the operator {node.op_type!r} of the domain {dom!r}, which is not a standard "
                "ONNX domain (or not imported by the model). Only ai.onnx and ai.onnx.ml operators are accepted.")
        graphs = [a.name for a in node.attribute if a.HasField("g") or len(a.graphs)]
        if node.op_type in _SUBGRAPH_OPS or graphs:
            raise UnsupportedModelError(
                f"{filename!r} has a {node.op_type} node with subgraphs (control flow: loops or branches); graphs "
                "with If, Loop, Scan or other subgraphs are not accepted. Export the model without control flow.")
        if node.op_type in TREE_OPS:
            tree_nodes += tree_op_nodes(node)
    if tree_nodes > limits.max_tree_nodes:
        raise ModelError(f"{filename!r} has {tree_nodes:,} tree nodes (counted in the file before any is read); "
                         f"ONNX tree ensembles are accepted with at most {limits.max_tree_nodes:,}.")
    inits = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if not inputs:
        raise UnsupportedModelError(f"{filename!r} has no input: it predicts the same for every row.")
    for i in inputs:
        _input_shape(i, filename, limits)
    for o in g.output:
        _output_kind(o, filename)


def _entries(a: Any) -> int:
    """How many values an attribute holds, from the protobuf's repeated fields (nothing converted)."""
    if a.HasField("t"):
        n = 1
        for d in a.t.dims:
            n *= int(d)
        return n
    return max(len(a.ints), len(a.floats), len(a.strings))


def tree_op_nodes(node: NodeProto) -> int:
    """The nodes a tree-ensemble operator's trees have, counted from the lengths of its arrays
    before anything is read or built: the longest ``nodes_*`` array (opset 5: plus its
    ``leaf_*`` arrays, leaves being listed apart), or its longest leaf-weight array
    (``class_*`` / ``target_*``) when that is longer."""
    longest: dict[str, int] = {}
    for a in node.attribute:
        group = a.name.split("_", 1)[0]
        longest[group] = max(longest.get(group, 0), _entries(a))
    nodes = longest.get("nodes", 0) + longest.get("leaf", 0)
    return max(nodes, longest.get("class", 0), longest.get("target", 0))


def _input_shape(vi: Any, filename: str, limits: OnnxLimits) -> tuple[str, tuple[int | None, ...]]:
    """(element type, shape) of a graph input that table columns can feed."""
    which = vi.type.WhichOneof("value")
    if which != "tensor_type":
        kind = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional value",
                "sparse_tensor_type": "a sparse tensor"}.get(which or "", "of no declared type")
        raise UnsupportedModelError(f"{filename!r} takes its input {vi.name!r} as {kind}; only tensors of numbers "
                                    "or strings (table columns) can be fed.")
    tt = vi.type.tensor_type
    elem = ELEM_TYPES.get(int(tt.elem_type), f"type {int(tt.elem_type)}")
    if elem not in _INPUT_TYPES:
        raise UnsupportedModelError(f"{filename!r} takes its input {vi.name!r} as {elem} values; table columns give "
                                    "numbers (float, double, int64, int32, bool) or strings.")
    if not tt.HasField("shape"):
        raise UnsupportedModelError(f"{filename!r} takes its input {vi.name!r} with no declared shape; re-export "
                                    "it with a shape [None, n_columns].")
    dims: tuple[int | None, ...] = tuple(
        int(d.dim_value) if d.WhichOneof("value") == "dim_value" else None for d in tt.shape.dim)
    if not 1 <= len(dims) <= 2 or (len(dims) == 2 and dims[1] is None):
        raise UnsupportedModelError(
            f"{filename!r} takes its input {vi.name!r} with the shape {_shape_text(dims)}; table rows are fed as "
            "[rows, columns] with a fixed number of columns (an image or a sequence input cannot be fed from a table).")
    if len(dims) == 2 and not 1 <= int(dims[1] or 0) <= limits.max_input_columns:
        raise UnsupportedModelError(f"{filename!r} takes its input {vi.name!r} with {dims[1]} columns.")
    return elem, dims


def _shape_text(dims: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _output_kind(vi: Any, filename: str) -> str:
    which = vi.type.WhichOneof("value")
    if which == "tensor_type":
        return f"tensor[{ELEM_TYPES.get(int(vi.type.tensor_type.elem_type), '?')}]"
    if which == "sequence_type":
        inner = vi.type.sequence_type.elem_type
        if inner.WhichOneof("value") == "map_type":
            return "zipmap"
    if which is None:                       # older converters leave some outputs untyped
        return "tensor[?]"
    raise UnsupportedModelError(f"{filename!r} gives its output {vi.name!r} as a {which.replace('_type', '')}; "
                                "only tensors and ZipMap's probabilities are read.")


def attributes(node: NodeProto, wire: Sequence[Any] | None = None) -> dict[str, Any]:
    """A node's attributes as Python values: repeated numbers as numpy arrays (``ints`` int64,
    ``floats`` float32), tensors as numpy arrays, strings as a sequence of bytes (a list, or a
    numpy bytes array when long), scalars as they are. ``wire``: each attribute's wire bytes as
    they lie in the file (:func:`node_attribute_bytes`), read instead of serializing it again."""
    from onnx import AttributeProto, helper, numpy_helper

    out: dict[str, Any] = {}
    if wire is not None and len(wire) != len(node.attribute):
        wire = None
    for k, a in enumerate(node.attribute):
        if a.HasField("t"):
            out[a.name] = numpy_helper.to_array(a.t)
        elif a.type in (AttributeProto.INTS, AttributeProto.FLOATS):
            out[a.name] = _numbers(a, "ints" if a.type == AttributeProto.INTS else "floats",
                                   None if wire is None else wire[k])
        elif a.type == AttributeProto.STRINGS and len(a.strings) >= _WIRE_BULK:
            out[a.name] = _strings(a, None if wire is None else wire[k])
        else:
            out[a.name] = helper.get_attribute_value(a)
    return out


def node_attribute_bytes(data: bytes, index: int) -> list[memoryview] | None:
    """The wire bytes of each attribute of the graph's node ``index``, as they lie in the model
    file ``data`` (ModelProto's graph, field 7; its nodes, field 1; their attributes, field 5), in
    order; None when the file gives the graph more than once (protobuf merges the copies) or is
    not read here. A slice of the file costs nothing; serializing a 500-tree ensemble's
    attributes again took a sixth of their reading."""
    try:
        graph = _payloads(memoryview(data), _GRAPH)
        if len(graph) != 1:
            return None
        nodes = _payloads(graph[0], 1)
        return _payloads(nodes[index], 5) if 0 <= index < len(nodes) else None
    except ValueError:
        return None


def _payloads(buf: memoryview, number: int) -> list[memoryview]:
    """The payloads of a message's fields ``number`` (length-delimited in a message protobuf has
    read), in order: views of ``buf``."""
    return [buf[body:end] for num, _, body, end in _fields(buf) if num == number]


_WIRE_BULK = 64               # repeated numbers of an attribute read from its wire bytes from this many on
_INTS_KEY, _FLOATS_KEY = 8 << 3, 7 << 3     # AttributeProto.ints (field 8), .floats (field 7), wire type 0


def _numbers(a: Any, kind: str, wire: Any = None) -> np.ndarray:
    """An attribute's repeated ``ints`` or ``floats`` as a numpy array. Long ones (a tree
    ensemble's node arrays: hundreds of thousands of values) are decoded from the attribute's
    wire bytes by numpy, a converted Python number each costing more than the whole decoding;
    their count must be protobuf's own, else (a layout no serializer writes) its lists are read."""
    values = getattr(a, kind)
    dtype = np.int64 if kind == "ints" else np.float32
    if len(values) >= _WIRE_BULK:
        got = _wire_numbers(a.SerializeToString() if wire is None else wire, kind)
        if got is not None and got.size == len(values):
            return got
    return np.array(values, dtype=dtype)


def _wire_numbers(buf: bytes, kind: str) -> np.ndarray | None:
    """The values of the repeated field ``kind`` in an AttributeProto's wire bytes, in order
    (unpacked runs as serializers write them, or packed), other fields skipped; None when the
    bytes hold it in more than a few runs or in a form not read here."""
    key = _INTS_KEY if kind == "ints" else _FLOATS_KEY
    b = np.frombuffer(buf, dtype=np.uint8)
    parts: list[np.ndarray] = []
    i = 0
    try:
        while i < len(buf):
            tag, j = _varint(buf, i)
            if tag >> 3 != key >> 3:
                i = _skip(buf, tag & 7, j)
                continue
            if len(parts) == 4:
                return None
            run, i = (_int_run if kind == "ints" else _float_run)(buf, b, i, j, tag & 7)
            parts.append(run)
    except ValueError:
        return None
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64 if kind == "ints" else np.float32)


_STRINGS_KEY = 9 << 3 | 2     # AttributeProto.strings (field 9), length-delimited


def _strings(a: Any, wire: Any = None) -> Any:
    """An attribute's long repeated ``strings`` (a tree ensemble's node modes) as a numpy bytes
    array decoded from its wire bytes, or protobuf's own list when they are not in the one run
    serializers write, or a string ends in a NUL byte (a numpy bytes array would drop it)."""
    got = _wire_strings(a.SerializeToString() if wire is None else wire)
    return got if got is not None and got.size == len(a.strings) else list(a.strings)


def _wire_strings(buf: bytes) -> np.ndarray | None:
    """The strings of an AttributeProto's wire bytes when they are one run of fields of at most
    127 bytes each, other fields before and after (see :func:`_strings`); else None."""
    b = np.frombuffer(buf, dtype=np.uint8)
    i = 0
    try:
        while i < len(buf):
            tag, j = _varint(buf, i)
            if tag == _STRINGS_KEY:
                return _compiled_strings(buf, i) if _wire is not None else _string_run(b, i)
            i = _skip(buf, tag & 7, j)
    except ValueError:
        return None
    return np.zeros(0, dtype="S1")


def _compiled_strings(buf: bytes, start: int) -> np.ndarray | None:
    """:func:`_string_run` by the compiled walk of the run (``_wire.string_run``): the same
    strings, and a key byte inside a string is read as the string's byte it is."""
    got = _wire.string_run(buf, start, _STRINGS_KEY)
    return None if got is None else np.frombuffer(got[0], dtype=f"S{got[1]}")


def _string_run(b: np.ndarray, start: int) -> np.ndarray | None:
    """The run of string fields from ``b[start]`` (a key byte, a length byte, the bytes): each
    field's end must be the next key byte found, the run ending where no key follows; None when
    a key byte lies inside a string of the run (no key can be told from it then), a string is
    longer than 127 bytes or ends in NUL."""
    keys = np.flatnonzero(b[start:] == _STRINGS_KEY) + start
    sizes = b[np.minimum(keys + 1, b.size - 1)].astype(np.int64)
    ends = keys + 2 + sizes
    chained = ends[:-1] == keys[1:]
    m = chained.size + 1 if chained.all() else int(np.argmin(chained)) + 1
    if np.any(sizes[:m] > 127) or ends[m - 1] > b.size or (m <= chained.size and ends[m - 1] > keys[m]):
        return None
    keys, sizes = keys[:m], sizes[:m]
    width = max(int(sizes.max()), 1)
    if np.any(b[keys + 1 + sizes][sizes > 0] == 0):
        return None
    rows = np.lib.stride_tricks.sliding_window_view(np.concatenate([b, np.zeros(width, dtype=np.uint8)]), width)
    block = rows[keys + 2] * (np.arange(width)[None, :] < sizes[:, None])
    return block.astype(np.uint8).view(f"S{width}").ravel()


def _skip(buf: bytes | memoryview, wire: int, i: int) -> int:
    """The index after a field's payload of wire type ``wire`` starting at ``buf[i:]``."""
    if wire == 0:
        return _varint(buf, i)[1]
    if wire == 2:
        n, body = _varint(buf, i)
        return body + n
    if wire in (1, 5):
        return i + (8 if wire == 1 else 4)
    raise ValueError(f"wire type {wire}")


def _float_run(buf: bytes, b: np.ndarray, start: int, body: int, wire: int) -> tuple[np.ndarray, int]:
    """Floats from ``b[start:]``: one packed field, or the run of unpacked ones (a key byte
    and four bytes each); with the index after them."""
    if wire == 2:
        n, at = _varint(buf, body)
        if n % 4 or at + n > b.size:
            raise ValueError("a packed float field of a length no floats fill")
        return b[at:at + n].view("<f4").astype(np.float32), at + n
    if wire != 5 or body != start + 1:
        raise ValueError("not a float")
    if _wire is not None:
        return _compiled_run(_wire.float_run, buf, start, _FLOATS_KEY | 5, np.float32, 5)
    rows = (b.size - start) // 5
    keys = b[start:start + 5 * rows:5] == (_FLOATS_KEY | 5)
    m = rows if keys.all() else int(np.argmin(keys))
    if m == 0:
        raise ValueError("no float")
    block = b[start:start + 5 * m].reshape(m, 5)[:, 1:]
    return np.ascontiguousarray(block).view("<f4").ravel().astype(np.float32), start + 5 * m


def _int_run(buf: bytes, b: np.ndarray, start: int, body: int, wire: int) -> tuple[np.ndarray, int]:
    """Integers from ``b[start:]``: one packed field, or the run of unpacked ones (a key byte,
    then a value whose last byte is the first below 0x80); with the index after them."""
    if wire == 2:
        n, at = _varint(buf, body)
        values, ends = _varints(b[at:at + n])
        if n and (ends.size == 0 or ends[-1] != n):
            raise ValueError("a packed int field cut inside a value")
        return values, at + n
    if wire != 0 or body != start + 1:
        raise ValueError("not an integer")
    if _wire is not None:
        return _compiled_run(_wire.int_run, buf, start, _INTS_KEY, np.int64, 2)
    r = b[start:]
    ends = np.flatnonzero(r < 0x80)              # the keys (one byte each) and the values' last bytes
    last = ends[1::2]
    keys = ends[0::2][:last.size]
    good = (r[keys] == _INTS_KEY) & (keys == np.concatenate(([0], last[:-1] + 1)))
    m = int(good.size if good.all() else np.argmin(good))
    if m == 0:
        raise ValueError("no integer")
    keys, last = keys[:m], last[:m]
    return _varint_values(r, keys + 1, last), start + int(last[-1]) + 1


def _compiled_run(run: Any, buf: bytes, start: int, key: int, dtype: Any, least: int) -> tuple[np.ndarray, int]:
    """The run of unpacked fields from ``buf[start]`` by the compiled walk (``_wire.int_run`` or
    ``float_run``; each field at least ``least`` bytes), with the index after it."""
    out = np.empty((len(buf) - start) // least, dtype=dtype)
    count, end = run(buf, start, key, out)
    if count == 0:
        raise ValueError("no value")
    return out[:count].copy() if count < out.size // 2 else out[:count], end


def _varint_values(b: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The int64 values of the varints ``b[first[k]:last[k] + 1]`` (protobuf's: low groups of
    seven bits first, truncated to 64 bits)."""
    size = last - first + 1
    if size.size and size.max() > 10:
        raise ValueError("a varint of more than 10 bytes")
    value = b[last].astype(np.uint64)
    for k in range(1, int(size.max()) if size.size else 0):
        value = np.where(size > k, (value << np.uint64(7)) | (b[last - k] & 0x7F).astype(np.uint64), value)
    return value.view(np.int64)


def _varints(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints ``b`` holds from its start, up to its last complete one: (values as int64,
    the index after each)."""
    last = np.flatnonzero(b < 0x80)
    first = np.concatenate(([0], last[:-1] + 1)).astype(np.int64)
    return _varint_values(b, first, last), last + 1


#: output kinds that hold a predicted label, and those that hold numbers (probabilities, scores, values)
LABEL_KINDS = ("tensor[int64]", "tensor[string]", "tensor[int32]")
SCORE_KINDS = ("tensor[float]", "tensor[double]", "zipmap", "tensor[float16]", "tensor[?]")


def _outputs_text(outs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n!r} ({k})" for n, k in outs[:8]) + (" …" if len(outs) > 8 else "")


def _classify_outputs(model: ModelLike, filename: str, output: str | None = None) -> tuple[str | None, str | None]:
    """(label output, scores output) by type: an integer or string tensor is a label, a float
    tensor or ZipMap's sequence holds numbers. Without ``output`` the choice must be clear (at
    most one of each); with it, the analyst's named output is what the model is run on: a
    label output alone (labels only), or a numbers output with the graph's one label output,
    if it has one (a classifier's probabilities), else as a regressor's value. Nothing is guessed."""
    outs = [(o.name, _output_kind(o, filename)) for o in model.graph.output]
    labels = [n for n, k in outs if k in LABEL_KINDS]
    scores = [n for n, k in outs if k in SCORE_KINDS]
    if output is not None:
        return _named_output(outs, labels, scores, output, filename)
    if not labels and not scores:
        raise UnsupportedModelError(
            f"{filename!r} has the outputs {[n for n, _ in outs][:6]} of kinds {[k for _, k in outs][:6]}; none is "
            "a predicted label (integers or strings) or scores (numbers). Export the model with its prediction as "
            "an output.")
    if len(labels) > 1 or len(scores) > 1:
        candidates = [(n, k) for n, k in outs if n in labels or n in scores]
        raise UnsupportedModelError(
            f"{filename!r} has {len(candidates)} outputs that could be its prediction: {_outputs_text(candidates)}. "
            "Which one is cannot be known from the file, and none is guessed. Name the one to run it on: "
            f"core.load_model(path, output=NAME), NAME one of {', '.join(repr(n) for n, _ in candidates[:8])} (a "
            "label output runs the model on its labels; an output of numbers on those numbers, as probabilities "
            "beside the graph's one label output, else as the value of a regressor); or export the model with its "
            "label and probabilities (or its value) as its only outputs.")
    return (labels[0] if labels else None), (scores[0] if scores else None)


def _named_output(outs: list[tuple[str, str]], labels: list[str], scores: list[str], output: str,
                  filename: str) -> tuple[str | None, str | None]:
    """(label, scores) when the analyst named the output the model is run on."""
    kinds = dict(outs)
    if output not in kinds:
        raise UnsupportedModelError(f"{filename!r} has no output {output!r}; its outputs are "
                                    f"{_outputs_text(outs)}. Name one of them with output=.")
    if output in labels:
        return output, None
    if output not in scores:
        raise UnsupportedModelError(f"{filename!r}'s output {output!r} holds {kinds[output]} values, neither a label "
                                    "(integers or strings) nor numbers; name another output: "
                                    f"{_outputs_text([o for o in outs if o[0] in labels + scores])}.")
    if len(labels) > 1:
        raise UnsupportedModelError(
            f"{filename!r} has several label outputs ({', '.join(map(repr, labels[:6]))}), so which label goes with "
            f"the numbers in {output!r} cannot be known; name the label output instead (output={labels[0]!r}).")
    return (labels[0] if labels else None), output


def _varint(buf: bytes | memoryview, i: int) -> tuple[int, int]:
    """A protobuf varint at ``buf[i:]``: (value, index after it)."""
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("a varint runs past the end")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(buf: bytes | memoryview) -> list[tuple[int, int, int, int]]:
    """The top-level fields of a protobuf message as (number, start, payload start, end);
    the payload is ``buf[payload start:end]`` for a length-delimited field."""
    out, i = [], 0
    while i < len(buf):
        start = i
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(buf, i)
            body = i
        elif wire == 2:
            n, body = _varint(buf, i)
            i = body + n
        elif wire in (1, 5):
            body = i
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(buf):
            raise ValueError("a field runs past the end")
        out.append((key >> 3, start, body, i))
    return out


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


_GRAPH, _OUTPUT = 7, 12       # ModelProto.graph, GraphProto.output


def keep_outputs(data: bytes | bytearray, output: str, filename: str = "model.onnx") -> bytes:
    """The ONNX file with only the outputs the model is run on when the analyst names
    ``output`` (see :func:`_classify_outputs`): the same graph, the other outputs no longer
    graph outputs, so that every later reader (the sandbox's child, the worker) reads the
    choice from the bytes it is given. Only the outputs' descriptions are parsed (the
    protobuf's fields are walked, the graph itself is not read here: the file is checked
    where it is read); raises :class:`UnsupportedModelError` when ``output`` cannot be the
    prediction, :class:`ModelError` when the bytes are not a protobuf."""
    buf = bytes(data)
    graphs, outs = _graph_outputs(buf, filename)
    view = SimpleNamespace(graph=SimpleNamespace(output=outs))
    keep = set(_classify_outputs(view, filename, output)) - {None}
    parts, at = [], 0
    for _, start, body, end in graphs:
        inner = buf[body:end]
        kept = b"".join(inner[s:e] for num, s, b, e in _fields(inner)
                        if num != _OUTPUT or _output_name(inner[b:e]) in keep)
        parts += [buf[at:start], _encode_varint(_GRAPH << 3 | 2), _encode_varint(len(kept)), kept]
        at = end
    return b"".join(parts + [buf[at:]])


def _graph_outputs(buf: bytes, filename: str) -> tuple[list[tuple[int, int, int, int]], list[Any]]:
    """The graph fields of an ONNX file and its outputs' descriptions, the rest unread."""
    from onnx import ValueInfoProto

    try:
        graphs = [f for f in _fields(buf) if f[0] == _GRAPH]
        outs = []
        for _, _, body, end in graphs:
            for num, _, o_body, o_end in _fields(buf[body:end]):
                if num == _OUTPUT:
                    vi = ValueInfoProto()
                    vi.ParseFromString(buf[body + o_body:body + o_end])
                    outs.append(vi)
    except Exception as exc:  # noqa: BLE001 - a damaged protobuf: ValueError above, protobuf's DecodeError
        raise _damaged(filename, f"the protobuf does not parse ({str(exc)[:120]})") from None
    if not graphs:
        raise _damaged(filename, "it holds no graph")
    return graphs, outs


def output_names(data: bytes | bytearray, filename: str = "model.onnx") -> list[tuple[str, str]]:
    """``(name, kind)`` of each output of an ONNX file, read from the outputs' descriptions
    alone (the graph is not read: the page asks which one to analyse before loading)."""
    return [(vi.name, _output_kind(vi, filename)) for vi in _graph_outputs(bytes(data), filename)[1]]


def _output_name(payload: bytes) -> str:
    from onnx import ValueInfoProto

    vi = ValueInfoProto()
    vi.ParseFromString(payload)
    return vi.name


def inspect_onnx(model_or_bytes: ModelLike, filename: str = "model.onnx", limits: OnnxLimits = LIMITS,
                 output: str | None = None) -> OnnxGraphInfo:
    """What the graph is (see :class:`OnnxGraphInfo`), from a checked ``ModelProto`` or from bytes;
    ``output`` names the output the model is run on when the graph has several candidates."""
    model = read_onnx(model_or_bytes, filename, limits) if isinstance(model_or_bytes, (bytes, bytearray)) \
        else model_or_bytes
    g = model.graph
    inits = {t.name for t in g.initializer}
    inputs = []
    for vi in g.input:
        if vi.name in inits:
            continue
        elem, dims = _input_shape(vi, filename, limits)
        inputs.append((vi.name, elem, dims))
    outputs = tuple((o.name, _output_kind(o, filename)) for o in g.output)
    label, scores = _classify_outputs(model, filename, output)
    ops = Counter(n.op_type for n in g.node)
    trees = [op for op in TREE_OPS if ops.get(op)]
    tree_op = None
    if len(trees) == 1 and ops[trees[0]] == 1 and all(op in WRAPPER_OPS or op in TREE_OPS for op in ops):
        tree_op = trees[0]
    n_bytes = n_elem = 0
    for t in g.initializer:
        k = int(np.prod(list(t.dims), dtype=np.int64)) if len(t.dims) else 1
        n_elem += k
        n_bytes += len(t.raw_data) if t.raw_data else k * _ITEM_BYTES.get(int(t.data_type), 8)
    opsets = {_DOMAINS[o.domain or ""]: int(o.version) for o in model.opset_import}
    return OnnxGraphInfo(inputs=tuple(inputs), outputs=outputs, label=label, scores=scores, opsets=opsets,
                         n_nodes=len(g.node), ops=dict(ops), initializer_bytes=int(n_bytes),
                         initializer_elements=int(n_elem), tree_op=tree_op,
                         producer=f"{model.producer_name} {model.producer_version}".strip())


def numpy_dtype(elem: str) -> Any:
    """The numpy dtype that feeds an input of ONNX element type ``elem``."""
    return {"float": np.float32, "double": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_,
            "float16": np.float16, "string": object}[elem]
