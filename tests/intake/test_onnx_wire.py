"""A tree ensemble's node attributes read from protobuf's wire bytes
(core/intake/parsing/onnx_graph.py: the compiled runs of core/intake/parsing/_wire.c, and numpy
where it is not built) give protobuf's own values, whatever the bytes hold: values of every size
(negative ints are ten-byte varints), strings holding the key byte, strings ending in NUL or too
long for the bulk reading, packed fields, fields split in runs, other fields between them."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import AttributeProto, helper

from core.intake.parsing import onnx_graph

pytestmark = pytest.mark.skipif(onnx_graph._wire is None, reason="the compiled kernel is not built")

INTS = [[0] * 70, list(range(200)), [-1, -(2**63), 2**63 - 1, 127, 128, 16383, 16384] * 20,
        np.random.default_rng(0).integers(-(2**40), 2**40, 500).tolist()]
FLOATS = [[0.5] * 64, np.random.default_rng(1).normal(size=300).astype(np.float32).tolist(),
          [float("inf"), float("-inf"), 1e-45, -0.0, 3.4e38] * 20]
STRINGS = [[b"BRANCH_LEQ", b"LEAF"] * 40, [b"J", b"JJ", b"", b"aJb"] * 30,          # J: the strings key byte
           [b"LEAF"] * 63 + [b"ends in NUL\0"], [b"x" * 127, b"y"] * 40, [b"x" * 128] + [b"LEAF"] * 70]


def _decoded(a: AttributeProto, kind: str, compiled: bool, monkeypatch) -> object:
    monkeypatch.setattr(onnx_graph, "_wire", onnx_graph._wire if compiled else None)
    return onnx_graph._strings(a) if kind == "strings" else onnx_graph._numbers(a, kind)


def _same(got: object, want: list, kind: str) -> None:
    if kind == "strings":
        assert [bytes(s) for s in got] == want
    else:
        dtype = np.int64 if kind == "ints" else np.float32
        assert isinstance(got, np.ndarray) and got.dtype == dtype
        np.testing.assert_array_equal(got, np.array(want, dtype=dtype))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("kind,values", [("ints", v) for v in INTS] + [("floats", v) for v in FLOATS]
                         + [("strings", v) for v in STRINGS])
def test_wire_values_are_protobufs_own(kind, values, compiled, monkeypatch):
    a = helper.make_attribute("nodes_x", values)
    _same(_decoded(a, kind, compiled, monkeypatch), list(getattr(a, kind)), kind)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("kind", ["ints", "floats"])
def test_fields_in_runs_packed_or_between_others_are_read_in_order(kind, compiled, monkeypatch):
    """Bytes no serializer of ours writes but protobuf reads: a packed field, the run split by
    other fields (a name, a doc string), in up to four runs; more runs fall back to protobuf's list."""
    from google.protobuf.internal import encoder

    values = list(range(100)) if kind == "ints" else [float(v) / 4 for v in range(100)]
    field = 8 if kind == "ints" else 7
    make = encoder.Int64Encoder if kind == "ints" else encoder.FloatEncoder
    name = b"\x0a\x07nodes_x"                                      # name (field 1)
    doc = b"\x6a\x01d"                                             # doc_string (field 13), between the runs
    for cuts in ([0, 100], [0, 30, 55, 100], [0, 20, 40, 60, 80, 100]):
        out: list[bytes] = [name]
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            make(field, True, False)(out.append, values[lo:hi], False)
            out.append(doc)
        for packed in (False, True):
            if packed:
                out = [name]
                make(field, True, True)(out.append, values, False)
            a = AttributeProto()
            a.ParseFromString(b"".join(out))
            assert list(getattr(a, kind)) == values
            _same(_decoded(a, kind, compiled, monkeypatch), values, kind)


@pytest.mark.parametrize("run,key,dtype,least", [("int_run", 0x40, np.int64, 2), ("float_run", 0x3D, np.float32, 5)])
def test_the_compiled_runs_refuse_wrong_buffers_and_stop_at_cut_fields(run, key, dtype, least):
    fn = getattr(onnx_graph._wire, run)
    buf = bytes(([key, 1] if run == "int_run" else [key, 1, 0, 0, 0]) * 3)
    with pytest.raises(ValueError):
        fn(buf, 0, key, np.empty(10, dtype=np.float64))                  # out of another type
    with pytest.raises(ValueError):
        fn(buf, 0, key, np.empty((2, 5), dtype=dtype))                   # not 1-D
    with pytest.raises(ValueError):
        fn(buf, len(buf) + 1, key, np.empty(10, dtype=dtype))            # start outside
    with pytest.raises(ValueError):
        fn(buf, 0, 256, np.empty(10, dtype=dtype))                       # no key byte
    with pytest.raises((ValueError, BufferError, TypeError)):
        fn(buf, 0, key, np.empty(10, dtype=dtype)[::2])                  # not contiguous
    count, end = fn(buf[:-1], 0, key, np.empty(10, dtype=dtype))        # the last field cut: not read
    assert (count, end) == (2, 2 * least)
    with pytest.raises(ValueError, match="too short"):
        fn(buf, 0, key, np.empty(1, dtype=dtype))


