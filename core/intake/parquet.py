"""Parquet tables read within limits set before any memory is spent.

A Parquet file is compressed and encoded: a 1 MB file can hold 150 M rows, and
a 400-byte file 65,000 copies of one 100,000-character string (a dictionary
page holding the string once, and data pages that repeat its index), so the
size of the upload says nothing about the memory its table takes. Here, before
a row is decoded:

* the footer gives the row count, checked against the row cap, and the column
  types: lists, structs and maps are refused with their names (the analyses
  need one number or category per cell), and so are duplicate column names;
* every page header is read (:mod:`core.intake.parquet_pages`: these, not the
  footer's totals, are what Arrow allocates) and each column's decoded size is
  bounded from them, whatever the encoding. Numbers: their count times 8 bytes.
  Text written plainly (``PLAIN``, ``DELTA_LENGTH_BYTE_ARRAY``): the pages hold
  every byte, so their size is the bound. Text written by reference
  (dictionary pages, ``DELTA_BYTE_ARRAY``'s shared prefixes): each value is at
  most the longest dictionary entry, or the page it sits in, long. Statistics
  are not used: a writer leaves out min/max for values over 4 KB, so a column
  without them says nothing;
* when those bounds pass the budget, a column written by reference is measured
  exactly, without decoding its values: read as Arrow dictionary indices (4
  bytes a row) and the lengths of the dictionary's entries; a column whose
  pages Arrow cannot read that way (``DELTA_BYTE_ARRAY``) is decoded in batches
  small enough that each holds at most a few MB, counted and dropped. A table
  over the budget is refused there, before it is built, and Arrow's pool and
  the C heap are asked to give back what the measuring touched.

Only then are the rows decoded, batch by batch, counting as they come (a
second guard), and converted to pandas column by column (Arrow's copy of each
column is freed as it is converted). Decimal columns are read as numbers, with a
note if a value has more digits than a float holds; temporal columns
(timestamps, with or without a time zone, dates, times of day, durations) as
numbers, with a note giving the unit (days since 1970-01-01 UTC, seconds);
binary columns as text when they are UTF-8, else refused with their names.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from core.errors import DataError
from core.intake.heap import release_unused
from core.intake.parquet_pages import Page, PageError, chunk_pages

__all__ = ["read_parquet", "MAX_DECODED_BYTES"]

MAX_DECODED_BYTES = 2 * 1024**3     # a local instance; a public one sets its own
_BATCH_ROWS = 65_536
_MEASURE_BYTES = 8 * 2**20          # the most a measuring batch of a text column may decode
_TIGHT = frozenset({"PLAIN", "DELTA_LENGTH_BYTE_ARRAY"})
_BY_REFERENCE = frozenset({"PLAIN_DICTIONARY", "RLE_DICTIONARY"})
_EXACT_LONGEST_FROM = 8 * 2**20  # a dictionary bound above this: its longest entry is read
_TEXT_OVERHEAD = 16                 # an offset and validity per text value (pandas keeps text in Arrow)
_OBJECT_OVERHEAD = 56               # a Python object and its pointer (binary, decimal cells)


@dataclass
class _Column:
    """What the page headers say about one column, over all row groups."""

    name: str
    values: int = 0
    page_bytes: int = 0             # uncompressed bytes of all its pages
    bound: int = 0                  # decoded bytes, at most
    tight: bool = True              # the bound is close to the real size (no value stored by reference)
    longest: int = 0                # one value's length, at most (text written by reference)
    dictionary_readable: bool = True  # Arrow can read every page as dictionary indices


def read_parquet(data: bytes, filename: str, *, max_rows: int | None = None,
                 max_decoded_bytes: int = MAX_DECODED_BYTES) -> pd.DataFrame:
    """The table of a Parquet file, or :class:`DataError` before memory is spent
    (see the module docstring). A named index is kept as a column."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        meta, schema = pf.metadata, pf.schema_arrow
    except Exception as exc:  # noqa: BLE001 - any damage to the file is the user's to fix
        raise DataError(f"{filename!r} is not a readable Parquet file ({_reason(exc)}).") from None
    _check_columns(schema, filename)
    if max_rows is not None and meta.num_rows > max_rows:
        raise DataError(f"{filename!r} holds {meta.num_rows:,} rows; this instance analyses at most "
                        f"{max_rows:,}. Upload a sample of the rows.")
    try:
        _check_size(data, pf, filename, max_decoded_bytes)
        df = _decode(pf, filename, max_decoded_bytes)
    except DataError:
        release_unused()                 # what a refused file touched goes back
        raise
    return _index_as_column(_decimals_as_numbers(df))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return text


