"""The words of the constraint language: its tokens, how a name is quoted, where a
message points (line and column), and punctuation found outside backquotes."""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["TOKEN", "QUOTED", "KEYWORDS", "Token", "quote", "where", "outside_quotes", "unclosed_quote"]

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[^\W\d][\w.]*)
  | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<op><=|>=|==|!=|=>|=<|->|\*\*|[-+*/()<>=^,:])
""", re.X)
QUOTED = re.compile(r"`(?:[^`]|``)*`")
KEYWORDS = ("if", "then", "and", "or")


class Token(NamedTuple):
    kind: str           # number, name, quoted, op, end
    text: str           # as written (a quoted name: without its backquotes)
    column: int         # 1-based, in the line as written
    end: int            # 0-based offset just past it


def quote(name: str) -> str:
    """``name`` as the language writes it: bare when it is one plain word, else backquoted."""
    m = TOKEN.fullmatch(name)
    if m is not None and m.lastgroup == "name" and name.lower() not in KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def where(line: int, column: int | None, raw: str) -> str:
    """How a message names its place: ``Line 3, column 7 ('the line')``."""
    at = f", column {column}" if column is not None else ""
    return f"Line {line}{at} ({raw.strip()!r})"


def outside_quotes(raw: str, sep: str, start: int = 0, end: int | None = None) -> list[int]:
    """Offsets of ``sep`` in ``raw[start:end]`` outside backquotes."""
    end = len(raw) if end is None else end
    out: list[int] = []
    quoted = False
    pos = start
    while pos < end:
        if raw[pos] == "`":
            quoted = not quoted          # a doubled backquote inside a name toggles twice
        elif not quoted and raw.startswith(sep, pos) and pos + len(sep) <= end:
            out.append(pos)
            pos += len(sep)
            continue
        pos += 1
    return out


def unclosed_quote(raw: str) -> int | None:
    """The offset of a backquote that opens a name no backquote closes, if any."""
    opened: int | None = None
    for pos, ch in enumerate(raw):
        if ch == "`":
            opened = pos if opened is None else None
    return opened
