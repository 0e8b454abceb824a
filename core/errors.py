"""The small exception hierarchy of ``core``: every error class is defined here.

Every error a user can cause subclasses ``ValueError`` (through
:class:`AtlasError`) and says what was expected, what arrived and how to fix
it, so the app can show the message as is and a script can catch
``ValueError``. The modules that raise them re-export their own (e.g.
``core.rules.NoCounterfactualRuleError``), so both import paths work. A package
of an extra that is not installed is :class:`MissingExtraError` (an ``ImportError``),
raised by :func:`need` with the command that installs it.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType


class AtlasError(ValueError):
    """Base class of the user-facing errors of Counterfactual Atlas."""


class UnsupportedModelError(AtlasError):
    """The model's type, objective or split kind is not supported."""


class ModelError(AtlasError):
    """A model file or object is corrupt or inconsistent."""


class WorkerError(ModelError):
    """A model run in its own worker process failed there: it crashed, went past its memory or
    time limit, or answered what no model answers (NaN, an array of the wrong shape)."""


class WorkerCancelled(WorkerError):
    """A model's worker was stopped (Cancel, the end of a session) while it loaded or answered."""


class DataError(AtlasError):
    """A data file cannot be read or holds values that cannot be used."""


class SchemaError(AtlasError):
    """The data does not match the model or the feature settings."""


class ConstraintError(SchemaError):
    """A constraint between features that cannot be read or cannot hold: the
    message names the line and the column; ``line`` and ``column`` (1-based, None
    when the error is not at one place) say where, for a page to point at it."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class UntrustedPickleError(AtlasError):
    """A pickle/joblib file was given without the user trusting it."""


@cache
def _not_fitted_error() -> type[AtlasError]:
    """``NotFittedError``, made on first use: it also subclasses scikit-learn's, and
    importing scikit-learn (about 2.5 s) is not for ``import core`` to pay."""
    from sklearn.exceptions import NotFittedError as SklearnNotFitted

    class NotFittedError(AtlasError, SklearnNotFitted):
        """An estimator (T-CREx, counterfactual rules) was used before ``fit``;
        also scikit-learn's ``NotFittedError``, so either can be caught."""

    NotFittedError.__module__, NotFittedError.__qualname__ = __name__, "NotFittedError"   # pickles by name
    return NotFittedError


def __getattr__(name: str) -> type[AtlasError]:
    if name == "NotFittedError":
        return _not_fitted_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class QueryError(AtlasError):
    """A counterfactual query that cannot be posed (bad target, norm, feature)."""


class FilterError(AtlasError):
    """A filter that cannot be read; the message says where and why."""


class PositionalMatchRequired(SchemaError):
    """The model's features have no names; the columns can be matched by
    position only once the user confirms ``mapping`` (feature -> column)."""

    def __init__(self, message: str, mapping: list[tuple[str, str]]):
        super().__init__(message)
        self.mapping = mapping


class NoCounterfactualRuleError(AtlasError):
    """No region of the surrogate reaches the asked probability."""


class NoValidRuleError(AtlasError):
    """No rule reaches the accuracy threshold: lower tau or rho."""


class GridTooLargeError(AtlasError):
    """The grid of step c would have more cells than allowed."""


class FCCAError(AtlasError):
    """An FCCA run that cannot be posed or gave nothing to work with."""


class AuditError(AtlasError):
    """An audit that cannot be run as asked."""


class AuditCancelled(AuditError):
    """The audit was stopped before it finished; nothing was kept."""


class HistoryError(AtlasError):
    """The audit history cannot be read or written as asked."""


class ClusterError(AtlasError):
    """The Dask cluster cannot be reached or used."""


class ResultFileError(AtlasError):
    """A saved result cannot be read back: another kind of result, or a damaged file."""


class GurobiUnavailable(RuntimeError):
    """Gurobi cannot solve this model here (no licence, or the model exceeds
    it); not the user's doing: the solver falls back to CP-SAT with a notice."""


def positional(error: type[Exception]) -> type[Exception]:
    """``error``'s kind for a setting given by position where it is keyword-only: a
    subclass that is also a ``TypeError`` (what Python raises for such a call), so
    either can be caught. Made once per class, reachable (and picklable) as
    ``error.Positional``."""
    cls = error.__dict__.get("Positional")
    if cls is None:
        cls = type("Positional", (error, TypeError), {
            "__module__": __name__, "__qualname__": f"{error.__qualname__}.Positional",
            "__doc__": f"{error.__name__} for a keyword-only setting given by position (also a TypeError)."})
        error.Positional = cls  # type: ignore[attr-defined]
    return cls


# Optional packages (the extras of pyproject.toml: ``formats`` reads XGBoost, CatBoost and ONNX
# files, ``gurobi`` adds a MILP backend, ``dask`` a cluster, ``gosdt`` FCCA's optimal trees,
# ``app`` the Streamlit app). A feature that needs one calls :func:`need` instead of a bare
# ``import``: where the package is missing, the user reads what needs it and the one command that
# installs it, not a ``ModuleNotFoundError`` from deep inside the library (as alibi does).
# tests/test_packaging.py checks EXTRA_OF against pyproject.toml.

#: importable module -> the extra of pyproject.toml that installs it
EXTRA_OF: dict[str, str] = {
    "xgboost": "formats", "catboost": "formats", "onnx": "formats", "onnxruntime": "formats",
    "gurobipy": "gurobi", "dask": "dask", "distributed": "dask", "gosdt": "gosdt",
    "streamlit": "app", "altair": "app", "psycopg": "postgres",
}

PACKAGE = "counterfactual-atlas"


class MissingExtraError(ModuleNotFoundError):
    """An optional package a feature needs is not installed; the message names its extra.

    A ``ModuleNotFoundError`` (an ``ImportError``), so code that already catches a missing
    package goes on catching it."""


def install_hint(module: str) -> str:
    """The command that installs ``module`` with this package's extra for it."""
    top = module.split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return f"pip install {top}"
    return f"pip install '{PACKAGE}[{extra}]'"


def need(module: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtraError` saying that ``what`` (e.g. "reading
    an XGBoost model") needs it and which extra installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != top:
            raise                                     # the package is there; something it imports is not
        extra = EXTRA_OF.get(top)
        where = f"the extra '{extra}' of {PACKAGE} installs it" if extra else "it is not installed"
        raise MissingExtraError(f"{what[:1].upper()}{what[1:]} needs the package '{top}', which is not installed "
                                f"({where}): {install_hint(top)}", name=top) from None
