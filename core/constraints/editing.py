"""What an editor of constraints needs: every line's problem at once, and examples
written with the loaded data's own columns.

:func:`problems` reads each line on its own (so every mistake is named, each with its
line and column, not only the first), then the whole text (constraints that
contradict each other); :func:`examples` writes one line of each form with the
schema's own names, so an analyst starts from text that reads as their data.
"""

from __future__ import annotations

from typing import Iterable

from core.constraints.lexicon import quote
from core.constraints.reader import constraint_lines, parse
from core.constraints.view import SchemaView
from core.errors import ConstraintError

__all__ = ["problems", "examples"]


def problems(texts: str | Iterable[str], schema: SchemaView) -> list[ConstraintError]:
    """Every problem of ``texts`` against ``schema``: one error per line that cannot be
    read, then (when every line reads) the contradictions between lines; [] when none."""
    lines = constraint_lines(texts)
    found: list[ConstraintError] = []
    for k, raw in enumerate(lines):
        if not raw.strip() or raw.strip().startswith("#"):
            continue
        alone = ["" if j != k else raw for j in range(k + 1)]       # the line at its own number
        try:
            parse(alone, schema)
        except ConstraintError as exc:
            found.append(exc)
    if not found:
        try:
            parse(lines, schema)
        except ConstraintError as exc:
            found.append(exc)
    return found


def examples(schema: SchemaView) -> list[str]:
    """One example line of each form, written with ``schema``'s own features (a comment
    first says what it means); fewer when the schema lacks the kinds a form needs."""
    feats = list(schema.features)
    numeric = [f.name for f in feats if f.kind not in ("categorical", "one-hot", "binary")]
    integral = [f.name for f in feats if f.kind in ("integer", "ordinal")]
    out: list[str] = []
    if numeric:
        a = quote(integral[0] if integral else numeric[0])
        out += [f"# {a} never goes down", f"delta({a}) >= 0"]
    if len(numeric) >= 2:
        a, b = quote(numeric[0]), quote(numeric[1])
        out += [f"# {b} moves at most as far as {a} does", f"delta({b}) <= delta({a})",
                f"# raising {a} takes {b} up by at least half as much",
                f"if delta({a}) > 0 then delta({b}) >= 0.5 * delta({a})",
                "# a cap on the new values together", f"{a} + {b} <= old({a}) + old({b}) + 10"]
    return out + _category_example(schema)


def _category_example(schema: SchemaView) -> list[str]:
    """A category move of the first categorical feature (or group) with two levels or more; [] when none."""
    for name, levels in _categories(schema):
        if len(levels) >= 2:
            to = ", ".join(quote(v) for v in levels[1:3])
            return [f"# from {levels[0]}, a row may go only to {', '.join(levels[1:3])} (or stay)",
                    f"{quote(name)}: {quote(levels[0])} -> {to}"]
    return []


def _categories(schema: SchemaView) -> list[tuple[str, tuple[str, ...]]]:
    """(name, levels) of each categorical feature and one-hot group."""
    out = [(schema.names[j], tuple(levels)) for j, levels in schema.categorical().items()]
    out += [(g, tuple(levels)) for g, levels in schema.group_levels().items()]
    return out
