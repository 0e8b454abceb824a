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

The child owns its whole process tree. It leads a process group of its own, and
its watcher is a *subreaper* (``PR_SET_CHILD_SUBREAPER``): whatever the model
starts (a ``predict`` that forks, a pool of processes, a grandchild that leaves
the group with ``setsid``) stays below the watcher, never reparented to PID 1.
:meth:`WatchedChild.kill` (Stop, Cancel, the end of a session, a time limit)
kills the group; when the child ends, for whatever reason, the watcher kills
every process still below it and reaps them before it reports the exit, so
when the server learns that the child ended, nothing of it is left. With a
``memory_mb`` the watcher also counts the memory of the whole tree (the sum of
its processes' proportional set sizes, read every :data:`TICK` seconds while
any of them works) and kills the tree past it, reporting ``memory`` with the
figure; ``RLIMIT_AS`` still bounds each process on its own.

If the fork server cannot start, is not single-threaded, or dies, :func:`spawn`
returns None and the caller starts a cold child (:class:`ColdChild`): a new
interpreter, ``python -m core.intake.forkserver --watch``, that is the watcher
of one child and behaves as above. ``ATLAS_SANDBOX_WARM=0`` turns the fork
server off.
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

__all__ = ["WatchedChild", "ForkedChild", "ColdChild", "spawn", "start_child", "stop", "enabled", "child_env",
           "PRELOAD", "ENTRY_POINTS", "TICK"]

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
    """In the forked child: a process group of its own, the request's pipes as stdin /
    stdout, then the entry point."""
    stdin_r, stdout_w, status_w = fds
    try:
        os.setpgid(0, 0)                  # (the watcher sets it too: whichever runs first)
    except OSError:  # pragma: no cover
        pass
    os.close(status_w)
    for fd, target in ((stdin_r, 0), (stdout_w, 1)):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})    # the watcher blocks it
    code = 70
    try:
        code = int(importlib.import_module(module)._child(argv) or 0)
    finally:
        os._exit(code)


#: seconds between two looks of a watcher at its tree's memory (and at orphans left to kill)
TICK = 0.25


def _subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so none of them
    is reparented to PID 1 out of its reach."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)    # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the process group still holds
        pass


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].decode().split()
    except (OSError, ValueError):
        return None


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:  # pragma: no cover - no /proc: only the process group is killed
        return []
    for pid in pids:
        fields = _stat(pid)
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _kill_tree(child: int) -> None:
    """Kill the child's process group and every process below this watcher."""
    try:
        os.killpg(child, signal.SIGKILL)
    except OSError:
        pass
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _pss(pid: int) -> int:
    """Bytes of memory a process uses, its share of pages shared with others counted in part
    (``Pss`` of ``smaps_rollup``; its resident size where that file is missing)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _Meter:
    """The memory of a child and everything below its watcher, against a limit. A look costs one
    small read while the child is idle and alone (its faults and CPU time unchanged since the
    last count: it has forked nothing); otherwise the tree is read from ``/proc`` and summed."""

    def __init__(self, child: int, limit_mb: int) -> None:
        self.child, self.limit = child, int(limit_mb) * 2**20
        self.last: tuple[str, ...] | None = None
        self.alone = False

    def over(self) -> int | None:
        """The tree's memory in MB when past the limit, else None."""
        fields = _stat(self.child)
        mark = tuple(fields[7:13]) if fields else None          # minflt .. stime
        if self.alone and mark == self.last:
            return None
        self.last = mark
        tree = _descendants(os.getpid())
        self.alone = len(tree) <= 1
        used = sum(_pss(pid) for pid in tree)
        return used // 2**20 if used > self.limit else None


def _exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _supervise(child: int, memory_mb: int | None) -> tuple[int, int | None]:
    """Reap the child and any orphan reparented here; kill the tree when the child has ended or
    the tree is past ``memory_mb``; return (the child's exit code, the MB it was killed at)
    once nothing is left below this process."""
    code: int | None = None
    over: int | None = None
    meter = _Meter(child, memory_mb) if memory_mb else None
    while True:
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                if pid == child:
                    code = _exit_code(status)
        except ChildProcessError:                       # nothing left below: the tree has ended
            return (-signal.SIGKILL if code is None else code), over
        if code is None and over is None and meter is not None:
            over = meter.over()
        if code is not None or over is not None:
            _kill_tree(child)
        signal.sigtimedwait([signal.SIGCHLD], TICK)


