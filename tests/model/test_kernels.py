"""The compiled kernels check what they are handed (issue 37, item 7).

``core/model/_treewalk.c`` (the tree walk) and ``core/rules/_projected.c`` (the
projected-forest cells) trusted their buffers: a float32 ``X`` gave 50% wrong
leaves silently, a one-element output buffer for 2 x 5 results was written past
its end. Each is now handed wrong buffers (float32 ``X``, Fortran order, short or
read-only outputs, wrong ndim, int32 indices, damaged node arrays, rows outside
``X``) and must raise a ValueError naming the problem, never answer or overrun; the
Python wrappers convert what they may (any float dtype, any memory order) and give
the same answers as the numpy walks.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from core.intake.models import from_model
from core.model import Tree, TreeEnsemble, flatwalk
from core.model.flatwalk import _treewalk
from core.rules import bitsets, engines
from core.rules.state import fit_state


@pytest.fixture(autouse=True)
def built():
    """These tests are about the compiled kernels: they must be built (setup.py, a C compiler)."""
    assert _treewalk is not None and bitsets._projected is not None, "build the kernels: setup.py build_ext"


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return from_model(RandomForestClassifier(5, max_depth=4, random_state=0).fit(X, y)), X


def _walk_args(ens, rows, d=None, start=0, stop=None, **swap):
    """The arguments of ``_treewalk.apply`` for ``rows``, some swapped for wrong ones."""
    fl = ens._flat
    args = dict(X=rows, nodes=fl["packed"], roots=fl["packed_roots"], bits=fl["packed_bits"],
                out=np.empty((len(rows), ens.n_trees), dtype=np.int64))
    args.update(swap)
    return (args["X"], args["nodes"], args["roots"], args["bits"], args["out"],
            rows.shape[1] if d is None else d, start, len(rows) if stop is None else stop)


def test_the_walk_answers_on_the_buffers_it_takes(forest):
    ens, X = forest
    out = np.empty((len(X), ens.n_trees), dtype=np.int64)
    _treewalk.apply(*_walk_args(ens, X, out=out))
    np.testing.assert_array_equal(ens._flat["packed_to_node"][out], flatwalk._apply_flat(ens._flat, X))


@pytest.mark.parametrize("case, match", [
    ("float32 X", "X must be a 2-D array of float64"),
    ("Fortran-order X", "X must be a C-contiguous array"),
    ("1-D X", "X must be a 2-D array"),
    ("3-D X", "X must be a 2-D array"),
    ("short out", "out must have the shape"),
    ("one-element out", "out must be a 2-D array"),
    ("float out", "out must be a 2-D array of int64"),
    ("read-only out", "writable"),
    ("int32 roots", "roots must be a 1-D array of int64"),
    ("a root outside the nodes", "a root is outside the nodes"),
    ("nodes of 12 bytes", "nodes must be a 1-D array of 16-byte records"),
    ("d other than X's columns", "X does not have d columns"),
    ("rows past X", "rows start..stop are not inside X"),
    ("negative start", "rows start..stop are not inside X"),
    ("a feature past d", "node array is damaged"),
    ("a child past the nodes", "node array is damaged"),
    ("a child pointing back", "node array is damaged"),
])
def test_the_walk_refuses_wrong_buffers(forest, case, match):
    ens, X = forest
    n, T = len(X), ens.n_trees
    nodes = ens._flat["packed"].copy()
    inner = int(np.flatnonzero(nodes["feature"] >= 0)[0])
    swap = {
        "float32 X": dict(X=X.astype(np.float32)),
        "Fortran-order X": dict(X=np.asfortranarray(X)),
        "1-D X": dict(X=X.ravel()),
        "3-D X": dict(X=X[None]),
        "short out": dict(out=np.empty((n - 1, T), dtype=np.int64)),
        "one-element out": dict(out=np.empty(1, dtype=np.int64)),
        "float out": dict(out=np.empty((n, T))),
        "read-only out": dict(out=np.broadcast_to(np.int64(0), (n, T))),
        "int32 roots": dict(roots=ens._flat["packed_roots"].astype(np.int32)),
        "a root outside the nodes": dict(roots=ens._flat["packed_roots"] + len(nodes)),
        "nodes of 12 bytes": dict(nodes=np.zeros(len(nodes), dtype=[("a", "<f8"), ("b", "<i4")])),
    }.get(case, {})
    kw = {}
    if case == "d other than X's columns":
        kw["d"] = X.shape[1] + 1
    if case == "rows past X":
        kw["stop"] = n + 1
    if case == "negative start":
        kw["start"] = -1
    if case.startswith("a feature") or case.startswith("a child"):
        field, value = {"a feature past d": ("feature", 99), "a child past the nodes": ("left", 10**8),
                        "a child pointing back": ("left", inner)}[case]
        nodes[field][inner] = value
        swap = dict(nodes=nodes)
    with pytest.raises(ValueError, match=match):
        _treewalk.apply(*_walk_args(ens, X, **kw, **swap))
    values = ens._flat["packed_value"]
    if case in ("float32 X", "Fortran-order X", "a feature past d", "a child past the nodes"):
        with pytest.raises(ValueError, match=match):
            _treewalk.accumulate(swap.get("X", X), swap.get("nodes", ens._flat["packed"]), ens._flat["packed_roots"],
                                 ens._flat["packed_bits"], values, values.shape[1], np.zeros((n, values.shape[1])),
                                 X.shape[1], 0, n)
    with pytest.raises(ValueError, match="n_outputs values per node|out must have the shape"):
        _treewalk.accumulate(X, ens._flat["packed"], ens._flat["packed_roots"], ens._flat["packed_bits"],
                             values[:-1], values.shape[1], np.zeros((n, values.shape[1])), X.shape[1], 0, n)


def test_the_wrappers_take_any_float_rows_and_answer_as_numpy(forest, monkeypatch):
    ens, X = forest
    want = ens.predict_raw(X)
    for rows in (X.astype(np.float32).astype(np.float64), np.asfortranarray(X), X[::1, :]):
        np.testing.assert_array_equal(ens.predict_raw(rows), ens.predict_raw(np.ascontiguousarray(rows)))
    X32 = X.astype(np.float32)
    got = flatwalk.leaf_sum(ens._flat, X32, ens.n_outputs, ens.n_trees)      # converted, not misread
    monkeypatch.setattr(flatwalk, "USE_COMPILED", False)
    np.testing.assert_array_equal(got, flatwalk.leaf_sum(ens._flat, X32.astype(np.float64), ens.n_outputs,
                                                         ens.n_trees))
    np.testing.assert_array_equal(ens.predict_raw(X), want)
    with pytest.raises(ValueError, match="dimensions"):
        flatwalk.leaves(ens._flat, X.ravel(), ens.n_trees)


def test_a_code_beyond_a_category_sets_words_goes_right_in_both_walks(monkeypatch):
    """A categorical split whose set has one word (codes 0..63) on a feature of 100 codes:
    code 70 is in no word of it, so it goes right, as the numpy walk says (the compiled
    walk read the next split's word, or past the pool)."""
    words = np.zeros((3, 1), dtype=np.uint64)
    words[0, 0] = np.uint64(0b1010)                       # codes 1 and 3 go left
    tree = Tree(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([0, -1, -1]),
                np.array([np.nan, 0, 0]), np.array([[0.0], [1.0], [2.0]]), category_bits=words)
    ens = TreeEnsemble((tree, tree), n_features=1, feature_names=("c",), task="regression",
                       aggregation="sum", link="identity", base_score=np.zeros(1),
                       categories=(tuple(range(100)),))
    X = np.arange(101, dtype=float)[:, None]
    compiled = ens.predict_raw(X)
    monkeypatch.setattr(flatwalk, "USE_COMPILED", False)
    np.testing.assert_array_equal(compiled, ens.predict_raw(X))
    np.testing.assert_array_equal(compiled[:, 0], np.where(np.isin(np.arange(101), [1, 3]), 2.0, 4.0))
    fl = ens._flat
    for bad in (-1.0, 2.5, np.nan):
        with pytest.raises(ValueError, match="categorical code"):
            _treewalk.apply(np.array([[bad]]), fl["packed"], fl["packed_roots"], fl["packed_bits"],
                            np.empty((1, 2), dtype=np.int64), 1, 0, 1)


def _routing_forest(seed=0, n_trees=12, depth=4, d=3):
    """Complete trees of random threshold splits, each sending a missing value (NaN) its own way."""
    rng = np.random.default_rng(seed)
    n_int, n = 2 ** depth - 1, 2 ** (depth + 1) - 1
    trees = []
    for _ in range(n_trees):
        inner = np.arange(n) < n_int
        left = np.where(inner, 2 * np.arange(n) + 1, -1)
        trees.append(Tree(left, np.where(inner, left + 1, -1), np.where(inner, rng.integers(d, size=n), -1),
                          np.where(inner, rng.normal(size=n).round(1), np.nan), rng.normal(size=(n, 1)),
                          missing_left=inner & (rng.random(n) < 0.5)))
    return TreeEnsemble(tuple(trees), n_features=d, feature_names=("a", "b", "c")[:d], task="regression",
                        aggregation="sum", link="identity", base_score=np.zeros(1))


def test_missing_values_take_each_splits_own_route_in_both_walks(monkeypatch):
    """A missing value goes where each split says (``Tree.missing_left``) in the compiled walk
    and in the numpy one alike, as one tree walked on its own routes it: rows with NaN are
    walked with all the others, not tree by tree."""
    ens = _routing_forest()
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3)).round(1)
    X[rng.random(X.shape) < 0.3] = np.nan
    own = np.column_stack([t.apply(X) for t in ens.trees])
    want = sum(t.value[leaf] for t, leaf in zip(ens.trees, own.T))
    for compiled in (True, False):
        monkeypatch.setattr(flatwalk, "USE_COMPILED", compiled)
        np.testing.assert_array_equal(flatwalk.leaves(ens._flat, X, ens.n_trees) - ens._flat["offsets"], own)
        np.testing.assert_array_equal(ens.apply(X), own)
        for got in (flatwalk.leaf_sum(ens._flat, X, 1, ens.n_trees), ens.predict_raw(X)):   # (numpy: summed
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)                  # in its own order)


