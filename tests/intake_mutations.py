"""Deterministic (seeded) damaged model files for the intake fuzz tests and bench.

``valid_files()`` trains small models of each format; ``mutations(files, n, seed)``
yields ``(case name, file name, bytes)``: byte flips, truncations, duplicated or
removed lines of LightGBM text, structural edits of XGBoost JSON (negative,
out-of-range and cyclic children, huge counts, non-finite thresholds, wrong
types, 100k-deep nesting), mutated UBJSON and mutated .skops zips.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile

import numpy as np
import pandas as pd


def valid_files(n_estimators: int = 20) -> dict[str, bytes]:
    import tempfile
    from pathlib import Path

    import lightgbm as lgb
    import skops.io as sio
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    d = Path(tempfile.mkdtemp(prefix="atlas-fuzz-"))
    xm = xgb.XGBClassifier(n_estimators=n_estimators, max_depth=3, n_jobs=1).fit(X, y)
    xm.save_model(d / "m.json")
    xm.save_model(d / "m.ubj")
    lm = lgb.LGBMClassifier(n_estimators=n_estimators, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    lm.booster_.save_model(d / "m.txt")
    rf = RandomForestClassifier(max(2, n_estimators // 4), max_depth=4, random_state=0).fit(X, y)
    (d / "m.skops").write_bytes(sio.dumps(rf))
    out = {p.name: p.read_bytes() for p in d.iterdir()}
    out["crlf.txt"] = out["m.txt"].replace(b"\n", b"\r\n")
    out["_X"] = X.tobytes()
    return out


def _trees(o):
    return o["learner"]["gradient_booster"]["model"]["trees"]


def xgboost_json_edits(base: dict, rng: np.random.Generator) -> list[tuple[str, bytes]]:
    """Structural edits of an XGBoost JSON model, each a known way to hurt XGBoost or a parser."""
    out = []

    def mutate(name, fn):
        obj = copy.deepcopy(base)
        fn(obj)
        out.append((name, json.dumps(obj).encode()))

    t = int(rng.integers(0, len(_trees(base))))
    tree = _trees(base)[t]
    inner = [i for i, c in enumerate(tree["left_children"]) if c != -1]
    k = int(rng.choice(inner))
    deeper = [i for i in inner if i > k] or [k]
    j = int(rng.choice(deeper))

    def setv(key, i, v):
        return lambda o: _trees(o)[t][key].__setitem__(i, v)

    mutate("negative child", setv("left_children", k, -int(rng.integers(2, 10))))
    mutate("child out of range", setv("right_children", k, int(rng.integers(len(tree["left_children"]), 10**6))))
    mutate("cycle to the root", setv("left_children", j, 0))
    mutate("cycle to an ancestor", setv("right_children", j, k))
    mutate("shared child", setv("right_children", k, tree["left_children"][k]))
    mutate("self loop", setv("left_children", k, k))
    mutate("huge num_feature", lambda o: o["learner"]["learner_model_param"].__setitem__("num_feature", "100000000"))
    mutate("huge num_class", lambda o: o["learner"]["learner_model_param"].__setitem__("num_class", "100000000"))
    mutate("negative num_feature", lambda o: o["learner"]["learner_model_param"].__setitem__("num_feature", "-3"))
    mutate("huge num_trees", lambda o: o["learner"]["gradient_booster"]["model"]["gbtree_model_param"]
           .__setitem__("num_trees", "100000000"))
    mutate("huge num_parallel_tree", lambda o: o["learner"]["gradient_booster"]["model"]["gbtree_model_param"]
           .__setitem__("num_parallel_tree", "100000000"))
    mutate("tree_info beyond outputs", lambda o: o["learner"]["gradient_booster"]["model"]["tree_info"]
           .__setitem__(t, 7))
    mutate("feature beyond num_feature", setv("split_indices", k, 99))
    mutate("negative feature", setv("split_indices", k, -1))
    mutate("short arrays", lambda o: _trees(o)[t]["split_conditions"].pop())
    mutate("short parents", lambda o: _trees(o)[t]["parents"].pop())
    mutate("wrong parent", setv("parents", j, 10**6))
    mutate("huge num_nodes", lambda o: _trees(o)[t]["tree_param"].__setitem__("num_nodes", "100000000"))
    mutate("string child", setv("left_children", k, "1"))
    mutate("float child", setv("left_children", k, 1.5))
    mutate("null threshold", setv("split_conditions", k, None))
    mutate("list trees -> object", lambda o: o["learner"]["gradient_booster"]["model"].__setitem__("trees", {}))
    mutate("tree -> number", lambda o: _trees(o).__setitem__(t, 3))
    mutate("no learner_model_param", lambda o: o["learner"].pop("learner_model_param"))
    mutate("base_score NaN", lambda o: o["learner"]["learner_model_param"].__setitem__("base_score", "nan"))
    mutate("feature_names too many", lambda o: o["learner"].__setitem__("feature_names", ["a"] * 50))
    text = json.dumps(base)
    thr = json.dumps(tree["split_conditions"][k])
    for name, v in (("infinite threshold", "1e999"), ("NaN threshold", "NaN"), ("-inf threshold", "-Infinity")):
        out.append((name, text.replace(thr, v, 1).encode()))
    out.append(("deep nesting", b'{"learner":' + b"[" * 100_000 + b"]" * 100_000 + b"}"))
    out.append(("deep nesting in a string-free array", b"[" * 100_000))
    return out


def _flip(b: bytes, rng, k: int) -> bytes:
    a = bytearray(b)
    for i in rng.integers(0, len(a), k):
        a[i] = int(rng.integers(0, 256))
    return bytes(a)


def _truncate(b: bytes, rng) -> bytes:
    return b[: int(len(b) * rng.uniform(0.05, 0.98))]


def lightgbm_edits(text: bytes, rng) -> list[tuple[str, bytes]]:
    lines = text.decode().split("\n")
    out = []
    body = [i for i, l in enumerate(lines) if "=" in l]
    for _ in range(3):
        i = int(rng.choice(body))
        out.append((f"duplicated line {lines[i].split('=')[0]}", "\n".join(lines[:i + 1] + lines[i:]).encode()))
        i = int(rng.choice(body))
        out.append((f"removed line {lines[i].split('=')[0]}", "\n".join(lines[:i] + lines[i + 1:]).encode()))
    for key, val in (("num_leaves=", "num_leaves=100000000"), ("left_child=", None), ("right_child=", None),
                     ("max_feature_idx=", "max_feature_idx=100000000"), ("num_class=", "num_class=100000000"),
                     ("num_tree_per_iteration=", "num_tree_per_iteration=100000000"),
                     ("threshold=", None), ("split_feature=", None), ("leaf_value=", None)):
        i = next(k for k, l in enumerate(lines) if l.startswith(key))
        new = list(lines)
        if val is None:
            nums = lines[i].split("=", 1)[1].split()
            p = int(rng.integers(0, len(nums)))
            if key in ("left_child=", "right_child="):
                nums[p] = str(int(rng.choice([0, -100, 100, -1])))
            elif key == "split_feature=":
                nums[p] = "99"
            else:
                nums[p] = str(rng.choice(["1e999", "nan", "-inf"]))
            new[i] = key + " ".join(nums)
        else:
            new[i] = val
        out.append((f"edited {key.rstrip('=')}", "\n".join(new).encode()))
    i = next(k for k, l in enumerate(lines) if l.startswith("tree_sizes="))
    sizes = lines[i].split("=", 1)[1].split()
    new = list(lines)
    new[i] = "tree_sizes=" + " ".join(str(int(s) + 37) for s in sizes)
    out.append(("shifted tree_sizes", "\n".join(new).encode()))
    new[i] = "tree_sizes=" + " ".join(sizes[:-1])
    out.append(("tree_sizes short", "\n".join(new).encode()))
    return out


def skops_edits(data: bytes, rng) -> list[tuple[str, bytes]]:
    """Mutate members inside the zip (so the zip reads and skops sees damaged content)."""
    zin = zipfile.ZipFile(io.BytesIO(data))
    names = zin.namelist()
    out = []
    npys = [n for n in names if n.endswith(".npy")]
    for r in range(4):
        target = "schema.json" if r == 0 else str(rng.choice(npys))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
            for n in names:
                b = zin.read(n)
                if n == target:
                    b = _flip(b, rng, 4) if r % 2 == 0 or n == "schema.json" else _truncate(b, rng)
                zout.writestr(n, b)
        out.append((f"skops member {target} damaged", buf.getvalue()))
    # a node array whose children point outside the tree, rewritten through numpy
    for r in range(2):
        buf = io.BytesIO()
        node_files = [n for n in npys]
        target = str(rng.choice(node_files))
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
            for n in names:
                b = zin.read(n)
                if n == target:
                    try:
                        arr = np.load(io.BytesIO(b), allow_pickle=False)
                        if arr.dtype.names and "left_child" in arr.dtype.names:
                            arr = arr.copy()
                            arr["left_child"][0] = 10**6 if r == 0 else 0
                            nb = io.BytesIO()
                            np.save(nb, arr, allow_pickle=False)
                            b = nb.getvalue()
                    except ValueError:
                        pass
                zout.writestr(n, b)
        out.append((f"skops node array {'out of range' if r == 0 else 'cycle'}", buf.getvalue()))
    return out


def skops_node_edits(data: bytes) -> list[tuple[str, bytes]]:
    """Every tree's node array given an out-of-range child and a cycle."""
    zin = zipfile.ZipFile(io.BytesIO(data))
    out = []
    for how, value in (("out of range", 10**6), ("cycle", 0), ("negative", -7)):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
            for n in zin.namelist():
                b = zin.read(n)
                if n.endswith(".npy"):
                    arr = np.load(io.BytesIO(b), allow_pickle=False)
                    if arr.dtype.names and "left_child" in arr.dtype.names and (arr["left_child"] != -1).any():
                        arr = arr.copy()
                        i = int(np.flatnonzero(arr["left_child"] != -1)[-1])
                        arr["left_child"][i] = value
                        nb = io.BytesIO()
                        np.save(nb, arr, allow_pickle=False)
                        b = nb.getvalue()
                zout.writestr(n, b)
        out.append((f"skops child {how}", buf.getvalue()))
    return out