def _quiet(fd: int) -> None:
    """Let go of a pipe end in the watcher (onto /dev/null if it is stdin or stdout)."""
    if fd > 2:
        os.close(fd)
        return
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, fd)
    os.close(null)


def _watch(request: dict[str, Any], fds: list[int]) -> None:
    """In the watcher: fork the child (its own process group), report its pid, watch its
    tree until it ends (see the module docstring), report how it ended."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # a Ctrl-C of the server's terminal is the server's
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)      # this process waits for its tree itself
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})      # read with sigtimedwait
    _subreaper()
    pid = os.fork()
    if pid == 0:
        _run_child(request["module"], list(request.get("argv", [])), fds)
    try:
        os.setpgid(pid, pid)
    except OSError:  # pragma: no cover - the child did it first, or has already ended
        pass
    stdin_r, stdout_w, status_w = fds
    _quiet(stdin_r)
    _quiet(stdout_w)
    os.write(status_w, f"pid {pid}\n".encode())
    code, over = _supervise(pid, request.get("memory_mb"))
    if over is not None:
        os.write(status_w, f"memory {over}\n".encode())
    os.write(status_w, f"exit {code}\n".encode())
    os._exit(0)


def _valid(request: Any) -> bool:
    """A request the fork server (or a cold watcher) runs: an entry point, string arguments,
    and a memory limit in MB or none."""
    mb = request.get("memory_mb") if isinstance(request, dict) else None
    return (isinstance(request, dict) and request.get("module") in ENTRY_POINTS
            and isinstance(request.get("argv", []), list) and all(isinstance(a, str) for a in request.get("argv", []))
            and (mb is None or (isinstance(mb, int) and not isinstance(mb, bool) and mb > 0)))


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
            ok = len(fds) == 3 and _valid(request)
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
class WatchedChild:
    """A child under a watcher (see the module docstring), used as the sandbox and the worker use
    a ``Popen``; :meth:`kill` kills its process group. ``memory_mb`` is the figure its tree was
    killed at by its watcher for passing its memory limit, else None."""

    def __init__(self, stdin: IO[bytes] | None, stdout: IO[bytes] | None, status_fd: int, limit: float) -> None:
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self.memory_mb: int | None = None
        self._status_fd: int | None = status_fd
        self._status = b""
        self._out = bytearray()
        self._writer: threading.Thread | None = None
        self._lock = threading.RLock()          # Stop may come from another thread than the one that waits
        self.pid = 0
        self._started = self._read_status(limit) and self.pid > 0

    def _read_status(self, timeout: float | None) -> bool:
        """Read the status pipe until a line arrives or ``timeout``; True if one did."""
        with self._lock:
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
            elif word == "memory":
                self.memory_mb = int(value)
            elif word == "exit":
                self.returncode = int(value)
                if self._status_fd is not None:
                    os.close(self._status_fd)
                    self._status_fd = None
                self._ended()
            return True

    def _ended(self) -> None:
        """What to do once the watcher reported the exit (nothing here)."""

    def poll(self) -> int | None:
        while self.returncode is None and self._read_status(0):
            pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"child {self.pid}", timeout or 0.0)
            self._read_status(0.2 if left is None else min(left, 0.2))
        return self.returncode

    def kill(self) -> None:
        """Kill the child's process group (the watcher then kills whatever else is below it)."""
        if self.returncode is None and self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
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
        self._read_out(deadline, timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        return bytes(self._out), None

    def _read_out(self, deadline: float | None, timeout: float | None) -> None:
        """Read the child's stdout to its end (kept across calls), or raise ``TimeoutExpired`` at ``deadline``."""
        out = self.stdout
        while out is not None and not out.closed:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0 or not select.select([out], [], [], left)[0]:
                raise subprocess.TimeoutExpired(f"child {self.pid}", timeout or 0.0)
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                out.close()
                break
            self._out += chunk


class ForkedChild(WatchedChild):
    """A child forked by the fork server (its watcher forked from it too)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], status_fd: int, limit: float) -> None:
        super().__init__(stdin, stdout, status_fd, limit)
        if not self._started:
            self.kill()
            raise OSError("the fork server did not start the child")


class ColdChild(WatchedChild):
    """A child started cold: ``python -m core.intake.forkserver --watch`` is its watcher (a new
    interpreter, never a fork of the server), which forks it as the fork server's watchers do.
    A watcher that could not start leaves a child that has ended (its stdout closed)."""

    def __init__(self, module: str, argv: list[str], memory_mb: int | None, limit: float) -> None:
        status_r, status_w = os.pipe()
        request = {"module": module, "argv": list(argv), "memory_mb": memory_mb}
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-m", "core.intake.forkserver", "--watch", str(status_w), json.dumps(request)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=(status_w,),
                env=child_env(), cwd=_ROOT)
        finally:
            os.close(status_w)
        super().__init__(self._watcher.stdin, self._watcher.stdout, status_r, limit)
        if not self._started and self.returncode is None:
            self._watcher.kill()
            self.wait()

    def _ended(self) -> None:
        try:
            self._watcher.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - reaped by subprocess later
            pass

    def kill(self) -> None:
        super().kill()
        if not self.pid and self._watcher.poll() is None:     # not started yet: its watcher instead
            self._watcher.kill()


class _Server:
    """The one fork server of this process (started on first use, restarted if it died)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
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

    def request(self, module: str, argv: list[str], fds: list[int], memory_mb: int | None = None) -> bool:
        msg = json.dumps({"module": module, "argv": argv, "memory_mb": memory_mb}).encode()
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


def spawn(module: str, argv: list[str] | None = None, *, limit: float = STARTUP_LIMIT,
          memory_mb: int | None = None) -> ForkedChild | None:
    """A child running ``module._child(argv)`` forked from the fork server, or None when there
    is none to fork from (the caller then starts a cold child). ``memory_mb``: the limit of its
    whole process tree, kept by its watcher (None: each process's own ``RLIMIT_AS`` only)."""
    if module not in ENTRY_POINTS:
        raise ValueError(f"{module!r} is not a child entry point")
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        sent = _server.request(module, list(argv or []), [stdin_r, stdout_w, status_w],
                               None if memory_mb is None else int(memory_mb))
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


def start_child(module: str, cold_argv: list[str], forked: bool | None = None, *,
                memory_mb: int | None = None) -> WatchedChild:
    """A child running ``module._child``: forked from the fork server (when ``forked``, by default
    :func:`enabled`, and one runs), else cold (:class:`ColdChild`, ``module._child(cold_argv)``
    in a new interpreter with the children's environment). Either way its stdin and stdout are
    pipes to this process, it leads its own process group under a watcher, and ``memory_mb``
    (if given) bounds the memory of its whole tree."""
    child = spawn(module, memory_mb=memory_mb) if (enabled() if forked is None else forked) else None
    if child is not None:
        return child
    if module not in ENTRY_POINTS:
        raise ValueError(f"{module!r} is not a child entry point")
    return ColdChild(module, cold_argv, None if memory_mb is None else int(memory_mb), STARTUP_LIMIT)


@atexit.register
def stop() -> None:
    """End the fork server (the server's exit; its children end with their own work)."""
    with _server.lock:
        _server._end()
        _server.failed = False


def _watch_cold(status_fd: int, request: Any) -> int:
    """``python -m core.intake.forkserver --watch FD REQUEST``: the watcher of one cold child,
    whose stdin and stdout are this process's."""
    if not _valid(request):
        return 2
    _watch(request, [0, 1, status_fd])
    return 0                                           # pragma: no cover - _watch ends with os._exit


if __name__ == "__main__":
    if sys.argv[1:2] == ["--watch"]:
        sys.exit(_watch_cold(int(sys.argv[2]), json.loads(sys.argv[3])))
    sys.exit(_serve(socket.socket(fileno=int(sys.argv[1])), [m for m in sys.argv[2].split(",") if m]))
