"""ONNX graphs written by hand: every node mode, both opsets of the tree operators, double
thresholds, the output conventions that are refused, graphs that are not tree ensembles
(inspected and run, never parsed as trees) and hostile files (each refused with a message
before onnxruntime sees them, also through the sandbox)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_builders import affine_graph

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from core.errors import ModelError, UnsupportedModelError  # noqa: E402
from core.intake.io import load_model  # noqa: E402
from core.intake.models import from_model  # noqa: E402
from core.intake.parsing import probe_points  # noqa: E402
from core.intake.parsing.onnx_graph import inspect_onnx  # noqa: E402
from core.intake.parsing.onnx_runner import OnnxModel  # noqa: E402
from core.model.native import model_input  # noqa: E402

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def _model(nodes, inputs, outputs, ml=1, initializers=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", opset),
                                                                helper.make_opsetid("ai.onnx.ml", ml)])


def _random_tree(rng, depth, n_feat, modes, values_grid):
    """Nodes of one complete tree: (modes, feats, values, true ids, false ids, tracks, leaves)."""
    n_int = 2 ** depth - 1
    n = 2 ** (depth + 1) - 1
    m = [str(rng.choice(modes)) for _ in range(n_int)] + ["LEAF"] * (n - n_int)
    f = [int(rng.integers(n_feat)) for _ in range(n_int)] + [0] * (n - n_int)
    v = [float(rng.choice(values_grid)) for _ in range(n_int)] + [0.0] * (n - n_int)
    t = [2 * i + 1 for i in range(n_int)] + [0] * (n - n_int)
    fl = [2 * i + 2 for i in range(n_int)] + [0] * (n - n_int)
    tr = [int(rng.integers(2)) for _ in range(n_int)] + [0] * (n - n_int)
    return m, f, v, t, fl, tr, list(range(n_int, n))


def _regressor(modes, seed=0, n_trees=3, depth=4, double=False, as_tensor=False, agg="SUM", n_feat=3):
    rng = np.random.default_rng(seed)
    grid = np.round(np.linspace(-1, 1, 9), 3)
    attrs = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_modes", "nodes_featureids", "nodes_values",
                             "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                             "target_treeids", "target_nodeids", "target_ids", "target_weights")}
    for tree in range(n_trees):
        m, f, v, t, fl, tr, leaves = _random_tree(rng, depth, n_feat, modes, grid)
        attrs["nodes_treeids"] += [tree] * len(m)
        attrs["nodes_nodeids"] += list(range(len(m)))
        attrs["nodes_modes"] += m
        attrs["nodes_featureids"] += f
        attrs["nodes_values"] += v
        attrs["nodes_truenodeids"] += t
        attrs["nodes_falsenodeids"] += fl
        attrs["nodes_missing_value_tracks_true"] += tr
        attrs["target_treeids"] += [tree] * len(leaves)
        attrs["target_nodeids"] += leaves
        attrs["target_ids"] += [0] * len(leaves)
        attrs["target_weights"] += [float(w) for w in rng.normal(size=len(leaves)).round(4)]
    if as_tensor:
        attrs["nodes_values_as_tensor"] = nh.from_array(np.asarray(attrs.pop("nodes_values"), dtype=np.float64))
        attrs["target_weights_as_tensor"] = nh.from_array(np.asarray(attrs.pop("target_weights"), dtype=np.float64))
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", n_targets=1,
                            aggregate_function=agg, base_values=[0.25], **attrs)
    elem = TensorProto.DOUBLE if double else TensorProto.FLOAT
    return _model([node], [helper.make_tensor_value_info("X", elem, [None, n_feat])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])], ml=3 if as_tensor else 1)


def _agree(model_proto, name="m.onnx", extra_rows=None):
    model = load_model(model_proto.SerializeToString(), name)
    ens = from_model(model)                                  # verified on probe points, NaN included
    rows = probe_points(ens, 300, seed=5)
    grid = np.repeat(np.round(np.linspace(-1, 1, 9), 3), 3).reshape(-1, 3)
    near = np.vstack([grid, np.nextafter(grid, np.inf), np.nextafter(grid, -np.inf),
                      np.nextafter(grid.astype(np.float32), np.float32(np.inf)).astype(np.float64)])
    rows = np.vstack([rows, near] + ([extra_rows] if extra_rows is not None else []))
    theirs = model.predict(model_input(ens, rows))
    np.testing.assert_allclose(ens.predict(rows), theirs, rtol=1e-5, atol=1e-5)
    return ens, model


@pytest.mark.parametrize("mode", MODES + ["mixed"])
@pytest.mark.parametrize("double", [False, True], ids=["float", "double"])
def test_every_node_mode_as_onnxruntime_routes_it(mode, double):
    modes = MODES if mode == "mixed" else [mode]
    nan_rows = np.array([[np.nan, 0.0, 0.5], [0.125, np.nan, np.nan], [np.nan] * 3])
    ens, _ = _agree(_regressor(modes, seed=len(mode), double=double), extra_rows=nan_rows)
    assert ens.routes_missing


def test_double_thresholds_and_weights_as_tensors_with_average():
    ens, _ = _agree(_regressor(MODES, seed=3, double=True, as_tensor=True, agg="AVERAGE"))
    assert ens.aggregation == "mean"


def _to_v5(proto, members=None):
    """A TreeEnsembleRegressor rewritten as the opset-5 TreeEnsemble (leaves apart); ``members``
    {(tree, node): values} turns those nodes into BRANCH_MEMBER splits."""
    node = proto.graph.node[0]
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    code = {m: k for k, m in enumerate(MODES + ["BRANCH_MEMBER"])}
    idx, leaf_idx = {}, {}
    for t, i, m in zip(a["nodes_treeids"], a["nodes_nodeids"], a["nodes_modes"]):
        (leaf_idx if m == b"LEAF" else idx)[(t, i)] = len(leaf_idx if m == b"LEAF" else idx)
    weights = {(t, i): w for t, i, w in zip(a["target_treeids"], a["target_nodeids"], a["target_weights"])}
    modes, feats, splits, tid, tleaf, fid, fleaf, tracks, roots, mv = [], [], [], [], [], [], [], [], [], []
    for k, (t, i, m) in enumerate(zip(a["nodes_treeids"], a["nodes_nodeids"], a["nodes_modes"])):
        if m == b"LEAF":
            continue
        if i == 0:
            roots.append(idx[(t, i)])
        mode = m.decode()
        if members and (t, i) in members:
            mode = "BRANCH_MEMBER"
            mv += list(members[(t, i)]) + [np.nan]
        modes.append(code[mode])
        feats.append(a["nodes_featureids"][k])
        splits.append(a["nodes_values"][k])
        for child, ids, leafs in ((a["nodes_truenodeids"][k], tid, tleaf), (a["nodes_falsenodeids"][k], fid, fleaf)):
            is_leaf = (t, child) in leaf_idx
            ids.append(leaf_idx[(t, child)] if is_leaf else idx[(t, child)])
            leafs.append(int(is_leaf))
        tracks.append(a["nodes_missing_value_tracks_true"][k])
    leaves = sorted(leaf_idx, key=leaf_idx.get)
    kw = dict(n_targets=1, aggregate_function=1, post_transform=0, tree_roots=roots,
              nodes_modes=nh.from_array(np.array(modes, dtype=np.uint8)), nodes_featureids=feats,
              nodes_splits=nh.from_array(np.array(splits, dtype=np.float32)), nodes_truenodeids=tid,
              nodes_trueleafs=tleaf, nodes_falsenodeids=fid, nodes_falseleafs=fleaf,
              nodes_missing_value_tracks_true=tracks, leaf_targetids=[0] * len(leaves),
              leaf_weights=nh.from_array(np.array([weights[k] for k in leaves], dtype=np.float32)))
    if mv:
        kw["membership_values"] = nh.from_array(np.array(mv, dtype=np.float32))
    v5 = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", **kw)
    return _model([v5], list(proto.graph.input), list(proto.graph.output), ml=5, opset=21)


def test_opset5_tree_ensemble_with_set_membership():
    base = _regressor(MODES, seed=7)
    members = {(0, 0): [-1.0, 0.0], (1, 1): [1.0], (2, 2): [-1.0, 1.0, 2.0]}     # onnxruntime: integers only
    ens, _ = _agree(_to_v5(base, members))
    assert ens.source.startswith("onnx.TreeEnsemble")
    plain, _ = _agree(_to_v5(base))                   # the same trees without sets: as the opset-1 reading
    first = from_model(load_model(base.SerializeToString(), "b.onnx"))
    X = probe_points(first, 200, seed=1)
    np.testing.assert_allclose(plain.predict(X) + 0.25, first.predict(X), rtol=1e-6, atol=1e-6)   # v5: no base


# ------------------------------------------------------------- all trees at once, or node by node
def _edited(proto, **changes):
    """The tree operator's attributes changed: {name: {index: value}} (a tree damaged as an edited
    file may be)."""
    edited = type(proto)()
    edited.CopyFrom(proto)
    attrs = {a.name: a for a in edited.graph.node[0].attribute}
    for name, at in changes.items():
        for k, v in at.items():
            (attrs[name].floats if attrs[name].floats else attrs[name].ints)[k] = v
    return edited


def _damaged():
    """(name, proto) of trees as converters write them and as edited files may hold them."""
    plain = _regressor(["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"], seed=11)
    mixed = _regressor(MODES, seed=12, double=True)
    out = [("plain", plain), ("plain-double", _regressor(["BRANCH_GTE", "BRANCH_LT"], seed=13, double=True)),
           ("mixed", mixed), ("v5-plain", _to_v5(plain)), ("v5-members", _to_v5(plain, {(1, 2): [0.0, 1.0]})),
           ("nan-threshold", _edited(plain, nodes_values={3: float("nan")})),
           ("infinite-threshold", _edited(plain, nodes_values={34: float("inf")})),
           ("column-beyond", _edited(plain, nodes_featureids={40: 7})),
           ("cycle", _edited(plain, nodes_truenodeids={35: 0})),           # tree 1: node 4 back to its root
           ("self", _edited(plain, nodes_falsenodeids={33: 2})),           # tree 1: node 2 to itself
           ("missing-child", _edited(plain, nodes_truenodeids={64: 40})),  # tree 2: no node 40
           ("shared-child", _edited(plain, nodes_falsenodeids={1: 5})),    # tree 0: node 5 under nodes 1 and 2
           ("twice", _edited(plain, nodes_nodeids={33: 1})),               # tree 1 lists node 1 twice
           ("weight-nowhere", _edited(plain, target_nodeids={0: 99})),
           ("runs", _edited(plain, **_third_run_in_tree_0(plain)))]
    v5 = _to_v5(plain)
    roots = next(a for a in v5.graph.node[0].attribute if a.name == "tree_roots")
    roots.ints[2] = roots.ints[1]                                       # two trees on one root
    return out + [("v5-shared-root", v5)]


def _third_run_in_tree_0(proto):
    """Changes making the third tree a run of tree id 0 again (node ids 31..61), its root's
    children tree 0's nodes 1 and 2: two trees share their subtrees, its own other nodes unreached."""
    a = {x.name: x for x in proto.graph.node[0].attribute}
    run = range(62, 93)
    changes = {"nodes_treeids": {k: 0 for k in run}, "nodes_nodeids": {k: a["nodes_nodeids"].ints[k] + 31 for k in run},
               "nodes_truenodeids": {k: a["nodes_truenodeids"].ints[k] + 31 for k in run if k > 62},
               "nodes_falsenodeids": {k: a["nodes_falsenodeids"].ints[k] + 31 for k in run if k > 62}}
    leaves = [k for k, t in enumerate(a["target_treeids"].ints) if t == 2]
    changes["target_treeids"] = {k: 0 for k in leaves}
    changes["target_nodeids"] = {k: a["target_nodeids"].ints[k] + 31 for k in leaves}
    return changes


