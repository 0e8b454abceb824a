"""Compressed tables: a CSV or Parquet file inside gzip, bzip2, xz or a zip archive.

Recognised by their first bytes whatever the name says (and by the name:
``.gz``, ``.bz2``, ``.xz``, ``.zip``). A compressed file can expand a
thousandfold, so it is decompressed as a stream that stops one byte past the
limit an uncompressed file has: a decompression bomb costs at most that limit
and is refused. A zip archive must hold one table (a spreadsheet workbook is
named as such); formats the standard library does not read (zstd, 7z, rar,
tar) are refused by name, with the fix.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
import zlib
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Literal

from core.errors import DataError

__all__ = ["unpack"]

_GZIP, _BZIP2, _XZ = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"
_ZIP = (b"PK\x03\x04", b"PK\x05\x06")
_REFUSED = {b"\x28\xb5\x2f\xfd": "zstd", b"7z\xbc\xaf\x27\x1c": "7-Zip", b"Rar!\x1a\x07": "RAR"}
_STREAMS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bzip2", ".xz": "xz"}
_OPENERS: dict[str, Callable[[io.BytesIO, Literal["rb"]], io.BufferedIOBase]] = {
    "gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}
_TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq")
_FIX = "Upload the CSV or Parquet file itself, or compressed with gzip (.gz), bzip2 (.bz2), xz (.xz) or zip."


def _kind(data: bytes, name: str) -> str | None:
    if data.startswith(_GZIP):
        return "gzip"
    if data.startswith(_BZIP2) and len(data) > 3 and data[3:4].isdigit():
        return "bzip2"
    if data.startswith(_XZ):
        return "xz"
    if data.startswith(_ZIP):
        return "zip"
    for magic, what in _REFUSED.items():
        if data.startswith(magic):
            return what
    suffix = PurePosixPath(name.lower()).suffix
    if suffix in (".zst", ".zstd"):
        return "zstd"
    if suffix in (".7z", ".rar", ".tar", ".tgz"):
        return suffix[1:]
    return None


def unpack(data: bytes, filename: str, max_bytes: int) -> tuple[bytes, str, str | None]:
    """``(content, inner name, note)``: the table inside a compressed file, or
    ``data`` itself (and ``filename``, no note) when it is not compressed.

    Raises :class:`DataError` for a damaged or unsupported archive, an archive of
    several files or none, and content over ``max_bytes`` once decompressed."""
    kind = _kind(data, filename)
    if kind is None:
        return data, filename, None
    if kind in ("gzip", "bzip2", "xz"):
        opener = _OPENERS[kind]
        stem = PurePosixPath(filename)
        inner = stem.stem if stem.suffix.lower() in _STREAMS else stem.name
        try:
            with opener(io.BytesIO(data), "rb") as f:
                content = f.read(max_bytes + 1)
        except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
            raise DataError(f"{filename!r} is not a readable {kind} file ({_reason(exc)}). {_FIX}") from None
    elif kind == "zip":
        content, inner = _from_zip(data, filename, max_bytes)
    else:
        raise DataError(f"{filename!r} is a {kind} archive, which is not read here. {_FIX}")
    if len(content) > max_bytes:
        raise DataError(f"{filename!r} decompresses to more than {max_bytes / 2**20:,.0f} MB; the limit is "
                        f"{max_bytes / 2**20:,.0f} MB, as for an uncompressed file. Upload a sample of the rows.")
    if _kind(content, inner) is not None or content[257:262] == b"ustar":
        raise DataError(f"{filename!r} holds another archive ({inner!r}), not a table. {_FIX}")
    note = (f"Read {inner!r} from the {kind} file {filename!r}." if inner != filename else
            f"{filename!r} is compressed with {kind}; read decompressed.")
    return content, inner, note


def _from_zip(data: bytes, filename: str, max_bytes: int) -> tuple[bytes, str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            _refuse_office(zf.namelist(), filename)
            member = _the_table(zf, filename)
            with zf.open(member) as f:
                content = f.read(max_bytes + 1)
    except DataError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError,
            zlib.error, lzma.LZMAError, ValueError) as exc:
        raise DataError(f"{filename!r} is not a readable zip archive ({_reason(exc)}). {_FIX}") from None
    return content, PurePosixPath(member.filename).name


def _refuse_office(names: list[str], filename: str) -> None:
    """An Excel workbook or an office document is a zip archive too: refused, saying to save it as CSV."""
    if "xl/workbook.xml" in names or "[Content_Types].xml" in names or "mimetype" in names:
        what = ("an Excel workbook" if "xl/workbook.xml" in names else
                "an OpenDocument file" if "mimetype" in names else "an Office document")
        raise DataError(f"{filename!r} is {what}, not a table file. Save the sheet as CSV (in Excel: Save As "
                        "> CSV UTF-8) and upload that.")


def _is_member(i: zipfile.ZipInfo) -> bool:
    """A file of the archive's own (not a folder, nor macOS metadata)."""
    return not i.is_dir() and not i.filename.startswith("__MACOSX/") and not PurePosixPath(i.filename).name.startswith("._")


def _the_table(zf: zipfile.ZipFile, filename: str) -> zipfile.ZipInfo:
    """The one table file of the archive (macOS metadata left out), not password-protected."""
    members = [i for i in zf.infolist() if _is_member(i)]
    tables = [i for i in members if i.filename.lower().endswith(_TABLE_SUFFIXES)] or members
    if len(tables) != 1:
        listed = [i.filename for i in members][:6]
        raise DataError(f"{filename!r} is a zip archive of {len(members)} files {listed}; it must hold one "
                        "table. Zip one CSV or Parquet file, or upload it directly.")
    member = tables[0]
    if member.flag_bits & 0x1:
        raise DataError(f"{filename!r} is password-protected. Upload the table without a password.")
    return member


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__
