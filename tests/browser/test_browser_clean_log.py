"""A normal walk of every page leaves the server log free of tracebacks (#38 item 6).

The walk uploads a table with missing values and its model (the analyst's view
of such a row mixes numbers with "missing": Arrow cannot type that column, and
Streamlit used to log a traceback for every such table before showing it as
text), then opens every page of the sidebar and runs the analysis it offers on
a row with a missing value. The server's log must hold no "Traceback" and no
Arrow fallback, and the pages must show no exception.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_util import browser_page, running_app, shots_dir, upload, wait_idle

from dashboard.pages_registry import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 180_000
N = 400


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import skops.io as sio
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"age": rng.integers(18, 80, N).astype(float), "income": rng.lognormal(10, 0.5, N).round(0),
                       "hours": rng.integers(10, 60, N).astype(float),
                       "workclass": rng.choice(["private", "public", "self-employed"], N),
                       "sex": rng.choice(["female", "male"], N)})
    y = ((0.03 * (df.age - 40) + 2 * (np.log(df.income) - 10) + 0.05 * (df.hours - 40)
          + rng.normal(0, 0.5, N)) > 0).astype(int)
    df.loc[rng.random(N) < 0.15, "income"] = np.nan
    df.loc[rng.random(N) < 0.04, "workclass"] = np.nan
    df.loc[1, ["income", "workclass"]] = np.nan                     # the row the pages ask about
    model = HistGradientBoostingClassifier(categorical_features="from_dtype", max_iter=20, max_depth=4,
                                           random_state=0).fit(df.astype({"workclass": "category",
                                                                          "sex": "category"}), y)
    out = tmp_path_factory.mktemp("walk")
    data, first = out / "people.csv", out / "people_hgb.skops"
    df.assign(high_income=y).to_csv(data, index=False)
    sio.dump(model, first)
    return data, first


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The app on a port of its own, and the file its log goes to."""
    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    with running_app(env={"ATLAS_HISTORY_URL": f"sqlite:///{db}"}) as url:
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"atlas-app-{url.rsplit(':', 1)[1]}.log"
        assert log.exists()
        yield url, log


def _settle(page) -> None:
    """The page's script run is over (no stale element, no running icon, for a moment)."""
    wait_idle(page, timeout=LONG)


def _press(page, name: str, done) -> None:
    """Click ``name`` until ``done`` shows (a click landing during a rerun can be swallowed)."""
    deadline = time.monotonic() + LONG / 1000
    while not done.first.is_visible():
        button = page.get_by_role("button", name=name, exact=True)
        if button.count() and button.first.is_enabled():
            try:
                button.first.click(timeout=5_000)
            except Exception:  # noqa: BLE001 - redrawn mid-click: look again
                pass
        try:
            done.first.wait_for(timeout=20_000)
        except Exception:  # noqa: BLE001 - not yet
            assert time.monotonic() < deadline, f"{name!r} did not lead to its result"


ACTIONS = {   # page title -> (button to press, text that shows when its run is over)
    "Optimal counterfactual": ("Find the optimal counterfactual", "Optimal counterfactual: cost"),
    "Counterfactual rules": ("Find the counterfactual rule", "Counterfactual samples"),
    "Case story": ("Tell the story", "The case and its counterfactual"),
}


def test_a_walk_of_every_page_leaves_no_traceback_in_the_log(served, files, tmp_path):
    url, log = served
    data, model = files
    shots = shots_dir(tmp_path)
    titles = [t for items in PAGES.values() for _, t, _ in items]
    with browser_page(height=2000) as page:
        page.goto(url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=LONG)
        page.get_by_text("Upload your own").click()
        upload(page, "Data (CSV or Parquet)", str(data), timeout=LONG)
        page.get_by_text("Target column").wait_for(timeout=LONG)
        upload(page, "Model file", str(model), timeout=LONG)
        _press(page, "Load data and model", page.get_by_text("Loaded people.csv and people_hgb.skops", exact=False))
        _settle(page)
        for title in titles:
            link = page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True)
            link.click()
            page.get_by_role("heading", name=title, exact=True).wait_for(timeout=LONG)
            _settle(page)
            if title in ("Optimal counterfactual", "Counterfactual rules", "Case story"):
                box = page.get_by_role("spinbutton", name="Row", exact=True)
                box.fill("1")
                box.press("Enter")
                _settle(page)
            if title in ACTIONS:
                button, done = ACTIONS[title]
                _press(page, button, page.get_by_text(done, exact=False))
                _settle(page)
            page.screenshot(path=str(shots / f"walk_{title.replace(' ', '_').replace('&', 'and')}.png"),
                            full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0, title
    text = log.read_text()
    assert "Traceback" not in text and "Serialization of dataframe" not in text, text[-4000:]
