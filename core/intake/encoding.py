"""The text encoding of an uploaded CSV, told from its bytes.

In order, each step deciding only when its evidence is unambiguous:

1. a byte-order mark: UTF-8, UTF-16 or UTF-32 (little or big endian), the
   file then decoded strictly as that;
2. NUL bytes without a mark: UTF-16 or UTF-32 without a BOM (ASCII text in them
   is half or three quarters zero bytes, at fixed positions), whichever of the
   four has its zeros where they fall and decodes the start of the file to text
   without NULs; else the file holds binary data, not text, and is refused;
3. valid UTF-8 (text in a legacy code page with any letter beyond ASCII is
   practically never valid UTF-8);
4. a legacy code page. A detector (charset-normalizer) proposes candidates, after
   the three a spreadsheet program most often writes in Western Europe
   (Windows-1252, Mac OS Roman, DOS 850) and before the five it writes in East
   Asia (Shift-JIS, EUC-JP, GBK, Big5, Windows-949). Each decodes the lines that
   hold non-ASCII bytes, and the
   words they give are scored: a letter counts when its word is of one script
   and one case pattern (``Zürich``, not ``ZŸrich`` or ``KÜln``) and not a rare
   letter such as ``ƒ``; so does a common sign (``°``, ``€``, ``«``, ``、``)
   unless it sits between two letters (``bient“t``); box drawing, mathematical
   signs and control characters do not. The
   highest score wins (ties go to the earlier candidate); below
   :data:`MIN_SCORE` no candidate reads as text and the file is refused, naming
   what was tried and the fix (save as UTF-8);
5. when the winner is an East Asian code page, the words cannot choose it: the
   bytes of one such code page are often words of another's script too
   (Shift-JIS ``名前`` is Windows-949 ``뼹멟``). The East Asian readings are then
   ranked by how common their characters are in their own language
   (:mod:`core.intake.eastasian`); a decisive lead is taken, anything less (a
   few kanji that are also common hanzi) refused with every close reading and
   the ``encoding`` to name. An East Asian reading decisive in its language
   also wins a tie with a detector's proposal of another script (Arabic, Thai,
   Cyrillic letters, which most bytes read as).

Short samples are what defeats detectors (charset-normalizer alone reads a
two-row Mac OS Roman file as Windows-1250, a two-word Shift-JIS header as
Windows-949); the score on words and the ranking by characters are what settle
those, and a note says which code page was used so a wrong guess is visible.
The caller who knows the encoding names it (``encoding=``): the file is then
decoded strictly as that, nothing guessed.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from core.errors import DataError
from core.intake import eastasian

__all__ = ["Decoded", "decode_text", "MIN_SCORE"]

MIN_SCORE = 0.75
_FIRST = ("cp1252", "mac_roman", "cp850")
_LAST = (*eastasian.CODECS, "latin_1")   # latin_1 decodes anything: the last resort of the candidates
_MAX_CANDIDATES = 14
#: proposals no spreadsheet writes, whose readings of short East Asian files are words too (Johab maps any two bytes
#: to a hangul syllable): never taken
_OBSOLETE = frozenset({"johab"})
_SAMPLE_BYTES = 64 * 1024               # of the lines that hold non-ASCII bytes
_NAMES = {
    "utf_8": "UTF-8", "utf_8_sig": "UTF-8 with a byte-order mark", "utf_16_le": "UTF-16 (little endian)",
    "utf_16_be": "UTF-16 (big endian)", "utf_32_le": "UTF-32 (little endian)", "utf_32_be": "UTF-32 (big endian)",
    "cp1252": "Windows-1252 (Western European)", "mac_roman": "Mac OS Roman", "cp850": "DOS code page 850",
    "latin_1": "ISO-8859-1 (Latin-1)", "cp1250": "Windows-1250 (Central European)",
    "cp1251": "Windows-1251 (Cyrillic)", "iso8859_1": "ISO-8859-1 (Latin-1)", "cp1253": "Windows-1253 (Greek)", "cp437": "DOS code page 437",
    "cp932": "Shift-JIS (Windows-932, Japanese)", "shift_jis": "Shift-JIS (Japanese)", "euc_jp": "EUC-JP (Japanese)",
    "gb18030": "GBK / GB 18030 (Simplified Chinese)", "gbk": "GBK (Simplified Chinese)",
    "gb2312": "GB 2312 (Simplified Chinese)", "cp950": "Big5 (Windows-950, Traditional Chinese)",
    "big5": "Big5 (Traditional Chinese)", "cp949": "Windows-949 / EUC-KR (Korean)", "euc_kr": "EUC-KR (Korean)",
}
_BOMS = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf_32_le"), (codecs.BOM_UTF32_BE, "utf_32_be"), (codecs.BOM_UTF8, "utf_8_sig"),
    (codecs.BOM_UTF16_LE, "utf_16_le"), (codecs.BOM_UTF16_BE, "utf_16_be"),
)
_EAST_ASIAN_SIGNS = frozenset("、。・「」『』【】〈〉《》〔〕（）！？：；，．／％＆＊＋－＝＠￥〜～　※")
_COMMON_SIGNS = frozenset("°€£¥¢§©®«»±·²³¼½¾¿¡–—‘’“”…•×÷№\u00a0") | _EAST_ASIAN_SIGNS
_INSIDE_WORDS = frozenset("’·")              # l’homme, l·l: signs that may sit between letters
_RARE_LETTERS = frozenset("ƒªºſ")
_MOSTLY_ACCENTED = 0.6
_ACCENTED_WORDS_MIN = 2                  # accented letters before "mostly accented" halves a score
_WORD = re.compile(r"[^\W\d_]+")
_SIGN = re.compile(r"[^\w\x00-\x7f]")             # a non-ASCII character that is no letter or digit
_HIGH_LINE = re.compile(rb"[^\n]*[\x80-\xff][^\n]*")


@dataclass(frozen=True)
class Decoded:
    """A file's text, the codec that read it, and a note when the codec was a guess."""

    text: str
    encoding: str
    note: str | None = None


