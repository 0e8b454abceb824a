"""One thread for the source libraries' small predictions.

A counterfactual is checked on the uploaded model one row, or a few, at a time. The
libraries predict those rows in thread pools sized for large batches: scikit-learn's
HistGradientBoosting and LightGBM in OpenMP threads (a parallel region per tree), an
MLP in OpenBLAS's. For one row the threads' start-up and spinning cost many times the
prediction: a 100-iteration HistGradientBoosting classifier took 23-30 ms of CPU per
row in two threads against 0.9-1.0 ms in one (this machine, 2 cores, other work beside
it; ``bench/small_predictions.py``). The answers do not depend on the number of threads.
LightGBM sets its own OpenMP threads on every call from its ``num_threads`` parameter
(its default: all of OpenMP's), so a limit from outside does not hold for it:
:func:`predict_threads` gives it the parameter (17 ms of wall time for one row of a
100-tree model on a loaded machine, 0.03 ms in one thread).

:func:`small_batch` limits every OpenMP and BLAS pool of the process to one thread while
a batch of at most :data:`SMALL_BATCH` rows is predicted, and leaves larger batches to the
libraries' own pools. The limit holds in the calling thread only (OpenMP's and
OpenBLAS's settings as :mod:`threadpoolctl` sets and restores them), so threads that
check rows at once each set their own.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.typing import ModelLike

__all__ = ["SMALL_BATCH", "predict_threads", "small_batch"]

#: batches of at most this many rows are predicted in one thread
SMALL_BATCH = 256

_lock = threading.Lock()
_cached: dict[str, Any] = {"modules": -1, "controller": None}


def _controller() -> Any:
    """threadpoolctl's controller of the pools loaded so far. Building one scans the
    process's shared libraries (about 3 ms); it is kept and built again only after a
    module was imported, which may have loaded another library's pool."""
    n = len(sys.modules)
    with _lock:
        if _cached["modules"] != n:
            from threadpoolctl import ThreadpoolController

            _cached["controller"], _cached["modules"] = ThreadpoolController(), n
        return _cached["controller"]


#: the models whose predictions no limit from outside governs, so :func:`small_batch` leaves the
#: pools alone for them (setting and restoring them cost 20-30 us a call, a sixth of a check of
#: a query on the model): LightGBM sets its threads on every call (:func:`predict_threads`), and
#: scikit-learn's trees, forests, gradient boosting and isolation forests predict in Cython in
#: the calling thread or in joblib's threads (its ``n_jobs``), neither an OpenMP nor a BLAS pool.
#: HistGradientBoosting (OpenMP) and XGBoost, whose ``nthread`` 0 follows OpenMP's limit, are not here.
OWN_THREADS = ("lightgbm.", "sklearn.tree.", "sklearn.ensemble._forest", "sklearn.ensemble._gb",
               "sklearn.ensemble._iforest")


def _limit_matters(model: ModelLike) -> bool:
    """Does the pools' limit change how ``model`` predicts? Not for :data:`OWN_THREADS`, nor an
    XGBoost model set to one thread (``n_jobs`` 1: its booster's ``nthread``); any other, yes."""
    if model is None:
        return True
    module = type(model).__module__ + "."
    if module.startswith(OWN_THREADS):
        return False
    return not (module.startswith("xgboost.") and hasattr(model, "get_booster") and getattr(model, "n_jobs", None) == 1)


@contextmanager
def small_batch(n_rows: int, model: ModelLike = None) -> Iterator[None]:
    """Within it, the process's OpenMP and BLAS pools use one thread (in the calling
    thread) when ``n_rows`` is at most :data:`SMALL_BATCH` and the limit changes how ``model``
    predicts (any model when none is given); otherwise nothing changes."""
    if n_rows > SMALL_BATCH or not _limit_matters(model):
        yield
        return
    with _controller().limit(limits=1):
        yield


def predict_threads(model: ModelLike, n_rows: int) -> dict[str, int]:
    """The keyword a LightGBM model's ``predict`` takes to predict ``n_rows`` rows in one
    thread when they are a small batch (see the module's docstring); ``{}`` otherwise."""
    if n_rows > SMALL_BATCH or not type(model).__module__.startswith("lightgbm"):
        return {}
    return {"num_threads": 1}
