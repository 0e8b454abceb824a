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

import hashlib
import io
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from core.errors import AtlasError, DataError, ModelError, UnsupportedModelError, UntrustedPickleError, need
from core.intake.compressed import unpack
from core.intake.csvfile import TYPE_LETTERS, read_csv
from core.intake.limits import LOCAL_LIMITS, table_limits
from core.intake.parquet import read_parquet
from core.intake.parsing.catboost import CatBoostJSON, catboost_document
from core.intake.parsing.validate import (
    check_catboost_cbm,
    check_catboost_json,
    check_sklearn_trees,
    check_skops_boosters,
    check_skops_zip,
    check_xgboost_json,
    lightgbm_text,
    xgboost_document,
)
from core.intake.training import FAMILIES, TrainedModel, infer_task, train_model  # noqa: F401 - importable from here
from core.schema import one_hot_encode
from core.typing import ModelLike

__all__ = ["load_table", "prepare_data", "PreparedData", "load_model", "train_model",
           "TrainedModel", "sha256", "MAX_TABLE_BYTES", "SKOPS_TRUSTED", "ANY_MODEL_TYPES", "TYPE_LETTERS"]

#: scikit-learn types a .skops file of "any other model" may hold, beyond the tree formats'
#: list (SKOPS_TRUSTED) and what skops trusts by default. Each only holds arrays.
ANY_MODEL_TYPES = frozenset({
    "sklearn.neural_network._multilayer_perceptron.MLPClassifier",
    "sklearn.neural_network._multilayer_perceptron.MLPRegressor",
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
    "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
    "sklearn.preprocessing._label.LabelBinarizer",
    "sklearn.svm._classes.SVC", "sklearn.svm._classes.SVR", "sklearn.svm._classes.NuSVC",
    "sklearn.svm._classes.NuSVR",
    "sklearn.neighbors._classification.KNeighborsClassifier",
    "sklearn.neighbors._regression.KNeighborsRegressor",
    "sklearn.neighbors._kd_tree.KDTree", "sklearn.neighbors._ball_tree.BallTree",
    *(f"sklearn.metrics._dist_metrics.{m}Distance{b}" for m in ("Euclidean", "Manhattan", "Chebyshev",
                                                                 "Minkowski") for b in ("32", "64")),
    "sklearn.naive_bayes.GaussianNB", "sklearn.naive_bayes.BernoulliNB", "sklearn.naive_bayes.MultinomialNB",
    "sklearn.naive_bayes.ComplementNB", "sklearn.naive_bayes.CategoricalNB",
    "sklearn.discriminant_analysis.LinearDiscriminantAnalysis",
    "sklearn.discriminant_analysis.QuadraticDiscriminantAnalysis",
    "sklearn.calibration.CalibratedClassifierCV", "sklearn.calibration._CalibratedClassifier",
    "sklearn.calibration._SigmoidCalibration",
    "sklearn.isotonic.IsotonicRegression",
    "sklearn.ensemble._voting.VotingClassifier", "sklearn.ensemble._voting.VotingRegressor",
    "sklearn.ensemble._stacking.StackingClassifier", "sklearn.ensemble._stacking.StackingRegressor",
    "sklearn.ensemble._bagging.BaggingClassifier", "sklearn.ensemble._bagging.BaggingRegressor",
    "sklearn.ensemble._weight_boosting.AdaBoostClassifier", "sklearn.ensemble._weight_boosting.AdaBoostRegressor",
    "sklearn.kernel_ridge.KernelRidge",
    "sklearn.preprocessing._polynomial.PolynomialFeatures", "sklearn.preprocessing._data.QuantileTransformer",
    "sklearn.preprocessing._data.PowerTransformer", "sklearn.preprocessing._discretization.KBinsDiscretizer",
    "sklearn.decomposition._pca.PCA",
    "sklearn.linear_model._logistic.LogisticRegression", "sklearn.linear_model._base.LinearRegression",
    "sklearn.linear_model._ridge.Ridge", "sklearn.svm._classes.LinearSVC",
    "sklearn.linear_model._stochastic_gradient.SGDClassifier",
    "sklearn.tree._classes.DecisionTreeClassifier", "sklearn.tree._classes.DecisionTreeRegressor",
    "sklearn.utils._bunch.Bunch",
    "numpy.random.mtrand.RandomState", "numpy.random._mt19937.MT19937",
    "builtins.slice",
})

