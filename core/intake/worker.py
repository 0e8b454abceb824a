"""Run a model the Atlas does not read exactly in a sandboxed, long-lived child process.

A model that is not a tree ensemble or a linear model (an MLP, a kernel SVM,
k-nearest neighbours, naive Bayes, a stacked or calibrated model, an ONNX graph)
is never loaded in the server process: :class:`ModelWorker` starts one child
(forked from :mod:`core.intake.forkserver`, which has read no file, else started
cold in a new interpreter: never a fork of the threaded server; plain pipes, no
pickle across them), sends it the file's bytes, and
from then on sends it rows and reads back its answers, in batches. The child
runs under

* an address-space limit (``memory_mb``, ``RLIMIT_AS``; default :data:`MEMORY_MB`
  or ``ATLAS_WORKER_MEMORY_MB``): a model that eats memory fails inside it;
  the same limit holds for the child and every process it starts together
  (counted by its watcher, see :mod:`core.intake.forkserver`);
* a wall-time limit per call (``call_timeout``; default :data:`CALL_SECONDS` or
  ``ATLAS_WORKER_SECONDS``) and for loading (``load_timeout``): past it the
  child is killed and the call raises :class:`WorkerError`.

The child leads a process group of its own under a watcher that reaps its
orphans: a ``predict`` that forks, or starts a pool, cannot leave a process
behind. A crash, a hang, a memory blow-up, or an answer no model gives (NaN, an
array of the wrong shape) becomes a :class:`WorkerError` that names it (the
signal, the memory figure, the time limit, the value) and says what to do; the
server and the other sessions carry on. :meth:`ModelWorker.stop` kills the
child and its whole tree at once (Cancel, the end of a session), from any
thread: a call under way (loading, describing, answering) raises
:class:`WorkerCancelled` within :data:`POLL` seconds. The next call starts a new
child from the same bytes. One worker serves one session: nothing is shared
between sessions.

The protocol: every message is a frame, a 4-byte length and a JSON header, then an
8-byte length and a body (the model file's bytes, or an ``.npz`` of arrays read
with ``allow_pickle=False``). Rows go as the codes view (see
:mod:`core.model.blackbox`) with the model's feature description, and the child
turns them into the model's own input with :func:`core.model.native.model_input`,
as the tree-ensemble checks do.

What may be loaded: a ``.skops`` file whose types are all on the allow-list
(the tree formats' list plus the scikit-learn estimators and transformers of
:data:`ANY_MODEL_TYPES`; skops never runs code for them), an ``.onnx`` graph run
by onnxruntime, or a pickle / joblib file only when the user trusts it (never on
a public instance: the caller decides, as for tree models).
"""

from __future__ import annotations

import atexit
import io
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from core import errors
from core.errors import ModelError, UnsupportedModelError, WorkerCancelled, WorkerError
from core.intake import forkserver
from core.intake import io as model_io
from core.intake.parsing.skopscheck import check_skops_zip
from core.model.blackbox import BlackBoxModel, check_answers
from core.model.native import model_input
from core.model.threads import small_batch
from core.typing import ModelLike

__all__ = ["ModelWorker", "ANY_MODEL_TYPES", "MEMORY_MB", "CALL_SECONDS", "LOAD_SECONDS", "describe_model"]

MEMORY_MB = 4096
CALL_SECONDS = 60.0
LOAD_SECONDS = 60.0
STARTUP_SECONDS = 120.0
BATCH_ROWS = 20_000
MAX_FRAME = 1 << 31

ANY_MODEL_TYPES = model_io.ANY_MODEL_TYPES



def _env_num(name: str, default: float) -> float:
    try:
        v = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return v if v > 0 else default


# ------------------------------------------------------------------ frames
def _write_frame(stream: Any, header: dict[str, Any], body: bytes = b"") -> None:
    head = json.dumps(header).encode()
    stream.write(struct.pack("<I", len(head)) + head + struct.pack("<Q", len(body)))
    if body:
        stream.write(body)
    stream.flush()


