"""Edited model files of every format are refused with a message or read as their library reads them (#60).

The files: small models of every format the readers take, saved as their libraries
save them (``tests/reading_mutations.py``: scikit-learn forests, extra trees, a tree
and gradient boosting as .skops; XGBoost JSON and UBJSON; LightGBM text; CatBoost
JSON and .cbm; binary, 3 classes and regression), each edited in seeded ways (edge
values for numbers, strings, parts deleted or retyped, lines removed, files cut
short, bytes flipped; array elements and schema values of .skops files; leaf values,
borders and words of .cbm files). HistGradientBoosting files have a fuzz of their
own (``test_hgb_fuzz.py``, some 530 files) on the same runner (``tests/fuzzrun.py``).

Each file is read as a script reads it (``core.intake.io.load_model`` then
``core.intake.models.model_from``, in a child process, so that a crash is a
verdict rather than the end of the run). The verdict:

* refused: a project error (``AtlasError``) whose message names no Python internals;
* accepted: the reading's labels and probabilities (a regressor's values) equal the
  library's own on the rows the model was fitted on and on probe points (every
  threshold the reading holds);
* misread: accepted, yet they differ (or the library refuses rows the reading takes);
* foreign: any other exception; crash: the reading process died or hung.

The bar: no misread, no foreign exception, no crash, on every file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import fuzzrun  # noqa: E402

from tests.reading_mutations import outside_trial_edits, reading_edits, reading_files  # noqa: E402

UNEXPECTED = ("Traceback", "IndexError", "OverflowError", "KeyError", "TypeError", "AttributeError",
              "ZeroDivisionError", "JSONDecodeError", "could not convert", "cannot reshape", "broadcast",
              "CatBoostError", "XGBoostError", "LightGBMError")
FORMATS = ("skops", "json", "ubj", "txt", "cbm")
ROWS = 60                        # rows of the fitted data compared, beside the probe points


# ------------------------------------------------------------------ the verdict on one file
def _library(ens, model, P: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The library's own outputs on codes-view rows ``P``: probabilities (n, classes) and its
    labels where it gives them, or a regressor's values (n, 1)."""
    from core.model.native import model_input, native_input

    module = type(model).__module__.split(".")[0]
    if type(model).__name__ == "CatBoostJSON":
        frame = model_input(ens, P, frame=True)
        if ens.is_classifier:
            return model.native.predict(frame, prediction_type="Probability"), \
                np.asarray(model.native.predict(frame, prediction_type="Class")).ravel()
        return np.asarray(model.native.predict(frame), dtype=float).reshape(len(P), 1), None
    given = native_input(ens, model, P)
    if module == "xgboost":
        import json

        import xgboost as xgb

        out = np.asarray(model.predict(xgb.DMatrix(given)), dtype=float).reshape(len(P), -1)
        if json.loads(model.save_config())["learner"]["objective"]["name"] == "multi:softmax":
            return np.eye(ens.n_classes)[out[:, 0].astype(int)], out[:, 0].astype(int)   # labels only
    elif module == "lightgbm":
        out = np.asarray(model.predict(given), dtype=float).reshape(len(P), -1)
    elif ens.is_classifier:
        return np.asarray(model.predict_proba(given), dtype=float), np.asarray(model.predict(given))
    else:
        return np.asarray(model.predict(given), dtype=float).reshape(len(P), 1), None
    if ens.is_classifier and out.shape[1] == 1:
        out = np.column_stack([1 - out[:, 0], out[:, 0]])
    return out, None


def _difference(ens, model, X: np.ndarray) -> str | None:
    """None if the reading gives the library's labels and probabilities (values) on the
    fitted rows and the probe points, else what differs."""
    from core.intake.parsing import probe_points

    P = np.zeros((ROWS, ens.n_features))
    width = min(ens.n_features, X.shape[1])
    P[:, :width] = X[:ROWS, :width]
    P = np.vstack([P, probe_points(ens, 24, seed=3)])
    theirs, labels = _library(ens, model, P)
    theirs = np.asarray(theirs, dtype=float)
    ours = ens.predict_proba(P) if ens.is_classifier else ens.predict(P).reshape(len(P), 1)
    scale = 1.0 if ens.is_classifier else max(1.0, float(np.nanmax(np.abs(theirs))) if theirs.size else 1.0)
    if theirs.shape != ours.shape or not np.all(np.isfinite(theirs)) \
            or not np.allclose(ours, theirs, rtol=0, atol=1e-5 * scale):
        worst = int(np.argmax(np.nan_to_num(np.abs(ours - theirs), nan=np.inf).max(axis=1))) \
            if theirs.shape == ours.shape else 0
        return (f"{'probabilities' if ens.is_classifier else 'values'} differ: row {worst}, ours "
                f"{np.round(ours[worst], 6).tolist()}, the library's {np.round(theirs[worst], 6).tolist()[:6]} "
                f"(shapes {ours.shape}, {theirs.shape})")
    if ens.is_classifier:
        top = np.sort(theirs, axis=1)
        clear = top[:, -1] - top[:, -2] > 1e-6
        want = labels if labels is not None else np.asarray(ens.classes)[theirs.argmax(axis=1)]
        if not np.array_equal(np.asarray(ens.predict(P))[clear], np.asarray(want)[clear]):
            return "labels differ"
    return None


