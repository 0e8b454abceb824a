"""Seeded edits of small model files of every format the readers take (#60), for the
reading fuzz (``tests/intake/test_reading_fuzz.py``).

:func:`reading_files` trains small models as a data scientist would and saves them
as their libraries do: scikit-learn forests, extra trees, a decision tree and
gradient boosting (binary, 3 classes, regression) with skops; XGBoost (binary,
3 classes, regression) as JSON and UBJSON; LightGBM (the same three) as text;
CatBoost (binary oblivious and depthwise, 3 classes, regression) as JSON and
``.cbm``. CatBoost's files are made deterministic (its model id and training
time fixed) so that a seed gives the same bytes on every run.

:func:`reading_edits` edits each file ``per_file`` times (a seed gives the same
cases): numbers of its document replaced by edge values (0, -1, 2**31-1, 1e300,
the float32 limit and just past it, ...), nudged (times 10, negated, one float up),
strings replaced, parts deleted or given another type; for text, numbers edited
in place, lines removed, the file cut short or bytes flipped; for ``.skops``,
elements of the node and value arrays and JSON values of the schema; for ``.cbm``,
leaf values, borders and 32-bit words of the model edited in place. The two edits
an outside trial found read silently otherwise (a forest's leaf of 1e300 in one
tree, 2**31-1 in another) are among the cases of every seed.
"""

from __future__ import annotations

import copy
import io
import json
import re
import struct
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tests.intake_mutations import _flip, _other_json, _SkopsDoc, _to_ubj, _truncate

__all__ = ["reading_files", "reading_edits", "json_edits", "text_edits", "skops_edits", "cbm_edits",
           "outside_trial_edits", "EDGE"]

EDGE = (0, -1, 1, 2, 0.5, -0.5, 255, 256, 65536, 2**31 - 1, -(2**31), 2**32, 2**53 + 1, 1e15, -7.25, 1e300, -1e300,
        1.7e308, 3.4028234663852886e38, 3.5e38, 1e39, -1e39, 1e-45, 1e-320)


def reading_files() -> dict[str, Any]:
    """Small models of every format, saved as their libraries save them; ``"_X"``: the rows
    they were fitted on (300 x 4)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    score = X[:, 0] + X[:, 1] - 0.5 * X[:, 2]
    labels = {"binary": (score > 0).astype(int), "3-class": np.digitize(score, [-0.6, 0.6]),
              "regression": score + 0.1 * rng.normal(size=len(score))}
    out: dict[str, Any] = {**_sklearn_files(X, labels), **_booster_files(X, labels), **_catboost_files(X, labels)}
    out["_X"] = X
    return out


def _sklearn_files(X: np.ndarray, y: dict) -> dict[str, bytes]:
    import skops.io as sio
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeClassifier

    models = {"forest-binary": RandomForestClassifier(12, max_depth=3, random_state=0).fit(X, y["binary"]),
              "forest-3-class": RandomForestClassifier(4, max_depth=3, random_state=0).fit(X, y["3-class"]),
              "forest-regression": RandomForestRegressor(4, max_depth=3, random_state=0).fit(X, y["regression"]),
              "extra-trees": ExtraTreesClassifier(3, max_depth=3, random_state=0).fit(X, y["binary"]),
              "tree-3-class": DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y["3-class"]),
              "boosting-binary": GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0)
              .fit(X, y["binary"]),
              "boosting-3-class": GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0)
              .fit(X, y["3-class"]),
              "boosting-regression": GradientBoostingRegressor(n_estimators=4, max_depth=2, random_state=0)
              .fit(X, y["regression"])}
    return {f"{name}.skops": _stable(sio.dumps(m)) for name, m in models.items()}


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _stable(data: bytes) -> bytes:
    """A .skops file whose bytes depend on its model alone: skops names members and shared
    objects by their memory addresses, which differ from run to run; here they are numbered
    in the order the schema meets them (the same objects shared as before)."""
    doc = _SkopsDoc(data)
    ids: dict[Any, int] = {}
    files: dict[str, str] = {}
    for node in _walk(doc.schema):
        if "__id__" in node:
            node["__id__"] = ids.setdefault(node["__id__"], len(ids) + 1)
        if isinstance(node.get("file"), str) and node["file"] in doc.members:
            node["file"] = files.setdefault(node["file"], f"{len(files)}.npy")
    doc.members = {new: doc.members[old] for old, new in files.items()} | {"schema.json": b""}
    return _zip(doc)


def _zip(doc: Any) -> bytes:
    """The .skops file of an edited document, with fixed member dates (the same bytes each run)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for name, b in doc.members.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, json.dumps(doc.schema).encode() if name == "schema.json" else b)
    return buf.getvalue()