def _read_exact(stream: Any, n: int) -> bytes:
    chunks, left = [], n
    while left:
        b = stream.read(left)
        if not b:
            raise EOFError("the stream ended")
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def _read_frame(stream: Any) -> tuple[dict[str, Any], bytes]:
    (n,) = struct.unpack("<I", _read_exact(stream, 4))
    if n > MAX_FRAME:
        raise EOFError("a frame header too large")
    header = json.loads(_read_exact(stream, n))
    (m,) = struct.unpack("<Q", _read_exact(stream, 8))
    if m > MAX_FRAME:
        raise EOFError("a frame body too large")
    return header, _read_exact(stream, m) if m else b""


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)    # plain arrays only: the server loads them with allow_pickle=False
    return buf.getvalue()


def _unnpz(body: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(body), allow_pickle=False) as z:
        return dict(z)


# ------------------------------------------------------------------ the child
def _load_any(data: bytes, filename: str, allow_pickle: bool) -> Any:
    """The model object from its file, in the child (never in the server)."""
    name = filename.lower()
    if name.endswith(".skops"):
        import skops.io as sio

        check_skops_zip(data, filename)
        try:
            untrusted = sio.get_untrusted_types(data=data)
        except Exception as exc:  # noqa: BLE001 - skops on a damaged file
            raise ModelError(f"{filename!r} is not a readable .skops file ({exc}).") from None
        refused = sorted(set(untrusted) - model_io.SKOPS_TRUSTED - ANY_MODEL_TYPES)
        if refused:
            raise UnsupportedModelError(
                f"{filename!r} contains types outside the allow-list: {refused[:6]}. Save the model with "
                "scikit-learn types only, or export it to ONNX.")
        try:
            return sio.loads(data, trusted=list(untrusted))
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{filename!r} could not be loaded as .skops ({type(exc).__name__}: {exc}).") from None
    if name.endswith(".onnx"):
        from core.intake.parsing.onnx_runner import load_onnx

        return load_onnx(data, filename)
    return model_io.load_model(data, filename, allow_pickle=allow_pickle)


def _onnx_classes(model: ModelLike) -> list[Any]:
    """A classifier graph's classes, in the order of its scores: the ``classlabels_*`` of its
    ZipMap or classifier operator, or the constant its label is picked from."""
    proto = model.proto
    classes = _labelled_classes(proto)
    if classes is None:
        classes = _extracted_classes(proto)
    if classes is not None:
        return classes
    raise UnsupportedModelError(f"{model.filename!r} is a classifier graph that does not say its classes (no "
                                "ZipMap or class labels in it). Export it with its class labels (skl2onnx keeps "
                                "them with the default options).")


def _labelled_classes(proto: Any) -> list[Any] | None:
    """The first non-empty ``classlabels_*`` attribute of the graph's operators, or None."""
    for node in proto.graph.node:
        for att in node.attribute:
            if att.name in ("classlabels_int64s", "classlabels_strings", "classlabels_ints"):
                values = list(att.ints) if att.ints else [v.decode() for v in att.strings]
                if values:
                    return values
    return None