def verdict(fname: str, data: bytes, X: np.ndarray) -> tuple[str, str]:
    """``(kind, text)``: "refused" (the message), "accepted", "misread" (what differs),
    "foreign" (the exception) or "unclear" (a project error naming Python internals)."""
    from core.errors import AtlasError
    from core.intake import io
    from core.intake.models import model_from

    try:
        model = io.load_model(data, fname)
        ens = model_from(model)
    except AtlasError as exc:
        text = str(exc)
        if not text or any(u in text for u in UNEXPECTED):
            return "unclear", f"{type(exc).__name__}: {text[:400]}"
        return "refused", text
    except (MemoryError, RecursionError) as exc:     # the sandbox's child reports these as ModelError
        return "refused", type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - what this test is looking for
        return "foreign", f"{type(exc).__name__}: {str(exc)[:400]}"
    try:
        problem = _difference(ens, model, X)
    except Exception as exc:  # noqa: BLE001 - the library refuses rows the reading takes, or the reading fails
        return "misread", f"the comparison failed: {type(exc).__name__}: {str(exc)[:300]}"
    return ("misread", problem) if problem else ("accepted", "")


# ------------------------------------------------------------------ the fuzz
@pytest.fixture(scope="module")
def files():
    return reading_files()


def _format(case: str) -> str:
    return case.split(":", 1)[0].rsplit(".", 1)[-1]


@pytest.mark.slow
def test_edited_files_of_every_format_are_refused_or_read_as_their_library_reads_them(files):
    cases = reading_edits(files, seed=0, per_file=60)
    assert len(cases) >= 1500
    X = files["_X"]
    seen, cpu = fuzzrun.run_cases(cases, {f: X for f in files if not f.startswith("_")},
                                  "tests.intake.test_reading_fuzz:verdict")
    counts: dict[str, dict[str, int]] = {f: {} for f in FORMATS}
    for case, (kind, _) in seen.items():
        counts[_format(case)][kind] = counts[_format(case)].get(kind, 0) + 1
    print(f"\nreading fuzz: {len(cases)} files, {counts}, CPU {cpu['cases']:.1f} s reading, "
          f"{cpu['children']:.1f} s in the child processes")
    bad = {k: v for k, v in seen.items() if v[0] not in ("refused", "accepted")}
    assert not bad, "\n".join(f"{k}: {v[0]}: {v[1][:300]}" for k, v in sorted(bad.items()))
    for fmt in FORMATS:                  # every format both ways: the edits reach the readers' checks
        assert counts[fmt].get("refused", 0) >= 20 and counts[fmt].get("accepted", 0) >= 20, (fmt, counts[fmt])
    assert all(seen[f"{f}: as saved"][0] == "accepted" for f in files if not f.startswith("_"))
    for case in ("a leaf of 1e+300 in tree 6", "a leaf of 2.14748e+09 in tree 9"):
        kind, text = seen[f"forest-binary.skops: {case}"]
        assert kind == "refused" and "no probabilities" in text, (case, kind, text)


# ------------------------------------------------------------------ the outside trial's files, in process
@pytest.mark.parametrize("k, leaf", [(0, "tree 6"), (1, "tree 9")])
def test_forest_leaves_beyond_probabilities_are_refused_with_a_message(files, k, leaf):
    """A leaf of 1e300 (tree 6) or 2**31-1 (tree 9) in a .skops forest was read as the
    probabilities [1, 0]; scikit-learn gave up to 1e299 and the check passed anyway."""
    from core.errors import ModelError
    from core.intake import io
    from core.intake.models import model_from

    name, data = outside_trial_edits(files["forest-binary.skops"])[k]
    with pytest.raises(ModelError, match=rf"{leaf} \(DecisionTreeClassifier\), leaf \d+ holds the class fractions "
                                         r"\[.*\], which are no probabilities"):
        model_from(io.load_model(data, "forest.skops"))