MAX_TABLE_BYTES = int(LOCAL_LIMITS["max_upload_mb"] or 0) * 2**20     # a local instance's; see core.intake.limits
MAX_MODEL_BYTES = 500 * 1024 * 1024
_COMMA_NUMBER = re.compile(r"[+-]?[\d.]*\d,\d+")
MAX_LEVELS = 200        # distinct values of a text column one-hot encoded for training
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
    # sparse matrices: a model fitted on scikit-learn's default (sparse) one-hot output keeps its
    # support vectors or training rows as one (SVC, k-nearest neighbours); skops reads them with
    # scipy.sparse.load_npz, which loads plain arrays (allow_pickle=False)
    "scipy.sparse._csr.csr_matrix", "scipy.sparse._csc.csc_matrix",
    "scipy.sparse._csr.csr_array", "scipy.sparse._csc.csc_array",
})
PICKLE_WARNING = (
    "Pickle and joblib files can run arbitrary code when opened. Load one only if you "
    "trust where it came from; prefer XGBoost .json/.ubj, LightGBM .txt or scikit-learn .skops."
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ tables
_TABLE_HINT = ("load_table takes a path (str or pathlib.Path), an open binary file, or the file's bytes with its "
               "name: load_table(path), load_table(data, 'people.csv').")
_MODEL_HINT = ("load_model takes a path (str or pathlib.Path), an open binary file, or the file's bytes with its "
               "name: load_model(path), load_model(data, 'model.json').")


def _read_source(source: Any, filename: Any, max_bytes: int, error: type[AtlasError], what: str,
                 hint: str) -> tuple[bytes, str]:
    """``(bytes, name)`` of what a caller handed to :func:`load_table` or :func:`load_model`,
    checked at the door: each wrong argument raises ``error`` with the fix."""
    if filename is not None and not isinstance(filename, (str, os.PathLike)):
        raise error(f"filename must be the file's name as a string, e.g. 'people.csv'; got "
                    f"{type(filename).__name__}. {hint}")
    name = None if filename is None else os.fspath(filename)
    asked = _Asked(error, what, hint, max_bytes)
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not name:
            raise error(f"The {what}'s name is missing: with bytes, give the file's name too (its extension tells "
                        f"the format). {hint}")
        return bytes(source), name
    if isinstance(source, (str, os.PathLike)):
        return _from_path(source, name, asked)
    if hasattr(source, "read"):
        return _from_file_object(source, name, asked)
    if source is None:
        raise error(f"No {what} was given. {hint}")
    raise error(f"A {what} cannot be read from {type(source).__name__}. {hint}")


class _Asked(NamedTuple):
    """What :func:`_read_source` reads, for its messages: the error to raise, "table" or
    "model file", the hint on how to call, and the largest file accepted."""

    error: type[AtlasError]
    what: str
    hint: str
    max_bytes: int

    @property
    def call(self) -> str:
        return f"load_{self.what.split()[0]}"

    @property
    def example(self) -> str:
        return "people.csv" if self.what == "table" else "model.json"


def _from_path(source: str | os.PathLike[str], name: str | None, asked: _Asked) -> tuple[bytes, str]:
    """The bytes of the file at a path, checked: a path (not content), a file, within the size limit."""
    error, hint, call = asked.error, asked.hint, asked.call
    path = Path(os.fspath(source))
    if isinstance(source, str) and ("\n" in source or len(source) > 4096):
        raise error(f"{call} was given a string that is not a path (it spans lines). To read content held in a "
                    f"string, pass its bytes and a name: {call}(text.encode(), {asked.example!r}). {hint}")
    if not path.exists():
        raise error(f"There is no file at {str(path)!r}. Check the path (relative paths start from "
                    f"{os.getcwd()!r}). {hint}")
    if not path.is_file():
        raise error(f"{str(path)!r} is a folder, not a file. {hint}")
    size = path.stat().st_size
    if size > asked.max_bytes:
        raise error(f"{path.name!r} is {size / 2**20:,.0f} MB; the limit is {asked.max_bytes / 2**20:,.0f} MB.")
    try:
        return path.read_bytes(), name or path.name
    except OSError as exc:
        raise error(f"{str(path)!r} cannot be read ({exc.strerror or exc}).") from None


def _from_file_object(source: Any, name: str | None, asked: _Asked) -> tuple[bytes, str]:
    """The bytes an open file gives (one past the limit, for the size check after) and its name."""
    error, hint = asked.error, asked.hint
    try:
        content = source.read(asked.max_bytes + 1)
    except Exception as exc:  # noqa: BLE001 - a closed or unreadable file object
        raise error(f"The file object could not be read ({type(exc).__name__}: {exc}). {hint}") from None
    if isinstance(content, str):
        content = content.encode("utf-8")
    if not isinstance(content, (bytes, bytearray)):
        raise error(f"Reading the file object gave {type(content).__name__}, not bytes. {hint}")
    own = getattr(source, "name", None)
    name = name or (Path(own).name if isinstance(own, (str, os.PathLike)) and str(own) else None)
    if not name:
        raise error(f"The file object has no name: give it, e.g. {asked.call}(f, {asked.example!r}). {hint}")
    return bytes(content), name


def load_table(source: object, filename: str | None = None, *, encoding: str | None = None,
               max_bytes: int | None = None, max_rows: int | None = None,
               max_decoded_bytes: int | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet file (also inside gzip, bzip2, xz or zip).

    Parameters
    ----------
    source : str or pathlib.Path (a file's path), bytes (the file's content, with
        ``filename``), or an open binary file (its ``name`` names it unless
        ``filename`` is given).
    filename : str, optional, the file's name: ".parquet"/".pq" or a Parquet signature
        read as Parquet, ".gz"/".bz2"/".xz"/".zip" or their signatures decompressed first,
        anything else as CSV. Required with bytes.
    encoding : str, optional, a CSV's text encoding when the caller knows it (a Python
        codec name: "shift_jis", "euc_jp", "gbk", "big5", "cp949", "cp1252", ...); by
        default it is detected, and a file two code pages read alike is refused naming both.
    max_bytes : int, optional, the largest file accepted, also once decompressed.
    max_rows : int, optional, the most rows accepted.
    max_decoded_bytes : int, optional, the most memory the decoded table may take.
        Each limit left out is this deployment's (:func:`core.intake.limits.table_limits`:
        200 MB, no row cap and 2 GB locally; with ``ATLAS_PUBLIC=1`` those of a public
        instance, 50 MB, 200,000 rows and 512 MB; ``ATLAS_MAX_UPLOAD_MB``,
        ``ATLAS_MAX_ROWS`` and ``ATLAS_MAX_TABLE_MB`` set each).

    Returns the table as read; ``df.attrs["column_types"]`` holds the kinds of
    an OCEAN-style type row when the file has one, ``df.attrs["target"]`` its
    ``T`` column, and ``df.attrs["notes"]`` how the file was read when that was
    not plain (a legacy code page, decimal commas, dates read as numbers).
    ``max_rows`` and ``max_decoded_bytes`` are checked before the rows are
    decoded (a Parquet file's page headers; a CSV is parsed no further than one
    row past the cap), so a small file that expands to billions of values is
    refused without spending the memory (:mod:`core.intake.parquet`). The
    text encoding of a CSV is detected (:mod:`core.intake.encoding`).

    Raises
    ------
    DataError
        A missing file or a wrong argument; an empty or oversize file, too many
        rows or too much memory once decoded, an unreadable format or encoding,
        a single column (wrong delimiter), duplicate or missing column names,
        cells holding lists or structs.

    Examples
    --------
    >>> from core import load_table
    >>> load_table(b"age,income\\n30,1200\\n41,\\n", "people.csv").shape
    (2, 2)
    >>> load_table(b"age;income\\n30;1200,50\\n41;980,25\\n", "people.csv")["income"].tolist()
    [1200.5, 980.25]
    """
    max_bytes, max_rows, max_decoded_bytes = _limits(max_bytes, max_rows, max_decoded_bytes)
    data, filename = _read_source(source, filename, max_bytes, DataError, "table", _TABLE_HINT)
    if len(data) == 0:
        raise DataError(f"{filename!r} is empty. Upload a CSV or Parquet file with a header row and data rows.")
    if len(data) > max_bytes:
        raise DataError(
            f"{filename!r} is {len(data) / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB. "
            "Upload a sample of the rows."
        )
    data, inner, unpacked = unpack(data, filename, max_bytes)
    if not data:
        raise DataError(f"{filename!r} holds an empty file. Upload a CSV or Parquet file with a header row and "
                        "data rows.")
    df = _decoded_table(data, inner.lower(), filename, encoding, max_rows, max_decoded_bytes)
    del data
    if df.shape[0] == 0:
        raise DataError(f"{filename!r} has a header but no data rows.")
    if max_rows is not None and len(df) > max_rows:
        raise DataError(f"{filename!r} has more than {max_rows:,} rows; this instance analyses at most "
                        f"{max_rows:,}. Upload a sample of the rows.")
    df.columns = _column_names(df, filename)
    if unpacked:
        df.attrs.setdefault("notes", []).insert(0, unpacked)
    return df


def _decoded_table(data: bytes, name: str, filename: str, encoding: str | None, max_rows: int | None,
                   max_decoded_bytes: int) -> pd.DataFrame:
    """The table a file's bytes hold, read as Parquet or CSV by its name or signature."""
    if name.endswith((".parquet", ".pq")) or data[:4] == b"PAR1":
        return read_parquet(data, filename, max_rows=max_rows, max_decoded_bytes=max_decoded_bytes)
    if name.endswith((".xlsx", ".xls", ".xlsm", ".ods", ".json", ".pkl", ".pickle", ".feather", ".arrow")):
        raise DataError(f"{filename!r}: unsupported table format; upload CSV (.csv) or Parquet (.parquet).")
    return read_csv(data, filename, max_rows=max_rows, encoding=encoding)


