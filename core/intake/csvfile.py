"""CSV tables read as written, or refused with the reason.

The text encoding is told by :mod:`core.intake.encoding` (or named by the caller); the delimiter
(comma, semicolon, tab or pipe) from the first lines; line endings may be LF,
CRLF or CR alone. The header is read by the same parser as the rows, and
duplicate names are refused before pandas would rename them. A second header
row of type letters (``F`` continuous, ``D`` discrete, ``B`` binary, ``E``
categorical, ``T`` target), as in the OCEAN benchmark files, is recognised.

Numbers written with a decimal comma (``3000,12``, ``1.234,5``), as European
spreadsheets save them with ``;`` (or a tab) between fields, are read as numbers,
and a note says so. In a comma-separated file such numbers are quoted: a comma
followed by exactly three digits throughout a column (``"1,234"``) is read as a
thousands separator, with a note saying that too; any other (``"1,5"``) is refused
with the fix, since that file's numbers are otherwise written with points. Whatever the parser raises
(``csv.Error``, pandas' errors, a header of megabytes) becomes a
:class:`DataError` naming the problem.
"""

from __future__ import annotations

import collections
import csv
import io
import re

import pandas as pd

from core.errors import DataError
from core.intake.encoding import decode_text

__all__ = ["read_csv", "TYPE_LETTERS", "MAX_HEADER_CHARS"]

TYPE_LETTERS = {"F": "numerical", "D": "integer", "B": "binary", "E": "categorical", "T": "target"}
MAX_HEADER_CHARS = 1 << 20          # a header row longer than this is not one
_SNIFF_LINES = 50
_DELIMITERS = ",;\t|"
# a number with a decimal comma, '.' between thousands: 3000,12  -1.234,5  7
_DECIMAL_COMMA = re.compile(r"[+-]?(?:\d{1,3}(?:\.\d{3})+|\d+)(?:,\d+)?")
# a number with ',' between thousands and a decimal point: 1,234  12,345.5  7
_THOUSANDS_COMMA = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def read_csv(data: bytes, filename: str, *, max_rows: int | None = None, encoding: str | None = None
             ) -> pd.DataFrame:
    """The table of a CSV file's bytes (see the module docstring); ``max_rows``: parse no
    further than one row past it; ``encoding``: the text encoding when the caller knows
    it (else detected). ``df.attrs["notes"]`` says how it was read when that was not
    plain (a code page, decimal commas)."""
    text, notes = _text_of(data, filename, encoding)
    delim = _sniff_delimiter(text)
    raw = text.encode("utf-8")                     # bytes for pandas: a str buffer takes 4 bytes a character
    del text
    df = _parsed(raw, delim, filename, max_rows)
    if not isinstance(df.index, pd.RangeIndex):  # pandas took surplus fields as an index
        raise DataError(
            f"{filename!r} is not a consistent {_delim_name(delim)}-separated table: some rows have "
            "more fields than the header. Check that every row has the same number of fields."
        )
    if df.shape[1] == 1:  # a dataset needs features and a target: the delimiter was not found
        raise DataError(
            f"{filename!r} was read as one column named {str(df.columns[0])[:60]!r}: the delimiter "
            "could not be recognised. Use commas, semicolons or tabs consistently."
        )
    df = _apply_type_row(df)
    notes += _numbers_with_commas(df, delim, filename)
    if notes:
        df.attrs.setdefault("notes", []).extend(notes)
    return df


def _text_of(data: bytes, filename: str, encoding: str | None) -> tuple[str, list[str]]:
    """The file's text (lines ended by LF) and the note on its encoding, if any; refused when
    blank or when its first line is too long to be a header."""
    decoded = decode_text(data, filename, encoding)
    text = decoded.text
    notes = [decoded.note] if decoded.note else []
    if "\r" in text and "\n" not in text:         # classic Mac line endings: CR alone ends a line
        text = text.replace("\r", "\n")
    if not text.strip():
        raise DataError(f"{filename!r} holds only blank text. Upload a CSV with a header row and data rows.")
    end = text.find("\n")
    first = text if end < 0 else text[:end]
    if len(first) > MAX_HEADER_CHARS:
        raise DataError(f"{filename!r} begins with a line of {len(first):,} characters; a header row naming the "
                        f"columns takes at most {MAX_HEADER_CHARS:,}. Is this a CSV table? Upload one with a header "
                        "row and one line per row.")
    return text, notes


def _parsed(raw: bytes, delim: str, filename: str, max_rows: int | None) -> pd.DataFrame:
    """The table pandas parses (no further than two rows past ``max_rows``), duplicate column
    names refused first; whatever the parser raises, a DataError in words."""
    try:
        _check_header(raw, delim, filename)
        return pd.read_csv(io.BytesIO(raw), sep=delim, skipinitialspace=True, encoding="utf-8",
                           nrows=None if max_rows is None else max_rows + 2)   # + the type row, + one over
    except DataError:
        raise
    except pd.errors.ParserError as exc:
        raise DataError(f"{filename!r} is not a consistent {_delim_name(delim)}-separated table "
                        f"({_reason(exc)}). Check that every row has the same number of fields.") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{filename!r} has no columns. Upload a CSV with a header row.") from None
    except Exception as exc:  # noqa: BLE001 - csv.Error, a codec or overflow error: the user's file, in words
        raise DataError(f"{filename!r} could not be read as a {_delim_name(delim)}-separated table "
                        f"({type(exc).__name__}: {_reason(exc)}). Check that it is a CSV file with one header "
                        "row and one line per row.") from None