def _booster_files(X: np.ndarray, y: dict) -> dict[str, bytes]:
    import lightgbm as lgb
    import xgboost as xgb

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, target in y.items():
            cls = xgb.XGBRegressor if kind == "regression" else xgb.XGBClassifier
            booster = cls(n_estimators=4 if kind != "3-class" else 3, max_depth=2, n_jobs=1).fit(X, target).get_booster()
            for ext in ("json", "ubj"):
                path = Path(tmp) / f"xgboost-{kind}.{ext}"
                booster.save_model(path)
                out[path.name] = path.read_bytes()
            lcls = lgb.LGBMRegressor if kind == "regression" else lgb.LGBMClassifier
            model = lcls(n_estimators=4, num_leaves=4, min_child_samples=5, verbose=-1, n_jobs=1).fit(X, target)
            out[f"lightgbm-{kind}.txt"] = model.booster_.model_to_string().encode()
    return out


def _catboost_files(X: np.ndarray, y: dict) -> dict[str, bytes]:
    import catboost as cb

    kw = dict(iterations=4, depth=2, verbose=0, allow_writing_files=False, thread_count=1, random_seed=0)
    models = {"catboost-binary": cb.CatBoostClassifier(**kw).fit(X, y["binary"]),
              "catboost-depthwise": cb.CatBoostClassifier(grow_policy="Depthwise", **kw).fit(X, y["binary"]),
              "catboost-3-class": cb.CatBoostClassifier(loss_function="MultiClass", **kw).fit(X, y["3-class"]),
              "catboost-regression": cb.CatBoostRegressor(**kw).fit(X, y["regression"])}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models.items():
            path = Path(tmp) / f"{name}.json"
            model.save_model(str(path), format="json")
            doc = json.loads(path.read_text())
            doc["model_info"].update(model_guid="fuzz", train_finish_time="fuzz")   # the same bytes every run
            path.write_text(json.dumps(doc))
            fixed = cb.CatBoost()
            fixed.load_model(str(path), format="json")
            fixed.save_model(str(Path(tmp) / f"{name}.cbm"))
            out[f"{name}.json"] = path.read_bytes()
            out[f"{name}.cbm"] = (Path(tmp) / f"{name}.cbm").read_bytes()
    return out


# ------------------------------------------------------------------ the edits
def _edge(rng: np.random.Generator, v: Any = None) -> Any:
    """An edge value, or (for a number, three times in ten) the number nudged."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and rng.random() < 0.3:
        return [v * 10, -v, float(np.nextafter(float(v), np.inf)), v + 1][int(rng.integers(4))]
    return EDGE[int(rng.integers(len(EDGE)))]


def _leaves(o: Any, path: tuple = ()):
    """(path, value) of every scalar of a JSON document, and of every list of numbers' items."""
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(o, list) and o:
        for i, v in enumerate(o):
            yield from _leaves(v, path + (i,))
    else:
        yield path, o


def _at(o: Any, path: tuple) -> Any:
    for p in path[:-1]:
        o = o[p]
    return o