def _check_columns(schema: Any, filename: str) -> None:
    import pyarrow.types as pat

    counts = Counter(schema.names)
    dupes = sorted(n for n, k in counts.items() if k > 1)
    if dupes:
        raise DataError(f"{filename!r} has duplicate column names {dupes[:6]}: each column needs its own name. "
                        "Rename or remove the repeated columns and write the file again.")
    nested = [f.name for f in schema if pat.is_nested(f.type) or
              (pat.is_dictionary(f.type) and pat.is_nested(f.type.value_type))]
    if nested:
        raise DataError(f"{filename!r}: the columns {nested[:6]} hold lists, structs or maps; every cell must "
                        "hold one number or one category. Flatten or drop those columns and upload again.")


# ------------------------------------------------------------------ size, before decoding
def _columns(data: bytes, meta: Any, filename: str) -> list[_Column]:
    """Each column's decoded size bounded from its page headers (see the module docstring)."""
    out = [_Column(meta.schema.column(c).name) for c in range(meta.num_columns)]
    longest = _Longest(data)
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk, col = group.column(c), out[c]
            try:
                pages = chunk_pages(data, chunk)
            except PageError as exc:
                raise DataError(f"{filename!r} is not a readable Parquet file (column {col.name!r}: {exc}).") from None
            data_pages = [p for p in pages if p.is_data]
            values = max(chunk.num_values, sum(p.values for p in data_pages))
            col.values += values
            col.page_bytes += sum(p.uncompressed for p in pages)
            physical = chunk.physical_type
            if physical == "BYTE_ARRAY":
                col.bound += _text_bound(pages, col, lambda: longest(g, col.name, pages)) + values * _TEXT_OVERHEAD
            elif physical == "FIXED_LEN_BYTE_ARRAY":
                width = max(1, meta.schema.column(c).length or 1)
                col.bound += values * (width + _OBJECT_OVERHEAD)
            else:                                            # numbers, booleans, INT96 timestamps
                col.bound += values * 8
    return out


