"""Map an analysis over many rows: a process pool per run locally, or a Dask cluster,
identical results.

Local pools are kept warm between the runs of one owner (a session of the app:
:data:`POOL_OWNER`; scripts and the CLI are one owner): a run checks a pool out
for itself alone, and a run that ends normally checks it back in, where it waits
``ATLAS_POOL_IDLE`` seconds (default 120) for the owner's next run before its
workers exit. A run that is cancelled or fails kills its workers as before, so
one run's Cancel never reaches another's, and pools are never shared between
owners. A new pool's workers are forked from one fork server per process that
imported numpy, OR-Tools and the analyses once, with one thread (:data:`FORK_ENV`):
started as new interpreters, two workers took about 3 s and 6 CPU-seconds
before their first row, as much as 200 Adult rows of recourse; forked, 0.02 s
once the fork server runs (it starts with the process's first pool, in about
2 s). ``ATLAS_POOL_FORK=0``, or a platform without the ``forkserver`` start
method, starts them as new interpreters (loky's context) as before.

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

import contextlib
import contextvars
import multiprocessing
import os
import pickle
import tempfile
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Sequence, cast

import numpy as np
from joblib.externals.loky.backend import get_context

from core.constraints import Constraints
from core.counterfactual import CounterfactualResult
from core.errors import ClusterError, QueryError
from core.model import Guarantee, LinearModel, as_ensemble
from core.model.features import as_table, feature_indices, feature_roles, reference_rows
from core.model.guarantee import GUARANTEE_KINDS
from core.model.missing import missing_as_states
from core.model.result import Reader, Result, settings
from core.optimal import optimal_counterfactual, resolve_constraints
from core.schema import with_missing_states
from core.settings import N_JOBS, SINGLE_THREAD_ENV, n_jobs_setting, scheduler_setting, solver_threads, validated
from core.surrogate import Surrogate
from core.surrogate.repair import checked_counterfactual
from core.typing import ModelLike, Rows, TargetSpec

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["map_rows", "batch_counterfactuals", "row_queries", "BatchResult", "weakest_guarantee", "connect", "ClusterError", "POOL_OWNER",
           "release_pools", "Coalescer", "RowThreads"]

#: whose runs may reuse each other's warm workers (the app sets its session's id per script run)
POOL_OWNER: contextvars.ContextVar[Any] = contextvars.ContextVar("atlas_pool_owner", default=None)
_MAX_IDLE = 4                      # idle pools kept at most, over every owner
_idle: list[tuple[Any, int, ProcessPoolExecutor, float]] = []      # (owner, workers, pool, idle since)
_idle_lock = threading.Lock()


def _idle_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("ATLAS_POOL_IDLE", "120")))
    except ValueError:
        return 120.0


#: what the fork server imports before its first fork: its workers skip the parent's main module
#: (core/optimal/_forkmain.py), and the modules a run's chunks call
PRELOAD = ["core.optimal._forkmain", "core.optimal.batch", "core.solvers.race", "core.compression", "core.audit.compare",
           "core.audit.stages"]
#: the fork server's environment, and so its workers' (:data:`core.settings.SINGLE_THREAD_ENV`)
FORK_ENV = SINGLE_THREAD_ENV
_fork_lock = threading.Lock()


def _pool_context() -> Any:
    """How a new pool's workers start: forked from the fork server (see the module docstring)."""
    if os.environ.get("ATLAS_POOL_FORK", "1") == "0" or "forkserver" not in multiprocessing.get_all_start_methods():
        return get_context("loky")
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    with _fork_lock:
        ctx.set_forkserver_preload(PRELOAD)
        # The fork server is started (once, or again if it died) with the process's environment:
        # FORK_ENV is set for that moment only, then the process's own values come back.
        saved = {k: os.environ.get(k) for k in FORK_ENV}
        os.environ.update(FORK_ENV)
        try:
            forkserver.ensure_running()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return ctx


def _healthy(pool: ProcessPoolExecutor) -> bool:
    procs = getattr(pool, "_processes", None) or {}
    return (not getattr(pool, "_broken", False) and not getattr(pool, "_shutdown_thread", False)
            and all(p.is_alive() for p in procs.values()))


def _take_expired(now: float) -> list[ProcessPoolExecutor]:
    """Remove from the idle list the pools idle too long (or beyond _MAX_IDLE); the caller ends them."""
    ttl = _idle_seconds()
    keep = [e for e in _idle if now - e[3] < ttl][-_MAX_IDLE:]          # the most recent ones
    old = [e[2] for e in _idle if e not in keep]
    _idle[:] = keep
    return old


def _checkout(owner: Any, workers: int) -> ProcessPoolExecutor:
    """A warm pool of ``owner`` with ``workers`` processes, for this run alone; else a new one."""
    with _idle_lock:
        old = _take_expired(time.monotonic())
        found = None
        for k, (o, w, _pool, _) in enumerate(_idle):
            if o == owner and w == workers:
                found = _idle.pop(k)[2]
                break
    for pool in old:
        _end_pool(pool, kill=False)
    if found is not None and _healthy(found):
        return found
    if found is not None:
        _end_pool(found, kill=True)
    return ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context())