def json_edits(doc: Any, rng: np.random.Generator, n: int) -> list[tuple[str, Any]]:
    """``n`` edited copies of a JSON document: a number replaced by an edge value (six in
    ten), a string replaced (one and a half), a part deleted (one and a half), a value given
    another type (one)."""
    found = [(p, v) for p, v in _leaves(doc) if p]
    numbers = [(p, v) for p, v in found if isinstance(v, (int, float)) and not isinstance(v, bool)]
    texts = [(p, v) for p, v in found if isinstance(v, str)]
    out = []
    for _ in range(n):
        o, r = copy.deepcopy(doc), rng.random()
        if r < 0.6 and numbers:
            path, v = numbers[int(rng.integers(len(numbers)))]
            new: Any = _edge(rng, v)
        elif r < 0.75 and texts:
            path, v = texts[int(rng.integers(len(texts)))]
            new = json.loads(_other_json(v, rng, []))
        elif r < 0.9:
            path, _ = found[int(rng.integers(len(found)))]
            path = path[:int(rng.integers(1, len(path) + 1))]
            parent = _at(o, path)
            del parent[path[-1]]
            out.append((f"{'/'.join(map(str, path))} deleted", o))
            continue
        else:
            path, _ = found[int(rng.integers(len(found)))]
            new = [None, "", [], {}, True, "x", [1, 2]][int(rng.integers(7))]
        _at(o, path)[path[-1]] = new
        out.append((f"{'/'.join(map(str, path))} = {str(new)[:24]}", o))
    return out


_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def text_edits(text: bytes, rng: np.random.Generator, n: int) -> list[tuple[str, bytes]]:
    """``n`` edited copies of a text file: a number replaced in place (seven in ten; now and
    then by ``nan``, ``inf``, nothing or a word), a line removed, the file cut short, bytes
    flipped (one each)."""
    numbers = list(_NUMBER.finditer(text))
    lines = text.split(b"\n")
    out = []
    for k in range(n):
        r = rng.random()
        if r < 0.7:
            m = numbers[int(rng.integers(len(numbers)))]
            new = repr(_edge(rng, float(m.group()))).encode()
            if rng.random() < 0.1:
                new = [b"nan", b"inf", b"-inf", b"", b"x", b"1e999"][int(rng.integers(6))]
            out.append((f"number at {m.start()} = {new[:24].decode()}", text[:m.start()] + new + text[m.end():]))
        elif r < 0.8:
            i = int(rng.integers(len(lines)))
            out.append((f"line {i} removed", b"\n".join(lines[:i] + lines[i + 1:])))
        elif r < 0.9:
            out.append((f"cut short #{k}", _truncate(text, rng)))
        else:
            out.append((f"bytes flipped #{k}", _flip(text, rng, int(rng.integers(1, 6)))))
    return out


def skops_edits(data: bytes, rng: np.random.Generator, n: int) -> list[tuple[str, bytes]]:
    """``n`` edited copies of a .skops file: an element of an array (three in four; of a
    tree's nodes or values six times in ten), a JSON value of the schema, a field of a
    schema node (its class, id, loader, content), bytes flipped."""
    base = _SkopsDoc(data)
    arrays = [p for p, nd in base.nodes(lambda p, nd: nd.get("__loader__") == "NdArrayNode" and "file" in nd)]
    trees = [p for p in arrays if p.endswith(("tree_/values", "tree_/nodes"))] or arrays
    def scalar(p: str, nd: dict) -> bool:
        return nd.get("__loader__") == "JsonNode" and bool(nd.get("is_json")) and isinstance(nd.get("content"), str)

    scalars = len(base.nodes(scalar))
    out = []
    for k in range(n):
        doc, r = base.copy(), rng.random()
        if r < 0.75:
            path = _pick(rng, trees, arrays)
            node = doc.node(path)
            name = _array_edit(doc, node, rng)
            if name is None:
                continue
            out.append((f"{path}{name}", _zip(doc)))
        elif r < 0.82:
            path, node = doc.nodes(scalar)[int(rng.integers(scalars))]     # by place: paths are not unique
            doc.fresh(node)["content"] = _other_json(json.loads(node["content"]), rng, [])
            out.append((f"{path} = {node['content'][:24]}", _zip(doc)))
        elif r < 0.9:
            every = doc.nodes()
            path, node = every[int(rng.integers(len(every)))]
            key = sorted(node)[int(rng.integers(len(node)))]
            node[key] = _other_field(node[key], rng)
            out.append((f"{path}.{key} = {str(node[key])[:24]}", _zip(doc)))
        else:
            out.append((f"bytes flipped #{k}", _flip(data, rng, int(rng.integers(1, 6)))))
    return out


