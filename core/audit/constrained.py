"""The constraints between features an audit, a comparison or a case story runs under.

:func:`core.audit.run_audit`, :func:`core.audit.compare.compare_models` and
:func:`core.audit.story.case_story` take ``constraints=`` (texts of the language of
:mod:`core.constraints`, or parsed ones); None keeps the schema's own
(:func:`core.optimal.resolve_constraints`). :func:`in_force` makes the schema every
query of the run reads them from, so that each recourse the run counts satisfies
them, and a row no action under them helps is *precluded* (Kothari, Kulynych &
Ustun, "Prediction without preclusion", ICLR 2024). Reports and stories name a
constraint by its text and its line, as the analyst wrote it (comments and blank
lines counted): :func:`numbered`, :func:`lines_words`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, overload

from core.errors import AuditError

if TYPE_CHECKING:
    from core.constraints import Constraints
    from core.schema import Schema

__all__ = ["in_force", "numbered", "lines_words", "recorded"]


def _lines(cons: Constraints) -> list[str]:
    """The parsed constraints as lines, each at its own line number (blank lines between),
    so that a constraint keeps the number it was written at."""
    out = [""] * max((c.line for c in cons), default=0)
    for c in cons:
        out[c.line - 1] = c.text
    return out


@overload
def in_force(schema: Schema, constraints: Iterable[str] | str | Constraints | None,
             error: type[ValueError] = ...) -> Schema: ...
@overload
def in_force(schema: None, constraints: Iterable[str] | str | Constraints | None,
             error: type[ValueError] = ...) -> None: ...
@overload
def in_force(schema: Schema | None, constraints: Iterable[str] | str | Constraints | None,
             error: type[ValueError] = ...) -> Schema | None: ...


def in_force(schema: Schema | None, constraints: Iterable[str] | str | Constraints | None,
             error: type[ValueError] = AuditError) -> Schema | None:
    """``schema`` holding the constraints in force: ``constraints`` read against it (texts,
    or parsed ones, each kept at its line), or, for None, its own. A line that cannot be
    read raises :class:`core.errors.ConstraintError` naming its line and column."""
    if constraints is None:
        return schema
    from core.constraints import Constraints, constraint_lines

    if schema is None:
        raise error("Constraints between features are read against the features' schema (their names, kinds and "
                    "ranges); pass schema= as well, e.g. the workspace's schema or infer_schema(table).")
    if isinstance(constraints, Constraints):
        return schema.with_constraints(_lines(constraints))
    return schema.with_constraints(constraint_lines(constraints))


def numbered(lines: Sequence[str] | None) -> list[tuple[int, str]]:
    """(line number, text) of each constraint among ``lines`` as the analyst wrote them
    (1-based; blank lines and ``#`` comments are counted, not listed)."""
    return [(n, t.strip()) for n, t in enumerate(lines or (), 1) if t.strip() and not t.strip().startswith("#")]


def lines_words(pairs: Sequence[tuple[int, str]]) -> str:
    """Constraints in a sentence, each by its line and text: ``line 1 (delta(age) >= 0) and
    line 3 (delta(income) <= 5)``."""
    said = [f"line {n} ({t})" for n, t in pairs]
    if len(said) <= 1:
        return "".join(said)
    return ", ".join(said[:-1]) + " and " + said[-1]


def recorded(meta: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The constraints a saved audit or comparison ran under, numbered as written: its
    schema's lines (or its ``constraint_lines``), else (a run that kept only their texts)
    its parameters' texts in order."""
    lines = (meta.get("schema") or {}).get("constraints", meta.get("constraint_lines"))
    if isinstance(lines, list) and all(isinstance(t, str) for t in lines):
        return numbered(lines)
    texts = (meta.get("parameters") or {}).get("constraints") or []
    return [(n, str(t)) for n, t in enumerate(texts, 1)] if isinstance(texts, list) else []
