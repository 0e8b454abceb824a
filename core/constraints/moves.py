"""Category moves, ``Feature: level -> level, level``: a line split on its punctuation
(level names are free text: ``Never-married``, ``<=50K``), its feature and levels
found in the schema (a categorical feature's levels by code; a one-hot group's by
column, :meth:`core.schema.Schema.group_levels`)."""

from __future__ import annotations

from typing import NoReturn

from core.constraints.lexicon import QUOTED, outside_quotes, quote, unclosed_quote, where
from core.constraints.view import SchemaView
from core.errors import ConstraintError
from core.model.features import closest_names, feature_index, names_text

__all__ = ["move_columns", "resolve_level", "MoveLine"]


def move_columns(schema: SchemaView, name: str) -> tuple[str, tuple[int, ...], bool, tuple[tuple[str, ...], ...]]:
    """What a category move on ``name`` reads: the feature's (or group's) name, its
    columns (one column of codes, or the group's columns), whether it is a one-hot
    group, and for each level (code, or position in the group) the names that
    stand for it, the first the one a move keeps (a one-hot column is also named by
    the column itself; two columns standing for the same level are named by their
    columns only)."""
    names = schema.names
    if name in names:
        return _feature_move(schema, name)
    groups = schema.groups()
    if name in groups:
        cols = groups[name]
        levels = schema.group_levels()[name]
        return name, tuple(cols), True, tuple(
            (names[i],) if levels.count(lv) > 1 else (lv, names[i]) for i, lv in zip(cols, levels))
    movable = [names[j] for j in schema.categorical()] + list(groups)
    if not movable:
        raise ConstraintError(f"A category move names {name!r}, but the schema has no categorical feature and no "
                              "one-hot group to move.")
    feature_index(movable, name, error=ConstraintError, what="the feature of a category move")
    raise AssertionError("unreachable: the name is none of the movable features")     # pragma: no cover


def _feature_move(schema: SchemaView, name: str) -> tuple[str, tuple[int, ...], bool, tuple[tuple[str, ...], ...]]:
    """:func:`move_columns` of a feature: its column and levels when categorical, else refused."""
    names = schema.names
    f = schema.features[names.index(name)]
    j = names.index(name)
    if f.kind == "categorical" and f.levels is not None:
        return name, (j,), False, tuple((lv,) for lv in f.levels)
    if f.kind == "one-hot":
        raise ConstraintError(f"{name!r} is one column of the one-hot group {f.group!r}: a category move names "
                              f"the group, `{quote(str(f.group))}: level -> level, level`.")
    raise ConstraintError(f"{name!r} is {f.kind}, not a category: a category move is for a categorical feature "
                          f"or a one-hot group. Bound a number with a comparison such as "
                          f"`delta({quote(name)}) <= 10`.")


def resolve_level(text: str, levels: tuple[tuple[str, ...], ...], feature: str = "") -> int:
    """The code (or position in a one-hot group) a level name stands for: its name
    exactly, else a one-hot column's name, else the name with spaces trimmed when
    one level matches so; an unknown name gets the closest names."""
    found = _level_named(text, levels)
    if found is not None:
        return found
    shown = [names[0] for names in levels]
    near = closest_names(text, shown)
    hint = f" Did you mean {' or '.join(repr(v) for v in near)}?" if near else ""
    raise ConstraintError(f"{feature!r} has no level {text!r}.{hint} Its levels are {names_text(shown)}.")


def _level_named(text: str, levels: tuple[tuple[str, ...], ...]) -> int | None:
    """The level ``text`` names: by its name, else a column's name, else trimmed when one matches so."""
    for k, names in enumerate(levels):
        if names[0] == text:
            return k
    for k, names in enumerate(levels):
        if text in names[1:]:
            return k
    trimmed = [k for k, names in enumerate(levels) if any(n.strip() == text.strip() for n in names)]
    return trimmed[0] if len(trimmed) == 1 else None


class MoveLine:
    """One category move line, ``Feature: level -> level, level``, split on its punctuation."""

    def __init__(self, raw: str, line: int, schema: SchemaView):
        self.raw, self.line, self.schema = raw, line, schema

    def fail(self, message: str, offset: int) -> NoReturn:
        column = offset + 1
        raise ConstraintError(f"{where(self.line, column, self.raw)}: {message}", self.line, column)

    def part(self, start: int, end: int, what: str) -> tuple[str, int]:
        """The name in ``raw[start:end]`` (backquoted or bare, trimmed) and its offset."""
        seg = self.raw[start:end]
        text = seg.strip()
        offset = start + (len(seg) - len(seg.lstrip()))
        if not text:
            self.fail(f"expected {what} here; a category move reads `Feature: level -> level, level`.", offset)
        if text.startswith("`"):
            if not QUOTED.fullmatch(text):
                self.fail(f"{what} opens a backquote that does not close at its end; write it as `name`.", offset)
            text = text[1:-1].replace("``", "`")
        return text, offset

    def read(self, colon: int) -> tuple[str, str, tuple[str, ...]]:
        """The move's feature (or group), the level it binds and where a row there may
        go, each named as the schema names it (duplicates dropped)."""
        raw = self.raw
        unclosed = unclosed_quote(raw)
        if unclosed is not None:
            self.fail("a backquote opens a name here but nothing closes it; end the name with another `.", unclosed)
        name, at = self.part(0, colon, "the feature's name")
        arrows = outside_quotes(raw, "->", colon + 1)
        if not arrows:
            self.fail("a category move reads `Feature: level -> level, level`; this line has no `->`.", colon)
        if len(arrows) > 1:
            self.fail("one `->` per category move; write each level's moves on a line of its own.", arrows[1])
        arrow = arrows[0]
        commas = outside_quotes(raw, ",", colon + 1, arrow)
        if commas:
            self.fail("one level before `->`: write a line for each level a row may leave (backquote a level "
                      "whose name holds a comma).", commas[0])
        try:
            feature, _, _, levels = move_columns(self.schema, name)
        except ConstraintError as e:
            raise ConstraintError(f"{where(self.line, at + 1, raw)}: {e}", self.line, at + 1) from None
        level = self.level(colon + 1, arrow, levels, feature)
        bounds = [arrow + 2, *(c + 1 for c in outside_quotes(raw, ",", arrow + 2)), len(raw) + 1]
        to: list[str] = []
        for lo, hi in zip(bounds, bounds[1:]):
            t = self.level(lo, hi - 1, levels, feature, "a level after `->` (`A -> A` keeps a row at A where it is)")
            if t not in to:
                to.append(t)
        return feature, level, tuple(to)

    def level(self, start: int, end: int, levels: tuple[tuple[str, ...], ...], feature: str,
              what: str = "a level") -> str:
        text, offset = self.part(start, end, what)
        try:
            return levels[resolve_level(text, levels, feature)][0]
        except ConstraintError as e:
            self.fail(str(e), offset)
