"""Every page, report and export true for every kind of model (#59), in the real app.

A data scientist's models, made here as one would: scikit-learn pipelines whose ColumnTransformer
one-hot encodes with OneHotEncoder's defaults (a sparse matrix, which the SVC reads as is), an MLP
saved with skops and exported with skl2onnx, an SVC(probability=True) and a LogisticRegression
saved with skops. Each is uploaded with its table on the Data & model page, in one browser session.

What each model walks, at the least cost (300 rows, the smallest settings each page takes):

* the MLP (.skops) and the LogisticRegression pipeline, one model of each kind the pages tell
  apart (any other model, analysed through its surrogate; a linear model, read exactly), walk
  every page of the sidebar; Compare models runs once for both, the MLP as model A and the
  logistic regression as model B (its recourse valid under both is put to each);
* the MLP exported to ONNX loads and gives its optimal counterfactual (the other pages read it
  as they read the .skops MLP: the same kind, through the same worker);
* the SVC on sparse one-hot input loads and gives its optimal counterfactual and its regions.

Every counterfactual and prescription a page shows is read back from its export (JSON, CSV, the
story's HTML) or its text, and put to the fitted Python object made here, never the app's copy:
the optimal counterfactual and the batch's, the regions page's, the case story's, each audited
row's recourse and each compared row's (under model A, and under both models), FCCA's pairs
(accepted by the model exactly where the export says so), the counterfactual rule's samples (their
"model output") and its edge, and T-CREx's rules at their edges for the rows each is prescribed to
(the share the page states); the data page's predictions (its CSV) and the case story's score are
the fitted model's own. The guarantee each page states is checked against the model's kind:
"proven optimal" and "exact" are said of the linear model only, "valid on the model" of the MLP and
the SVC; no link offers to keep a model that is not a tree ensemble (it would open as its
surrogate), and no audit is titled by a surrogate. A screenshot of every page for every model goes
to ``shots_dir``.
"""

from __future__ import annotations

import html.parser
import io
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_util import browser_page, click_until, shots_dir, upload, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 180_000
N = 300
COLUMNS = ["age", "income", "job", "city", "sex"]
JOBS = ["clerk", "nurse", "pilot", "cook", "baker", "farmer", "teacher", "driver"]
CITIES = ["north", "south", "east", "west", "centre", "port"]
TARGET = 1                          # approved: the outcome every page's default row is moved to
NUDGE = 1e-6                        # an open lower bound is stepped over by this share of the column's span


def _table(seed: int = 5) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, N).astype(float), "income": rng.normal(50, 15, N).round(1),
                       "job": rng.choice(JOBS, N), "city": rng.choice(CITIES, N),
                       "sex": rng.integers(0, 2, N).astype(float)})
    y = ((df.income - 50) / 15 + df.job.isin(["pilot", "teacher"]) - 0.02 * (df.age - 45) - 0.3 * df.sex
         + 0.5 * (df.city == "port") + rng.normal(0, .5, N) > 0).astype(int)
    return df, y.rename("approved")


