"""Helpers the benchmarks share (each benchmark runs as a script: ``python bench/x.py``)."""

from __future__ import annotations

import time
from pathlib import Path

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult.csv"


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` (seconds): the least disturbed by a shared machine."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def adult_with_sex_protected():
    """Adult prepared as the app prepares it (one-hot categories): ``(X, y, schema, columns)`` with
    ``y`` as ints, Sex protected and ``columns`` the table's own feature columns, or None when
    ``../shared/data/adult.csv`` is absent."""
    if not ADULT.exists():
        return None
    from core.intake import io  # the calling script has put the repository on sys.path
    from core.schema import infer_schema

    df = io.load_table(ADULT.read_bytes(), ADULT.name)
    prep = io.prepare_data(df, df.attrs["target"])
    schema = infer_schema(prep.X, kinds=prep.kinds, groups=prep.groups, protected=["Sex"])
    columns = [c for c in df.columns if c != df.attrs["target"]]
    return prep.X, prep.y.to_numpy().astype(int), schema, columns