# ------------------------------------------------------------------ the projected-forest kernel
@pytest.fixture(scope="module")
def rules_state():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    return fit_state(X, y, n_estimators=6, max_depth=4, random_state=0)


def _counts_args(state, mask, **swap):
    """The arguments of ``_projected.counts`` for the subsets ``mask``, some swapped for wrong ones."""
    fl = state.flat
    m, T = len(mask), state.ensemble.n_trees
    a = dict(cl=fl["cl"], cr=fl["cr"], feat=fl["feat"], thr=fl["thr"], roots=fl["roots"],
             x=np.ascontiguousarray(state.X[0], dtype=np.float64), free=mask, X=state.X,
             ybool=np.zeros(state.n, dtype=np.uint8), leftbits=state.split_bits, valid=state.valid,
             ybits=np.zeros(state.words, dtype=np.uint64), cnt=np.zeros((m, T), dtype=np.int64),
             pos=np.zeros((m, T), dtype=np.int64), weights=None, d=state.d, W=state.words)
    a.update(swap)
    return tuple(a.values())


def test_the_projected_kernel_answers_as_numpy(rules_state, monkeypatch):
    state = rules_state
    free = np.eye(state.d, dtype=bool)
    cnt, pos, _ = engines.counts(state, state.X[3], free)
    args = _counts_args(state, free.astype(np.uint8), x=np.ascontiguousarray(state.X[3]))
    bitsets._projected.counts(*args)
    np.testing.assert_array_equal(args[12], cnt)
    # the wrapper converts float32 rows and a bool mask rather than misreading them
    cnt32, _, _ = engines.counts(state, state.X[3].astype(np.float32).astype(np.float64), free.astype(np.float32))
    np.testing.assert_array_equal(cnt32, cnt)


