"""Read untrusted model files in a short-lived child process.

A malformed model file can abort or crash the process that reads it inside
XGBoost, LightGBM or numpy (SIGABRT, SIGSEGV), loop forever, or allocate
gigabytes. :func:`core.intake.parsing.validate` refuses what it recognises before a
library sees the bytes; :func:`load_vetted` contains the rest: it reads,
converts and verifies the file (``core.intake.io.load_model`` -> ``core.intake.models.
from_model`` with its check against the library's own predictions) in a fresh
child process (``python -m core.intake.sandbox``: a new interpreter, as
multiprocessing's "spawn" start, never a fork of the threaded server; plain
``subprocess`` rather than ``multiprocessing`` so the child neither re-imports
the server's ``__main__`` nor talks pickle), under

* a time limit (``time_limit``, default :data:`TIME_LIMIT` or
  ``ATLAS_SANDBOX_SECONDS``) on the child's own time, not the wall clock's:
  its CPU seconds (every thread, and the processes it started and reaped), and
  the time it spent neither running nor waiting for a CPU (asleep, blocked: a
  library that hangs without spinning). The time its threads waited in the
  run queue of a busy machine is not its own (:func:`_own_time`), so a valid
  file is never stopped because the server is loaded; past the limit the child
  is killed;
* an address-space limit (``memory_mb``, ``RLIMIT_AS``, default
  :data:`MEMORY_MB` or ``ATLAS_SANDBOX_MEMORY_MB``): an allocation past it
  fails inside the child; no core dump, ``faulthandler`` off.

Only plain data comes back through the pipe: one JSON line (status, the
ensemble's metadata, the file's facts such as a recorded out-of-bag score)
and an ``.npz`` (``allow_pickle=False``) of the ``TreeEnsemble``'s arrays
(``to_arrays``) plus the probe points and the library's own outputs on them.
Nothing unpickled from the upload crosses. A crash (named by its signal), a
hang or a memory blow-up becomes a :class:`ModelError`; the server and its
other sessions carry on. The child leads a process group of its own under a
watcher (:mod:`core.intake.forkserver`): killing it kills whatever it started.

Once the child has read the file without harm, the same bytes are read
in-process (the reading is deterministic, and the structural checks run
again) to keep the library's model object for the final checks of
counterfactuals, and its outputs on the probe points must equal the child's.
A pickle is read in-process only when the user trusted it, and then only
after the child read it too.

Start-up: a cold child imports numpy, ``core`` and the one library the file
needs (about 1-2 s of CPU, mostly scikit-learn pulled in by xgboost/lightgbm).
After a first use the children are forked from a fork server that imported
them once (:mod:`core.intake.forkserver`: it never reads a file itself, so each
child is as fresh as a cold one), and start in milliseconds;
``ATLAS_SANDBOX_WARM=0`` turns this off (the fork server costs about 250 MB of
resident memory). Each child reads one file and exits.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core import errors
from core.errors import ModelError
from core.intake import forkserver
from core.intake import io as model_io
from core.intake.io import _model_kind
from core.intake.models import model_from
from core.intake.parsing import probe_points, verify_linear
from core.model import TreeEnsemble
from core.model.linear import LinearModel
from core.model.native import native_outputs
from core.typing import ModelLike

__all__ = ["VettedModel", "load_vetted", "TIME_LIMIT", "MEMORY_MB", "settings"]

TIME_LIMIT = 60.0      # seconds for reading, converting and verifying one file
MEMORY_MB = 4096       # address space of the child (virtual: libraries, thread stacks and arenas count)


def settings() -> tuple[float, int, bool]:
    """(time limit s, memory MB, fork children from the fork server) from the environment, else the defaults."""
    def num(name: str, default: float) -> float:
        try:
            v = float(os.environ.get(name, "") or default)
        except ValueError:
            return default
        return v if v > 0 else default
    return (num("ATLAS_SANDBOX_SECONDS", TIME_LIMIT), int(num("ATLAS_SANDBOX_MEMORY_MB", MEMORY_MB)),
            forkserver.enabled())


@dataclass(frozen=True)
class VettedModel:
    """A model file read safely: what :func:`core.intake.workspace.build_workspace` takes."""

    ensemble: TreeEnsemble | LinearModel
    model: Any = None                       # the library's object, read in-process after vetting
    info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0                    # time spent in the child
    cpu_seconds: float = 0.0                # the child's own time, as the time limit counts it (_own_time)


# ------------------------------------------------------------------ the child
def _file_info(model: ModelLike) -> dict[str, Any]:
    """Facts the file records about the model (JSON-able), as core.intake.workspace reads them."""
    info: dict[str, Any] = {}
    oob = getattr(model, "oob_score_", None)
    if isinstance(oob, (float, np.floating)) and np.isfinite(oob):
        info["training report"] = {"metric": "out-of-bag score", "value": float(oob)}
    return info


def _run_job(job: dict[str, Any], data: bytes) -> bytes:
    """Read, convert, verify; the reply (one JSON line, then ``.npz`` on success)."""
    def fail(kind: str, text: str) -> bytes:
        return json.dumps({"status": "error", "kind": kind, "message": text}).encode() + b"\n"

    limit = int(job["memory_mb"]) * 2**20
    _limit_memory(limit)
    try:
        _test_hook(job.get("hook"), limit)
        model = model_io.load_model(data, job["filename"], allow_pickle=bool(job["allow_pickle"]))
        read = model_from(model)                # verified against the library's own outputs
        if isinstance(read, LinearModel):       # read again and checked in the server (verify_linear)
            arrays, meta = read.to_arrays()
            header = json.dumps({"status": "ok", "meta": meta, "info": _file_info(model), "probe": False})
            return _reply(header, arrays)
        header, arrays = _ensemble_reply(read, model)
    except errors.AtlasError as exc:
        return fail(type(exc).__name__, str(exc))
    except MemoryError:
        return fail("ModelError", "memory")
    except RecursionError:
        return fail("ModelError", "its structure is nested too deeply to read")
    except Exception as exc:  # noqa: BLE001 - any other failure of a library on this file
        return fail("ModelError", f"the model library failed on it ({type(exc).__name__}: {str(exc)[:300]})")
    return _reply(header, arrays)


def _limit_memory(limit: int) -> None:
    """The child's address space capped at ``limit`` bytes, and no core dump."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not POSIX: time limit only
        pass