class _Longest:
    """The longest entry of a chunk's dictionary page, read by Arrow as the dictionary
    of the chunk's first value (no value is decoded; the page is at most the pages' size)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.files: dict[str, Any] = {}

    def __call__(self, group: int, name: str, pages: list[Page]) -> int | None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        dictionary = next(p for p in pages if p.is_dictionary)
        first = next((p for p in pages if p.is_data), None)
        if first is None or first.encoding not in _BY_REFERENCE:
            return None
        try:
            if name not in self.files:
                self.files[name] = pq.ParquetFile(io.BytesIO(self.data), read_dictionary=[name])
            batch = next(self.files[name].iter_batches(batch_size=1, row_groups=[group], columns=[name],
                                                use_pandas_metadata=False))
            entries = batch.column(0).dictionary
            if len(entries) != dictionary.values:
                return None
            return int(pc.max(pc.binary_length(entries)).as_py() or 0)
        except Exception:  # noqa: BLE001 - Arrow cannot read it that way: the bound from the page sizes stands
            return None


def _text_bound(pages: list[Page], col: _Column, exact_longest: Callable[[], int | None]) -> int:
    """Bytes of text the pages of one chunk decode to, at most; marks ``col`` loose
    when a value is stored by reference."""
    # a PLAIN dictionary: each entry a 4-byte length and its bytes, so none is longer than this
    longest = max((p.uncompressed - 4 * max(p.values, 1) for p in pages if p.is_dictionary), default=0)
    referenced = sum(p.values for p in pages if p.is_data and p.encoding in _BY_REFERENCE)
    if referenced * longest > _EXACT_LONGEST_FROM:
        exact = exact_longest()
        longest = longest if exact is None else min(longest, exact)
    bound = 0
    for p in pages:
        if not p.is_data:
            continue
        if p.encoding in _TIGHT:
            bound += p.uncompressed
            if p.encoding != "PLAIN":
                col.dictionary_readable = False
        elif p.encoding in _BY_REFERENCE:
            bound += p.values * max(longest, 0)
            col.tight = False
            col.longest = max(col.longest, longest)
        else:                    # DELTA_BYTE_ARRAY (a value may repeat its predecessor's prefix), or unknown
            bound += p.values * p.uncompressed
            col.tight = False
            col.dictionary_readable = False
            col.longest = max(col.longest, p.uncompressed)
    return bound


def _check_size(data: bytes, pf: Any, filename: str, budget: int) -> None:
    """Refuse a file whose decoded table passes ``budget`` bytes, from its page
    headers or, for text stored by reference, an exact count that decodes no text."""
    columns = _columns(data, pf.metadata, filename)
    rows = pf.metadata.num_rows
    pages = sum(c.page_bytes for c in columns)
    if pages > budget:
        raise DataError(f"{filename!r} takes more than {pages / 2**20:,.0f} MB once decompressed ({rows:,} rows); "
                        f"the limit is {budget / 2**20:,.0f} MB. Upload a sample of the rows or fewer columns.")
    tight = sum(c.bound for c in columns if c.tight)
    if tight > budget:
        raise _too_big(filename, tight, rows, budget, columns)
    loose = sorted((c for c in columns if not c.tight), key=lambda c: c.bound)
    if tight + sum(c.bound for c in loose) <= budget:
        return
    total = tight
    for col in loose:
        room = budget - total
        exact = _measure(data, pf, col, room)
        col.bound = exact
        total += exact
        if total > budget:
            raise _too_big(filename, total, rows, budget, columns, measured=col)


def _too_big(filename: str, total: int, rows: int, budget: int, columns: list[_Column],
             measured: _Column | None = None) -> DataError:
    worst = max(columns, key=lambda c: c.bound)
    alone = (f"; column {worst.name!r} alone {worst.bound / 2**20:,.0f} MB for {worst.values:,} values"
             if len(columns) > 1 and worst.bound > budget / 2 else "")
    more = "more than " if measured is not None and measured.bound > budget and not measured.dictionary_readable \
        else "about "
    return DataError(f"{filename!r} would take {more}{total / 2**20:,.0f} MB of memory once decoded ({rows:,} rows"
                     f"{alone}); the limit is {budget / 2**20:,.0f} MB. Upload a sample of the rows or fewer columns.")


def _measure(data: bytes, pf: Any, col: _Column, room: int) -> int:
    """The decoded bytes of one text column (values, offsets), counted without
    keeping its text; stops as soon as the count passes ``room``."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    total = 0
    if col.dictionary_readable:
        reader = pq.ParquetFile(io.BytesIO(data), read_dictionary=[col.name])
        batches = reader.iter_batches(batch_size=_BATCH_ROWS, columns=[col.name], use_pandas_metadata=False)
    else:
        rows = max(1, min(_BATCH_ROWS, _MEASURE_BYTES // max(col.longest, 1)))
        batches = pf.iter_batches(batch_size=rows, columns=[col.name], use_pandas_metadata=False)
    for batch in batches:
        arr = batch.column(0)
        if hasattr(arr, "dictionary"):
            lengths = pc.binary_length(arr.dictionary)
            size = pc.sum(pc.take(lengths, arr.indices)).as_py() or 0
        else:
            size = pc.sum(pc.binary_length(arr)).as_py() or 0
        total += int(size) + len(arr) * _TEXT_OVERHEAD
        del arr, batch
        if total > room and not col.dictionary_readable:
            break                        # text decoded to count it: no further than needed
    return total


# ------------------------------------------------------------------ decoding
def _decode(pf: Any, filename: str, budget: int) -> pd.DataFrame:
    import pyarrow as pa

    batches, used = [], 0
    try:
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, use_pandas_metadata=True):
            used += batch.nbytes
            if used > budget:
                raise DataError(f"{filename!r} takes more than {budget / 2**20:,.0f} MB of memory "
                                "once decoded. Upload a sample of the rows or fewer columns.")
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=batches[0].schema if batches else pf.schema_arrow)
        del batches
        table, notes = _as_numbers_and_text(table, filename)
        df: pd.DataFrame = table.to_pandas(split_blocks=True, self_destruct=True)
        del table
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{filename!r} is not a readable Parquet file ({_reason(exc)}).") from None
    if notes:
        df.attrs.setdefault("notes", []).extend(notes)
    return df


