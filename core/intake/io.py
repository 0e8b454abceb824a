"""Reading tables and models from bytes, and training a model in place.

Pure (no Streamlit): the app and scripts call the same functions.
Training lives in :mod:`core.intake.training`; its names are importable from here.

Tables: CSV (delimiter and encoding sniffed; the OCEAN-style second header
row of type letters F/D/B/E/T is recognised) and Parquet. Models, safe
formats first: XGBoost ``.json``/``.ubj``, LightGBM ``.txt``, scikit-learn
``.skops`` with an allow-list of types. Pickle/joblib only with
``allow_pickle=True``: unpickling runs code from the file.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import io
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.errors import DataError, ModelError, UnsupportedModelError, UntrustedPickleError
from core.intake.parquet import MAX_DECODED_BYTES, read_parquet
from core.intake.parsing.catboost import CatBoostJSON
from core.intake.parsing.validate import (
    check_sklearn_trees,
    check_skops_boosters,
    check_skops_zip,
    check_xgboost_json,
    lightgbm_text,
    load_json,
    xgboost_document,
)
from core.intake.training import FAMILIES, TrainedModel, infer_task, train_model  # noqa: F401 - importable from here
from core.schema import one_hot_encode

__all__ = ["load_table", "prepare_data", "PreparedData", "load_model", "train_model",
           "TrainedModel", "sha256", "MAX_TABLE_BYTES", "SKOPS_TRUSTED", "TYPE_LETTERS"]

MAX_TABLE_BYTES = 200 * 1024 * 1024
MAX_MODEL_BYTES = 500 * 1024 * 1024
MAX_LEVELS = 200        # distinct values of a text column one-hot encoded for training
TYPE_LETTERS = {"F": "numerical", "D": "integer", "B": "binary", "E": "categorical", "T": "target"}
SKOPS_TRUSTED = frozenset({
    "sklearn.tree._tree.Tree",
    "collections.OrderedDict",
    "lightgbm.basic.Booster",
    "lightgbm.sklearn.LGBMClassifier",
    "lightgbm.sklearn.LGBMRegressor",
    "xgboost.core.Booster",
    "xgboost.sklearn.XGBClassifier",
    "xgboost.sklearn.XGBRegressor",
    # HistGradientBoosting*: its trees, and for categorical_features the check its own
    # ColumnTransformer applies to the numerical columns, partial(check_array, dtype=...)
    # (a partial of any other function is refused: that function is not listed here)
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "functools.partial",
    "sklearn.utils.validation.check_array",
    # a Pipeline's encoders keep their output dtype (e.g. numpy.float64) as a numpy.dtype;
    # skops itself trusts the scikit-learn Pipeline, ColumnTransformer, encoders, scalers, imputers
    "numpy.dtype",
})
PICKLE_WARNING = (
    "Pickle and joblib files can run arbitrary code when opened. Load one only if you "
    "trust where it came from; prefer XGBoost .json/.ubj, LightGBM .txt or scikit-learn .skops."
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ tables
def _decode(data: bytes) -> str:
    for enc in ("utf-8-sig", "utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8-sig",):
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            pass
    return data.decode("cp1252", errors="replace")


def _sniff_delimiter(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        counts = {d: sample.splitlines()[0].count(d) for d in ",;\t|"} if sample else {}
        best = max(counts, key=counts.get) if counts else ","
        return best if counts.get(best) else ","


def load_table(data: bytes, filename: str, *, max_bytes: int = MAX_TABLE_BYTES, max_rows: int | None = None,
               max_decoded_bytes: int = MAX_DECODED_BYTES) -> pd.DataFrame:
    """Read a CSV or Parquet file given as bytes.

    Parameters
    ----------
    data : bytes, the file's content.
    filename : str, its name (".parquet"/".pq" or a Parquet signature: Parquet; else CSV).
    max_bytes : int, default MAX_TABLE_BYTES, the largest file accepted.
    max_rows : int or None, default None, the most rows accepted.
    max_decoded_bytes : int, default MAX_DECODED_BYTES, the most memory the decoded table may take.

    Returns the table as read; ``df.attrs["column_types"]`` holds the kinds of
    an OCEAN-style type row when the file has one, and ``df.attrs["target"]``
    its ``T`` column. ``max_rows`` and ``max_decoded_bytes`` are checked before
    the rows are decoded (a Parquet file's metadata; a CSV is parsed no further
    than one row past the cap), so a small file that expands to billions of
    values is refused without spending the memory (:mod:`core.intake.parquet`).

    Raises
    ------
    DataError
        Empty or oversize file, too many rows or too much memory once decoded,
        unreadable format, a single column (wrong delimiter), duplicate or
        missing column names, cells holding lists or structs.

    Examples
    --------
    >>> from core import load_table
    >>> load_table(b"age,income\\n30,1200\\n41,\\n", "people.csv").shape
    (2, 2)
    """
    if data is None or len(data) == 0:
        raise DataError(f"{filename!r} is empty. Upload a CSV or Parquet file with a header row and data rows.")
    if len(data) > max_bytes:
        raise DataError(
            f"{filename!r} is {len(data) / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB. "
            "Upload a sample of the rows."
        )
    name = filename.lower()
    if name.endswith((".parquet", ".pq")) or data[:4] == b"PAR1":
        df = read_parquet(data, filename, max_rows=max_rows, max_decoded_bytes=max_decoded_bytes)
    elif name.endswith((".xlsx", ".xls", ".json", ".pkl", ".pickle")):
        raise DataError(f"{filename!r}: unsupported table format; upload CSV (.csv) or Parquet (.parquet).")
    else:
        text = _decode(data)
        if "\r" in text and "\n" not in text:         # classic Mac line endings: CR alone ends a line
            text = text.replace("\r", "\n")
        if not text.strip():
            raise DataError(f"{filename!r} holds only blank text. Upload a CSV with a header row and data rows.")
        delim = _sniff_delimiter(text[:65536])
        header = next(csv.reader(io.StringIO(text.lstrip("\ufeff").split("\n", 1)[0]), delimiter=delim), [])
        counts = collections.Counter(h.strip() for h in header)
        dupes = sorted(h for h, k in counts.items() if k > 1)
        if dupes:
            raise DataError(f"{filename!r} has duplicate column names {dupes[:6]}: each column needs its own name. "
                            "Rename or remove the repeated columns and upload again.")
        try:
            df = pd.read_csv(io.StringIO(text), sep=delim, skipinitialspace=True,
                             nrows=None if max_rows is None else max_rows + 2)   # + the type row, + one over
        except pd.errors.ParserError as exc:
            raise DataError(
                f"{filename!r} is not a consistent {_delim_name(delim)}-separated table ({exc}). "
                "Check that every row has the same number of fields."
            ) from None
        except pd.errors.EmptyDataError:
            raise DataError(f"{filename!r} has no columns. Upload a CSV with a header row.") from None
        if not isinstance(df.index, pd.RangeIndex):  # pandas took surplus fields as an index
            raise DataError(
                f"{filename!r} is not a consistent {_delim_name(delim)}-separated table: some rows have "
                "more fields than the header. Check that every row has the same number of fields."
            )
        if df.shape[1] == 1:  # a dataset needs features and a target: the delimiter was not found
            raise DataError(
                f"{filename!r} was read as one column named {str(df.columns[0])[:60]!r}: the delimiter "
                "could not be recognised. Use commas, semicolons or tabs consistently."
            )
        df = _apply_type_row(df)
    if df.shape[0] == 0:
        raise DataError(f"{filename!r} has a header but no data rows.")
    if max_rows is not None and len(df) > max_rows:
        raise DataError(f"{filename!r} has more than {max_rows:,} rows; this instance analyses at most "
                        f"{max_rows:,}. Upload a sample of the rows.")
    cols = [str(c) for c in df.columns]
    if any(c.startswith("Unnamed:") for c in cols):
        raise DataError(f"{filename!r} has columns without a name; every column needs a header.")
    if len(set(cols)) != len(cols):
        raise DataError(f"{filename!r} has duplicate column names.")
    df.columns = cols
    return df


def _delim_name(d: str) -> str:
    return {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(d, repr(d))


def _apply_type_row(df: pd.DataFrame) -> pd.DataFrame:
    if df.shape[0] == 0:
        return df
    first = df.iloc[0].astype(str).str.strip()
    if not first.isin(list(TYPE_LETTERS)).all():
        return df
    types = {c: TYPE_LETTERS[v] for c, v in first.items()}
    df = df.iloc[1:].reset_index(drop=True)
    for c, k in types.items():
        if k != "categorical":
            conv = pd.to_numeric(df[c], errors="coerce")
            if conv.notna().sum() == df[c].notna().sum():
                df[c] = conv
    targets = [c for c, k in types.items() if k == "target"]
    df.attrs["column_types"] = {c: k for c, k in types.items() if k != "target"}
    if len(targets) == 1:
        df.attrs["target"] = targets[0]
    return df


@dataclass
class PreparedData:
    """Numeric features ready for a model, the target, and what was done."""

    X: pd.DataFrame
    y: pd.Series | None
    target: str | None
    kinds: dict[str, str] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def prepare_data(df: pd.DataFrame, target: str | None = None, *,
                 drop_missing: bool = False) -> PreparedData:
    """Turn a loaded table into numeric features.

    Text columns whose values are all non-numeric are one-hot encoded as
    ``col=value`` columns (so are columns the type row marks ``E``). Columns
    mixing numbers with a few text values, and missing values, raise
    ``DataError`` with counts and an example; missing rows are dropped only
    if ``drop_missing`` is set, and the drop is reported in ``notes``.
    """
    if target is not None and target not in df.columns:
        raise DataError(f"Target column {target!r} is not in the table; columns are {list(df.columns)[:12]}.")
    notes: list[str] = []
    types = dict(df.attrs.get("column_types", {}))
    feats = df.drop(columns=[target]) if target else df.copy()
    if feats.shape[1] == 0:
        raise DataError("The table has no feature columns besides the target.")
    to_encode, mixed = [], []
    for c in feats.columns:
        s = feats[c]
        if types.get(c) == "categorical":
            to_encode.append(c)
            continue
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        conv = pd.to_numeric(s, errors="coerce")
        bad = conv.isna() & s.notna()
        if int(bad.sum()) == int(s.notna().sum()):
            to_encode.append(c)
        else:
            i = int(np.flatnonzero(bad.to_numpy())[0])
            mixed.append(f"{c!r}: {int(bad.sum())} non-numeric values (e.g. {s.iloc[i]!r} in row {i})")
    if mixed:
        raise DataError("Some numeric columns hold text: " + "; ".join(mixed[:5])
                        + ". Fix or remove those values and upload again.")
    wide = {c: n for c in to_encode if (n := int(feats[c].nunique())) > MAX_LEVELS}
    if wide:
        raise DataError("Some text columns have too many distinct values to be categories: "
                        + "; ".join(f"{c!r} has {n:,}" for c, n in list(wide.items())[:5])
                        + f" (at most {MAX_LEVELS} each; one 0/1 column is made per value). Drop such columns "
                          "(identifiers, free text) or group their rare values, and upload again.")
    missing = feats.isna().any(axis=1)
    if target is not None:
        missing |= df[target].isna()
    if missing.any():
        cols = [c for c in feats.columns if feats[c].isna().any()]
        i = int(np.flatnonzero(missing.to_numpy())[0])
        if not drop_missing:
            raise DataError(
                f"{int(missing.sum())} of {len(df)} rows have missing values (columns {cols[:6]}; first at "
                f"row {i}). Impute them, or choose to drop those rows."
            )
        notes.append(f"Dropped {int(missing.sum())} rows with missing values (columns {cols[:6]}).")
        feats = feats.loc[~missing]
        df = df.loc[~missing]
    for c in to_encode:
        types[c] = "categorical"
    for c in feats.columns:
        if pd.api.types.is_bool_dtype(feats[c]):
            feats[c] = feats[c].astype(np.int64)
    kinds = {c: k for c, k in types.items() if c in feats.columns and k != "categorical"}
    groups: dict[str, list[str]] = {}
    if to_encode:
        before = set(feats.columns)
        feats = one_hot_encode(feats, to_encode)
        for c in to_encode:
            groups[c] = [n for n in feats.columns if n not in before and n.startswith(f"{c}=")]
        notes.append(f"One-hot encoded categorical columns {to_encode[:6]}.")
    y = df[target].reset_index(drop=True) if target else None
    return PreparedData(feats.reset_index(drop=True), y, target, kinds, groups, notes)


# ------------------------------------------------------------------ models
def _model_kind(data: bytes, name: str) -> str:
    if name.endswith(".cbm") or data[:4] == b"CBM1":
        return "catboost"
    if name.endswith((".json", ".ubj")):
        return "xgboost"
    if name.endswith(".txt"):
        return "lightgbm"
    if name.endswith(".skops"):
        return "skops"
    if name.endswith(".onnx"):
        return "onnx"
    if name.endswith((".pkl", ".pickle", ".joblib", ".sav")):
        return "pickle"
    head = data[:64].lstrip()
    if head.startswith(b"{") or head.startswith(b"[") or head.startswith(b"{L") or head.startswith(b"{$"):
        return "xgboost"
    if head.startswith(b"tree"):
        return "lightgbm"
    if data[:2] == b"PK":
        return "skops"
    if data[:1] == b"\x80":
        return "pickle"
    return "unknown"


def _catboost_json(document: dict, data: bytes, filename: str) -> Any:
    """A CatBoost JSON export; CatBoost's own model beside it when the package is installed."""
    native = None
    try:
        import catboost  # optional and heavy: CatBoost's own model, for the parity checks
    except ImportError:
        catboost = None
    if catboost is not None:
        native = _catboost_load(catboost, data, filename, "json")
    return CatBoostJSON(document=document, native=native)


