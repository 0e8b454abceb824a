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


def problem(schema=None, *, fixed=None, increase_only=None, decrease_only=None, protected=None) -> dict:
    """The problem a bench poses, for its JSON: the protected columns and the features held
    fixed, increase-only or decrease-only. A given list replaces the schema's features of that
    role, as the analyses read ``fixed`` / ``increase_only`` / ``decrease_only``; ``None``
    keeps the schema's (every feature free without a schema)."""
    feats = [] if schema is None else list(schema.features)

    def role(given, act):
        return sorted(given) if given is not None else [f.name for f in feats if f.actionability == act]

    return {"protected": sorted(protected) if protected is not None else [f.name for f in feats if f.protected],
            "fixed": role(fixed, "fixed"), "increase_only": role(increase_only, "increase"),
            "decrease_only": role(decrease_only, "decrease")}


def adult_with_sex_protected():
    """Adult prepared as the app prepares it (one-hot categories): ``(X, y, schema, columns)`` with
    ``y`` as ints, Sex protected (named here: an audit's choice, never read from the column's
    name) and ``columns`` the table's own feature columns, or None when ``../shared/data/adult.csv``
    is absent."""
    if not ADULT.exists():
        return None
    from core.intake import io  # the calling script has put the repository on sys.path
    from core.schema import infer_schema

    df = io.load_table(ADULT.read_bytes(), ADULT.name)
    prep = io.prepare_data(df, df.attrs["target"])
    schema = infer_schema(prep.X, kinds=prep.kinds, groups=prep.groups, protected=["Sex"])
    columns = [c for c in df.columns if c != df.attrs["target"]]
    return prep.X, prep.y.to_numpy().astype(int), schema, columns