def _column_names(df: pd.DataFrame, filename: str) -> list[str]:
    """The table's column names as text, each present and none twice."""
    cols = [str(c) for c in df.columns]
    if any(c.startswith("Unnamed:") for c in cols):
        raise DataError(f"{filename!r} has columns without a name; every column needs a header.")
    if len(set(cols)) != len(cols):
        raise DataError(f"{filename!r} has duplicate column names.")
    return cols


def _limits(max_bytes: Any, max_rows: Any, max_decoded_bytes: Any) -> tuple[int, int | None, int]:
    """The caller's limits, each left out taken from this deployment's (module doc of
    :mod:`core.intake.limits`); each given one a positive whole number."""
    given = {"max_bytes": max_bytes, "max_rows": max_rows, "max_decoded_bytes": max_decoded_bytes}
    for name, v in given.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0):
            raise DataError(f"load_table: {name} is a positive whole number (or left out for this deployment's "
                            f"limit); got {v!r}.")
    lim = table_limits()
    return (lim.max_bytes if max_bytes is None else int(max_bytes),
            lim.max_rows if max_rows is None else int(max_rows),
            lim.max_decoded_bytes if max_decoded_bytes is None else int(max_decoded_bytes))


@dataclass
class PreparedData:
    """Numeric features ready for a model, the target, and what was done."""

    X: pd.DataFrame
    y: pd.Series | None
    target: str | None
    kinds: dict[str, str] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def target_column_guess(df: pd.DataFrame) -> Any:
    """The column an analyst most likely means as the label, until they choose: the one
    the file names (``df.attrs["target"]``, an OCEAN-style type row's ``T``) when the
    table has it, else the last column.

    >>> import pandas as pd
    >>> target_column_guess(pd.DataFrame({"age": [30], "approved": [1]}))
    'approved'
    """
    cols = list(df.columns)
    guess = df.attrs.get("target", cols[-1] if cols else None)
    return guess if guess in cols else (cols[-1] if cols else None)