def _checkin(owner: Any, workers: int, pool: ProcessPoolExecutor) -> None:
    """A pool whose run ended normally: kept warm for the owner's next run, or ended."""
    ttl = _idle_seconds()
    if ttl <= 0 or not _healthy(pool):
        _end_pool(pool, kill=False)
        return
    with _idle_lock:
        _idle.append((owner, workers, pool, time.monotonic()))
        old = _take_expired(time.monotonic())
    for p in old:
        _end_pool(p, kill=False)
    timer = threading.Timer(ttl + 0.5, _expire)
    timer.daemon = True
    timer.start()


def _expire() -> None:
    with _idle_lock:
        old = _take_expired(time.monotonic())
    for pool in old:
        _end_pool(pool, kill=False)


def release_pools(owner: object = ...) -> int:
    """End the idle pools of ``owner`` (every owner's by default), e.g. when a
    session closes; the number ended."""
    with _idle_lock:
        gone = [e for e in _idle if owner is ... or e[0] == owner]
        _idle[:] = [e for e in _idle if e not in gone]
    for e in gone:
        _end_pool(e[2], kill=False)
    return len(gone)


def _apply_chunk(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> list[Any]:
    return [fn(item) for item in chunk]


_FN_IN_WORKER: dict[str, Callable[[Any], Any]] = {}     # in a worker: the last runs' functions, by key


def _apply_chunk_shared(ref: tuple[str, str], chunk: Sequence[Any]) -> list[Any]:
    """A chunk whose function a worker reads once per run from the run's file (``ref``:
    key, path) and keeps: the ensemble and data it carries, and what they cache on
    themselves (flattened trees, grids), serve every later chunk of the run."""
    key, path = ref
    fn = _FN_IN_WORKER.get(key)
    if fn is None:
        with open(path, "rb") as f:
            fn = pickle.load(f)
        while len(_FN_IN_WORKER) >= 2:                       # a warm worker keeps two runs' at most
            _FN_IN_WORKER.pop(next(iter(_FN_IN_WORKER)))
        _FN_IN_WORKER[key] = fn
    return [fn(item) for item in chunk]


#: a function pickled larger than this goes to the workers once, through a file, not with every chunk
SHARE_BYTES = 1 << 20


@contextlib.contextmanager
def _shared_function(fn: Callable[[Any], Any]) -> Iterator[tuple[Any, Any]]:
    """(task, first argument) for the chunks: ``fn`` itself when small, else a private
    file (mode 0600, in /dev/shm where there is one) that the workers read once; the
    file is removed when the run ends."""
    data = pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) <= SHARE_BYTES:
        yield _apply_chunk, fn
        return
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    fd, path = tempfile.mkstemp(prefix="atlas-run-", suffix=".pkl", dir=shm)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield _apply_chunk_shared, (uuid.uuid4().hex, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _collect(pairs: Iterable[tuple[int, list[Any]]], out: list[Any], progress, should_stop,
             abort: Callable[[], None], on_chunk: Callable[[int, list[Any]], None] | None = None) -> None:
    """Store each chunk's results at its start index as they arrive, hand them to
    ``on_chunk``, report progress, poll should_stop; when left early (stop, or an
    exception such as the app interrupting the run), abort the pending tasks at once."""
    total, done = len(out), 0
    try:
        for start, res in pairs:
            out[start:start + len(res)] = res
            done += len(res)
            if on_chunk is not None:
                on_chunk(start, list(res))
            if progress is not None:
                progress(done, total)
            if should_stop is not None and should_stop():
                break
    finally:
        if done < total:
            abort()


def _chunk_setting(v: Any) -> str | None:
    ok = v == "auto" and isinstance(v, str) or isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
    return None if ok else "a positive number of items per chunk, or 'auto'"


def _callable_or_none(v: Any) -> str | None:
    return None if v is None or callable(v) else "a function, or None"


@validated(QueryError, n_jobs=n_jobs_setting, scheduler=scheduler_setting, chunk_size=_chunk_setting,
           progress=_callable_or_none, should_stop=_callable_or_none, on_chunk=_callable_or_none)
def map_rows(fn: Callable[[Any], Any], items: Sequence[Any], *, n_jobs: int = 1,
             progress: Callable[[int, int], None] | None = None,
             should_stop: Callable[[], bool] | None = None, chunk_size: int | str = 1,
             scheduler: str | Client | None = None,
             on_chunk: Callable[[int, list[Any]], None] | None = None) -> list[Any]:
    """``[fn(item) for item in items]``, in parallel processes when ``n_jobs != 1``.

    progress(done, total) is called after each item (after each chunk in
    parallel); should_stop() is polled between items (chunks) and, when it
    returns True, the remaining items are skipped (their results are None).
    ``chunk_size`` items go to a process at a time: ``fn`` is sent once per
    chunk and whatever it caches on its arguments is reused within the chunk;
    ``"auto"``: about 8 chunks per worker, at most 16 items each.
    ``on_chunk(start, results)`` is called in the calling thread with each chunk's
    results (items ``start``, ``start + 1``, ...) in input order as they arrive, so
    a caller can start the next stage of those rows while the others are computed.
    """
    items = list(items)
    total = len(items)
    if chunk_size == "auto":
        workers = max(1, _cpus(n_jobs))
        chunk_size = int(np.clip(total // (8 * workers), 1, 16))
    if scheduler:
        return _map_dask(fn, items, scheduler, progress, should_stop, max(1, int(chunk_size)), on_chunk)
    if n_jobs == 1 or total <= 1:
        return _map_here(fn, items, progress, should_stop, on_chunk)
    return _map_local(fn, items, n_jobs, progress, should_stop, max(1, int(chunk_size)), on_chunk)


def _cpus(n_jobs: int) -> int:
    """The processes ``n_jobs`` asks for: a negative number means every core."""
    return (os.cpu_count() or 1) if n_jobs < 0 else n_jobs


def _map_here(fn: Callable[[Any], Any], items: list[Any], progress: Callable[[int, int], None] | None,
              should_stop: Callable[[], bool] | None, on_chunk: Callable[[int, list[Any]], None] | None) -> list[Any]:
    """:func:`map_rows` in this process, one item at a time."""
    total = len(items)
    out: list[Any] = [None] * total
    for i, item in enumerate(items):
        if should_stop is not None and should_stop():
            break
        out[i] = fn(item)
        if on_chunk is not None:
            on_chunk(i, [out[i]])
        if progress is not None:
            progress(i + 1, total)
    return out


def _map_local(fn: Callable[[Any], Any], items: list[Any], n_jobs: int,
               progress: Callable[[int, int], None] | None, should_stop: Callable[[], bool] | None,
               size: int, on_chunk: Callable[[int, list[Any]], None] | None = None) -> list[Any]:
    """The chunks on a process pool that this run alone holds.

    joblib's ``Parallel`` runs on one executor shared by the whole process:
    in a server with many sessions, closing one run's generator (Cancel, a
    rerun) shut the workers down under every other session's run, and two runs
    asking for different process counts deadlocked resizing it. Here each run
    checks out a pool of its own (a warm one of its owner's, or a new one whose
    workers the fork server forks): leaving early kills this
    run's workers and nobody else's; a run that ends normally leaves its pool
    warm for its owner's next run (see the module docstring).
    """
    total = len(items)
    out: list[Any] = [None] * total
    chunks = [items[s:s + size] for s in range(0, total, size)]
    workers = max(1, min(len(chunks), _cpus(n_jobs)))
    owner = POOL_OWNER.get()
    pool = _checkout(owner, workers)
    finished = False
    try:
        with _shared_function(fn) as (task, first):
            try:
                futures = [pool.submit(task, first, c) for c in chunks]
                # Results are taken in input order (as joblib's ordered generator gave them).
                _collect(((i * size, f.result()) for i, f in enumerate(futures)), out, progress, should_stop,
                         lambda: None, on_chunk)
                finished = not (should_stop is not None and should_stop()) and all(f.done() for f in futures)
            finally:
                if not finished:
                    _end_pool(pool, kill=True)          # stopped or failed: the workers go before the run's file
    finally:
        if finished:
            _checkin(owner, workers, pool)
        else:
            _end_pool(pool, kill=True)
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


def connect(scheduler: str | Client, timeout: float = 10.0):
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


def _map_dask(fn: Callable[[Any], Any], items: list[Any], scheduler: Any,
              progress: Callable[[int, int], None] | None, should_stop: Callable[[], bool] | None,
              chunk_size: int, on_chunk: Callable[[int, list[Any]], None] | None = None) -> list[Any]:
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
                 should_stop, lambda: client.cancel(futures), on_chunk)
    finally:
        if owned:
            client.close()
    return out


def _one_cf(args: tuple[np.ndarray, Any], ensemble: Any, kwargs: dict[str, Any]):
    x, target = args
    return optimal_counterfactual(ensemble, x, target, **kwargs)


def row_queries(ensemble: ModelLike, X: Rows, targets: TargetSpec | Iterable[TargetSpec], *, parallel: bool,
                **kwargs: object) -> tuple[Callable[[Any], Any], list[tuple[np.ndarray, Any]]]:
    """The rows of :func:`batch_counterfactuals` for a model read exactly (a tree ensemble or a
    linear model), read and checked once for all rows as it reads them (their missing values,
    the features' roles): the picklable function of one item and the items, ``(row, target)``.
    ``parallel``: the rows run in several processes or on a cluster (then each solve has one
    solver thread, unless ``n_workers`` says otherwise). A caller may map the items in tasks
    of its own (the fairness audit runs them beside its other stages): ``fn(item)`` is the
    row's :class:`core.counterfactual.CounterfactualResult`."""
    kwargs = dict(kwargs)
    _settings_door(kwargs)
    if isinstance(ensemble, LinearModel):       # exact, picklable, no missing states: row by row as given
        A = as_table(X, ensemble.feature_names, error=QueryError, min_rows=0)
        _roles_door(ensemble.feature_names, kwargs)
        kwargs.setdefault("n_workers", 1)
        return partial(_one_cf, ensemble=ensemble, kwargs=kwargs), list(zip(A, _targets(targets, len(A))))
    ens = as_ensemble(ensemble)
    A = as_table(X, ens.feature_names, error=QueryError, missing=True, min_rows=0)
    _roles_door(ens.feature_names, kwargs)
    rows_targets = _targets(targets, len(A))
    ens, A = _missing_door(ens, A, kwargs)
    kwargs.setdefault("n_workers", 1 if parallel else kwargs.get("n_workers", 2))
    return partial(_one_cf, ensemble=ens, kwargs=kwargs), list(zip(A, rows_targets))


@validated(QueryError, n_jobs=n_jobs_setting, scheduler=scheduler_setting)
def batch_counterfactuals(ensemble: ModelLike, X: Rows, targets: TargetSpec | Iterable[TargetSpec], *, n_jobs: int = N_JOBS,
                          progress: Callable[[int, int], None] | None = None,
                          should_stop: Callable[[], bool] | None = None, scheduler: str | Client | None = None,
                          chunk_size: int | str = 1, **kwargs: object) -> BatchResult:
    """Optimal counterfactuals of many rows (see ``core.optimal.optimal_counterfactual``).

    ``X``: the rows, (n, n_features) (an array, or a DataFrame read by name);
    ``targets``: one per row, or one class label for every row. ``n_jobs`` /
    ``scheduler`` as everywhere (:mod:`core.settings`); ``kwargs`` are the optimal
    counterfactual's settings, checked by it. The answer is a :class:`BatchResult`:
    the rows' results in input order (indexed and iterated as a list; None for a row
    not reached when ``should_stop`` stopped the run), with ``params``, ``elapsed``
    and the ``guarantee`` that holds for every row.

    Rows may have missing values (NaN) when the model routes them (HistGradientBoosting,
    XGBoost, LightGBM): they are read as the app reads them
    (:func:`core.model.missing.missing_as_states`), one "is missing" column per
    feature missing somewhere appended after the features, the value column holding
    the feature's median (of ``X_ref`` when given, else of ``X``). Every result then
    has those columns too (``x[d + k]`` is 1 where the k-th such feature stays
    missing; ``model=`` re-checks it on the original model with NaN there); a
    value never becomes missing, and a missing one may get a value at the cost
    of the move from the median.

    Each solve uses one solver thread when rows run in parallel, so results do
    not depend on ``n_jobs``.

    ``constraints`` (among ``kwargs``): the analyst's constraints between features
    (:mod:`core.constraints`: texts, or parsed), read once against ``schema``; default None:
    the schema's own. Each
    row's answer is then its optimum under them, as
    :func:`core.optimal.optimal_counterfactual` gives it with ``constraints=`` (a row no
    action satisfying them can help is ``infeasible``, proven on an exact model); the
    batch's ``params`` name them (``constraints``) and count the rows so precluded
    (``precluded``). Through a surrogate, the check and repair on the model keep them too.
    """
    t0 = time.perf_counter()
    kwargs = dict(kwargs)
    _settings_door(kwargs)
    constraints = kwargs.pop("constraints", None)
    setup: dict[str, Any] = {"n_rows": 0, "n_jobs": n_jobs, "chunk_size": chunk_size, "cluster": scheduler is not None}
    if kwargs.get("surrogate") is not None:
        kwargs["constraints"] = _constraints_door(constraints, kwargs)
        out, n_rows = _through_surrogate(X, targets, n_jobs, progress, should_stop, scheduler, chunk_size, kwargs)
    elif isinstance(ensemble, LinearModel):       # exact, picklable, no missing states: row by row as given
        A = as_table(X, ensemble.feature_names, error=QueryError, min_rows=0)
        _roles_door(ensemble.feature_names, kwargs)
        kwargs["constraints"] = _constraints_door(constraints, kwargs)
        n_rows = len(A)
        kwargs.setdefault("n_workers", 1)
        out = map_rows(partial(_one_cf, ensemble=ensemble, kwargs=kwargs), list(zip(A, _targets(targets, n_rows))),
                       n_jobs=n_jobs, progress=progress, should_stop=should_stop, chunk_size=chunk_size,
                       scheduler=scheduler)
    else:
        ens = as_ensemble(ensemble)
        A = as_table(X, ens.feature_names, error=QueryError, missing=True, min_rows=0)
        _roles_door(ens.feature_names, kwargs)
        n_rows = len(A)
        rows_targets = _targets(targets, n_rows)
        ens, A = _missing_door(ens, A, kwargs)
        kwargs["constraints"] = _constraints_door(constraints, kwargs)
        kwargs.setdefault("n_workers", 1 if (n_jobs != 1 or scheduler) else kwargs.get("n_workers", 2))
        fn = partial(_one_cf, ensemble=ens, kwargs=kwargs)
        out = map_rows(fn, list(zip(A, rows_targets)), n_jobs=n_jobs, progress=progress, should_stop=should_stop,
                       chunk_size=chunk_size, scheduler=scheduler)
    setup["n_rows"] = n_rows                              # the rows as read (as_table keeps their number)
    out = list(out) + [None] * (n_rows - len(out))        # a stopped run: the rows not reached are None
    cons = cast(Constraints, kwargs["constraints"])
    if len(cons):
        setup["constraints"] = cons.texts
        setup["precluded"] = sum(r is not None and r.status == "infeasible" for r in out)
    return BatchResult(tuple(out), _batch_params(setup, out), time.perf_counter() - t0)


def _constraints_door(constraints: Any, kwargs: dict[str, Any]) -> Constraints:
    """The constraints between features in force, read once against the query's schema (the
    schema as the rows are read: widened by "is missing" columns where they have any)."""
    from core.optimal.constrained import resolve_constraints

    schema = kwargs.get("schema")
    if isinstance(constraints, Constraints) and constraints.schema is not schema and schema is not None:
        constraints = constraints.texts                   # read again against the schema the rows are read with
    return resolve_constraints(constraints, schema)


def _settings_door(kwargs: dict[str, Any]) -> None:
    """The solver's threads, checked once here: a wrong count would fail in every row alike."""
    if "n_workers" in kwargs:
        why = solver_threads(kwargs["n_workers"])
        if why is not None:
            raise QueryError(f"batch_counterfactuals(): n_workers={kwargs['n_workers']!r} is not valid; n_workers "
                             f"is {why}.")


def _roles_door(names: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """The roles of the features (names of ``names``, none both increase- and decrease-only),
    checked once here rather than in every row's query."""
    feature_roles(names, error=QueryError, **{r: kwargs.get(r) for r in ("fixed", "increase_only", "decrease_only")})


def _batch_params(setup: dict[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """A batch's settings: how it ran, and the query settings its rows share (a row's own
    ``params``, but for its target: the batch lists the targets asked)."""
    done = [r for r in results if r is not None]
    shared = {k: v for k, v in done[0].params.items() if k != "target"} if done else {}
    targets = sorted({str(r.params.get("target")) for r in done})
    return {**setup, **shared, "targets": targets}


@dataclass(frozen=True, eq=False)
class BatchResult(Result):
    """The optimal counterfactuals of many rows (a :class:`core.model.result.Result`).

    results : one :class:`core.counterfactual.CounterfactualResult` per row, in input
        order; None for a row the run did not reach (stopped by ``should_stop``). The
        batch reads as that list: ``len``, indexing and iteration give the rows' results.
    params : how the batch ran (``n_rows``, ``n_jobs``, ``chunk_size``, ``cluster``) and
        the query settings every row shares, with the ``targets`` asked.
    elapsed : seconds for the whole batch (each row's own is its result's ``elapsed``).
    guarantee : what holds for every row: the weakest of the rows' guarantees (in the
        order of :data:`core.model.guarantee.GUARANTEE_KINDS`, strongest first; a row
        not reached counts as ``not_found``), its note counting the rows of each kind.
    """

    kind: ClassVar[str] = "counterfactual_batch"
    what: ClassVar[str] = "batch of counterfactuals"

    results: tuple[CounterfactualResult | None, ...]
    params: dict[str, Any]
    elapsed: float
    guarantee: Guarantee = None  # type: ignore[assignment]   # None: the weakest of the rows'

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", tuple(self.results))
        object.__setattr__(self, "params", settings(self.params))
        if self.guarantee is None:
            object.__setattr__(self, "guarantee", weakest_guarantee(self.results))

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[CounterfactualResult | None]:
        return iter(self.results)

    def __getitem__(self, i: Any) -> Any:
        return self.results[i]

    def _body(self) -> dict[str, Any]:
        return {"results": [None if r is None else r.to_dict() for r in self.results]}

    @classmethod
    def _from_body(cls, r: Reader) -> "BatchResult":
        rows = tuple(None if d is None else CounterfactualResult.from_dict(d) for d in r.get("results"))
        return cls(rows, dict(r.get("params")), r.number("elapsed"), Guarantee.from_dict(r.get("guarantee")))


def weakest_guarantee(results: Sequence[Any]) -> Guarantee:
    """What holds for every one of ``results`` (each with a ``guarantee``; None for a
    row not reached, which counts as ``not_found``): the weakest kind among them, the
    largest gap when it is ``time_limited``, the lowest surrogate fidelity, and a note
    counting the rows of each kind."""
    gs = [r.guarantee for r in results if r is not None]
    kinds = [g.kind for g in gs] + ["not_found"] * (len(results) - len(gs))
    if not kinds:
        return Guarantee("not_found", note="The batch has no row.")
    worst = max(kinds, key=GUARANTEE_KINDS.index)
    model_kind = gs[0].model_kind if gs else "tree_ensemble"
    note = _kinds_note(kinds, len(results) - len(gs))
    return Guarantee(worst, model_kind,  # type: ignore[arg-type]
                     gap=_largest_gap(gs, worst), surrogate_fidelity=_lowest_fidelity(gs, worst), note=note)


def _largest_gap(gs: list[Guarantee], worst: str) -> float | None:
    """The largest gap of the rows of the weakest kind, when it is ``time_limited``."""
    gaps = [g.gap for g in gs if g.kind == worst and g.gap is not None]
    return max(gaps) if worst == "time_limited" and gaps else None


def _lowest_fidelity(gs: list[Guarantee], worst: str) -> float | None:
    """The lowest surrogate fidelity of the rows, unless every row is proven optimal."""
    fid = [g.surrogate_fidelity for g in gs if g.surrogate_fidelity is not None]
    return min(fid) if fid and worst != "proven_optimal" else None


def _kinds_note(kinds: list[str], missed: int) -> str:
    """The note counting a batch's rows of each kind (and those the stopped run did not reach)."""
    counts = {k: kinds.count(k) for k in GUARANTEE_KINDS if k in kinds}
    words = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())
    return (f"Of the {len(kinds)} rows: {words}" + (f" ({missed} not reached: the run was stopped)" if missed else "")
            + ". Each row's result carries its own guarantee.")


class _Seeded:
    """A solver whose first answer is known (solved in the pool): it is returned once, then
    every later call (a refitted surrogate's query) solves anew."""

    def __init__(self, first: Any):
        self.first = first

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        first, self.first = self.first, None
        return first if first is not None else optimal_counterfactual(*args, **kwargs)


#: rows checked at once on a model in its worker (threads of the calling process)
CHECK_THREADS = 64
#: rows whose checks start together (their calls to the model go together)
WAVE = 64
#: seconds an ask waits for the other rows' asks before it goes alone
LINGER = 0.2


class _Ask:
    """Rows one thread asks of one model (``method``), and the answer once it came."""

    __slots__ = ("model", "method", "X", "t", "out", "error", "done")

    def __init__(self, model: Any, method: str, X: Any):
        self.model, self.method, self.X, self.t = model, method, X, time.monotonic()
        self.out: Any = None
        self.error: BaseException | None = None
        self.done = False


def _stack(parts: list[Any]) -> Any:
    if hasattr(parts[0], "iloc"):                   # a model that takes a frame (named columns)
        import pandas as pd

        return pd.concat(parts, ignore_index=True)
    return np.concatenate([np.atleast_2d(np.asarray(p)) for p in parts])


def _part(out: Any, lo: int, hi: int) -> Any:
    if isinstance(out, dict):                       # BlackBoxModel.answer: label, proba
        return {k: v[lo:hi] for k, v in out.items()}
    return out[lo:hi]


class Coalescer:
    """Calls to models in their workers from many threads, sent together.

    A model that is not read exactly answers from its worker process, and each call
    costs a round trip and the model's own overhead (a scikit-learn pipeline reads a
    frame, whatever its number of rows): checking and repairing one row's counterfactual
    makes 5 to 10 small calls, so 120 rows cost about 800 calls, most of the model's
    time. Threads that run rows at once (each inside :meth:`running`) ask through
    :meth:`wrap`'s proxies; the asks wait until every running thread is waiting for an
    answer (or the first has waited :data:`LINGER` seconds), then go as one call per
    model and method: a batch of rows costs about as many calls as one row makes. The
    answers are the model's own, row for row; only their grouping into calls changes.
    """

    def __init__(self, linger: float | None = None):
        self._cond = threading.Condition()
        self._running = 0
        self._queue: list[_Ask] = []
        self._flying = False
        self.linger = LINGER if linger is None else linger
        self.calls = 0                  # calls made to the models
        self.asks = 0                   # calls the threads made

    def wrap(self, model: ModelLike) -> ModelLike:
        """``model`` whose ``predict``, ``predict_proba`` and ``answer`` go through this coalescer."""
        return None if model is None else _Coalesced(self, model)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """A thread working on a row: the others' asks wait for its own (or the linger)."""
        with self._cond:
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                batch = self._take(force=False)
            if batch:
                self._send(batch)

    def ask(self, model: ModelLike, method: str, X: Rows) -> Any:
        """``model.method(X)`` answered with the other running threads' asks (see the class docstring)."""
        a = _Ask(model, method, X)
        with self._cond:
            self.asks += 1
            self._queue.append(a)
            batch = None
            while not a.done and batch is None:
                old = bool(self._queue) and time.monotonic() - self._queue[0].t >= self.linger
                batch = self._take(force=old)
                if batch is None:
                    self._cond.wait(self.linger)
        if batch:
            self._send(batch)
        with self._cond:
            while not a.done:
                self._cond.wait()
        if a.error is not None:
            raise a.error
        return a.out

    def _take(self, force: bool) -> list[_Ask] | None:
        """The queued asks, to send now (the lock held): when no call is under way and
        every running thread waits (or ``force``)."""
        if self._flying or not self._queue or (len(self._queue) < self._running and not force):
            return None
        batch, self._queue = self._queue, []
        self._flying = True
        return batch

    def _send(self, batch: list[_Ask]) -> None:
        try:
            groups: dict[tuple[int, str], list[_Ask]] = {}
            for a in batch:
                groups.setdefault((id(a.model), a.method), []).append(a)
            for asks in groups.values():
                try:
                    out = getattr(asks[0].model, asks[0].method)(_stack([a.X for a in asks]))
                    self.calls += 1
                    lo = 0
                    for a in asks:
                        n = len(a.X)
                        a.out, lo = _part(out, lo, lo + n), lo + n
                except BaseException as exc:  # noqa: BLE001 - the model's error, raised in each asking thread
                    for a in asks:
                        a.error = exc
        finally:
            with self._cond:
                self._flying = False
                for a in batch:
                    a.done = True
                self._cond.notify_all()


class _Coalesced:
    """A model asked through a :class:`Coalescer` (everything else is the model's own)."""

    def __init__(self, hub: Coalescer, model: Any):
        self._hub, self._model = hub, model

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._model, name)

    def _rows(self, X: Any) -> Any:
        return X if hasattr(X, "iloc") else np.atleast_2d(np.asarray(X, dtype=np.float64))

    def predict(self, X: Any) -> Any:
        return self._hub.ask(self._model, "predict", self._rows(X))

    def predict_proba(self, X: Any) -> Any:
        return self._hub.ask(self._model, "predict_proba", self._rows(X))

    def answer(self, X: Any) -> Any:
        return self._hub.ask(self._model, "answer", self._rows(X))


class RunAlone(Exception):
    """Raised by a row's work in :class:`RowThreads` to start it again in the lane of rows
    that run alone, as ``fn()``."""

    def __init__(self, fn: Callable[[], Any]):
        super().__init__("this row runs alone")
        self.fn = fn


class RowThreads:
    """Rows worked on by threads of this process, each row's calls to the models in
    their workers sent with the other rows' (:class:`Coalescer`); rows are added as
    they become ready (:meth:`add`), and :meth:`results` waits for them in order,
    counting each row once in ``progress`` in the calling thread.

    A row whose work raises :class:`RunAlone` starts again in a lane of its own, one
    such row at a time, asking the models directly: work that is long in this process
    (refitting a surrogate, solving again) would otherwise hold the other rows' calls
    back, and share the interpreter with them against its own time limit."""

    def __init__(self, n: int, progress: Callable[[int, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, threads: int | None = None):
        from concurrent.futures import ThreadPoolExecutor

        self.n, self.progress, self.should_stop = n, progress, should_stop
        self.hub = Coalescer()
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads or CHECK_THREADS), thread_name_prefix="atlas-rows")
        self._alone = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-row-alone")
        self._futures: dict[int, Any] = {}
        self._stopped = threading.Event()
        self._told = 0
        self.alone = 0                     # rows that ran alone

    def add(self, i: int, fn: Callable[[], Any]) -> None:
        """Work on row ``i``: ``fn()`` in a thread, inside :meth:`Coalescer.running`."""
        def run() -> Any:
            if self._stopped.is_set():
                return None
            try:
                with self.hub.running():
                    return fn()
            except RunAlone as again:
                alone = again.fn
            self.alone += 1
            return self._alone.submit(lambda: None if self._stopped.is_set() else alone()).result()

        self._futures[i] = self._pool.submit(run)
        self.tell()

    def stop(self) -> bool:
        if self.should_stop is not None and self.should_stop():
            self._stopped.set()
        return self._stopped.is_set()

    def tell(self) -> None:
        """Report the rows done so far (each row once)."""
        done = sum(f.done() for f in self._futures.values())
        if self.progress is not None and done > self._told:
            self._told = done
            self.progress(done, self.n)

    def results(self) -> list[Any]:
        """Every row's result in order (None: a row not added, or not run after a stop)."""
        from concurrent.futures import FIRST_COMPLETED, wait

        try:
            pending = set(self._futures.values())
            while pending and not self.stop():
                _, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                self.tell()
        finally:
            self.close()
        return [None if (f := self._futures.get(i)) is None or f.cancelled() else f.result() for i in range(self.n)]

    def close(self) -> None:
        """No new row starts; the rows under way end (each within its own time limit)."""
        if any(not f.done() for f in self._futures.values()):
            self._stopped.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._alone.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True, eq=False)
class _RefitAlone(Surrogate):
    """The surrogate of a row checked among others: a refit (a row the model refuses
    twice) sends the row to run alone (:class:`RunAlone`), from its start, with the
    surrogate itself: the answer is the one the row gets on its own."""

    again: Callable[[], Any] | None = field(default=None, repr=False)

    def refit(self, *args: Any, **kwargs: Any) -> Surrogate:
        assert self.again is not None
        raise RunAlone(self.again)


def _check_row(model: Any, x: np.ndarray, target: Any, first: Any, surrogate: Surrogate, kw: dict[str, Any],
               among: Any = None) -> Any:
    """A row's answer checked (and repaired) on the model: among other rows (``among``: the
    model asked through their :class:`Coalescer`) until it needs a refit, else alone."""
    alone = partial(checked_counterfactual, model, x, target, surrogate=surrogate, solve=_Seeded(first), **kw)
    if among is None:
        return alone()
    shared = _RefitAlone(**{f.name: getattr(surrogate, f.name) for f in fields(Surrogate)}, again=alone)
    return checked_counterfactual(among, x, target, surrogate=shared, solve=_Seeded(first), **kw)


def _through_surrogate(X: Any, targets: Any, n_jobs: int, progress: Callable[[int, int], None] | None,
                       should_stop: Callable[[], bool] | None, scheduler: Any, chunk_size: int | str,
                       kwargs: dict[str, Any]) -> tuple[list[Any], int]:
    """Any other model (``model`` with its ``surrogate``): each row's query solved on the
    surrogate in the pool (the model cannot leave its worker), then checked and repaired on
    the model here (:func:`core.surrogate.repair.checked_counterfactual` with the pool's
    answer as its first solve). Rows are checked in waves of :data:`WAVE` as their solves
    arrive, in threads whose calls to the model go together (:class:`RowThreads`); a row
    that needs its surrogate refitted runs alone. ``progress`` counts the rows whose
    answer is final, each once."""
    model, surrogate = kwargs.pop("model", None), kwargs.pop("surrogate")
    if model is None:
        raise QueryError("A surrogate is given without the model it stands for: pass model= as well.")
    ens = surrogate.ensemble
    X = as_table(X, ens.feature_names, error=QueryError, min_rows=0)
    _roles_door(ens.feature_names, kwargs)
    targets = _targets(targets, len(X))
    solve_kw = {k: v for k, v in kwargs.items() if k not in ("on_progress",)}
    solve_kw.setdefault("n_workers", 1 if (n_jobs != 1 or scheduler) else 2)
    n = len(X)
    keep = ("schema", "norm", "weights", "fixed", "increase_only", "decrease_only", "time_limit", "X_ref", "n_workers",
            "constraints")
    check_kw = {k: v for k, v in solve_kw.items() if k in keep}
    # the check and the repair on the model keep the constraints the surrogate's solve kept
    check_kw["constraints"] = resolve_constraints(solve_kw.get("constraints"), solve_kw.get("schema")) or None
    # The surrogate's exact solve starts from its own greedy start: the reference rows' warm start
    # took a third of each solve (Adult, an MLP's surrogate of 100 trees: 49 ms a row with it, 33
    # without), and gave the same proven optimum and the same final answer on 150 of 150 rows. The
    # rows still serve the check: a search on the model starts from those the model accepts.
    first_kw = {**solve_kw, "X_ref": None}
    rows = RowThreads(n, progress, should_stop, threads=WAVE)
    among = rows.hub.wrap(model)
    ready: list[tuple[int, Any]] = []

    def check(wave: int) -> None:
        while ready and len(ready) >= wave:
            for i, first in ready[:wave]:
                rows.add(i, partial(_check_row, model, X[i], targets[i], first, surrogate, check_kw, among))
            del ready[:wave]

    def solved(start: int, results: list[Any]) -> None:
        ready.extend((start + k, first) for k, first in enumerate(results) if first is not None)
        check(WAVE)

    try:
        map_rows(partial(_one_cf, ensemble=ens, kwargs=first_kw), list(zip(X, targets)), n_jobs=n_jobs,
                 should_stop=rows.stop, chunk_size=chunk_size, scheduler=scheduler, on_chunk=solved)
        check(len(ready))
    except BaseException:
        rows.close()
        raise
    return rows.results(), n


def _targets(targets: Any, n: int) -> list[Any]:
    """One target per row: a sequence of ``n`` targets, or one class label for every row."""
    if isinstance(targets, (str, bytes)) or not isinstance(targets, Iterable):
        return [targets] * n
    out = list(targets)
    if len(out) != n:
        raise QueryError(f"targets has {len(out)} entries for {n} rows: give one target per row (or one class "
                         "label for every row).")
    return out


def _missing_door(ens: Any, X: np.ndarray, kwargs: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """Rows with missing values read as the app reads them (:func:`core.model.missing.missing_as_states`):
    the ensemble, the rows, the reference rows, the schema and the weights widened by
    one "is missing" column per feature missing somewhere, which may only go from
    missing to a value."""
    ref = kwargs.get("X_ref")
    if ref is not None:
        ref = reference_rows(ref, ens.feature_names, error=QueryError)
    wide, X2, ref2 = missing_as_states(ens, X, ref, error=QueryError)
    if wide is ens:
        return ens, X
    _refuse_other_models(kwargs)
    states = [wide.feature_names[k] for k in range(ens.n_features, wide.n_features)]
    if ref is not None:
        kwargs["X_ref"] = ref2
    if kwargs.get("schema") is not None:
        kwargs["schema"] = with_missing_states(kwargs["schema"], wide)
    else:                                               # no schema: "is missing" columns only decrease
        kwargs["decrease_only"] = _states_decrease(wide, states, kwargs)
    w = kwargs.get("weights")
    if w is not None and not isinstance(w, dict) and np.ndim(w) >= 1:   # per feature: "is missing" costs 0
        kwargs["weights"] = _padded_weights(w, len(states), ens.n_features)
    return wide, X2


def _refuse_other_models(kwargs: dict[str, Any]) -> None:
    """Plausibility and further models read the features without the "is missing" columns: refused."""
    for key in ("plausibility", "also_valid_for"):
        if kwargs.get(key):
            raise QueryError(f"{key} is not available for rows with missing values (its models read the features "
                             "without the \"is missing\" columns); fill or drop the missing values, or leave "
                             f"{key} out.")


def _states_decrease(wide: Any, states: list[str], kwargs: dict[str, Any]) -> list[str]:
    """The decrease-only features without a schema: those given, and every "is missing" column
    not named fixed or increase-only."""
    names = wide.feature_names
    named = {names[j] for role in ("fixed", "increase_only")
             for j in feature_indices(names, kwargs.get(role), error=QueryError, what=role)}
    return [names[j] for j in feature_indices(names, kwargs.get("decrease_only"), error=QueryError,
                                              what="decrease_only")] + [n for n in states if n not in named]


def _padded_weights(w: Any, n_states: int, d: int) -> Any:
    """Per-feature weights with the "is missing" columns' (cost 0) added, when given for the d features."""
    arr = np.asarray(w, dtype=float)
    pad = np.zeros((n_states,) + arr.shape[1:])
    return np.concatenate([arr, pad]) if arr.shape[:1] == (d,) else w