def test_a_varint_cut_by_the_end_is_not_read_and_one_too_long_is_refused():
    fn, key, out = onnx_graph._wire.int_run, 0x40, np.empty(10, dtype=np.int64)
    assert fn(bytes([key]) + b"\xff" * 12, 0, key, out) == (0, 0)                   # cut: no value
    with pytest.raises(ValueError, match="more than 10 bytes"):
        fn(bytes([key]) + b"\xff" * 12 + b"\x01", 0, key, out)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_node_modes_are_matched_to_their_names_exactly(compiled, monkeypatch):
    from core.intake.parsing import onnx_trees

    monkeypatch.setattr(onnx_trees, "_wire", onnx_trees._wire if compiled else None)
    names = list(onnx_trees.MODES) + ["BRANCH_LE", "LEAFS", "", "leaf", "BRANCH_LEQ\0x", "J" * 40]
    values = np.array([n.encode() for n in names] * 3, dtype="S40")
    want = [onnx_trees.MODES.index(n) if n in onnx_trees.MODES else -1 for n in names] * 3
    assert onnx_trees._name_codes(values, onnx_trees.MODES).tolist() == want
    short = np.array([n.encode() for n in onnx_trees.MODES], dtype="S13")      # as wide as the longest
    assert onnx_trees._name_codes(short, onnx_trees.MODES).tolist() == list(range(len(onnx_trees.MODES)))


def test_a_graphs_attributes_are_read_in_the_files_bytes_and_a_merged_graph_is_serialized_again():
    """The tree node's attributes are read where they lie in the file; a file giving the graph
    twice (protobuf merges the two: their nodes one list) is read from protobuf's own message."""
    import onnx
    from onnx import TensorProto

    from core.intake.parsing.onnx_graph import attributes, node_attribute_bytes

    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", nodes_treeids=[0] * 80,
                            nodes_nodeids=list(range(80)), nodes_modes=["LEAF"] * 80, nodes_values=[0.5] * 80)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["z"]), node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])])
    data = helper.make_model(graph).SerializeToString()
    wire = node_attribute_bytes(data, 1)
    assert wire is not None and [bytes(w) for w in wire] == [a.SerializeToString() for a in node.attribute]
    assert node_attribute_bytes(data, 2) is None and node_attribute_bytes(data[:-3], 1) is None
    from google.protobuf.internal import encoder

    again = graph.SerializeToString()
    merged = data + b"\x3a" + encoder._VarintBytes(len(again)) + again     # ModelProto.graph (field 7) once more
    proto = onnx.load_from_string(merged)
    assert len(proto.graph.node) == 4 and node_attribute_bytes(merged, 1) is node_attribute_bytes(merged, 3) is None
    got = attributes(proto.graph.node[3], node_attribute_bytes(merged, 3))
    assert got["nodes_nodeids"].tolist() == list(range(80)) and got["nodes_modes"].tolist() == [b"LEAF"] * 80


