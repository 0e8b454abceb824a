"""What the structural checks of model files (:mod:`core.intake.parsing.validate`) share:
their limits (the size of leaf values and thresholds, float32's, how far class
fractions may sum from 1), the error a damaged file raises (it names the part of
the file and says to re-save the model), whole numbers read from a file, and the
JSON depth scan and reader every JSON model goes through.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from core.errors import ModelError

__all__ = ["check_json_depth", "load_json", "MAX_JSON_DEPTH", "MAX_FEATURES", "MAX_CLASSES", "MAX_LEAF_VALUE",
           "FLOAT32_LIMIT", "PROBABILITY_SLACK"]

MAX_JSON_DEPTH = 64          # XGBoost JSON models nest about 8 deep, CatBoost's about 10
MAX_FEATURES = 1_000_000     # features a model may declare beyond those it names or splits on
MAX_CLASSES = 100_000        # classes (outputs) a model may declare at most
#: the largest leaf value or threshold (in size) a model may hold: the trees' values are added up in
#: float64, and a sum near its limit (1.8e308) overflows to infinity or loses every digit of the others;
#: LightGBM's dump writes any value beyond it as 1e300 (``Common::AvoidInf``)
MAX_LEAF_VALUE = 1e300
#: the largest float64 that float32 rounds to a finite number (FLT_MAX plus half its last step):
#: XGBoost's leaf values and thresholds and CatBoost's borders are float32, and a larger number in a
#: JSON file becomes infinity when the library reads it
FLOAT32_LIMIT = 2.0**128 - 2.0**103
#: how far a leaf's class fractions may sum from 1 (scikit-learn divides each class's weight by the
#: leaf's: k roundings of a few ulps each)
PROBABILITY_SLACK = 1e-6
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_DEPTH_CHUNK = 1 << 20
_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("{"), ord("[")]] = 1
_CLOSE = np.zeros(256, dtype=np.int8)
_CLOSE[[ord("}"), ord("]")]] = 1
_HOW = "Re-save the model from its library (Booster.save_model / model.save_model / skops.io.dump)."


def _damaged(filename: str, what: str) -> ModelError:
    return ModelError(f"{filename!r} is damaged: {what}. {_HOW}")


def check_json_depth(data: bytes | str, filename: str = "model", limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (a linear scan; strings skipped).

    The strings are blanked by one regular expression (each a quote, characters or
    escaped pairs, a quote: no ambiguity to backtrack on), then the brackets counted
    with numpy, a chunk at a time, the depth carried from one to the next. (A scan
    from quote to quote in Python took 27 ms of a forest's .skops schema, whose
    thousands of short strings each cost a round of the loop.)"""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    bare = _JSON_STRING.sub(b'""', data)        # an unterminated string stays: the JSON reader says so
    depth = 0
    for at in range(0, len(bare), _DEPTH_CHUNK):
        b = np.frombuffer(bare, dtype=np.uint8, count=min(_DEPTH_CHUNK, len(bare) - at), offset=at)
        step = (_OPEN[b] - _CLOSE[b]).astype(np.int32)
        running = np.cumsum(step, dtype=np.int64) + depth
        if running.size and running.max() > limit:
            raise _damaged(filename, f"its JSON is nested more than {limit} levels deep")
        depth = int(running[-1]) if running.size else depth


def load_json(data: bytes, filename: str, what: str = "JSON model") -> Any:
    """``json.loads`` after the depth check; a syntax error becomes a ModelError."""
    check_json_depth(data, filename)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _damaged(filename, f"it is not valid {what} ({str(exc)[:120]})") from None


def _shown(v: Any) -> str:
    """A value of the file as a message shows it: numbers as they are (a numpy scalar as its
    number), text quoted, cut at 30 characters."""
    return repr(v.item() if hasattr(v, "item") and getattr(v, "ndim", 1) == 0 else v)[:30]


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