def describe(encoding: str) -> str:
    """A reader's name for a Python codec name."""
    name = codecs.lookup(encoding).name.replace("-", "_")
    return _NAMES.get(name, name)


def decode_text(data: bytes, filename: str, encoding: str | None = None) -> Decoded:
    """The text of ``data``; see the module docstring. Raises :class:`DataError` for
    binary data, a byte-order mark the rest of the file does not follow, or text in
    no encoding that reads as text (or readable in two East Asian code pages alike).
    ``encoding``: the codec the caller knows the file is in (a Python codec name such
    as ``"shift_jis"``, ``"gbk"``, ``"cp1252"``), decoded strictly, nothing guessed."""
    if encoding is not None:
        return _named(data, filename, encoding)
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return Decoded(_strict(data[len(bom):], enc, filename, "starts with a " + describe(enc) + " byte-order mark"),
                           enc)
    head = data[:65536]
    if b"\x00" in head:
        for enc, width, where in (("utf_32_le", 4, (2, 3, 1)), ("utf_32_be", 4, (1, 0, 2)), ("utf_16_le", 2, (1,)),
                                  ("utf_16_be", 2, (0,))):
            sample = head[: len(head) - len(head) % width]
            if not _zeros_fit(sample, width, where):
                continue
            try:
                text = sample.decode(enc)
            except UnicodeDecodeError:
                continue
            if "\x00" not in text and _printable(text):
                return Decoded(_strict(data, enc, filename, "looks like " + describe(enc) + " without a byte-order "
                                       "mark"), enc, f"Read as {describe(enc)} (the file has no byte-order mark).")
        at = data.index(b"\x00")
        raise DataError(f"{filename!r} holds binary data (a zero byte at byte {at:,}), not text in any encoding: it "
                        "is not a CSV file. Upload a CSV (comma, semicolon or tab separated) or a Parquet file.")
    try:
        return Decoded(data.decode("utf-8"), "utf_8")
    except UnicodeDecodeError:
        pass
    return _legacy(data, filename)


def _named(data: bytes, filename: str, encoding: object) -> Decoded:
    """``data`` decoded strictly as the caller's ``encoding``."""
    try:
        info = codecs.lookup(encoding) if isinstance(encoding, str) else None
    except LookupError:
        info = None
    # bytes.decode refuses the codecs that are not of bytes to text ('hex', 'zlib', 'rot13') by this mark
    enc = info.name.replace("-", "_") if info is not None and getattr(info, "_is_text_encoding", True) else None
    if enc is None:
        raise DataError(f"encoding={encoding!r} is not a text encoding Python knows. Name one such as 'utf-8', "
                        "'cp1252', 'shift_jis', 'euc_jp', 'gbk', 'big5' or 'cp949', or leave it out to have it "
                        "detected.")
    if enc == "utf_8" and data.startswith(codecs.BOM_UTF8):
        enc = "utf_8_sig"
    return Decoded(_strict(data, enc, filename, f"was to be read as {describe(enc)} (encoding={encoding!r})"), enc)


