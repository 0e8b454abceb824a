"""The view in the URL: a link reproduces the data, row and target it was made
with, the row is one choice for every page, and the target defaults to an
outcome the row does not have."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest


def _app(params=None, page="optimal_cf.py"):
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    for k, v in (params or {}).items():
        app.query_params[k] = v
    app.run()
    app.switch_page(f"../pages/{page}").run()
    assert not app.exception, app.exception
    return app


def test_row_is_shared_by_pages_and_written_to_the_url():
    app = _app()
    app.number_input(key="ocf_row").set_value(7).run()
    assert app.query_params["row"] == "7"                  # one value: a str, as st.query_params holds it
    app.switch_page("../pages/counterfactual_rules.py").run()
    assert app.number_input(key="cr_row").value == 7
    app.switch_page("../pages/decision_regions.py").run()
    assert app.number_input(key="dr_row").value == 7


def test_target_defaults_to_an_outcome_the_row_lacks_and_says_when_it_has_it():
    app = _app()
    ws = app.session_state["workspace"]
    pred = ws.predictions
    for row in (int((pred == 0).argmax()), int((pred == 1).argmax())):
        app.number_input(key="ocf_row").set_value(row).run()
        assert app.selectbox(key="ocf_target").value != pred[row]
    row = int((pred == 1).argmax())
    app.selectbox(key="ocf_target").set_value(1).run()              # an explicit choice sticks
    assert app.selectbox(key="ocf_target").value == 1
    assert any("already predicted approved (1)" in c.value for c in app.caption)


def test_a_link_reopens_demo_row_and_target():
    app = _app({"demo": "credit-lightgbm", "row": "12", "target": "0"})
    assert app.session_state["demo_key"] == "credit-lightgbm"
    assert app.number_input(key="ocf_row").value == 12
    assert app.selectbox(key="ocf_target").value == 0


def test_shared_uploaded_workspace_opens_from_its_link(fresh_history):
    app = _app(page="data_model.py")
    ws = app.session_state["workspace"]
    app.session_state["demo_key"] = None                            # as after an upload
    app.run()
    app.button(key="share_view").click().run()
    assert not app.exception, app.exception
    token = app.session_state["share_token"][1]
    again = _app({"ws": token, "row": "3"})
    ws2 = again.session_state["workspace"]
    assert ws2.fingerprint == ws.fingerprint and (ws2.predictions == ws.predictions).all()
    assert again.number_input(key="ocf_row").value == 3
    bad = _app({"ws": "nope"})
    assert not bad.exception


def test_a_broken_link_says_so_on_the_page_it_opens(fresh_history):
    """A link whose data, demo, row or class this server does not have says so on the page it
    opens (it used to open the demo without a word) and the notice can be dismissed."""
    for params, said in (({"ws": "nope"}, "is not one this server makes"),
                         ({"demo": "no-such-demo"}, "names a demo 'no-such-demo'"),
                         ({"demo": "credit-lightgbm", "row": "999999"}, "row 999999 is not in this data"),
                         ({"demo": "credit-lightgbm", "target": "maybe"}, "target 'maybe' is not a class")):
        app = _app(params)
        shown = " ".join(e.value for e in app.error)
        assert "This link could not be followed as sent" in shown and said in shown, (params, shown)
        assert app.number_input(key="ocf_row").value < len(app.session_state["workspace"].X)
        app.button(key="link_error_dismiss").click().run()
        assert not any("could not be followed" in e.value for e in app.error)
    good = _app({"demo": "credit-lightgbm", "row": "12", "target": "0"})
    assert not any("could not be followed" in e.value for e in good.error)


def test_settings_naming_columns_are_as_left_when_the_analyst_comes_back():
    """Streamlit forgets a widget once a run does not draw it: the columns, features and classes an
    analyst picked went back to their presets on leaving the page. They are kept for the data and
    feature settings they were picked on (for each of the last few), and preset afresh from new
    feature settings."""
    app = _app()
    assert app.multiselect(key="ocf_fixed").value == ["sex"]                  # the feature settings' preset
    app.multiselect(key="ocf_fixed").set_value(["age", "employment"])         # a one-hot group is one option
    app.multiselect(key="ocf_inc").set_value(["income"])
    app.button[[b.label for b in app.button].index("Find the optimal counterfactual")].click().run()  # the form
    app.switch_page("../pages/decision_regions.py").run()
    assert app.selectbox(key="dr_fa").value == "income"
    app.selectbox(key="dr_fa").set_value("age").run()
    app.switch_page("../pages/fairness_audit.py").run()
    assert app.multiselect(key="fa_protected").value == ["sex"]
    app.multiselect(key="fa_protected").set_value(["sex", "age"]).run()
    app.switch_page("../pages/optimal_cf.py").run()
    assert app.multiselect(key="ocf_fixed").value == ["age", "employment"]
    assert app.multiselect(key="ocf_inc").value == ["income"]
    app.switch_page("../pages/decision_regions.py").run()
    assert app.selectbox(key="dr_fa").value == "age"
    app.switch_page("../pages/fairness_audit.py").run()
    assert app.multiselect(key="fa_protected").value == ["sex", "age"]
    assert not app.exception, app.exception
    app.switch_page("../pages/optimal_cf.py").run()
    assert [app.selectbox(key=k).index for k in ("ocb_from", "ocb_to")] == [0, 1]   # the many rows' classes
    app.selectbox(key="ocb_from").select_index(1)
    app.selectbox(key="ocb_to").select_index(0).run()
    app.switch_page("../pages/fairness_audit.py").run()
    app.switch_page("../pages/optimal_cf.py").run()
    assert [app.selectbox(key=k).index for k in ("ocb_from", "ocb_to")] == [1, 0]
    ws = app.session_state["workspace"]
    app.switch_page("../pages/data_model.py").run()             # where the feature settings change
    app.session_state["workspace"] = ws.with_protected(["sex", "owns_home"])
    app.switch_page("../pages/optimal_cf.py").run()
    assert app.multiselect(key="ocf_fixed").value == ["owns_home", "sex"]
    assert app.multiselect(key="ocf_inc").value == []
    app.switch_page("../pages/data_model.py").run()
    app.session_state["workspace"] = ws                          # back to the first settings: as left there
    app.switch_page("../pages/optimal_cf.py").run()
    assert app.multiselect(key="ocf_fixed").value == ["age", "employment"]
    assert [app.selectbox(key=k).index for k in ("ocb_from", "ocb_to")] == [1, 0]
    assert not app.exception, app.exception


def test_a_link_carries_the_settings_of_the_view():
    """Cost, fixed columns, time limit, plausibility and the audit's settings travel with the link;
    a setting this data cannot take is named, not applied (#29)."""
    import json

    app = _app()
    app.session_state["workspace"] = app.session_state["workspace"].with_class_names({0: "refused", 1: "approved"})
    app.run()
    app.selectbox(key="ocf_norm").set_value("l0")
    app.number_input(key="ocf_limit").set_value(12.0)
    app.checkbox(key="ocf_plaus").check()
    app.multiselect(key="ocf_fixed").set_value(["age"])
    app.button[[b.label for b in app.button].index("Find the optimal counterfactual")].click().run()  # the form
    app.switch_page("../pages/fairness_audit.py").run()
    app.number_input(key="fa_rows").set_value(40).run()
    sent = json.loads(app.query_params["s"][0] if isinstance(app.query_params["s"], list) else app.query_params["s"])
    assert sent["ocf_norm"] == "l0" and sent["ocf_limit"] == 12.0 and sent["ocf_plaus"] is True
    assert sent["ocf_fixed"] == ["age"] and sent["fa_rows"] == 40
    params = {k: (v[0] if isinstance(v, list) else v) for k, v in app.query_params.items()}
    again = _app(params)
    assert again.selectbox(key="ocf_norm").value == "l0"
    assert again.number_input(key="ocf_limit").value == 12.0
    assert again.checkbox(key="ocf_plaus").value is True
    assert again.multiselect(key="ocf_fixed").value == ["age"]
    assert not any("could not be followed" in e.value for e in again.error)
    assert again.session_state["workspace"].class_names == {"0": "refused", "1": "approved"}
    again.switch_page("../pages/fairness_audit.py").run()
    assert again.number_input(key="fa_rows").value == 40
    bad = _app({"demo": "credit-lightgbm", "s": json.dumps({"ocf_limit": 1e9, "ocf_fixed": ["nope"],
                                                           "ocf_norm": "l1", "server_address": "x"})})
    shown = " ".join(e.value for e in bad.error)
    assert "ocf_limit" in shown and "ocf_fixed" in shown and "server_address" in shown
    assert bad.number_input(key="ocf_limit").value == 30.0      # the default: nothing out of range applied
    broken = _app({"demo": "credit-lightgbm", "s": "{not json"})
    assert "settings are damaged" in " ".join(e.value for e in broken.error)


MALFORMED = [
    ({"row": "²"}, "row '²' is not a row number"),                    # passes str.isdigit(), int() refuses it
    ({"row": "١٢"}, "row '١٢' is not a row number"),                  # Arabic-Indic digits
    ({"row": "１２"}, "row '１２' is not a row number"),               # fullwidth digits
    ({"row": "-3"}, "row '-3' is negative"),
    ({"row": "3.0"}, "row '3.0' is not a whole number"),
    ({"row": "9999999999"}, "row '9999999999' is too large"),
    ({"row": "9" * 400}, "row is 400 characters long"),
    ({"row": "NaN"}, "row 'NaN' is not a row number"),
    ({"row": ["3", "4"]}, "gives its row (row=) 2 times"),
    ({"target": "nan,1"}, "target 'nan,1' is not an interval"),
    ({"target": "1e999,2"}, "target '1e999,2' is not an interval"),
    ({"target": "inf,inf"}, "target 'inf,inf' is not an interval"),
    ({"target": "2,1"}, "target '2,1' is not an interval"),
    ({"target": "x" * 400}, "target is 400 characters long"),
    ({"target": ["0", "1"]}, "gives its target (target=) 2 times"),
    ({"demo": "credit-lightgbm", "target": "0.5,1.5"}, "target '0.5,1.5' is not a class"),
    ({"demo": ["credit-lightgbm", "cancer-rf"]}, "gives its demo (demo=) 2 times"),
    ({"demo": "x" * 100}, "demo is 100 characters long"),
    ({"ws": "../../etc/passwd"}, "data token '../../etc/passwd' is not one this server makes"),
    ({"ws": "ab%00cd"}, "is not one this server makes"),
    ({"ws": "A" * 32}, "are not on this server"),                      # the form of a token, but no such data
    ({"s": "[" * 3000 + "]" * 3000}, "settings are damaged"),         # nested too deep for the JSON reader
    ({"s": "NaN"}, "settings are damaged"),
    ({"s": "[1, 2]"}, "settings are damaged"),
    ({"s": "{" * 9000}, "settings is 9,000 characters long"),
    ({"s": json.dumps({"ocf_limit": float("nan"), "ocf_k": 2.5, "ocf_norm": "l9", "ocf_plaus": "yes"})},
     "ocf_limit = NaN (is not a number); ocf_k = 2.5 (is not a whole number); ocf_norm = \"l9\" (is not one of "
     "the choices); ocf_plaus = \"yes\" (is not true or false)"),
    ({"s": json.dumps({"class_names": {"0": ["a"]}})}, "class_names (they are not a list of class names)"),
]


@pytest.mark.parametrize("params, said", MALFORMED, ids=[f"{k}-{i}" for i, (p, _) in enumerate(MALFORMED)
                                                          for k in [next(iter(p))]])
def test_a_malformed_link_gets_the_broken_link_message_never_a_traceback(params, said, fresh_history):
    """Every URL parameter goes through one checked parser (#37): non-ASCII digits, negative,
    huge or fractional rows, non-finite or reversed intervals, repeated or over-long
    parameters, unknown demos, bad tokens and damaged settings each get the message of a
    broken link, on the page it opens, and the app goes on with its defaults."""
    app = _app(params)
    shown = " ".join(e.value for e in app.error)
    assert "This link could not be followed as sent" in shown and said in shown, (params, shown)
    assert 0 <= app.number_input(key="ocf_row").value < len(app.session_state["workspace"].X)
    assert app.selectbox(key="ocf_target").value in app.session_state["workspace"].ensemble.classes


def test_a_good_link_is_read_as_before():
    app = _app({"demo": "credit-lightgbm", "row": "12", "target": "1", "embed": "true"})
    assert not any("could not be followed" in e.value for e in app.error)
    assert app.number_input(key="ocf_row").value == 12 and app.selectbox(key="ocf_target").value == 1


def test_a_regressor_link_reads_its_interval(fresh_history):
    """A regressor's target is an interval: read from the link as written, and a class-like
    text is named instead of silently dropped."""
    import lightgbm as lgb
    import numpy as np
    import pandas as pd

    from core.intake.workspace import build_workspace
    from dashboard.history import store

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    df["y"] = 2 * df["a"] - df["b"]
    model = lgb.LGBMRegressor(n_estimators=10, num_leaves=4, verbose=-1).fit(df[["a", "b"]], df["y"])
    token = store().save_workspace(build_workspace(df, "y", model, name="regression"))
    app = _app({"ws": token, "target": "0.5,1.5"})
    assert not any("could not be followed" in e.value for e in app.error), [e.value for e in app.error]
    assert (app.number_input(key="ocf_lo").value, app.number_input(key="ocf_hi").value) == (0.5, 1.5)
    app = _app({"ws": token, "target": "yes"})
    assert "target 'yes' is not an interval of predictions" in " ".join(e.value for e in app.error)
    # the metarule tree's side of the median, as the link writes it (it was refused: "not one of
    # the choices", which named it in words while the widget holds true/false)
    app = _app({"ws": token, "s": json.dumps({"mt_side": False})}, page="metarule_tree.py")
    assert not any("could not be followed" in e.value for e in app.error), [e.value for e in app.error]
    assert app.selectbox(key="mt_side").value is False
