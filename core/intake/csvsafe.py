"""CSV exports that a spreadsheet opens as data, never as formulas.

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
is read by Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)``,
``+cmd|' /C calc'!A0``): data that came from an uploaded table (a column name,
a category, a file name) could run one on the analyst's machine. Following
the OWASP rule on CSV injection, such text cells (and column names) get a
leading single quote, which spreadsheets show as text. Numbers are left as
they are (``-3.5`` is a number, not a formula), and so is text that is
exactly a number. Numbers are written as everywhere else (:func:`core.shown.csv_cell`:
``42``, not ``42.0``; full precision; an empty cell for a missing value).
"""

from __future__ import annotations

import re
from typing import Literal, TypedDict, Unpack

import pandas as pd

from core.shown import csv_cell

__all__ = ["neutralise", "safe_frame", "to_csv"]

_RISKY = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutralise(value: object) -> object:
    """``value`` with a leading ``'`` if it is text a spreadsheet would run."""
    if isinstance(value, str) and value.startswith(_RISKY) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells and column names are neutralised."""
    out = df.copy()
    for col in out.columns:
        s = out[col]
        if not (pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s)
                or isinstance(s.dtype, pd.CategoricalDtype)):
            continue
        cells = s.astype(object)
        safe = pd.Series([neutralise(v) for v in cells], index=cells.index, dtype=object)
        if not safe.equals(cells):                  # only columns with a formula cell change (never their dtype)
            out[col] = safe
    out.columns = [neutralise(c) if isinstance(c, str) else c for c in out.columns]
    return out


class CsvOptions(TypedDict, total=False):
    """pandas' ``to_csv`` keywords :func:`to_csv` passes on (no path: the text is returned)."""

    sep: str
    na_rep: str
    header: bool | list[str]
    index: bool
    lineterminator: str | None
    encoding: str | None
    quoting: Literal[0, 1, 2, 3]
    quotechar: str
    date_format: str | None
    decimal: str


def to_csv(df: pd.DataFrame, **kwargs: Unpack[CsvOptions]) -> str:
    """``df.to_csv(index=False)`` with formula cells neutralised (see the module
    docstring), lines ended by CRLF as RFC 4180 has them: a cell holding a carriage
    return is then quoted instead of breaking its row."""
    kwargs.setdefault("index", False)
    kwargs.setdefault("lineterminator", "\r\n")
    out = safe_frame(df)
    for k in range(out.shape[1]):                   # numbers as shown everywhere: 42, not 42.0
        s = out.iloc[:, k]
        if pd.api.types.is_float_dtype(s) or pd.api.types.is_object_dtype(s):
            out.isetitem(k, pd.Series([csv_cell(v) for v in s], dtype=object).to_numpy())
    return out.to_csv(**kwargs)
