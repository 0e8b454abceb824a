"""Uploads into tables and models, under the deployment's rules (no Streamlit here,
so the rules can be tested without a browser)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from core.errors import AtlasError, DataError, UnsupportedModelError, UntrustedPickleError, WorkerError
from core.intake import io
from core.intake.sandbox import load_vetted
from core.intake.worker import ModelWorker
from dashboard.deploy import Deployment, settings


def read_table(data: bytes, filename: str, deployment: Deployment | None = None) -> pd.DataFrame:
    """A table from an upload, within the deployment's size and row caps."""
    dep = deployment or settings()
    cap = dep.max_upload_mb * 2**20
    if len(data) > cap:
        raise DataError(f"{filename!r} is {len(data) / 2**20:.0f} MB; this instance takes files up to "
                        f"{dep.max_upload_mb} MB. Upload a sample of the rows.")
    # the caps are checked before the rows are decoded (a small Parquet file can hold billions of values)
    return io.load_table(data, filename, max_bytes=cap, max_rows=dep.max_rows,
                         max_decoded_bytes=dep.max_table_mb * 2**20)


def _check_model_upload(data: bytes, filename: str, trust: bool, dep: Deployment) -> None:
    if len(data) > dep.max_upload_mb * 2**20:
        raise DataError(f"{filename!r} is {len(data) / 2**20:.0f} MB; this instance takes files up to "
                        f"{dep.max_upload_mb} MB.")
    if trust and not dep.allows_pickle:
        raise UntrustedPickleError("This public instance never opens pickle or joblib files. Save the model as "
                                   "XGBoost .json/.ubj, LightGBM .txt, CatBoost .json, scikit-learn .skops or "
                                   ".onnx.")


def read_model(data: bytes, filename: str, trust: bool, deployment: Deployment | None = None) -> Any:
    """A tree ensemble or a linear model from an upload, as a
    :class:`core.intake.sandbox.VettedModel`; pickle/joblib only when the user trusts the
    file and the deployment allows it (never on a public instance)."""
    dep = deployment or settings()
    _check_model_upload(data, filename, trust, dep)
    # read, converted and verified in a child process first: a damaged file cannot take the server down
    return load_vetted(data, filename, allow_pickle=trust and dep.allows_pickle)


def start_worker(data: bytes, filename: str, trust: bool, deployment: Deployment | None = None) -> ModelWorker:
    """Any other model from an upload, in a sandboxed worker of its own (one per session and
    file, never shared), under the same rules; the worker has not started yet."""
    dep = deployment or settings()
    _check_model_upload(data, filename, trust, dep)
    return ModelWorker(data, filename, allow_pickle=trust and dep.allows_pickle)


def run_failure(unsupported: Exception, failure: AtlasError) -> AtlasError:
    """The error to show when a model was read neither exactly (``unsupported``: not a tree
    ensemble or a linear model) nor in its worker (``failure``). When the model itself failed
    there (crashed, ran out of memory or time, answered NaN, was stopped), that is what happened:
    it is said first, with what to do, and the list of exactly read models is left out; when it
    is not a model at all (no predict, a type outside the allow-list), both reasons are given."""
    if isinstance(failure, WorkerError):
        return type(failure)(f"{failure} (It is not a model the Atlas reads exactly, so it ran in a sandboxed "
                             "process of its own.)")
    return UnsupportedModelError(f"{unsupported} It could not be run as another kind of model either: {failure}")