def _reading(proto):
    """The ensemble's arrays, or the refusal's message."""
    data = proto.SerializeToString()
    proto_read = inspect_onnx(data, "t.onnx")
    from core.intake.parsing.onnx_graph import read_onnx

    model = OnnxModel(data, "t.onnx", proto_read, read_onnx(data, "t.onnx"))
    try:
        return from_model(model, verify=False).to_arrays()
    except (ModelError, UnsupportedModelError) as exc:
        return str(exc)


@pytest.mark.parametrize("walk", ["compiled", "numpy"])
@pytest.mark.parametrize("name, proto", _damaged(), ids=[n for n, _ in _damaged()])
def test_the_trees_laid_out_at_once_are_the_trees_walked_node_by_node(name, proto, walk, monkeypatch):
    """Laid out at once (each tree walked by the compiled kernel, or all trees level by level by
    numpy), the trees are those walked node by node, damaged graphs refused alike."""
    import core.intake.parsing.onnx_trees as trees

    if walk == "numpy":
        monkeypatch.setattr(trees, "_wire", None)
    else:
        assert trees._wire is not None, "build the kernels: setup.py build_ext"
    at_once = _reading(proto)
    plain_bounds = trees._plain_bounds

    def none_plain(*args):
        plain, bound, feature = plain_bounds(*args)
        return np.zeros_like(plain), bound, feature

    monkeypatch.setattr(trees, "_plain_bounds", none_plain)
    by_node = _reading(proto)
    if isinstance(by_node, str):
        assert at_once == by_node
        assert not any(w in by_node for w in ("Traceback", "IndexError", "KeyError", "numpy"))
        return
    arrays, meta = at_once
    assert meta == by_node[1] and arrays.keys() == by_node[0].keys()
    for k in arrays:
        assert arrays[k].dtype == by_node[0][k].dtype and np.array_equal(arrays[k], by_node[0][k], equal_nan=True), k