def _catboost_binary(data: bytes, filename: str) -> Any:
    """A CatBoost ``.cbm`` file: read by CatBoost (required), exported to its JSON."""
    try:
        import catboost  # optional and heavy: only CatBoost reads a .cbm
    except ImportError:
        raise UnsupportedModelError(
            f"{filename!r} is a CatBoost binary model (.cbm), which needs the catboost package to read. Export it "
            "from CatBoost as JSON instead: model.save_model('model.json', format='json', pool=train_pool)."
        ) from None
    native = _catboost_load(catboost, data, filename, "cbm")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.json"
        native.save_model(str(path), format="json")
        document = load_json(path.read_bytes(), filename, "CatBoost JSON")
    return CatBoostJSON(document=document, native=native)


def _catboost_load(catboost: Any, data: bytes, filename: str, fmt: str) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"model.{fmt}"
        path.write_bytes(data)
        model = catboost.CatBoost()
        try:
            model.load_model(str(path), format=fmt)
        except Exception as exc:  # noqa: BLE001 - CatBoostError
            raise ModelError(f"{filename!r} is not a readable CatBoost model: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}") from None
    return model


def load_model(data: bytes, filename: str, *, allow_pickle: bool = False) -> Any:
    """Read a model file given as bytes and return the native model object.

    Parameters
    ----------
    data : bytes, the file's content.
    filename : str, its name; the extension picks the reader (.json/.ubj XGBoost,
        .txt LightGBM, .cbm/.json CatBoost, .skops, .pkl/.joblib).
    allow_pickle : bool, default False, read a pickle or joblib file: only for a file
        the user trusts (a pickle runs code when loaded).

    Raises
    ------
    ModelError
        Empty, corrupt or unrecognised file.
    UntrustedPickleError
        A pickle/joblib file without ``allow_pickle=True``.
    UnsupportedModelError
        A readable file holding an unsupported model or disallowed types.

    Examples
    --------
    >>> import io, skops.io
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import load_model
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(3, max_depth=2, random_state=0).fit(data.data, data.target)
    >>> type(load_model(skops.io.dumps(rf), "forest.skops")).__name__
    'RandomForestClassifier'
    """
    if data is None or len(data) == 0:
        raise ModelError(f"{filename!r} is empty. Upload a saved model file.")
    if len(data) > MAX_MODEL_BYTES:
        raise ModelError(f"{filename!r} is larger than {MAX_MODEL_BYTES // 2**20} MB.")
    kind = _model_kind(data, filename.lower())
    if kind == "catboost":
        return _catboost_binary(data, filename)
    if kind == "xgboost":
        return _load_xgboost(data, filename)
    if kind == "lightgbm":
        return _load_lightgbm(data, filename)
    if kind == "skops":
        return _load_skops(data, filename)
    if kind == "onnx":       # read and checked without running it, then run once within a time budget
        from core.intake.parsing.onnx_runner import load_onnx

        return load_onnx(data, filename)
    if kind == "pickle":
        return _load_pickle(data, filename, allow_pickle)
    raise ModelError(
        f"{filename!r}: unrecognised model file. Supported: XGBoost .json/.ubj, LightGBM .txt, "
        "scikit-learn .skops (and .pkl/.joblib if you trust the file)."
    )