def test_the_tree_kernels_refuse_wrong_buffers_and_places_out_of_range():
    """preorder, scatter and name_codes check what they are handed: the types and lengths of
    their arrays, and every index they follow or write at, a ValueError rather than a read or
    write outside an array."""
    w = onnx_graph._wire
    leaf = np.array([False, True, True])
    left, right, roots = np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([0])
    owner, pos, counts, bad = np.empty(3, np.int64), np.empty(3, np.int64), np.empty(1, np.int64), np.empty(1, bool)
    w.preorder(leaf, left, right, roots, owner, pos, counts, bad)
    assert owner.tolist() == [0, 0, 0] and pos.tolist() == [0, 1, 2] and counts.tolist() == [3] and not bad[0]
    w.preorder(leaf, np.array([5, -1, -1]), right, roots, owner, pos, counts, bad)       # a child out of range
    assert bad[0]
    for args in ((leaf.astype(np.int64), left, right, roots, owner, pos, counts, bad),      # wrong types
                 (leaf, left.astype(np.int32), right, roots, owner, pos, counts, bad),
                 (leaf, left[:2], right, roots, owner, pos, counts, bad),                     # wrong lengths
                 (leaf, left, right, roots, owner, pos, counts[:0], bad)):
        with pytest.raises(ValueError):
            w.preorder(*args)
    w.preorder(leaf, left, right, roots, owner, pos, counts, bad)
    out = [np.full(3, -1, np.int32), np.full(3, -1, np.int32), np.full(3, -1, np.int32), np.full(3, np.nan),
           np.zeros(3, bool), np.zeros(6)]
    ins = [owner, pos, np.array([0]), leaf, left, right, np.array([4, 0, 0]), np.array([0.5, 0, 0]),
           np.array([True, False, False]), np.arange(6.0)]
    w.scatter(*ins, 2, *out)
    assert out[0].tolist() == [1, -1, -1] and out[1].tolist() == [2, -1, -1] and out[2].tolist() == [4, -1, -1]
    assert out[5].tolist() == [0, 0, 2, 3, 4, 5] and out[4].tolist() == [True, False, False]
    with pytest.raises(ValueError, match="out of range"):
        w.scatter(*ins[:2], np.array([1]), *ins[3:], 2, *out)                                # a place past the end
    with pytest.raises(ValueError, match="other lengths"):
        w.scatter(*ins, 3, *out)                                                             # values of another width
    with pytest.raises(ValueError):
        w.scatter(*ins, 2, *out[:3], out[3].astype(np.float32), *out[4:])
    with pytest.raises(ValueError):
        w.name_codes(np.array([b"LEAF"], dtype="S4"), 3, (b"LEAF",), np.empty(1, np.int64))   # not whole strings
    with pytest.raises(ValueError):
        w.name_codes(np.array([b"LEAF"], dtype="S4"), 4, (b"LEAF",), np.empty(2, np.int64))   # one code each
    with pytest.raises(ValueError):
        w.name_codes(np.array([b"LEAF"], dtype="S4"), 4, ("LEAF",), np.empty(1, np.int64))    # names as bytes


def _bound_edges() -> np.ndarray:
    """Thresholds at every edge of the float32 bounds: zeros, subnormals, the float32 limit and
    just past it, huge and infinite numbers, NaN, float32 values and their float64 neighbours."""
    f32 = np.float32
    tiny, big = float(np.finfo(f32).smallest_subnormal), float(np.finfo(f32).max)
    edges = [0.0, -0.0, tiny, -tiny, tiny / 2, 1e-40, big, -big, np.nextafter(big, np.inf), big * (1 + 2**-25),
             1e300, -1e300, np.inf, -np.inf, np.nan, 1.0, 0.1, -2.5, 16777217.0]
    rng = np.random.default_rng(2)
    r32 = rng.normal(scale=10.0 ** rng.integers(-30, 30, 400), size=400).astype(f32).astype(np.float64)
    return np.concatenate([edges, r32, np.nextafter(r32, np.inf), np.nextafter(r32, -np.inf),
                           rng.normal(size=200) * 1e5])


@pytest.mark.parametrize("tree_f32", [True, False])
def test_plain_bounds_are_numpys_at_every_edge_of_float32(tree_f32, monkeypatch):
    """The compiled ``plain_bounds`` gives numpy's plain-split flags, bounds (bit for bit) and
    features on every mode (the four plain ones, others, leaves), on columns of numbers read
    through float32 or not and on other columns, features out of range, and thresholds at every
    edge of float32's range."""
    from types import SimpleNamespace

    from core.intake.parsing import onnx_trees

    th = _bound_edges()
    n = th.size
    rng = np.random.default_rng(3)
    mode = rng.integers(0, len(onnx_trees.MODES), n)
    g = SimpleNamespace(leaf=mode == onnx_trees._LEAF, mode=mode, threshold=th, feature=rng.integers(-2, 6, n))
    columns = [SimpleNamespace(kind=k, through32=t, feature=f) for k, t, f in
               (("num", True, 0), ("num", False, 1), ("code", False, 2), ("num", True, 4), ("num", False, 3))]
    compiled = onnx_trees._plain_bounds(g, columns, tree_f32)
    monkeypatch.setattr(onnx_trees, "_wire", None)
    numpy_ = onnx_trees._plain_bounds(g, columns, tree_f32)
    for got, want in zip(compiled, numpy_):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert compiled[0].any() and not compiled[0].all() and np.isfinite(compiled[1]).any()