def prepare_data(df: pd.DataFrame, target: str | None = None, *,
                 drop_missing: bool = False) -> PreparedData:
    """Turn a loaded table into numeric features.

    Text columns whose values are all non-numeric are one-hot encoded as
    ``col=value`` columns (so are columns the type row marks ``E``). Columns
    mixing numbers with a few text values, and missing values, raise
    ``DataError`` with counts and an example; missing rows are dropped only
    if ``drop_missing`` is set, and the drop is reported in ``notes``.
    """
    feats = _features_of(df, target)
    notes: list[str] = []
    types = dict(df.attrs.get("column_types", {}))
    roles = _ColumnRoles()
    for c in feats.columns:
        roles.add(c, feats, types.get(c))
    _refuse_unusable(roles, feats)
    df, feats = _without_missing(df, feats, target, drop_missing, notes)
    for c in feats.columns:
        if pd.api.types.is_bool_dtype(feats[c]):
            feats[c] = feats[c].astype(np.int64)
    kinds = {c: k for c, k in types.items() if c in feats.columns and k != "categorical" and c not in roles.to_encode}
    feats, groups = _one_hot_groups(feats, roles.to_encode, notes)
    y = df[target].reset_index(drop=True) if target else None
    return PreparedData(feats.reset_index(drop=True), y, target, kinds, groups, notes)