def _load_xgboost(data: bytes, filename: str) -> Any:
    """An XGBoost ``.json``/``.ubj`` file as a Booster, checked first (or a CatBoost
    JSON export, which looks the same from outside)."""
    import xgboost as xgb  # optional and heavy: imported only when such a file arrives

    document = xgboost_document(data, filename)
    if isinstance(document, dict) and "features_info" in document and \
            ("oblivious_trees" in document or "trees" in document):
        return _catboost_json(document, data, filename)
    # checked before XGBoost reads it: a damaged tree array crashes or hangs XGBoost
    check_xgboost_json(document, filename)
    booster = xgb.Booster()
    try:
        booster.load_model(bytearray(data))
    except Exception as exc:
        raise ModelError(
            f"{filename!r} is not a readable XGBoost model (saved with Booster.save_model / "
            f"XGBClassifier.save_model as .json or .ubj): {str(exc).splitlines()[0][:200]}"
        ) from None
    return booster


def _load_lightgbm(data: bytes, filename: str) -> Any:
    """A LightGBM text model as a Booster, its text checked and normalised first."""
    import lightgbm as lgb  # optional and heavy: imported only when such a file arrives

    # CRLF (Windows editors, git checkouts) or a hand edit shifts the byte offsets
    # in tree_sizes and LightGBM aborts the process: see core.intake.parsing.validate
    text = lightgbm_text(data, filename)
    try:
        return lgb.Booster(model_str=text)
    except Exception as exc:
        raise ModelError(
            f"{filename!r} is not a readable LightGBM model (saved with Booster.save_model as text): "
            f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
        ) from None