def test_converters_trees_are_laid_out_without_a_walk_node_by_node(monkeypatch):
    """skl2onnx's and onnxmltools' trees (threshold splits only) are read at once: no Python
    runs per node (a 500-tree model has some 30,000)."""
    import lightgbm as lgb
    from onnxmltools.convert import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestRegressor

    import core.intake.parsing.onnx_trees as trees

    def walked(*args, **kw):
        raise AssertionError("a tree was walked node by node")

    monkeypatch.setattr(trees, "_build", walked)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)).astype(np.float32)
    X[::7, 1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(int)
    lg = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    rf = RandomForestRegressor(10, max_depth=5, random_state=0).fit(np.nan_to_num(X), y)
    files = [convert_lightgbm(lg, initial_types=[("input", FloatTensorType([None, 4]))]), to_onnx(rf, X[:1])]
    for f in files:
        model = load_model(f.SerializeToString(), "m.onnx")
        ens = from_model(model)                                     # verified against onnxruntime
        rows = probe_points(ens, 100, seed=2)
        np.testing.assert_allclose(ens.predict(rows), model.predict(model_input(ens, rows)), rtol=1e-5, atol=1e-5)


def test_the_verification_runs_the_graph_once_and_walks_the_trees_once(monkeypatch):
    """The check against onnxruntime (scores and labels, on every probe row) costs one run of the
    graph on all the probe rows and one walk of the ensemble, not one per comparison."""
    from core.intake.parsing.onnx_runner import OnnxRunner
    from core.model import flatwalk

    base = _to_v5(_regressor(["BRANCH_LEQ", "BRANCH_GT"], seed=9))
    classifier = _binary([0.7, -0.2], "LOGISTIC")
    for proto in (base, classifier):
        model = load_model(proto.SerializeToString(), "m.onnx")
        runs, walks = [], []
        run, walk = OnnxRunner.run, flatwalk.leaf_sum
        monkeypatch.setattr(OnnxRunner, "run", lambda self, X, *a, **k: runs.append(len(X)) or run(self, X, *a, **k))
        monkeypatch.setattr(flatwalk, "leaf_sum", lambda fl, X, *a: walks.append(len(X)) or walk(fl, X, *a))
        from core.model import ensemble
        monkeypatch.setattr(ensemble, "leaf_sum", flatwalk.leaf_sum)
        ens = from_model(model)
        assert len(runs) == 1 and len(walks) == 1 and runs == walks == [len(probe_points(ens))]
        monkeypatch.undo()


def _binary(weights, post="NONE", class_ids=None, base=None):
    n_leaves = len(weights) if class_ids is None else len(weights) // 2
    kw = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
              nodes_values=[0.5, 0, 0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_truenodeids=[1, 0, 0],
              nodes_falsenodeids=[2, 0, 0], classlabels_int64s=[0, 1], post_transform=post,
              class_treeids=[0] * len(weights), class_ids=class_ids or [0] * len(weights),
              class_nodeids=[1 + k // (len(weights) // n_leaves) for k in range(len(weights))] if class_ids
              else [1, 2], class_weights=weights)
    if base is not None:
        kw["base_values"] = base
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain="ai.onnx.ml", **kw)
    return _model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])],
                  [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                   helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2])])


