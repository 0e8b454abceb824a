"""Hostile models in the worker (issue 60, items 3-6): a model whose predict forks, answers NaN
or an array of the wrong shape, sleeps, crashes or eats memory, and a Stop from another thread.

Each model is a trusted pickle written by the test (:mod:`hostile_models`) whose
``predict_proba`` misbehaves on the rows whose first value is 7 (so it loads), or always.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from hostile_models import MARK, hostile

from core.errors import ModelError, WorkerCancelled, WorkerError
from core.intake import forkserver
from core.intake.worker import ModelWorker
from core.model.blackbox import BlackBoxModel


def _state(pid: int) -> str | None:
    """A process's state letter (R, S, Z, ...), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return None


def _running(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _group(pgid: int) -> list[int]:
    """The processes still running in process group ``pgid``."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                out.append(int(p))
    return out


# ---------------------------------------------------------------- item 3: the whole process tree
FORKS = """
import os, time
a = os.fork()
if a == 0:                                 # a grandchild that sleeps
    time.sleep(60)
    os._exit(0)
b = os.fork()
if b == 0:                                 # one that leaves the group and leaves an orphan behind
    os.setsid()
    c = os.fork()
    if c == 0:
        time.sleep(60)
        os._exit(0)
    fd = os.open({pids!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{{c}} ".encode())
    os._exit(0)
os.waitpid(b, 0)
fd = os.open({pids!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, f"{{a}} ".encode())
os.close(fd)
"""


@pytest.mark.parametrize("warm", ["1", "0"])       # forked from the fork server, or started cold
def test_a_model_that_forks_leaves_no_process_behind_after_stop(tmp_path, monkeypatch, warm):
    monkeypatch.setenv("ATLAS_SANDBOX_WARM", warm)
    pids = tmp_path / "pids"
    w = ModelWorker(hostile(FORKS.format(pids=str(pids))), "forks.pkl", allow_pickle=True)
    try:
        model = w.model()
        assert list(model.predict(MARK)) == [1]            # it answers, and has forked on the way
        kids = [int(p) for p in pids.read_text().split()]
        child = w._proc.pid
        assert len(kids) == 2 and all(_running(p) for p in kids), kids
        members = _group(child)
    finally:
        w.stop()
    assert [p for p in kids if _running(p)] == []           # the one that left the group too
    assert len(members) >= 2 and _group(child) == []        # the worker led a group (it and a grandchild): gone


def test_the_memory_limit_counts_the_processes_a_model_starts():
    grow = """
    import os, time
    for _ in range(5):
        if os.fork() == 0:
            held = []
            try:
                for _ in range(6):                 # 150 MB each, under the limit of one process
                    held.append(np.ones(25 * 2**20 // 8))
            except MemoryError:
                pass
            time.sleep(30)
            os._exit(0)
    time.sleep(30)
    """
    w = ModelWorker(hostile(grow), "grow.pkl", allow_pickle=True, memory_mb=640, call_timeout=25)
    try:
        model = w.model()
        child = w._proc.pid
        with pytest.raises(WorkerError, match=r"out of memory .*used [\d,]+ MB together, past the limit of 640 MB"):
            model.predict(MARK)
        assert not w.alive and _group(child) == []
    finally:
        w.stop()


# ---------------------------------------------------------------- item 4: answers no model gives
def test_a_model_answering_nan_is_refused_with_words():
    w = ModelWorker(hostile("return np.full((len(X), 2), np.nan)", always=True), "nan.pkl", allow_pickle=True)
    try:
        with pytest.raises(WorkerError, match=r"NaN \(not a number\) as its class scores on 1 of 1 rows"):
            w.describe()
    finally:
        w.stop()
    w = ModelWorker(hostile("return np.where(X[:, :1] == 7, np.nan, np.column_stack([1 - p, p]))"), "nan.pkl",
                    allow_pickle=True)
    try:
        model = w.model()                                   # NaN on some rows only: refused where it comes
        assert list(model.predict(np.zeros((2, 3)))) == [0, 0]
        with pytest.raises(WorkerError, match=r"NaN .* on 1 of 3 rows"):
            model.predict_proba(np.vstack([np.zeros((2, 3)), MARK]))
    finally:
        w.stop()


def test_a_model_answering_the_wrong_shape_is_refused_with_words():
    # probabilities flattened to one row of 2n values were read as (n, 2) before
    w = ModelWorker(hostile("return np.column_stack([1 - p, p]).ravel()", always=True), "flat.pkl",
                    allow_pickle=True)
    try:
        with pytest.raises(WorkerError, match=r"class scores of shape \(2,\) for 1 rows and 2 classes"):
            w.describe()
    finally:
        w.stop()


@pytest.mark.parametrize("answer, words", [
    (lambda X: {"label": np.zeros(len(X)), "proba": np.full((len(X), 2), np.nan)}, r"NaN .*class scores on 4 of 4"),
    (lambda X: {"label": np.r_[np.zeros(len(X) - 1), np.nan], "proba": np.full((len(X), 2), .5)},
     r"NaN .*label on 1 of 4"),
    (lambda X: {"label": np.zeros(len(X)), "proba": np.full((len(X), 2), np.inf)}, "an infinite value"),
    (lambda X: {"label": np.zeros((len(X), 2)), "proba": np.full((len(X), 2), .5)}, r"labels of shape \(4, 2\)"),
    (lambda X: {"label": np.zeros(len(X)), "proba": np.full((len(X), 3), .3)}, r"shape \(4, 3\) .*\(4, 2\) is"),
])
def test_the_library_refuses_nan_and_wrong_shapes_from_any_answerer(answer, words):
    model = BlackBoxModel(feature_names=("a", "b"), task="classification", classes=np.array([0, 1]),
                          answers=lambda X, cats: answer(X))
    with pytest.raises(ModelError, match=words):
        model.predict(np.zeros((4, 2)))


def test_a_regressor_answering_nan_is_refused():
    model = BlackBoxModel(feature_names=("a",), task="regression", classes=None,
                          answers=lambda X, cats: {"label": np.where(X[:, 0] > 0, np.nan, 1.0)})
    assert list(model.predict(np.zeros((2, 1)))) == [1.0, 1.0]
    with pytest.raises(ModelError, match=r"NaN \(not a number\) as its value on 1 of 2 rows"):
        model.predict(np.array([[0.0], [1.0]]))


# ---------------------------------------------------------------- item 5: Cancel at every stage
def _stop_soon(w: ModelWorker, after: float) -> list[float]:
    """Call ``w.stop()`` from another thread after ``after`` s; the list gets the time it was called."""
    when: list[float] = []

    def go() -> None:
        when.append(time.monotonic())
        w.stop()

    threading.Timer(after, go).start()
    return when


def test_stop_from_another_thread_cancels_answers_at_once():
    w = ModelWorker(hostile("time.sleep(60)"), "slow.pkl", allow_pickle=True, call_timeout=60)
    try:
        model = w.model()
        when = _stop_soon(w, 0.5)
        with pytest.raises(WorkerCancelled, match="stopped while answering 1 rows"):
            model.predict(MARK)
        assert time.monotonic() - when[0] < 5               # honoured, not run on to the 60 s limit
        assert list(model.predict(np.zeros((1, 3)))) == [0]   # the next call starts a new child
        assert w.starts == 2
    finally:
        w.stop()


def test_stop_from_another_thread_cancels_loading_at_once():
    # the fork server started first: started cold (2-3 s), it would still be starting the child
    # when the stop comes 0.5 s in, as when this test runs alone
    warm = ModelWorker(hostile("pass"), "ok.pkl", allow_pickle=True)
    try:
        warm.describe()
    finally:
        warm.stop()
    w = ModelWorker(hostile("time.sleep(60)", always=True), "slow.pkl", allow_pickle=True, load_timeout=60)
    try:
        when = _stop_soon(w, 0.5)
        with pytest.raises(WorkerCancelled, match="stopped while loading"):
            w.describe()
        assert time.monotonic() - when[0] < 5
        assert not w.alive
    finally:
        w.stop()


def test_stop_before_the_child_exists_cancels_describe_and_the_late_child_is_killed(monkeypatch):
    """A Stop while the fork server starts (seconds, on first use): the child did not exist yet
    and the Stop was lost; the load ran on to its time limit."""
    started = []
    real = forkserver.start_child

    def slow_start(*args, **kwargs):
        time.sleep(2)
        child = real(*args, **kwargs)
        started.append(child)
        return child

    monkeypatch.setattr(forkserver, "start_child", slow_start)
    w = ModelWorker(hostile("time.sleep(60)"), "slow.pkl", allow_pickle=True)
    try:
        when = _stop_soon(w, 0.3)
        with pytest.raises(WorkerCancelled, match="stopped while starting"):
            w.describe()
        assert when and not started                         # cancelled before the child even came
        deadline = time.monotonic() + 30
        while not started and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started and started[0].wait(10) is not None   # it came late, and was killed
        assert not w.alive
    finally:
        w.stop()


# ---------------------------------------------------------------- item 6: messages that say what happened
@pytest.mark.parametrize("body, limits, words", [
    ("import ctypes; ctypes.string_at(0)", {}, r"crashed with signal 11 \(SIGSEGV\) while loading"),
    ("x = np.ones(20 * 2**30 // 8)", {"memory_mb": 1024},
     r"ran out of memory while loading .*limit of 1,024 MB.*ATLAS_WORKER_MEMORY_MB"),
    ("time.sleep(600)", {"load_timeout": 2}, r"longer than the time limit of 2 s .*ATLAS_WORKER_LOAD_SECONDS"),
])
def test_a_crash_memory_or_time_at_load_is_named(body, limits, words):
    w = ModelWorker(hostile(body, always=True), "evil.pkl", allow_pickle=True, **limits)
    try:
        with pytest.raises(WorkerError, match=words):
            w.describe()
        assert not w.alive
    finally:
        w.stop()
