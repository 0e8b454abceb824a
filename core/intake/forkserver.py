"""Children for untrusted model files, forked from a pre-warmed parent instead of started cold.

The sandbox (:mod:`core.intake.sandbox`) reads each uploaded model file in a
child of its own, and :mod:`core.intake.worker` runs each session's model in one.
Started cold (a new interpreter importing numpy, scikit-learn, XGBoost and
LightGBM), each child cost the server 2-3 s of CPU: more than reading most
files, and the cost of every upload on a shared server.

The fork server is one child started like the others (``python -m
core.intake.forkserver``: a new interpreter, never a fork of the threaded
server, with the children's environment: one thread per library). It imports
those libraries once, checks that it runs a single thread (forking is only safe
then), and never reads a file, runs a model or starts a thread: it waits on a
Unix socket for requests and forks one fresh child per request. Each child
serves one file (or one session's model) and exits, so nothing read for one
user is ever in the process that serves the next: the fork server's memory holds
only the libraries.

A request carries three pipe ends made by the server (``SCM_RIGHTS``): the
child's stdin and stdout and a status pipe. The fork server forks a *watcher*,
which forks the child, writes the child's pid on the status pipe, waits for it
and writes how it ended (its exit code, or minus the signal that killed it). So
:class:`ForkedChild` behaves as a ``subprocess.Popen`` of the server's own for
what the sandbox and the worker use (``stdin``, ``stdout``, ``poll``, ``wait``,
``kill``, ``communicate``, ``returncode``): a crash is still named by its signal.

If the fork server cannot start, is not single-threaded, or dies, :func:`spawn`
returns None and the caller starts a cold child as before; the next request
starts a new fork server. ``ATLAS_SANDBOX_WARM=0`` turns it off.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from core.settings import SINGLE_THREAD_ENV

__all__ = ["ForkedChild", "spawn", "start_child", "stop", "enabled", "child_env", "PRELOAD", "ENTRY_POINTS"]

#: what the fork server imports before its first fork (the libraries of the formats read in the
#: sandbox, scikit-learn's estimators for the worker's models, and the two entry points)
PRELOAD = ("numpy", "xgboost", "lightgbm", "sklearn.ensemble", "sklearn.neural_network", "sklearn.pipeline",
           "skops.io", "core.intake.io", "core.model.native", "core.intake.parsing.xgboost",
           "core.intake.parsing.lightgbm", "core.intake.parsing.sklearn", "core.intake.sandbox",
           "core.intake.worker")
#: the modules a child may run: each has ``_child(argv)``, which never returns (``os._exit``)
ENTRY_POINTS = ("core.intake.sandbox", "core.intake.worker")
#: the environment of every child: one thread per numeric library and no Arrow allocator thread
#: (:data:`core.settings.SINGLE_THREAD_ENV`), no fault handler, no .pyc written
CHILD_ENV = {**SINGLE_THREAD_ENV, "PYTHONFAULTHANDLER": "", "PYTHONDONTWRITEBYTECODE": "1"}
STARTUP_LIMIT = 120.0            # seconds the fork server may take to import its libraries
_ROOT = str(Path(__file__).resolve().parents[2])


def enabled() -> bool:
    """Fork children from the fork server (``ATLAS_SANDBOX_WARM``, on by default), else start them cold."""
    return os.environ.get("ATLAS_SANDBOX_WARM", "1").strip().lower() not in ("0", "false", "no", "off")


def child_env() -> dict[str, str]:
    """The environment of a child (cold or forked): the server's, the repository on the path, CHILD_ENV."""
    path = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **CHILD_ENV}


# ------------------------------------------------------------------ the fork server's side
def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:                       # pragma: no cover - no /proc: trust Python's count
        return threading.active_count()


def _run_child(module: str, argv: list[str], fds: list[int]) -> None:
    """In the forked child: the request's pipes as stdin / stdout, then the entry point."""
    stdin_r, stdout_w, status_w = fds
    os.close(status_w)
    os.dup2(stdin_r, 0)
    os.dup2(stdout_w, 1)
    os.close(stdin_r)
    os.close(stdout_w)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    code = 70
    try:
        code = int(importlib.import_module(module)._child(argv) or 0)
    finally:
        os._exit(code)


