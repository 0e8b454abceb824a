"""Constraints between features: a language analysts write, one constraint per line.

The same text is shown on the Data & model page, saved in the feature settings
(:class:`core.schema.Schema` keeps the lines, its JSON writes them), used by the
library and printed in every export and report. :func:`parse` reads the lines
against a schema into typed forms (:mod:`core.constraints.forms`) that the
solvers encode; the schema checks its lines when it is made, so a line that
cannot be read never reaches an analysis.

The language, by example (``Age`` is the new value, ``old(Age)`` the row's own
value, ``delta(Age)`` the change ``Age - old(Age)``)::

    # a line starting with # is a comment; blank lines are skipped
    delta(Age) >= delta(EducationNumber)
    debt - 0.4 * income <= 0
    delta(HoursPerWeek) <= 10
    2*(a + b) - 3 >= old(a)/2
    `capital gain` >= old(`capital gain`)
    if delta(EducationNumber) > 0 then delta(Age) >= 2 * delta(EducationNumber)
    if delta(a) > 0 and old(b) < 5 then delta(b) >= 1 and delta(c) == 0
    MaritalStatus: Never-married -> Married-civ-spouse, Divorced

* **Comparisons** ``<=``, ``>=``, ``<``, ``>``, ``==`` (``=`` reads as ``==``) between
  linear expressions: numbers, numeric features, ``old(...)``, ``delta(...)``, ``+``,
  ``-``, parentheses, a product of a number and an expression, a quotient by a
  number. A product of two expressions holding features, a quotient by one, a
  power (``**``, ``^``) or any other function (``abs``, ``max``) is not linear and is
  refused at its column. A strict comparison whose features are all integral
  (:data:`core.schema.INTEGRAL_KINDS`) with integer numbers is read as the
  non-strict one on the next integer (``a > 3`` is ``a >= 4``).
* **Implications** ``if C1 and C2 ... then D1 and D2 ...``: where every premise
  holds, every conclusion must.
* **Category moves** ``Feature: level -> level, level``: a row at that level of a
  categorical feature (or one-hot group) may go to the listed levels, or stay; a
  level no move lists keeps its own moves. Several moves for the same level all
  bind (a row may go only where each allows).
* **Names** are the schema's features, one-hot groups and levels; a name with
  spaces or symbols is backquoted (`` `capital gain` ``, a backquote inside doubled).
  Every name goes through the one resolver (:func:`core.model.features.feature_index`),
  so a misspelt one gets the closest names. ``if``, ``then``, ``and``, ``or`` are
  keywords; a feature so named is backquoted.

Every error is a :class:`core.errors.ConstraintError` (a ``SchemaError``) naming the
line and the column. Constraints that no row can meet are refused where that is
cheap to see (a false comparison of numbers only, such as ``0 >= 1``; two bounds
on the same expression that exclude each other); whether all of them leave any
point for a given row is the solver's question.

Parsed forms (the contract with the solvers): a :class:`LinearForm` is
``sum(a * new) + sum(b * old) + const <sense> 0`` over feature indices of the
schema; :meth:`LinearForm.on_row` gives ``(a, rhs, sense)`` with ``a @ x <sense> rhs``
for a row; :class:`Constraints` checks points (:meth:`~Constraints.holds`,
:meth:`~Constraints.violated`) and tells which categories a row may reach
(:meth:`~Constraints.allowed_codes`, :meth:`~Constraints.allowed_groups`).
"""

from __future__ import annotations

from core.constraints.editing import examples, problems
from core.constraints.forms import SENSES, CategoryMove, Constraint, Constraints, Implication, LinearForm
from core.constraints.reader import constraint_lines, parse
from core.constraints.view import FeatureView, SchemaView
from core.errors import ConstraintError

#: :func:`parse` under the name ``core`` exports it by
parse_constraints = parse

__all__ = ["ConstraintError", "LinearForm", "Implication", "CategoryMove", "Constraint", "Constraints", "parse",
           "parse_constraints", "constraint_lines", "SENSES", "SchemaView", "FeatureView", "problems", "examples"]
