"""The library's doors for a model: a model file read in a sandboxed child, run in a worker
when it is not read exactly (:func:`load_model`, ``core.load_model``), and a model and a
table read into one workspace whatever the model's kind (:func:`read_workspace`, what
``core.open_workspace`` of :mod:`core.door` reads with).

:func:`read_workspace` takes a model file (a path, its bytes, an open file) or a fitted
object, and a table. Tree ensembles and linear models are read exactly; any other model
runs in a sandboxed worker the workspace owns (:class:`OwnedWorker`): ``with ... as ws:``
(or ``ws.close()``) stops it and everything it started. The lower-level calls
(:func:`load_model`, :func:`core.intake.sandbox.load_vetted`, :class:`ModelWorker`,
:func:`core.intake.workspace.build_workspace`, ``Workspace.query_model``) stay, for those
who need them.

A file from elsewhere may be hostile or damaged, and the native libraries that read
some formats can crash the process that reads them, so the door reads every file in a
sandboxed child first (:func:`core.intake.sandbox.load_vetted`); a model that is not
read exactly (an MLP, a kernel SVM, an ONNX graph) runs in a :class:`ModelWorker`.
Reading in the calling process is the explicit choice ``in_process=True``
(:func:`core.intake.io.load_model`), for files one made oneself.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.errors import (
    AtlasError,
    ModelError,
    PositionalMatchRequired,
    UnsupportedModelError,
    WorkerCancelled,
    WorkerError,
)
from core.intake import io, sandbox
from core.intake.models import model_from
from core.intake.parsing.onnx_graph import keep_outputs
from core.intake.worker import ModelWorker
from core.intake.workspace import Workspace, build_workspace
from core.model.blackbox import BlackBoxModel
from core.model.features import ModelShape
from core.schema import Schema
from core.typing import ModelLike

__all__ = ["load_model", "read_workspace", "OwnedWorker"]


def load_model(source: object, filename: str | None = None, *, allow_pickle: bool = False,
               in_process: bool = False, output: str | None = None) -> ModelLike:
    """Read a model file safely: the native model object, or a model that runs in a worker.

    Parameters
    ----------
    source : str or pathlib.Path (a file's path), bytes (the file's content, with
        ``filename``), or an open binary file.
    filename : str, optional, the file's name; its extension picks the reader (see
        :func:`core.intake.io.load_model`). Required with bytes.
    allow_pickle : bool, default False, read a pickle or joblib file: only for a file the
        user trusts (a pickle runs code when loaded, in the sandbox's child too).
    in_process : bool, default False. By default the file is first read, converted and
        checked in a sandboxed child process, and then read here only once it was read
        there without harm (a tree ensemble or a linear model: the library's own object is
        returned), or it is run in a sandboxed worker (any other model: a
        :class:`core.model.blackbox.BlackBoxModel` answered by it is returned). With
        ``in_process=True`` the file is read in this process with no limit of time or
        memory (:func:`core.intake.io.load_model`): unsafe for a file from elsewhere, whose
        damage or hostility would then crash, hang or exhaust this process.
    output : str, optional, for an ONNX graph with several outputs that could be its
        prediction, the name of the one it is run on (a label output, or an output of
        numbers); without it such a graph is refused, its outputs named.

    Raises
    ------
    ModelError, UnsupportedModelError, UntrustedPickleError
        As :func:`core.intake.io.load_model`, plus a crash, a timeout or memory exhaustion
        of the child, each named; a model neither read nor run says why for both.

    Examples
    --------
    >>> import skops.io
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import load_model
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(3, max_depth=2, random_state=0).fit(data.data, data.target)
    >>> type(load_model(skops.io.dumps(rf), "forest.skops")).__name__
    'RandomForestClassifier'
    """
    if in_process:
        return io.load_model(source, filename, allow_pickle=allow_pickle, output=output)
    data, name = io.read_model_bytes(source, filename)
    if output is not None:
        data = _with_output(data, name, output)
    read, _ = _read_or_run(data, name, allow_pickle)
    return read.model if isinstance(read, sandbox.VettedModel) else read


def _read_or_run(data: bytes, name: str, allow_pickle: bool, first: Exception | None = None,
                 **limits: Any) -> tuple[sandbox.VettedModel | BlackBoxModel, ModelWorker | None]:
    """(the file read exactly in the sandbox, None), or, for a model that is not read exactly
    (``first`` says why, when the caller already knows), (the model answered by its new worker,
    the worker). A model neither read nor run says why for both."""
    if first is None:
        try:
            return sandbox.load_vetted(data, name, allow_pickle=allow_pickle), None
        except UnsupportedModelError as exc:       # not read exactly: any other model, run in a worker
            first = exc
    worker = ModelWorker(data, name, allow_pickle=allow_pickle, **limits)
    try:
        return worker.model(identity=io.sha256(data)), worker
    except AtlasError as exc:
        worker.stop()
        if str(exc) == str(first):                 # refused for the same reason both ways: said once
            raise
        if isinstance(exc, WorkerError):           # the model itself failed there: that is what happened
            raise type(exc)(f"{exc} (It is not a model the Atlas reads exactly, so it ran in a sandboxed process "
                            "of its own.)") from None
        raise UnsupportedModelError(f"{first} It could not be run as another kind of model either: {exc}") from None
    except BaseException:
        worker.stop()
        raise


class OwnedWorker:
    """The worker :func:`open_workspace` started for a model, owned by the workspace (and the
    workspaces made from it, which share it): :meth:`close` stops it for good. The model's
    answers pass through :meth:`answers`, so a closed workspace's model says it is closed
    rather than starting a new process."""

    def __init__(self, worker: ModelWorker):
        self.worker = worker
        self.closed = False

    @property
    def alive(self) -> bool:
        """Is the worker's process running?"""
        return self.worker.alive

    def answers(self, X: np.ndarray, categories: Sequence[Iterable[object] | None] | None = None
                ) -> dict[str, np.ndarray]:
        if self.closed:
            raise WorkerCancelled("This workspace was closed: its model's worker is stopped, so the model answers "
                                  "no more. Open it again with core.open_workspace(model, data, target) to go on.")
        return self.worker.answers(X, categories)

    def close(self) -> None:
        """Stop the worker and every process it started; later calls of the model are refused."""
        self.closed = True
        self.worker.stop()


def read_workspace(model: ModelLike, data: pd.DataFrame | str | os.PathLike[str], target: str | None = None, *,
                   filename: str | None = None, name: str | None = None, allow_pickle: bool = False,
                   output: str | None = None, confirm_positions: bool = False, schema: Schema | None = None,
                   protected: Sequence[str] | None = None, drop_missing: bool = False,
                   memory_mb: int | None = None, call_timeout: float | None = None) -> Workspace:
    """A model (a file or a fitted object) and a table read into one workspace, whatever the
    model's kind: the reading behind :func:`core.open_workspace` (:mod:`core.door`), whose
    docstring says what each parameter takes; that one gives the workspace every analysis as a
    method. A model that runs in a worker has it owned by the workspace (``worker``); nothing
    is left running when this raises."""
    table, data_sha256, data_name = _table(data)
    kw = dict(schema=schema, protected=protected, drop_missing=drop_missing, confirm_positions=confirm_positions)
    if _is_file(model):
        raw, mname = io.read_model_bytes(model, filename)
        if output is not None:
            raw = _with_output(raw, mname, output)
        read, worker = _read_or_run(raw, mname, allow_pickle, memory_mb=memory_mb, call_timeout=call_timeout)
        return _opened(table, target, read, worker, name=name or f"{data_name} · {mname}", data_sha256=data_sha256,
                       model_sha256=io.sha256(raw), model_info={"origin": mname}, **kw)
    if output is not None or filename is not None:
        raise ModelError("filename and output are for a model file; this model is a fitted object. Leave them out.")
    label = name or f"{data_name} · {type(model).__name__}"
    try:
        return _opened(table, target, model, None, name=label, data_sha256=data_sha256, **kw)
    except UnsupportedModelError as exc:
        if not _any_other(model):
            raise
        first: Exception = exc
    raw = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    read, worker = _read_or_run(raw, "model.pkl", True, first, memory_mb=memory_mb, call_timeout=call_timeout)
    return _opened(table, target, read, worker, name=label, data_sha256=data_sha256, model_sha256="",
                   model_info={"origin": type(model).__name__}, **kw)


def _is_file(model: Any) -> bool:
    """A model file given as a path, its bytes or an open file (not a fitted model)."""
    return isinstance(model, (str, os.PathLike, bytes, bytearray, memoryview)) or \
        (callable(getattr(model, "read", None)) and not callable(getattr(model, "predict", None)))


def _any_other(model: Any) -> bool:
    """A fitted model the Atlas does not read exactly (run in a worker): one with ``predict``
    that is neither of its own models nor read by its parsers."""
    if isinstance(model, ModelShape) or not callable(getattr(model, "predict", None)):
        return False
    try:
        model_from(model)
    except UnsupportedModelError:
        return True
    return False


def _table(data: Any) -> tuple[pd.DataFrame, str, str]:
    """(the table, the SHA-256 of its file or "", its name) from a DataFrame or a file."""
    if isinstance(data, pd.DataFrame):
        return data, "", "data"
    table = io.load_table(data)
    if isinstance(data, (str, os.PathLike)):
        return table, io.sha256(Path(os.fspath(data)).read_bytes()), Path(os.fspath(data)).name
    return table, "", str(getattr(data, "name", "data"))


def _opened(table: pd.DataFrame, target: str | None, read: Any, worker: ModelWorker | None, *, name: str,
            **kw: Any) -> Workspace:
    """The workspace of a model read (exactly, or answered by ``worker``, which it then owns);
    the worker stopped if the workspace cannot be made."""
    owned = None if worker is None else OwnedWorker(worker)
    if owned is not None:
        read = replace(read, answers=owned.answers)
    try:
        ws = build_workspace(table, target, read, name=name, **kw)
    except PositionalMatchRequired as exc:
        if owned is not None:
            owned.close()
        raise PositionalMatchRequired(f"{exc} Once it is checked, pass confirm_positions=True to open the workspace "
                                      f"with it: {_mapping_text(exc.mapping)}.", exc.mapping) from None
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return ws if owned is None else replace(ws, worker=owned)


def _mapping_text(mapping: list[tuple[str, str]]) -> str:
    shown = ", ".join(f"{f} ← {c}" for f, c in mapping[:8])
    return shown + (f", … ({len(mapping)} features)" if len(mapping) > 8 else "")


def _with_output(data: bytes, filename: str, output: str) -> bytes:
    """The file with only the outputs the analyst chose (an ONNX graph), so that the sandbox
    and the worker read the choice from the bytes they are given."""
    if io._model_kind(data, filename.lower()) != "onnx":
        raise ModelError(f"output={output!r} names an output of an ONNX graph; {filename!r} is not an .onnx file. "
                         "Leave output out for this file.")
    return keep_outputs(data, output, filename)