def _check_header(raw: bytes, delim: str, filename: str) -> None:
    """Refuse duplicate column names before pandas would rename them."""
    counts = collections.Counter(h.strip() for h in _header(raw, delim))
    dupes = sorted(h for h, k in counts.items() if k > 1 and h)
    if dupes:
        raise DataError(f"{filename!r} has duplicate column names {dupes[:6]}: each column needs its own name. "
                        "Rename or remove the repeated columns and upload again.")


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] if text else type(exc).__name__


def _sniff_delimiter(text: str) -> str:
    """The delimiter of the first lines (csv.Sniffer, else the most frequent candidate of the first line)."""
    lines = text.split("\n", _SNIFF_LINES)[:_SNIFF_LINES]
    sample = "\n".join(line[:65536] for line in lines)[:262144]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except (csv.Error, ValueError, IndexError):
        first = lines[0] if lines else ""
        counts = {d: first.count(d) for d in _DELIMITERS}
        best = max(counts, key=lambda d: counts[d])
        return best if counts[best] else ","


def _header(raw: bytes, delim: str) -> list[str]:
    """The header row's cells, read by pandas' parser as the rows will be (quotes, CR)."""
    head = pd.read_csv(io.BytesIO(raw[: 4 * MAX_HEADER_CHARS + 4]), sep=delim, header=None, nrows=1, dtype=str,
                       keep_default_na=False, skipinitialspace=True, encoding="utf-8", encoding_errors="replace")
    return [str(v) for v in head.iloc[0].tolist()] if len(head) else []


def _delim_name(d: str) -> str:
    return {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(d, repr(d))


def _apply_type_row(df: pd.DataFrame) -> pd.DataFrame:
    if df.shape[0] == 0:
        return df
    first = df.iloc[0].astype(str).str.strip()
    if not first.isin(list(TYPE_LETTERS)).all():
        return df
    types = {c: TYPE_LETTERS[v] for c, v in first.items()}
    df = df.iloc[1:].reset_index(drop=True)
    for c, k in types.items():
        if k != "categorical":
            conv = pd.to_numeric(df[c], errors="coerce")
            if conv.notna().sum() == df[c].notna().sum():
                df[c] = conv
    targets = [c for c, k in types.items() if k == "target"]
    df.attrs["column_types"] = {c: k for c, k in types.items() if k != "target"}
    if len(targets) == 1:
        df.attrs["target"] = targets[0]
    return df


def _numbers_with_commas(df: pd.DataFrame, delim: str, filename: str) -> list[str]:
    """Text columns that hold only numbers written with commas, made numbers in place;
    the notes that say how they were read. A decimal comma in a comma-separated file
    (a quoted ``"1,5"``) is refused with the fix: that file's own numbers use points."""
    categorical = {c for c, k in df.attrs.get("column_types", {}).items() if k == "categorical"}
    found: dict[str, list[tuple[str, str]]] = {"decimal": [], "thousands": []}
    for c in df.columns:
        s = df[c]
        values = None if c in categorical else _comma_texts(s)
        if values is None:
            continue
        example = values[values.str.contains(",", regex=False)].iloc[0]
        how, number = _comma_numbers(values, delim)
        if how == "refused":
            raise DataError(f"{filename!r}: column {c!r} holds numbers written with a decimal comma (e.g. "
                            f"{example!r}) in a comma-separated file, where they are not read as numbers. "
                            "Save the file with decimal points, or with ';' between fields, and upload it again.")
        if number is None:
            continue
        found[how].append((c, example))
        out = pd.Series(float("nan"), index=s.index, dtype="float64")
        out[values.index] = pd.to_numeric(number).astype("float64")
        df[c] = out
    return _comma_notes(found["decimal"], found["thousands"])


def _comma_texts(s: pd.Series) -> pd.Series | None:
    """A text column's values (stripped, missing ones left out) when one holds a comma; else None."""
    if pd.api.types.is_numeric_dtype(s) or isinstance(s.dtype, pd.CategoricalDtype):
        return None
    values = s.dropna()
    if values.empty or not all(isinstance(v, str) for v in values):
        return None
    values = values.str.strip()
    return values if values.str.contains(",", regex=False).any() else None


def _comma_numbers(values: pd.Series, delim: str) -> tuple[str, pd.Series | None]:
    """How a column of numbers with commas reads: ("thousands" or "decimal", the numbers as
    text with a decimal point), ("refused", None) for decimal commas in a comma-separated
    file, or ("", None) when they are not all numbers."""
    as_decimal = bool(values.str.fullmatch(_DECIMAL_COMMA.pattern).all())
    as_thousands = bool(values.str.fullmatch(_THOUSANDS_COMMA.pattern).all())
    if as_thousands and (delim != ";" or not as_decimal):
        return "thousands", values.str.replace(",", "", regex=False)
    if as_decimal and delim == ",":
        return "refused", None
    if as_decimal:
        return "decimal", values.str.replace(".", "", regex=False).str.replace(",", ".", regex=False)
    return "", None


def _comma_notes(decimal: list[tuple[str, str]], thousands: list[tuple[str, str]]) -> list[str]:
    """How the columns of numbers with commas were read, in words."""
    notes = []
    if decimal:
        notes.append(f"Columns {[c for c, _ in decimal][:6]} hold numbers written with a decimal comma (e.g. "
                     f"{decimal[0][1]!r}) and are read as numbers.")
    if thousands:
        notes.append(f"Columns {[c for c, _ in thousands][:6]} hold numbers with a comma between groups of three "
                     f"digits (e.g. {thousands[0][1]!r}), read as thousands separators. If those commas are decimal "
                     "commas, save the file with ';' between fields (or with decimal points) and upload it again.")
    return notes