@pytest.mark.parametrize("case, match", [
    ("float32 X", "X must be a 2-D array of float64"),
    ("Fortran-order X", "X must be a C-contiguous array"),
    ("float32 x", "x must be a 1-D array of float64"),
    ("short x", "x has 3 elements"),
    ("free of d + 1 columns", "free must have d columns"),
    ("1-D free", "free must be a 2-D array"),
    ("short cnt", "cnt has"),
    ("read-only pos", "writable"),
    ("int64 children", "cl must be a 1-D array of int32"),
    ("short thr", "thr has"),
    ("short leftbits", "leftbits has"),
    ("W too small", "leftbits has|valid has"),
    ("a root outside the nodes", "a root is outside the nodes"),
    ("a feature past d", "feature is not below d"),
    ("a child pointing back", "child is not after its parent"),
    ("a shared child", "reached twice"),
    ("valid past the rows", "valid marks a row past the rows"),
    ("short weights", "weights has"),
])
def test_the_projected_kernel_refuses_wrong_buffers(rules_state, case, match):
    state = rules_state
    free = np.eye(state.d, dtype=np.uint8)
    fl = state.flat
    inner = int(np.flatnonzero(fl["feat"] >= 0)[1])
    m, T = len(free), state.ensemble.n_trees

    def edited(key, i, v):
        a = fl[key].copy()
        a[i] = v
        return a

    few = state.valid.copy()
    few[-1] |= np.uint64(1) << np.uint64(63)
    swap = {
        "float32 X": dict(X=state.X.astype(np.float32)),
        "Fortran-order X": dict(X=np.asfortranarray(state.X)),
        "float32 x": dict(x=state.X[0].astype(np.float32)),
        "short x": dict(x=np.ascontiguousarray(state.X[0, :3])),
        "free of d + 1 columns": dict(free=np.ones((m, state.d + 1), dtype=np.uint8)),
        "1-D free": dict(free=free.ravel()),
        "short cnt": dict(cnt=np.zeros((m, T - 1), dtype=np.int64)),
        "read-only pos": dict(pos=np.broadcast_to(np.int64(0), (m, T))),
        "int64 children": dict(cl=fl["cl"].astype(np.int64)),
        "short thr": dict(thr=fl["thr"][:-1]),
        "short leftbits": dict(leftbits=state.split_bits[:-1]),
        "W too small": dict(W=state.words - 1),
        "a root outside the nodes": dict(roots=fl["roots"] + len(fl["cl"])),
        "a feature past d": dict(feat=edited("feat", inner, state.d)),
        "a child pointing back": dict(cl=edited("cl", inner, inner)),
        "a shared child": dict(cr=edited("cr", inner, fl["cl"][inner])),
        "valid past the rows": dict(valid=few),
        "short weights": dict(weights=np.zeros(state.n - 1), free=free[:1], cnt=np.zeros((1, T), dtype=np.int64),
                              pos=np.zeros((1, T), dtype=np.int64)),
    }[case]
    if case == "valid past the rows":
        assert state.n % 64, "the rows fill the last word: nothing to mark past them"
    with pytest.raises(ValueError, match=match):
        bitsets._projected.counts(*_counts_args(state, free, **swap))


