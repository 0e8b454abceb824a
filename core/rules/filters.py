"""Sub-population filters such as ``Age >= 30 and Income < 5e4``, parsed in linear time.

Grammar (no ``eval``, no backtracking regular expression; the text is capped at
``MAX_LENGTH`` characters)::

    filter   := clause (("and" | "&" | ",") clause)*
    clause   := operand op operand [op operand]      e.g. 30 <= Age < 50
    op       := "<" | "<=" | ">" | ">=" | "=="
    operand  := number | name
    name     := `any text` | "any text" | words       (words: one or more bare words, e.g. Hours per week)

Each comparison bounds one feature; the result is the box ``lower < x <= upper``
(``x >= v`` is stored as ``x > nextafter(v, -inf)``, ``x < v`` as
``x <= nextafter(v, -inf)``). Errors say where: ``at character 14: expected a
number after '>='``, and suggest the closest feature names for a typo.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Sequence

import numpy as np

from core.errors import FilterError

__all__ = ["parse_filter", "FilterError", "MAX_LENGTH"]

MAX_LENGTH = 2000
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[^\s<>!&,`\"=]+(?:=[^\s<>!&,`\"=]+)*")     # one '=' may join a one-hot name: job=clerk
_OPS = ("<=", ">=", "==", "<", ">")


_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<and>[&,])"
    r"|(?P<op><=|>=|==|<|>)"
    r"|(?P<quoted>`[^`]*`|\"[^\"]*\")"
    r"|(?P<open>[`\"])"
    r"|(?P<num>" + _NUMBER.pattern + r")(?=[\s<>!&,`\"=]|$)"     # a number unless a name goes on
    r"|(?P<word>" + _WORD.pattern + r")")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, value, position): kinds num, name, word, op, and. One compiled
    alternation per token: linear in the text, no backtracking across tokens."""
    out, i = [], 0
    for m in _TOKEN.finditer(text):
        if m.start() != i:                           # a character no token starts with
            break
        kind, value = m.lastgroup, m.group()
        if kind == "open":
            raise FilterError(f"At character {i + 1}: the quote {value} is never closed.")
        if kind == "word":
            out.append(("and" if value.lower() == "and" else "word", value, i))
        elif kind == "quoted":
            out.append(("name", value[1:-1], i))
        elif kind != "ws":
            out.append((str(kind), value, i))
        i = m.end()
    if i < len(text):
        raise FilterError(f"At character {i + 1}: unexpected {text[i]!r}; write clauses like `Age >= 30`.")
    return out


def _clauses(tokens: list[tuple[str, str, int]], text: str) -> list[list[tuple[str, str, int]]]:
    """Operands and operators of each clause; consecutive words form one name."""
    clauses: list[list[tuple[str, str, int, bool]]] = []
    cur: list[tuple[str, str, int, bool]] = []      # (kind, value, position, made of words)
    for kind, value, pos in tokens:
        if kind == "and":
            if not cur:
                raise FilterError(f"At character {pos + 1}: {value!r} joins nothing; write a clause before it.")
            clauses.append(cur)
            cur = []
        elif kind == "word" and _after_words(cur):
            k, v, p, _ = cur[-1]
            cur[-1] = ("name", f"{v} {value}", p, True)
        else:
            cur.append(("name" if kind == "word" else kind, value, pos, kind == "word"))
    _check_ended(cur, bool(clauses))
    clauses.append(cur)
    return [[(k, v, p) for k, v, p, _ in c] for c in clauses]


def _check_ended(cur: list[tuple[str, str, int, bool]], joined: bool) -> None:
    """The last clause is not empty: the filter neither is empty nor ends with 'and'."""
    if not cur:
        raise FilterError("The filter ends with 'and'; write the last clause." if joined else
                          "The filter is empty; write clauses like `Age >= 30 and Income < 50000`.")