def _features_of(df: pd.DataFrame, target: str | None) -> pd.DataFrame:
    """A copy of the table's feature columns (all but the target); refused when there are none."""
    if target is not None and target not in df.columns:
        raise DataError(f"Target column {target!r} is not in the table; columns are {list(df.columns)[:12]}.")
    feats = df.drop(columns=[target]) if target else df.copy()
    if feats.shape[1] == 0:
        raise DataError("The table has no feature columns besides the target.")
    return feats


@dataclass
class _ColumnRoles:
    """The feature columns :func:`prepare_data` one-hot encodes, and those it refuses (as text)."""

    to_encode: list[str] = field(default_factory=list)
    mixed: list[str] = field(default_factory=list)
    temporal: list[str] = field(default_factory=list)

    def add(self, c: Any, feats: pd.DataFrame, marked: str | None) -> None:
        """Sort column ``c``: categories to encode, numbers (numbers held as objects made
        numbers in ``feats``), dates and durations, or numbers mixed with text."""
        s = feats[c]
        if marked == "categorical":
            self.to_encode.append(c)
            return
        if pd.api.types.is_bool_dtype(s) or (pd.api.types.is_numeric_dtype(s)
                                             and not pd.api.types.is_timedelta64_dtype(s)):
            return
        if pd.api.types.is_datetime64_any_dtype(s) or pd.api.types.is_timedelta64_dtype(s) \
                or isinstance(s.dtype, pd.PeriodDtype):
            self.temporal.append(f"{c!r} ({s.dtype})")
            return
        conv = pd.to_numeric(s, errors="coerce")
        bad = conv.isna() & s.notna()
        if int(bad.sum()) == int(s.notna().sum()):
            self.to_encode.append(c)
        elif not bad.any():                      # numbers held as objects: numbers
            feats[c] = conv
        else:
            self.mixed.append(_mixed_text(c, s, bad))


def _mixed_text(c: Any, s: pd.Series, bad: pd.Series) -> str:
    """A numeric column holding text, in a few words: how many values, the first one, and
    a hint when it looks like a number written with a decimal comma."""
    i = int(np.flatnonzero(bad.to_numpy())[0])
    example = s.iloc[i]
    comma = (" - a number written with a decimal comma? Write every number of the column the same way"
             if isinstance(example, str) and _COMMA_NUMBER.fullmatch(example.strip()) else "")
    return f"{c!r}: {int(bad.sum())} non-numeric values (e.g. {example!r} in row {i}{comma})"