def _pre():
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    return ColumnTransformer([("num", StandardScaler(), ["age", "income", "sex"]),
                              ("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "city"])])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The table and the three fitted pipelines, their files as a data scientist saves them."""
    import scipy.sparse
    import skops.io as sio
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC

    df, y = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the MLP's convergence, SVC(probability=True)'s deprecation
        mlp = make_pipeline(_pre(), MLPClassifier((16,), max_iter=800, random_state=0)).fit(df, y)
        svc = make_pipeline(_pre(), SVC(probability=True, random_state=0)).fit(df, y)
        lr = make_pipeline(_pre(), LogisticRegression(max_iter=1000)).fit(df, y)
    assert scipy.sparse.issparse(svc[0].transform(df))      # scikit-learn's default: the SVC reads sparse one-hot
    # Row 0, the row every page explains first, is one all three models refuse.
    first = int(np.flatnonzero((mlp.predict(df) == 0) & (svc.predict(df) == 0) & (lr.predict(df) == 0)
                               & (df.income.between(35, 60)).to_numpy())[0])
    order = [first] + [i for i in range(N) if i != first]
    df, y = df.iloc[order].reset_index(drop=True), y.iloc[order].reset_index(drop=True)
    types = [(c, FloatTensorType([None, 1]) if df[c].dtype.kind == "f" else StringTensorType([None, 1]))
             for c in COLUMNS]
    onx = to_onnx(mlp, initial_types=types, target_opset=17, options={id(mlp): {"zipmap": False}})
    out = tmp_path_factory.mktemp("models")
    data = out / "applicants.csv"
    df.assign(approved=y).to_csv(data, index=False)
    files = {"mlp.skops": sio.dumps(mlp), "mlp.onnx": onx.SerializeToString(), "svc.skops": sio.dumps(svc),
             "lr.skops": sio.dumps(lr)}
    for name, blob in files.items():
        (out / name).write_bytes(blob)
    fitted = {"mlp.skops": mlp, "mlp.onnx": mlp, "svc.skops": svc, "lr.skops": lr}
    kinds = {"mlp.skops": "black_box", "mlp.onnx": "black_box", "svc.skops": "black_box", "lr.skops": "linear"}
    return {"df": df, "y": y, "data": data, "dir": out, "fitted": fitted, "kinds": kinds}


# ------------------------------------------------------------------ the original model's answers

def _predict(model, rows: pd.DataFrame | list[dict]) -> np.ndarray:
    """The fitted pipeline's own answer on rows in the table's columns (as read from an export)."""
    frame = pd.DataFrame(rows)[COLUMNS].copy()
    for c in ("age", "income", "sex"):
        frame[c] = frame[c].astype(float)
    for c in ("job", "city"):
        frame[c] = frame[c].astype(str)
    return np.asarray(model.predict(frame))


def _csv(blob: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(blob), keep_default_na=False, na_values=[""])


def _cf_rows(table: pd.DataFrame, prefix: str, where: pd.Series) -> pd.DataFrame:
    """The counterfactuals of an export's rows (``prefix``: its cf columns) where ``where`` holds."""
    picked = table.loc[where.astype(bool), [f"{prefix}{c}" for c in COLUMNS]]
    return picked.rename(columns=lambda c: c[len(prefix):])


# ------------------------------------------------------------------ rules at their edge

def _inside(cond: dict, v) -> bool:
    """Does value ``v`` of a column meet one condition of an exported box (core.intake.columns.box_record)?"""
    if "in" in cond:
        return v in cond["in"]
    v = float(v)
    return (v > cond.get("greater_than", -np.inf) and v >= cond.get("at_least", -np.inf)
            and v <= cond.get("at_most", np.inf))


def _at_edge(row: dict, conditions: list[dict], df: pd.DataFrame) -> dict:
    """The row moved into the box at its nearest edge, as a person would follow the rule: a whole
    number to the first whole number inside, another number to the upper bound or just above the
    open lower one, a category outside to the allowed one most frequent in the data."""
    out = dict(row)
    for cond in conditions:
        c, v = cond["column"], row[cond["column"]]
        if _inside(cond, v):
            continue
        if "in" in cond:
            counts = df[c].value_counts()
            allowed = [k for k in cond["in"] if k is not None]
            out[c] = max(sorted(allowed), key=lambda k: counts.get(k, 0))   # ties: the first in order
        elif "at_least" in cond and float(v) < cond["at_least"]:
            out[c] = float(cond["at_least"])
        elif "greater_than" in cond and not float(v) > cond["greater_than"]:
            lo, span = cond["greater_than"], float(df[c].max() - df[c].min())
            up = lo + NUDGE * span
            out[c] = up if up <= cond.get("at_most", np.inf) else float(np.nextafter(lo, np.inf))
        else:
            out[c] = float(cond["at_most"])
    return out


def _box_holds(row: dict, conditions: list[dict]) -> bool:
    return all(_inside(cond, row[cond["column"]]) for cond in conditions)


# ------------------------------------------------------------------ driving the app

def _settled(page) -> None:
    wait_idle(page, timeout=LONG)


def _main_text(page) -> str:
    return page.inner_text('[data-testid="stMain"]')


def _no_error(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    text = _main_text(page)
    assert "Traceback" not in text and "could not be" not in text, text[:3000]


def _go(page, title: str) -> None:
    if page.get_by_role("heading", name=title, exact=True).count():
        return
    _settled(page)
    link = page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True)
    click_until(page, link, page.get_by_role("heading", name=title, exact=True), LONG)
    _settled(page)


def _press(page, name: str) -> None:
    _settled(page)
    page.get_by_role("button", name=name, exact=True).first.click()


def _fill(page, label: str, value) -> None:
    box = page.get_by_role("spinbutton", name=label, exact=True).first
    box.fill(str(value))
    box.press("Tab")
    _settled(page)


def _download(page, label: str) -> bytes:
    """The file the download button ``label`` delivers (waited for: it comes with the result)."""
    button = page.locator('[data-testid="stDownloadButton"]').get_by_role("button", name=label, exact=True)
    button.first.wait_for(timeout=LONG)
    _settled(page)
    with page.expect_download(timeout=60_000) as info:
        button.first.click()
    path = info.value.path()
    assert path is not None, label
    return Path(path).read_bytes()


def _shot(page, shots: Path, model: str, view: str, end: bool = False) -> None:
    """A screenshot of the page from its top (and, with ``end``, one of its end: a long page)."""
    _settled(page)
    main = page.locator('[data-testid="stMain"]')
    name = f"any_{model.replace('.', '_')}_{view}"
    main.evaluate("e => e.scrollTo(0, 0)")
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    if end:
        main.evaluate("e => e.scrollTo(0, e.scrollHeight)")
        page.screenshot(path=str(shots / f"{name}_end.png"), full_page=True)


# ------------------------------------------------------------------ what a page claims

def _claims(page) -> list[str]:
    """Each "What … guarantees: …" line the page shows."""
    return [line.strip() for line in _main_text(page).splitlines() if " guarantees: " in line]


def _said(line: str) -> str:
    return line.split(" guarantees: ", 1)[1]


def _claims_fit(kind: str, claims: list[str], where: str) -> None:
    """A model that is not read exactly is never said proven or exact; every line says something."""
    assert claims, f"{where}: no guarantee is stated"
    for line in claims:
        said = _said(line)
        if kind == "black_box":
            assert "Proven optimal" not in said and "exact for a linear model" not in said, (where, line)
            assert "Exact on the uploaded model" not in said, (where, line)
            assert "Exact on its surrogate" in said or not said.startswith("Exact"), (where, line)
        else:
            assert "the uploaded model" not in said, (where, line)


def _claim_of(claims: list[str], what: str) -> str:
    found = [_said(line) for line in claims if line.startswith(f"What {what} guarantees: ")]
    assert found, (what, claims)
    return found[0]


def _answer_words(kind: str) -> str:
    """How an answer solved on the model itself is stated: exactly for a linear model, checked otherwise."""
    return "Proven optimal (exact for a linear model)" if kind == "linear" else \
        "Valid on the uploaded model (checked on it)"


# ------------------------------------------------------------------ the pages

def _load(page, shots, made, name: str) -> None:
    """Upload the table and the model file on the Data & model page and load them."""
    from playwright.sync_api import expect

    _go(page, "Data & model")
    click_until(page, page.get_by_text("Upload your own"),
                page.locator('[data-testid="stFileUploader"]').filter(has_text="Data (CSV or Parquet)"), LONG)
    upload(page, "Data (CSV or Parquet)", str(made["data"]), timeout=LONG)
    page.get_by_text("Target column").wait_for(timeout=LONG)
    upload(page, "Model file", str(made["dir"] / name), timeout=LONG)
    page.get_by_text(f"{name}: ", exact=False).first.wait_for(timeout=LONG)      # the server holds the file
    load = page.get_by_role("button", name="Load data and model")
    expect(load).to_be_enabled(timeout=LONG)
    _settled(page)
    load.click()              # once: a model not read exactly starts in its worker and its surrogate is fitted
    expect(page.get_by_text(f"Loaded applicants.csv and {name}", exact=False)).to_be_visible(timeout=LONG)
    _settled(page)


def _data_page(page, shots, made, name: str) -> None:
    """The kind said, and the predictions exported are the fitted model's own."""
    kind = made["kinds"][name]
    main = _main_text(page)
    if kind == "linear":
        assert "Linear" in main and "is read exactly" in main, main[:2000]
    else:
        assert "Any other" in main and "not read exactly" in main, main[:2000]
    assert "Surrogate agreement" in main
    # no link offers to keep it: a link keeps a tree ensemble, and would open its surrogate in its place
    assert "A link cannot keep this model" in page.inner_text('[data-testid="stSidebar"]')
    shown = _csv(_download(page, "Download data with predictions (CSV)"))
    own = _predict(made["fitted"][name], made["df"])
    assert np.array_equal(shown["prediction"].to_numpy(), own), "the page's predictions are not the model's"
    _shot(page, shots, name, "data_model")
    _no_error(page)


def _optimal(page, shots, made, name: str, batch: bool = True) -> None:
    """The optimal counterfactual of row 0 and a batch of 3: each applied to the fitted model."""
    kind, model = made["kinds"][name], made["fitted"][name]
    _go(page, "Optimal counterfactual")
    _press(page, "Find the optimal counterfactual")
    record = json.loads(_download(page, "Download result (JSON)"))
    assert _predict(model, [record["x"]])[0] == TARGET, (name, record["x"], record["status"])
    assert record["guarantee"]["kind"] == ("proven_optimal" if kind == "linear" else "valid_on_model"), record
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} optimal counterfactual")
    assert _claim_of(claims, "this answer").startswith(_answer_words(kind)), claims
    table = _csv(_download(page, "Download table (CSV)"))
    again = dict(zip(table["column"], table["counterfactual value"]))
    assert _predict(model, [again])[0] == TARGET, (name, again)
    assert set(table["guarantee"]) == {record["guarantee"]["kind"]}, table
    _shot(page, shots, name, "optimal_cf")
    if batch:
        page.get_by_role("tab", name="Many rows").click()
        _fill(page, "How many rows", 3)
        _press(page, "Run on 3 rows")
        rows = _csv(_download(page, "Download batch results (CSV)"))
        found = rows["status"].isin(["optimal", "feasible"])
        assert found.sum() == 3, rows
        assert (_predict(model, _cf_rows(rows, "cf:", found)) == TARGET).all(), rows
        assert set(rows["guarantee"]) == {"proven_optimal" if kind == "linear" else "valid_on_model"}, rows
        claims = _claims(page)
        _claims_fit(kind, claims, f"{name} batch")
        assert _claim_of(claims, "this batch").startswith(_answer_words(kind)), claims
        _shot(page, shots, name, "optimal_cf_batch")
    _no_error(page)


def _metarule(page, shots, made, name: str) -> None:
    """T-CREx's rules: each applied at its edge to the rows its metarules prescribe it to that
    the fitted model refuses; the share accepted is the one the page states."""
    kind, model, df = made["kinds"][name], made["fitted"][name], made["df"]
    _go(page, "Metarule tree")
    page.locator('[data-testid="stGraphVizChart"]').first.wait_for(timeout=LONG)
    rules = json.loads(_download(page, "Download rules and metarules (JSON)"))
    assert rules["params"]["target"] == TARGET, rules["params"]
    _claims_fit(kind, _claims(page), f"{name} metarule tree")
    refused = df[_predict(model, df) != TARGET].to_dict("records")
    prescribed: dict[str, list[dict]] = {r["rule"]: [] for r in rules["rules"]}
    for rec in refused:
        leaf = [m for m in rules["metarules"] if _box_holds(rec, m["conditions"])]
        assert len(leaf) == 1, (rec, leaf)                      # the metarules cut the space in parts
        if leaf[0]["rule"] is not None:
            prescribed[leaf[0]["rule"]].append(rec)
    assert sum(map(len, prescribed.values())), "no rule is prescribed to any refused row"
    for r in rules["rules"]:
        moved = [_at_edge(rec, r["conditions"], df) for rec in prescribed[r["rule"]]]
        assert r["edge_rows"] == len(moved), (r, len(moved))
        if moved:
            share = float(np.mean(_predict(model, moved) == TARGET))
            assert share == pytest.approx(r["edge_accepted"], abs=1e-9), (r["rule"], r["text"], share)
    _shot(page, shots, name, "metarule_tree")
    _no_error(page)


_CHANGE = re.compile(r"^(?P<column>[^:]+): (?P<before>.+?) → (?P<after>.+)$")


def _changed(row: dict, line: str) -> dict:
    """The row with the changes of a line ``column: before → after, …`` as the page writes them."""
    out = dict(row)
    for part in line.split(", "):
        m = _CHANGE.match(part.strip())
        assert m is not None, (part, line)
        c, after = m["column"], m["after"]
        out[c] = after if c in ("job", "city") else float(after.replace(",", ""))
    return out


def _regions(page, shots, made, name: str) -> None:
    """The regions page's counterfactual, as its text writes it, applied to the fitted model; the
    drawing is the linear model's own boundary, or the surrogate's, said as such."""
    kind, model, df = made["kinds"][name], made["fitted"][name], made["df"]
    _go(page, "Decision regions")
    page.locator(".js-plotly-plot").first.wait_for(timeout=LONG)
    _settled(page)
    text = _main_text(page)
    head = "Exact counterfactual: " if kind == "linear" else "Counterfactual: "
    lines = [line for line in text.splitlines() if line.startswith(head)]
    assert lines, (head, text[:3000])
    cf = _changed(df.iloc[0].to_dict(), lines[0][len(head):])
    assert _predict(model, [cf])[0] == TARGET, (name, lines[0])
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} decision regions")
    assert _claim_of(claims, "this counterfactual").startswith(_answer_words(kind)), claims
    drawing = _claim_of(claims, "this drawing")
    assert drawing.startswith("Exact on the linear model" if kind == "linear" else "Exact on its surrogate"), drawing
    _shot(page, shots, name, "decision_regions")
    _no_error(page)


def _fcca(page, shots, made, name: str) -> None:
    """FCCA's counterfactual pairs: each row's counterfactual, rebuilt from its pairs, is accepted by
    the fitted model exactly where the export says it is ("valid on the model")."""
    kind, model, df, y = made["kinds"][name], made["fitted"][name], made["df"], made["y"]
    _go(page, "FCCA thresholds")
    _fill(page, "At most this many rows", 20)
    _fill(page, "Parallel processes", 1)
    _press(page, "Compute counterfactuals and thresholds")
    pairs = _csv(_download(page, "Counterfactual pairs (CSV)"))
    assert len(pairs), "no pair"
    for row, grp in pairs.groupby("row"):
        cf = df.iloc[int(row)].to_dict()
        for feature, value in zip(grp["feature"], grp["x_ce"]):
            column, _, category = str(feature).partition("=")
            if category:
                if float(value) == 1.0:
                    cf[column] = category
            else:
                cf[column] = float(value)
        accepted = _predict(model, [cf])[0] == 1 - y[int(row)]      # the class it was found for
        assert set(grp["valid on the model"]) == {accepted}, (row, grp, accepted)
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} FCCA")
    assert _claim_of(claims, "this set of thresholds").startswith("Estimated"), claims
    _shot(page, shots, name, "fcca")
    _no_error(page)


