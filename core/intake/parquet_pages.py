"""The page headers of a Parquet column chunk, read from the file's bytes.

A Parquet file's footer says how large each column chunk is, but Arrow decodes
what the *page headers* say: each page's uncompressed size (Arrow allocates it,
and refuses a page that decompresses to any other size), its number of values
and its encoding. So the limits in :mod:`core.intake.parquet` are checked on
these headers, not on footer fields a writer may have left out or set wrong.

A header is a Thrift struct in the compact protocol (parquet-format's
``PageHeader``): field 1 the page type, 2 the uncompressed size, 3 the
compressed size, 5 / 7 / 8 the data page (v1), dictionary page and data page
v2 headers, whose field 1 is the number of values and whose encoding is field
2 (v1, dictionary) or 4 (v2). This reader follows the protocol's few types,
keeps only those fields, and refuses anything that runs out of the file, nests
too deep or claims a negative size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:                      # pyarrow is read only where a Parquet file is
    from pyarrow.parquet import ColumnChunkMetaData

__all__ = ["Page", "PageError", "chunk_pages", "ENCODINGS"]

DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3
# parquet-format's Encoding enum
ENCODINGS = {0: "PLAIN", 2: "PLAIN_DICTIONARY", 3: "RLE", 4: "BIT_PACKED", 5: "DELTA_BINARY_PACKED",
             6: "DELTA_LENGTH_BYTE_ARRAY", 7: "DELTA_BYTE_ARRAY", 8: "RLE_DICTIONARY", 9: "BYTE_STREAM_SPLIT"}
_MAX_DEPTH = 16


class PageError(ValueError):
    """A page header that cannot be read (the caller says which file and column)."""


@dataclass(frozen=True)
class Page:
    """One page of a column chunk, as its header describes it."""

    kind: int                   # DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE or DATA_PAGE_V2
    uncompressed: int           # bytes once decompressed (levels and values)
    values: int                 # values in the page (with nulls); dictionary: entries
    encoding: str               # of the values, e.g. "PLAIN", "RLE_DICTIONARY"

    @property
    def is_dictionary(self) -> bool:
        return self.kind == DICTIONARY_PAGE

    @property
    def is_data(self) -> bool:
        return self.kind in (DATA_PAGE, DATA_PAGE_V2)


class _Reader:
    """The compact protocol over ``buf[pos:end]``: varints, zigzag integers, fields."""

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise PageError("a page header runs past the end of its column chunk")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise PageError("a page header holds an integer longer than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise PageError("a page header runs past the end of its column chunk")
        self.pos += n

    def value(self, kind: int, depth: int) -> object:
        """One value of compact type ``kind``: integers and structs are kept, the rest skipped."""
        if depth > _MAX_DEPTH:
            raise PageError("a page header nests deeper than Parquet's")
        if kind in (1, 2):                      # boolean true / false (in a struct field)
            return kind == 1
        if kind == 3:                           # byte
            return self.byte()
        if kind in (4, 5, 6):                   # i16, i32, i64
            return self.zigzag()
        if kind == 7:                           # double
            self.skip(8)
            return None
        if kind == 8:                           # binary
            self.skip(self.varint())
            return None
        if kind in (9, 10):                     # list, set
            self._skip_list(depth)
            return None
        if kind == 11:                          # map
            self._skip_map(depth)
            return None
        if kind == 12:                          # struct
            return self.struct(depth + 1)
        raise PageError(f"a page header holds an unknown Thrift type {kind}")

    def _skip_list(self, depth: int) -> None:
        """A list or a set: its size and element type, then its elements."""
        head = self.byte()
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size = self.varint()
        for _ in range(size):
            if elem in (1, 2):              # booleans in a list: one byte each
                self.byte()
            else:
                self.value(elem, depth + 1)

    def _skip_map(self, depth: int) -> None:
        """A map: its size, then (when not empty) its key and value types, then its pairs."""
        size = self.varint()
        if size:
            types = self.byte()
            for _ in range(size):
                self.value(types >> 4, depth + 1)
                self.value(types & 0x0F, depth + 1)

    def struct(self, depth: int = 0) -> dict[int, object]:
        fields: dict[int, object] = {}
        last = 0
        while True:
            head = self.byte()
            if head == 0:                       # stop
                return fields
            delta, kind = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            fields[fid] = self.value(kind, depth)
            last = fid


def _int(fields: dict[int, object], fid: int) -> int:
    v = fields.get(fid)
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def chunk_pages(data: bytes, column: ColumnChunkMetaData) -> list[Page]:
    """The pages of one column chunk (pyarrow's ``ColumnChunkMetaData``), read from
    ``data`` (the whole file) until the chunk's values are all seen or its bytes end.

    Raises :class:`PageError` when a header cannot be read or claims an impossible size."""
    start, end = _chunk_span(data, column)
    pages: list[Page] = []
    seen, want, pos = 0, column.num_values, start
    while pos < end and seen < want:
        reader = _Reader(data, pos, end)
        page, compressed = _page(reader.struct())
        pages.append(page)
        if page.is_data:
            seen += page.values
        pos = reader.pos + compressed
        if pos > end:
            raise PageError("a page runs past the end of its column chunk")
    return pages


def _chunk_span(data: bytes, column: ColumnChunkMetaData) -> tuple[int, int]:
    """Where a column chunk's pages start (its dictionary page, if before its data) and end, inside the file."""
    start = column.data_page_offset
    if column.has_dictionary_page and 0 < (column.dictionary_page_offset or 0) < start:
        start = column.dictionary_page_offset
    end = start + column.total_compressed_size
    if start < 4 or column.total_compressed_size < 0 or end > len(data):
        raise PageError("its column chunk lies outside the file")
    return start, end


def _page(head: dict[int, object]) -> tuple[Page, int]:
    """A page from its header's fields, and its compressed size (the bytes after the header)."""
    kind, uncompressed, compressed = _int(head, 1), _int(head, 2), _int(head, 3)
    if uncompressed < 0 or compressed < 0:
        raise PageError("a page header claims a negative size")
    sub = {DATA_PAGE: (5, 2), DICTIONARY_PAGE: (7, 2), DATA_PAGE_V2: (8, 4)}.get(kind)
    detail = head.get(sub[0]) if sub else None
    if sub is not None and not isinstance(detail, dict):
        raise PageError("a data or dictionary page has no header of its kind")
    values = _int(detail, 1) if isinstance(detail, dict) else 0
    code = _int(detail, sub[1]) if isinstance(detail, dict) and sub else -1
    return Page(kind, uncompressed, max(values, 0), ENCODINGS.get(code, f"encoding {code}")), compressed