def _zeros_fit(sample: bytes, width: int, where: tuple[int, ...]) -> bool:
    """Whether the zero bytes of ``sample`` are those of text in a ``width``-byte encoding:
    nearly all at the positions ``where`` (modulo ``width``) where a character's high
    bytes sit, and the first of those (zero for every ASCII, Latin and most other
    characters) zero in at least a fifth of the characters."""
    zeros = [i % width for i, b in enumerate(sample) if b == 0]
    chars = len(sample) // width
    main = sum(z == where[0] for z in zeros)
    return main >= max(4, 0.2 * chars) and sum(z in where for z in zeros) >= 0.9 * len(zeros)


def _strict(data: bytes, enc: str, filename: str, why: str) -> str:
    try:
        return data.decode(enc)
    except UnicodeDecodeError as exc:
        raise DataError(f"{filename!r} {why}, but byte {exc.start:,} is not valid {describe(enc)}. Save the file "
                        "again as UTF-8 (in Excel: Save As > CSV UTF-8) and upload it.") from None


def _printable(text: str) -> bool:
    if not text:
        return False
    shown = sum(ch.isprintable() or ch in "\t\r\n" for ch in text)
    return shown >= 0.95 * len(text)


def _candidates(sample: bytes) -> list[str]:
    names = list(_FIRST)
    try:
        from charset_normalizer import from_bytes

        names += [m.encoding for m in from_bytes(sample, steps=5, chunk_size=min(512, max(len(sample), 1)))]
    except Exception:  # noqa: BLE001 - the detector only proposes; the scores below decide
        pass
    names += list(_LAST)
    out: list[str] = []
    for n in names:
        try:
            name = codecs.lookup(n).name.replace("-", "_")
        except LookupError:
            continue
        name = eastasian.ALIASES.get(name, name)     # one codec per East Asian language family
        if name not in out and name not in _OBSOLETE and not name.startswith(("utf_", "utf-")):
            out.append(name)
    return out[:_MAX_CANDIDATES]


def _sample(data: bytes) -> bytes:
    """The lines that hold non-ASCII bytes, up to :data:`_SAMPLE_BYTES`."""
    lines, size = [], 0
    for m in _HIGH_LINE.finditer(data):
        lines.append(m.group())
        size += len(m.group()) + 1
        if size > _SAMPLE_BYTES:
            break
    return b"\n".join(lines)


def _legacy(data: bytes, filename: str) -> Decoded:
    sample = _sample(data)
    scored = []
    for i, enc in enumerate(_candidates(sample)):
        try:
            text = sample.decode(enc)
        except UnicodeDecodeError:
            continue
        scored.append((score(text), -i, enc, text))
    scored.sort(reverse=True)
    east = [e for _, _, e, _ in scored if e in eastasian.LANGUAGE]
    for best, _, enc, _ in scored:
        if best < MIN_SCORE:
            break
        if enc in eastasian.LANGUAGE or (enc not in _FIRST and _east_asian_ties(scored, best, sample)):
            return _east_asian(data, sample, filename, east)
        try:
            text = data.decode(enc)
        except UnicodeDecodeError:          # a byte outside the sample that this code page lacks
            continue
        return Decoded(text, enc, _guessed(enc))
    tried = ", ".join(f"{describe(e)} gives {_example(t)!r}" for _, _, e, t in scored[:3])
    raise DataError(f"{filename!r} is not UTF-8, and no code page reads it as text ({tried}). Save the file as "
                    "UTF-8 (in Excel: Save As > CSV UTF-8) and upload it again.")


def _east_asian_ties(scored: list[tuple[float, int, str, str]], best: float, sample: bytes) -> bool:
    """Whether an East Asian reading that scores as well as ``best`` (a detector's
    proposal of another script: Arabic, Thai or Cyrillic letters read as words too)
    is decisively the one of its language (step 5): the bytes are then that text, not
    letters of a script that most bytes read as."""
    east = [e for _, _, e, _ in scored if e in eastasian.LANGUAGE]
    tied = {e for s, _, e, _ in scored if s >= best and e in eastasian.LANGUAGE}
    ranked = eastasian.rank(sample, east) if tied else []
    return eastasian.decisive(ranked) and ranked[0].codec in tied


