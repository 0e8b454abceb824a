"""One result shape for every analysis: ``params``, ``elapsed``, ``guarantee`` and a ``kind``.

alibi returns one ``Explanation(meta=..., data=...)`` with ``to_json`` from every
explainer. Here every analysis returns a frozen result of its own type, and every
one of them (a :class:`Result`) has the same three fields under the same names:

``params``
    dict, the settings it was made with, as JSON values (numbers, text, lists,
    dicts, None: :func:`settings`);
``elapsed``
    float, the seconds it took (one name: the older ``solve_time``, ``seconds``,
    ``time`` and ``fit_time_`` remain as read-only aliases that warn, :func:`older_name`,
    until they are removed);
``guarantee``
    :class:`core.model.Guarantee`, what is proven or checked about it, in words
    with :meth:`~core.model.Guarantee.text`;

and the same round trip: :meth:`Result.to_dict` / :meth:`Result.to_json` write one
JSON object whose ``kind`` says what it is (``"counterfactual"``, ``"region_set"``,
``"tcrex"``, ``"audit"``, ...), with ``format`` and ``version``, the three fields
(the guarantee with its ``text``) and the result's own fields;
:meth:`Result.from_dict` / :meth:`Result.from_json` read it back into an equal
result (``==`` compares values: arrays, tables, tuples, nested results, the
guarantee; NaN equals NaN).

Strict JSON, so that any reader takes the file: a number that is not finite is
written ``null``. Each number has a natural value for ``null`` (NaN for a missing
value, -inf for a lower bound, +inf for an upper bound or for the cost of a
counterfactual that does not exist); where the value is another one, the object's
``nonfinite`` names it (``{"gap": "nan"}``, ``{"lower": [[3, "inf"]]}``: position 3
of the array), so nothing is lost.

A page's download in the analyst's columns starts with the same header
(:func:`export`): ``{kind, format, version, params, elapsed, guarantee, <the view>}``;
it does not hold the result in the model's own features (those may include internal
ones, such as a missing value's indicator), so it is not read back: ``to_json`` is.
A file that holds the result under ``"result"`` beside its view (the model
comparison's) is read by ``from_dict``.

:func:`load_result` (``core.load_result``) reads any saved result back without being
told its type: it reads the ``kind`` and hands the file to that kind's class (the module
that defines it, :data:`RESULT_MODULES`, is imported then: reading a counterfactual
imports no audit).
"""

from __future__ import annotations

import importlib
import json
import math
import warnings
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, SupportsFloat, TypeVar

import numpy as np
import pandas as pd
from numpy.typing import DTypeLike

from core.errors import ResultFileError
from core.model.ensemble import TreeEnsemble
from core.model.guarantee import Guarantee
from core.typing import ArrayLike

__all__ = ["Result", "MetaResult", "Writer", "Reader", "FORMAT", "VERSION", "RESULT_MODULES", "settings",
           "to_json_value", "same", "export", "frame_to_dict", "frame_from_dict", "ensemble_to_dict",
           "ensemble_from_dict", "load_result", "older_name"]

FORMAT = "counterfactual-atlas-result"
VERSION = 1
#: the module that defines each kind of result, imported by :func:`load_result` when a file of
#: that kind is read (the model layer imports none of them itself)
RESULT_MODULES = {
    "counterfactual": "core.counterfactual", "counterfactual_batch": "core.optimal.batch",
    "recourse_check": "core.optimal.constrained", "region_set": "core.regions",
    "linear_slice": "core.solvers.linear_regions", "tcrex": "core.tcrex", "local_rule": "core.rules.results",
    "regional_rule": "core.rules.results", "fcca": "core.compression.result", "surrogate": "core.surrogate.distill",
    "audit": "core.audit.result", "subgroup_scan": "core.audit.subgroups", "model_comparison": "core.audit.compare",
    "case_story": "core.audit.story",
}
#: kinds written before a result had its own: a local rule's was empty
_OLD_KINDS = {"": "local_rule"}
#: the format of audits saved before the one result shape (they have no kind)
_OLD_AUDIT_FORMAT = "counterfactual-atlas-audit"
_WORDS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_MISSING = object()

R = TypeVar("R", bound="Result")


