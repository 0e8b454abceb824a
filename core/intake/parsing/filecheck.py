"""What the structural checks of model files (:mod:`core.intake.parsing.validate`) share:
their limits, the error a damaged file raises (it names the part of the file
and says to re-save the model), whole numbers read from a file, and the JSON
depth scan and reader every JSON model goes through.
"""

from __future__ import annotations

import json
from typing import Any

from core.errors import ModelError

__all__ = ["check_json_depth", "load_json", "MAX_JSON_DEPTH", "MAX_FEATURES", "MAX_CLASSES"]

MAX_JSON_DEPTH = 64          # XGBoost JSON models nest about 8 deep, CatBoost's about 10
MAX_FEATURES = 1_000_000     # features a model may declare beyond those it names or splits on
MAX_CLASSES = 100_000        # classes (outputs) a model may declare at most
_HOW = "Re-save the model from its library (Booster.save_model / model.save_model / skops.io.dump)."


def _damaged(filename: str, what: str) -> ModelError:
    return ModelError(f"{filename!r} is damaged: {what}. {_HOW}")


def check_json_depth(data: bytes | str, filename: str = "model", limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (a linear scan; strings skipped)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    # fast path: bytes between quotes are skipped with find(), brackets counted per chunk
    depth, i, n = 0, 0, len(data)
    find = data.find
    while i < n:
        q = find(b'"', i)
        end = n if q < 0 else q
        if end > i:
            chunk = data[i:end]
            if b"[" in chunk or b"{" in chunk or b"]" in chunk or b"}" in chunk:
                for b in chunk:
                    if b == 0x7B or b == 0x5B:
                        depth += 1
                        if depth > limit:
                            raise _damaged(filename, f"its JSON is nested more than {limit} levels deep")
                    elif b == 0x7D or b == 0x5D:
                        depth -= 1
        if q < 0:
            break
        j = q + 1                                    # inside a string: find its closing quote
        while True:
            j = find(b'"', j)
            if j < 0:
                return                                # unterminated string: the JSON reader says so
            k = j - 1
            while k > q and data[k] == 0x5C:         # count the backslashes before the quote
                k -= 1
            if (j - 1 - k) % 2 == 0:
                break
            j += 1
        i = j + 1


def load_json(data: bytes, filename: str, what: str = "JSON model") -> Any:
    """``json.loads`` after the depth check; a syntax error becomes a ModelError."""
    check_json_depth(data, filename)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _damaged(filename, f"it is not valid {what} ({str(exc)[:120]})") from None


def _int(v: Any, filename: str, what: str) -> int:
    try:
        if isinstance(v, float) and not v.is_integer():
            raise ValueError
        return int(v)
    except (TypeError, ValueError, OverflowError):
        raise _damaged(filename, f"{what} is {str(v)[:40]!r}, not a whole number") from None


def _first_visit(seen: bytearray, i: int, where: str, filename: str) -> None:
    """Mark node ``i`` of a tree walked from its root (XGBoost's or LightGBM's);
    a second visit means a child points back to an ancestor or is shared."""
    if seen[i]:
        raise _damaged(filename, f"{where}, node {i} is reached twice (a child points back to an ancestor "
                                 "or is shared)")
    seen[i] = 1
