"""Pages hold widgets and layout only (#40 item 1): the favourable outcome, the rows at
a target and every default of the domain come from core, one definition each
(:func:`core.counterfactual.favourable_default`, :func:`~core.counterfactual.default_target`,
:func:`~core.counterfactual.at_target`). Before, a regressor's favourable outcome was the
median on two pages and the mean on a third, the favourable class the last one, the
second one or the first by page, and ``pred != target`` stood in for ``at_target``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from conftest import demo_credit

from core.counterfactual import at_target, default_target, favourable_default
from core.intake.workspace import build_workspace

PAGES = Path(__file__).resolve().parents[2] / "pages"

# what a page must not compute itself: a target or threshold from the predictions, a
# mask of rows at (or not at) a target, or a default class picked by position
COMPUTED = {
    "a statistic of the predictions": re.compile(r"np\.(median|mean|quantile|percentile)\(\s*pred\b|\bpred\.mean\("),
    "a mask of rows at a target": re.compile(r"\bpred\s*(!=|==|<=?|>=?)\s*\w"),
    "a default class by position": re.compile(r"index\s*=\s*(len\(|min\(\s*1)|classes\[\s*-?\d\s*\]"),
}


def test_no_page_computes_a_target_a_mask_or_a_default():
    found = []
    for path in sorted(PAGES.glob("*.py")):
        for no, line in enumerate(path.read_text().splitlines(), 1):
            for what, pattern in COMPUTED.items():
                if pattern.search(line):
                    found.append(f"{path.name}:{no}: {what}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_favourable_default_is_one_definition():
    df, target, model, *_ = demo_credit()
    ws = build_workspace(df, target, model, name="credit")
    ens, pred = ws.ensemble, ws.predictions
    fav = favourable_default(ens, pred)
    assert fav == list(ens.classes)[-1]
    assert default_target(ens, pred) == fav                       # many rows at once: the same class
    assert default_target(ens, pred, fav) != fav                  # a row at it: another class
    assert at_target(ens, fav, pred).sum() == int(np.sum(pred == fav))
