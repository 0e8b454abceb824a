"""Write the datasets the tests carry (``tests/data``) from the shared ones.

Run from the repository root, with ``../shared/data`` beside it (CI and dev
machines; see tests/data/README.md)::

    python tests/data/make_samples.py

* ``compas.csv``: the whole file, byte for byte (5,278 rows, 64 kB).
* ``adult_sample.csv``: the two header rows and 10,000 of Adult's 45,222 rows,
  each line byte for byte as in the source and in its order: first up to 3 rows
  of every level of every categorical (``E``) column (so that every category,
  even Occupation's 14 rows of level 2, is there), taken in the order of one
  seeded permutation, then the next rows of that permutation up to 10,000.

Deterministic: the same source files give the same bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared" / "data"
ADULT_ROWS = 10_000
PER_LEVEL = 3
SEED = 28


def adult_sample(src: Path, dst: Path, n: int = ADULT_ROWS, per_level: int = PER_LEVEL, seed: int = SEED) -> None:
    lines = src.read_bytes().decode("utf-8").splitlines(keepends=True)
    names, kinds, rows = lines[0], lines[1], lines[2:]
    cats = [j for j, k in enumerate(kinds.strip().split(",")) if k == "E"]
    cells = [r.rstrip("\r\n").split(",") for r in rows]
    order = np.random.default_rng(seed).permutation(len(rows))
    chosen: list[int] = []
    taken: set[int] = set()
    for j in cats:
        seen: dict[str, int] = {}
        for i in order:
            v = cells[i][j]
            if seen.get(v, 0) < per_level:
                seen[v] = seen.get(v, 0) + 1
                if i not in taken:
                    taken.add(int(i))
                    chosen.append(int(i))
    for i in order:
        if len(chosen) >= n:
            break
        if i not in taken:
            taken.add(int(i))
            chosen.append(int(i))
    dst.write_bytes((names + kinds + "".join(rows[i] for i in sorted(chosen))).encode("utf-8"))


def main() -> None:
    shutil.copyfile(SHARED / "compas.csv", HERE / "compas.csv")
    adult_sample(SHARED / "adult.csv", HERE / "adult_sample.csv")


if __name__ == "__main__":
    main()
