"""One calling shape for every analysis: keyword-only settings, checked at the call.

Every analysis takes its settings as explicit keyword-only parameters with
their defaults in the signature (so an editor and a type checker see them) and
is wrapped by :func:`validated`, which states declaratively what each setting
accepts. A misspelt or unknown keyword, or a value outside a setting's
choices, fails at the call with the valid choices named, in the analysis's own
error class (all ``ValueError``: :mod:`core.errors`), before any work starts.

Parallelism has one home here: ``n_jobs`` (local processes of our own pool: a
positive count, or -1 for every core) and ``scheduler`` (a Dask scheduler
address or Client, :mod:`core.optimal.batch`) mean the same in every analysis
that takes them (FCCA, the audit, batches of rows, the model comparison), with
the same default :data:`N_JOBS`. Threads inside one computation are
``n_workers``: a solver's (CP-SAT, Gurobi) and the counterfactual rules'
surrogate forest's (its scikit-learn fit); ``CounterfactualRules(n_jobs=...)``,
which meant those threads, is a deprecated alias of ``n_workers``.

Defaults shared by the analyses are defined here once: :data:`TIME_LIMIT` for one
query (the optimal counterfactual, the exact regions, the case story),
:data:`ROW_TIME_LIMIT` for each row of an analysis that solves many (FCCA, the
audit, the model comparison: 500 rows at 30 s each would be hours, so each row
gets less), and :data:`RANDOM_STATE`, the seed of every analysis that samples
or fits a surrogate (the audit, the comparison, T-CREx, the counterfactual
rules), so that the same call gives the same answer unless a seed is chosen.
The cost vocabulary is one too: ``norm`` is ``"l0"``, ``"l1"``, ``"l2"``
(squared) or a mix such as ``{"l0": 0.1, "l1": 1.0}`` (:func:`norm_setting`) in
every analysis that takes a cost, FCCA included (its ``lambda0/1/2`` are
aliases of that mix's weights).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any, Callable, TypeGuard, TypeVar

import numpy as np

from core.errors import AtlasError, positional

__all__ = ["validated", "one_of", "positive", "seconds", "integer", "nonnegative", "probability", "open_probability", "boolean", "norm_setting", "cell_norm_setting", "n_jobs_setting",
           "scheduler_setting", "optional", "N_JOBS", "TIME_LIMIT", "ROW_TIME_LIMIT", "RANDOM_STATE",
           "n_workers_setting", "solver_threads", "max_workers", "SINGLE_THREAD_ENV"]

N_JOBS = 1        #: the default number of local processes of every analysis that takes ``n_jobs``
TIME_LIMIT = 30.0     #: seconds for one query (optimal counterfactual, exact regions, case story)
ROW_TIME_LIMIT = 10.0  #: seconds for each row of an analysis over many rows (FCCA, audit, comparison)
RANDOM_STATE = 0  #: the default seed of every analysis that samples or fits a surrogate
#: the environment of a process that only forks workers (a pool's fork server, the intake's): one
#: thread per numeric library and no background thread of Arrow's allocator (pyarrow, imported
#: with pandas, starts one by default), so that it forks from a single thread (the only safe fork)
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                     "JE_ARROW_MALLOC_CONF": "background_thread:false"}

Check = Callable[[object], "str | None"]      # None when the value is valid, else what is expected
F = TypeVar("F", bound=Callable[..., Any])


def one_of(*choices: object) -> Check:
    """One of ``choices``."""
    def check(v: object) -> str | None:
        return None if any(v == c and type(v) is type(c) for c in choices) else f"one of {list(choices)}"
    return check


def positive(v: object) -> str | None:
    """A positive, finite number."""
    ok = _real(v) and math.isfinite(v) and v > 0
    return None if ok else "a positive, finite number"


def seconds(v: object) -> str | None:
    """A time limit: a positive, finite number of seconds (NaN or inf would never expire)."""
    return None if positive(v) is None else "a time limit: a positive, finite number of seconds"


def _real(v: object) -> TypeGuard[float]:     # a numbers.Real: compares as a float does
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _int(v: object) -> TypeGuard[int]:     # a numbers.Integral (numpy's too): compares as an int does
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def integer(minimum: int | None = None) -> Check:
    """An integer, at least ``minimum``."""
    def check(v: object) -> str | None:
        ok = _int(v) and (minimum is None or v >= minimum)
        return None if ok else "an integer" + (f" >= {minimum}" if minimum is not None else "")
    return check


def probability(v: object) -> str | None:
    """A number in [0, 1]."""
    ok = _real(v) and 0 <= v <= 1
    return None if ok else "a number between 0 and 1"


def nonnegative(v: object) -> str | None:
    """A finite number >= 0."""
    return None if _real(v) and math.isfinite(v) and v >= 0 else "a finite number >= 0"


def open_probability(v: object) -> str | None:
    """A number strictly between 0 and 1."""
    return None if _real(v) and 0 < v < 1 else "a number strictly between 0 and 1"


def boolean(v: object) -> str | None:
    return None if isinstance(v, (bool, np.bool_)) else "True or False"


def optional(check: Check) -> Check:
    """None, or what ``check`` accepts."""
    def inner(v: object) -> str | None:
        if v is None:
            return None
        got = check(v)
        return None if got is None else f"None or {got}"
    return inner


def norm_setting(v: object) -> str | None:
    """"l0", "l1", "l2" (squared), or a mix {"l0": w0, "l1": w1, "l2": w2} of non-negative weights."""
    if isinstance(v, str) and v in ("l0", "l1", "l2"):
        return None
    if isinstance(v, Mapping) and v and set(v) <= {"l0", "l1", "l2"} and all(
            _real(w) and math.isfinite(w) and w >= 0
            for w in v.values()) and sum(v.values()) > 0:
        return None
    return "'l0', 'l1', 'l2' or a mix such as {'l0': 0.1, 'l1': 1.0} of non-negative weights, not all zero"


def cell_norm_setting(v: object) -> str | None:
    """:func:`norm_setting`, or "linf" (the largest weighted, range-scaled change): the
    optimal counterfactual on a tree ensemble takes it, the other methods do not."""
    if isinstance(v, str) and v == "linf":
        return None
    got = norm_setting(v)
    return None if got is None else got.replace("'l2' or", "'l2', 'linf' or")


def max_workers() -> int:
    """The most processes (``n_jobs``) or threads (``n_workers``) a call may ask for on
    this machine: four per core, at least 32. More only queue behind each other, and a
    count such as ``10**6`` would have the pool or the solver try to start a million
    of them (out of memory, or the operating system's limit on threads) instead of
    saying what is wrong."""
    return max(32, 4 * (os.cpu_count() or 1))


def _count_up_to_cap(v: object, unit: str, minus_one: bool) -> str | None:
    every = ", or -1 for every core" if minus_one else ""
    cap = max_workers()
    if _int(v) and int(v) > cap:
        return (f"at most {cap:,} {unit} on this machine ({os.cpu_count() or 1} cores; more only wait for each "
                f"other){every}")
    ok = _int(v) and (int(v) >= 1 or (minus_one and int(v) == -1))
    return None if ok else f"a positive number of {unit} (at most {cap:,}){every}"


def n_jobs_setting(v: object) -> str | None:
    """Local processes: 1 up to :func:`max_workers`, or -1 for every core."""
    return _count_up_to_cap(v, "processes", minus_one=True)


def n_workers_setting(v: object) -> str | None:
    """Threads inside one computation: 1 up to :func:`max_workers`, or -1 for every core."""
    return _count_up_to_cap(v, "threads", minus_one=True)


def solver_threads(v: object) -> str | None:
    """A solver's threads (CP-SAT, Gurobi): 1 up to :func:`max_workers`."""
    return _count_up_to_cap(v, "threads", minus_one=False)


def scheduler_setting(v: object) -> str | None:
    if v is None or isinstance(v, str) or hasattr(v, "submit"):
        return None
    return "None or '' (local processes), a Dask scheduler address such as 'tcp://host:8786', or a dask Client"


def validated(error: type[Exception], **checks: Check) -> Callable[[F], F]:
    """Check an analysis's keyword settings at the call.

    ``checks`` names a parameter of the decorated function and what it accepts
    (a function returning None when the value is valid, else the description
    of what is expected). A keyword the function does not take raises
    ``error`` naming the closest setting and listing them all; a value a check
    refuses raises ``error`` saying what was given and what is expected. A
    value left at its default is not checked."""
    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)
        names = [n for n, p in sig.parameters.items() if p.kind is not p.VAR_KEYWORD]
        unknown_checks = set(checks) - set(names)
        if unknown_checks:
            raise TypeError(f"validated: {fn.__name__} has no parameter {sorted(unknown_checks)}")
        settings = [n for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY]
        passes_on = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())   # **kwargs checked downstream
        label = fn.__qualname__.rsplit(".", 2)[-2] if fn.__name__ == "__init__" else fn.__name__   # the class

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for k in kwargs:
                if k not in sig.parameters and not passes_on:
                    near = difflib.get_close_matches(k, settings, n=1)
                    hint = f" Did you mean {near[0]!r}?" if near else ""
                    raise error(f"{label}() has no setting {k!r}.{hint} Its settings are {settings}.")
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                by_position = bool(settings) and "positional" in str(e)
                keywords = (f" The settings {settings} are keyword-only: write them as name=value, e.g. "
                            f"{settings[0]}=...." if by_position else "")
                kind = positional(error) if by_position and issubclass(error, AtlasError) else error
                raise kind(f"{label}(): {e}.{keywords}") from None
            for k, check in checks.items():
                if k in bound.arguments:
                    why = check(bound.arguments[k])
                    if why is not None:
                        raise error(f"{label}(): {k}={bound.arguments[k]!r} is not valid; {k} is {why}.")
            return fn(*args, **kwargs)

        call.__signature__ = sig  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]
    return wrap