def _watch(request: dict[str, Any], fds: list[int]) -> None:
    """In the watcher: fork the child, report its pid, wait for it, report how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)      # this process waits for its child itself
    pid = os.fork()
    if pid == 0:
        _run_child(request["module"], list(request.get("argv", [])), fds)
    stdin_r, stdout_w, status_w = fds
    os.close(stdin_r)
    os.close(stdout_w)
    os.write(status_w, f"pid {pid}\n".encode())
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:          # pragma: no cover - retried by Python itself since 3.5
            continue
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    os.write(status_w, f"exit {code}\n".encode())
    os._exit(0)


def _serve(sock: socket.socket, preload: list[str]) -> int:
    """``python -m core.intake.forkserver FD MODULE,...``: import, check, then fork on request."""
    import faulthandler

    faulthandler.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # a Ctrl-C of the server's terminal is the server's
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # the watchers are reaped by the kernel
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if _threads() != 1:                                # a fork of a threaded process is not safe
        sock.sendall(b"threads\n")
        return 1
    sock.sendall(b"ready\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, 3)
        except InterruptedError:          # pragma: no cover
            continue
        except OSError:
            return 0
        if not msg:                                     # the server closed its end: it has gone
            return 0
        try:
            request = json.loads(msg)
            ok = (len(fds) == 3 and isinstance(request, dict) and request.get("module") in ENTRY_POINTS
                  and all(isinstance(a, str) for a in request.get("argv", [])))
        except ValueError:
            ok = False
        if ok and os.fork() == 0:
            sock.close()
            try:
                _watch(request, fds)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)


# ------------------------------------------------------------------ the server's side
class ForkedChild:
    """A child forked by the fork server, used as the sandbox and the worker use a ``Popen``."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], status_fd: int, limit: float) -> None:
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._status_fd: int | None = status_fd
        self._status = b""
        self._out = bytearray()
        self._writer: threading.Thread | None = None
        self.pid = 0
        if not self._read_status(limit) or not self.pid:
            self.kill()
            raise OSError("the fork server did not start the child")

    def _read_status(self, timeout: float | None) -> bool:
        """Read the status pipe until a line arrives or ``timeout``; True if one did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._status_fd is not None and b"\n" not in self._status:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._status_fd], [], [], left)[0]:
                return False
            chunk = os.read(self._status_fd, 64)
            if not chunk:                                  # the watcher died without a word: killed with it
                self._status += b"exit -9\n"
                break
            self._status += chunk
        line, _, self._status = self._status.partition(b"\n")
        word, _, value = line.decode().partition(" ")
        if word == "pid":
            self.pid = int(value)
        elif word == "exit":
            self.returncode = int(value)
            os.close(self._status_fd)                      # type: ignore[arg-type]
            self._status_fd = None
        return True

    def poll(self) -> int | None:
        while self.returncode is None and self._read_status(0):
            pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not self._read_status(left):
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None and self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


    def _write(self, data: bytes) -> None:
        assert self.stdin is not None
        try:
            self.stdin.write(data)
        except (BrokenPipeError, OSError, ValueError):
            pass
        try:
            self.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def communicate(self, input: bytes | None = None, timeout: float | None = None) -> tuple[bytes, None]:
        """As ``Popen.communicate``: send ``input`` and close stdin, read stdout to its end, wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._writer is None and self.stdin is not None and not self.stdin.closed:
            self._writer = threading.Thread(target=self._write, args=(input or b"",), daemon=True)
            self._writer.start()
        out = self.stdout
        while out is not None and not out.closed:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0 or not select.select([out], [], [], left)[0]:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                out.close()
                break
            self._out += chunk
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        return bytes(self._out), None


class _Server:
    """The one fork server of this process (started on first use, restarted if it died)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.failed = False

    def _start(self) -> bool:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "core.intake.forkserver", str(theirs.fileno()), ",".join(PRELOAD)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), env=child_env(), cwd=_ROOT)
        finally:
            theirs.close()
        ready = select.select([mine], [], [], STARTUP_LIMIT)[0] and mine.recv(64) == b"ready\n"
        if not ready:
            mine.close()
            self._end()
            self.failed = True          # not single-threaded, or too slow: cold children from now on
            return False
        self.sock = mine
        return True

    def _end(self) -> None:
        proc, self.proc = self.proc, None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def request(self, module: str, argv: list[str], fds: list[int]) -> bool:
        msg = json.dumps({"module": module, "argv": argv}).encode()
        with self.lock:
            for _ in range(2):                       # a fork server that died is started again, once
                if self.failed:
                    return False
                if self.sock is None or self.proc is None or self.proc.poll() is not None:
                    self._end()
                    if not self._start():
                        return False
                assert self.sock is not None
                try:
                    socket.send_fds(self.sock, [msg], fds)
                    return True
                except OSError:
                    self._end()
            return False


_server = _Server()


def spawn(module: str, argv: list[str] | None = None, *, limit: float = STARTUP_LIMIT) -> ForkedChild | None:
    """A child running ``module._child(argv)`` forked from the fork server, or None when there
    is none to fork from (the caller then starts a cold child)."""
    if module not in ENTRY_POINTS:
        raise ValueError(f"{module!r} is not a child entry point")
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        sent = _server.request(module, list(argv or []), [stdin_r, stdout_w, status_w])
    finally:
        for fd in (stdin_r, stdout_w, status_w):
            os.close(fd)
    if not sent:
        for fd in (stdin_w, stdout_r, status_r):
            os.close(fd)
        return None
    try:
        return ForkedChild(os.fdopen(stdin_w, "wb"), os.fdopen(stdout_r, "rb", buffering=0), status_r, limit)
    except OSError:
        return None


def start_child(module: str, cold_argv: list[str], forked: bool | None = None) -> ForkedChild | subprocess.Popen:
    """A child running ``module._child``: forked from the fork server (when ``forked``, by default
    :func:`enabled`, and one runs), else cold: ``python -m module *cold_argv`` with the children's
    environment. Either way its stdin and stdout are pipes to this process."""
    child = spawn(module) if (enabled() if forked is None else forked) else None
    if child is not None:
        return child
    return subprocess.Popen([sys.executable, "-m", module, *cold_argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(), cwd=_ROOT)


@atexit.register
def stop() -> None:
    """End the fork server (the server's exit; its children end with their own work)."""
    with _server.lock:
        _server._end()
        _server.failed = False


if __name__ == "__main__":
    sys.exit(_serve(socket.socket(fileno=int(sys.argv[1])), [m for m in sys.argv[2].split(",") if m]))
