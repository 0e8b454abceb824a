"""The Data & model page on the tables of issue #37 (the real scripts, streamlit AppTest):
a Parquet file with timestamps (with and without a time zone), dates and durations, and a
gzip-compressed CSV in a legacy code page with decimal commas. "Train a model here" works
on each (before: IndexError on the temporal columns; text categories for the numbers), the
notes say how the file was read, and every analysis page opens without a traceback."""

from __future__ import annotations

import datetime as dt
import gzip
import io

import numpy as np
import pandas as pd
from conftest import ROOT
from streamlit.testing.v1 import AppTest

PAGES = ["optimal_cf.py", "metarule_tree.py", "decision_regions.py", "counterfactual_rules.py", "fcca.py",
         "fairness_audit.py", "case_story.py"]


def _table(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"amount": rng.normal(50, 10, n).round(2),
                       "signed": pd.Timestamp("2024-01-01", tz="Europe/Paris")
                       + pd.to_timedelta(rng.integers(0, 365 * 24, n), unit="h"),
                       "waited": pd.to_timedelta(rng.integers(0, 3600, n), unit="s"),
                       "sex": rng.choice(["f", "m"], n)})
    df["day"] = [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 30, n)]
    df["approved"] = ((df.amount > 50) ^ (df.waited.dt.total_seconds() > 1800)).astype(int)
    return df


def _train_here(name: str, data: bytes) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=240)
    at.run()
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload(name, data, "application/octet-stream")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.selectbox(key="dm_target").set_value("approved").run()
    at.radio(key="dm_how").set_value("Train a model here").run()
    at.number_input(key="dm_trees").set_value(20)
    at.button(key="dm_train_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def test_a_parquet_file_with_dates_and_durations_trains_and_explains():
    df = _table()
    buf = io.BytesIO()
    df.to_parquet(buf)
    at = _train_here("loans.parquet", buf.getvalue())
    ws = at.session_state["workspace"]
    assert {"signed", "waited", "day"} <= set(ws.X.columns)
    assert any("days since 1970-01-01" in i.value for i in at.info), [i.value for i in at.info]
    for page in PAGES:
        at.switch_page(f"../pages/{page}").run()
        assert not at.exception, (page, at.exception)
    at.switch_page("../pages/optimal_cf.py").run()
    at.number_input(key="ocf_row").set_value(int(np.flatnonzero(ws.predictions == 0)[0])).run()
    next(b for b in at.button if b.label == "Find the optimal counterfactual").click().run()
    assert not at.exception
    res = at.session_state["ocf_result"]
    assert res.found and int(ws.model.predict(pd.DataFrame([res.x], columns=ws.X.columns))[0]) == 1


def test_a_compressed_csv_with_decimal_commas_in_a_legacy_code_page_trains():
    df = _table().drop(columns=["signed", "waited", "day"]).rename(columns={"amount": "montant payé"})
    text = df.to_csv(index=False, sep=";", decimal=",")
    at = _train_here("prêts.csv.gz", gzip.compress(text.encode("cp1252")))
    ws = at.session_state["workspace"]
    assert "montant payé" in ws.X.columns and "montant payé=50,12" not in ws.X.columns
    np.testing.assert_allclose(ws.raw["montant payé"], df["montant payé"])
    shown = " ".join(i.value for i in at.info)
    assert "decimal comma" in shown and "Windows-1252" in shown and "gzip" in shown, shown
