"""CityHash64, version 1.0, as CatBoost hashes category values.

CatBoost stores a one-hot split on a categorical feature as the 32-bit hash of
the category's text: ``CalcCatFeatureHash(s) = CityHash64(s) & 0xffffffff``
(``catboost/libs/cat_feature/cat_feature.cpp``), with the CityHash 1.0 of
``util/digest/city.h``, whose results differ from later CityHash releases
(``HashLen0to16`` and the lengths up to 64 bytes). A model exported without its
training pool names only these hashes, so the raw category values of the data
are hashed here to be matched; checked against CatBoost's own hashes in the
tests.
"""

from __future__ import annotations

_M = (1 << 64) - 1
K0 = 0xC3A5C85C97CB3127
K1 = 0xB492B66FBE98F273
K2 = 0x9AE16A3B2F90404F
K3 = 0xC949D7C7509E6557
_KMUL = 0x9DDFEA08EB382D69


def _u64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 8], "little")


def _u32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 4], "little")


def _rot(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & _M


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int) -> int:
    a = ((u ^ v) * _KMUL) & _M
    a ^= a >> 47
    b = ((v ^ a) * _KMUL) & _M
    b ^= b >> 47
    return (b * _KMUL) & _M


def _len0to16(s: bytes) -> int:
    n = len(s)
    if n > 8:
        a, b = _u64(s, 0), _u64(s, n - 8)
        return _len16(a, _rot((b + n) & _M, n)) ^ b
    if n >= 4:
        a = _u32(s, 0)
        return _len16((n + (a << 3)) & _M, _u32(s, n - 4))
    if n > 0:
        a, b, c = s[0], s[n >> 1], s[n - 1]
        y = a + (b << 8)
        z = n + (c << 2)
        return (_shift_mix(((y * K2) ^ (z * K3)) & _M) * K2) & _M
    return K2


def _len17to32(s: bytes) -> int:
    n = len(s)
    a = (_u64(s, 0) * K1) & _M
    b = _u64(s, 8)
    c = (_u64(s, n - 8) * K2) & _M
    d = (_u64(s, n - 16) * K0) & _M
    return _len16((_rot((a - b) & _M, 43) + _rot(c, 30) + d) & _M,
                  (a + _rot(b ^ K3, 20) - c + n) & _M)


def _len33to64(s: bytes) -> int:
    n = len(s)
    z = _u64(s, 24)
    a = (_u64(s, 0) + (n + _u64(s, n - 16)) * K0) & _M
    b = _rot((a + z) & _M, 52)
    c = _rot(a, 37)
    a = (a + _u64(s, 8)) & _M
    c = (c + _rot(a, 7)) & _M
    a = (a + _u64(s, 16)) & _M
    vf = (a + z) & _M
    vs = (b + _rot(a, 31) + c) & _M
    a = (_u64(s, 16) + _u64(s, n - 32)) & _M
    z = _u64(s, n - 8)
    b = _rot((a + z) & _M, 52)
    c = _rot(a, 37)
    a = (a + _u64(s, n - 24)) & _M
    c = (c + _rot(a, 7)) & _M
    a = (a + _u64(s, n - 16)) & _M
    wf = (a + z) & _M
    ws = (b + _rot(a, 31) + c) & _M
    r = _shift_mix(((vf + ws) * K2 + (wf + vs) * K0) & _M)
    return (_shift_mix((r * K0 + vs) & _M) * K2) & _M


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _u64(s, i), _u64(s, i + 8), _u64(s, i + 16), _u64(s, i + 24)
    a = (a + w) & _M
    b = _rot((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rot(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def cityhash64(s: bytes) -> int:
    """CityHash64 1.0 of ``s``."""
    n = len(s)
    if n <= 16:
        return _len0to16(s)
    if n <= 32:
        return _len17to32(s)
    if n <= 64:
        return _len33to64(s)
    x = _u64(s, 0)
    y = _u64(s, n - 16) ^ K1
    z = _u64(s, n - 56) ^ K0
    v = _weak32(s, n - 64, n, y)
    w = _weak32(s, n - 32, (n * K1) & _M, K0)
    z = (z + _shift_mix(v[1]) * K1) & _M
    x = (_rot((z + x) & _M, 39) * K1) & _M
    y = (_rot(y, 33) * K1) & _M
    left = (n - 1) & ~63
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _u64(s, i + 16)) & _M, 37) * K1) & _M
        y = (_rot((y + v[1] + _u64(s, i + 48)) & _M, 42) * K1) & _M
        x ^= w[1]
        y ^= v[0]
        z = _rot(z ^ w[0], 33)
        v = _weak32(s, i, (v[1] * K1) & _M, (x + w[0]) & _M)
        w = _weak32(s, i + 32, (z + w[1]) & _M, y)
        z, x = x, z
        i += 64
        left -= 64
        if left == 0:
            break
    return _len16((_len16(v[0], w[0]) + _shift_mix(y) * K1 + z) & _M, (_len16(v[1], w[1]) + x) & _M)


def cat_feature_hash(value: object) -> int:
    """CatBoost's hash of a category value: its text (as CatBoost reads it) hashed, low 32 bits."""
    return cityhash64(category_text(value).encode("utf-8")) & 0xFFFFFFFF


def category_text(value: object) -> str:
    """The text CatBoost hashes for a value: strings as they are, whole numbers without ``.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