@pytest.mark.parametrize("weights, post, ids, base, words", [
    ([0.7, 0.2], "LOGISTIC", None, None, "score > 0.5"),
    ([0.7, -0.2], "NONE", None, None, "not probabilities"),
    ([0.7, -0.2], "PROBIT", None, None, "PROBIT"),
    ([0.3, 0.7, 0.8, 0.2], "NONE", [0, 1, 0, 1], None, "weights both classes"),
    ([0.7, -0.2], "LOGISTIC", None, [0.1, 0.2], "two base values"),
], ids=["positive-logistic", "signed-none", "probit", "both-classes", "two-bases"])
def test_output_conventions_whose_labels_are_not_the_larger_probability_are_refused(weights, post, ids, base, words):
    model = load_model(_binary(weights, post, ids, base).SerializeToString(), "b.onnx")
    with pytest.raises(UnsupportedModelError, match=words):
        from_model(model)


@pytest.mark.parametrize("weights, post, link", [([0.7, 0.2], "NONE", "identity"), ([0.7, -0.2], "LOGISTIC", "sigmoid")])
def test_binary_conventions_read(weights, post, link):
    model = load_model(_binary(weights, post).SerializeToString(), "b.onnx")
    ens = from_model(model)
    assert ens.link == link
    X = np.array([[0.0], [0.5], [np.nextafter(0.5, 1)], [1.0], [np.nan]])
    assert np.array_equal(ens.predict(X), model.predict(X))


