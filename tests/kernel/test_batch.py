"""core.optimal.batch: parallel map in input order, early stop, and a run interrupted
while another starts (as when the app reruns a page during a long run)."""

from __future__ import annotations

import gc
import time
import warnings

import numpy as np
import pytest

from core.optimal import batch
from core.optimal.batch import POOL_OWNER, map_rows, release_pools


def _warm_pids() -> set[int]:
    """The processes of the idle pools kept warm."""
    with batch._idle_lock:
        return {p.pid for _, _, pool, _ in batch._idle for p in (pool._processes or {}).values()}


def _pid(_):
    import os

    time.sleep(0.05)
    return os.getpid()


def _double(x):
    time.sleep(0.02)
    return 2 * x


@pytest.mark.parametrize("chunk", [1, 3])
def test_parallel_results_are_in_input_order(chunk):
    assert map_rows(_double, list(range(23)), n_jobs=2, chunk_size=chunk) == [2 * i for i in range(23)]


def test_should_stop_skips_the_rest():
    out = map_rows(_double, list(range(40)), n_jobs=2, should_stop=lambda: True)
    assert out[0] == 0 and out.count(None) > 0


class _Interrupt(Exception):
    pass


def test_an_interrupted_run_does_not_break_the_next_one():
    kept = {}

    def interrupt(done, total):
        if done >= 4:
            raise _Interrupt()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            map_rows(_double, list(range(200)), n_jobs=2, progress=interrupt)
        except _Interrupt as exc:
            kept["exc"] = exc   # its traceback keeps the interrupted run's frame alive

        def release_old(done, total):
            if done == 2:
                kept.clear()
                gc.collect()    # the old run is collected while the new one is running

        assert map_rows(_double, list(range(10)), n_jobs=2, progress=release_old) == [2 * i for i in range(10)]


