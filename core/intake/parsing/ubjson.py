"""XGBoost's UBJSON (``.ubj``) decoded without recursion, before XGBoost reads it.

Every declared length is checked against the bytes that remain, so a mutated
length cannot make the reader allocate; typed containers whose elements take no
bytes (true, false, null) share one budget of :data:`MAX_ZERO_WIDTH` elements
for the whole file; nesting is bounded as for JSON
(:data:`core.intake.parsing.filecheck.MAX_JSON_DEPTH`); typed numeric arrays are read
in one piece and become lists. :func:`read_ubjson` is importable from
:mod:`core.intake.parsing.validate`.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from core.errors import ModelError
from core.intake.parsing.filecheck import MAX_JSON_DEPTH, _damaged

__all__ = ["read_ubjson"]

_UBJ_NUM = {b"i": (">b", 1), b"U": (">B", 1), b"I": (">h", 2), b"l": (">i", 4), b"L": (">q", 8),
            b"d": (">f", 4), b"D": (">d", 8)}
# A typed container of true, false or null ("[$Z#L<count>") declares elements that
# take no bytes: a few such headers in a few KB could ask for billions of values.
# XGBoost writes none; a file may hold this many in all.
_ZERO_WIDTH = (b"T", b"F", b"Z")
MAX_ZERO_WIDTH = 1 << 20
_NP_DTYPE = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4", b"D": ">f8"}


def read_ubjson(data: bytes, filename: str = "model.ubj", limit: int = MAX_JSON_DEPTH) -> Any:
    """Decode XGBoost's UBJSON without recursion, every declared length bounded by
    the bytes that remain (typed numeric arrays become lists)."""
    return _Reader(data, filename, limit).read()


class _Reader:
    """One decoding: the bytes, the position in them and the open containers."""

    def __init__(self, data: bytes, filename: str, limit: int) -> None:
        self.data = data
        self.mv = memoryview(data)
        self.n = len(data)
        self.pos = 0
        self.filename = filename
        self.limit = limit
        # stack frames: [container, kind, typ, remaining or None, pending key]
        self.root: list[Any] = []
        self.stack: list[Any] = [[self.root, "[", None, 1, None]]
        self.free = MAX_ZERO_WIDTH      # elements of typed containers of T, F or Z left to the file

    def bad(self, what: str) -> ModelError:
        return _damaged(self.filename, f"its UBJSON {what} (at byte {self.pos})")

    def take(self, k: int) -> memoryview:
        if k < 0 or self.pos + k > self.n:
            raise self.bad("is cut short or declares a length beyond the file's end")
        out = self.mv[self.pos:self.pos + k]
        self.pos += k
        return out

    def marker(self) -> bytes:
        return bytes(self.take(1))

    def integer(self, m: bytes | None = None) -> int:
        m = m or self.marker()
        if m not in _UBJ_NUM or m in (b"d", b"D"):
            raise self.bad(f"has a length of type {m!r}, not an integer")
        fmt, k = _UBJ_NUM[m]
        return struct.unpack(fmt, self.take(k))[0]

    def string(self, m: bytes | None = None) -> str:
        k = self.integer(m)
        try:
            return bytes(self.take(k)).decode("utf-8")
        except UnicodeDecodeError:
            raise self.bad("holds a string that is not UTF-8") from None

    def scalar(self, m: bytes) -> Any:
        if m in _UBJ_NUM:
            fmt, k = _UBJ_NUM[m]
            return struct.unpack(fmt, self.take(k))[0]
        if m == b"S" or m == b"H":
            return self.string()
        if m == b"C":
            return bytes(self.take(1)).decode("latin-1")
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"Z":
            return None
        raise self.bad(f"has the unknown type marker {m!r}")

    def container_header(self) -> tuple[bytes | None, int | None]:
        """After '[' or '{': optional '$type' and '#count'."""
        data, n = self.data, self.n
        typ = cnt = None
        if self.pos < n and data[self.pos:self.pos + 1] == b"$":
            self.take(1)
            typ = self.marker()
            if data[self.pos:self.pos + 1] != b"#":
                raise self.bad("has a typed container without a count")
        if self.pos < n and data[self.pos:self.pos + 1] == b"#":
            self.take(1)
            cnt = self.count(typ)
        return typ, cnt

    def count(self, typ: bytes | None) -> int:
        """A container's count (after '#'), bounded by the bytes that remain, or for elements
        that take no bytes by what the file may hold of them in all."""
        cnt = self.integer()
        if typ in _ZERO_WIDTH and cnt >= 0:     # elements that take no bytes: a budget for the whole file
            self.free -= cnt
            if self.free < 0:
                raise self.bad(f"declares {cnt:,} elements that take no bytes, more than the "
                               f"{MAX_ZERO_WIDTH:,} a model file may hold in all")
        elif cnt < 0 or cnt > self.n - self.pos:      # each element takes a byte at least (typed: checked below)
            raise self.bad(f"declares {cnt:,} elements, more than the file holds")
        return cnt

    def at_close(self, top: list[Any]) -> bool:
        """Whether an uncounted container ends here (its closing bracket)."""
        close = b"]" if top[1] == "[" else b"}"
        return top[3] is None and self.pos < self.n and self.data[self.pos:self.pos + 1] == close

    def element(self, top: list[Any]) -> None:
        """The next element of container ``top`` (its key first, in an object): a value, a
        container opened, or a no-op skipped."""
        if top[1] == "{":
            top[4] = self.string(self.marker())
        m = top[2] if top[2] is not None else self.marker()
        if m == b"N" and top[2] is None:            # no-op
            if top[1] == "{":
                raise self.bad("has a no-op where a value belongs")
            return
        if m in (b"[", b"{"):
            self.open_container(m)
        else:
            self.add(self.scalar(m))

    def add(self, value: Any) -> None:
        top = self.stack[-1]
        if top[1] == "[":
            top[0].append(value)
        else:
            top[0][top[4]] = value
        if top[3] is not None:
            top[3] -= 1

    def open_container(self, m: bytes) -> None:
        typ, cnt = self.container_header()
        if m == b"[" and typ in _NP_DTYPE and cnt is not None:
            dt = np.dtype(_NP_DTYPE[typ])
            raw = self.take(cnt * dt.itemsize)
            self.add(np.frombuffer(raw, dtype=dt).tolist())
            return
        if len(self.stack) > self.limit:
            raise self.bad(f"is nested more than {self.limit} levels deep")
        new: Any = [] if m == b"[" else {}
        self.add(new)
        self.stack.append([new, "[" if m == b"[" else "{", typ, cnt, None])

    def read(self) -> Any:
        n, stack = self.n, self.stack
        while True:
            top = stack[-1]
            if top[3] == 0:                             # a counted container (or the root) is complete
                if len(stack) == 1:
                    break
                stack.pop()
                continue
            if self.at_close(top):
                self.take(1)
                stack.pop()
                continue
            self.element(top)
        if self.pos != n:
            raise _damaged(self.filename, f"its UBJSON has {n - self.pos:,} stray bytes after the model")
        return self.root[0]