def _other_field(v: Any, rng: np.random.Generator) -> Any:
    """Another value for a field of a skops schema node (its loader, class, id, shape,
    content, file): a JSON text edited as a value, other text cut, a number sent to an
    edge, a list shortened, an object emptied."""
    if isinstance(v, str):
        try:
            parsed = json.loads(v)
        except ValueError:
            return v[:-1] + "Z" if v else "Z"
        return _other_json(parsed, rng, []) if not isinstance(parsed, (list, dict)) else json.dumps(None)
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return _edge(rng, v)
    if isinstance(v, list):
        return v[:-1]
    return {}


def _pick(rng: np.random.Generator, trees: list[str], arrays: list[str]) -> str:
    pool = trees if rng.random() < 0.6 else arrays
    return pool[int(rng.integers(len(pool)))]


def _array_edit(doc: Any, node: dict, rng: np.random.Generator) -> str | None:
    """One element of the array of ``node`` (one field of it, for a record array) set to
    an edge value; its description, or None when the array is empty."""
    a = doc.array(node)
    if a.dtype.names:                   # a record array copied field by field: no stray bytes in its padding
        clean = np.zeros(a.shape, dtype=a.dtype)
        for f in a.dtype.names:
            clean[f] = a[f]
        a = clean
    else:
        a = a.copy()
    flat = a.reshape(-1)
    if flat.size == 0:
        return None
    i = int(rng.integers(flat.size))
    field = str(rng.choice(a.dtype.names)) if a.dtype.names else None
    column = flat[field] if field else flat
    new = _edge(rng, column[i].item()) if column.dtype.kind in "fiu" else not column[i]
    try:
        column[i] = new
    except (OverflowError, ValueError, TypeError):       # beyond the field's type: its largest value
        column[i] = np.iinfo(column.dtype).max if column.dtype.kind in "iu" else np.finfo(column.dtype).max
        new = column[i].item()
    doc.set_array(node, a)
    return f"[{i}]{'.' + field if field else ''} = {str(new)[:24]}"