def mutations(files: dict[str, bytes], n_random: int = 8, seed: int = 0):
    """(case, file name, bytes): the structural edits of every format, then ``n_random``
    byte flips and truncations per format."""
    rng = np.random.default_rng(seed)
    base = json.loads(files["m.json"])
    for name, b in xgboost_json_edits(base, rng):
        yield f"xgboost json: {name}", "m.json", b
    import xgboost as xgb

    for name, b in xgboost_json_edits(base, rng)[:20]:      # the same edits, as UBJSON
        try:
            booster = xgb.Booster()
            booster.load_model(bytearray(files["m.json"]))
            obj = json.loads(b)
        except ValueError:
            continue
        yield f"xgboost ubj: {name}", "m.ubj", _to_ubj(obj)
    for name, b in lightgbm_edits(files["m.txt"], rng):
        yield f"lightgbm: {name}", "m.txt", b
        yield f"lightgbm crlf: {name}", "m.txt", b.replace(b"\n", b"\r\n")
    for name, b in skops_edits(files["m.skops"], rng) + skops_node_edits(files["m.skops"]):
        yield name, "m.skops", b
    for fname in ("m.json", "m.ubj", "m.txt", "m.skops"):
        for r in range(n_random):
            if r % 2:
                yield f"{fname} truncated #{r}", fname, _truncate(files[fname], rng)
            else:
                yield f"{fname} flipped #{r}", fname, _flip(files[fname], rng, int(rng.integers(1, 12)))


def _to_ubj(obj) -> bytes:
    """A small UBJSON writer (XGBoost's dialect: int64 lengths, float64 numbers)."""
    import struct

    out = bytearray()

    def s(x: str):
        b = x.encode()
        out.extend(b"L" + struct.pack(">q", len(b)) + b)

    def w(v):
        if v is None:
            out.extend(b"Z")
        elif v is True:
            out.extend(b"T")
        elif v is False:
            out.extend(b"F")
        elif isinstance(v, int):
            out.extend(b"L" + struct.pack(">q", v))
        elif isinstance(v, float):
            out.extend(b"D" + struct.pack(">d", v))
        elif isinstance(v, str):
            out.extend(b"S")
            s(v)
        elif isinstance(v, list):
            out.extend(b"[")
            for x in v:
                w(x)
            out.extend(b"]")
        elif isinstance(v, dict):
            out.extend(b"{")
            for k, x in v.items():
                s(k)
                w(x)
            out.extend(b"}")
    w(obj)
    return bytes(out)


def ubj_container_edits(ubj: bytes, rng: np.random.Generator, n_random: int = 12) -> list[tuple[str, bytes]]:
    """UBJSON files whose containers declare more than they hold: typed containers
    of zero-width elements (true/false/null: a few bytes each asking for 10^7 or
    2^40 values, also nested), and the counts of a real model's typed arrays
    replaced by huge, negative or off-by-one values."""
    import struct

    def zero(marker: bytes, count: int) -> bytes:
        return b"[$" + marker + b"#L" + struct.pack(">q", count)

    out = [("ubj zero-width x200", b"[" + zero(b"Z", 10**7) * 200 + b"]"),
           ("ubj zero-width 2^40", b"[" + zero(b"T", 2**40) + b"]"),
           ("ubj zero-width nested", b"{" + b"L" + struct.pack(">q", 1) + b"a" + b"[" * 50
            + zero(b"F", 10**7) * 30 + b"]" * 50 + b"}"),
           ("ubj zero-width in a model", ubj[:-1] + b"L" + struct.pack(">q", 4) + b"junk" + zero(b"Z", 10**7) * 50
            + b"}")]
    heads = [i for i in range(len(ubj) - 10) if ubj[i:i + 2] == b"#L"]
    for k in range(n_random):
        if not heads:
            break
        i = heads[int(rng.integers(len(heads)))] + 2
        count = int(rng.choice([2**62, 2**40, -1, -(2**40), 10**7, 0]) + (int(rng.integers(-1, 2)) if k % 3 else 0))
        out.append((f"ubj count {count} at {i}", ubj[:i] + struct.pack(">q", count) + ubj[i + 8:]))
    return out


def embedded_booster_files(n_estimators: int = 12) -> dict[str, bytes]:
    """.skops files holding an XGBClassifier, an LGBMClassifier and a pipeline ending in
    an XGBRegressor, as a data scientist would save them; ``_X`` their inputs."""
    import lightgbm as lgb
    import skops.io as sio
    import xgboost as xgb
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    models = {"xgb.skops": xgb.XGBClassifier(n_estimators=n_estimators, max_depth=3, n_jobs=1),
              "lgb.skops": lgb.LGBMClassifier(n_estimators=n_estimators, num_leaves=8, verbose=-1, n_jobs=1),
              "pipe.skops": make_pipeline(StandardScaler(), xgb.XGBRegressor(n_estimators=n_estimators, n_jobs=1))}
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])   # a pipeline matches columns by name
    out = {name: sio.dumps(m.fit(frame if name.startswith("pipe") else X, y)) for name, m in models.items()}
    out["_X"] = X.tobytes()
    return out


