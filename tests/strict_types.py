"""The count of ``mypy --strict`` findings on core, dashboard and pages, held to the ceiling
pyproject.toml states (``[tool.counterfactual-atlas] mypy-strict-findings``): ``make lint``
fails when the count rises above it, and says so when it falls, so the ceiling is lowered
with the change that paid the debt. (The plain ``mypy`` run beside it must find nothing.)

Usage: python tests/strict_types.py [mypy's -n workers]"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ceiling() -> int:
    return int(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["counterfactual-atlas"]
               ["mypy-strict-findings"])


def count(workers: str = "1") -> int:
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "-n", workers], capture_output=True, text=True,
                         cwd=ROOT)
    found = re.search(r"Found (\d+) errors? in", out.stdout)
    if found is None:
        if "Success" in out.stdout:
            return 0
        raise SystemExit(f"mypy --strict did not report a count:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return int(found.group(1))


if __name__ == "__main__":
    n, top = count(sys.argv[1] if len(sys.argv) > 1 else "1"), ceiling()
    if n > top:
        raise SystemExit(f"mypy --strict finds {n} issues, more than the {top} pyproject.toml allows: type what you "
                         "added (run 'mypy --strict' to see them).")
    print(f"mypy --strict: {n} findings (ceiling {top})" + (f"; lower the ceiling in pyproject.toml to {n}"
                                                            if n < top else ""))
