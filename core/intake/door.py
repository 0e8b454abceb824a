"""The library's door for a model file: read in a sandboxed child, run in a worker when it
is not read exactly (:func:`load_model`, ``core.load_model``).

A file from elsewhere may be hostile or damaged, and the native libraries that read
some formats can crash the process that reads them, so the door reads every file in a
sandboxed child first (:func:`core.intake.sandbox.load_vetted`); a model that is not
read exactly (an MLP, a kernel SVM, an ONNX graph) runs in a :class:`ModelWorker`.
Reading in the calling process is the explicit choice ``in_process=True``
(:func:`core.intake.io.load_model`), for files one made oneself.
"""

from __future__ import annotations

from core.errors import AtlasError, ModelError, UnsupportedModelError
from core.intake import io, sandbox
from core.intake.parsing.onnx_graph import keep_outputs
from core.intake.worker import ModelWorker
from core.typing import ModelLike

__all__ = ["load_model"]


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
    try:
        return sandbox.load_vetted(data, name, allow_pickle=allow_pickle).model
    except UnsupportedModelError as exc:           # not read exactly: any other model, run in a worker
        first = exc
    worker = ModelWorker(data, name, allow_pickle=allow_pickle)
    try:
        return worker.model(identity=io.sha256(data))
    except AtlasError as exc:
        worker.stop()
        if str(exc) == str(first):                 # refused for the same reason both ways: said once
            raise
        raise UnsupportedModelError(f"{first} It could not be run as another kind of model either: {exc}") from None


def _with_output(data: bytes, filename: str, output: str) -> bytes:
    """The file with only the outputs the analyst chose (an ONNX graph), so that the sandbox
    and the worker read the choice from the bytes they are given."""
    if io._model_kind(data, filename.lower()) != "onnx":
        raise ModelError(f"output={output!r} names an output of an ONNX graph; {filename!r} is not an .onnx file. "
                         "Leave output out for this file.")
    return keep_outputs(data, output, filename)