def _after_words(cur: list[tuple[str, str, int, bool]]) -> bool:
    """Whether the clause so far ends with a name made of words (a next word goes on it)."""
    return bool(cur) and cur[-1][0] == "name" and cur[-1][3]


def parse_filter(text: str, feature_names: Sequence[str], *, max_length: int = MAX_LENGTH
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of the box a filter selects (see the module docstring)."""
    if len(text) > max_length:
        raise FilterError(f"The filter is {len(text):,} characters long; the limit is {max_length:,}. "
                          "Write fewer, shorter clauses.")
    d = len(feature_names)
    lower, upper = [-math.inf] * d, [math.inf] * d
    index = {str(n): j for j, n in enumerate(feature_names)}
    for clause in _clauses(_tokens(text), text):
        kinds = [k for k, _, _ in clause]
        if kinds not in _SHAPES:
            raise _unreadable(clause)
        name_at = kinds.index("name")
        name = clause[name_at][1].strip()
        j = _feature(name, index, feature_names)
        for op, v in _comparisons(clause, name_at):
            if not math.isfinite(v):
                raise FilterError(f"The number {v} in the clause on {name!r} is not finite.")
            lower[j], upper[j] = _bounded(op, v, lower[j], upper[j])
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    if np.any(lo >= hi):
        bad = [str(feature_names[int(j)]) for j in np.flatnonzero(lo >= hi)]
        raise FilterError(f"The filter selects no value of {', '.join(bad)} (its bounds cross).")
    return lo, hi


#: the clauses read: ``feature op number``, ``number op feature`` and ``low op feature op high``
_SHAPES = (["name", "op", "num"], ["num", "op", "name"], ["num", "op", "name", "op", "num"])
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def _unreadable(clause: list[tuple[str, str, int]]) -> FilterError:
    """A clause of no readable shape: where it is and, after a name, the operator missing its number."""
    pos = clause[0][2]
    shown = " ".join(v for _, v, _ in clause)
    expected = next((f"at character {p + 1}: expected a number after {clause[i - 1][1]!r}"
                     for i, (k, v, p) in enumerate(clause) if i and clause[i - 1][0] == "op" and k != "num"
                     and clause[0][0] == "name"), None)
    return FilterError(f"Cannot read the clause {shown!r} (at character {pos + 1}): "
                       + (expected + "; " if expected else "")
                       + "expected `feature op number` (or `low op feature op high`) with op one of "
                         "<, <=, >, >=, ==.")


def _feature(name: str, index: dict[str, int], feature_names: Sequence[str]) -> int:
    """The column of a feature named in the filter; for a typo, the closest names."""
    if name not in index:
        close = difflib.get_close_matches(name, list(index), n=3)
        raise FilterError(f"Unknown feature {name!r} in the filter"
                          + (f"; did you mean {', '.join(map(repr, close))}?" if close else
                             f"; the features are {list(feature_names)[:12]}."))
    return index[name]


def _comparisons(clause: list[tuple[str, str, int]], name_at: int) -> list[tuple[str, float]]:
    """The clause's comparisons as ``feature op number``: ``number op name [op number]``
    has its first one turned around."""
    if name_at == 0:
        return [(clause[1][1], float(clause[2][1]))]
    comparisons = [(_FLIP[clause[1][1]], float(clause[0][1]))]
    if len(clause) == 5:
        comparisons.append((clause[3][1], float(clause[4][1])))
    return comparisons


def _bounded(op: str, v: float, low: float, high: float) -> tuple[float, float]:
    """The bounds ``low < x <= high`` narrowed by ``x op v`` (``>= v`` and ``< v`` step to just below v)."""
    below = math.nextafter(v, -math.inf)
    if op == ">":
        return max(low, v), high
    if op == ">=":
        return max(low, below), high
    if op == "<=":
        return low, min(high, v)
    if op == "<":
        return low, min(high, below)
    return max(low, below), min(high, v)
