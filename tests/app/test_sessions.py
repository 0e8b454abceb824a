"""Many users on one server: four sessions at once, each sees only its own results.

The sessions share the process (and so every st.cache_* store) as they do on a
server; AppTest sessions advance one step at a time (AppTest itself is not
thread-safe), all four alive together. Two of them train different models on the same uploaded file: the
cache key used to be (name, empty model hash, data hash), so the second was
served the first one's rules.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from core.intake.demo import synthetic_credit

APP = str(ROOT / "dashboard" / "app.py")


def _session():
    app = AppTest.from_file(APP, default_timeout=240)
    app.run()
    assert not app.exception, app.exception
    return app


def _train(app, csv: bytes, family: str, trees: int, depth: int):
    app.radio(key="dm_source").set_value("Upload your own").run()
    app.file_uploader(key="dm_data_file").upload("credit.csv", csv, "text/csv")
    app.run()
    app.selectbox(key="dm_target").set_value("approved").run()
    app.radio(key="dm_how").set_value("Train a model here").run()
    app.selectbox(key="dm_family").set_value(family)
    app.number_input(key="dm_trees").set_value(trees)
    app.number_input(key="dm_depth").set_value(depth)
    app.button(key="dm_train_go").click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]


def _demo(app, key: str):
    if key != app.session_state["demo_key"]:
        app.selectbox(key="dm_demo").set_value(key).run()
        app.button(key="dm_load_demo").click().run()
    assert not app.exception


def _pages(app):
    for page in ("metarule_tree.py", "counterfactual_rules.py"):
        app.switch_page(f"../pages/{page}").run()
        assert not app.exception, (page, app.exception)
        assert not app.error, (page, [e.value for e in app.error])
    return app


@pytest.mark.slow
def test_four_sessions_at_once_see_only_their_own_results():
    df, _ = synthetic_credit(1500, seed=3)
    csv = df.to_csv(index=False).encode()
    apps = [_session() for _ in range(4)]
    _train(apps[0], csv, "random_forest", 30, 3)
    _train(apps[1], csv, "random_forest", 60, 6)       # same file, same name, another model
    _demo(apps[2], "cancer-rf")
    _demo(apps[3], "credit-lightgbm")
    for app in apps:                                   # the heavy pages, all four sessions alive
        _pages(app)

    spaces = [a.session_state["workspace"] for a in apps]
    assert spaces[0].name == spaces[1].name and spaces[0].data_sha256 == spaces[1].data_sha256
    assert spaces[0].ensemble.n_trees == 30 and spaces[1].ensemble.n_trees == 60
    assert len({w.key for w in spaces}) == 4
    assert not np.array_equal(spaces[0].predictions, spaces[1].predictions)
    for app, ws in zip(apps, spaces):
        for store in ("_cache_tcrex", "_cache_cr_surrogate"):
            held = app.session_state[store]
            assert held and all(k[0] == ws.key for k in held), store      # only this session's workspace
        tc = next(iter(app.session_state["_cache_tcrex"].values()))
        # the rules were learned from this session's model: their accuracy recomputed on its outputs agrees
        from core.counterfactual import output_mask

        mask = output_mask(ws.predictions, tc.target_)
        X = ws.X.to_numpy(dtype=float)
        for r in tc.rules_[:5]:
            inside = r.contains(X)
            assert abs(mask[inside].mean() - r.accuracy) < 1e-12
