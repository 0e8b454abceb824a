"""The constraint language analysts write (issue #61 item 1): each line read to the right
coefficients, checked on rows computed by hand, and every mistake named with its line and
column.

A linear form reads ``sum(a * new) + sum(b * old) + const <sense> 0``; ``on_row`` turns it
into ``a @ x <sense> rhs`` for a row, and ``holds`` checks new points, here against values
worked out on paper. Category moves are checked in the codes view (a categorical feature's
code, a one-hot group's 0/1 columns). The schema keeps the lines, checks them when it is
made and writes them to its JSON; files saved before constraints existed still read.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from core.constraints import (
    CategoryMove,
    ConstraintError,
    Implication,
    LinearForm,
    parse,
)
from core.errors import SchemaError
from core.schema import FeatureSpec, Schema

NAMES = ["Age", "EducationNumber", "HoursPerWeek", "debt", "income", "capital gain", "MaritalStatus",
         "workclass=Private", "workclass=Self-emp", "workclass_Gov", "a", "b"]
AGE, EDU, HOURS, DEBT, INCOME, GAIN, MARITAL, PRIVATE, SELF, GOV, A, B = range(len(NAMES))


@pytest.fixture(scope="module")
def schema():
    return Schema([
        FeatureSpec("Age", "integer", 17, 90), FeatureSpec("EducationNumber", "integer", 1, 16),
        FeatureSpec("HoursPerWeek", "numerical", 0, 99), FeatureSpec("debt", "numerical", 0, 10),
        FeatureSpec("income", "numerical", 0, 10), FeatureSpec("capital gain", "numerical", 0, 1e5),
        FeatureSpec("MaritalStatus", "categorical", 0, 4,
                    levels=("Never-married", "Married-civ-spouse", "Divorced", "Widowed")),
        FeatureSpec("workclass=Private", "one-hot", group="workclass"),
        FeatureSpec("workclass=Self-emp", "one-hot", group="workclass"),
        FeatureSpec("workclass_Gov", "one-hot", group="workclass"),
        FeatureSpec("a", "numerical", -10, 10), FeatureSpec("b", "numerical", -10, 10),
    ])


def row(**values):
    x = np.zeros(len(NAMES))
    x[PRIVATE] = 1.0
    for k, v in values.items():
        x[NAMES.index(k)] = v
    return x


def one(text, schema):
    cons = parse(text, schema)
    assert len(cons) == 1
    return cons[0].form


# ------------------------------------------------------------------ linear forms
@pytest.mark.parametrize("text, new, old, const, sense", [
    ("delta(Age) >= delta(EducationNumber)", {AGE: 1, EDU: -1}, {AGE: -1, EDU: 1}, 0, ">="),
    ("debt - 0.4 * income <= 0", {DEBT: 1, INCOME: -0.4}, {}, 0, "<="),
    ("delta(HoursPerWeek) <= 10", {HOURS: 1}, {HOURS: -1}, -10, "<="),
    ("2*(a + b) - 3 >= old(a)/2", {A: 2, B: 2}, {A: -0.5}, -3, ">="),
    ("a = b", {A: 1, B: -1}, {}, 0, "=="),
    ("-(a - 2*b)/4 + 1 < 0.5", {A: -0.25, B: 0.5}, {}, 0.5, "<"),
    ("3 * delta(a) + old(b) == 2 * old(a) - a + a", {A: 3}, {A: -5, B: 1}, 0, "=="),
])
def test_each_form_reads_to_its_coefficients(schema, text, new, old, const, sense):
    f = one(text, schema)
    assert isinstance(f, LinearForm)
    assert f.new == tuple(sorted((j, float(c)) for j, c in new.items()))
    assert f.old == tuple(sorted((j, float(c)) for j, c in old.items()))
    assert f.const == pytest.approx(const) and f.sense == sense


def test_on_row_folds_the_rows_own_values_into_the_right_hand_side(schema):
    x_hat = row(Age=30, EducationNumber=10, HoursPerWeek=40, a=4, b=1)
    a, rhs, sense = one("delta(Age) >= delta(EducationNumber)", schema).on_row(x_hat)
    assert (a[AGE], a[EDU], rhs, sense) == (1.0, -1.0, 20.0, ">=")      # Age - Edu >= 30 - 10
    assert np.count_nonzero(a) == 2 and a.shape == (len(NAMES),)
    a, rhs, _ = one("delta(HoursPerWeek) <= 10", schema).on_row(x_hat)
    assert (a[HOURS], rhs) == (1.0, 50.0)                                   # Hours <= 40 + 10
    a, rhs, _ = one("2*(a + b) - 3 >= old(a)/2", schema).on_row(x_hat)
    assert (a[A], a[B], rhs) == (2.0, 2.0, 5.0)                             # 2a + 2b >= 3 + 4/2


def test_holds_matches_the_comparison_worked_by_hand(schema):
    x_hat = row(Age=30, EducationNumber=10, HoursPerWeek=40, debt=2, income=5, a=4, b=1)
    X = np.array([row(Age=31, EducationNumber=11, HoursPerWeek=50, debt=2, income=5, a=1, b=1.5),
                  row(Age=30, EducationNumber=11, HoursPerWeek=50.5, debt=2.5, income=5, a=1, b=1.49),
                  row(Age=35, EducationNumber=10, HoursPerWeek=30, debt=0.5, income=2, a=2.5, b=0)])
    cases = {
        "delta(Age) >= delta(EducationNumber)": [True, False, True],        # 1 >= 1; 0 >= 1; 5 >= 0
        "delta(HoursPerWeek) <= 10": [True, False, True],                    # 10 <= 10; 10.5; -10
        "debt - 0.4 * income <= 0": [True, False, True],                     # 0 <= 0; 0.5; -0.3
        "2*(a + b) - 3 >= old(a)/2": [True, False, True],                    # 2 >= 2; 1.98 >= 2; 2 >= 2
    }
    for text, expected in cases.items():
        assert one(text, schema).holds(x_hat, X).tolist() == expected, text


def test_a_strict_inequality_breaks_on_its_boundary_and_equality_holds_within_round_off(schema):
    x_hat = row(a=0, b=0)
    strict = one("a + 0.5 * b > 1", schema)
    assert strict.sense == ">"
    assert strict.holds(x_hat, [row(a=1, b=0), row(a=1, b=1e-6), row(a=0.5, b=1)]).tolist() == [False, True, False]
    eq = one("a == 0.1 + 0.2", schema)
    assert eq.holds(x_hat, [row(a=0.3), row(a=0.3001)]).tolist() == [True, False]


# -------------------------------------------------------------------- implications
def test_implications_take_and_on_both_sides(schema):
    f = one("if delta(a) > 0 and old(b) < 5 then delta(b) >= 1 and delta(HoursPerWeek) == 0", schema)
    assert isinstance(f, Implication) and len(f.premises) == 2 and len(f.conclusions) == 2
    assert f.premises[1] == LinearForm((), ((B, 1.0),), -5.0, "<")
    assert f.conclusions[1] == LinearForm(((HOURS, 1.0),), ((HOURS, -1.0),), 0.0, "==")
    x_hat = row(a=1, b=2, HoursPerWeek=40)
    X = [row(a=1, b=2, HoursPerWeek=45),        # delta(a) = 0: nothing required
         row(a=2, b=3, HoursPerWeek=40),        # premises hold, both conclusions hold
         row(a=2, b=2.5, HoursPerWeek=40),      # delta(b) = 0.5 < 1
         row(a=2, b=3, HoursPerWeek=41)]        # hours moved
    assert f.holds(x_hat, X).tolist() == [True, True, False, False]
    assert f.holds(row(a=1, b=6, HoursPerWeek=40), X).tolist() == [True] * 4   # old(b) >= 5: nothing required


def test_the_issues_example_implication(schema):
    f = one("if delta(EducationNumber) > 0 then delta(Age) >= 2 * delta(EducationNumber)", schema)
    assert f.premises == (LinearForm(((EDU, 1.0),), ((EDU, -1.0),), -1.0, ">="),)    # integral: > 0 is >= 1
    x_hat = row(Age=30, EducationNumber=10)
    X = [row(Age=30, EducationNumber=10), row(Age=34, EducationNumber=12), row(Age=33, EducationNumber=12)]
    assert f.holds(x_hat, X).tolist() == [True, True, False]


# ------------------------------------------------------------------ category moves
def test_a_move_on_a_categorical_feature_binds_rows_at_its_level_only(schema):
    cons = parse("MaritalStatus: Never-married -> Married-civ-spouse, Divorced", schema)
    assert cons.moves() == [CategoryMove("MaritalStatus", "Never-married", ("Married-civ-spouse", "Divorced"))]
    single = row(MaritalStatus=0)
    assert cons.allowed_codes(single) == {MARITAL: {0, 1, 2}}
    X = [row(MaritalStatus=c) for c in (0, 1, 2, 3, 4)]           # 4: the missing / unseen code
    assert cons.holds(single, X)[:, 0].tolist() == [True, True, True, False, False]
    divorced = row(MaritalStatus=2)
    assert cons.allowed_codes(divorced) == {} and cons.holds(divorced, X).all()
    assert cons.violated(single, row(MaritalStatus=3)) == [0] and cons.violated(single, row(MaritalStatus=1)) == []


def test_moves_for_the_same_level_all_bind(schema):
    cons = parse(["MaritalStatus: Never-married -> Married-civ-spouse, Divorced",
                  "MaritalStatus: Never-married -> Divorced, Widowed"], schema)
    assert cons.allowed_codes(row(MaritalStatus=0)) == {MARITAL: {0, 2}}
    assert cons.holds(row(MaritalStatus=0), [row(MaritalStatus=1)]).tolist() == [[True, False]]


def test_a_move_on_a_one_hot_group_by_level_or_column_name(schema):
    assert schema.group_levels() == {"workclass": ("Private", "Self-emp", "Gov")}
    cons = parse("workclass: Private -> `Self-emp`, workclass_Gov\nworkclass: Gov -> Gov", schema)
    assert cons.moves()[0] == CategoryMove("workclass", "Private", ("Self-emp", "Gov"))
    private, gov = row(), row(**{"workclass=Private": 0, "workclass_Gov": 1})
    assert cons.allowed_groups(private) == {"workclass": {PRIVATE, SELF, GOV}}
    assert cons.allowed_groups(gov) == {"workclass": {GOV}}
    to_self = row(**{"workclass=Private": 0, "workclass=Self-emp": 1})
    assert cons.holds(gov, [gov, to_self, private]).tolist() == [[True, True], [True, False], [True, False]]
    assert cons.holds(private, [to_self]).tolist() == [[True, True]]
    assert cons.allowed_codes(private) == {}


def test_backquoted_names_and_levels(schema):
    f = one("`capital gain` >= old(`capital gain`) + 100", schema)
    assert f == LinearForm(((GAIN, 1.0),), ((GAIN, -1.0),), -100.0, ">=")
    commas = Schema([FeatureSpec("job", "categorical", 0, 3, levels=("clerk, senior", "clerk", "manager")),
                     FeatureSpec("odd`name")])
    cons = parse("`job`: `clerk, senior` -> manager , `clerk`\n`odd``name` <= 3", commas)
    assert cons.moves() == [CategoryMove("job", "clerk, senior", ("manager", "clerk"))]
    assert cons.linear() == [LinearForm(((1, 1.0),), (), -3.0, "<=")]


# ------------------------------------------------------------- strict inequalities
@pytest.mark.parametrize("text, const, sense", [
    ("Age > 30", -31.0, ">="),                          # integer feature, integer numbers
    ("delta(Age) < 2", -1.0, "<="),                     # Age - old(Age) - 2 + 1 <= 0
    ("2 * Age - 3 * EducationNumber < -4", 5.0, "<="),
    ("HoursPerWeek > 30", -30.0, ">"),                  # a numerical feature: stays strict
    ("Age > 30.5", -30.5, ">"),                         # a fractional bound: stays strict
    ("0.5 * Age > 3", -3.0, ">"),                       # a fractional coefficient: stays strict
    ("Age + HoursPerWeek < 50", -50.0, "<"),            # one feature not integral
])
def test_strict_inequalities_over_integers_become_non_strict(schema, text, const, sense):
    f = one(text, schema)
    assert (f.const, f.sense) == (const, sense)


def test_integral_normalisation_keeps_the_same_integer_points(schema):
    f = one("Age > 30", schema)
    X = [row(Age=v) for v in (29, 30, 31, 32)]
    assert f.holds(row(Age=20), X).tolist() == [False, False, True, True]


# ---------------------------------------------------------------------- errors
def test_an_unknown_name_is_named_with_the_closest_and_its_place(schema):
    with pytest.raises(ConstraintError, match=r"Line 2, column 7 .*Unknown feature 'Agee'.*Did you mean 'Age'") as e:
        parse("# ages\ndelta(Agee) >= 0", schema)
    assert (e.value.line, e.value.column) == (2, 7)
    assert isinstance(e.value, SchemaError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("text, column, what", [
    ("debt * income <= 3", 6, "multiplies two expressions that hold features"),
    ("debt + a * (b + 1) <= 3", 10, "multiplies two expressions"),
    ("debt / income <= 3", 6, "divides by an expression that holds features"),
    ("debt ** 2 <= 1", 6, "to a power"),
    ("debt^2 <= 1", 5, "to a power"),
    ("1 + abs(debt) <= 1", 5, r"`abs\(...\)` is not linear"),
    ("debt / (2 - 2) >= 1", 6, "divides by zero"),
])
def test_non_linear_terms_are_refused_at_their_column(schema, text, column, what):
    with pytest.raises(ConstraintError, match=rf"Line 1, column {column} .*{what}") as e:
        parse(text, schema)
    assert (e.value.line, e.value.column) == (1, column)
    assert "not linear" in str(e.value) or what == "divides by zero"


def test_a_product_with_a_number_on_either_side_is_linear(schema):
    assert one("(debt + 1) * 2 - income / 4 * 2 >= 0", schema) == LinearForm(
        ((DEBT, 2.0), (INCOME, -0.5)), (), 2.0, ">=")


@pytest.mark.parametrize("text, name", [
    ("MaritalStatus >= 1", "'MaritalStatus' is categorical"),
    ("delta(workclass) == 0", "'workclass' is a one-hot group"),
    ("`workclass=Private` <= 0", "'workclass=Private' is a column of the one-hot group 'workclass'"),
])
def test_a_category_in_a_comparison_points_to_a_category_move(schema, text, name):
    with pytest.raises(ConstraintError, match=f"{name}.*category move") as e:
        parse(text, schema)
    assert e.value.line == 1 and e.value.column is not None


def test_a_bad_move_level_or_feature_is_named_with_the_closest(schema):
    with pytest.raises(ConstraintError, match=r"Line 1, column 33 .*no level 'Divorcd'.*Did you mean 'Divorced'"):
        parse("MaritalStatus: Never-married -> `Divorcd`", schema)
    with pytest.raises(ConstraintError, match=r"Line 2, column 1 .*Unknown feature 'Marital'.*'MaritalStatus'"):
        parse("a >= 0\nMarital: Never-married -> Divorced", schema)
    with pytest.raises(ConstraintError, match=r"'debt' is numerical, not a category"):
        parse("debt: 1 -> 2", schema)
    with pytest.raises(ConstraintError, match=r"column 29 .*one level before `->`"):
        parse("MaritalStatus: Never-married, Widowed -> Divorced", schema)


@pytest.mark.parametrize("text, line, column, what", [
    ("a >= 0\n\n  debt @ 3 <= 1", 3, 8, "unexpected character '@'"),
    ("debt >= ", 1, 8, "expected a number or a feature, found the end of the line"),
    ("(debt >= 1", 1, 7, "expected `\\)`"),
    ("2 debt >= 1", 1, 3, "a product is written with \\*"),
    ("0 <= debt <= 5", 1, 11, "one comparison per constraint"),
    ("debt >= 1 and a <= 2", 1, 11, "`and` joins comparisons inside `if ... then ...` only"),
    ("if debt > 0 a >= 1", 1, 13, "expected `then` here"),
    ("`capital gain >= 1", 1, 1, "nothing closes it"),
    ("debt => 1", 1, 6, "written `>=`"),
    ("MaritalStatus: Never-married", 1, 14, "no `->`"),
])
def test_a_syntax_error_names_its_line_and_column(schema, text, line, column, what):
    with pytest.raises(ConstraintError, match=rf"Line {line}, column {column} .*{what}") as e:
        parse(text, schema)
    assert (e.value.line, e.value.column) == (line, column)


@pytest.mark.parametrize("texts, lines", [
    (["0 >= 1"], "Line 1 .*holds no feature and is false"),
    (["delta(a) - delta(a) > 0"], "Line 1 .*holds no feature and is false"),
    (["a >= 5", "b <= 0", "2 * a <= 6"], "line 1 \\('a >= 5'\\) and line 3 \\('2 \\* a <= 6'\\)"),
    (["Age > 3", "Age < 4"], "line 1 .* and line 2"),                       # integral: >= 4 and <= 3
    (["delta(a) > 0", "-delta(a) >= 0"], "line 1 .* and line 2"),
    (["a - b == 1", "b - a == 0"], "line 1 .* and line 2"),
])
def test_constraints_no_row_can_meet_are_refused_saying_which(schema, texts, lines):
    with pytest.raises(ConstraintError, match=lines):
        parse(texts, schema)


def test_bounds_that_meet_are_no_contradiction(schema):
    cons = parse(["a >= 5", "a <= 5", "b <= 3", "delta(a) >= 0", "old(a) + 1 > a", "1 >= 0"], schema)
    assert len(cons) == 6


# ---------------------------------------------------------------- the sequence
def test_line_numbers_count_blank_and_comment_lines(schema):
    cons = parse("\n# policy\n  delta(Age) >= 0  \n\nMaritalStatus: Widowed -> Widowed\n", schema)
    assert [(c.line, c.text) for c in cons] == [(3, "delta(Age) >= 0"), (5, "MaritalStatus: Widowed -> Widowed")]
    assert cons.texts == ["delta(Age) >= 0", "MaritalStatus: Widowed -> Widowed"]
    assert len(cons.linear()) == 1 and len(cons.moves()) == 1 and cons.implications() == []
    assert parse([], schema) == () and parse("# nothing", schema).holds(row(), [row(), row()]).shape == (2, 0)


def test_holds_has_one_column_per_constraint_and_violated_names_them(schema):
    cons = parse(["delta(Age) >= 0", "if delta(a) > 0 then delta(b) >= 1", "MaritalStatus: Never-married -> Divorced"],
                 schema)
    x_hat = row(Age=40, a=0, b=0, MaritalStatus=0)
    X = [row(Age=41, a=1, b=1, MaritalStatus=2), row(Age=39, a=1, b=0, MaritalStatus=1)]
    assert cons.holds(x_hat, X).tolist() == [[True, True, True], [False, False, False]]
    assert cons.violated(x_hat, X[1]) == [0, 1, 2] and cons.violated(x_hat, X[0]) == []


# --------------------------------------------------------------------- the schema
def test_the_schema_checks_its_constraints_when_made(schema):
    with pytest.raises(ConstraintError, match="Unknown feature 'Agee'"):
        Schema(schema.features, constraints=("delta(Agee) >= 0",))
    with pytest.raises(ConstraintError, match="Line 1, column 6"):
        schema.with_constraints("debt * income <= 3")
    s = schema.with_constraints("# keep age\ndelta(Age) >= 0\n\n")
    assert s.constraints == ("# keep age", "delta(Age) >= 0")
    assert s.parsed_constraints().texts == ["delta(Age) >= 0"] and s.parsed_constraints()[0].line == 2
    assert schema.parsed_constraints() == () and schema.constraints == ()
    assert s.with_updates("HoursPerWeek", weight=2.0).constraints == s.constraints
    with pytest.raises(ConstraintError, match="'Age' is categorical"):       # a change of kind re-reads the lines
        s.with_updates("Age", kind="categorical", levels=("young", "old"))


def test_the_schema_json_keeps_the_constraints(schema):
    lines = ("# policy", "delta(Age) >= 0", "if delta(a) > 0 then delta(b) >= 1",
             "workclass: Private -> `Self-emp`", "`capital gain` <= 1000")
    s = schema.with_constraints(lines)
    d = json.loads(s.to_json())
    assert d["constraints"] == list(lines)
    back = Schema.from_json(s.to_json())
    assert back == s and back.constraints == lines
    assert back.parsed_constraints() == s.parsed_constraints()
    x_hat, X = row(Age=30, a=0, b=0), [row(Age=29, a=1, b=1), row(Age=31, a=1, b=0.5)]
    np.testing.assert_array_equal(back.parsed_constraints().holds(x_hat, X), s.parsed_constraints().holds(x_hat, X))
    again = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(again.parsed_constraints().holds(x_hat, X), s.parsed_constraints().holds(x_hat, X))


def test_json_saved_before_constraints_still_reads(schema):
    d = json.loads(schema.to_json())
    assert "constraints" not in d                                  # a schema without any writes the file as before
    old = Schema.from_dict(d)
    assert old == schema and old.constraints == () and old.parsed_constraints() == ()
    v1 = {"version": 1, "target": "y", "features": [{"name": "c=x", "kind": "categorical", "group": "c"},
                                                    {"name": "c=y", "kind": "categorical", "group": "c"}]}
    assert Schema.from_dict(v1).constraints == () and Schema.from_dict(v1).target == "y"


def test_a_settings_file_with_bad_constraints_says_what_is_wrong(schema):
    d = json.loads(schema.to_json())
    with pytest.raises(ConstraintError, match="Line 1, column 1 .*Unknown feature 'Ag'"):
        Schema.from_dict({**d, "constraints": ["Ag >= 1"]})
    with pytest.raises(SchemaError, match="'constraints' must be a list of lines"):
        Schema.from_dict({**d, "constraints": {"a": 1}})


def test_the_feature_table_editor_keeps_the_constraints(schema):
    s = schema.with_constraints("delta(Age) >= 0")
    assert Schema.from_frame(s.to_frame(), base=s).constraints == ("delta(Age) >= 0",)


def test_a_workspace_built_with_a_saved_schema_keeps_its_constraints():
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    from core.intake.workspace import build_workspace

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 80, 60), "income": rng.normal(size=60)})
    df["y"] = (df["age"] > 40).astype(int)
    model = DecisionTreeClassifier(max_depth=2, random_state=0).fit(df[["age", "income"]], df["y"])
    first = build_workspace(df, "y", model, name="t")
    saved = first.schema.with_constraints("delta(age) >= 0\nincome <= old(income) + 1")
    ws = build_workspace(df, "y", model, name="t", schema=Schema.from_json(saved.to_json()))
    assert ws.schema.constraints == saved.constraints
    assert ws.schema.parsed_constraints().texts == ["delta(age) >= 0", "income <= old(income) + 1"]
