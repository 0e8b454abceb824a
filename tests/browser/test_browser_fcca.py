"""FCCA in the real app as a new user meets it: a 3-class random forest trained on
scikit-learn's wine data, saved with skops, uploaded with its data as CSV; a run
cancelled while it goes, a run to the end, then two browser sessions running
FCCA at once, one of them cancelling while the other's run goes on.

The page once stopped with "unexpected RuntimeError: The executor underlying
Parallel has been shutdown": every session's run shared joblib's one executor,
so one run's end (a Cancel, a rerun) shut the workers down under the others.
Each run now holds a pool of its own (core/optimal/batch.py), kept per session
(dashboard/memory.py); this test drives that path through Streamlit's reruns.

Each Cancel and each new submit must land while its run goes, on a machine much faster or
slower than this one: the page presses the button itself the moment the run shows its first
progress (browser_util.press_when), and what the run left tells whether the press landed
mid-run: no new result kept. A run that ended first (a fast machine, a browser held up) is no
fault of the app but proves nothing: it must have ended with its real result, and the race is
run again with one row fewer (so that run's result can never pass for the next run's), at most
ATTEMPTS times, until one press has landed mid-run.
"""

from __future__ import annotations

import pytest
from browser_util import FRESH, browser_page, click_until, outcome, press_when, shots_dir, soon, upload

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 120_000                     # ms: a 2-core CI machine running two sessions' workers
COMPUTE = "Compute counterfactuals and thresholds"
CANCELLED = "Cancelled: no new result was kept"
ATTEMPTS = 3                       # runs tried for each race, each with one row fewer (see the module docstring)
NO_RESULT = "^Press the button to compute"            # the page's text while it holds no result
RESULT = r"^Counterfactuals\s+([\d,]+)$"               # the result's metric: how many counterfactuals


@pytest.fixture(scope="module")
def wine_files(tmp_path_factory):
    """What a data scientist would hand over: the wine table as CSV and a forest saved with skops."""
    import skops.io as sio
    from sklearn.datasets import load_wine
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    wine = load_wine(as_frame=True)
    X, y = wine.data, wine.target
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    model = RandomForestClassifier(n_estimators=30, max_depth=3, random_state=0).fit(X_train, y_train)
    assert list(model.classes_) == [0, 1, 2] and model.score(X_test, y_test) > 0.85
    out = tmp_path_factory.mktemp("wine")
    data, forest = out / "wine.csv", out / "wine_forest.skops"
    wine.frame.to_csv(data, index=False)              # the 13 features and "target", last
    sio.dump(model, forest)
    return data, forest


def _alerts(page) -> str:
    return "\n".join(page.locator('[data-testid="stAlert"], [data-testid="stException"]').all_inner_texts())


def _no_error(page) -> None:
    text = page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0, _alerts(page)
    for bad in ("unexpected", "could not be run", "shutdown", "Traceback"):
        assert bad not in text, f"{bad!r} on the page:\n{_alerts(page)}"


def _open_with_upload(page, url: str, data, forest) -> None:
    """Upload the two files on Data & model, load them, and go to the FCCA page by its link."""
    from playwright.sync_api import expect

    page.goto(url)
    page.get_by_role("heading", name="Data & model").wait_for(timeout=LONG)
    click_until(page, page.get_by_text("Upload your own"),
                page.locator('[data-testid="stFileUploader"]').filter(has_text="Data (CSV or Parquet)"))
    upload(page, "Data (CSV or Parquet)", str(data), timeout=LONG)
    page.get_by_text("wine.csv: 178 rows × 14 columns").wait_for(timeout=LONG)
    page.get_by_text("Target column").wait_for(timeout=LONG)
    upload(page, "Model file", str(forest), timeout=LONG)
    load = page.get_by_role("button", name="Load data and model")
    expect(load).to_be_enabled(timeout=LONG)
    click_until(page, load, page.get_by_text(f"Loaded wine.csv and {forest.name}", exact=False))
    _no_error(page)
    link = page.get_by_role("link", name="FCCA thresholds")
    click_until(page, link, page.get_by_role("heading", name="FCCA thresholds"))
    expect(page.get_by_role("button", name=COMPUTE)).to_be_visible(timeout=LONG)