def cbm_edits(cbm: bytes, doc: dict, rng: np.random.Generator, n: int) -> list[tuple[str, bytes]]:
    """``n`` edited copies of a .cbm file: a leaf value (its double found by value, from the
    JSON export ``doc``), a border (its float32), a 32-bit word of the model set to an edge
    whole number, the file cut short, bytes flipped."""
    values = {float(v) for t in doc.get("oblivious_trees") or [] for v in t["leaf_values"]}
    values |= {float(v) for _, v in _leaves(doc.get("trees") or []) if isinstance(v, float)}
    borders = {float(b) for f in doc["features_info"].get("float_features", []) for b in f.get("borders") or []}
    at64 = [m.start() for v in values for m in re.finditer(re.escape(struct.pack("<d", v)), cbm)]
    at32 = [m.start() for v in borders for m in re.finditer(re.escape(struct.pack("<f", v)), cbm)]
    out = []
    for k in range(n):
        r = rng.random()
        if r < 0.25 and at64:
            i, new = at64[int(rng.integers(len(at64)))], float(_edge(rng))
            out.append((f"leaf value at {i} = {new!r}", cbm[:i] + struct.pack("<d", new) + cbm[i + 8:]))
        elif r < 0.45 and at32:
            i, new = at32[int(rng.integers(len(at32)))], float(_edge(rng))
            with np.errstate(over="ignore"):
                word = np.float32(new).tobytes()
            out.append((f"border at {i} = {new!r}", cbm[:i] + word + cbm[i + 4:]))
        elif r < 0.7:
            i = 8 + 4 * int(rng.integers((len(cbm) - 8) // 4))
            new = int(rng.choice([0, 1, -1, 2, 7, 39, 255, 65535, 2**31 - 1, -(2**31)]))
            out.append((f"word at {i} = {new}", cbm[:i] + struct.pack("<i", new) + cbm[i + 4:]))
        elif r < 0.85:
            out.append((f"cut short #{k}", _truncate(cbm, rng)))
        else:
            out.append((f"bytes flipped #{k}", _flip(cbm, rng, int(rng.integers(1, 6)))))
    return out


def _ubj(doc: Any) -> bytes:
    """UBJSON of a document (a whole number beyond 64 bits written as a float, as no int64 holds it)."""
    try:
        return _to_ubj(doc)
    except struct.error:
        return _to_ubj(json.loads(json.dumps(doc), parse_int=lambda s: int(s) if abs(int(s)) < 2**63 else float(s)))


def outside_trial_edits(data: bytes) -> list[tuple[str, bytes]]:
    """The two edits of a .skops forest an outside trial found read silently: a leaf of
    1e300 in tree 6 and one of 2**31-1 in tree 9 (the last leaf of each, first class)."""
    out = []
    for value, t in ((1e300, 6), (2**31 - 1, 9)):
        doc = _SkopsDoc(data)
        node = doc.node(f"/estimators_[{t}]/tree_/values")
        a = doc.array(node).copy()
        a[np.flatnonzero(a.sum(axis=(1, 2)) > 0)[-1], 0, 0] = value
        doc.set_array(node, a)
        out.append((f"a leaf of {value:g} in tree {t}", _zip(doc)))
    return out


def reading_edits(files: dict[str, Any], seed: int, per_file: int) -> list[tuple[str, str, bytes]]:
    """Every file as saved, then ``per_file`` edits of each (seeded), then the outside
    trial's two forests: ``(case, file name, bytes)``."""
    rng = np.random.default_rng(seed)
    cases = []
    for fname in sorted(f for f in files if not f.startswith("_")):
        data = files[fname]
        cases.append((f"{fname}: as saved", fname, data))
        if fname.endswith(".skops"):
            edits = skops_edits(data, rng, per_file)
        elif fname.endswith(".txt"):
            edits = text_edits(data, rng, per_file)
        elif fname.endswith(".cbm"):
            edits = cbm_edits(data, json.loads(files[fname[:-4] + ".json"]), rng, per_file)
        elif fname.endswith(".ubj"):
            doc = json.loads(files[fname[:-4] + ".json"])
            structural = int(per_file * 0.8)
            edits = [(name, _ubj(o)) for name, o in json_edits(doc, rng, structural)]
            edits += [(f"bytes flipped #{k}", _flip(data, rng, int(rng.integers(1, 6))))
                      for k in range(per_file - structural)]
        else:
            structural = int(per_file * 0.8)
            edits = [(name, json.dumps(o).encode()) for name, o in json_edits(json.loads(data), rng, structural)]
            edits += text_edits(data, rng, per_file - structural)
        cases += [(f"{fname}: {name} [{k}]", fname, b) for k, (name, b) in enumerate(edits)]
    forest = files["forest-binary.skops"]
    cases += [(f"forest-binary.skops: {name}", "forest-binary.skops", b) for name, b in outside_trial_edits(forest)]
    return cases

