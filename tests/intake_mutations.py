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
    for r in range(3):
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
        from core.parsing.ubjson import read_ubjson

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
