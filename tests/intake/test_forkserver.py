"""Sandbox and worker children are forked from a fork server that never reads a file.

Before, every model file read in the sandbox cost a new interpreter importing
numpy, scikit-learn, XGBoost and LightGBM (2-3 s of CPU each); the children now
come from one pre-warmed parent (core.intake.forkserver). What must hold: that
parent runs one thread (forking is only safe then) and never holds an upload's
bytes; every child is a new process that ends with its file; a crash is still
named by its signal; a fork server that died is replaced; and with
``ATLAS_SANDBOX_WARM=0`` children start cold as before.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from core.errors import ModelError
from core.intake import forkserver
from core.intake.sandbox import load_vetted
from core.intake.worker import ModelWorker


def _rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.fixture(scope="module")
def big_forest():
    """A skops file of about 4 MB (60 trees, more once read): it would show in the memory of a process that read it."""
    import skops.io as sio

    X, y = make_classification(4000, 8, random_state=0)
    rf = RandomForestClassifier(n_estimators=60, random_state=0).fit(X, y)
    data = sio.dumps(rf)
    assert len(data) > 3 * 2**20
    return rf, X, data


def test_children_are_forked_from_one_single_threaded_parent_that_holds_no_upload(big_forest):
    rf, X, data = big_forest
    forkserver.stop()
    load_vetted(data, "rf.skops")                            # starts the fork server
    server = forkserver._server.proc
    assert server is not None and server.poll() is None
    before = _rss_kb(server.pid)
    children = set()
    for _ in range(3):
        child = forkserver.spawn("core.intake.sandbox")
        assert isinstance(child, forkserver.ForkedChild)
        children.add(child.pid)
        assert child.pid != server.pid and child.pid != os.getpid()
        child.kill()
        assert child.wait(10) == -signal.SIGKILL                 # how it ended, as for a child of our own
        vetted = load_vetted(data, "rf.skops")
        assert np.array_equal(vetted.ensemble.predict(X), rf.predict(X))
    assert len(children) == 3                                    # a new process each time
    assert forkserver._server.proc is server                     # the same parent all along
    assert _threads(server.pid) == 1
    # four uploads went through children; none of them is in the parent
    assert _rss_kb(server.pid) - before < 1024, (before, _rss_kb(server.pid))


def test_a_crash_in_a_forked_child_is_named_and_the_next_file_is_read():
    from sklearn.datasets import make_classification as mk
    from xgboost import XGBClassifier

    X, y = mk(200, 4, random_state=1)
    m = XGBClassifier(n_estimators=5, max_depth=2).fit(X, y)
    data = bytes(m.get_booster().save_raw("json"))
    load_vetted(data, "m.json")
    assert forkserver._server.proc is not None
    with pytest.raises(ModelError, match="SIGSEGV"):
        load_vetted(data, "m.json", _hook="segfault")
    assert forkserver._server.proc.poll() is None               # the parent is untouched
    assert load_vetted(data, "m.json").ensemble.n_trees == 5


def test_a_fork_server_that_died_is_started_again():
    from xgboost import XGBClassifier

    X, y = make_classification(200, 4, random_state=2)
    data = bytes(XGBClassifier(n_estimators=3, max_depth=2).fit(X, y).get_booster().save_raw("json"))
    load_vetted(data, "m.json")
    old = forkserver._server.proc
    assert old is not None
    old.kill()
    old.wait()
    assert load_vetted(data, "m.json").ensemble.n_trees == 3
    new = forkserver._server.proc
    assert new is not None and new.pid != old.pid and new.poll() is None


def test_the_worker_forks_too_and_stop_ends_only_its_child(big_forest):
    rf, X, data = big_forest
    a, b = ModelWorker(data, "rf.skops"), ModelWorker(data, "rf.skops")
    pa = a.model().predict_proba(X[:50])
    pb = b.model().predict_proba(X[:50])
    assert np.array_equal(pa, rf.predict_proba(X[:50])) and np.array_equal(pb, pa)
    assert isinstance(a._proc, forkserver.ForkedChild) and a._proc.pid != b._proc.pid   # one child per session
    a.stop()
    assert not a.alive and b.alive
    assert np.array_equal(b.model().predict_proba(X[:5]), rf.predict_proba(X[:5]))
    b.stop()


def test_turned_off_children_start_cold(monkeypatch, big_forest):
    rf, X, data = big_forest
    monkeypatch.setenv("ATLAS_SANDBOX_WARM", "0")
    calls = []
    monkeypatch.setattr(forkserver, "spawn", lambda *a, **k: calls.append(a))
    vetted = load_vetted(data, "rf.skops")
    assert np.array_equal(vetted.ensemble.predict(X), rf.predict(X))
    w = ModelWorker(data, "rf.skops")
    assert np.array_equal(w.model().predict(X[:20]), rf.predict(X[:20]))
    assert not isinstance(w._proc, forkserver.ForkedChild)
    w.stop()
    assert calls == [], calls


def test_only_the_entry_points_can_be_asked_for():
    with pytest.raises(ValueError, match="entry point"):
        forkserver.spawn("os")
