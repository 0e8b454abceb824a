"""Read untrusted model files in a short-lived child process.

A malformed model file can abort or crash the process that reads it inside
XGBoost, LightGBM or numpy (SIGABRT, SIGSEGV), loop forever, or allocate
gigabytes. :func:`load_vetted` therefore reads, converts and verifies the
file (``core.io.load_model`` -> ``core.ensemble.from_model`` with its check
against the library's own predictions) in a child process started fresh
("spawn": the server has threads, so no fork), under

* a wall-time limit (``time_limit``): past it the child is killed;
* an address-space limit (``memory_mb``, ``RLIMIT_AS``): an allocation past it
  fails inside the child.

Only plain data comes back through the pipe: the ``TreeEnsemble``'s arrays
(``to_arrays``) and the file's facts, never an object unpickled from the
upload. A crash, hang or memory blow-up becomes a :class:`ModelError` naming
what happened; the server and its other sessions carry on. Once the child has
read the file without harm, the same bytes are read in-process (the reading is
deterministic) to keep the library's model object for the final checks of
counterfactuals, except a pickle the user did not trust, which never gets
here, and a file whose reading already failed in the child.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core import errors
from core.ensemble import TreeEnsemble
from core.errors import ModelError

__all__ = ["VettedModel", "load_vetted", "TIME_LIMIT", "MEMORY_MB"]

TIME_LIMIT = 120.0     # seconds for reading, converting and verifying one file
MEMORY_MB = 6144       # address space of the child (virtual: thread stacks and arenas count)


@dataclass(frozen=True)
class VettedModel:
    """A model file read safely: what :func:`core.workspace.build_workspace` takes."""

    ensemble: TreeEnsemble
    model: Any = None                       # the library's object, read in-process after vetting
    info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0                    # time spent in the child


def _child(argv: list[str]) -> int:
    """Runs in the child (``python -m core.sandbox FILENAME PICKLE MEMORY_MB HOOK``, the
    file's bytes on stdin): read, convert, verify; write one JSON line, then on
    success the ensemble's arrays as ``.npz`` (no pickle either way)."""
    filename, allow_pickle, memory_mb, hook = argv[0], argv[1] == "1", int(argv[2]), argv[3]
    data = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    try:
        import resource

        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not POSIX: time limit only
        pass

    def fail(kind: str, text: str) -> int:
        out.write(json.dumps({"status": "error", "kind": kind, "message": text}).encode() + b"\n")
        return 0

    try:
        if hook == "segfault":                 # tests: a library crash
            import ctypes

            ctypes.string_at(0)
        if hook == "hang":                     # tests: a library that never returns
            while True:
                time.sleep(1)
        if hook == "memory":                   # tests: a file that claims gigabytes
            bytearray(2 * limit)
        from core import io as model_io
        from core.ensemble import from_model

        ens = from_model(model_io.load_model(data, filename, allow_pickle=allow_pickle))
        arrays, meta = ens.to_arrays()
        header = json.dumps({"status": "ok", "meta": meta})
    except errors.AtlasError as exc:
        return fail(type(exc).__name__, str(exc))
    except MemoryError:
        return fail("ModelError", "memory")
    except RecursionError:
        return fail("ModelError", "nested too deeply to read")
    except Exception as exc:  # noqa: BLE001 - any other failure of a library on this file
        return fail("ModelError", f"{type(exc).__name__}: {str(exc)[:300]}")
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    out.write(header.encode() + b"\n" + buf.getvalue())
    return 0


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def load_vetted(data: bytes, filename: str, *, allow_pickle: bool = False, time_limit: float = TIME_LIMIT,
                memory_mb: int = MEMORY_MB, _hook: str | None = None) -> VettedModel:
    """Read, convert and verify a model file in a child process (see the module docstring).

    Raises
    ------
    ModelError, UnsupportedModelError, UntrustedPickleError
        As :func:`core.io.load_model` and :func:`core.ensemble.from_model` would, plus
        a crash, a timeout or memory exhaustion of the child, each named.
    """
    if not data:
        raise ModelError(f"{filename!r} is empty. Upload a saved model file.")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p),
           "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": ""}
    cmd = [sys.executable, "-m", "core.sandbox", filename, "1" if allow_pickle else "0", str(int(memory_mb)),
           _hook or "-"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=root)
    timed_out = False
    try:
        out, _ = proc.communicate(bytes(data), timeout=time_limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        timed_out = True
    seconds = time.perf_counter() - t0
    how = "reading, converting and checking it"
    head, _, body = out.partition(b"\n")
    try:
        message = json.loads(head) if head else None
    except ValueError:
        message = None
    if timed_out:
        raise ModelError(f"{filename!r} took longer than {time_limit:.0f} s for {how} and was stopped. "
                         "The file is probably damaged; re-save the model from its library.")
    if message is None:
        if proc.returncode < 0:
            raise ModelError(f"{filename!r} crashed the model library while {how} "
                             f"({_signal_name(proc.returncode)}). The file is damaged or was edited by hand; "
                             "re-save the model from its library. Nothing else was affected.")
        raise ModelError(f"{filename!r} could not be read: the reader stopped (exit code {proc.returncode}), "
                         f"probably out of memory (limit {memory_mb:,} MB). The file may claim sizes it does "
                         "not hold; re-save the model from its library.")
    if message["status"] == "error":
        kind, text = message["kind"], message["message"]
        if text == "memory":
            text = (f"{filename!r} needs more than {memory_mb:,} MB to read: it claims sizes it does not hold "
                    "or is very large. Re-save the model from its library.")
        elif kind == "ModelError" and not text.startswith(repr(filename)):
            text = f"{filename!r} could not be read: {text}"
        cls = getattr(errors, kind, ModelError)
        raise (cls if isinstance(cls, type) and issubclass(cls, errors.AtlasError) else ModelError)(text)
    with np.load(io.BytesIO(body), allow_pickle=False) as z:
        ens = TreeEnsemble.from_arrays(dict(z), message["meta"])
    from core import io as model_io

    model = model_io.load_model(data, filename, allow_pickle=allow_pickle)   # vetted: the same bytes read cleanly
    return VettedModel(ensemble=ens, model=model, info={}, seconds=seconds)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
