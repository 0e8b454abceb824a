"""Benchmark: the sub-population filter parser (issue 16).

Prints JSON: the time to parse a valid filter of 100,000 characters (the
parser's own work, the app's 2,000-character cap lifted; goal: < 50 ms), the
time the app takes to refuse it under the cap, and, as the in-process
reference, a 10,000-character filter: a ratio near 10 says the parser is linear.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import best_of  # noqa: E402

from core.rules.filters import FilterError, parse_filter  # noqa: E402

NAMES = [f"feature_{i}" for i in range(40)]


def make(n_chars: int) -> str:
    parts, size, i = [], 0, 0
    while size < n_chars:
        j = i % len(NAMES)
        clause = f"{-1000 - i} <= {NAMES[j]} < {1000 + i}" if i % 2 else f"{NAMES[j]} >= {-2000 - i}"
        parts.append(clause)
        size += len(clause) + 5
        i += 1
    return " and ".join(parts)


def main() -> None:
    big, ref = make(100_000), make(10_000)

    def refuse() -> None:
        try:
            parse_filter(big, NAMES)
        except FilterError:
            return
        raise AssertionError("a 100,000-character filter passed the cap")

    t_big = best_of(lambda: parse_filter(big, NAMES, max_length=10**7), repeat=5)
    t_ref = best_of(lambda: parse_filter(ref, NAMES, max_length=10**7), repeat=5)
    t_refuse = best_of(refuse, repeat=5)
    print(json.dumps({"chars": len(big), "parse_100k_ms": round(t_big * 1e3, 3),
                      "parse_10k_ms": round(t_ref * 1e3, 3), "ratio_100k_vs_10k": round(t_big / t_ref, 2),
                      "refuse_100k_under_cap_ms": round(t_refuse * 1e3, 4), "goal_ms": 50}, indent=2))


if __name__ == "__main__":
    main()