def _test_hook(hook: str | None, limit: int) -> None:
    """What the tests make a child do in place of a library's misbehaviour (nothing without a hook)."""
    if hook == "segfault":                 # tests: a library crash
        os.kill(os.getpid(), signal.SIGSEGV)
    if hook == "abort":
        os.abort()
    if hook == "hang":                     # tests: a library that never returns
        while True:
            time.sleep(1)
    if hook == "pinned":                   # tests: read on one CPU, beside a busy loop pinned there too
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if hook == "memory":                   # tests: a file that claims gigabytes
        bytearray(2 * limit)
    if hook == "chatter":                  # tests: a library that prints while it reads (LightGBM warns)
        os.write(1, b"[LightGBM] [Warning] a library's own message on stdout\n")
        print("and a Python print", flush=True)


def _ensemble_reply(ens: TreeEnsemble, model: ModelLike) -> tuple[str, dict[str, np.ndarray]]:
    """A tree ensemble's reply: its header, and its arrays with the probe points and the
    library's own outputs on them (when it gives any)."""
    X = probe_points(ens, 16, seed=1)
    _, theirs, _ = native_outputs(ens, model, X)
    arrays, meta = ens.to_arrays()
    header = json.dumps({"status": "ok", "meta": meta, "info": _file_info(model), "probe": theirs is not None})
    if theirs is not None:
        arrays = {**arrays, "probe_X": X, "probe_out": np.asarray(theirs, dtype=np.float64)}
    return header, arrays


def _reply(header: str, arrays: dict[str, np.ndarray]) -> bytes:
    """The header line, then the arrays as ``.npz`` (plain arrays only: the server loads
    them with allow_pickle=False)."""
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    return header.encode() + b"\n" + buf.getvalue()


