"""XGBoost's margins for rows of numbers, without a new proxy matrix at every call.

``Booster.inplace_predict`` calls the C entry point ``XGBoosterPredictFromDense``
with a null matrix handle, and the library then makes a new proxy matrix for the
call; making its context reads the machine's CPU quota (two cgroup files) every
time. For the one row a counterfactual is checked with, that set-up is half the
call (150 against 71 microseconds of CPU on an XGBClassifier(100, depth 4), the
model of ``bench/veritas_side.py``'s Adult case, in one thread).

The entry point also takes a proxy made beforehand (the Python package passes
one when it is given a base margin); the rows are then set on that proxy and
the prediction is the same call. :func:`dense_margin` keeps one proxy per thread
(a proxy holds its last rows, so two threads cannot share one) and passes it.
The pieces it uses are the package's private ones (``_LIB``, ``_ProxyDMatrix``,
``make_jcargs``); where one is missing (another version of the package) the
public ``inplace_predict`` answers, the same numbers
(``tests/model/test_xgbmargin.py``). The rows' array interface and the copy of
the margins out of the library's buffer are written here, as the package writes
them, without the class it makes at every call to read them back: 34
microseconds in all for that row, against 150 for ``inplace_predict``.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import xgboost

__all__ = ["dense_margin"]

_local = threading.local()
_parts: tuple[Any, ...] | None = None
_args: dict[tuple[int, int], bytes] = {}


def _private() -> tuple[Any, ...] | None:
    """The package's private pieces the direct call needs; None (then ``inplace_predict``)
    when this version of the package lacks one."""
    global _parts
    if _parts is None:
        try:
            from xgboost import core as xc

            _parts = (xc._LIB.XGBoosterPredictFromDense, xc._check_call, xc.make_jcargs, xc._ProxyDMatrix)
        except (ImportError, AttributeError):
            _parts = ()
    return _parts or None


def _interface(X: np.ndarray) -> bytes:
    """``X``'s array interface as the package's ``array_interface`` writes it (C-contiguous
    rows: no strides)."""
    n, d = X.shape
    t = X.dtype.str
    return (f'{{"data": [{X.ctypes.data}, false], "strides": null, "descr": [["", "{t}"]], "typestr": "{t}", '
            f'"shape": [{n}, {d}], "version": 3}}').encode()


def dense_margin(booster: xgboost.Booster, X: np.ndarray, iteration_range: tuple[int, int] = (0, 0)) -> np.ndarray:
    """The margins of ``booster`` (an ``xgboost.Booster``) on the rows ``X`` (numbers, NaN
    missing; read as C-contiguous float32): ``booster.inplace_predict(X, predict_type="margin",
    missing=np.nan, validate_features=False, iteration_range=iteration_range)``."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    parts = _private()
    if parts is None or X.ndim != 2 or not X.size:      # (the package's own shapes for no rows)
        return booster.inplace_predict(X, predict_type="margin", missing=np.nan, validate_features=False,
                                       iteration_range=iteration_range)
    predict, check, jcargs, proxy_type = parts
    ulong = ctypes.c_uint64                                # the C interface's bst_ulong
    it = (int(iteration_range[0]), int(iteration_range[1]))
    args = _args.get(it)
    if args is None:
        args = _args[it] = jcargs(type=1, training=False, iteration_begin=it[0], iteration_end=it[1],
                                  missing=np.nan, strict_shape=False, cache_id=0)
    proxy = getattr(_local, "proxy", None)
    if proxy is None:
        proxy = _local.proxy = proxy_type()
    shape, dims, preds = ctypes.POINTER(ulong)(), ulong(), ctypes.POINTER(ctypes.c_float)()
    check(predict(booster.handle, _interface(X), args, proxy.handle, ctypes.byref(shape), ctypes.byref(dims),
                  ctypes.byref(preds)))
    out = np.empty(tuple(int(shape[i]) for i in range(dims.value)), dtype=np.float32)
    if out.size:            # copied out of the library's buffer, which its next call on this thread reuses
        ctypes.memmove(out.ctypes.data, preds, out.nbytes)
    return out