def test_min_and_max_aggregation_is_refused():
    model = load_model(_regressor(["BRANCH_LEQ"], agg="MAX").SerializeToString(), "m.onnx")
    with pytest.raises(UnsupportedModelError, match="MAX"):
        from_model(model)


# ------------------------------------------------------------- not a tree ensemble
def test_an_mlp_is_read_inspected_and_run_but_not_parsed_as_trees():
    from skl2onnx import to_onnx
    from sklearn.neural_network import MLPClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    mlp = MLPClassifier((8,), max_iter=300, random_state=0).fit(X, y)
    data = to_onnx(mlp, X[:1]).SerializeToString()
    model = load_model(data, "mlp.onnx")
    assert isinstance(model, OnnxModel)
    info = model.info
    assert not info.is_tree_ensemble and info.tree_op is None
    assert info.inputs == (("X", "float", (None, 4)),)
    assert info.label == "output_label" and info.scores == "output_probability"
    assert dict(info.outputs)["output_probability"] == "zipmap"
    assert info.opsets["ai.onnx.ml"] >= 1 and info.n_nodes > 3 and info.initializer_bytes > 4 * 8 * 4
    assert "MatMul" in info.ops or "Gemm" in info.ops
    labels, proba = model.run(X[:50])
    assert np.array_equal(labels, mlp.predict(X[:50]))
    np.testing.assert_allclose(proba, mlp.predict_proba(X[:50]), atol=1e-5)
    with pytest.raises(UnsupportedModelError, match="not a tree ensemble"):
        from_model(model)