def _child(argv: list[str] | None = None) -> int:
    """``python -m core.intake.sandbox [MODULE,MODULE...]``: import those modules, write
    ``ready``, then read one job line (JSON) and the file's bytes to EOF from
    stdin and write the reply on stdout (EOF without a job: exit quietly)."""
    import faulthandler
    import importlib

    faulthandler.disable()
    for name in (argv[0].split(",") if argv and argv[0] else ()):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.buffer.flush()
    inp = sys.stdin.buffer
    line = inp.readline()
    if not line.strip():
        return 0
    job = json.loads(line)
    data = inp.read()
    # The reply gets its own copy of stdout; whatever the libraries print while they
    # read the file (LightGBM writes its warnings to fd 1) goes to stderr instead,
    # so it cannot be taken for the reply.
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    out = _run_job(job, data)
    reply.write(out)
    reply.flush()
    os._exit(0)                  # no interpreter teardown (a few hundred ms with the libraries loaded)


# ------------------------------------------------------------------ the parent


_LIBRARY = {"xgboost": ("xgboost", "core.intake.parsing.xgboost"),
            "lightgbm": ("lightgbm", "core.intake.parsing.lightgbm"),
            "skops": ("skops.io", "core.intake.parsing.sklearn"), "pickle": ("joblib", "core.intake.parsing.sklearn"),
            "catboost": ("core.intake.parsing.catboost",),
            "onnx": ("onnx", "onnxruntime", "core.intake.parsing.onnx")}
POLL_S = 0.05          # seconds between two looks at the child's own time
STARTUP_LIMIT = 120.0  # seconds a child may take to import its libraries (not counted in the time limit)


def _take_child(kind: str, forked: bool, memory_mb: int) -> forkserver.WatchedChild:
    """A child forked from the fork server, else (turned off, or none could start) a cold one
    importing only what this kind of file needs; in its own process group, killed whole, its
    whole tree within ``memory_mb``."""
    return forkserver.start_child("core.intake.sandbox",
                                  [",".join(("core.intake.io", "core.intake.models") + _LIBRARY.get(kind, ()))],
                                  forked, memory_mb=memory_mb)


def _wait_ready(proc: forkserver.WatchedChild, limit: float) -> bool:
    """True once the child wrote ``ready`` (its imports done), False if it died or took too long."""
    import select

    out = proc.stdout
    if out is None:                              # its pipe already closed: it cannot answer
        return False
    ready, _, _ = select.select([out], [], [], limit)
    if not ready:
        return False
    return os.read(out.fileno(), 6) == b"ready\n"


