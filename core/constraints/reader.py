"""Reading the constraint language: lines of text -> :class:`~core.constraints.forms.Constraints`.

A line is tokenised (numbers, names, backquoted names, operators), then read by
recursive descent into affine expressions, each a map (new or old, feature) ->
coefficient plus a constant. Products and quotients are checked as they are
built, so a product of two expressions that hold features (or a division by
one, or a power, or a function other than ``old``/``delta``) is refused at the
operator's column. A line with a ``:`` outside backquotes is a category move,
read by :mod:`core.constraints.moves`; the lines read, :mod:`core.constraints.checks`
refuses those that no row can meet.

Grammar (keywords ``if``, ``then``, ``and`` in any case, and ``or``, refused; a
feature so named is backquoted)::

    line        := "if" conjunction "then" conjunction | comparison | move
    conjunction := comparison ("and" comparison)*
    comparison  := expr ("<=" | ">=" | "<" | ">" | "==" | "=") expr
    expr        := term (("+" | "-") term)*
    term        := unary (("*" | "/") unary)*
    unary       := ("+" | "-") unary | atom
    atom        := number | name | `quoted name` | ("old" | "delta") "(" expr ")" | "(" expr ")"
    move        := feature ":" level "->" level ("," level)*
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from core.constraints.checks import check_contradictions
from core.constraints.forms import CategoryMove, Constraint, Constraints, Implication, LinearForm
from core.constraints.lexicon import KEYWORDS, TOKEN, Token, outside_quotes, quote, where
from core.constraints.moves import MoveLine
from core.constraints.view import SchemaView
from core.errors import ConstraintError
from core.model.features import feature_index

__all__ = ["parse", "constraint_lines"]

_COMPARE = {"<=": "<=", ">=": ">=", "<": "<", ">": ">", "==": "==", "=": "=="}
_MISTYPED = {"=>": ">=", "=<": "<="}
_CANCELLED = 1e-12      # a coefficient this small against the terms it sums is round-off of a cancellation


@dataclass(frozen=True)
class _Affine:
    """``sum(coef * var) + const``: var is (old?, feature index); each value carries the
    sum of the magnitudes it was added from, to tell a cancellation from a small number."""

    terms: dict[tuple[bool, int], tuple[float, float]]
    const: tuple[float, float]
    start: int          # 0-based span in the line, for messages
    end: int

    @property
    def has_features(self) -> bool:
        return any(abs(v) > _CANCELLED * m for v, m in self.terms.values())

    @property
    def has_old(self) -> bool:
        return any(old and abs(v) > _CANCELLED * m for (old, _), (v, m) in self.terms.items())

    def scaled(self, k: float, start: int, end: int) -> _Affine:
        return _Affine({key: (v * k, m * abs(k)) for key, (v, m) in self.terms.items()},
                       (self.const[0] * k, self.const[1] * abs(k)), start, end)

    def plus(self, other: _Affine, sign: float) -> _Affine:
        terms = dict(self.terms)
        for key, (v, m) in other.terms.items():
            v0, m0 = terms.get(key, (0.0, 0.0))
            terms[key] = (v0 + sign * v, m0 + m)
        return _Affine(terms, (self.const[0] + sign * other.const[0], self.const[1] + other.const[1]),
                       self.start, other.end)


def _constant(value: float, start: int, end: int) -> _Affine:
    return _Affine({}, (value, abs(value)), start, end)


def _by_side(kept: dict[tuple[bool, int], float]) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]:
    """The terms on new values and on old ones, each sorted by feature."""
    new = tuple(sorted((j, float(v)) for (old, j), v in kept.items() if not old))
    old_ = tuple(sorted((j, float(v)) for (old, j), v in kept.items() if old))
    return new, old_


def constraint_lines(texts: str | Iterable[str] | None) -> tuple[str, ...]:
    """The lines of ``texts`` (one text split at its line breaks, or a sequence of
    lines, each split likewise), trailing blank lines dropped."""
    if texts is None:
        return ()
    if isinstance(texts, str):
        texts = [texts]
    elif isinstance(texts, (bytes, Mapping)) or not isinstance(texts, Iterable):
        raise ConstraintError(f"Constraints are text, one per line (a str, or a list of str); got "
                              f"{type(texts).__name__}.")
    lines: list[str] = []
    for t in texts:
        if not isinstance(t, str):
            raise ConstraintError(f"Constraints are text, one per line; got {type(t).__name__} {t!r:.40} among them.")
        lines += t.splitlines() or [""]
    while lines and not lines[-1].strip():
        lines.pop()
    return tuple(lines)


def parse(texts: str | Iterable[str], schema: SchemaView) -> Constraints:
    """Read constraints written one per line against ``schema``.

    Parameters
    ----------
    texts : str or iterable of str
        The constraints: one text split into lines, or a sequence of lines. Blank
        lines and lines starting with ``#`` are skipped; line numbers count every line.
    schema : Schema
        The features the names refer to (their kinds, levels and one-hot groups).

    Returns
    -------
    Constraints
        One :class:`Constraint` per line read, in order.

    Raises
    ------
    ConstraintError
        A line that cannot be read (with its line and column), a name no feature
        has (with the closest names), a non-linear term, a categorical feature in a
        comparison, or constraints that no row can meet (a false comparison of
        numbers only; bounds on the same expression that exclude each other).

    Examples
    --------
    >>> from core.schema import FeatureSpec, Schema
    >>> from core.constraints import parse
    >>> schema = Schema([FeatureSpec("age", "integer", 18, 90), FeatureSpec("hours", "numerical", 0, 80)])
    >>> cons = parse("# no one gets younger\\ndelta(age) >= 0\\nif delta(hours) > 0 then delta(age) >= 1", schema)
    >>> [(c.line, c.text) for c in cons]
    [(2, 'delta(age) >= 0'), (3, 'if delta(hours) > 0 then delta(age) >= 1')]
    >>> cons.linear()[0]
    LinearForm(new=((0, 1.0),), old=((0, -1.0),), const=0.0, sense='>=')
    """
    if not all(hasattr(schema, a) for a in ("names", "features", "groups", "group_levels", "categorical")):
        raise ConstraintError(f"Constraints are read against a Schema (core.schema.Schema); got "
                              f"{type(schema).__name__}.")
    out = []
    for n, raw in enumerate(constraint_lines(texts), 1):
        text = raw.strip()
        if text and not text.startswith("#"):
            out.append(Constraint(text, n, _read_line(raw.rstrip(), n, schema)))
    check_contradictions(out)
    return Constraints(out, schema)


def _read_line(raw: str, line: int, schema: SchemaView) -> LinearForm | Implication | CategoryMove:
    colons = outside_quotes(raw, ":")
    if colons:
        return CategoryMove(*MoveLine(raw, line, schema).read(colons[0]))
    return _Parser(raw, line, schema).statement()


# ------------------------------------------------------------------ comparisons
class _Parser:
    """Recursive descent over one line's tokens (see the module's grammar)."""

    def __init__(self, raw: str, line: int, schema: SchemaView):
        self.raw, self.line, self.schema = raw, line, schema
        self.tokens = self._tokenise()
        self.i = 0

    def fail(self, message: str, column: int) -> NoReturn:
        raise ConstraintError(f"{where(self.line, column, self.raw)}: {message}", self.line, column)

    def _tokenise(self) -> list[Token]:
        out: list[Token] = []
        pos = 0
        raw = self.raw
        while pos < len(raw):
            m = TOKEN.match(raw, pos)
            if m is None:
                self._bad_character(pos)
            kind = m.lastgroup or "op"
            if kind != "space":
                text = m.group()[1:-1].replace("``", "`") if kind == "quoted" else m.group()
                out.append(Token(kind, text, pos + 1, m.end()))
            pos = m.end()
        out.append(Token("end", "", len(raw) + 1, len(raw)))
        return out

    def _bad_character(self, pos: int) -> NoReturn:
        ch = self.raw[pos]
        if ch == "`":
            self.fail("a backquote opens a name here but nothing closes it; end the name with another `.", pos + 1)
        if ch == "#":
            self.fail("a comment takes a line of its own, starting with #.", pos + 1)
        self.fail(f"unexpected character {ch!r}. A constraint uses numbers, feature names (`backquoted` when they "
                  "hold spaces or symbols), + - * / ( ), old(...), delta(...) and one of <= >= < > ==.", pos + 1)

    # ---------------------------------------------------------------- tokens
    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def at_op(self, *ops: str) -> bool:
        t = self.peek()
        return t.kind == "op" and t.text in ops

    def at_keyword(self, word: str) -> bool:
        t = self.peek()
        return t.kind == "name" and t.text.lower() == word

    def snippet(self, a: _Affine) -> str:
        return self.raw[a.start:a.end].strip()

    # ------------------------------------------------------------ statements
    def statement(self) -> LinearForm | Implication:
        if self.at_keyword("if"):
            self.take()
            premises = self.conjunction()
            if not self.at_keyword("then"):
                t = self.peek()
                self.fail(f"an implication reads `if ... then ...`; expected `then` here, found "
                          f"{self.found(t)}.", t.column)
            self.take()
            conclusions = self.conjunction()
            self.finish()
            return Implication(premises, conclusions)
        form = self.comparison()
        self.finish()
        return form

    def conjunction(self) -> tuple[LinearForm, ...]:
        forms = [self.comparison()]
        while self.at_keyword("and"):
            self.take()
            forms.append(self.comparison())
        return tuple(forms)

    def finish(self) -> None:
        t = self.peek()
        if t.kind == "end":
            return
        word = t.text.lower() if t.kind == "name" else ""
        if word == "and":
            self.fail("`and` joins comparisons inside `if ... then ...` only; write each constraint on a line of "
                      "its own (every line must hold).", t.column)
        if word == "or":
            self.fail("`or` is not part of the language: every line must hold. Write the cases as implications "
                      "(`if ... then ...`).", t.column)
        if word == "then":
            self.fail("`then` without `if`: an implication reads `if ... then ...`.", t.column)
        self.fail(f"{self.found(t)} cannot follow here: expected an operator (+ - * /) or the end of the "
                  "constraint.", t.column)

    @staticmethod
    def found(t: Token) -> str:
        return "the end of the line" if t.kind == "end" else f"`{t.text}`"

    def comparison(self) -> LinearForm:
        lhs = self.expr()
        t = self.comparator(lhs)
        self.take()
        rhs = self.expr()
        nxt = self.peek()
        if nxt.kind == "op" and nxt.text in _COMPARE:
            self.fail(f"one comparison per constraint: write `{self.raw[lhs.start:nxt.column - 1].strip()}` and "
                      f"`{self.snippet(rhs)} {nxt.text} ...` on two lines.", nxt.column)
        return self.form(lhs, rhs, _COMPARE[t.text], t.column)

    def comparator(self, lhs: _Affine) -> Token:
        """The comparison after ``lhs`` (not yet taken); a mistyped, unsupported or missing one refused."""
        t = self.peek()
        if t.kind == "op" and t.text in _MISTYPED:
            self.fail(f"`{t.text}` is written `{_MISTYPED[t.text]}`.", t.column)
        if t.kind == "op" and t.text == "!=":
            self.fail("`!=` (not equal) is not supported: it splits the values in two. Write `<` or `>`, or an "
                      "implication.", t.column)
        if not (t.kind == "op" and t.text in _COMPARE):
            product = (f" (a product is written with *: `{self.snippet(lhs)} * {t.text}`)"
                       if t.kind in ("number", "name", "quoted") and t.text.lower() not in KEYWORDS else "")
            self.fail(f"expected a comparison (<=, >=, <, >, ==) after `{self.snippet(lhs)}`, found "
                      f"{self.found(t)}{product}.", t.column)
        return t

    # ----------------------------------------------------------- expressions
    def expr(self) -> _Affine:
        a = self.term()
        while self.at_op("+", "-"):
            op = self.take()
            b = self.term()
            a = a.plus(b, 1.0 if op.text == "+" else -1.0)
        return a

    def term(self) -> _Affine:
        a = self.unary()
        while self.at_op("*", "/"):
            op = self.take()
            b = self.unary()
            a = self.product(a, b, op)
        return a

    def unary(self) -> _Affine:
        if self.at_op("+", "-"):
            op = self.take()
            a = self.unary()
            return a.scaled(-1.0 if op.text == "-" else 1.0, op.column - 1, a.end)
        a = self.atom()
        if self.at_op("**", "^"):
            t = self.peek()
            self.fail(f"`{t.text}` raises `{self.snippet(a)}` to a power, which is not linear. A constraint "
                      "adds features times numbers; write a number as the number itself.", t.column)
        return a

    def product(self, a: _Affine, b: _Affine, op: Token) -> _Affine:
        if op.text == "*":
            if a.has_features and b.has_features:
                self.fail(f"`{self.snippet(a)} * {self.snippet(b)}` multiplies two expressions that hold features, "
                          "which is not linear. Multiply a feature only by a number (e.g. 0.4 * income).", op.column)
            k, e = (a.const[0], b) if not a.has_features else (b.const[0], a)
            return self.finite(e.scaled(k, a.start, b.end), op.column)
        if b.has_features:
            self.fail(f"`{self.snippet(a)} / {self.snippet(b)}` divides by an expression that holds features, which "
                      "is not linear. Divide only by a number.", op.column)
        if b.const[0] == 0:
            self.fail(f"`{self.snippet(a)} / {self.snippet(b)}` divides by zero.", op.column)
        return self.finite(a.scaled(1.0 / b.const[0], a.start, b.end), op.column)

    def finite(self, a: _Affine, column: int) -> _Affine:
        if not all(math.isfinite(v) for v, _ in [*a.terms.values(), a.const]):
            self.fail("a number here overflows (it is too large to compute with).", column)
        return a

    def atom(self) -> _Affine:
        t = self.take()
        if t.kind == "number":
            return self.finite(_constant(float(t.text), t.column - 1, t.end), t.column)
        if t.kind == "quoted":
            return self.variable(t.text, t)
        if t.kind == "name":
            return self.named(t)
        if t.kind == "op" and t.text == "(":
            a = self.expr()
            close = self.expect(")", a)
            return _Affine(a.terms, a.const, t.column - 1, close.end)
        if t.kind == "op" and t.text == "->":
            self.fail("`->` belongs to a category move, which reads `Feature: level -> level, level`.", t.column)
        self.fail(f"expected a number or a feature, found {self.found(t)}.", t.column)

    def named(self, t: Token) -> _Affine:
        """A bare name: a call of old/delta, or a feature (a keyword is refused)."""
        if t.text.lower() in KEYWORDS:
            self.fail(f"`{t.text}` where a number or a feature is expected (a feature named {t.text!r} is written "
                      f"`{t.text}` in backquotes).", t.column)
        return self.call(t) if self.at_op("(") else self.variable(t.text, t)

    def expect(self, op: str, after: _Affine) -> Token:
        t = self.peek()
        if not (t.kind == "op" and t.text == op):
            self.fail(f"expected `{op}` after `{self.snippet(after)}`, found {self.found(t)}.", t.column)
        return self.take()

    def call(self, name: Token) -> _Affine:
        fn = name.text.lower()
        if fn not in ("old", "delta"):
            self.fail(f"`{name.text}(...)` is not linear: the only functions are old(feature), the row's own "
                      "value, and delta(feature), the change (feature - old(feature)).", name.column)
        self.take()
        inner = self.expr()
        close = self.expect(")", inner)
        if inner.has_old:
            self.fail(f"`{name.text}(...)` of an expression that already holds old(...) means nothing: old(f) is "
                      "the row's own value, delta(f) is f - old(f); apply them to new values only.", name.column)
        olds = _Affine({(True, j): vm for (_, j), vm in inner.terms.items()}, (0.0, 0.0),
                       name.column - 1, close.end)
        if fn == "old":
            return _Affine(olds.terms, inner.const, name.column - 1, close.end)
        now = _Affine(inner.terms, (0.0, 0.0), name.column - 1, close.end)
        return now.plus(olds, -1.0)

    # ------------------------------------------------------------------ names
    def variable(self, name: str, t: Token) -> _Affine:
        return _Affine({(False, self.resolve(name, t.column)): (1.0, 1.0)}, (0.0, 0.0), t.column - 1, t.end)

    def resolve(self, name: str, column: int) -> int:
        """The index of a numeric feature; a categorical feature, a one-hot column
        or group is told to use a category move; an unknown name gets the closest."""
        schema = self.schema
        names = schema.names
        if name in names:
            j = names.index(name)
            f = schema.features[j]
            if f.kind == "categorical":
                self.fail(f"{name!r} is categorical: its codes are no number to add or compare. Say where a row may "
                          f"go with a category move, `{quote(name)}: level -> level, level`.", column)
            if f.kind == "one-hot":
                g = str(f.group)
                self.fail(f"{name!r} is a column of the one-hot group {g!r}, a category. Say where a row may go "
                          f"with a category move, `{quote(g)}: level -> level, level`.", column)
            return j
        if name in schema.groups():
            self.fail(f"{name!r} is a one-hot group, a category. Say where a row may go with a category move, "
                      f"`{quote(name)}: level -> level, level`.", column)
        try:
            return feature_index(names, name, error=ConstraintError, what=where(self.line, column, self.raw))
        except ConstraintError as e:
            raise ConstraintError(str(e), self.line, column) from None

    # ------------------------------------------------------------------ forms
    def form(self, lhs: _Affine, rhs: _Affine, sense: str, column: int) -> LinearForm:
        """``lhs - rhs <sense> 0``, terms merged and sorted, cancelled ones dropped; a
        strict sense over integral features with integer numbers made non-strict."""
        diff = lhs.plus(rhs, -1.0)
        kept = {key: v for key, (v, m) in diff.terms.items() if abs(v) > _CANCELLED * m}
        const = diff.const[0] if abs(diff.const[0]) > _CANCELLED * diff.const[1] else 0.0
        new, old_ = _by_side(kept)
        if not all(math.isfinite(v) for v in [*kept.values(), const]):
            self.fail("a number in this comparison overflows (it is too large to compute with).", column)
        if sense in ("<", ">") and self.integral(kept, const):
            const, sense = (const - 1.0, ">=") if sense == ">" else (const + 1.0, "<=")
        return LinearForm(new, old_, float(const) + 0.0, sense)

    def integral(self, kept: dict[tuple[bool, int], float], const: float) -> bool:
        return (all(self.schema.features[j].integral for _, j in kept) and float(const).is_integer()
                and all(float(v).is_integer() for v in kept.values()))