# ------------------------------------------------------------- hostile files
def _identity_model(**kw):
    node = helper.make_node("Identity", ["X"], ["Y"])
    return _model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 2])], **kw)


def _with_external_initializer(location):
    m = _identity_model()
    t = helper.make_tensor("W", TensorProto.FLOAT, [2], [0.0, 0.0])
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", location
    m.graph.initializer.append(t)
    return m.SerializeToString()


def _with_external_attribute(location):
    m = _identity_model()
    t = helper.make_tensor("c", TensorProto.FLOAT, [1], [1.0])
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", location
    m.graph.node.append(helper.make_node("Constant", [], ["K"], value=t))
    return m.SerializeToString()


def _tensor(dims, values):
    t = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=dims)
    t.float_data.extend(values)
    return t


def _huge_tensor():
    m = _identity_model()
    m.graph.initializer.append(_tensor([10**6, 10**6], []))
    return m.SerializeToString()


def _lying_tensor():
    m = _identity_model()
    m.graph.initializer.append(_tensor([1000], [1.0, 2.0]))
    return m.SerializeToString()


def _loop():
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, [])])
    node = helper.make_node("Loop", ["", ""], [], body=body)
    m = _identity_model()
    m.graph.node.append(node)
    return m.SerializeToString()


def _custom_domain():
    node = helper.make_node("Evil", ["X"], ["Y"], domain="com.example")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 2])])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17),
                                                              helper.make_opsetid("com.example", 1)]).SerializeToString()


def _sequence_input():
    node = helper.make_node("SequenceLength", ["S"], ["Y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_sequence_value_info("S", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("Y", TensorProto.INT64, [])])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _image_input():
    node = helper.make_node("Identity", ["X"], ["Y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3, None, None])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 3, None, None])])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _no_prediction():
    node = helper.make_node("IsNaN", ["X"], ["A"])
    node2 = helper.make_node("IsInf", ["X"], ["B"])
    g = helper.make_graph([node, node2], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                          [helper.make_tensor_value_info("A", TensorProto.BOOL, [None, 2]),
                           helper.make_tensor_value_info("B", TensorProto.BOOL, [None, 2])])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _deep():
    nodes = [helper.make_node("Identity", [f"t{k}" if k else "X"], [f"t{k + 1}"]) for k in range(25_000)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                          [helper.make_tensor_value_info("t25000", TensorProto.FLOAT, [None, 2])])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _truncated():
    return _regressor(MODES).SerializeToString()[:-17]


def _slow():
    """A graph that multiplies 1500x1500 matrices of its own making, a few times over."""
    shape = nh.from_array(np.array([1500, 1500], dtype=np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["A"], value=helper.make_tensor("v", TensorProto.FLOAT,
                                                                                              [1], [0.001]))]
    prev = "A"
    for k in range(6):
        nodes.append(helper.make_node("MatMul", [prev, "A"], [f"M{k}"]))
        prev = f"M{k}"
    nodes += [helper.make_node("ReduceSum", [prev], ["s"], keepdims=0),
              helper.make_node("Add", ["X", "s"], ["Y"])]
    # the matrix depends on the input, so that no constant folding does the work before the run
    nodes.insert(1, helper.make_node("ReduceSum", ["X"], ["x0"], keepdims=0))
    nodes.insert(2, helper.make_node("Add", ["A0", "x0"], ["A"]))
    nodes[0].output[0] = "A0"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 2])], initializer=[shape])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