def _end(proc: forkserver.WatchedChild) -> None:
    """Kill a child (its process group) and reap it (its pipes closed)."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        pass


def _own_time(pid: int, wall: float) -> float | None:
    """The child's own time after ``wall`` seconds of work: the larger of its CPU seconds
    (``/proc/PID/stat``: user and system time of every thread and of the children it
    reaped) and the wall time less what its threads waited in the run queue
    (``/proc/PID/task/*/schedstat``, the delay of a task runnable but not running: the
    share a busy machine kept from it). None where ``/proc`` does not say (then the wall
    clock counts)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        cpu = sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        waited = 0.0
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as fh:
                    waited += int(fh.read().split()[1]) / 1e9
            except (OSError, IndexError, ValueError):   # a thread that ended meanwhile
                continue
    except (OSError, IndexError, ValueError):
        return None
    return max(cpu, wall - min(waited, wall))


def _communicate(proc: forkserver.WatchedChild, payload: bytes, time_limit: float) -> tuple[bytes, bool, float]:
    """(the child's reply, whether it was stopped at the time limit, its own time): the job
    sent, the child's own time (:func:`_own_time`) polled while it works."""
    t0 = time.perf_counter()
    used = 0.0
    while True:
        try:
            out, _ = proc.communicate(payload, timeout=max(0.01, min(POLL_S, time_limit - used)))
            return out, False, used
        except subprocess.TimeoutExpired:
            wall = time.perf_counter() - t0
            own = _own_time(proc.pid, wall) if proc.pid else None
            used = wall if own is None else own
            if used >= time_limit:
                proc.kill()
                out, _ = proc.communicate()
                return out, True, used


def _signal_name(code: int) -> str:
    """A child's negative exit code in words: ``signal 11, SIGSEGV``."""
    try:
        return f"signal {-code}, {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


def load_vetted(data: bytes, filename: str, *, allow_pickle: bool = False, time_limit: float | None = None,
                memory_mb: int | None = None, _hook: str | None = None) -> VettedModel:
    """Read, convert and verify a model file in a child process (see the module docstring).

    Raises
    ------
    ModelError, UnsupportedModelError, UntrustedPickleError
        As :func:`core.intake.io.load_model` and :func:`core.intake.models.from_model` would, plus
        a crash, a timeout or memory exhaustion of the child, each named.
    """
    if not data:
        raise ModelError(f"{filename!r} is empty. Upload a saved model file.")
    t_default, m_default, forked = settings()
    time_limit = float(time_limit or t_default)
    memory_mb = int(memory_mb or m_default)
    job = {"filename": filename, "allow_pickle": bool(allow_pickle), "memory_mb": memory_mb, "hook": _hook}
    proc = _take_child(_model_kind(data, filename.lower()), forked, memory_mb)
    out, timed_out, own, seconds = _run_in_child(proc, json.dumps(job).encode() + b"\n" + bytes(data), time_limit)
    head, _, body = out.partition(b"\n")
    try:
        message = json.loads(head) if head else None
    except ValueError:
        message = None
    how = "reading, converting and checking it"
    if timed_out:
        raise ModelError(f"{filename!r} took longer than {time_limit:.0f} s (the time limit, counted in the reader's "
                         f"own time: its CPU seconds, not the time it waited for a busy machine) for {how} and was "
                         "stopped. The file is probably damaged; re-save the model from its library.")
    if not isinstance(message, dict):
        raise _no_answer(filename, proc, memory_mb, how)
    if message.get("status") == "error":
        raise _child_error(filename, message, memory_mb)
    read, model = _read_again(data, filename, allow_pickle, message["meta"], _reply_arrays(filename, body))
    return VettedModel(ensemble=read, model=model, info=dict(message.get("info") or {}), seconds=seconds,
                       cpu_seconds=own)


def _read_again(data: bytes, filename: str, allow_pickle: bool, meta: dict[str, Any], arrays: dict[str, Any]
                ) -> tuple[TreeEnsemble | LinearModel, Any]:
    """The model the child read (from its arrays), and the same bytes read in-process (vetted:
    they read cleanly), checked to be the same model: a linear model's coefficients, or a
    tree ensemble's outputs on the child's probe points."""
    probe_X, probe_out = arrays.pop("probe_X", None), arrays.pop("probe_out", None)
    if meta.get("kind") == "linear":
        lin = LinearModel.from_arrays(arrays, meta)
        model = model_io.load_model(data, filename, allow_pickle=allow_pickle)   # vetted: the same bytes
        verify_linear(lin, model)
        return lin, model
    ens = TreeEnsemble.from_arrays(arrays, meta)
    model = model_io.load_model(data, filename, allow_pickle=allow_pickle)   # vetted: the same bytes read cleanly
    if probe_X is not None and not same_reading(ens, model, probe_X, probe_out):
        raise ModelError(f"{filename!r} was read differently in the checking process and in the server. "
                         "Re-save the model from its library.")
    return ens, model


def _run_in_child(proc: forkserver.WatchedChild, payload: bytes, time_limit: float
                  ) -> tuple[bytes, bool, float, float]:
    """(the child's reply, whether it was stopped at the time limit, its own time, the
    seconds of its work): once it is ready, the job sent and watched (:func:`_communicate`);
    interrupted, the child is ended."""
    try:
        if not _wait_ready(proc, STARTUP_LIMIT):
            proc.kill()
            proc.communicate()
            raise ModelError(f"The process that checks model files could not start (exit code {proc.returncode}). "
                             "The server may be short of memory; try again in a moment.")
        t0 = time.perf_counter()            # the time limit counts the work on the file, not the imports
        out, timed_out, own = _communicate(proc, payload, time_limit)
    except BaseException:
        # interrupted while the child works (Ctrl-C, a signal whose handler raises, such as a
        # test's time limit): the child is ended, not left reading the file on its own
        _end(proc)
        raise
    return out, timed_out, own, time.perf_counter() - t0


def _no_answer(filename: str, proc: forkserver.WatchedChild, memory_mb: int, how: str) -> ModelError:
    """Why a child ended without a reply, from how it ended: its processes past the memory
    limit, a signal (a library crash), no answer, or another exit code."""
    if proc.memory_mb is not None:           # its processes together, killed by their watcher
        return ModelError(f"{filename!r} ran out of memory while {how}: its processes used {proc.memory_mb:,} MB "
                          f"together, past the limit of {memory_mb:,} MB, and were stopped. Re-save the model "
                          "from its library.")
    if proc.returncode is not None and proc.returncode < 0:
        return ModelError(f"{filename!r} crashed the model library while {how} "
                          f"({_signal_name(proc.returncode)}). The file is damaged or was edited by hand; "
                          "re-save the model from its library. Nothing else was affected.")
    if proc.returncode == 0:
        return ModelError(f"{filename!r} could not be read: the reader ended without an answer. Try again; "
                          "if it persists, re-save the model from its library.")
    return ModelError(f"{filename!r} could not be read: the reader stopped (exit code {proc.returncode}), "
                      f"probably out of memory (limit {memory_mb:,} MB). The file may claim sizes it does "
                      "not hold; re-save the model from its library.")


def _child_error(filename: str, message: dict[str, Any], memory_mb: int) -> errors.AtlasError:
    """The error a child reported, as the library's own class (ModelError for any other
    name), its message naming the file."""
    kind, text = message.get("kind"), str(message.get("message"))
    if text == "memory":
        text = (f"{filename!r} needs more than {memory_mb:,} MB to read: it claims sizes it does not hold "
                "or is very large. Re-save the model from its library.")
    elif kind == "ModelError" and not text.startswith(repr(filename)[:-1]):   # (also "'f (its booster)'")
        text = f"{filename!r} could not be read: {text}"
    cls = getattr(errors, str(kind), ModelError)
    return (cls if isinstance(cls, type) and issubclass(cls, errors.AtlasError) else ModelError)(text)


def _reply_arrays(filename: str, body: bytes) -> dict[str, Any]:
    """The arrays of a child's reply (plain arrays only); a reply cut short is refused."""
    try:
        with np.load(io.BytesIO(body), allow_pickle=False) as z:
            return dict(z)
    except Exception:  # noqa: BLE001 - a reply cut short
        raise ModelError(f"{filename!r}: the reader's reply was incomplete. Try again; if it persists, re-save "
                         "the model from its library.") from None


def same_reading(ens: TreeEnsemble, model: ModelLike, probe_X: np.ndarray, probe_out: np.ndarray) -> bool:
    """Did the server read the model as the checking process did? The outputs on the probe
    points must agree to rounding (a forest predicting with ``n_jobs > 1`` adds its trees in
    whatever order its threads finish, so the last bits may differ between two reads) and
    decide alike: the same class on every probe point."""
    _, theirs, _ = native_outputs(ens, model, probe_X)
    if theirs is None:
        return False
    theirs = np.asarray(theirs, dtype=np.float64)
    if theirs.shape != probe_out.shape or not np.allclose(theirs, probe_out, rtol=1e-9, atol=1e-12):
        return False
    if theirs.ndim == 2 and theirs.shape[1] > 1:        # away from ties, the same class
        top2 = np.sort(probe_out, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-9
        return bool(np.array_equal(theirs.argmax(axis=1)[clear], probe_out.argmax(axis=1)[clear]))
    return True


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