def _rezip(data: bytes, replace: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, replace.get(info.filename, src.read(info.filename)))
    return buf.getvalue()


def embedded_booster_edits(data: bytes, rng: np.random.Generator) -> list[tuple[str, bytes]]:
    """The structural edits of standalone XGBoost / LightGBM files, made to the booster a
    .skops file holds (XGBoost: the UBJSON member; LightGBM: the text in schema.json)."""
    import io
    import zipfile

    zf = zipfile.ZipFile(io.BytesIO(data))
    schema = json.loads(zf.read("schema.json"))
    out: list[tuple[str, bytes]] = []
    bins = [n for n in zf.namelist() if n.endswith(".bin")]
    if bins:                                             # XGBoost: {"Config": ..., "Model": ...} as UBJSON
        from core.intake.parsing.ubjson import read_ubjson

        state = read_ubjson(zf.read(bins[0]))
        for name, edited in xgboost_json_edits(state["Model"], rng):
            if not edited.startswith(b"{"):
                continue
            try:
                model = json.loads(edited)
            except (ValueError, RecursionError):      # text edits and 100k-deep nesting: JSON-only cases
                continue
            out.append((f"embedded xgboost {name}", _rezip(data, {bins[0]: _to_ubj({**state, "Model": model})})))
        out.append(("embedded xgboost ubj bomb", _rezip(data, {bins[0]: b"{" + b"L" + (5).to_bytes(8, "big")
                                                               + b"Model" + b"[$Z#L" + (10**9).to_bytes(8, "big")
                                                               + b"}"})))
        return out

    def handles(node, found):
        if isinstance(node, dict):
            if node.get("__class__") == "Booster" and str(node.get("__module__", "")).startswith("lightgbm"):
                found.append(node["content"]["content"]["_handle"])
            for v in node.values():
                handles(v, found)
        elif isinstance(node, list):
            for v in node:
                handles(v, found)
        return found

    (handle,) = handles(schema, [])
    text = json.loads(handle["content"]).encode()
    for name, edited in lightgbm_edits(text, rng) + [("crlf", text.replace(b"\n", b"\r\n"))]:
        handle["content"] = json.dumps(edited.decode("utf-8", errors="replace"))
        out.append((f"embedded lightgbm {name}", _rezip(data, {"schema.json": json.dumps(schema).encode()})))
    handle["content"] = json.dumps(text.decode())
    return out


# ------------------------------------------------------------------ scikit-learn with missing values (#37)
def sklearn_missing_edits(data: bytes) -> list[tuple[str, bytes]]:
    """Edits of the node arrays of a .skops forest fitted with missing values, to its
    missing-value routing: every ``missing_go_to_left`` flipped (a consistent model,
    read exactly), a finite threshold made ``+inf`` (a split of missing values from
    numbers: consistent too), an ``+inf`` threshold made ``-inf`` or NaN and the
    flags cut short (damaged: refused)."""
    zin = zipfile.ZipFile(io.BytesIO(data))
    names = zin.namelist()

    def nodes(arr):
        return arr.dtype.names and "missing_go_to_left" in arr.dtype.names and (arr["left_child"] != -1).any()

    def edited(fn) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
            for n in names:
                b = zin.read(n)
                if n.endswith(".npy"):
                    arr = np.load(io.BytesIO(b), allow_pickle=False)
                    if nodes(arr):
                        arr = fn(arr.copy())
                        nb = io.BytesIO()
                        np.save(nb, arr, allow_pickle=False)
                        b = nb.getvalue()
                zout.writestr(n, b)
        return buf.getvalue()

    def flip(a):
        a["missing_go_to_left"] = 1 - a["missing_go_to_left"]
        return a

    def inner_finite(a):
        return int(np.flatnonzero((a["left_child"] != -1) & np.isfinite(a["threshold"]))[0])

    def to_inf(a):
        a["threshold"][inner_finite(a)] = np.inf
        return a

    def inf_to(v):
        def fn(a):
            at = np.flatnonzero((a["left_child"] != -1) & np.isposinf(a["threshold"]))
            a["threshold"][at if at.size else [inner_finite(a)]] = v
            return a
        return fn

    def cut_flags(a):
        return np.lib.recfunctions.drop_fields(a, "missing_go_to_left", usemask=False)

    import numpy.lib.recfunctions  # noqa: F401 - drop_fields

    return [("missing_go_to_left flipped", edited(flip)), ("a threshold made +inf", edited(to_inf)),
            ("+inf thresholds made -inf", edited(inf_to(-np.inf))), ("+inf thresholds made NaN", edited(inf_to(np.nan))),
            ("missing_go_to_left dropped", edited(cut_flags))]


# ------------------------------------------------------------------ LightGBM headers (#37)
def lightgbm_header_files(n_estimators: int = 6) -> dict[str, bytes]:
    """LightGBM text of a binary, a 3-class and a regression model (and ``_X``: rows
    to predict, some with missing values), for :func:`lightgbm_header_edits`."""
    import lightgbm as lgb

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    score = X[:, 0] + X[:, 1] - 0.5 * X[:, 2]
    kw = dict(n_estimators=n_estimators, num_leaves=6, verbose=-1, n_jobs=1)
    models = {"binary.txt": lgb.LGBMClassifier(**kw).fit(X, (score > 0).astype(int)),
              "3-class.txt": lgb.LGBMClassifier(**kw).fit(X, np.digitize(score, [-0.6, 0.6])),
              "regression.txt": lgb.LGBMRegressor(**kw).fit(X, score)}
    out = {name: m.booster_.model_to_string().encode() for name, m in models.items()}
    P = rng.normal(size=(40, 4))
    P[rng.random(P.shape) < 0.2] = np.nan
    out["_X"] = P.tobytes()
    return out