def test_the_check_against_scikit_learn_refuses_outputs_that_are_no_probabilities(files):
    """An edited forest handed over in memory (no file check): the parser refuses the leaf, and
    the check against scikit-learn, given the same leaf, refuses its "probabilities" (it compared
    them at a tolerance scaled by their size, 1e293 here, and passed)."""
    import skops.io as sio

    from core.errors import ModelError
    from core.intake.parsing import verify_against_source
    from core.intake.parsing.sklearn import parse_sklearn

    forest = sio.loads(files["forest-binary.skops"], trusted=sio.get_untrusted_types(data=files["forest-binary.skops"]))
    ens = parse_sklearn(forest)
    tree = forest.estimators_[6].tree_
    tree.value[tree.children_left < 0, 0, 0] = 1e300           # every leaf: every probe point meets one
    with pytest.raises(ModelError, match="no probabilities"):
        parse_sklearn(forest)
    with pytest.raises(ModelError, match="predict_proba gives values from .* no probabilities"):
        verify_against_source(ens, forest, n_random=256)


# ------------------------------------------------------------------ foreign exceptions, crashes, misreads (#60)
def _json_edit(files, fname: str, fn) -> bytes:
    import json

    doc = json.loads(files[fname])
    fn(doc)
    return json.dumps(doc).encode()


def _skops_edit(files, fname: str, path: str, value) -> bytes:
    """A .skops file with the value at ``path`` of its schema replaced (a JSON value, or
    a numpy scalar's own member, of its dtype)."""
    import json

    from tests.intake_mutations import _SkopsDoc

    doc = _SkopsDoc(files[fname])
    node = doc.fresh(doc.node(path))
    if node["__loader__"] == "NdArrayNode":
        doc.set_array(node, np.array(value, dtype=doc.array(node).dtype), shared=False)
    else:
        node["content"] = json.dumps(value)
    return doc.to_bytes()


def _first_split(tree: dict) -> dict:
    return tree["splits"][0] if "splits" in tree else tree["split"]