_TEMPORAL_UNITS = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _as_numbers_and_text(table: Any, filename: str) -> tuple[Any, list[str]]:
    """Temporal columns as float64 numbers, binary columns as text; the notes saying so."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    found: dict[str, list[str]] = {"dated": [], "timed": [], "lasted": [], "text": [], "undecodable": []}
    for i, field in enumerate(table.schema):
        kind = field.type.value_type if pat.is_dictionary(field.type) else field.type
        col = table.column(i)
        if pat.is_dictionary(field.type) and (pat.is_temporal(kind) or pat.is_binary(kind)
                                              or pat.is_large_binary(kind)):
            col = pc.cast(col, kind)
        new, held = _converted(col, kind)
        if held is not None:
            found[held].append(field.name)
        if new is not None:
            table = table.set_column(i, pa.field(field.name, new.type), new)
    return table, _conversion_notes(found, filename)


def _converted(col: Any, kind: Any) -> tuple[Any, str | None]:
    """(the column as numbers or text, what it held: "dated", "timed", "lasted", "text"), or
    (None, "undecodable") for binary data that is not UTF-8, or (None, None) to keep as is."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    if pat.is_timestamp(kind) or pat.is_date(kind):
        return _days(col, kind), "dated"
    if pat.is_time(kind) or pat.is_duration(kind):
        raw = pc.cast(col, pa.int64())
        new = pc.divide(pc.cast(raw, pa.float64()), float(_TEMPORAL_UNITS[kind.unit]))
        return new, "timed" if pat.is_time(kind) else "lasted"
    if pat.is_binary(kind) or pat.is_large_binary(kind) or pat.is_fixed_size_binary(kind):
        return _as_text(col, kind)
    return None, None


def _as_text(col: Any, kind: Any) -> tuple[Any, str]:
    """A binary column as text, or (None, "undecodable") when it is not UTF-8."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    try:
        return pc.cast(pc.cast(col, pa.large_binary()) if pat.is_fixed_size_binary(kind) else col,
                       pa.large_string()), "text"
    except pa.ArrowInvalid:
        return None, "undecodable"


def _days(col: Any, kind: Any) -> Any:
    """A timestamp or date column as float64 days since 1970-01-01 (UTC)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    if pat.is_timestamp(kind):
        per_day = 86_400 * _TEMPORAL_UNITS[kind.unit]
        raw = pc.cast(col, pa.int64())            # Arrow keeps UTC instants whatever the zone
    elif pat.is_date32(kind):
        per_day, raw = 1, pc.cast(col, pa.int32())
    else:
        per_day, raw = 86_400_000, pc.cast(col, pa.int64())
    return pc.divide(pc.cast(raw, pa.float64()), float(per_day))


def _conversion_notes(found: dict[str, list[str]], filename: str) -> list[str]:
    """What :func:`_as_numbers_and_text` did, in words; binary columns that are not text refused."""
    undecodable, dated, timed, lasted = found["undecodable"], found["dated"], found["timed"], found["lasted"]
    if undecodable:
        raise DataError(f"{filename!r}: the columns {undecodable[:6]} hold binary data that is not UTF-8 text; "
                        "every cell must hold one number or one category. Drop those columns or write them as "
                        "text, and upload again.")
    notes: list[str] = []
    if dated:
        notes.append(f"Columns {dated[:6]} hold dates or times and are read as numbers: days since "
                     "1970-01-01 00:00 UTC (a time zone is taken into account), so that the analyses can move "
                     "them; convert them before uploading for another unit.")
    if timed:
        notes.append(f"Columns {timed[:6]} hold times of day and are read as seconds since midnight.")
    if lasted:
        notes.append(f"Columns {lasted[:6]} hold durations and are read as numbers of seconds.")
    return notes


def _decimals_as_numbers(df: pd.DataFrame) -> pd.DataFrame:
    """Decimal columns (Python ``Decimal`` cells) as float64 columns; a note in
    ``df.attrs["notes"]`` counts the values a float cannot hold exactly."""
    for c in df.columns:
        s = df[c]
        if s.dtype != object:
            continue
        values = s.dropna()
        if values.empty or not all(isinstance(v, Decimal) for v in values):
            continue
        floats = s.map(lambda v: float(v) if isinstance(v, Decimal) else np.nan).astype(np.float64)
        inexact = sum(1 for v in values if v.is_finite() and Decimal(repr(float(v))) != v)
        df[c] = floats
        if inexact:
            df.attrs.setdefault("notes", []).append(
                f"{c!r}: {inexact:,} decimal value(s) have more digits than a 64-bit float holds and were "
                "rounded to the nearest one.")
    return df


def _index_as_column(df: pd.DataFrame) -> pd.DataFrame:
    """A named (or non-default) index, as pandas saves it, becomes a column again."""
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df
    if any(n is not None for n in df.index.names):
        return df.reset_index()
    return df.reset_index(drop=True)