def _extracted_classes(proto: Any) -> list[Any] | None:
    """The constant an ArrayFeatureExtractor picks the label from, as plain values, or None."""
    from onnx import numpy_helper

    init = {t.name: t for t in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type == "ArrayFeatureExtractor" and node.input and node.input[0] in init:
            arr = numpy_helper.to_array(init[node.input[0]]).ravel()
            return [v.decode() if isinstance(v, bytes) else v.item() if isinstance(v, np.generic) else v
                    for v in arr.tolist()]
    return None


def _describe_onnx(model: ModelLike) -> dict[str, Any]:
    """An ONNX graph described as :func:`describe_model` describes a scikit-learn model; string
    inputs are categorical features whose categories the data will give."""
    info, runner = model.info, model.runner
    cols = runner.columns
    if cols is None:
        names, named, strings = [f"x{j}" for j in range(runner.n_columns)], False, []
        if info.inputs[0][1] == "string":
            raise UnsupportedModelError(f"{model.filename!r} takes one tensor of strings; give it numbers, or "
                                        "export it with one input per column.")
    else:
        names, named = list(cols), True
        strings = [n for n, elem, _ in info.inputs if elem == "string"]
    task = "classification" if info.label is not None else "regression"
    classes = _onnx_classes(model) if task == "classification" else None
    return {"feature_names": names, "named": named, "task": task, "classes": classes,
            "categories": [None] * len(names), "from_data": strings,
            "has_proba": task == "classification" and info.scores is not None, "source": "onnx",
            "input": "frame-object" if named else "array"}


def _encoder_categories(model: ModelLike) -> dict[str, list[Any]]:
    """Input columns encoded as categories by a Pipeline's ColumnTransformer (one-hot or
    ordinal encoders, alone or at the end of a small pipeline), with their categories."""
    out: dict[str, list[Any]] = {}
    steps = [s for _, s in getattr(model, "steps", [])] or [model]
    for step in steps:
        for _, est, cols in getattr(step, "transformers_", []):
            enc = _last_encoder(est)
            if not hasattr(enc, "categories_") or isinstance(cols, slice) or isinstance(cols, str):
                continue
            for col, cats in zip(_encoded_names(step, cols), enc.categories_):
                out[str(col)] = _plain_categories(cats)
    return out


def _plain_categories(cats: Any) -> list[Any]:
    """An encoder's categories as plain values, its missing-value category (None, NaN) left out."""
    return [c.item() if isinstance(c, np.generic) else c for c in cats
            if not (isinstance(c, float) and np.isnan(c)) and c is not None]


def _last_encoder(est: Any) -> Any:
    """In a (nested) pipeline, its step holding categories, else its last step; ``est`` itself otherwise."""
    enc = est
    while hasattr(enc, "steps"):
        enc = next((s for _, s in enc.steps if hasattr(s, "categories_")), enc.steps[-1][1])
    return enc


def _encoded_names(step: Any, cols: Any) -> list[Any]:
    """A transformer's columns by name (given by position: named from the names the step
    was fitted with, none when it has none)."""
    names = list(cols)
    if names and not isinstance(names[0], str):
        fitted = list(getattr(step, "feature_names_in_", []))
        names = [fitted[int(c)] for c in names] if fitted else []
    return names


def describe_model(model: ModelLike) -> dict[str, Any]:
    """What the server needs to know of a model (JSON-able): names, task, classes,
    categories, whether it gives probabilities and takes missing values."""
    if type(model).__name__ == "OnnxModel":
        return _describe_onnx(model)
    if not hasattr(model, "predict"):
        raise UnsupportedModelError(f"A {type(model).__name__} has no predict method; it is not a model.")
    names, named = _input_names(model)
    task, classes = _task_of(model)
    cats = _encoder_categories(model) if named else {}
    return {"feature_names": names, "named": named, "task": task, "classes": classes,
            "categories": [cats.get(c) for c in names], "has_proba": task == "classification" and
            hasattr(model, "predict_proba"), "source": f"{type(model).__module__.split('.')[0]}."
            f"{type(model).__name__}", "input": "frame-object" if named else "array"}


def _task_of(model: ModelLike) -> tuple[str, list[Any] | None]:
    """("classification", its classes as plain values) or ("regression", None)."""
    from sklearn.base import is_classifier, is_regressor

    if is_classifier(model) or (hasattr(model, "classes_") and not is_regressor(model)):
        return "classification", [c.item() if isinstance(c, np.generic) else c for c in model.classes_]
    return "regression", None


def _input_names(model: ModelLike) -> tuple[list[str], bool]:
    """(the model's input columns, whether they are its own names): the names it was
    fitted with, else ``x0, x1, ...`` for as many features as it says it takes."""
    given = getattr(model, "feature_names_in_", None)
    if given is not None:
        return [str(c) for c in given], True
    n = getattr(model, "n_features_in_", None)
    if n is None:
        raise UnsupportedModelError(f"This {type(model).__name__} does not say how many features it takes "
                                    "(n_features_in_); refit it with scikit-learn 1.0 or later.")
    return [f"x{j}" for j in range(int(n))], False


def _native_view(desc: dict[str, Any]) -> SimpleNamespace:
    cats = tuple(None if c is None else tuple(c) for c in desc["categories"])
    return SimpleNamespace(feature_names=tuple(desc["feature_names"]), categories=cats,
                           meta={"input": desc["input"]},
                           categorical_features=[j for j, c in enumerate(cats) if c is not None])


def _answer(model: ModelLike, desc: dict[str, Any], X: np.ndarray) -> dict[str, np.ndarray]:
    """The model's answers on codes-view rows, checked (:func:`core.model.blackbox.check_answers`):
    NaN, an infinite value or an array of the wrong shape is a :class:`WorkerError` naming it."""
    Xn = model_input(_native_view(desc), X)
    n_classes = len(desc["classes"]) if desc["task"] == "classification" else 0
    if type(model).__name__ == "OnnxModel":
        return _onnx_answer(model, desc, Xn, len(X), n_classes)
    out: dict[str, np.ndarray] = {"label": np.asarray(model.predict(Xn))}
    if desc["task"] == "classification":
        out["proba"] = _class_scores(model, desc, Xn)
    out = check_answers(out, len(X), n_classes, WorkerError)
    if out["label"].dtype.kind == "O":
        out["label"] = out["label"].astype(str)
    return out


def _class_scores(model: ModelLike, desc: dict[str, Any], Xn: Any) -> np.ndarray:
    """A classifier's probabilities, or its decision function as scores per class (two
    columns, ``-s`` and ``s``, for a binary one)."""
    if desc["has_proba"]:
        return np.asarray(model.predict_proba(Xn), dtype=np.float64)
    scores = np.asarray(model.decision_function(Xn), dtype=np.float64)
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    return np.column_stack([-scores, scores]) if scores.ndim == 1 else scores


def _onnx_answer(model: ModelLike, desc: dict[str, Any], Xn: Any, n: int, n_classes: int) -> dict[str, np.ndarray]:
    """An ONNX graph's answers, checked: a regressor's value, a classifier's label and scores
    (one-hot on its label when it gives none)."""
    labels, scores = model.run(Xn)
    if desc["task"] == "regression":
        return check_answers({"label": np.asarray(scores, dtype=np.float64)[:, 0]}, n, 0, WorkerError)
    out_onnx = {"label": np.asarray(labels)}
    if scores is not None:
        out_onnx["proba"] = np.asarray(scores, dtype=np.float64)
    else:                                   # labels only: one-hot scores, the label's class wins
        classes = list(desc["classes"])
        out_onnx["proba"] = np.array([[float(v == c) for c in classes] for v in labels.tolist()])
    if out_onnx["label"].dtype.kind == "O":
        out_onnx["label"] = out_onnx["label"].astype(str)
    return check_answers(out_onnx, n, n_classes, WorkerError)


def _probe(desc: dict[str, Any]) -> np.ndarray:
    """Two rows of the codes view: zeros and first categories, then missing values."""
    X = np.zeros((2, len(desc["feature_names"])))
    for j, c in enumerate(desc["categories"]):
        if c is not None:
            X[1, j] = len(c)
        else:
            X[1, j] = np.nan
    return X


def _limit_memory(memory_mb: int) -> None:
    try:
        import resource

        limit = int(memory_mb) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not POSIX: time limits only
        pass


def _child(argv: list[str] | None = None) -> int:
    """``python -m core.intake.worker`` (or forked by :mod:`core.intake.forkserver`): read the job
    and the model, then answer rows until EOF."""
    import faulthandler

    faulthandler.disable()
    inp, out = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                      # whatever a library prints goes to stderr, never into a reply
    out.write(b"ready\n")
    out.flush()
    try:
        job, data = _read_frame(inp)
    except (EOFError, ValueError):
        return 0
    _limit_memory(int(job["memory_mb"]))
    hook = job.get("hook")

    def fail(exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, errors.AtlasError):
            return {"status": "error", "kind": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, MemoryError):
            return {"status": "error", "kind": "ModelError", "message": "memory"}
        return {"status": "error", "kind": "ModelError",
                "message": f"the model failed ({type(exc).__name__}: {str(exc)[:300]})"}

    try:
        model = _load_any(data, job["filename"], bool(job["allow_pickle"]))
        del data
        desc = describe_model(model)
        try:                                                # does it take missing values?
            _answer(model, desc, _probe(desc)[1:])
            desc["takes_missing"] = True
        except Exception:  # noqa: BLE001 - any refusal of NaN by the model
            desc["takes_missing"] = False
        _answer(model, desc, _probe(desc)[:1])              # it answers at all
        _write_frame(out, {"status": "ok", "describe": desc})
    except BaseException as exc:  # noqa: BLE001 - reported to the server, which carries on
        _write_frame(out, fail(exc))
        out.close()
        os._exit(0)
    while True:
        try:
            header, body = _read_frame(inp)
        except (EOFError, ValueError):
            os._exit(0)
        if header.get("op") != "answer":
            os._exit(0)
        try:
            if hook == "segfault":
                os.kill(os.getpid(), signal.SIGSEGV)
            if hook == "hang":
                while True:
                    time.sleep(1)
            if hook == "memory":
                bytearray(2 * int(job["memory_mb"]) * 2**20)
            X = _unnpz(body)["X"]
            here = desc if header.get("categories") is None else {**desc, "categories": header["categories"]}
            with small_batch(len(X)):               # a few rows: in one thread (core.model.threads)
                answers = _answer(model, here, X)
            _write_frame(out, {"status": "ok"}, _npz(**answers))
        except BaseException as exc:  # noqa: BLE001
            _write_frame(out, fail(exc))


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


# ------------------------------------------------------------------ the parent
_live: "weakref.WeakSet[ModelWorker]" = weakref.WeakSet()
#: seconds between two looks, while a call waits on its child, at whether the worker was stopped
POLL = 0.1
_MEMORY_ADVICE = ("Try fewer rows at once, or a smaller model; the server's operator sets the limit with "
                  "ATLAS_WORKER_MEMORY_MB.")


def _kill(proc: forkserver.WatchedChild | None) -> None:
    """Kill a child's process group, and wait until its watcher has killed the rest of its tree."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass


@atexit.register
def _stop_all() -> None:
    for w in list(_live):
        w.stop()


def _signal_name(code: int) -> str:
    """A child's negative exit code in words: ``signal 11 (SIGSEGV)``."""
    try:
        return f"signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"signal {-code}"


class ModelWorker:
    """One model in one sandboxed child process (see the module docstring).

    Parameters
    ----------
    data, filename : the model file's bytes and name (its extension says the format).
    allow_pickle : open a pickle / joblib file (only when the user trusts it).
    memory_mb, call_timeout, load_timeout : the child's limits (defaults from the
        environment, see the module docstring).
    """

    def __init__(self, data: bytes, filename: str, *, allow_pickle: bool = False, memory_mb: int | None = None,
                 call_timeout: float | None = None, load_timeout: float | None = None, _hook: str | None = None):
        if not isinstance(data, (bytes, bytearray, memoryview)) or not data:
            raise ModelError(f"{filename!r} is empty. Upload a saved model file.")
        self._data = bytes(data)
        self.filename = str(filename)
        self.allow_pickle = bool(allow_pickle)
        self.memory_mb = int(memory_mb or _env_num("ATLAS_WORKER_MEMORY_MB", MEMORY_MB))
        self.call_timeout = float(call_timeout or _env_num("ATLAS_WORKER_SECONDS", CALL_SECONDS))
        self.load_timeout = float(load_timeout or _env_num("ATLAS_WORKER_LOAD_SECONDS", LOAD_SECONDS))
        self._hook = _hook
        self._procs: list[forkserver.WatchedChild | None] = [None]   # a box the finaliser can see
        self._lock = threading.RLock()          # one call at a time talks to the child
        self._state = threading.Lock()          # the child and the stop count, changed by stop() from any thread
        self._stops = 0                         # stop() calls so far: a call started before one is cancelled
        self.description: dict[str, Any] | None = None
        self.calls = 0
        self.rows = 0
        self.seconds = 0.0
        self.starts = 0
        _live.add(self)
        weakref.finalize(self, lambda box: _kill(box[0]), self._procs)

    # -- life cycle
    @property
    def _proc(self) -> forkserver.WatchedChild | None:
        return self._procs[0]

    @_proc.setter
    def _proc(self, proc: forkserver.WatchedChild | None) -> None:
        self._procs[0] = proc

    @property
    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def stop(self) -> None:
        """Kill the child and everything it started, now (Cancel, the end of a session). Safe from
        any thread: a call under way (loading, describing, answering) raises
        :class:`~core.errors.WorkerCancelled` at once. A later call starts a new child."""
        with self._state:
            self._stops += 1
            proc, self._proc = self._proc, None
        _kill(proc)

    close = stop

    def _check(self, stops: int, what: str) -> None:
        """Raise :class:`WorkerCancelled` if the worker was stopped since the call began."""
        if self._stops != stops:
            raise WorkerCancelled(f"The model was stopped while {what} (Cancel, or the end of the session); "
                                  "nothing was kept. Run it again to start the model afresh.")

    def _end(self, proc: forkserver.WatchedChild) -> None:
        """Kill ``proc`` (a time limit, a failure); the worker forgets it if it is still its child."""
        with self._state:
            if self._proc is proc:
                self._proc = None
        _kill(proc)

    def _death(self, proc: forkserver.WatchedChild, code: int | None, what: str) -> str:
        """How the child ended, in words, and what to do."""
        if proc.memory_mb is not None:
            return (f"The model ran out of memory while {what}: its processes used {proc.memory_mb:,} MB together, "
                    f"past the limit of {self.memory_mb:,} MB, and were stopped. {_MEMORY_ADVICE}")
        if code == -signal.SIGKILL:
            return (f"The model was killed with {_signal_name(code)} while {what}, most likely by the system "
                    f"for lack of memory (its own limit is {self.memory_mb:,} MB). {_MEMORY_ADVICE}")
        if code is not None and code < 0:
            return (f"The model crashed with {_signal_name(code)} while {what}. Nothing else was affected. The "
                    "fault is in the model's code or a library it calls: check that it runs in its own library, "
                    "or save it again (as .skops or .onnx where it can be).")
        if code is None:
            return (f"The model's process stopped answering while {what} and was stopped. The server may be "
                    "overloaded; try again in a moment.")
        return (f"The model's process ended (exit code {code}) while {what}, without an answer: its code ends the "
                f"process, or it ran short of memory (limit {self.memory_mb:,} MB). Check that it runs in its own "
                "library.")

    def _fail(self, proc: forkserver.WatchedChild, stops: int, what: str) -> WorkerError:
        """The error for a child that went silent (its pipe closed): cancelled, or how it ended."""
        self._check(stops, what)
        code = None
        try:                                   # a child that just died: its exit status, not a race
            code = proc.wait(2)
        except subprocess.TimeoutExpired:
            pass
        self._end(proc)
        self._check(stops, what)
        return WorkerError(self._death(proc, code, what))

    def _spawn(self, stops: int) -> forkserver.WatchedChild:
        """A new child, started in a thread of its own: a stop while a fork server starts (a few
        seconds) is honoured at once, and a child that arrives after it is killed."""
        got: list[Any] = []
        guard = threading.Lock()
        done = threading.Event()

        def run() -> None:
            try:
                child: Any = forkserver.start_child("core.intake.worker", [], memory_mb=self.memory_mb)
            except (OSError, ValueError) as exc:
                child = exc
            with guard:
                got.append(child)
                done.set()
                late = len(got) > 1                  # the caller gave up (got holds its mark first)
            if late and isinstance(child, forkserver.WatchedChild):
                _kill(child)

        threading.Thread(target=run, name="atlas-model-worker-start", daemon=True).start()
        while not done.wait(POLL):
            if self._stops != stops:
                with guard:
                    if not done.is_set():
                        got.append(None)             # the mark: the thread kills what it gets
                        self._check(stops, "starting")
                break
        child = got[0]                               # (a child that came with a stop: _start kills it)
        if not isinstance(child, forkserver.WatchedChild):
            raise WorkerError(f"No process could be started for the model ({child}). The server may be short of "
                              "memory; try again in a moment.")
        return child

    def _start(self, stops: int) -> forkserver.WatchedChild:
        """Start a child, send it the file, read its description (the model loaded and answering)."""
        proc = self._spawn(stops)
        with self._state:
            mine = self._stops == stops
            if mine:
                self._proc = proc
        if not mine:
            _kill(proc)
            self._check(stops, "starting")
        self.starts += 1
        if not self._wait(proc, stops, STARTUP_SECONDS, "starting") or proc.stdout is None \
                or os.read(proc.stdout.fileno(), 6) != b"ready\n":
            raise self._fail(proc, stops, "starting")
        job = {"filename": self.filename, "allow_pickle": self.allow_pickle, "memory_mb": self.memory_mb,
               "hook": self._hook}
        what = "loading and answering a first row"
        try:
            _write_frame(proc.stdin, job, self._data)
        except (OSError, ValueError):
            raise self._fail(proc, stops, what) from None
        if not self._wait(proc, stops, self.load_timeout, what):
            self._end(proc)
            raise WorkerError(f"{self.filename!r} took longer than the time limit of {self.load_timeout:.0f} s to "
                              "load and answer a first row, and was stopped. The model may be too large or too "
                              "slow for this server; the operator sets the limit with ATLAS_WORKER_LOAD_SECONDS.")
        header = self._reply(proc, stops, what)[0]
        desc = header["describe"]
        if self.description is not None and desc != self.description:
            self._end(proc)
            raise ModelError(f"{self.filename!r} was read differently on a restart; it cannot be trusted.")
        self.description = desc
        return proc

    def _wait(self, proc: forkserver.WatchedChild, stops: int, seconds: float, what: str) -> bool:
        """True once the child has something to say (an answer, or its end), False past
        ``seconds``; :class:`WorkerCancelled` as soon as the worker is stopped."""
        assert proc.stdout is not None, "a child has its stdout"
        deadline = time.monotonic() + seconds
        while True:
            self._check(stops, what)
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if select.select([proc.stdout], [], [], min(left, POLL))[0]:
                self._check(stops, what)
                return True

    def _reply(self, proc: forkserver.WatchedChild, stops: int, what: str) -> tuple[dict[str, Any], bytes]:
        try:
            header, body = _read_frame(proc.stdout)
        except (EOFError, ValueError, OSError, struct.error):
            raise self._fail(proc, stops, what) from None
        if header.get("status") == "error":
            kind, text = header.get("kind"), str(header.get("message"))
            if text == "memory":
                text = (f"The model ran out of memory while {what}: it needs more than the limit of "
                        f"{self.memory_mb:,} MB. {_MEMORY_ADVICE}")
                kind = "WorkerError"
                self._end(proc)                        # a child that ran out of memory is not trusted again
            cls = getattr(errors, str(kind), ModelError)
            if not (isinstance(cls, type) and issubclass(cls, errors.AtlasError)):
                cls = ModelError
            if self.description is None:               # a load error: nothing to keep
                self._end(proc)
            raise cls(text)
        return header, body

    def describe(self) -> dict[str, Any]:
        """Load the model (once) and return its description (see :func:`describe_model`)."""
        stops = self._stops
        with self._lock:
            if not self.alive:
                self._start(stops)
            assert self.description is not None, "a started child has described its model"
            return self.description

    # -- answers
    def answers(self, X: np.ndarray, categories: Sequence[Iterable[object] | None] | None = None) -> dict[str, np.ndarray]:
        """The model's answers on codes-view rows ``X`` (see :mod:`core.model.blackbox`), in
        batches; ``categories`` (one entry per feature) when the caller's differ from the
        model's own (a graph's string inputs, whose categories the data gives)."""
        stops = self._stops
        X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
        cats = None if categories is None else [None if c is None else [_plain(v) for v in c] for c in categories]
        if cats is not None and self.description is not None and cats == self.description["categories"]:
            cats = None
        parts: list[dict[str, np.ndarray]] = []
        with self._lock:
            for lo in range(0, max(len(X), 1), BATCH_ROWS):
                parts.append(self._call(X[lo:lo + BATCH_ROWS], cats, stops))
        if len(parts) == 1:
            return parts[0]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def _call(self, X: np.ndarray, categories: list[Any] | None, stops: int) -> dict[str, np.ndarray]:
        what = f"answering {len(X):,} rows"
        self._check(stops, what)
        proc = self._proc
        if proc is None or proc.poll() is not None:
            proc = self._start(stops)
        t0 = time.perf_counter()
        try:
            _write_frame(proc.stdin, {"op": "answer", "categories": categories}, _npz(X=X))
        except (OSError, ValueError):
            raise self._fail(proc, stops, what) from None
        if not self._wait(proc, stops, self.call_timeout, what):
            self._end(proc)
            raise WorkerError(f"The model took longer than the time limit of {self.call_timeout:.0f} s to answer "
                              f"{len(X):,} rows and was stopped. Try fewer rows at once, or a faster model; the "
                              "server's operator sets the limit with ATLAS_WORKER_SECONDS.")
        _, body = self._reply(proc, stops, what)
        self.calls += 1
        self.rows += len(X)
        self.seconds += time.perf_counter() - t0
        return _unnpz(body)

    def model(self, identity: str = "") -> BlackBoxModel:
        """The model as a :class:`BlackBoxModel` whose answers come from this worker."""
        d = self.describe()
        return BlackBoxModel(feature_names=tuple(d["feature_names"]), task=d["task"],
                             classes=None if d["classes"] is None else np.asarray(d["classes"]),
                             answers=self.answers, categories=tuple(d["categories"]),
                             has_proba=bool(d["has_proba"]), takes_missing=bool(d.get("takes_missing")),
                             source=d["source"], identity=identity,
                             meta={"input": d["input"], "named": bool(d.get("named", True)),
                                   "categories_from_data": list(d.get("from_data", ()))})


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