def test_breadth_first_order_is_numpys_and_damaged_trees_are_refused(forest, monkeypatch):
    """The packed records' order (each tree breadth first, a node's children side by side) is the
    same from the compiled queue as from numpy's level-by-level walk; a child out of range or a
    cycle is a ValueError, never a read outside the arrays or an endless walk."""
    ens, _ = forest
    fl = ens._flat
    inner = fl["feature_raw"] >= 0
    compiled = flatwalk._breadth_first(fl, inner)
    monkeypatch.setattr(flatwalk, "USE_COMPILED", False)
    order, depth = flatwalk._breadth_first(fl, inner)
    assert np.array_equal(compiled[0], order) and compiled[1] == depth == 4
    out = np.empty(inner.size, dtype=np.int64)
    assert _treewalk.breadth_first(fl["left"], fl["right"], inner, fl["offsets"], out) == (inner.size, 4)
    node = int(np.flatnonzero(inner)[3])
    for edit, value in (("left", inner.size), ("right", -1), ("left", fl["offsets"][0])):    # the last: a cycle
        arrays = {"left": fl["left"].copy(), "right": fl["right"].copy()}
        arrays[edit][node] = value
        with pytest.raises(ValueError, match="breadth_first"):
            _treewalk.breadth_first(arrays["left"], arrays["right"], inner, fl["offsets"], out)
    with pytest.raises(ValueError):
        _treewalk.breadth_first(fl["left"], fl["right"], inner, fl["offsets"], out[:-1])          # short output
    with pytest.raises(ValueError):
        _treewalk.breadth_first(fl["left"].astype(np.int32), fl["right"], inner, fl["offsets"], out)
    read_only = out.copy()
    read_only.setflags(write=False)
    with pytest.raises(ValueError):
        _treewalk.breadth_first(fl["left"], fl["right"], inner, fl["offsets"], read_only)


