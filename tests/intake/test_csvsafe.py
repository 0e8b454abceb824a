"""CSV exports neutralise spreadsheet formulas (OWASP CSV injection): a cell or
column name from an uploaded table that begins with =, +, -, @, tab or CR is
written with a leading quote; numbers stay numbers. Every CSV the app writes goes
through core.intake.csvsafe."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
from conftest import ROOT

from core.intake.csvsafe import neutralise, to_csv

HOSTILE = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd",
           "\t=1+1", "\r=1+1"]


def test_formula_cells_and_names_are_neutralised_and_numbers_kept():
    df = pd.DataFrame({"=name": HOSTILE + ["plain"], "value": [-1.5, 2, -3, 4, 5, 6, -7],
                       "text number": ["-1.5", "+2", "3", "-4e3", ".5", "x", "-"]})
    df["cat"] = pd.Categorical(["=a"] * 3 + ["b"] * 4)
    back = pd.read_csv(io.StringIO(to_csv(df)), dtype=str, keep_default_na=False)
    assert list(back.columns) == ["'=name", "value", "text number", "cat"]
    for cell in back["'=name"].iloc[:4]:
        assert cell.startswith("'")
    assert back["'=name"].iloc[-1] == "plain"
    assert list(back["value"]) == ["-1.5", "2", "-3", "4", "5", "6", "-7"]      # numbers as shown: 2, not 2.0
    assert list(back["text number"]) == ["-1.5", "+2", "3", "-4e3", ".5", "x", "'-"]
    assert list(back["cat"][:3]) == ["'=a"] * 3
    for v in HOSTILE:
        assert neutralise(v) == "'" + v
    assert neutralise(np.float64(-3.0)) == -3.0 and neutralise(None) is None


def test_every_csv_export_goes_through_csvsafe():
    """No page, dashboard helper or core module writes a CSV with pandas directly."""
    direct = []
    for folder in ("core", "dashboard", "pages"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "csvsafe.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\.to_csv\(", line):
                    direct.append(f"{path.relative_to(ROOT)}:{n}")
    assert not direct, direct


def test_the_audit_rows_csv_is_neutralised():
    from core.audit.result import Audit

    rows = pd.DataFrame({"row": [0, 1], "group": ["=HYPERLINK(\"x\")", "ok"], "cost": [-0.5, 1.0]})
    audit = Audit.__new__(Audit)
    object.__setattr__(audit, "rows", rows)
    text = audit.rows_csv()
    assert "\"'=HYPERLINK(\"\"x\"\")\"" in text and "-0.5" in text
