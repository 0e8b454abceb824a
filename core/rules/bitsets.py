"""Bitsets over the fitting rows, and the compiled projected-forest kernel.

``_projected`` (core/rules/_projected.c) computes the Projected Forest's cells; when
it is not built, numpy does the same more slowly. ``USE_COMPILED`` says which
runs (tests switch it to compare the two).
"""

from __future__ import annotations

import numpy as np

try:  # compiled projected-forest cells (core/rules/_projected.c); numpy does the same more slowly
    from core.rules import _projected  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - the build is optional
    _projected = None

USE_COMPILED = _projected is not None


def _pack(mask: np.ndarray, words: int) -> np.ndarray:
    b = np.packbits(mask, bitorder="little")
    out = np.zeros(words * 8, dtype=np.uint8)
    out[:b.size] = b
    return out.view(np.uint64)


def _unpack(bits: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(bits.view(np.uint8), bitorder="little")[:n].astype(bool)


def _popcount(bits: np.ndarray) -> np.ndarray:
    return np.bitwise_count(bits).sum(axis=-1, dtype=np.int64)


def _below(v: np.ndarray) -> np.ndarray:
    """The point ``v`` as the half-open interval ``(below(v), v]``."""
    return np.nextafter(v, -np.inf)