def _load_skops(data: bytes, filename: str) -> Any:
    """A ``.skops`` file holding only allow-listed types, its trees checked."""
    import skops.io as sio  # optional and heavy: imported only when such a file arrives

    check_skops_zip(data, filename)
    check_skops_boosters(data, filename)      # an embedded XGBoost/LightGBM booster, as its own file would be
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:
        raise ModelError(f"{filename!r} is not a readable .skops file ({exc}).") from None
    refused = sorted(set(untrusted) - SKOPS_TRUSTED)
    if refused:
        raise UnsupportedModelError(
            f"{filename!r} contains types outside the allow-list: {refused[:6]}. "
            "Only tree-ensemble models can be loaded from .skops files."
        )
    try:
        model = sio.loads(data, trusted=list(untrusted))
    except Exception as exc:
        raise ModelError(f"{filename!r} could not be loaded as .skops ({exc}).") from None
    check_sklearn_trees(model, filename)      # before anything predicts with its node arrays
    return model


def _load_pickle(data: bytes, filename: str, allow_pickle: bool) -> Any:
    """A pickle/joblib file, opened only with ``allow_pickle``, its trees checked."""
    if not allow_pickle:
        raise UntrustedPickleError(
            f"{filename!r} is a pickle/joblib file and was not opened. {PICKLE_WARNING} "
            "To open it anyway, tick 'I trust this file'."
        )
    import joblib  # imported only when a trusted pickle is opened

    try:
        model = joblib.load(io.BytesIO(data))
    except Exception as exc:
        raise ModelError(f"{filename!r} could not be unpickled ({type(exc).__name__}: {exc}).") from None
    check_sklearn_trees(model, filename)
    return model
