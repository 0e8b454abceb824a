"""Optional packages, imported where a feature needs them, with a message naming the extra.

The library installs with a small core (``pip install counterfactual-atlas``); each extra of
``pyproject.toml`` adds the packages one part needs: ``formats`` reads XGBoost, CatBoost and
ONNX files, ``gurobi`` adds a MILP backend, ``dask`` runs batches on a cluster, ``gosdt``
gives FCCA its optimal sparse trees, ``app`` the Streamlit app. A feature that needs one of
them calls :func:`need` instead of a bare ``import``: where the package is missing, the user
reads what needs it and the one command that installs it, not a ``ModuleNotFoundError``
from deep inside the library (as alibi does with its own extras).

:data:`EXTRA_OF` is the one map from an importable module to the extra that installs it;
``tests/test_packaging.py`` checks it against ``pyproject.toml``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

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