def lightgbm_header_edits(text: bytes) -> list[tuple[str, bytes]]:
    """The header of LightGBM text made to disagree with itself, its objective or its
    trees, one field at a time (and a few edits that keep it consistent, which must be
    read as LightGBM reads them): ``num_class``, ``num_tree_per_iteration``, the
    objective (its name, its ``num_class``, ``sigmoid``, a parameter twice),
    ``max_feature_idx``, ``feature_names``, ``feature_infos``, ``monotone_constraints``,
    ``label_index``, ``average_output``, ``version``, a key twice, trees removed,
    duplicated or renumbered, a tree's key twice, text between trees."""
    lines = text.decode().split("\n")
    hdr_end = lines.index(next(l for l in lines if l.startswith("Tree=")))
    value = {l.split("=", 1)[0]: l.split("=", 1)[1] for l in lines[:hdr_end] if "=" in l}
    k = int(value["num_class"])
    objective = value["objective"]
    out: list[tuple[str, bytes]] = []

    def put(name: str, new: list[str]) -> None:
        out.append((name, "\n".join(new).encode()))

    def header(name: str, key: str, val: str | None, extra: dict[str, str | None] | None = None) -> None:
        new, changes = [], {key: val, **(extra or {})}
        for line in lines[:hdr_end]:
            kk = line.split("=", 1)[0]
            if kk in changes and "=" in line:
                if changes.pop(kk) is not None:
                    new.append(f"{kk}={val if kk == key else (extra or {})[kk]}")
            else:
                new.append(line)
        at = next(i for i, line in enumerate(new) if line.startswith("feature_infos="))
        new[at:at] = [f"{kk}={v}" for kk, v in changes.items() if v is not None]     # keys the text lacked
        put(name, new + lines[hdr_end:])

    for v in sorted({1, k + 1, max(k - 1, 1), 0, -1, 3}):
        if v != k:
            header(f"num_class={v}", "num_class", str(v))
            header(f"num_tree_per_iteration={v}", "num_tree_per_iteration", str(v))
            header(f"num_class and num_tree_per_iteration={v}", "num_class", str(v),
                   {"num_tree_per_iteration": str(v)})
    header("num_class=abc", "num_class", "abc")
    objectives = ["binary sigmoid:1", "multiclass num_class:3", "multiclass num_class:1", f"multiclass num_class:{k + 1}",
                  "multiclassova num_class:3 sigmoid:1", "regression", "poisson", "cross_entropy", "lambdarank",
                  "binary sigmoid:0", "binary sigmoid:-1", "binary sigmoid:nan", "binary sigmoid:2",
                  "multiclass num_class:3 num_class:1", "binary sigmoid:1 sigmoid:3", "no_such_objective",
                  "multiclass num_class:x", "regression sqrt", ""]
    for obj in objectives:
        if obj != objective:
            header(f"objective={obj}", "objective", obj)
    header("objective removed", "objective", None)
    header("objective=binary=1", "objective", "binary=1")
    d = int(value["max_feature_idx"]) + 1
    names, infos = value["feature_names"].split(), value["feature_infos"].split()
    header("max_feature_idx + 1", "max_feature_idx", str(d))
    header("max_feature_idx - 1", "max_feature_idx", str(d - 2))
    header("feature_names: one dropped", "feature_names", " ".join(names[:-1]))
    header("feature_names: one added", "feature_names", " ".join(names + ["extra"]))
    header("feature_infos: one dropped", "feature_infos", " ".join(infos[:-1]))
    header("feature_infos: one added", "feature_infos", " ".join(infos + ["none"]))
    for bad in ("[abc", "[1:0]", "[x:y]", "[-1:2:3]", "0:1:2", "none"):
        header(f"feature_infos: {bad}", "feature_infos", " ".join([bad] + infos[1:]))
    header("monotone_constraints short", "monotone_constraints", " ".join(["1"] * (d - 1)))
    header("monotone_constraints 2", "monotone_constraints", " ".join(["2"] + ["0"] * (d - 1)))
    header("monotone_constraints valid", "monotone_constraints", " ".join(["1"] + ["0"] * (d - 1)))
    header("label_index=-1", "label_index", "-1")
    header("label_index=5", "label_index", "5")
    header("version=v99", "version", "v99")
    i = lines.index(f"num_class={k}")
    put("num_class twice, the second 1", lines[:i + 1] + ["num_class=1"] + lines[i + 1:])
    put("num_class twice, the same", lines[:i + 1] + [f"num_class={k}"] + lines[i + 1:])
    put("average_output added", lines[:i + 1] + ["average_output"] + lines[i + 1:])
    starts = [j for j, l in enumerate(lines) if l.startswith("Tree=")]
    end = lines.index("end of trees")
    blocks = [lines[a:b] for a, b in zip(starts, starts[1:] + [end])]
    no_sizes = [l for l in lines[:hdr_end] if not l.startswith("tree_sizes=")]

    def trees(name: str, new_blocks: list[list[str]]) -> None:
        numbered = [[f"Tree={t}"] + b[1:] for t, b in enumerate(new_blocks)]
        put(name, no_sizes + [l for b in numbered for l in b] + lines[end:])

    trees("the last tree removed", blocks[:-1])
    trees(f"the last iteration ({k} trees) removed", blocks[:-k])
    trees("a tree duplicated", blocks + blocks[-1:])
    trees("every tree of one iteration more", blocks + blocks[-k:])
    put("trees renumbered", no_sizes + [l.replace("Tree=1", "Tree=7") for b in blocks for l in b] + lines[end:])
    put("end of trees removed", no_sizes + [l for b in blocks for l in b] + lines[end + 1:])
    second = blocks[1]
    leaves = next(l for l in second if l.startswith("num_leaves="))
    for name, new in (("a tree's num_leaves twice", second[:2] + ["num_leaves=2"] + second[2:]),
                      ("a tree's leaf_value twice", second[:2] + [next(l for l in second if l.startswith(
                          "leaf_value=")).replace("=", "=1 ", 1)] + second[2:]),
                      ("a line without '=' in a tree", second[:3] + ["junk"] + second[3:]),
                      ("text between trees", second[:-1] + ["junk"] + second[-1:]),
                      ("23 lines in a tree", second[:-2] + [f"extra{j}=0" for j in range(8)] + second[-2:])):
        assert leaves
        trees(name, blocks[:1] + [new] + blocks[2:])
    return out


_ORACLE = r"""
import json, sys
import numpy as np
import lightgbm as lgb
X = np.load(sys.argv[1])
for line in sys.stdin:
    path = line.strip()
    try:
        b = lgb.Booster(model_file=path)
        raw = b.predict(X, raw_score=True)
        pred = b.predict(X)
        out = {"raw": np.asarray(raw, dtype=float).reshape(len(X), -1).tolist(),
               "pred": np.asarray(pred, dtype=float).reshape(len(X), -1).tolist(),
               "average_output": bool(b.dump_model().get("average_output"))}
    except Exception as exc:
        out = {"error": str(exc)[:200]}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


def lightgbm_oracle(texts: list[bytes], X: np.ndarray) -> list[dict]:
    """What LightGBM itself makes of each text, read in child processes (one for all,
    a new one after a crash): ``{"raw", "pred", "average_output"}`` (its raw scores and
    predictions on ``X``), ``{"error"}`` (it refused), or ``{"crash": returncode}``."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    tmp = Path(tempfile.mkdtemp(prefix="atlas-lgb-oracle-"))
    np.save(tmp / "X.npy", X)
    paths = []
    for i, t in enumerate(texts):
        (tmp / f"{i}.txt").write_bytes(t)
        paths.append(str(tmp / f"{i}.txt"))
    results: list[dict] = []
    while len(results) < len(texts):
        rest = paths[len(results):]
        proc = subprocess.run([sys.executable, "-c", _ORACLE, str(tmp / "X.npy")], input="\n".join(rest) + "\n",
                              capture_output=True, text=True, timeout=600)
        got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        results += got
        if len(results) < len(texts):            # it died on the next text
            results.append({"crash": proc.returncode})
    return results


# ------------------------------------------------------------------ HistGradientBoosting (#26)
ADULT_NUMBERS = ("Age", "CapitalGain", "EducationNumber", "HoursPerWeek")
ADULT_CATEGORIES = ("MaritalStatus", "Occupation", "Relationship", "WorkClass")


