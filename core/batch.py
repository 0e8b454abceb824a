"""Map an analysis over many rows: a process pool per run locally, or a Dask cluster,
identical results.

``map_rows(fn, items, n_jobs=..., scheduler=...)`` calls ``fn(item)`` for each
item and returns the results in input order, reporting progress as they
arrive. ``fn`` must be picklable (a module-level function or a
``functools.partial`` of one) when ``n_jobs != 1`` or on a cluster. With
``scheduler`` (a ``dask.distributed`` scheduler address such as
``tcp://10.0.0.5:8786``, or a ``Client``) the chunks of items run on the
cluster's workers instead of local processes; ``fn`` is sent to every worker
once.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from joblib.externals.loky.backend import get_context

from core.errors import ClusterError
from core.optimal import optimal_counterfactual

__all__ = ["map_rows", "batch_counterfactuals", "connect", "ClusterError"]


def _apply_chunk(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> list[Any]:
    return [fn(item) for item in chunk]


def _collect(pairs: Iterable[tuple[int, list[Any]]], out: list[Any], progress, should_stop,
             abort: Callable[[], None]) -> None:
    """Store each chunk's results at its start index as they arrive, report
    progress, poll should_stop; when left early (stop, or an exception such as
    the app interrupting the run), abort the pending tasks at once."""
    total, done = len(out), 0
    try:
        for start, res in pairs:
            out[start:start + len(res)] = res
            done += len(res)
            if progress is not None:
                progress(done, total)
            if should_stop is not None and should_stop():
                break
    finally:
        if done < total:
            abort()


def map_rows(fn: Callable[[Any], Any], items: Sequence[Any], *, n_jobs: int = 1,
             progress: Callable[[int, int], None] | None = None,
             should_stop: Callable[[], bool] | None = None, chunk_size: int | str = 1,
             scheduler: Any = None) -> list[Any]:
    """``[fn(item) for item in items]``, in parallel processes when ``n_jobs != 1``.

    progress(done, total) is called after each item (after each chunk in
    parallel); should_stop() is polled between items (chunks) and, when it
    returns True, the remaining items are skipped (their results are None).
    ``chunk_size`` items go to a process at a time: ``fn`` is sent once per
    chunk and whatever it caches on its arguments is reused within the chunk;
    ``"auto"``: about 8 chunks per worker, at most 16 items each.
    """
    items = list(items)
    total = len(items)
    out: list[Any] = [None] * total
    if chunk_size == "auto":
        workers = (os.cpu_count() or 1) if n_jobs < 0 else max(1, n_jobs)
        chunk_size = int(np.clip(total // (8 * workers), 1, 16))
    if scheduler:
        return _map_dask(fn, items, scheduler, progress, should_stop, max(1, int(chunk_size)))
    if n_jobs == 1 or total <= 1:
        for i, item in enumerate(items):
            if should_stop is not None and should_stop():
                break
            out[i] = fn(item)
            if progress is not None:
                progress(i + 1, total)
        return out
    return _map_local(fn, items, n_jobs, progress, should_stop, max(1, int(chunk_size)))


def _map_local(fn, items, n_jobs, progress, should_stop, size):
    """The chunks on a process pool that this run alone owns.

    joblib's ``Parallel`` runs on one executor shared by the whole process:
    in a server with many sessions, closing one run's generator (Cancel, a
    rerun) shut the workers down under every other session's run, and two runs
    asking for different process counts deadlocked resizing it. Here each run
    starts its own pool (workers started as joblib starts them, by loky's
    context) and, whether it ends, fails or is cancelled, ends it: leaving
    early kills this run's workers and nobody else's.
    """
    total = len(items)
    out: list[Any] = [None] * total
    chunks = [items[s:s + size] for s in range(0, total, size)]
    workers = min(len(chunks), (os.cpu_count() or 1) if n_jobs < 0 else n_jobs)
    pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=get_context("loky"))
    finished = False
    try:
        futures = [pool.submit(_apply_chunk, fn, c) for c in chunks]
        # Results are taken in input order (as joblib's ordered generator gave them).
        _collect(((i * size, f.result()) for i, f in enumerate(futures)), out, progress, should_stop,
                 lambda: None)
        finished = True
    finally:
        _end_pool(pool, kill=not finished)
    return out


def _end_pool(pool: ProcessPoolExecutor, *, kill: bool) -> None:
    """Shut a run's pool down; ``kill``: drop its queued chunks and stop the
    chunks running now (their processes are terminated) instead of waiting."""
    if not kill:
        pool.shutdown(wait=True)
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)


def connect(scheduler: Any, timeout: float = 10.0):
    """A ``dask.distributed.Client`` for an address (or the client given), and
    whether we opened it (and must close it)."""
    try:
        from dask.distributed import Client
    except ImportError:  # pragma: no cover - dask is in requirements.txt
        raise ClusterError("Dask is not installed: pip install 'dask[distributed]'.") from None
    if isinstance(scheduler, Client):
        return scheduler, False
    try:
        return Client(str(scheduler), timeout=timeout), True
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"Cannot reach the Dask scheduler at {scheduler!r} ({exc}). Check the address "
                           "(tcp://HOST:8786) and that the scheduler runs, or clear it to run locally.") from None


def _map_dask(fn, items, scheduler, progress, should_stop, chunk_size):
    from dask.distributed import as_completed

    client, owned = connect(scheduler)
    total = len(items)
    out: list[Any] = [None] * total
    try:
        chunks = [items[s:s + chunk_size] for s in range(0, total, chunk_size)]
        [fn_remote] = client.scatter([fn], broadcast=True, hash=False)
        futures = client.map(_apply_chunk, [fn_remote] * len(chunks), chunks, pure=False)
        start = {f.key: i * chunk_size for i, f in enumerate(futures)}
        _collect(((start[fut.key], res) for fut, res in as_completed(futures, with_results=True)), out, progress,
                 should_stop, lambda: client.cancel(futures))
    finally:
        if owned:
            client.close()
    return out


def _one_cf(args: tuple[np.ndarray, Any], ensemble: Any, kwargs: dict[str, Any]):
    x, target = args
    return optimal_counterfactual(ensemble, x, target, **kwargs)


def batch_counterfactuals(ensemble: Any, X: np.ndarray, targets: Iterable[Any], *, n_jobs: int = 1,
                          progress: Callable[[int, int], None] | None = None,
                          should_stop: Callable[[], bool] | None = None, scheduler: Any = None,
                          chunk_size: int | str = 1, **kwargs: Any) -> list[Any]:
    """Optimal counterfactuals of many rows (see ``core.optimal.optimal_counterfactual``).

    Each solve uses one solver thread when rows run in parallel, so results do
    not depend on ``n_jobs``.
    """
    X = np.asarray(X, dtype=float)
    kwargs = dict(kwargs)
    kwargs.setdefault("n_workers", 1 if (n_jobs != 1 or scheduler) else kwargs.get("n_workers", 2))
    fn = partial(_one_cf, ensemble=ensemble, kwargs=kwargs)
    return map_rows(fn, list(zip(X, targets)), n_jobs=n_jobs, progress=progress, should_stop=should_stop,
                    chunk_size=chunk_size, scheduler=scheduler)