def _schema_unpacks_with_a_zlib_error(data: bytes) -> bytes:
    """``data`` with bytes of its schema.json's compressed stream flipped, at the first place
    where unpacking it then fails inside zlib (as an edited file did, bypassing the zip checks)."""
    import io
    import zipfile
    import zlib

    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("schema.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for at in range(start + 8, start + info.compress_size, 7):
        edited = bytearray(data)
        edited[at] ^= 0x5A
        try:
            zipfile.ZipFile(io.BytesIO(bytes(edited))).read("schema.json")
        except zlib.error:
            return bytes(edited)
        except Exception:  # noqa: BLE001 - another failure: try the next place
            continue
    raise AssertionError("no flip of schema.json fails inside zlib")


FOREIGN = {   # case -> (file, edit, the message now); each raised the library's or Python's own error before
    "a tree naming 0 classes (broadcast error)": (
        "tree-3-class.skops", lambda f: _skops_edit(f, "tree-3-class.skops", "/n_classes_", 0),
        r"holds 3 class fractions per leaf for 0 classes"),
    "a forest's tree naming 2 classes of 3 (broadcast error)": (
        "forest-3-class.skops", lambda f: _skops_edit(f, "forest-3-class.skops", "/estimators_[3]/n_classes_", 2),
        r"tree 3 \(DecisionTreeClassifier\) holds 3 class fractions per leaf for 2 classes"),
    "n_features_in_ infinite (OverflowError)": (
        "extra-trees.skops", lambda f: _skops_edit(f, "extra-trees.skops", "/n_features_in_", float("-inf")),
        r"its ExtraTreesClassifier has n_features_in_ -inf, not a number of features"),
    "a boosting baseline with n_outputs_ 1e308 (TypeError)": (
        "boosting-regression.skops",
        lambda f: _skops_edit(f, "boosting-regression.skops", "/init_/n_outputs_", -1e308),
        r"baseline \(DummyRegressor\) has n_outputs_ -1e\+308, not 1"),
    "schema.json failing inside zlib (zlib.error)": (
        "boosting-binary.skops", lambda f: _schema_unpacks_with_a_zlib_error(f["boosting-binary.skops"]),
        r"schema.json cannot be unpacked|not a readable .skops"),
    "a border of '' (ValueError: could not convert string to float: '')": (
        "catboost-binary.json",
        lambda f: _json_edit(f, "catboost-binary.json",
                             lambda d: d["oblivious_trees"][1]["splits"][0].update(border="")),
        r"tree 1, split 0 says FloatFeature of feature \d+ at None, but its split_index \d+ is feature"),
    "a class_label_type CatBoost does not know (CatBoostError)": (
        "catboost-3-class.json",
        lambda f: _json_edit(f, "catboost-3-class.json",
                             lambda d: d["model_info"]["class_params"].update(class_label_type="error")),
        r"class_params \(class_label_type 'error', .*\) are not as CatBoost writes them"),
    "a .cbm border beyond float32 (CatBoostError: JSON writer: invalid float value: inf)": (
        "catboost-binary.cbm", lambda f: _cbm_border(f["catboost-binary.cbm"], 1e39),
        r"borders are not finite numbers in increasing order"),
    "internal_weight nan (JSONDecodeError from LightGBM's dump)": (
        "lightgbm-3-class.txt",
        lambda f: f["lightgbm-3-class.txt"].replace(b"internal_weight=100 ", b"internal_weight=nan ", 1),
        r"tree 0's internal_weight holds nan, an infinite or NaN value"),
    "a categorical split listing no categories (XGBoostError)": (
        "xgboost-3-class.json",
        lambda f: _json_edit(f, "xgboost-3-class.json",
                             lambda d: d["learner"]["gradient_booster"]["model"]["trees"][3]["split_type"]
                             .__setitem__(0, 1)),
        r"tree 3, node 0 splits by categories but lists none"),
}


def _cbm_border(cbm: bytes, value: float) -> bytes:
    """The .cbm file with the first border of its first float feature set to ``value`` (as float32)."""
    import struct

    from core.intake.io import load_model

    border = load_model(cbm, "m.cbm").document["features_info"]["float_features"][0]["borders"][0]
    at = cbm.index(struct.pack("<f", border))
    with np.errstate(over="ignore"):
        word = np.float32(value).tobytes()
    return cbm[:at] + word + cbm[at + 4:]


@pytest.mark.parametrize("case", list(FOREIGN))
def test_errors_raised_inside_the_libraries_are_project_errors_with_a_message(files, case):
    """Each edit raised an exception of the library or of Python (not the project's) from
    core.load_model + model_from; now a ModelError says what is damaged."""
    from core.errors import ModelError
    from core.intake import io
    from core.intake.models import model_from

    fname, edit, says = FOREIGN[case]
    data = edit(files)
    with pytest.raises(ModelError, match=says) as info:
        model_from(io.load_model(data, fname))
    assert not any(u in str(info.value) for u in UNEXPECTED), str(info.value)


def _lightgbm_cut_in_its_parameters(files) -> bytes:
    text = files["lightgbm-binary.txt"]
    return text[:text.index(b"[machine_list_filename:") + len(b"[machine_list_filename:")]


def _two_trees_of_one_id(d: dict) -> None:
    d["learner"]["gradient_booster"]["model"]["trees"][0]["id"] = 1


def _cbm_split_out_of_range(files) -> bytes:
    """The depthwise .cbm file with a leaf's TreeSplits entry (0 as CatBoost writes it) set to 39,
    beyond its binary features: a flipped byte that ended the process."""
    import struct

    from core.intake.parsing.catboostcheck import _Flat

    cbm = files["catboost-depthwise.cbm"]
    fb = _Flat(cbm[8:], "m.cbm")
    trees = fb.sub(fb.table(fb.u32(0)), 1)                 # TModelCore's ModelTrees
    at = 8 + fb.ref(fb.field(trees, 1)) + 4               # TreeSplits: its first element
    splits = fb.vector(trees, 1, "i4")
    k = int(np.flatnonzero(splits == 0)[0])
    return cbm[:at + 4 * k] + struct.pack("<i", 39) + cbm[at + 4 * k + 4:]


CRASHES = {   # case -> (file, edit, the check that refuses it now); each ended the reading process before
    "LightGBM text cut inside its parameters": (
        "lightgbm-binary.txt", _lightgbm_cut_in_its_parameters, r"parameters line '\[machine_list_filename:'"),
    "LightGBM text holding a NUL": (
        "lightgbm-binary.txt", lambda f: f["lightgbm-binary.txt"].replace(b"[seed: ", b"[se\x00d: ", 1),
        r"holds a NUL character"),
    "CatBoost JSON: a split_index beyond the binary features": (
        "catboost-3-class.json",
        lambda f: _json_edit(f, "catboost-3-class.json",
                             lambda d: d["oblivious_trees"][3]["splits"][1].update(split_index=-(2**31))),
        r"tree 3, split 1 has the split_index -2147483648, outside the model's \d+ binary features"),
    "CatBoost JSON: a subtree removed": (
        "catboost-depthwise.json",
        lambda f: _json_edit(f, "catboost-depthwise.json", lambda d: d["trees"][0].pop("left")),
        r"tree 0 is neither a leaf \(value\) nor a split with left and right subtrees"),
    "CatBoost JSON: class_to_label of 1e9": (
        "catboost-3-class.json",
        lambda f: _json_edit(f, "catboost-3-class.json",
                             lambda d: d["model_info"]["class_params"].update(class_to_label=[0, 1, 10**9])),
        r"class_to_label is \[0, 1, 1000000000\]"),
    "CatBoost .cbm: a split beyond the binary features": (
        "catboost-depthwise.cbm", _cbm_split_out_of_range, r"a split of its trees names binary feature 39"),
    "XGBoost: two trees of one id": (
        "xgboost-regression.json", lambda f: _json_edit(f, "xgboost-regression.json", _two_trees_of_one_id),
        r"tree 0 has the id 1"),
}


@pytest.mark.parametrize("case", list(CRASHES))
def test_files_that_ended_the_process_are_refused_before_the_library_reads_them(files, case):
    """Each file ended the process reading it (SIGSEGV in LightGBM, CatBoost or XGBoost); the
    structural checks, pure Python, refuse it first (checked here without the library)."""
    import json

    from core.errors import ModelError
    from core.intake.parsing import validate

    fname, edit, says = CRASHES[case]
    data = edit(files)
    with pytest.raises(ModelError, match=says):
        if fname.endswith(".txt"):
            validate.lightgbm_text(data, fname)
        elif fname.endswith(".cbm"):
            validate.check_catboost_cbm(data, fname)
        elif fname.startswith("catboost"):
            validate.check_catboost_json(json.loads(data), fname)
        else:
            validate.check_xgboost_json(validate.xgboost_document(data, fname), fname)


MISREADS = {   # case -> (file, edit, the message now); each was read as another model than its library's
    "a CatBoost split whose border says 3.4e38 and its index 1.3": (
        "catboost-depthwise.json",
        lambda f: _json_edit(f, "catboost-depthwise.json", lambda d: _first_split(d["trees"][1])
                             .update(border=3.4028234663852886e38)),
        r"tree 1's split says FloatFeature .* but its split_index \d+ is feature"),
    "CatBoost's class_to_label reversed": (
        "catboost-3-class.json",
        lambda f: _json_edit(f, "catboost-3-class.json",
                             lambda d: d["model_info"]["class_params"].update(class_to_label=[2, 1, 0])),
        r"class_to_label is \[2, 1, 0\]"),
    "a CatBoost class named 1.0000000000000002 (CatBoost says 1)": (
        "catboost-3-class.json",
        lambda f: _json_edit(f, "catboost-3-class.json",
                             lambda d: d["model_info"]["class_params"]["class_names"].__setitem__(1, 1 + 2**-52)),
        r"class_names .* are not distinct Integer labels"),
    "an XGBoost threshold of 1e39 (infinite in XGBoost's float32)": (
        "xgboost-binary.json",
        lambda f: _json_edit(f, "xgboost-binary.json",
                             lambda d: d["learner"]["gradient_booster"]["model"]["trees"][2]["split_conditions"]
                             .__setitem__(0, 1e39)),
        r"tree 2, node 0 has the threshold 1e\+39, which XGBoost's float32 thresholds cannot hold"),
}


@pytest.mark.parametrize("case", list(MISREADS))
def test_files_read_as_another_model_are_refused_with_a_message(files, case):
    from core.errors import AtlasError
    from core.intake import io
    from core.intake.models import model_from

    fname, edit, says = MISREADS[case]
    with pytest.raises(AtlasError, match=says):
        model_from(io.load_model(edit(files), fname))