def _rows_box(page, rows: int) -> None:
    """Ask for ``rows`` rows: the form sends it with the next press of its button."""
    box = page.get_by_role("spinbutton", name="At most this many rows")
    box.fill(str(rows))
    box.press("Tab")


def _submit(page, rows: int) -> None:
    """Ask for ``rows`` rows on 2 processes and press the form's button; the run is on once its
    Cancel button shows."""
    _rows_box(page, rows)
    click_until(page, page.get_by_role("button", name=COMPUTE), "^Cancel$")


def _progress(rows: int) -> str:
    """The progress text of a run of ``rows`` rows once a chunk of rows is done: its workers are up and solving."""
    return rf"^\d+ of {rows} counterfactuals$"


def _running(page) -> bool:
    return page.get_by_role("button", name="Cancel").count() > 0


def _cancel_now(page, rows: int) -> bool:
    """Press Cancel the moment the running ``rows``-row run shows progress; True when it stopped
    the run: the page then holds no result, or the one it held before, never one of ``rows`` rows."""
    press_when(page, _progress(rows), "Cancel")
    return outcome(page, NO_RESULT, RESULT) != f"{rows:,}"


def _after_cancel(page, rows: int, stopped: bool) -> None:
    """What the user sees after ``_cancel_now``: the cancel said, no Cancel button left, no error;
    or, the run having ended before, its real result."""
    from playwright.sync_api import expect

    if not stopped:
        _finished(page, rows)
        expect(page.get_by_text(CANCELLED, exact=False)).to_have_count(0)     # never above the new result
        return
    expect(page.locator(FRESH).get_by_text(CANCELLED, exact=False)).to_be_visible(timeout=LONG)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0, timeout=LONG)
    _no_error(page)


def _cancel_mid_run(page, rows: int) -> bool:
    """A run of ``rows`` rows cancelled while its workers solve; False when it ended first."""
    _submit(page, rows)
    stopped = _cancel_now(page, rows)
    _after_cancel(page, rows, stopped)
    return stopped


#: at a run's first progress, the counterfactual counts of the results on the page (the previous
#: run's too, stale: they stay until the run draws its own)
_RESULTS_AT_PROGRESS = """([fresh, progress, result]) => {
    if (![...document.querySelectorAll(fresh)].some(e => new RegExp(progress).test(e.innerText.trim()))) return null;
    return [...document.querySelectorAll('[data-testid="stElementContainer"]')].map(
        e => e.innerText.trim().match(new RegExp(result))).filter(Boolean).map(m => m[1]);
}"""


def _rerun_mid_run(page, rows: int, then: int) -> bool:
    """A run of ``rows`` rows and, the moment it shows progress, a submit of ``then`` rows (a
    Streamlit rerun mid-run). True when the submit stopped the first run: no result of ``rows``
    rows on the page when the new run shows progress (a finished run's would be there, stale);
    False when the first run had ended before (the new run then runs to its real result)."""
    _submit(page, rows)
    _rows_box(page, then)
    if not press_when(page, _progress(rows), COMPUTE):          # it ended first: submit after it
        click_until(page, page.get_by_role("button", name=COMPUTE), _progress(then), wait=60_000)
    shown = page.wait_for_function(_RESULTS_AT_PROGRESS, arg=[FRESH, _progress(then), RESULT], polling=25,
                                   timeout=LONG).json_value()
    if f"{rows:,}" in shown:
        _finished(page, then)
        return False
    return True


