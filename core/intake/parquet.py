"""Parquet tables read within limits set before any memory is spent.

A Parquet file is compressed and run-length encoded: a 1 MB file can hold
150 M rows, and an 811-byte file millions of copies of one long string, so the
size of the upload says nothing about the memory its table takes. Here the
file's own metadata is read first (a few KB): its row count is checked against
the row cap, and its decoded size is estimated from the number of leaf values
of each column times their width (for text: the longest value the column
statistics name). Only then are the rows decoded, batch by batch, stopping as
soon as the decoded bytes pass the budget. Columns that hold lists, structs or
maps are refused with their names (the analyses need one number or category
per cell); decimal columns are read as numbers, with a note if a value has
more digits than a float holds.
"""

from __future__ import annotations

import io
from decimal import Decimal

import numpy as np
import pandas as pd

from core.errors import DataError

__all__ = ["read_parquet", "MAX_DECODED_BYTES"]

MAX_DECODED_BYTES = 2 * 1024**3     # a local instance; a public one sets its own
_BATCH_ROWS = 65_536


def read_parquet(data: bytes, filename: str, *, max_rows: int | None = None,
                 max_decoded_bytes: int = MAX_DECODED_BYTES) -> pd.DataFrame:
    """The table of a Parquet file, or :class:`DataError` before memory is spent
    (see the module docstring). A named index is kept as a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        meta, schema = pf.metadata, pf.schema_arrow
    except Exception as exc:  # noqa: BLE001 - any damage to the file is the user's to fix
        raise DataError(f"{filename!r} is not a readable Parquet file ({exc}).") from None
    _check_columns(schema, filename)
    if max_rows is not None and meta.num_rows > max_rows:
        raise DataError(f"{filename!r} holds {meta.num_rows:,} rows; this instance analyses at most "
                        f"{max_rows:,}. Upload a sample of the rows.")
    estimate = _decoded_estimate(meta, schema)
    if estimate > max_decoded_bytes:
        raise DataError(f"{filename!r} would take about {estimate / 2**20:,.0f} MB of memory once decoded "
                        f"({meta.num_rows:,} rows); the limit is {max_decoded_bytes / 2**20:,.0f} MB. "
                        "Upload a sample of the rows or fewer columns.")
    batches, used = [], 0
    try:
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, use_pandas_metadata=True):
            used += batch.nbytes
            if used > max_decoded_bytes:
                raise DataError(f"{filename!r} takes more than {max_decoded_bytes / 2**20:,.0f} MB of memory "
                                "once decoded. Upload a sample of the rows or fewer columns.")
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=batches[0].schema if batches else schema)
        df = table.to_pandas()
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{filename!r} is not a readable Parquet file ({exc}).") from None
    return _index_as_column(_decimals_as_numbers(df))


def _check_columns(schema, filename: str) -> None:
    import pyarrow.types as pat

    nested = [f.name for f in schema if pat.is_nested(f.type) or
              (pat.is_dictionary(f.type) and pat.is_nested(f.type.value_type))]
    if nested:
        raise DataError(f"{filename!r}: the columns {nested[:6]} hold lists, structs or maps; every cell must "
                        "hold one number or one category. Flatten or drop those columns and upload again.")


def _decoded_estimate(meta, schema) -> int:
    """Bytes the table takes decoded: each column's values times their width."""
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            total += col.num_values * _width(col, schema)
    return total


def _width(col, schema) -> int:
    """Bytes one value of a column chunk takes decoded (text: its longest value, per its statistics)."""
    import pyarrow.types as pat

    name = col.path_in_schema.split(".")[0]
    kind = schema.field(name).type if name in schema.names else None
    if kind is not None and pat.is_dictionary(kind):
        kind = kind.value_type
    if kind is not None and not pat.is_decimal(kind):
        try:
            return max(1, kind.bit_width // 8)
        except ValueError:          # text, binary: variable width
            pass
    longest = 16
    stats = col.statistics
    if stats is not None and stats.has_min_max:
        longest = max(longest, *(len(v) if isinstance(v, (str, bytes)) else 8 for v in (stats.min, stats.max)))
    return longest + 8              # the value and its offset


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
