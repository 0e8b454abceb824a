"""No number reads as code prints it (#29): every text element of every page,
after its main button, on a classifier, a regressor and a 3-class model, is
free of 17-digit floats, numpy reprs, tuples of raw floats, scientific
notation for ordinary numbers and whole numbers written "32.0"."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from test_pages_other_tasks import _load

BAD = [(re.compile(r"np\.(int|float|str|bool)\w*\("), "a numpy repr"),
       (re.compile(r"(?<![\w.])\d\.\d+e[+-]\d\d(?!\w)"), "scientific notation"),
       (re.compile(r"(?<![\w.\d])\d+\.0(?![\d\w%])(?!\s*(s|ms)\b)"), "a whole number written with .0")]

BUTTONS = {"optimal_cf.py": "Find the optimal counterfactual", "counterfactual_rules.py": "Find the counterfactual rule",
           "case_story.py": "Tell the story"}
PAGES = ["data_model.py", "optimal_cf.py", "metarule_tree.py", "decision_regions.py", "counterfactual_rules.py",
         "case_story.py"]


def _texts(at) -> list[str]:
    out = []
    for kind in ("markdown", "caption", "info", "success", "warning", "error", "title", "subheader", "header"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [f"{m.label}: {m.value}" for m in at.metric]
    return out


NUMBER = re.compile(r"\d[\d,]*\.\d+")


def _check(at, where: str) -> None:
    assert not at.exception, (where, at.exception)
    for text in _texts(at):
        for m in NUMBER.finditer(text):      # 17 digits: a float as code prints it (a recourse needs at most ~10)
            digits = m.group().replace(",", "").replace(".", "").lstrip("0")
            assert len(digits) <= 10, f"{where}: a float with all its digits {m.group()!r} in {text[:200]!r}"
        for rx, what in BAD:
            m = rx.search(text)
            assert m is None, f"{where}: {what} {m.group()!r} in {text[:200]!r}"


def _sweep(at, label: str) -> None:
    for page in PAGES:
        at.switch_page(f"../pages/{page}").run()
        _check(at, f"{label}/{page}")
        if page in BUTTONS:
            at.button[[b.label for b in at.button].index(BUTTONS[page])].click().run()
            _check(at, f"{label}/{page} after '{BUTTONS[page]}'")


def test_demo_pages_read_as_written():
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=240)
    at.run()
    _sweep(at, "demo")
    at.switch_page("../pages/fairness_audit.py").run()
    at.number_input(key="fa_rows").set_value(30)
    at.number_input(key="fa_perm").set_value(200)
    at.number_input(key="fa_boot").set_value(100)
    at.number_input(key="fa_jobs").set_value(1).run()
    at.button(key="fa_go").click().run()
    assert at.session_state["fa_result"] is not None
    _check(at, "demo/fairness_audit.py after the audit")


@pytest.mark.parametrize("which", ["regression", "multiclass"])
def test_other_models_read_as_written(which):
    from sklearn.datasets import load_diabetes, load_wine

    frame = (load_diabetes if which == "regression" else load_wine)(as_frame=True).frame
    at = _load(frame.to_csv(index=False).encode(), "target", "random_forest")
    _sweep(at, which)