def adult_like(n: int = 600, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """``n`` rows of Adult's numerical and categorical columns (categories as text such
    as ``"Occupation 3"``) and its ``Class``, drawn from the Adult sample the repository
    carries (tests/data/adult_sample.csv: the same rows on every machine, ../shared or
    not). Also the source's name."""
    from pathlib import Path

    rng = np.random.default_rng(seed)
    path = Path(__file__).resolve().parent / "data" / "adult_sample.csv"
    raw = pd.read_csv(path, header=[0, 1])
    raw.columns = [c[0] for c in raw.columns]
    df = raw.iloc[np.sort(rng.choice(len(raw), n, replace=False))].reset_index(drop=True)
    df = df[list(ADULT_NUMBERS + ADULT_CATEGORIES) + ["Class"]]
    source = "adult"
    for c in ADULT_CATEGORIES:
        df[c] = [f"{c} {int(v)}" for v in df[c]]
    return df, source


def _hgb_specs(df: pd.DataFrame, rng: np.random.Generator) -> dict[str, tuple]:
    """name -> (class, fit keywords, X as given to fit, y): classifiers binary and 3-class
    and regressors, numeric only and with native categorical features (pandas categories,
    text columns by name, integer codes in an array), some trained with missing values."""
    from sklearn.ensemble import HistGradientBoostingClassifier as C
    from sklearn.ensemble import HistGradientBoostingRegressor as R

    n = len(df)
    nums, cats = list(ADULT_NUMBERS), list(ADULT_CATEGORIES)
    level = {c: df[c].str.split().str[-1].astype(int) for c in cats}
    score = ((df.Age - 38) / 13 + (df.EducationNumber - 10) / 2.5 + (df.HoursPerWeek - 40) / 12
             + np.log1p(df.CapitalGain) / 4 + df.Class + (level["Occupation"] % 3 - 1) * 0.9
             + (level["MaritalStatus"] == 2) * 1.1 - (level["Relationship"] % 2) * 0.7).to_numpy()
    three = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    binary = df.Class.to_numpy()

    def holes(frame, cols, share):
        frame = frame.copy()
        for c in cols:
            frame.loc[rng.random(n) < share, c] = np.nan
        return frame

    as_cat = df[nums + cats].astype({c: "category" for c in cats})
    codes = np.column_stack([df[nums].to_numpy(float)] + [df[c].str.split().str[-1].astype(float) for c in cats[:2]])
    codes[rng.random(n) < 0.15, 0] = np.nan
    return {
        "binary-numeric-nan": (C, {}, holes(df[nums], ["Age", "HoursPerWeek"], 0.15), binary),
        "binary-categorical": (C, {"categorical_features": "from_dtype"}, as_cat, binary),
        "3-class-numeric": (C, {}, df[nums].to_numpy(float), three),
        "3-class-categorical-nan": (C, {"categorical_features": "from_dtype"},
                                    holes(as_cat, ["Age", "Occupation", "WorkClass"], 0.1), three),
        "regression-categorical-nan": (R, {"categorical_features": cats},
                                       holes(df[nums + cats], ["HoursPerWeek", "Relationship"], 0.1), score),
        "regression-codes-nan": (R, {"categorical_features": [4, 5]}, codes, score),
    }


def hgb_files(n: int = 600, max_iter: int = 6) -> dict:
    """Small HistGradientBoosting models (see :func:`_hgb_specs`) saved with skops:
    ``{"files": {name: bytes}, "X": {name: X as given to fit}, "data": source}``."""
    import skops.io as sio
    from threadpoolctl import threadpool_limits

    df, source = adult_like(n)
    rng = np.random.default_rng(7)
    files, given = {}, {}
    with threadpool_limits(limits=1, user_api="openmp"):
        for name, (cls, kw, X, y) in _hgb_specs(df, rng).items():
            model = cls(max_iter=max_iter, max_leaf_nodes=8, early_stopping=False, random_state=0, **kw).fit(X, y)
            files[f"{name}.skops"], given[f"{name}.skops"] = sio.dumps(model), X
    return {"files": files, "X": given, "data": source}


def _skops_nodes(node: dict, path: str = ""):
    """(path, node) of every node of a skops schema; a path reads like
    ``/_predictors[2][0]/nodes`` (attributes by name, items by index)."""
    yield path, node
    content = node.get("content")
    if isinstance(content, dict) and "__loader__" in content:        # an object's state, a DictNode
        yield from _skops_nodes(content, path)
    elif isinstance(content, dict):                                  # attribute -> node
        for k, v in content.items():
            if isinstance(v, dict) and "__loader__" in v:
                yield from _skops_nodes(v, f"{path}/{k}")
    elif isinstance(content, list):                                  # list, tuple, array of objects
        for i, v in enumerate(content):
            if isinstance(v, dict) and "__loader__" in v:
                yield from _skops_nodes(v, f"{path}[{i}]")


class _SkopsDoc:
    """A .skops file opened for editing: its schema (a dict) and its members (bytes)."""

    def __init__(self, data: bytes):
        zf = zipfile.ZipFile(io.BytesIO(data))
        self.members = {n: zf.read(n) for n in zf.namelist()}
        self.schema = json.loads(self.members["schema.json"])
        self._fresh = 0

    def copy(self) -> "_SkopsDoc":
        new = object.__new__(_SkopsDoc)
        new.members, new.schema, new._fresh = dict(self.members), copy.deepcopy(self.schema), 0
        return new

    def nodes(self, where=lambda path, node: True) -> list[tuple[str, dict]]:
        return [(p, n) for p, n in _skops_nodes(self.schema) if where(p, n)]

    def node(self, path: str) -> dict | None:
        return next((n for p, n in _skops_nodes(self.schema) if p == path), None)

    def array(self, node: dict) -> np.ndarray:
        return np.load(io.BytesIO(self.members[node["file"]]), allow_pickle=False)

    def fresh(self, node: dict) -> dict:
        """``node`` given an id of its own: skops builds the first node of an id and
        reuses it for every later one (an edit of a shared value must not be ignored)."""
        self._fresh += 1
        node["__id__"] = 10**15 + self._fresh
        return node

    def set_array(self, node: dict, arr: np.ndarray, *, shared: bool = True) -> None:
        """Write ``arr`` for ``node``: into its member (every node sharing it sees the
        change), or, ``shared=False``, into a new member of this node alone."""
        buf = io.BytesIO()
        np.save(buf, np.asarray(arr), allow_pickle=False)
        if not shared:
            node["file"] = f"{self.fresh(node)['__id__']}.npy"
        self.members[node["file"]] = buf.getvalue()

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
            for n, b in self.members.items():
                zout.writestr(n, json.dumps(self.schema).encode() if n == "schema.json" else b)
        return buf.getvalue()


def _json_value(node: dict):
    return json.loads(node["content"])


def _other_json(v, rng: np.random.Generator, pool: list) -> str:
    """A JSON text of the kind of ``v`` but another value (numbers: edge values too)."""
    if isinstance(v, bool):
        return json.dumps(not v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        choices = [0, -1, 1, 2, 255, 256, 2**31, -(2**40), 0.5, 1e308, -1e308, "NaN", "Infinity", "-Infinity"]
        c = choices[int(rng.integers(len(choices)))]
        return c if isinstance(c, str) else json.dumps(v + 1 if c == 1 else c)
    if isinstance(v, str):
        choices = ["", v[:-1] + "Z" if v else "Z", "auto", "error", "drop", "passthrough"] + pool
        return json.dumps(str(choices[int(rng.integers(len(choices)))]))
    if v is None:
        return json.dumps([0, 1.5, "x", True, []][int(rng.integers(5))])
    return json.dumps(None)


def _random_element_edit(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    a = a.copy()
    if a.size == 0:
        return a
    flat = a.reshape(-1)
    k = int(rng.integers(flat.size))
    if a.dtype.names:
        field = str(rng.choice(a.dtype.names))
        kind = a.dtype[field].kind
        col = flat[field]
        vals = ([np.nan, np.inf, -np.inf, 1e300, -1.0, 0.0] if kind == "f" else
                [0, 1, 2, 255, np.iinfo(a.dtype[field]).max] if kind == "u" else
                [-1, 0, 1, 2, 10**6] if kind == "i" else [0])
        col[k] = vals[int(rng.integers(len(vals)))]
    elif a.dtype.kind in "fiub":
        kind = a.dtype.kind
        vals = ([np.nan, np.inf, -np.inf, 1e300, -1.0, 0.0, 300.0, 2.5] if kind == "f" else
                [0, 1, 2, 255, np.iinfo(a.dtype).max] if kind == "u" else
                [-1, 0, 1, 2, 10**6] if kind == "i" else [True, False])
        flat[k] = vals[int(rng.integers(len(vals)))]
    return a


def hgb_skops_edits(data: bytes, rng: np.random.Generator, n_random: int = 6, nodes: bool = True
                    ) -> list[tuple[str, bytes]]:
    """Edits of a HistGradientBoosting model saved with skops, each made where the model
    keeps it (a field of one tree's node array, a category set, the encoder's categories
    and settings, the loss, the layout of its columns, its iterations) plus ``n_random``
    random edits of its JSON values and of its arrays, byte flips and truncations of
    the file and of its members. Some edits leave a model that is still consistent (a
    flipped missing-value direction, other category bits, a dropped iteration): those
    must be read exactly, the others refused. ``nodes=False``: no edits of single nodes."""
    base = _SkopsDoc(data)
    out: list[tuple[str, bytes]] = []

    def add(name: str, fn) -> None:
        doc = base.copy()
        if fn(doc) is not False:
            out.append((name, doc.to_bytes()))

    trees = base.nodes(lambda p, n: p.endswith("/nodes") and p.startswith("/_predictors"))
    arrays = {p: base.array(n) for p, n in trees}
    d = int(_json_value(base.node("/n_features_in_")))
    def nodes_where(keep):
        return [(p, int(i)) for p, a in arrays.items() for i in np.flatnonzero(keep(a))]

    cat_nodes = nodes_where(lambda a: (a["is_leaf"] == 0) & (a["is_categorical"] == 1))
    num_nodes = nodes_where(lambda a: (a["is_leaf"] == 0) & (a["is_categorical"] == 0))
    leaves = nodes_where(lambda a: a["is_leaf"] == 1)

    def pick(seq):
        return seq[int(rng.integers(len(seq)))]

    def node_edit(name: str, where: list, fn) -> None:
        if not where or not nodes:
            return
        path, i = pick(where)

        def apply(doc):
            a = doc.array(doc.node(path)).copy()
            if fn(a, int(i)) is False:
                return False
            doc.set_array(doc.node(path), a)
        add(f"{name} ({path[1:]}, node {int(i)})", apply)

    def setf(field, value):
        def f(a, i):
            a[field][i] = value(a, i) if callable(value) else value
        return f

    node_edit("left child: itself", num_nodes, setf("left", lambda a, i: i))
    node_edit("left child: the root", num_nodes + cat_nodes, setf("left", 0))
    node_edit("right child: out of range", num_nodes, setf("right", lambda a, i: len(a) + int(rng.integers(0, 999))))
    node_edit("right child: 2**32-1", num_nodes, setf("right", 2**32 - 1))
    node_edit("right child: the left one", num_nodes, setf("right", lambda a, i: a["left"][i]))
    node_edit("feature -1", num_nodes, setf("feature_idx", -1))
    node_edit("feature beyond the model's", num_nodes, setf("feature_idx", d))
    node_edit("feature 2**40", num_nodes, setf("feature_idx", 2**40))
    node_edit("another feature", num_nodes, setf("feature_idx", lambda a, i: (a["feature_idx"][i] + 1) % d))
    node_edit("another feature", num_nodes + cat_nodes,
              setf("feature_idx", lambda a, i: (a["feature_idx"][i] + 2) % d))
    for label, t in (("NaN", np.nan), ("+inf", np.inf), ("-inf", -np.inf), ("1e308", 1e308), ("-1e308", -1e308)):
        node_edit(f"threshold {label}", num_nodes, setf("num_threshold", t))
    node_edit("threshold one float up", num_nodes,
              setf("num_threshold", lambda a, i: np.nextafter(a["num_threshold"][i], np.inf)))
    for label, v in (("NaN", np.nan), ("inf", np.inf), ("1e300", 1e300)):
        node_edit(f"leaf value {label}", leaves, setf("value", v))
    node_edit("split marked a leaf", num_nodes + cat_nodes, setf("is_leaf", 1))
    node_edit("leaf marked a split", leaves, setf("is_leaf", 0))
    node_edit("is_leaf 2", leaves, setf("is_leaf", 2))
    node_edit("missing direction flipped", num_nodes + cat_nodes,
              setf("missing_go_to_left", lambda a, i: 1 - a["missing_go_to_left"][i]))
    node_edit("missing direction 7", num_nodes + cat_nodes, setf("missing_go_to_left", 7))
    node_edit("numerical split marked categorical", num_nodes, setf("is_categorical", 1))
    node_edit("categorical split marked numerical", cat_nodes, setf("is_categorical", 0))
    node_edit("is_categorical 3", cat_nodes, setf("is_categorical", 3))
    node_edit("category set out of range", cat_nodes, setf("bitset_idx", 10**6))
    def count_and_gain(a, i):                       # fields the prediction does not read
        a["count"][i], a["gain"][i] = 7, -1.0

    node_edit("count and gain changed", num_nodes, count_and_gain)

    def nodes_as(fn):
        def apply(doc):
            if not nodes:
                return False
            path, _ = pick(trees)
            doc.set_array(doc.node(path), fn(doc.array(doc.node(path))))
        return apply

    add("node array: a field float32", nodes_as(lambda a: a.astype([(n, "<f4" if n == "value" else a.dtype[n])
                                                                     for n in a.dtype.names])))
    add("node array: a field missing", nodes_as(lambda a: a[[n for n in a.dtype.names if n != "bitset_idx"]]))
    add("node array: 2-D", nodes_as(lambda a: a.reshape(-1, 1)))
    add("node array: empty", nodes_as(lambda a: a[:0]))
    add("node array: plain floats", nodes_as(lambda a: np.zeros(len(a))))

    bits = {p.replace("/nodes", "/raw_left_cat_bitsets") for p, _ in cat_nodes}
    for path in sorted(bits)[:2 if nodes else 0]:
        def flip_bits(doc, path=path):
            b = doc.array(doc.node(path)).copy()
            for _ in range(3):
                r, c = int(rng.integers(b.shape[0])), int(rng.integers(0, 16))
                b[r, c >> 5] ^= np.uint32(1 << (c & 31))
            doc.set_array(doc.node(path), b)
        add(f"category bits flipped ({path[1:]})", flip_bits)
        add(f"category bits 4 words ({path[1:]})", lambda doc, path=path: doc.set_array(
            doc.node(path), np.ascontiguousarray(doc.array(doc.node(path))[:, :4])))
        add(f"category bits int64 ({path[1:]})", lambda doc, path=path: doc.set_array(
            doc.node(path), doc.array(doc.node(path)).astype(np.int64)))

    # ---- the model's own arrays and settings
    def arr_edit(path: str, fn, shared: bool = True):
        def apply(doc):
            node = doc.node(path)
            if node is None or node.get("__loader__") != "NdArrayNode" or "file" not in node:
                return False
            new = fn(doc.array(node))
            if new is False:
                return False
            doc.set_array(node, new, shared=shared)
        return apply

    add("baseline NaN", arr_edit("/_baseline_prediction", lambda a: np.full_like(a, np.nan)))
    add("baseline +inf", arr_edit("/_baseline_prediction", lambda a: np.full_like(a, np.inf)))
    add("baseline one wider", arr_edit("/_baseline_prediction", lambda a: np.hstack([a, a[:, :1]])))
    add("baseline 1-D", arr_edit("/_baseline_prediction", lambda a: a.ravel()))
    add("baseline shifted", arr_edit("/_baseline_prediction", lambda a: a + 0.75))
    add("classes relabelled", arr_edit("/classes_", lambda a: a + 5 if a.dtype.kind in "iuf" else False))
    add("classes one more", arr_edit("/classes_", lambda a: np.r_[a, a[-1:] + 1] if a.dtype.kind in "iuf" else False))
    add("classes one fewer", arr_edit("/classes_", lambda a: a[:-1]))

    def flip(a, k=None):
        a = a.copy()
        k = int(rng.integers(a.size)) if k is None else k
        a[k] = not a[k] if a.dtype == bool else 1 - a[k]
        return a

    add("is_categorical_ flipped", arr_edit("/is_categorical_", flip))
    add("the column transformer's categorical columns only", arr_edit("/_preprocessor/transformers_[0][2]", flip,
                                                                      shared=False))
    add("the column transformer's numerical columns only", arr_edit("/_preprocessor/transformers_[1][2]", flip,
                                                                    shared=False))
    add("_is_categorical_remapped flipped", arr_edit("/_is_categorical_remapped", flip))
    add("the bin mapper's categorical features flipped", arr_edit("/_bin_mapper/is_categorical_", flip))
    thresholds = base.nodes(lambda p, n: p.startswith("/_bin_mapper/bin_thresholds_[") and n.get("file"))
    known = [p for p, n in thresholds                  # a categorical feature's: its categories 0..K-1
             if 0 < base.array(n).size < 255 and np.array_equal(base.array(n), np.arange(base.array(n).size))]
    for path in known[:1]:
        add("known categories: the last dropped", arr_edit(path, lambda a: a[:-1]))
        add("known categories: 300 added", arr_edit(path, lambda a: np.r_[a, 300.0]))
        add("known categories: -1 added", arr_edit(path, lambda a: np.r_[a, -1.0]))
        add("known categories: 2.5", arr_edit(path, lambda a: np.r_[a[:-1], 2.5]))
        add("known categories: none", arr_edit(path, lambda a: a[:0]))

    enc = "/_preprocessor/transformers_[0][1]"
    cats = base.nodes(lambda p, n: p.startswith(f"{enc}/categories_[") and p.count("[") == 3
                      and n.get("__loader__") == "NdArrayNode")
    for path, node in cats[:1]:
        def on_levels(fn, path=path):
            def apply(doc):
                node = doc.node(path)
                if "file" in node:                                   # numbers: an .npy member
                    a = doc.array(node).copy()
                    new = fn(list(a))
                    if new is False:
                        return False
                    doc.set_array(node, np.array(new, dtype=a.dtype))
                else:                                                # text: JSON items
                    new = fn(list(node["content"]))
                    if new is False:
                        return False
                    doc.fresh(node)["content"] = new
                    doc.fresh(node["shape"]["content"][0])["content"] = json.dumps(len(new))
            return apply

        def renamed(v, suffix=" (renamed)"):
            if isinstance(v, dict):                                  # a JSON item: text
                return dict(v, content=json.dumps(f"{json.loads(v['content'])}{suffix}"), __id__=None)
            return v - 1000 - len(suffix)                            # a number: still in increasing order

        at = path[len(enc) + 1:]
        add(f"categories: two swapped ({at})", on_levels(lambda c: c[1:2] + c[:1] + c[2:]))
        add(f"categories: one twice ({at})", on_levels(lambda c: c[:1] + c[:-1]))
        add(f"categories: one renamed ({at})", on_levels(lambda c: [renamed(c[0])] + c[1:]))
        add(f"categories: one dropped ({at})", on_levels(lambda c: c[:-1] if len(c) > 1 else False))
        add(f"categories: 300 of them ({at})",
            on_levels(lambda c: c + [renamed(c[0], f" {k}") for k in range(300)]))

    def set_json(path: str, text: str):
        def apply(doc):
            node = doc.node(path)
            if node is None or node.get("__loader__") != "JsonNode":
                return False
            doc.fresh(node)["content"] = text
        return apply

    for label, path, text in (
            ("encoder: handle_unknown 'error'", f"{enc}/handle_unknown", '"error"'),
            ("encoder: unknown values encoded 0", f"{enc}/unknown_value", "0"),
            ("encoder: unknown values encoded -1", f"{enc}/unknown_value", "-1"),
            ("encoder: missing values encoded 1", f"{enc}/encoded_missing_value", "1"),
            ("encoder: infrequent categories on", f"{enc}/_infrequent_enabled", "true"),
            ("numbers: check_array lets no NaN through",
             "/_preprocessor/transformers_[1][1]/func/kwds/ensure_all_finite", "true"),
            ("numbers: kw_args", "/_preprocessor/transformers_[1][1]/kw_args", '{"copy": true}'),
            ("column transformer: weights", "/_preprocessor/transformer_weights", "2.0"),
            ("column transformer: remainder passthrough", "/_preprocessor/remainder", '"passthrough"'),
            ("n_trees_per_iteration_ + 1", "/n_trees_per_iteration_", None),
            ("n_trees_per_iteration_ 0", "/n_trees_per_iteration_", "0"),
            ("n_features_in_ + 1", "/n_features_in_", str(d + 1)),
            ("n_features_in_ - 1", "/n_features_in_", str(d - 1)),
            ("loss: n_classes + 1", "/_loss/n_classes", None)):
        node = base.node(path)
        if node is not None and node.get("__loader__") == "JsonNode" and (text or isinstance(_json_value(node), int)):
            add(label, set_json(path, text if text is not None else json.dumps(_json_value(node) + 1)))

    def set_class(path: str, cls: str, module: str | None = None):
        def apply(doc):
            node = doc.node(path)
            if node is None:
                return False
            doc.fresh(node)["__class__"] = cls
            if module:
                node["__module__"] = module
        return apply

    add("numbers: check_array's dtype float32",
        set_class("/_preprocessor/transformers_[1][1]/func/kwds/dtype[0]", "float32"))
    add("numbers: numpy.exp for check_array", set_class("/_preprocessor/transformers_[1][1]/func/func", "exp", "numpy"))
    top = base.schema["__class__"]
    add("a classifier read as a regressor and back",
        set_class("", "HistGradientBoostingRegressor" if "Classifier" in top else "HistGradientBoostingClassifier"))
    loss = base.node("/_loss")["__class__"]
    for other in ("HalfBinomialLoss", "HalfMultinomialLoss", "HalfSquaredError", "HalfPoissonLoss", "AbsoluteError"):
        if other != loss:
            add(f"loss {loss} -> {other}", set_class("/_loss", other))
    closs = base.node("/_loss/closs")["__class__"]
    for other in ("CyHalfBinomialLoss", "CyHalfSquaredError", "CyHalfPoissonLoss"):
        if other != closs:
            add(f"loss kernel {closs} -> {other}", set_class("/_loss/closs", other))
    link = base.node("/_loss/link")
    if link is not None and link.get("__loader__") == "ObjectNode":
        for other in ("IdentityLink", "LogLink", "LogitLink", "MultinomialLogit"):
            if other != link["__class__"]:
                add(f"link {link['__class__']} -> {other}", set_class("/_loss/link", other))
    for name in ("feature_names_in_", "_preprocessor/feature_names_in_"):
        if base.node(f"/{name}") is not None:
            def swap_names(doc, name=name):
                items = doc.node(f"/{name}")["content"]
                items[0], items[-1] = items[-1], items[0]
            add(f"{name}: first and last swapped", swap_names)

    def drop_attr(attr):
        def apply(doc):
            state = doc.schema["content"]["content"]
            if attr not in state:
                return False
            del state[attr]
        return apply

    for attr in ("_bin_mapper", "_preprocessor", "_baseline_prediction", "classes_", "_predictors",
                 "n_trees_per_iteration_", "_loss", "is_categorical_", "n_features_in_"):
        add(f"attribute {attr} removed", drop_attr(attr))

    def iterations(fn):
        def apply(doc):
            its = doc.node("/_predictors")["content"]
            if fn(its) is False:
                return False
        return apply

    add("iterations: the last dropped", iterations(lambda its: its.pop()))
    add("iterations: the first twice", iterations(lambda its: its.insert(0, copy.deepcopy(its[0]))))
    add("iterations: none", iterations(lambda its: its.clear()))
    add("iterations: one tree more in one", iterations(lambda its: its[0]["content"].append(
        copy.deepcopy(its[1]["content"][0]))))
    add("iterations: its trees swapped", iterations(lambda its: False if len(its[0]["content"]) < 2 else
                                                    its[0]["content"].reverse()))

    # ---- random edits: JSON values, array elements, bytes
    scalars = base.nodes(lambda p, n: n.get("__loader__") == "JsonNode" and n.get("is_json"))
    pool = sorted({str(_json_value(n)) for _, n in scalars if isinstance(_json_value(n), str)})[:20]
    for r in range(n_random):
        path, node = pick(scalars)

        def edit_scalar(doc, path=path, node=node, r=r):
            doc.fresh(doc.node(path))["content"] = _other_json(_json_value(node), rng, pool)
        add(f"random JSON value {path or '/'} #{r}", edit_scalar)
    members = base.nodes(lambda p, n: n.get("__loader__") == "NdArrayNode" and "file" in n)
    for r in range(n_random):
        path, node = pick(members)
        add(f"random array element {path} #{r}", arr_edit(path, lambda a: _random_element_edit(a, rng)))
    for r in range(2):
        out.append((f"hgb.skops flipped #{r}", _flip(data, rng, int(rng.integers(1, 8)))))
    out.append(("hgb.skops truncated", _truncate(data, rng)))
    out.extend(skops_edits(data, rng)[:4])              # damaged members (its node-array edits are RF's)
    return out


def _cell(v) -> str:
    if isinstance(v, float) and np.isnan(v):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


REFUSE = object()       # a cell the app must refuse: text where the model needs a number


def table_edits(df: pd.DataFrame, target: str, rng: np.random.Generator, n_random: int = 4
                ) -> list[tuple[str, bytes, pd.DataFrame | None]]:
    """Damaged CSV files of the table ``df``: ``(case, bytes, what the file holds)``, the
    last a frame of the values each cell holds as written (``REFUSE`` in a cell the
    app must refuse), or None where the bytes themselves are damaged (flips,
    truncations: no reading is the right one, only a clean refusal or an exact one).

    Cell edits: empty and NA-like cells, unseen, differently written and quoted
    categories, numbers written with spaces, a sign, an exponent, many digits, beyond
    the float range, non-finite, as text or with a decimal comma; structure: a column
    missing, renamed, added, reordered or repeated, a short or long row, a target
    missing, line endings, delimiter, byte-order mark and UTF-16."""
    numbers = [c for c in df.columns if c != target and pd.api.types.is_numeric_dtype(df[c])]
    texts = [c for c in df.columns if c != target and c not in numbers]
    cells = [[_cell(v) for v in row] for row in df.itertuples(index=False)]
    header = list(df.columns)
    out: list[tuple[str, bytes, pd.DataFrame | None]] = []

    def csv(rows, head=header, sep=",", end="\n") -> bytes:
        return (end.join([sep.join(head)] + [sep.join(r) for r in rows]) + end).encode()

    def cell_case(name: str, cols: list, edits: list[tuple[str, object]]) -> None:
        rows = [list(r) for r in cells]
        held = df.astype(object).copy()
        for text, value in edits:
            i, c = int(rng.integers(len(rows))), str(cols[int(rng.integers(len(cols)))])
            j = header.index(c)
            rows[i][j] = text
            held.iat[i, j] = value
        out.append((name, csv(rows), held))

    for name, text, value in (("empty", "", np.nan), ("NA", "NA", np.nan), ("nan", "nan", np.nan),
                              ("spaces", "  42  ", 42.0), ("a plus sign", "+7", 7.0), ("an exponent", "1.5e3", 1500.0),
                              ("negative zero", "-0", -0.0), ("23 digits", "12345678901234567890123",
                                                                   12345678901234567890123.0),
                              ("40 decimals", "0.1000000000000000055511151231257827021181583404541015625", 0.1),
                              ("1e308", "1e308", 1e308), ("beyond the float range", "1e400", np.inf),
                              ("inf", "inf", np.inf), ("-inf", "-inf", -np.inf), ("text", "abc", REFUSE),
                              ("a decimal comma", '"1,5"', REFUSE), ("hex", "0x1A", REFUSE)):
        cell_case(f"number cell: {name}", numbers, [(text, value)] * int(rng.integers(3, 12)))
    some = str(df[texts[0]].dropna().iloc[0])
    for name, text, value in (("empty", "", np.nan), ("NA", "NA", np.nan), ("N/A", "N/A", np.nan),
                              ("unseen", "Never Seen", "Never Seen"), ("lower case", some.lower(), some.lower()),
                              ("a number", "3", "3"), ("quoted with a comma", f'"{some}, x"', f"{some}, x"),
                              ("quoted with a newline", f'"{some}\nx"', f"{some}\nx"),
                              ("quoted with a quote", f'"{some} ""x"""', f'{some} "x"'),
                              ("accents", "Ocupación 3", "Ocupación 3"), ("a tab", f"{some}\tx", f"{some}\tx"),
                              ("a trailing space", f"{some} ", f"{some} "),
                              ("quoted spaces", f'" {some} "', f" {some} ")):
        cell_case(f"category cell: {name}", texts, [(text, value)] * int(rng.integers(3, 12)))
    cell_case("mixed cells", numbers + texts, [("", np.nan), ("NA", np.nan), ("", np.nan)])

    held = df.astype(object)
    for name, data, frame in (
            ("CRLF line endings", csv(cells, end="\r\n"), held),
            ("CR line endings", csv(cells, end="\r"), held),
            ("semicolons", csv(cells, sep=";"), held),
            ("byte-order mark", b"\xef\xbb\xbf" + csv(cells), held),
            ("UTF-16", csv(cells).decode().encode("utf-16"), held),
            ("columns reordered", csv([r[::-1] for r in cells], head=header[::-1]), held[header[::-1]]),
            ("a column added", csv([r + ["1"] for r in cells], head=header + ["extra"]), held.assign(extra=1)),
            ("a feature column missing", csv([r[1:] for r in cells], head=header[1:]), held.iloc[:, 1:]),
            ("a column renamed", csv(cells, head=[header[0] + "_x"] + header[1:]),
             held.rename(columns={header[0]: header[0] + "_x"})),
            ("a header repeated", csv(cells, head=header[:-1] + [header[0]]), None),
            ("a row with a field too many", csv(cells[:5] + [cells[5] + ["1"]] + cells[6:]), None),
            ("a row one field short", csv(cells[:5] + [cells[5][:-1]] + cells[6:]), None),
            ("the target empty in a row", csv(cells[:3] + [cells[3][:-1] + [""]] + cells[4:]), None),
            ("no rows", csv([]), None)):
        out.append((f"table: {name}", data, frame))
    base = csv(cells)
    for r in range(n_random):
        out.append((f"table flipped #{r}", _flip(base, rng, int(rng.integers(1, 6))), None))
        out.append((f"table truncated #{r}", _truncate(base, rng), None))
    return out