def _guessed(enc: str) -> str:
    return (f"Read as {describe(enc)}: the file is not UTF-8. If its letters look wrong, save it as UTF-8 and "
            "upload it again.")


def _east_asian(data: bytes, sample: bytes, filename: str, codecs_: list[str]) -> Decoded:
    """Step 5 of the module docstring: the East Asian reading whose characters are
    decisively the most common in its language, else a refusal naming every reading
    that comes close (each a different text)."""
    readings = eastasian.rank(sample, codecs_)
    while readings:
        close = eastasian.close(readings)
        if len(close) > 1:
            said = " or ".join(f"as {describe(r.codec)} {_example(r.text)!r}" for r in close)
            named = " or ".join(f"encoding={r.codec!r}" for r in close)
            raise DataError(f"{filename!r} is not UTF-8, and its bytes read as text in {len(close)} East Asian code "
                            f"pages alike: {said}; too few characters tell which. Save the file as UTF-8 (in Excel: "
                            f"Save As > CSV UTF-8) and upload it again, or name its encoding: load_table(..., {named}).")
        try:
            return Decoded(data.decode(readings[0].codec), readings[0].codec, _guessed(readings[0].codec))
        except UnicodeDecodeError:           # a byte outside the sample that this code page lacks
            readings = readings[1:]
    raise DataError(f"{filename!r} is not UTF-8, and no code page reads the whole file as text. Save the file as "
                    "UTF-8 (in Excel: Save As > CSV UTF-8) and upload it again.")


def _example(text: str) -> str:
    m = re.search(r"\S*[^\x00-\x7f]\S*", text)
    return (m.group() if m else text)[:30]


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    first = name.split(" ", 1)[0]
    if first in ("CJK", "HIRAGANA", "KATAKANA", "HALFWIDTH", "FULLWIDTH", "IDEOGRAPHIC"):
        return "CJK"
    return first


def _word_ok(word: str) -> bool:
    if any(ch in _RARE_LETTERS for ch in word):
        return False
    if len({_script(ch) for ch in word}) != 1:
        return False
    if not any(ch.isupper() or ch.islower() for ch in word):
        return all(unicodedata.category(ch) == "Lo" for ch in word)   # scripts without case
    return _cased_word_ok(word)


def _cased_word_ok(word: str) -> bool:
    """A word of a script with case: letters only, all lower, all upper or capitalised."""
    if any(unicodedata.category(ch) not in ("Ll", "Lu") for ch in word):
        return False
    return word == word.lower() or word == word.upper() or (word[0].isupper() and word[1:] == word[1:].lower())


def score(text: str) -> float:
    """The share of ``text``'s non-ASCII characters that read as text (letters of
    well-formed words, common signs: :func:`_sign_ok`), in [0, 1]; 1 when it has
    none. Halved when the words read in Latin letters are mostly accented
    (``èìÿ,âîçðàñò``: Cyrillic bytes read in a Western code page; ``ÓÅ``: a Chinese
    character's two bytes): no language written in Latin letters is."""
    good = total = 0
    latin = accented = 0
    words = Counter(w for w in _WORD.findall(text) if not w.isascii())
    for word, k in words.items():
        n = k * sum(ord(ch) > 127 for ch in word)
        total += n
        ok = _word_ok(word)
        good += n if ok else 0
        if ok and _script(word[0]) == "LATIN":
            latin += k * len(word)
            accented += n
    for m in _SIGN.finditer(text):
        ch, i = m.group(), m.start()
        total += 1
        good += _sign_ok(text, i, ch)
    share = 1.0 if total == 0 else good / total
    return share / 2 if accented > _MOSTLY_ACCENTED * latin and accented >= _ACCENTED_WORDS_MIN else share


def _sign_ok(text: str, i: int, ch: str) -> bool:
    """Whether the sign ``ch`` at ``i`` reads as text: a common one, not between two
    letters (unless one that sits there, ``l’été``), and a Western one not next to
    another non-ASCII character (``±«``, ``¥Ã``: the two bytes of one East Asian
    character read in a Western code page; a no-break space is a space)."""
    if ch not in _COMMON_SIGNS:
        return False
    before, after = text[i - 1] if i > 0 else " ", text[i + 1] if i + 1 < len(text) else " "
    inside = before.isalpha() and after.isalpha()
    if inside:
        return ch in _INSIDE_WORDS
    if ch in _EAST_ASIAN_SIGNS:
        return True
    return all(c.isascii() or c == "\u00a0" for c in (before, after))