def _rules(page, shots, made, name: str) -> None:
    """The counterfactual rule of row 0: its samples' "model output" is the fitted model's, and the
    row moved to the rule's edge is accepted or not as the rule's guarantee says."""
    kind, model, df = made["kinds"][name], made["fitted"][name], made["df"]
    _go(page, "Counterfactual rules")
    _press(page, "Find the counterfactual rule")
    rule = json.loads(_download(page, "Download the rule (JSON)"))
    samples = _csv(_download(page, "Download the samples (CSV)"))
    own = _predict(model, samples)
    assert [str(v) for v in own] == [str(v) for v in samples["model output"]], samples
    assert list(own == TARGET) == list(samples["reaches target"]), samples
    edge = _at_edge(df.iloc[0].to_dict(), rule["conditions"], df)
    accepted = _predict(model, [edge])[0] == TARGET
    g = rule["guarantee"]
    assert (g["kind"] == "valid_on_model") == accepted, (edge, g)
    assert f"accepted by the model itself for {int(accepted)} ({100 * accepted:.1f}%)" in g["text"], g
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} counterfactual rules")
    assert _claim_of(claims, "this rule") == rule["guarantee"]["text"], claims
    _shot(page, shots, name, "counterfactual_rules")
    _no_error(page)


class _Cases(html.parser.HTMLParser):
    """The cells of the story's table of the case and its counterfactual."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        self._in = tag in ("td", "th")

    def handle_endtag(self, tag):
        self._in = False

    def handle_data(self, data):
        if self._in and self.rows:
            self.rows[-1].append(data.strip())


def _story_table(markup: str) -> pd.DataFrame:
    table = markup[markup.index('class="dataframe cases"'):]
    parser = _Cases()
    parser.feed(table[:table.index("</table>")])
    head, *body = parser.rows
    return pd.DataFrame(body, columns=head).set_index("column")


def _story(page, shots, made, name: str) -> None:
    """The case story of row 0: its counterfactual, as the HTML's table writes it, is the fitted model's
    target; the story's guarantee is the answer's."""
    kind, model = made["kinds"][name], made["fitted"][name]
    _go(page, "Case story")
    _press(page, "Tell the story")
    table = _story_table(_download(page, "Download the story (HTML)").decode())
    cf = {c: (v if c in ("job", "city") else float(v.replace(",", ""))) for c, v in table["counterfactual"].items()}
    assert _predict(model, [cf])[0] == TARGET, (name, table)
    score = re.search(r"The model decides 0 for this case, with a score of (\d+)% for that outcome", _main_text(page))
    assert score is not None, _main_text(page)[:2000]
    own = model.predict_proba(made["df"].iloc[[0]])[0][0]
    assert int(score[1]) == round(100 * own), (score[0], own)
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} case story")
    assert _claim_of(claims, "this change").startswith(_answer_words(kind)), claims
    _shot(page, shots, name, "case_story")
    _no_error(page)


def _audit(page, shots, made, name: str) -> None:
    """A small audit: every audited row's recourse (its cf: columns) is the fitted model's target."""
    from browser_util import open_expander

    kind, model = made["kinds"][name], made["fitted"][name]
    _go(page, "Fairness audit")
    _fill(page, "At most this many rows", 10)
    open_expander(page, "Statistics and rules")
    _fill(page, "Permutations", 200)
    _fill(page, "Bootstrap resamples", 100)
    _fill(page, "Local rules per group", 2)
    open_expander(page, "Compute: local processes or a Dask cluster")
    _fill(page, "Local processes", 1)
    _press(page, "Audit 10 rows")
    rows = _csv(_download(page, "Per-row results (CSV)"))
    found = rows["feasible"] == 1
    assert found.sum() >= 5, rows[["row", "status"]]
    assert (_predict(model, _cf_rows(rows, "cf:", found)) == TARGET).all(), rows
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} fairness audit")
    assert _claim_of(claims, "each row's recourse").startswith(_answer_words(kind)), claims
    _shot(page, shots, name, "fairness_audit")
    _no_error(page)


def _compare(page, shots, made, name: str, other: str) -> None:
    """Model B uploaded beside A; each studied row's recourse under A is A's target, and each
    recourse said valid under both is the target of both fitted models."""
    from playwright.sync_api import expect

    kind, model, model_b = made["kinds"][name], made["fitted"][name], made["fitted"][other]
    _go(page, "Compare models")
    page.get_by_text("Upload a model file").click()
    upload(page, "Model B", str(made["dir"] / other), timeout=LONG)
    page.get_by_text(f"{other}", exact=False).first.wait_for(timeout=LONG)
    load = page.get_by_role("button", name="Load model B")
    expect(load).to_be_enabled(timeout=LONG)
    _press(page, "Load model B")
    page.get_by_text("Agreement of decisions").wait_for(timeout=LONG)
    _fill(page, "At most this many rows", 10)
    _fill(page, "Local processes", 1)
    _press(page, "Study 10 rows")
    rows = _csv(_download(page, "Per-row results (CSV)"))
    under_a, both = rows["found_a"] == 1, rows["found_both"] == 1
    assert under_a.sum() >= 5, rows
    assert (_predict(model, _cf_rows(rows, "cf_a:", under_a)) == TARGET).all(), rows
    for m in (model, model_b):
        assert (_predict(m, _cf_rows(rows, "cf_both:", both)) == TARGET).all(), rows
    claims = _claims(page)
    _claims_fit(kind, claims, f"{name} vs {other}")
    assert _claim_of(claims, "each recourse under model A").startswith(_answer_words(kind)), claims
    assert _claim_of(claims, "each recourse valid under both").startswith(_answer_words("black_box")), claims
    drawn = [_said(c) for c in claims if c.startswith("What this drawing guarantees: ")]
    assert len(drawn) == 2 and all(d.startswith("Exact on its surrogate") for d in drawn), claims
    _shot(page, shots, name, "compare_models", end=True)
    _no_error(page)


def _history(page, shots, made, name: str) -> None:
    """The audits of this session listed, each titled by its model (never by a surrogate)."""
    _go(page, "Audit history")
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=LONG)
    assert "surrogate of" not in _main_text(page)
    _shot(page, shots, name, "audit_history")
    _no_error(page)


# ------------------------------------------------------------------ the session

@pytest.fixture(scope="module")
def app(app_url, tmp_path_factory):
    shots = shots_dir(tmp_path_factory.mktemp("shots"))
    with browser_page(height=2400) as page:
        page.goto(app_url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=LONG)
        yield page, shots


EVERY_PAGE = (_data_page, _optimal, _metarule, _regions, _fcca, _rules, _story, _audit)


def test_the_mlp_saved_with_skops_on_every_page(app, made):
    page, shots = app
    _load(page, shots, made, "mlp.skops")
    for step in EVERY_PAGE:
        step(page, shots, made, "mlp.skops")
    _compare(page, shots, made, "mlp.skops", "lr.skops")
    _history(page, shots, made, "mlp.skops")


def test_the_logistic_regression_pipeline_on_every_page(app, made):
    page, shots = app
    _load(page, shots, made, "lr.skops")
    for step in EVERY_PAGE:
        step(page, shots, made, "lr.skops")
    _history(page, shots, made, "lr.skops")


def test_the_mlp_exported_to_onnx_gives_its_counterfactual(app, made):
    page, shots = app
    _load(page, shots, made, "mlp.onnx")
    _data_page(page, shots, made, "mlp.onnx")
    _optimal(page, shots, made, "mlp.onnx", batch=False)


def test_the_svc_on_sparse_one_hot_gives_its_counterfactual_and_regions(app, made):
    page, shots = app
    _load(page, shots, made, "svc.skops")
    _data_page(page, shots, made, "svc.skops")
    _optimal(page, shots, made, "svc.skops", batch=False)
    _regions(page, shots, made, "svc.skops")
