"""Helpers the benchmarks share (each benchmark runs as a script: ``python bench/x.py``)."""

from __future__ import annotations

import time


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` (seconds): the least disturbed by a shared machine."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