def _refuse_unusable(roles: _ColumnRoles, feats: pd.DataFrame) -> None:
    """Refuse dates and durations, numbers mixed with text, and text columns too wide to be categories."""
    if roles.temporal:
        raise DataError("Some columns hold dates, times or durations: " + ", ".join(roles.temporal[:6]) + ". The "
                        "analyses need numbers or categories: convert them to numbers (e.g. days since a date, "
                        "seconds; load_table does so for Parquet files) or drop them.")
    if roles.mixed:
        raise DataError("Some numeric columns hold text: " + "; ".join(roles.mixed[:5])
                        + ". Fix or remove those values and upload again.")
    wide = {c: n for c in roles.to_encode if (n := int(feats[c].nunique())) > MAX_LEVELS}
    if wide:
        raise DataError("Some text columns have too many distinct values to be categories: "
                        + "; ".join(f"{c!r} has {n:,}" for c, n in list(wide.items())[:5])
                        + f" (at most {MAX_LEVELS} each; one 0/1 column is made per value). Drop such columns "
                          "(identifiers, free text) or group their rare values, and upload again.")


def _without_missing(df: pd.DataFrame, feats: pd.DataFrame, target: str | None, drop_missing: bool,
                     notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The table and its features without the rows missing a value (noted), when
    ``drop_missing``; refused otherwise."""
    missing = feats.isna().any(axis=1)
    if target is not None:
        missing |= df[target].isna()
    if not missing.any():
        return df, feats
    cols = [c for c in feats.columns if feats[c].isna().any()]
    i = int(np.flatnonzero(missing.to_numpy())[0])
    if not drop_missing:
        raise DataError(
            f"{int(missing.sum())} of {len(df)} rows have missing values (columns {cols[:6]}; first at "
            f"row {i}). Impute them, or choose to drop those rows."
        )
    notes.append(f"Dropped {int(missing.sum())} rows with missing values (columns {cols[:6]}).")
    return df.loc[~missing], feats.loc[~missing]


def _one_hot_groups(feats: pd.DataFrame, to_encode: list[str], notes: list[str]
                    ) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The features with ``to_encode`` one-hot encoded (noted), and each column's group of 0/1 columns."""
    groups: dict[str, list[str]] = {}
    if not to_encode:
        return feats, groups
    before = set(feats.columns)
    feats = one_hot_encode(feats, to_encode)
    for c in to_encode:
        groups[c] = [n for n in feats.columns if n not in before and n.startswith(f"{c}=")]
    notes.append(f"One-hot encoded categorical columns {to_encode[:6]}.")
    return feats, groups


# ------------------------------------------------------------------ models
#: a model file's kind by its name's ending, in this order (after CatBoost's own signature)
_KIND_BY_NAME = (
    ((".cbm",), "catboost"), ((".json", ".ubj"), "xgboost"), ((".txt",), "lightgbm"), ((".skops",), "skops"),
    ((".onnx",), "onnx"), ((".pkl", ".pickle", ".joblib", ".sav"), "pickle"),
)
#: then by how its text starts (blanks skipped), then by its first bytes
_KIND_BY_TEXT = ((b"{", "xgboost"), (b"[", "xgboost"), (b"tree", "lightgbm"))
_KIND_BY_BYTES = ((b"PK", "skops"), (b"\x80", "pickle"))


def _model_kind(data: bytes, name: str) -> str:
    if data[:4] == b"CBM1":
        return "catboost"
    for ends, kind in _KIND_BY_NAME:
        if name.endswith(ends):
            return kind
    head = data[:64].lstrip()
    for start, kind in _KIND_BY_TEXT:
        if head.startswith(start):
            return kind
    for start, kind in _KIND_BY_BYTES:
        if data[:len(start)] == start:
            return kind
    return "unknown"


def _catboost_json(document: dict[str, Any], data: bytes, filename: str) -> Any:
    """A CatBoost JSON export; CatBoost's own model beside it when the package is installed."""
    native = None
    try:
        import catboost  # optional and heavy: CatBoost's own model, for the parity checks
    except ImportError:
        catboost = None
    check_catboost_json(document, filename)      # CatBoost trusts the file: a damaged one ends the process
    if catboost is not None:
        native = _catboost_load(catboost, data, filename, "json")
    return CatBoostJSON(document=document, native=native)


def _catboost_binary(data: bytes, filename: str) -> Any:
    """A CatBoost ``.cbm`` file: read by CatBoost (required), exported to its JSON."""
    try:
        import catboost  # optional and heavy: only CatBoost reads a .cbm
    except ImportError:
        raise UnsupportedModelError(
            f"{filename!r} is a CatBoost binary model (.cbm), which needs the catboost package to read "
            "(pip install 'counterfactual-atlas[formats]'). Or export it from CatBoost as JSON instead: model.save_model('model.json', format='json', pool=train_pool)."
        ) from None
    check_catboost_cbm(data, filename)           # CatBoost trusts the file: a damaged one ends the process
    return catboost_document(_catboost_load(catboost, data, filename, "cbm"), filename)


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


def read_model_bytes(source: object, filename: str | None = None) -> tuple[bytes, str]:
    """``(bytes, name)`` of a model file given as :func:`load_model` takes it, checked at the
    door (a missing, empty or oversize file raises :class:`ModelError`)."""
    data, filename = _read_source(source, filename, MAX_MODEL_BYTES, ModelError, "model file", _MODEL_HINT)
    if len(data) == 0:
        raise ModelError(f"{filename!r} is empty. Upload a saved model file.")
    if len(data) > MAX_MODEL_BYTES:
        raise ModelError(f"{filename!r} is larger than {MAX_MODEL_BYTES // 2**20} MB.")
    return data, filename


def load_model(source: object, filename: str | None = None, *, allow_pickle: bool = False,
               output: str | None = None) -> ModelLike:
    """Read a model file in this process and return the native model object.

    This reads the file here, with no limit of time or memory: a damaged or hostile file
    can crash, hang or exhaust the process that reads it. It is the reader of the sandbox's
    child (:mod:`core.intake.sandbox`) and of files one made oneself; for a file from
    elsewhere, use :func:`core.load_model` (:func:`core.intake.door.load_model`), which
    reads it in a sandboxed child process first.

    Parameters
    ----------
    source : str or pathlib.Path (a file's path), bytes (the file's content, with
        ``filename``), or an open binary file (its ``name`` names it unless
        ``filename`` is given).
    filename : str, optional, the file's name; the extension picks the reader (.json/.ubj
        XGBoost, .txt LightGBM, .cbm/.json CatBoost, .skops, .pkl/.joblib). Required with bytes.
    allow_pickle : bool, default False, read a pickle or joblib file: only for a file
        the user trusts (a pickle runs code when loaded).
    output : str, optional, for an ONNX graph with several outputs that could be its
        prediction, the name of the one it is run on (a label output, or an output of
        numbers: probabilities beside the graph's label output, else a regressor's value);
        without it, such a graph is refused, naming its outputs.

    Raises
    ------
    ModelError
        A missing file or a wrong argument; an empty, corrupt or unrecognised file; a file whose
        content is of another format than its extension says (named, with the extension to give it).
    UntrustedPickleError
        A pickle/joblib file without ``allow_pickle=True``.
    UnsupportedModelError
        A readable file holding an unsupported model or disallowed types.

    Examples
    --------
    >>> import io, skops.io
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core.intake.io import load_model
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(3, max_depth=2, random_state=0).fit(data.data, data.target)
    >>> type(load_model(skops.io.dumps(rf), "forest.skops")).__name__
    'RandomForestClassifier'
    """
    data, filename = read_model_bytes(source, filename)
    kind = _model_kind(data, filename.lower())
    if output is not None and kind != "onnx":
        raise ModelError(f"output={output!r} names an output of an ONNX graph; {filename!r} is not an .onnx file. "
                         "Leave output out for this file.")
    if kind == "pickle" and _model_kind(data, "") == "skops":     # a zip is never a pickle: not a trust question
        raise _misnamed(data, filename, kind, ModelError(f"{filename!r} is not a pickle."))
    try:
        return _read_kind(kind, data, filename, allow_pickle, output)
    except ModelError as exc:
        raise _misnamed(data, filename, kind, exc) from None


#: what a file's content says it is (see _misnamed; the name it should end in: _KIND_BY_NAME)
_CONTENT_NAMES = {"skops": "a scikit-learn .skops archive (a zip file)", "xgboost": "JSON (an XGBoost or CatBoost model)",
                  "lightgbm": "a LightGBM text model", "pickle": "a pickle", "catboost": "a CatBoost binary model"}


def _misnamed(data: bytes, filename: str, kind: str, exc: ModelError) -> ModelError:
    """``exc``, or, when the file's content is of another kind than its name says (a .skops file
    renamed .json), the error saying so: the file is not damaged, only its name misleads."""
    seen = _model_kind(data, "")
    if seen == kind or seen not in _CONTENT_NAMES:
        return exc
    what, ends = _CONTENT_NAMES[seen], next(e[0] for e, k in _KIND_BY_NAME if k == seen)
    return ModelError(f"{filename!r} holds {what}, not what its name says: a model file is read by its "
                      f"extension, so it could not be read. The file itself may be intact: rename it so that "
                      f"its name ends in {ends} and upload it again.")


def _read_kind(kind: str, data: bytes, filename: str, allow_pickle: bool, output: str | None) -> ModelLike:
    """The native model of a file of ``kind`` (:func:`load_model`'s readers)."""
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

        return load_onnx(data, filename, output=output)
    if kind == "pickle":
        return _load_pickle(data, filename, allow_pickle)
    raise ModelError(
        f"{filename!r}: unrecognised model file. Supported: XGBoost .json/.ubj, LightGBM .txt, "
        "scikit-learn .skops (and .pkl/.joblib if you trust the file)."
    )


def _load_xgboost(data: bytes, filename: str) -> Any:
    """An XGBoost ``.json``/``.ubj`` file as a Booster, checked first (or a CatBoost
    JSON export, which looks the same from outside)."""
    xgb = need("xgboost", "reading an XGBoost model file")  # optional and heavy: only when one arrives

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
    import lightgbm as lgb  # heavy: imported only when such a file arrives

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
        raise _skops_refusal(filename, refused)
    try:
        model = sio.loads(data, trusted=list(untrusted))
    except Exception as exc:
        raise ModelError(f"{filename!r} could not be loaded as .skops ({exc}).") from None
    check_sklearn_trees(model, filename)      # before anything predicts with its node arrays
    return model


def _skops_refusal(filename: str, refused: list[str]) -> UnsupportedModelError:
    """Why a .skops file is not read here: a model the worker runs (not a tree ensemble or a
    linear model, so not read exactly), or types no reader loads."""
    foreign = [t for t in refused if t not in ANY_MODEL_TYPES]
    if not foreign:
        held = sorted({t.rsplit(".", 1)[-1] for t in refused})
        return UnsupportedModelError(
            f"{filename!r} holds {', '.join(held[:6])}: not a tree ensemble or a linear model, so it is not read "
            "exactly here. It is analysed as any other model instead: run in a sandboxed worker, the exact analyses "
            "on a tree-ensemble surrogate of it and every answer checked on the model itself (core.load_model and "
            "the Data & model page do so).")
    return UnsupportedModelError(
        f"{filename!r} contains types outside the allow-list: {foreign[:6]}. skops would have to run code of these "
        "types to load them, so they are not loaded from .skops files. Save the model with scikit-learn, XGBoost "
        "or LightGBM types only, or export it to ONNX.")


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
