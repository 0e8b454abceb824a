"""Small hardening cases of issue 16: bad arguments and names get clear messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.counterfactual import QueryError
from core.errors import DataError
from core.intake import io


@pytest.fixture(scope="module")
def forest():
    from sklearn.ensemble import RandomForestClassifier

    from core.intake.models import from_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int)
    return X, from_model(RandomForestClassifier(10, max_depth=3, random_state=0).fit(X, y))


@pytest.mark.parametrize("limit", [math.nan, -1.0, 0.0, math.inf, "soon"])
def test_time_limits_must_be_finite_positive(forest, limit):
    from core.optimal import optimal_counterfactual
    from core.regions import counterfactual_set, exact_counterfactual

    X, ens = forest
    for call in (lambda: exact_counterfactual(ens, X[0], 1, time_limit=limit),
                 lambda: counterfactual_set(ens, X[0], 1, 1.0, time_limit=limit),
                 lambda: optimal_counterfactual(ens, X[0], 1, time_limit=limit)):
        with pytest.raises(QueryError, match="time limit"):
            call()


def test_classifier_with_an_interval_target_says_so(forest):
    from core.optimal import optimal_counterfactual

    X, ens = forest
    with pytest.raises(QueryError, match="intervals are for regressors"):
        optimal_counterfactual(ens, X[0], (0.5, 1.0))


def test_duplicate_csv_headers_are_named():
    with pytest.raises(DataError, match=r"duplicate column names \['age'\]"):
        io.load_table(b"age,income,age\n1,2,3\n4,5,6\n", "t.csv")


def test_quotes_and_backslashes_in_names_survive_graphviz():
    graphviz = pytest.importorskip("graphviz")
    from core.tcrex import TCREx

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    pred = (X[:, 0] + X[:, 1] > 0).astype(int)
    names = ['income "net" \\ yr', "age"]
    tc = TCREx(random_state=0).fit(X, pred, 1, feature_names=names)
    dot = tc.to_graphviz()
    src = graphviz.Source(dot)                  # the DOT text parses as one graph with the whole name
    assert 'income \\"net\\" \\\\ yr' in dot and src.source.count("digraph") == 1


def test_tree_figures_render_as_svg_and_png_with_any_name():
    from core import dot
    from core.tcrex import TCREx

    if not dot.available():
        pytest.skip("Graphviz's dot is not installed (make test installs it)")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    tc = TCREx(random_state=0).fit(X, (X[:, 0] > 0).astype(int), 1, feature_names=['say "hi"', "b"])
    named = f'digraph g {{ a [label="{dot.label(chr(92) + "say " + chr(34) + "hi" + chr(34))}"]; a -> b }}'
    svg = dot.render(named, "svg")
    assert svg.lstrip().startswith(b"<?xml") and b"say &quot;hi&quot;" in svg
    assert dot.render(tc.to_graphviz(), "png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_metarule_page_offers_figure_exports(page_app):
    app = page_app("metarule_tree.py")
    labels = {b.label for b in app.get("download_button")}
    assert "Figure (DOT source)" in labels