HOSTILE = {
    "external-initializer": (lambda: _with_external_initializer("../../../etc/passwd"), UnsupportedModelError,
                             "external data"),
    "external-attribute": (lambda: _with_external_attribute("/etc/shadow"), UnsupportedModelError, "external data"),
    "huge-tensor": (_huge_tensor, ModelError, "elements"),
    "lying-tensor": (_lying_tensor, ModelError, "declares 1,000 elements but stores 2"),
    "loop": (_loop, UnsupportedModelError, "subgraphs"),
    "custom-domain": (_custom_domain, UnsupportedModelError, "custom domain"),
    "sequence-input": (_sequence_input, UnsupportedModelError, "sequence"),
    "image-input": (_image_input, UnsupportedModelError, "shape"),
    "no-prediction": (_no_prediction, UnsupportedModelError, "none is a predicted label"),
    "deep-graph": (_deep, ModelError, "graph nodes"),
    "truncated": (_truncated, ModelError, "truncated"),
    "garbage": (lambda: b"\x08\x07\x12\xff\xff\xff\xff\x0fgarbage", ModelError, "not a readable ONNX model"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_files_are_refused_with_a_message(name, monkeypatch):
    make, cls, words = HOSTILE[name]
    import onnxruntime

    def no_session(*a, **k):                # nothing reaches onnxruntime before the checks passed
        raise AssertionError("onnxruntime was handed a file the checks should have refused")

    monkeypatch.setattr(onnxruntime, "InferenceSession", no_session)
    with pytest.raises(cls, match=words):
        load_model(make(), f"{name}.onnx")


def test_a_graph_over_the_time_budget_is_stopped():
    from core.intake.parsing.onnx_runner import load_onnx

    with pytest.raises(ModelError, match="took longer than"):
        load_onnx(_slow(), "slow.onnx", time_limit=0.05)


def test_deadlines_hold_beside_a_later_one_and_in_a_forked_child():
    """One watcher thread stops every run past its deadline (the test above: a real graph):
    a short deadline set after a long one is kept, a removed one never fires, and a forked
    child (without its parent's watcher thread) starts its own."""
    import os
    import time
    from types import SimpleNamespace

    from core.intake.parsing.onnx_runner import _DEADLINES

    def until(cond, seconds=20.0):
        t0 = time.monotonic()
        while not cond() and time.monotonic() - t0 < seconds:
            time.sleep(0.01)
        return cond()

    long, short, removed = (SimpleNamespace(terminate=False) for _ in range(3))
    keys = [_DEADLINES.add(600.0, long), _DEADLINES.add(0.05, short), _DEADLINES.add(0.05, removed)]
    _DEADLINES.remove(keys[2])
    assert until(lambda: short.terminate)
    assert not long.terminate and not removed.terminate
    _DEADLINES.remove(keys[0])
    pid = os.fork()
    if pid == 0:                                                   # the child: its own watcher, or exit code 1
        child = SimpleNamespace(terminate=False)
        _DEADLINES.add(0.05, child)
        os._exit(0 if until(lambda: child.terminate) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_hostile_files_through_the_sandbox():
    from core.intake.sandbox import load_vetted

    with pytest.raises(UnsupportedModelError, match="external data"):
        load_vetted(_with_external_initializer("../../../etc/passwd"), "ext.onnx")
    with pytest.raises(ModelError, match="truncated"):
        load_vetted(_truncated(), "cut.onnx")
    vetted = load_vetted(_regressor(MODES, seed=2).SerializeToString(), "ok.onnx")
    assert vetted.ensemble.source.startswith("onnx.TreeEnsembleRegressor") and isinstance(vetted.model, OnnxModel)


def test_inspect_reads_a_tree_ensemble_without_running_it(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, "InferenceSession", None)
    info = inspect_onnx(_regressor(MODES).SerializeToString(), "t.onnx")
    assert info.is_tree_ensemble and info.tree_op == "TreeEnsembleRegressor"
    assert info.inputs == (("X", "float", (None, 3)),) and info.scores == "Y" and info.label is None
    assert info.opsets == {"ai.onnx": 17, "ai.onnx.ml": 1} and info.n_nodes == 1


# ------------------------------------------------------------- which output is the prediction
def test_several_candidate_outputs_are_never_guessed_and_the_named_one_is_run():
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(3, 1)).astype(np.float32), np.array([0.5], dtype=np.float32)
    X = rng.normal(size=(40, 3))
    value = (X.astype(np.float32) @ W + b).ravel()
    for outs in (["mm", "y"], ["mm", "y", "p"]):
        data = affine_graph(outs, W, b)
        with pytest.raises(UnsupportedModelError, match="none is guessed") as err:
            load_model(data, "affine.onnx")
        assert all(repr(n) in str(err.value) for n in outs) and "output=" in str(err.value)
    data = affine_graph(["mm", "y", "p"], W, b)
    model = load_model(data, "affine.onnx", output="y")
    assert model.info.scores == "y" and model.info.label is None
    np.testing.assert_allclose(model.predict(X), value, rtol=1e-6)
    with pytest.raises(UnsupportedModelError, match="no output 'z'.*'mm'"):
        load_model(data, "affine.onnx", output="z")
    with pytest.raises(ModelError, match="not an .onnx file"):
        load_model(b'{"learner": {}}', "m.json", output="y")
    # the choice travels in the bytes: the sandbox's child and the worker run the named output
    from core.intake.door import load_model as load_safely

    blackbox = load_safely(data, "affine.onnx", output="y")
    assert blackbox.kind == "black_box" and blackbox.task == "regression"
    np.testing.assert_allclose(blackbox.predict(X), value, rtol=1e-6)


def _nan_probabilities():
    """A classifier graph whose probabilities are NaN for a negative first column (Sqrt)."""
    nodes = [helper.make_node("Sqrt", ["X"], ["r"]), helper.make_node("Softmax", ["r"], ["probabilities"], axis=1),
             helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                           helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2])])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_scores_that_are_not_probabilities_are_refused_and_the_label_can_be_chosen():
    from skl2onnx import to_onnx
    from sklearn.svm import SVC

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int)
    svc = SVC().fit(X, y)                      # no probability=True: decision scores beside the label
    data = to_onnx(svc, X[:1]).SerializeToString()
    with pytest.raises(UnsupportedModelError, match=r"not probabilities.*output='output_label'"):
        load_model(data, "svc.onnx")
    model = load_model(data, "svc.onnx", output="output_label")
    labels, scores = model.run(X)
    assert scores is None and np.array_equal(labels, svc.predict(X))
    model = load_model(_nan_probabilities(), "nan.onnx")        # loads: its first rows are fine
    model.run(np.array([[1.0, 4.0]]))
    with pytest.raises(UnsupportedModelError, match="NaN or infinite"):
        model.run(np.array([[1.0, 4.0], [-1.0, 0.5]]))


