"""Numbers as the analyst reads them: values that work as written.

A recourse value is only useful if the number on the screen, typed back into
the model, gives the outcome. Three rules follow, used by every page, export,
story and report:

* :func:`shortest_inside` picks, for a counterfactual value strictly inside
  its cell ``(a, b)`` of the ensemble's split levels, the value with the
  fewest significant digits that is still strictly inside the cell (never on a
  split) and within the feature's range, and no further from the cell's cheap
  end than a small tolerance; the counterfactual itself is moved there
  (:meth:`core.cells.result.QueryRun.result`) and re-checked on the ensemble
  and the original model, so the value shown *is* the value checked;
* :func:`number_text` writes a value in full (the shortest text that reads
  back as the same float), with thousands separators, integers as integers
  and no scientific notation for money-sized numbers;
* :func:`csv_cell` writes a number into a CSV export as :func:`number_text`
  does without separators (``42``, never ``42.0``; full precision; an empty
  cell for a missing value), and :func:`percent_text` a share or a gap, a
  value that cannot be computed as "—", never "inf%";
* :func:`bound_text` writes a split threshold so that a label ``x <= shown``
  or ``x > shown`` is true for the shown number itself: exact when the
  threshold is short, otherwise rounded down (a split at 5095.5 never reads
  "<= 5096").
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Mapping, Sequence, SupportsFloat

import numpy as np

from core.typing import TargetSpec

__all__ = ["number_text", "approx_text", "csv_cell", "percent_text", "NOT_KNOWN", "label_order", "outcome_text", "check_class_names", "bound_text", "below_text", "round_sig", "shortest_inside", "parse_number"]

#: significant digits a threshold is shown with when its exact text is longer
BOUND_DIGITS = 6


def round_sig(v: float, k: int, mode: str = "nearest") -> float:
    """``v`` rounded to ``k`` significant digits ("nearest", "up" or "down"),
    as the float its decimal text reads back as."""
    if v == 0 or not math.isfinite(v):
        return v
    e = math.floor(math.log10(abs(v))) - k + 1
    how = {"nearest": ROUND_HALF_EVEN, "up": ROUND_CEILING, "down": ROUND_FLOOR}[mode]
    return float(Decimal(repr(float(v))).quantize(Decimal(1).scaleb(e), rounding=how))


def shortest_inside(v: float, a: float, b: float, lo: float = -math.inf, hi: float = math.inf,
                    ref: float | None = None, tol: float = 0.0) -> float:
    """The value with the fewest significant digits in the open cell ``(a, b)``
    and in ``[lo, hi]``, at most ``tol`` from ``ref`` (the cell's cheapest
    point; default ``v``), tried nearest-rounding first, then rounding away from
    ``ref``; ``v`` itself when nothing shorter qualifies."""
    v = float(v)
    ref = v if ref is None else float(ref)
    up = v >= ref

    def ok(c: float) -> bool:
        return a < c < b and lo <= c <= hi and abs(c - ref) <= max(tol, abs(v - ref))

    for k in range(1, 17):
        for mode in ("nearest", "up" if up else "down"):
            c = round_sig(v, k, mode)
            if ok(c):
                return c
    return v


def _group(int_text: str) -> str:
    sign = "-" if int_text.startswith("-") else ""
    digits = int_text.lstrip("-")
    return sign + f"{int(digits):,}" if digits else int_text


def number_text(v: object, grouping: bool = True) -> str:
    """A number written in full: the shortest text that reads back as the same
    float (``47.26``, ``10,290``, ``32``), scientific only below 1e-4 or from
    1e15; ``missing`` for NaN/None. Anything else is ``str(v)``."""
    if v is None:
        return "missing"
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return str(v)
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}" if grouping else str(int(v))
    return _float_text(float(v), grouping)


def _float_text(x: float, grouping: bool) -> str:
    """:func:`number_text` of a float: missing, infinite, 0, scientific when tiny or huge,
    else positional (its integer part grouped by thousands)."""
    if math.isnan(x):
        return "missing"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    if abs(x) < 1e-4 or abs(x) >= 1e15:
        return repr(x)
    s = np.format_float_positional(x, trim="-")
    if not grouping:
        return s
    head, dot, tail = s.partition(".")
    return _group(head) + dot + tail


def approx_text(v: object, digits: int = 4) -> str:
    """A measured number (a prediction, a cost, a share) to ``digits``
    significant digits, written as :func:`number_text` does (``12,350``, not
    ``1.235e+04``). Never for a value the analyst is told to apply."""
    if isinstance(v, (float, np.floating)) and math.isfinite(float(v)):
        return number_text(round_sig(float(v), digits))
    return number_text(v)


#: what a figure that cannot be computed (an infinite gap, a share of nothing) reads as
NOT_KNOWN = "—"


def percent_text(v: SupportsFloat | None, digits: int = 1) -> str:
    """A share or a relative gap as a percentage with ``digits`` decimals (``12.5%``);
    :data:`NOT_KNOWN` for a value that cannot be computed (None, NaN, infinite)."""
    if v is None or isinstance(v, (bool, np.bool_)):
        return NOT_KNOWN
    try:
        x = float(v)
    except (TypeError, ValueError):
        return NOT_KNOWN
    return f"{x:.{digits}%}" if math.isfinite(x) else NOT_KNOWN


def csv_cell(v: object) -> object:
    """A cell as a CSV export writes it: a float as the shortest text that reads
    back as the same float, without separators and without a trailing ``.0``
    (``42``, ``0.1``, ``8256.5``, ``1e-05``), an empty cell for NaN, ``inf`` /
    ``-inf`` for an infinite value; anything else (integers, text) as is."""
    if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
        x = float(v)
        if math.isnan(x):
            return ""
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return number_text(x, grouping=False)
    return v


def parse_number(text: str) -> float:
    """The float a :func:`number_text` text stands for (separators removed)."""
    t = str(text).strip().replace(",", "").replace("−", "-")
    return {"∞": math.inf, "-∞": -math.inf}.get(t, float(t) if t != "missing" else math.nan)


def bound_text(t: float, grouping: bool = True, digits: int = BOUND_DIGITS) -> str:
    """A split threshold as written in a rule or a tree node: the exact value
    when its shortest text has at most ``digits`` (:data:`BOUND_DIGITS`)
    significant digits, otherwise rounded down to that many (so ``x <= shown`` holds for the shown
    number and ``x > shown`` does not, as for the exact split)."""
    t = float(t)
    if not math.isfinite(t) or t == 0:
        return number_text(t, grouping)
    exact = repr(abs(t)).split("e")[0].replace(".", "").lstrip("0")
    if len(exact) > digits:
        t = round_sig(t, digits, "down")
    return number_text(t, grouping)


def below_text(value: float, level: float) -> str:
    """A figure that fell short of ``level`` (a rule's CDP below pi, its CRP below pi_C), in as few
    decimals (two at least) as show it below the level: 0.5998 short of 0.6 reads 0.5998, never
    0.60 (else six decimals, rounded down)."""
    for k in range(2, 7):
        text = f"{value:.{k}f}"
        if float(text) < level:
            return text
    return f"{math.floor(value * 1e6) / 1e6:.6f}"


def label_order(label: object) -> tuple[int, float, str]:
    """A sort key for group labels in their numbers' order: ``2`` before
    ``10``, the bin ``[18, 30]`` before ``(30, 45]``; text labels after, by text."""
    text = str(label)
    head = text.lstrip("[(").split(",", 1)[0] if text[:1] in "[(" else text
    try:
        return (0, parse_number(head), text)
    except ValueError:
        return (1, 0.0, text)


#: longest class name the analyst may give
MAX_CLASS_NAME = 60


def outcome_text(value: TargetSpec, class_names: Mapping[str, str] | None = None) -> str:
    """A model outcome as the analyst named it: ``approved (1)`` for a class
    named in ``class_names`` (class label as text -> name), the label alone
    otherwise (``1``, never ``np.int64(1)``); a regressor's value or interval
    in short form (``(194.6, 313.6)``)."""
    if isinstance(value, tuple) and len(value) == 2:
        return f"({approx_text(float(value[0]))}, {approx_text(float(value[1]))})"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        label = str(value)
    elif float(value).is_integer():
        label = number_text(value, grouping=False)           # a class code, or a whole prediction
    else:
        label = approx_text(value)
    name = (class_names or {}).get(label) or (class_names or {}).get(str(value))
    return f"{name} ({label})" if name else label


def check_class_names(names: Mapping[Any, Any], classes: Sequence[Any]) -> dict[str, str]:
    """Class names as given by the analyst, checked: keys are the model's
    classes (as text), names are non-empty, distinct and short. Blank names
    are dropped (the class keeps its label). Raises ValueError saying what to fix."""
    known = {str(c) for c in classes}
    out: dict[str, str] = {}
    for k, v in names.items():
        key, name = str(k), " ".join(str(v or "").split())
        if key not in known:
            raise ValueError(f"{key!r} is not a class of this model; its classes are {sorted(known)}.")
        if not name:
            continue
        if len(name) > MAX_CLASS_NAME:
            raise ValueError(f"The name for class {key} is {len(name)} characters long; keep it under "
                             f"{MAX_CLASS_NAME}.")
        out[key] = name
    if len(set(out.values())) < len(out):
        raise ValueError("Two classes have the same name; give each class its own name.")
    return out