def test_dask_cluster_gives_the_same_results_as_local_joblib(dask_scheduler):
    from conftest import make_data
    from sklearn.ensemble import RandomForestClassifier

    from core.optimal.batch import batch_counterfactuals

    X, y = make_data("binary", n=300, d=5, seed=4)
    model = RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0).fit(X, y)
    rows = X[:12]
    targets = [1 - p for p in model.predict(rows)]
    seen = []
    local = batch_counterfactuals(model, rows, targets, n_jobs=2, X_ref=X)
    remote = batch_counterfactuals(model, rows, targets, scheduler=dask_scheduler, X_ref=X, chunk_size=5,
                                   progress=lambda d, t: seen.append((d, t)))
    assert [r.status for r in remote] == [r.status for r in local] == ["optimal"] * 12
    assert [r.cost for r in remote] == pytest.approx([r.cost for r in local], rel=1e-9)
    assert all(np.array_equal(a.x, b.x) for a, b in zip(local, remote))
    assert seen[-1] == (12, 12) and [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.slow
def test_dask_stop_and_a_bad_address(dask_scheduler):
    from core.optimal.batch import ClusterError

    out = map_rows(_double, list(range(30)), scheduler=dask_scheduler, should_stop=lambda: True)
    assert out.count(None) > 0
    with pytest.raises(ClusterError, match="Cannot reach the Dask scheduler"):
        map_rows(_double, [1, 2], scheduler="tcp://127.0.0.1:1")


def _kids(pid: int) -> set[int]:
    """The processes whose parent is ``pid``, read from each process's ``/proc/<pid>/stat``
    (the threads' ``children`` lists exist only on kernels built with them, and read empty
    where they do not)."""
    from pathlib import Path

    kids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:        # a process may end while we look
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.add(int(entry.name))
    return kids


def _children() -> set[int]:
    """The pools' worker processes alive now: the children of this process's fork server
    (core.optimal.batch forks workers from it), or, started as new interpreters
    (ATLAS_POOL_FORK=0), this process's loky children; not the fork server or a tracker."""
    import os
    from pathlib import Path

    out = set()
    for k in _kids(os.getpid()):
        try:
            cmd = Path(f"/proc/{k}/cmdline").read_bytes()
            if b"multiprocessing.forkserver" in cmd:
                out |= _kids(k)
            elif b"loky" in cmd and b"resource_tracker" not in cmd:   # the tracker is one per server
                out.add(k)
        except OSError:
            continue
    return out


def _slow(x):
    time.sleep(0.2)
    return x + 1


def test_one_runs_cancel_does_not_stop_another_run_at_the_same_time():
    """Two sessions' runs at once: one is cancelled half-way (as a Streamlit rerun
    interrupts it), the other, with another process count, still finishes with every
    result; the cancelled run leaves no worker behind."""
    import threading

    before = _children()
    results: dict[str, object] = {}
    started = threading.Event()

    def survivor():
        def note(done, total):
            started.set()
        results["other"] = map_rows(_slow, list(range(24)), n_jobs=3, progress=note)

    def cancelled():
        started.wait(60)

        def interrupt(done, total):
            if done >= 2:
                raise _Interrupt()
        try:
            map_rows(_slow, list(range(200)), n_jobs=2, progress=interrupt)
        except _Interrupt:
            results["cancelled"] = True

    threads = [threading.Thread(target=survivor), threading.Thread(target=cancelled)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a run hung (pool resize deadlock?)"
    assert results.get("cancelled") is True
    assert results["other"] == [i + 1 for i in range(24)]
    # the finished run's pool waits warm for its owner's next run; the cancelled run left no worker
    deadline = time.time() + 10
    while (_children() - before) - _warm_pids() and time.time() < deadline:
        time.sleep(0.1)
    assert not ((_children() - before) - _warm_pids()), "worker processes of the cancelled run are still alive"
    release_pools()
    deadline = time.time() + 10
    while _children() - before and time.time() < deadline:
        time.sleep(0.1)
    assert not (_children() - before), "worker processes of the runs are still alive"


def test_a_cancel_stops_the_running_chunks_at_once():
    """Leaving early kills the run's own workers: a chunk in progress does not keep a core busy."""
    told: list[float] = []
    with pytest.raises(_Interrupt):
        def interrupt(done, total):
            told.append(time.time())
            raise _Interrupt()
        map_rows(_slow, list(range(60)), n_jobs=2, chunk_size=20, progress=interrupt)
    # the first chunk (20 x 0.2 s) had to finish; the one beside it is killed and the third never
    # starts (4 s more each if waited for). Timed from the cancel, not from the start: starting the
    # workers on a machine busy with other tests is not what this measures.
    assert len(told) == 1 and time.time() - told[0] < 2.0


def test_an_owners_next_run_reuses_its_warm_workers_and_nobody_elses():
    """Warm pools: the same owner's second run gets the same worker processes; another
    owner never gets them; a cancelled run's pool is killed, not kept; idle pools end."""
    release_pools()
    token = POOL_OWNER.set("session-a")
    try:
        first = set(map_rows(_pid, list(range(8)), n_jobs=2))
        second = set(map_rows(_pid, list(range(8)), n_jobs=2))
        assert len(first) == 2 and second == first                 # warm: the same two processes
        POOL_OWNER.set("session-b")
        other = set(map_rows(_pid, list(range(8)), n_jobs=2))
        assert not (other & first)                                  # another session: its own workers
        assert _warm_pids() == first | other

        def interrupt(done, total):
            raise _Interrupt()
        with pytest.raises(_Interrupt):                              # session b cancels its next run
            map_rows(_slow, list(range(40)), n_jobs=2, progress=interrupt)
        deadline = time.time() + 10
        while _warm_pids() != first and time.time() < deadline:
            time.sleep(0.1)
        assert _warm_pids() == first                                # b's pool was killed, a's is untouched
        POOL_OWNER.set("session-a")
        assert set(map_rows(_pid, list(range(8)), n_jobs=2)) == first
    finally:
        POOL_OWNER.reset(token)
    assert release_pools("session-a") == 1 and _warm_pids() == set()


def test_idle_pools_end_after_their_time(monkeypatch):
    release_pools()
    monkeypatch.setenv("ATLAS_POOL_IDLE", "1")
    before = _children()
    pids = set(map_rows(_pid, list(range(6)), n_jobs=2))
    assert pids <= _children()
    deadline = time.time() + 15
    while (_children() & pids) and time.time() < deadline:
        time.sleep(0.2)
    assert not (_children() & pids) and _warm_pids() == set() and not (_children() - before)
    monkeypatch.setenv("ATLAS_POOL_IDLE", "0")                  # 0: no pool is kept at all
    map_rows(_pid, list(range(6)), n_jobs=2)
    assert _warm_pids() == set()


def _row_sum(x, table):
    return float(table[x].sum())


def test_a_large_function_goes_to_each_worker_once_and_its_file_is_removed(monkeypatch, tmp_path):
    """A function carrying a large table (as an ensemble with its data does) is written once
    to a private file the workers read once per run; the results are the same, and the file
    is gone when the run ends, finished or cancelled."""
    import fnmatch
    import functools
    import os

    table = np.arange(400_000, dtype=float).reshape(4000, 100)           # 3.2 MB pickled
    fn = functools.partial(_row_sum, table=table)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    pattern = os.path.join(shm or __import__("tempfile").gettempdir(), "atlas-run-*.pkl")
    seen = []
    real = batch._shared_function

    @__import__("contextlib").contextmanager
    def spy(f):
        with real(f) as (task, first):
            mode = os.stat(first[1]).st_mode & 0o777 if task is batch._apply_chunk_shared else None
            seen.append((task, first, mode))
            yield task, first
    monkeypatch.setattr(batch, "_shared_function", spy)
    assert map_rows(fn, list(range(50)), n_jobs=2, chunk_size=3) == [float(table[i].sum()) for i in range(50)]
    assert seen[0][0] is batch._apply_chunk_shared and seen[0][2] == 0o600     # a file only its owner reads
    # the run's own file is gone (other runs, e.g. another test worker's, may have theirs meanwhile)
    assert fnmatch.fnmatch(seen[0][1][1], pattern) and not os.path.exists(seen[0][1][1])

    def interrupt(done, total):
        raise _Interrupt()
    with pytest.raises(_Interrupt):
        map_rows(fn, list(range(50)), n_jobs=2, chunk_size=3, progress=interrupt)
    assert len(seen) == 2 and seen[1][0] is batch._apply_chunk_shared and not os.path.exists(seen[1][1][1])
    small = map_rows(_double, list(range(6)), n_jobs=2)                     # small: sent with each chunk
    assert small == [2 * i for i in range(6)] and seen[-1][0] is batch._apply_chunk


def test_workers_are_forked_from_a_single_threaded_fork_server(monkeypatch):
    """A new pool's workers are forked from the process's fork server, which runs one
    thread (one per numeric library, no allocator thread: forking is safe only then);
    the setting is the fork server's and its workers', not this process's."""
    import os
    from pathlib import Path

    monkeypatch.delenv("ATLAS_POOL_FORK", raising=False)
    env_before = {k: os.environ.get(k) for k in batch.FORK_ENV}
    release_pools()
    token = POOL_OWNER.set("fork-check")
    try:
        pids = set(map_rows(_pid, list(range(8)), n_jobs=2))
    finally:
        POOL_OWNER.reset(token)
    servers = [k for k in _kids(os.getpid()) if b"multiprocessing.forkserver" in Path(f"/proc/{k}/cmdline").read_bytes()]
    assert len(servers) == 1
    assert pids <= _kids(servers[0])
    assert len(list(Path(f"/proc/{servers[0]}/task").iterdir())) == 1
    server_env = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{servers[0]}/environ").read_bytes().split(b"\0") if b"=" in kv)
    assert {k: server_env.get(k.encode()) for k in batch.FORK_ENV} == {k: v.encode() for k, v in batch.FORK_ENV.items()}
    assert {k: os.environ.get(k) for k in batch.FORK_ENV} == env_before
    assert release_pools("fork-check") == 1


def test_a_new_worker_never_runs_the_parents_main_script(tmp_path, monkeypatch):
    """Streamlit runs each page script as ``__main__``: a new worker must run only the
    run's function, never that script again (multiprocessing's preparation of a
    spawned or forked child would run it)."""
    import sys
    import types

    marker = tmp_path / "ran"
    script = tmp_path / "page.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('the page script ran in a worker')\n")
    page = types.ModuleType("__main__")
    page.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", page)
    token = POOL_OWNER.set("main-check")
    try:
        assert map_rows(_double, list(range(6)), n_jobs=2) == [0, 2, 4, 6, 8, 10]
    finally:
        POOL_OWNER.reset(token)
    assert release_pools("main-check") == 1
    assert not marker.exists()