# ------------------------------------------------------------- budgets before any allocation
def test_tree_nodes_are_counted_in_the_file_before_anything_reads_them(monkeypatch):
    import onnxruntime

    import core.intake.parsing.onnx as onnx_parsing

    def no_session(*a, **k):
        raise AssertionError("onnxruntime was handed a tree ensemble over the budget")

    proto = _regressor(["BRANCH_LEQ"], as_tensor=True)          # 3 trees of 31 nodes
    attr = next(a for a in proto.graph.node[0].attribute if a.name == "nodes_values_as_tensor")
    attr.t.CopyFrom(nh.from_array(np.zeros(3_000_001), "nodes_values_as_tensor"))   # one array says 3,000,001
    with monkeypatch.context() as m:
        m.setattr(onnxruntime, "InferenceSession", no_session)
        with pytest.raises(ModelError, match="3,000,001 tree nodes"):
            load_model(proto.SerializeToString(), "long.onnx")
    from core.intake.parsing.onnx_graph import tree_op_nodes

    v5 = _to_v5(_regressor(["BRANCH_LEQ"], seed=4))           # 45 splits, 48 leaves listed apart
    assert tree_op_nodes(v5.graph.node[0]) == 93
    # the exact reading counts before it converts or builds anything, and counts nodes, not placeholders
    model = load_model(_regressor(["BRANCH_LEQ"], seed=5).SerializeToString(), "r.onnx")
    monkeypatch.setattr(onnx_parsing, "_NODE_BUDGET", 93)
    assert from_model(model).n_leaves == 48
    monkeypatch.setattr(onnx_parsing, "_NODE_BUDGET", 92)
    monkeypatch.setattr(onnx_parsing, "attributes", no_session)
    with pytest.raises(UnsupportedModelError, match="has 93 nodes; at most 92"):
        from_model(model)