def _word(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _same_float(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def to_json_value(v: object) -> Any:
    """A JSON value of ``v``: dicts (keys as text), lists (tuples and arrays too), Python
    numbers (one that is not finite as None), text, booleans, None; a guarantee or a
    result as its dict; anything else as its text."""
    if isinstance(v, (Result, Guarantee)):
        return v.to_dict()
    if isinstance(v, Mapping):
        return {str(k): to_json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json_value(x) for x in v]
    if isinstance(v, np.ndarray):
        return to_json_value(v.tolist())
    return _json_scalar(v)


def _json_scalar(v: object) -> Any:
    """One value that holds no others as JSON: numpy scalars as Python ones, a number not
    finite as None, anything unknown as its text."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    return str(v)


def settings(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A result's ``params``: the settings as JSON values (:func:`to_json_value`), nested
    as they are (never a structure written as a string)."""
    return to_json_value(dict(params or {}))


# ------------------------------------------------------------------ writing and reading numbers
def _spec(values: np.ndarray, fill: float) -> Any:
    """What ``nonfinite`` says of a float array written with nulls: nothing when every value
    that is not finite is ``fill``; one word when all are another same value; else the
    positions (in the flattened array) of those that are not ``fill``."""
    flat = values.ravel()
    bad = np.flatnonzero(~np.isfinite(flat))
    odd = [int(i) for i in bad if not _same_float(float(flat[i]), fill)]
    if not odd:
        return None
    if len(odd) == len(bad) and len({_word(float(flat[i])) for i in odd}) == 1:
        return _word(float(flat[odd[0]]))
    return [[i, _word(float(flat[i]))] for i in odd]


class Writer:
    """Writes one object's fields as JSON values; a number that is not finite as null,
    its value named in ``nonfinite`` when it is not the field's ``fill``."""

    def __init__(self) -> None:
        self.out: dict[str, Any] = {}
        self.nonfinite: dict[str, Any] = {}

    def value(self, key: str, v: object) -> Writer:
        self.out[key] = to_json_value(v)
        return self

    def number(self, key: str, v: SupportsFloat, fill: float = math.nan) -> Writer:
        x = float(v)
        self.out[key] = x if math.isfinite(x) else None
        if not math.isfinite(x) and not _same_float(x, fill):
            self.nonfinite[key] = _word(x)
        return self

    def numbers(self, key: str, values: Mapping[str, Any], fill: float = math.nan) -> Writer:
        """A dict of numbers (a result's timings)."""
        out, odd = {}, {}
        for k, v in values.items():
            v = float(v)
            out[str(k)] = v if math.isfinite(v) else None
            if not math.isfinite(v) and not _same_float(v, fill):
                odd[str(k)] = _word(v)
        self.out[key] = out
        if odd:
            self.nonfinite[key] = odd
        return self

    def array(self, key: str, a: ArrayLike | None, fill: float = math.nan) -> Writer:
        """An array as (nested) lists: numbers, text or booleans; None stays None."""
        if a is None:
            self.out[key] = None
            return self
        arr = np.asarray(a)
        self.out[key] = to_json_value(arr)
        if arr.dtype.kind == "f":
            spec = _spec(arr, fill)
            if spec is not None:
                self.nonfinite[key] = spec
        return self

    def done(self) -> dict[str, Any]:
        if self.nonfinite:
            self.out["nonfinite"] = self.nonfinite
        return self.out


class Reader:
    """Reads what :class:`Writer` wrote; a missing key is a :class:`core.errors.ResultFileError`."""

    def __init__(self, d: Mapping[str, Any], what: str = "result") -> None:
        if not isinstance(d, Mapping):
            raise ResultFileError(f"A saved {what} is a JSON object; got {type(d).__name__}.")
        self.d = d
        self.what = what
        nonfinite = d.get("nonfinite") or {}
        self.nonfinite = nonfinite if isinstance(nonfinite, Mapping) else {}

    def __contains__(self, key: str) -> bool:
        return key in self.d

    def get(self, key: str, default: object = _MISSING) -> Any:
        if key in self.d:
            return self.d[key]
        if default is _MISSING:
            raise ResultFileError(f"The saved {self.what} is incomplete: it has no {key!r}.")
        return default

    def number(self, key: str, fill: float = math.nan, default: object = _MISSING) -> Any:
        """A number; null is ``fill`` unless ``nonfinite`` names its value."""
        if key not in self.d:
            return self.get(key, default)
        v = self.d[key]
        if v is None:
            word = self.nonfinite.get(key)
            return _WORDS[word] if isinstance(word, str) else fill
        return float(v)

    def numbers(self, key: str, fill: float = math.nan) -> dict[str, float]:
        values = self.get(key, {}) or {}
        odd = self.nonfinite.get(key) or {}
        return {str(k): (float(v) if v is not None else _WORDS.get(odd.get(k, ""), fill)) for k, v in values.items()}

    def array(self, key: str, fill: float = math.nan, dtype: DTypeLike = float, default: object = _MISSING) -> Any:
        if key not in self.d:
            return self.get(key, default)
        v = self.d[key]
        return None if v is None else array_from(v, self.nonfinite.get(key), fill, dtype)


def array_from(v: ArrayLike, spec: object, fill: float = math.nan, dtype: DTypeLike = float) -> np.ndarray:
    """The array :meth:`Writer.array` wrote as ``v`` with ``nonfinite`` ``spec``."""
    if np.dtype(dtype).kind != "f":
        return np.asarray(v, dtype=dtype)
    a = np.array(v, dtype=float) if v != [] else np.zeros(0)
    if a.dtype != float:
        a = a.astype(float)
    a[np.isnan(a)] = fill
    if isinstance(spec, str):
        a[~np.isfinite(a)] = _WORDS[spec]
    elif isinstance(spec, list):
        flat = a.reshape(-1)
        for i, w in spec:
            flat[int(i)] = _WORDS[w]
    return a.astype(dtype, copy=False)


# ------------------------------------------------------------------ tables and models
def _cell(v: Any) -> Any:
    """One table cell as JSON: numpy scalars as Python values, a number not finite as None."""
    if v is pd.NA or v is pd.NaT:
        return None
    return to_json_value(v)


def frame_to_dict(df: pd.DataFrame) -> dict[str, Any]:
    """A table as ``{columns, data, dtypes}`` (rows of cells, numbers exact), its index when
    it is not 0..n-1, and ``nonfinite`` where a number column holds infinities."""
    out: dict[str, Any] = {"columns": [str(c) for c in df.columns],
                           "data": [[_cell(v) for v in row] for row in df.itertuples(index=False, name=None)],
                           "dtypes": [str(t) for t in df.dtypes]}
    if not (isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1):
        out["index"] = [_cell(v) for v in df.index]
        out["index_name"] = to_json_value(df.index.name)
    odd = _frame_nonfinite(df)
    if odd:
        out["nonfinite"] = odd
    return out


def _frame_nonfinite(df: pd.DataFrame) -> dict[str, Any]:
    """``nonfinite`` of each float column that holds a value not finite other than NaN."""
    odd = {}
    for c, t in zip(df.columns, df.dtypes):
        if t.kind == "f":
            spec = _spec(df[c].to_numpy(dtype=float), math.nan)
            if spec is not None:
                odd[str(c)] = spec
    return odd


#: column types that are not numpy's, read as objects of that type
_PANDAS_TYPES = ("category", "string", "boolean", "Int64", "Float64")


def frame_from_dict(d: Mapping[str, Any], keep_object: tuple[str, ...] = ()) -> pd.DataFrame:
    """The table :func:`frame_to_dict` wrote. Without ``dtypes`` (a file written before
    they were kept) the column types are inferred; columns starting with one of
    ``keep_object`` stay as written (values, categories and None)."""
    columns = list(d["columns"])
    raw = pd.DataFrame(d["data"], columns=columns, dtype=object)
    dtypes = d.get("dtypes")
    if dtypes is None:
        out = _inferred_frame(raw, keep_object)
    else:
        out = _typed_frame(raw, columns, dtypes, d.get("nonfinite") or {})
    if "index" in d:
        out.index = pd.Index(d["index"], name=d.get("index_name"))
    return out


def _inferred_frame(raw: pd.DataFrame, keep_object: tuple[str, ...]) -> pd.DataFrame:
    """A table written without its column types: inferred, those starting with ``keep_object`` kept."""
    out = raw.infer_objects()
    for c in raw.columns:
        if str(c).startswith(keep_object) and keep_object:
            out[c] = raw[c]
    return out


def _typed_frame(raw: pd.DataFrame, columns: list[Any], dtypes: list[str], odd: Mapping[str, Any]) -> pd.DataFrame:
    """A table written with its column types, each column given back its own."""
    if len(dtypes) != len(columns):
        raise ValueError(f"{len(dtypes)} column types for {len(columns)} columns")
    parts = {k: _typed_column(raw.iloc[:, k], t, odd.get(str(c))) for k, (c, t) in enumerate(zip(columns, dtypes))}
    out = pd.concat([parts[k].rename(k) for k in range(len(columns))], axis=1) if columns \
        else pd.DataFrame(index=range(len(raw)))
    out.columns = columns
    return out


def _typed_column(col: pd.Series, t: Any, spec: object) -> pd.Series:
    """One column of objects as type ``t``; floats with their ``nonfinite`` ``spec``."""
    kind = np.dtype(t).kind if t not in _PANDAS_TYPES else "O"
    if kind == "f":
        values: pd.Series = pd.Series(array_from(col.tolist(), spec, math.nan, t), dtype=t)
        return values
    if kind in "iub":
        return col.astype(t)
    return col.astype(t) if t != "object" else col


def ensemble_to_dict(ens: TreeEnsemble) -> dict[str, Any]:
    """A tree ensemble as JSON: its arrays (:meth:`TreeEnsemble.to_arrays`, each with its
    dtype) and their metadata; never a pickle."""
    arrays, meta = ens.to_arrays()
    w = Writer()
    for k, a in arrays.items():
        w.array(k, a)
    return {"meta": meta, "dtypes": {k: str(a.dtype) for k, a in arrays.items()}, "arrays": w.done()}


def ensemble_from_dict(d: Mapping[str, Any]) -> TreeEnsemble:
    r = Reader(d["arrays"], "model")
    arrays = {k: r.array(k, dtype=np.dtype(t)) for k, t in d["dtypes"].items()}
    return TreeEnsemble.from_arrays(arrays, dict(d["meta"]))


# ------------------------------------------------------------------ equality
def _real(v: object) -> bool:
    """A number that is not a boolean (``bool`` is an ``int`` to Python)."""
    return isinstance(v, (float, np.floating, int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _numbers(a: object, b: object) -> bool:
    """Two numbers compared as floats: at least one a float, neither a boolean."""
    return _real(a) and _real(b) and (isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)))


def _either(*types: type) -> Callable[[object, object], bool]:
    """Does one of the two values have one of ``types``."""
    def test(a: object, b: object) -> bool:
        return isinstance(a, types) or isinstance(b, types)
    return test


def _first_is(*types: type) -> Callable[[object, object], bool]:
    """Does the first value have one of ``types``."""
    def test(a: object, b: object) -> bool:
        return isinstance(a, types)
    return test


def _either_result(a: object, b: object) -> bool:
    """Is one of the two values a result (the class is defined below, so looked up here)."""
    return isinstance(a, Result) or isinstance(b, Result)


def _is_record(a: object, b: object) -> bool:
    """Is the first value a dataclass instance (not a dataclass itself)."""
    return is_dataclass(a) and not isinstance(a, type)


def _same_result(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


def _same_array(a: Any, b: Any) -> bool:
    """Arrays of one shape, numbers by value (NaN equal to NaN), anything else item by item."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
        return False
    if a.dtype.kind in "fiub" and b.dtype.kind in "fiub":
        return bool(np.array_equal(a.astype(float), b.astype(float), equal_nan=True))
    return all(same(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))


def _same_table(a: Any, b: Any) -> bool:
    return isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame) and _same_frame(a, b)


def _same_ensemble(a: Any, b: Any) -> bool:
    return isinstance(a, TreeEnsemble) and isinstance(b, TreeEnsemble) and a.content_hash() == b.content_hash()


def _same_number(a: Any, b: Any) -> bool:
    return _same_float(float(a), float(b))


def _same_mapping(a: Any, b: Any) -> bool:
    return isinstance(b, Mapping) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)


def _same_sequence(a: Any, b: Any) -> bool:
    return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _same_record(a: Any, b: Any) -> bool:
    return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))


#: how :func:`same` compares two values, the first rule whose test holds deciding
_SAME_RULES: tuple[tuple[Callable[[object, object], bool], Callable[[Any, Any], bool]], ...] = (
    (_either_result, _same_result),
    (_either(np.ndarray), _same_array),
    (_either(pd.DataFrame), _same_table),
    (_either(TreeEnsemble), _same_ensemble),
    (_numbers, _same_number),
    (_first_is(Mapping), _same_mapping),
    (_first_is(list, tuple), _same_sequence),
    (_is_record, _same_record),
)


def same(a: object, b: object) -> bool:
    """Are two values of results equal: arrays and tables by value (NaN equal to NaN),
    tuples and lists by type and items, dataclasses field by field, tree ensembles by content."""
    if a is b:
        return True
    for applies, compare in _SAME_RULES:
        if applies(a, b):
            return compare(a, b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _missing(v: Any) -> bool:
    """A table cell that holds no value (None, NA, NaT or NaN)."""
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, (float, np.floating)) and math.isnan(v))


def _same_cell(x: Any, y: Any) -> bool:
    """Two cells equal: both missing, or neither and :func:`same`."""
    if _missing(x) or _missing(y):
        return _missing(x) and _missing(y)
    return same(x, y)


def _same_frame(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if [str(c) for c in a.columns] != [str(c) for c in b.columns] or len(a) != len(b):
        return False
    if not same(np.asarray(a.index, dtype=object), np.asarray(b.index, dtype=object)) or a.index.name != b.index.name:
        return False
    return all(_same_cell(x, y) for k in range(a.shape[1])
               for x, y in zip(a.iloc[:, k].tolist(), b.iloc[:, k].tolist()))


# ------------------------------------------------------------------ the shape
class Result:
    """The one result shape (see the module docstring). A result class is a frozen
    dataclass (``eq=False``: equality is :meth:`__eq__`, by value) that sets ``kind``
    and ``what`` and writes its own fields in ``_body`` / reads them in ``_from_body``;
    ``params``, ``elapsed`` and ``guarantee`` are its fields or properties."""

    kind: ClassVar[str] = ""
    what: ClassVar[str] = "result"
    kinds: ClassVar[dict[str, type[Result]]] = {}
    #: kinds this class wrote before it had its own, still read back (a local rule's was "")
    old_kinds: ClassVar[tuple[str, ...]] = ()

    if TYPE_CHECKING:
        params: dict[str, Any]
        elapsed: float
        guarantee: Guarantee

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__dict__.get("kind"):
            Result.kinds[cls.kind] = cls

    # ---- writing
    def header(self) -> dict[str, Any]:
        """What every result's dict starts with: kind, format, version, params, elapsed, guarantee."""
        return {"kind": self.kind, "format": FORMAT, "version": VERSION, "params": settings(self.params),
                "elapsed": to_json_value(float(self.elapsed)), "guarantee": self.guarantee.to_dict()}

    def _body(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The result as one JSON-able dict (see the module docstring)."""
        return {**self.header(), **self._body()}

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as strict JSON text."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    # ---- reading
    @classmethod
    def _from_body(cls: type[R], r: Reader) -> R:
        raise NotImplementedError

    @classmethod
    def from_dict(cls: type[R], d: Mapping[str, Any]) -> R:
        """The result :meth:`to_dict` wrote (or a file holding it under ``"result"``)."""
        d = opened(d, cls)
        try:
            return cls._from_body(Reader(d, cls.what))
        except ResultFileError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ResultFileError(f"The saved {cls.what} is incomplete or damaged ({type(exc).__name__}: "
                                  f"{str(exc)[:200]}).") from None

    @classmethod
    def from_json(cls: type[R], text: str | bytes) -> R:
        """The result :meth:`to_json` wrote."""
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ResultFileError(f"This is not a saved {cls.what}: the file is not JSON.") from None
        return cls.from_dict(d)

    # ---- equality
    def _compared(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self))  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(same(getattr(self, n), getattr(other, n)) for n in self._compared())

    __hash__ = None  # type: ignore[assignment]


def _what(kind: Any) -> str:
    cls = Result.kinds.get(kind) if isinstance(kind, str) else None
    return _article(cls.what) if cls is not None else (f"a result of kind {kind!r}" if kind
                                                        else "no result of Counterfactual Atlas")


def opened(d: object, cls: type[Result]) -> Mapping[str, Any]:
    """``d`` checked to be a saved result of ``cls``'s kind; a file holding it under ``"result"`` gives that."""
    if not isinstance(d, Mapping):
        raise ResultFileError(f"A saved {cls.what} is a JSON object; got {type(d).__name__}.")
    kind = d.get("kind")
    if kind != cls.kind and (kind not in cls.old_kinds or d.get("format") != FORMAT):
        raise ResultFileError(f"This file holds {_what(kind)}, not {_article(cls.what)}.")
    inner = d.get("result")
    if isinstance(inner, Mapping) and inner.get("kind") == cls.kind:
        return inner
    return d


def load_result(source: str | bytes | Mapping[str, Any]) -> Result:
    """A saved result of any kind read back: the ``kind`` in the file says which.

    Parameters
    ----------
    source : the JSON text (str or bytes) a result's :meth:`Result.to_json` wrote, or its
        dict (:meth:`Result.to_dict`); a download holding the result under ``"result"``
        beside its view (the model comparison's) and an audit saved before the one result
        shape are read too.

    Returns
    -------
    Result, of the class of its kind (:data:`RESULT_MODULES`), equal to the one saved.

    Raises
    ------
    ResultFileError
        Not JSON, not a saved result of Counterfactual Atlas, a kind it does not know, or a
        file incomplete or damaged (the kind's own reader says what is missing).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import from_model, load_result, optimal_counterfactual
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> ens = from_model(RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y))
    >>> res = optimal_counterfactual(ens, X[np.argmin(X[:, 0])], 1)
    >>> back = load_result(res.to_json())
    >>> type(back).__name__, back == res
    ('CounterfactualResult', True)
    """
    d = _loaded(source)
    kind, fmt = d.get("kind"), d.get("format")
    if fmt == _OLD_AUDIT_FORMAT:
        kind = "audit"
    elif fmt != FORMAT or not isinstance(kind, str):
        raise ResultFileError("This is not a saved result of Counterfactual Atlas (its JSON has no \"format\": "
                              f"{FORMAT!r} and no \"kind\"); give the JSON a result's to_json wrote.")
    kind = _OLD_KINDS.get(kind, kind)
    if kind not in RESULT_MODULES:
        raise ResultFileError(f"This file holds a result of kind {kind!r}, which this version does not read; the "
                              f"kinds it reads are {', '.join(sorted(RESULT_MODULES))}.")
    importlib.import_module(RESULT_MODULES[kind])
    return Result.kinds[kind].from_dict(d)


def _loaded(source: object) -> Mapping[str, Any]:
    """The JSON object of a saved result, as text, bytes or a dict."""
    if isinstance(source, Mapping):
        return source
    if not isinstance(source, (str, bytes, bytearray)):
        raise ResultFileError(f"load_result reads a saved result's JSON (text or bytes) or its dict; got "
                              f"{type(source).__name__}.")
    try:
        d = json.loads(source)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ResultFileError("This is not a saved result: the text is not JSON.") from None
    if not isinstance(d, Mapping):
        raise ResultFileError(f"A saved result is a JSON object; this file holds a {type(d).__name__}.")
    return d


def older_name(old: str, new: str = "elapsed") -> property:
    """A read-only attribute ``old`` that reads ``new`` and warns (``DeprecationWarning``) that
    it is the older name, until it is removed: ``solve_time = older_name("solve_time")``."""
    def read(self: object) -> Any:
        value = getattr(self, new)                # an estimator not fitted yet: AttributeError, no warning
        warnings.warn(f"{type(self).__name__}.{old} is the older name of {new} and will be removed; read "
                      f".{new} instead.", DeprecationWarning, stacklevel=2)
        return value
    return property(read, doc=f"The older name of :attr:`{new}` (deprecated: reading it warns).")


def _article(what: str) -> str:
    return f"an {what}" if what[:1].lower() in "aeiou" else f"a {what}"


def export(result: Result, view: Mapping[str, Any]) -> dict[str, Any]:
    """A download in the analyst's columns: the result's header and the ``view`` the
    page shows (its keys may replace the header's, e.g. ``params`` with the analyst's
    columns). The result itself, in the model's features, is :meth:`Result.to_json`."""
    return {**result.header(), **view}


class MetaResult(Result):
    """A result that keeps its settings and timings in ``meta`` (the audit and the model
    comparison, whose saved files predate the shape): ``params`` is
    ``meta["parameters"]``, ``elapsed`` is ``meta["timings"]["total"]`` (NaN when absent)."""

    meta: dict[str, Any]

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return settings(self.meta.get("parameters") or {})

    @property
    def elapsed(self) -> float:  # type: ignore[override]
        total = (self.meta.get("timings") or {}).get("total")
        return float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else math.nan
