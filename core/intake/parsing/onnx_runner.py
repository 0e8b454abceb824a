"""ONNX graphs run by onnxruntime: :class:`OnnxRunner`, and :class:`OnnxModel`, the model
object an ``.onnx`` file becomes (:func:`load_onnx`).

:class:`OnnxRunner` wraps an ``onnxruntime.InferenceSession`` on the CPU provider with
one intra-op and one inter-op thread: a graph read as a tree ensemble (one tree operator and
the wrappers around it) as it is, no graph optimisation (there is nothing to fold in it and its
passes cost a fifth of the session), any other with basic graph optimisations (constant folding
and redundant-node removal: they do not change the graph's arithmetic). It feeds a
2-D array (or a DataFrame) of the table's columns to the graph's inputs: one tensor per
column when the graph takes one input per column (numbers as the input's float32,
float64, int64... type, strings as strings, a missing string as :data:`UNSEEN`), or the
whole array as the graph's one ``[rows, n]`` input. It returns the labels and the
probabilities or scores as numpy arrays (ZipMap's list of dicts read in its class
order). A run can be given a time limit: past it onnxruntime is told to stop
(``RunOptions.terminate``) and :class:`ModelError` says so.

A graph that is not a tree ensemble (whose outputs :mod:`core.intake.parsing.onnx` checks
against its trees) is run only on what it says it predicts, and every run checks it:
beside a label output, the numbers are the label's class probabilities, so a row of them
that is NaN, leaves [0, 1] or does not sum to one within :data:`PROBA_TOL` is refused (a
classifier exported without probabilities, an SVC or a LinearSVC, gives decision scores
there: the message says how to run it on its labels alone); without a label output the
numbers are a regressor's value, one per row.

:class:`OnnxModel` keeps the file's bytes, what :func:`core.intake.parsing.onnx_graph.inspect_onnx`
read from them and a runner made when first needed (it pickles without its session).
``predict`` gives the graph's own labels (a classifier) or values (a regressor), which is
what every counterfactual is checked against.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import Any

import numpy as np
import pandas as pd

from core.errors import ModelError, UnsupportedModelError, need
from core.intake.parsing.onnx_graph import LIMITS, OnnxGraphInfo, OnnxLimits, inspect_onnx, numpy_dtype, read_onnx
from core.typing import ModelLike, Rows

__all__ = ["OnnxRunner", "OnnxModel", "load_onnx", "FIRST_RUN_SECONDS", "UNSEEN", "PROBA_TOL"]

FIRST_RUN_SECONDS = 10.0      # the time budget of the first run on a few rows
UNSEEN = "__atlas_unseen__"   # what a missing string is fed as: a value no encoder knows
PROBA_TOL = 1e-4              # a row of probabilities sums to one within this (float32 arithmetic)


class _Deadlines:
    """One thread per process that tells onnxruntime to stop each run past its deadline
    (``RunOptions.terminate``): a thread per run cost about a fifth of a millisecond, a
    tenth of reading a 500-tree graph. A forked child starts its own."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, Any]] = {}
        self._count = 0
        self._thread: threading.Thread | None = None

    def add(self, seconds: float, opts: Any) -> int:
        """Watch ``opts`` for ``seconds``; the key that :meth:`remove` takes."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="onnx-deadlines", daemon=True)
                self._thread.start()
            self._count += 1
            due = time.monotonic() + seconds
            if all(due < t for t, _ in self._due.values()):
                self._cond.notify()                   # the watcher sleeps until a later deadline
            self._due[self._count] = (due, opts)
            return self._count

    def remove(self, key: int) -> None:
        with self._cond:
            self._due.pop(key, None)

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for key, (due, opts) in list(self._due.items()):
                    if due <= now:
                        opts.terminate = True
                        del self._due[key]
                self._cond.wait(min((t for t, _ in self._due.values()), default=now + 3600.0) - now)


_DEADLINES = _Deadlines()


class OnnxRunner:
    """An onnxruntime session over an ONNX graph that feeds it table columns (see the module docstring)."""

    def __init__(self, data: bytes, info: OnnxGraphInfo, filename: str = "model.onnx"):
        ort = need("onnxruntime", "running an ONNX model")  # optional and heavy: only when one runs

        self.info = info
        self.filename = filename
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if info.is_tree_ensemble
                                         else ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
        opts.log_severity_level = 3
        opts.enable_mem_pattern = False
        try:
            self.session = ort.InferenceSession(bytes(data), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime's Fail / InvalidGraph / NotImplemented
            raise ModelError(f"{filename!r} could not be loaded by onnxruntime: {_first_line(exc)}") from None
        self._ort = ort
        self.output_names = [o.name for o in self.session.get_outputs()]

    @property
    def columns(self) -> list[str] | None:
        """The input names when the graph takes one input per column, else None (one ``[rows, n]`` tensor)."""
        if len(self.info.inputs) == 1 and len(self.info.inputs[0][2]) == 2:
            return None
        return [name for name, _, _ in self.info.inputs]

    @property
    def n_columns(self) -> int:
        cols = self.columns
        return len(cols) if cols is not None else int(self.info.inputs[0][2][1] or 0)

    def feeds(self, X: Rows) -> dict[str, np.ndarray]:
        """The graph's inputs for rows ``X``: an array (n, n_columns) in the model's column order, or a
        DataFrame with the model's input names as columns."""
        cols = self.columns
        if cols is None:
            name, elem, _ = self.info.inputs[0]
            arr = X.to_numpy() if isinstance(X, pd.DataFrame) else np.asarray(X)
            arr = np.atleast_2d(arr)
            if arr.shape[1] != self.n_columns:
                raise ValueError(f"The ONNX model takes {self.n_columns} columns; {arr.shape[1]} were given.")
            return {name: _column(arr, elem)}
        out = {}
        if isinstance(X, pd.DataFrame):
            missing = [c for c in cols if c not in X.columns]
            if missing:
                raise ValueError(f"The ONNX model takes the columns {missing[:6]}, which are not given.")
            values = [X[c].to_numpy() for c in cols]
        else:
            arr = np.asarray(X, dtype=object if np.asarray(X).dtype == object else None)
            arr = arr.reshape(1, -1) if arr.ndim == 1 else arr
            if arr.shape[1] != len(cols):
                raise ValueError(f"The ONNX model takes {len(cols)} columns; {arr.shape[1]} were given.")
            values = [arr[:, j] for j in range(len(cols))]
        for (name, elem, dims), v in zip(self.info.inputs, values):
            col = _column(np.asarray(v).reshape(-1, 1), elem)
            out[name] = col.reshape(-1) if len(dims) == 1 else col
        return out

    def run(self, X: Rows, time_limit: float | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(labels, scores) on rows ``X``: labels of shape (n,) or None, scores of shape (n, k) or None."""
        feeds = self.feeds(X)
        opts = self._ort.RunOptions()
        watched = None if time_limit is None else _DEADLINES.add(float(time_limit), opts)
        t0 = time.perf_counter()
        try:
            got = self.session.run(None, feeds, opts)
        except Exception as exc:  # noqa: BLE001 - onnxruntime's errors, a terminated run included
            if time_limit is not None and time.perf_counter() - t0 >= time_limit:
                raise ModelError(f"{self.filename!r} took longer than {time_limit:g} s to predict "
                                 f"{len(next(iter(feeds.values())))} rows and was stopped: the graph is too slow "
                                 "to analyse.") from None
            raise ModelError(f"onnxruntime failed on {self.filename!r}: {_first_line(exc)}") from None
        finally:
            if watched is not None:
                _DEADLINES.remove(watched)
        values = dict(zip(self.output_names, got))
        n = len(next(iter(feeds.values())))
        labels = None if self.info.label is None else np.asarray(values[self.info.label]).reshape(n)
        scores = None if self.info.scores is None else _scores(values[self.info.scores], n)
        if scores is not None and not self.info.is_tree_ensemble:
            self._check_scores(labels, scores)
        return labels, scores

    def _check_scores(self, labels: np.ndarray | None, scores: np.ndarray) -> None:
        """Numbers beside a label are its class probabilities; without a label, one value per row."""
        name, label = self.info.scores, self.info.label
        if label is None:
            if scores.shape[1] != 1:
                raise UnsupportedModelError(
                    f"The output {name!r} of {self.filename!r} gives {scores.shape[1]} numbers per row and the graph "
                    "has no label output: they are neither a regressor's value (one number per row) nor a "
                    "classifier's probabilities (no label output says which class wins). Export the model with a "
                    "label output beside its probabilities, or with one value per row.")
            return
        finite = np.isfinite(scores).all(axis=1)
        sums = scores.sum(axis=1)
        bad = ~finite | (np.abs(sums - 1.0) > PROBA_TOL) | (scores.min(axis=1, initial=0.0) < -PROBA_TOL) \
            | (scores.max(axis=1, initial=0.0) > 1.0 + PROBA_TOL)
        if not bad.any():
            return
        i = int(np.flatnonzero(bad)[0])
        row = ", ".join(f"{v:.4g}" for v in scores[i, :6]) + (" …" if scores.shape[1] > 6 else "")
        what = (f"NaN or infinite values ({int((~finite).sum()):,} of {len(scores):,} rows have some)"
                if not finite[i] else f"values summing to {sums[i]:.6g}")
        raise UnsupportedModelError(
            f"The output {name!r} of {self.filename!r} is read as the class probabilities of its label output "
            f"{label!r}, but they are not probabilities: row {i} holds [{row}], {what} (probabilities lie in "
            f"[0, 1] and sum to 1 within {PROBA_TOL:g}). A classifier exported without probabilities (an SVC "
            "without probability=True, a LinearSVC) gives decision scores there. Run the model on its labels "
            f"alone, core.load_model(path, output={label!r}), or export it with probabilities.")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _column(arr: np.ndarray, elem: str) -> np.ndarray:
    """Values cast to the input's element type; strings as str, missing ones as :data:`UNSEEN`."""
    if elem == "string":
        flat = arr.reshape(-1)
        out = np.array([UNSEEN if v is None or (isinstance(v, float) and v != v) else str(v) for v in flat],
                       dtype=object)
        return out.reshape(arr.shape)
    dtype = numpy_dtype(elem)
    if np.dtype(dtype).kind in "iub":
        num = np.asarray(arr, dtype=np.float64)
        if np.isnan(num).any():
            raise ValueError("An integer input of the ONNX model was given a missing value.")
        return num.astype(dtype)
    return np.ascontiguousarray(np.asarray(arr, dtype=np.float64).astype(dtype))


def _scores(value: Any, n: int) -> np.ndarray:
    """Scores as an (n, k) float64 array; ZipMap's list of {label: p} in its key order."""
    if isinstance(value, list):
        if not value:
            return np.zeros((0, 0))
        keys = list(value[0].keys())
        return np.array([[float(d[k]) for k in keys] for d in value], dtype=np.float64).reshape(n, len(keys))
    arr = np.asarray(value, dtype=np.float64)
    return arr.reshape(n, -1)


class OnnxModel:
    """An ``.onnx`` file: its bytes, what the graph is, and a runner (see the module docstring)."""

    def __init__(self, data: bytes, filename: str, info: OnnxGraphInfo, proto: ModelLike = None):
        self.data = bytes(data)
        self.filename = filename
        self.info = info
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        self._proto = proto
        self._runner: OnnxRunner | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:        # the session and the parsed graph are made again on use
        return {"data": self.data, "filename": self.filename, "info": self.info, "sha256": self.sha256}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._proto = None
        self._runner = None
        self._lock = threading.Lock()

    @property
    def proto(self) -> Any:
        """The parsed ``onnx.ModelProto`` (checked again when parsed anew)."""
        if self._proto is None:
            self._proto = read_onnx(self.data, self.filename)
        return self._proto

    @property
    def runner(self) -> OnnxRunner:
        with self._lock:
            if self._runner is None:
                self._runner = OnnxRunner(self.data, self.info, self.filename)
            return self._runner

    @property
    def is_classifier(self) -> bool:
        return self.info.label is not None

    def run(self, X: Rows, time_limit: float | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(labels, scores) of the graph on rows ``X`` (see :meth:`OnnxRunner.run`)."""
        return self.runner.run(X, time_limit)

    def predict(self, X: Rows) -> np.ndarray:
        """The graph's labels (a classifier) or values (a regressor: its first score column)."""
        labels, scores = self.run(X)
        if labels is not None:
            return labels
        if scores is None:
            raise ModelError(f"{self.filename!r} gives neither labels nor values.")
        return scores[:, 0]

    def first_run(self, time_limit: float = FIRST_RUN_SECONDS, rows: int = 4) -> None:
        """Run the graph once on a few rows (zeros, empty strings), within ``time_limit`` seconds."""
        runner = self.runner
        X = np.empty((rows, runner.n_columns), dtype=object)
        for j, (_, elem, _) in enumerate(self.info.inputs if runner.columns is not None
                                         else [self.info.inputs[0]] * runner.n_columns):
            X[:, j] = "" if elem == "string" else 0.0
        runner.run(X if runner.columns is not None else X.astype(np.float64), time_limit=time_limit)

    def __repr__(self) -> str:
        return f"OnnxModel({self.filename!r}, {self.info.describe()})"


def load_onnx(data: bytes, filename: str = "model.onnx", *, limits: OnnxLimits = LIMITS,
              time_limit: float = FIRST_RUN_SECONDS, output: str | None = None) -> OnnxModel:
    """An ``.onnx`` file as an :class:`OnnxModel`: read and checked without running it
    (:func:`core.intake.parsing.onnx_graph.read_onnx`), then loaded by onnxruntime and run once
    on a few rows within ``time_limit`` seconds. ``output`` names the output the model is run
    on when several could be its prediction (see
    :func:`core.intake.parsing.onnx_graph.inspect_onnx`); without it, none is guessed."""
    proto = read_onnx(data, filename, limits)
    info = inspect_onnx(proto, filename, limits, output)
    model = OnnxModel(data, filename, info, proto)
    model.first_run(time_limit)
    return model
