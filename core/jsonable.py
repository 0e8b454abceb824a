"""One way to make values JSON-able, for every saved or exported structure.

:func:`plain` turns numpy scalars and arrays, tuples and dict keys into plain
Python values (NaN stays a float: Python's json writes it, and our readers
take it back); :func:`finite_or_none` is for fields where a missing bound is
``null`` (rules' open interval ends).
"""

from __future__ import annotations

import math
from typing import Any, SupportsFloat

import numpy as np

__all__ = ["plain", "finite_or_none"]


def plain(v: object) -> Any:
    """A JSON-able copy of ``v``: dicts (keys as strings), lists, tuples and
    arrays as lists, numpy scalars as Python numbers; anything else as is."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return v.item()
    return v


def finite_or_none(v: SupportsFloat) -> float | None:
    """``float(v)``, or None for an infinite or missing value."""
    x = float(v)
    return x if math.isfinite(x) else None