def _categorical_routing_forest():
    """The routing forest with a categorical split in each tree (a set of two words)."""
    ens = _routing_forest(n_trees=4)
    trees = []
    for k, t in enumerate(ens.trees):
        feature, threshold = t.feature.copy(), t.threshold.copy()
        feature[feature == 2] = 0
        feature[1], threshold[1] = 2, np.nan                      # node 1 alone splits feature 2, by a set
        words = np.zeros((t.n_nodes, 2), dtype=np.uint64)
        words[1] = [np.uint64(0b101 << k), np.uint64(1 << k)]
        trees.append(Tree(t.children_left, t.children_right, feature, threshold, t.value, category_bits=words,
                          missing_left=t.missing_left))
    return TreeEnsemble(tuple(trees), n_features=3, feature_names=("a", "b", "c"), task="regression",
                        aggregation="sum", link="identity", base_score=np.zeros(1),
                        categories=(None, None, tuple(range(100))))


@pytest.mark.parametrize("model", ["forest", "routing", "categorical"])
def test_the_packed_records_are_numpys_and_a_bad_order_is_refused(forest, model, monkeypatch):
    """The records the compiled ``pack`` writes (thresholds, features with their missing-value
    bit, left children's places; categorical splits' sets after them) and each node's place are
    numpy's, on a forest, on splits routing missing values each their own way and on category
    sets; an order that is not a permutation of the nodes, or a child out of range, is a ValueError."""
    ens = {"forest": lambda: forest[0], "routing": _routing_forest, "categorical": _categorical_routing_forest}[model]()
    st = flatwalk._stack(ens.trees)
    compiled = flatwalk._flatten(ens.trees, st)
    monkeypatch.setattr(flatwalk, "USE_COMPILED", False)
    numpy_ = flatwalk._flatten(ens.trees, st)
    for key in ("packed", "packed_position", "packed_to_node", "packed_bits", "packed_roots", "packed_value"):
        assert compiled[key].tobytes() == numpy_[key].tobytes(), key
    assert compiled["depth"] == numpy_["depth"]
    fl, order = compiled, compiled["packed_to_node"]
    inner = fl["feature_raw"] >= 0
    args = [fl["left"], fl["feature_raw"], fl["threshold_raw"], inner, fl["missing_left"], fl["cat_node"]]
    rec, pos = np.zeros(order.size, dtype=flatwalk.PACKED_NODE), np.empty(order.size, dtype=np.int64)
    _treewalk.pack(order, *args, rec, pos)
    assert np.array_equal(pos, fl["packed_position"])
    not_cat = ~fl["cat_node"][order]                  # (a categorical split's feature and threshold: _pack's)
    assert rec[not_cat].tobytes() == fl["packed"][not_cat].tobytes()
    twice, beyond = order.copy(), order.copy()
    twice[1] = twice[0]
    beyond[0] = order.size
    for bad in (twice, beyond):
        with pytest.raises(ValueError, match="pack"):
            _treewalk.pack(bad, *args, rec, pos)
    far = fl["left"].copy()
    far[np.flatnonzero(inner)[0]] = order.size
    with pytest.raises(ValueError, match="pack"):
        _treewalk.pack(order, far, *args[1:], rec, pos)
    with pytest.raises(ValueError):
        _treewalk.pack(order, *args, rec[:-1], pos)                    # a short output