def _b_cancels_while_a_runs(a, b, rows: int) -> bool:
    """B runs ``rows`` rows, then A 120; B cancels the moment A's workers solve, and runs again
    beside A. True when A's run went on all along (still going once B's new run is on); False when
    a run ended too soon to prove it, each run that ended then with its real result."""
    _submit(b, rows)
    _submit(a, 120)
    soon(a, _progress(120), LONG)
    stopped = _cancel_now(b, rows)
    _after_cancel(b, rows, stopped)
    if stopped and _running(a):
        _submit(b, 30)
        if _running(a):                                  # both sessions run at once
            return True
        _finished(b, 30)
    _finished(a, 120)
    return False


def _attempts(race, what: str) -> None:
    """``race(rows)`` with every row (178), then one row fewer each time, until its press has landed
    mid-run (it returns True), at most ATTEMPTS times."""
    for rows in range(178, 178 - ATTEMPTS, -1):
        if race(rows):
            return
    raise AssertionError(f"{what}: in each of {ATTEMPTS} tries, a run ended before the press it raced had landed")


def _metric(page, label: str):
    """The value of the metric labelled exactly ``label``."""
    metric = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').get_by_text(label, exact=True))
    return metric.locator('[data-testid="stMetricValue"]')


def _finished(page, rows: int) -> None:
    """The run has ended with a real result of ``rows`` counterfactuals: metrics,
    heatmap, curves, tree and table, none of them left over from an earlier run."""
    from playwright.sync_api import expect

    expect(page.get_by_role("button", name="Cancel")).to_have_count(0, timeout=LONG)
    expect(_metric(page, "Counterfactuals")).to_have_text(f"{rows:,}", timeout=LONG)
    fresh = page.locator('[data-testid="stElementContainer"]:not([data-stale="true"])')
    expect(fresh.locator('[data-testid="stMetricLabel"]').get_by_text("Thresholds kept", exact=True)
           ).to_be_visible(timeout=LONG)
    expect(fresh.locator(".js-plotly-plot")).to_have_count(2, timeout=LONG)         # heatmap and curves
    expect(fresh.locator('[data-testid="stGraphVizChart"]')).to_have_count(1, timeout=LONG)
    expect(fresh.locator('[data-testid="stDataFrame"]')).to_have_count(1, timeout=LONG)
    expect(page.locator('[data-stale="true"]')).to_have_count(0, timeout=LONG)    # the script run is over
    assert "not run" not in page.inner_text("body")              # every selected row was solved
    assert int(_metric(page, "Thresholds").inner_text()) > 0
    _no_error(page)


def test_fcca_on_an_uploaded_wine_forest_cancels_reruns_and_runs_in_two_sessions(app_url, wine_files, tmp_path):
    from playwright.sync_api import expect

    data, forest = wine_files
    shots = shots_dir(tmp_path)
    with browser_page(height=2400) as a, browser_page(height=2400, own_context=True) as b:   # b: another user
        _open_with_upload(a, app_url, data, forest)

        # 1. one session: a run of every row cancelled while its workers solve
        _attempts(lambda rows: _cancel_mid_run(a, rows), "a run cancelled mid-run")
        # a run interrupted by a new submit (a Streamlit rerun mid-run), then that run to the end
        _attempts(lambda rows: _rerun_mid_run(a, rows, 30), "a run interrupted by a new submit")
        _finished(a, 30)
        a.screenshot(path=str(shots / "fcca_wine_result.png"), full_page=True)

        # 2. a second session (its own browser context) beside the first: B starts, A starts,
        # B cancels while A's workers solve; A's run goes on, B reruns, both finish
        _open_with_upload(b, app_url, data, forest)
        _attempts(lambda rows: _b_cancels_while_a_runs(a, b, rows), "B's cancel while A runs")
        _finished(b, 30)
        _finished(a, 120)
        expect(a.get_by_text(CANCELLED, exact=False)).to_have_count(0)
        a.screenshot(path=str(shots / "fcca_wine_two_sessions_a.png"), full_page=True)
        b.screenshot(path=str(shots / "fcca_wine_two_sessions_b.png"), full_page=True)
