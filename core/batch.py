"""Map an analysis over many rows: joblib processes locally, identical results.

``map_rows(fn, items, n_jobs=...)`` calls ``fn(item)`` for each item and
returns the results in input order, reporting progress as they arrive.
``fn`` must be picklable (a module-level function or a ``functools.partial``
of one) when ``n_jobs != 1``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterable, Sequence

import numpy as np

__all__ = ["map_rows", "batch_counterfactuals"]


def _apply_chunk(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> list[Any]:
    return [fn(item) for item in chunk]


def map_rows(fn: Callable[[Any], Any], items: Sequence[Any], *, n_jobs: int = 1,
             progress: Callable[[int, int], None] | None = None,
             should_stop: Callable[[], bool] | None = None, chunk_size: int = 1) -> list[Any]:
    """``[fn(item) for item in items]``, in parallel processes when ``n_jobs != 1``.

    progress(done, total) is called after each item (after each chunk in
    parallel); should_stop() is polled between items (chunks) and, when it
    returns True, the remaining items are skipped (their results are None).
    ``chunk_size`` items go to a process at a time: ``fn`` is sent once per
    chunk and whatever it caches on its arguments is reused within the chunk.
    """
    items = list(items)
    total = len(items)
    out: list[Any] = [None] * total
    if n_jobs == 1 or total <= 1:
        for i, item in enumerate(items):
            if should_stop is not None and should_stop():
                break
            out[i] = fn(item)
            if progress is not None:
                progress(i + 1, total)
        return out
    from joblib import Parallel, delayed

    size = max(1, int(chunk_size))
    chunks = [items[s:s + size] for s in range(0, total, size)]
    gen = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_apply_chunk)(fn, c) for c in chunks)
    done = 0
    try:
        for res in gen:
            out[done:done + len(res)] = res
            done += len(res)
            if progress is not None:
                progress(done, total)
            if should_stop is not None and should_stop():
                break
    finally:
        # Left early (stop, or an exception such as the app interrupting the
        # run): abort the pending tasks now. A generator left to the garbage
        # collector shuts the shared worker pool down whenever it is collected,
        # possibly in the middle of the next run.
        if done < total:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)   # "N tasks ... have been cancelled"
                gen.close()
    return out


def _one_cf(args: tuple[np.ndarray, Any], ensemble: Any, kwargs: dict[str, Any]):
    from core.optimal import optimal_counterfactual

    x, target = args
    return optimal_counterfactual(ensemble, x, target, **kwargs)


def batch_counterfactuals(ensemble: Any, X: np.ndarray, targets: Iterable[Any], *, n_jobs: int = 1,
                          progress: Callable[[int, int], None] | None = None,
                          should_stop: Callable[[], bool] | None = None, **kwargs: Any) -> list[Any]:
    """Optimal counterfactuals of many rows (see ``core.optimal.optimal_counterfactual``).

    Each solve uses one solver thread when rows run in parallel, so results do
    not depend on ``n_jobs``.
    """
    X = np.asarray(X, dtype=float)
    kwargs = dict(kwargs)
    kwargs.setdefault("n_workers", 1 if n_jobs != 1 else kwargs.get("n_workers", 2))
    fn = partial(_one_cf, ensemble=ensemble, kwargs=kwargs)
    return map_rows(fn, list(zip(X, targets)), n_jobs=n_jobs, progress=progress, should_stop=should_stop)
