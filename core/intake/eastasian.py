"""Which East Asian code page a CSV is in, told by the characters each would read.

Shift-JIS (Windows-932), EUC-JP, GBK (GB 18030), Big5 (Windows-950) and
Windows-949 (EUC-KR) are what a spreadsheet program saves in Japan, China,
Taiwan and Korea when it does not save UTF-8. Each writes a character in two
bytes whose ranges overlap the others', so the same bytes often decode in
several of them, each time to characters of its own script: the Shift-JIS
bytes of ``名前,年齢`` are the Windows-949 bytes of ``뼹멟,봏쀮``. Whether the
words are well formed (:func:`core.intake.encoding.score`) cannot tell them
apart: both are words of one script. What tells them apart is which
characters they are.

Each code page is written for one language, and its own standard sorts that
language's characters by how common they are: JIS X 0208 puts the 2,965
common kanji in its first level and 3,390 rare ones in the second; GB 2312
3,755 common hanzi in its first level, 3,008 in its second, and GBK every
other character after them; Big5 5,401 frequently used characters before
7,652 less frequent ones; KS X 1001 the 2,350 hangul syllables in use, and
Windows-949 the 8,822 others after them. A reading of the wrong code page
lands on characters spread over all of those ranges, mostly rare ones, or on
another script (kana in a Chinese reading, hanja in a Korean one). So each
reading is given a likelihood, the product over the characters of its distinct
cells of ``share(class) / size(class)``, where a character's class is its range
in its language's standard (:data:`_CLASSES`: a rough share of text in each
class) and characters outside the code page's language count as rare. Within
those ranges the language itself adds what is known without a frequency table:
the most frequent characters of Japanese and Chinese (charset-normalizer's lists)
form a class of their own; a hangul syllable is as likely as its parts (initial,
vowel, final: Korean's own frequencies of each, :data:`_INITIALS`), so ``나이``
reads as Korean and the random syllables of another code page's bytes do not;
and a Japanese kana out of place (a lone katakana, a lone hiragana before a
kanji) counts as foreign: the most common Big5 characters' bytes are EUC-JP's kana.

The reading whose log-likelihood leads every other reading's (of a different
text) by at least :data:`DECISIVE` is taken; a smaller lead says the bytes do
not tell, and the file is refused with both readings and the encoding to name.
That happens to short files in the three EUC-shaped code pages (EUC-JP, GBK,
EUC-KR: a header of a few kanji is also valid, common hanzi or hangul); a
Shift-JIS or Big5 file, or any file with a few rows of text values, is told.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["CODECS", "LANGUAGE", "ALIASES", "Reading", "likelihood", "rank", "close", "decisive", "DECISIVE"]

#: the code page each language's files are decoded with (each a superset of the others of its language)
CODECS = ("cp932", "euc_jp", "gb18030", "cp950", "cp949")
LANGUAGE = {"cp932": "Japanese", "euc_jp": "Japanese", "gb18030": "Simplified Chinese", "cp950": "Traditional Chinese",
            "cp949": "Korean"}
#: other names of the same code pages (what a detector may propose) -> the one decoded with
ALIASES = {"shift_jis": "cp932", "shift_jis_2004": "cp932", "shift_jisx0213": "cp932", "euc_jis_2004": "euc_jp",
           "euc_jisx0213": "euc_jp", "gb2312": "gb18030", "gbk": "gb18030", "big5": "cp950", "big5hkscs": "cp950",
           "euc_kr": "cp949"}
#: a lead of e^9 (about 8,000 times as likely) is decisive; less and the file is refused with both readings
#: (on 30,000 small random tables of real words in the five code pages, no wrong reading led by more than 7.9:
#: a few kanji of EUC-JP that are also common hanzi)
DECISIVE = 9.0

# the most frequent characters of each language (charset-normalizer 3's lists)
_TOP_JA = ("日一人年大十二本中長出三時行見月分後前生五間上東四今金九入学高円子外八六下来気小七山話女北午百書先名川千水半男"
           "西電校語土木聞食車何南万毎白天母火右読友左休父雨")
_TOP_ZH = ("的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所"
           "然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实")
_TOP_TW = sum(0xA440 <= int.from_bytes(ch.encode("big5"), "big") <= 0xC67E for ch in _TOP_ZH   # also Big5's
              if ch.encode("big5", "ignore"))
# A hangul syllable is an initial consonant, a vowel and an optional final (Unicode numbers the 11,172 by
# (initial * 21 + vowel) * 28 + final), and Korean uses each part with very different frequencies: a silent
# initial (ㅇ) starts a quarter of all syllables, tense ones (ㄲ ㄸ ㅃ ㅆ ㅉ) a few in a hundred; half the syllables
# have no final, and ㄴ ㄹ ㄱ ㅇ ㅁ are most of the others; complex finals (ㄳ ㄺ ㄻ ...) are rare. Rough shares, in
# Unicode's order of the parts; a syllable's probability is their product.
_INITIALS = (.12, .01, .05, .08, .005, .03, .05, .05, .002, .09, .005, .25, .09, .003, .03, .01, .015, .015, .09)
_VOWELS = (.20, .05, .01, .001, .12, .03, .05, .005, .10, .02, .002, .01, .01, .08, .01, .001, .005, .01, .10, .02,
           .16)
_FINALS = (.50, .08, .001, .0005, .15, .0005, .001, .003, .10, .002, .001, .001, .0002, .0002, .0002, .0005, .04,
           .03, .002, .01, .02, .05, .002, .002, .0005, .002, .002, .001)

# per language: class -> (share of a text's non-ASCII characters, number of characters in the class)
_CLASSES: dict[str, dict[str, tuple[float, int]]] = {
    "Japanese": {"top": (0.12, len(_TOP_JA)), "kana": (0.36, 172), "common": (0.38, 2965 - len(_TOP_JA)),
                 "sign": (0.10, 250), "second": (0.02, 3390), "halfwidth": (0.01, 63), "foreign": (0.005, 200),
                 "rare": (0.005, 1000)},
    "Simplified Chinese": {"top": (0.35, len(_TOP_ZH)), "common": (0.52, 3755 - len(_TOP_ZH)), "sign": (0.10, 280),
                           "second": (0.015, 3008), "foreign": (0.005, 470), "rare": (0.01, 21000)},
    "Traditional Chinese": {"top": (0.25, _TOP_TW), "common": (0.61, 5401 - _TOP_TW), "sign": (0.10, 400),
                            "second": (0.03, 7652), "rare": (0.01, 600)},
    "Korean": {"hangul": (0.87, 1), "sign": (0.10, 280), "hanja": (0.01, 4888), "jamo": (0.005, 94),
               "foreign": (0.005, 700), "rare": (0.01, 8822)},
}
_NEVER = math.log(1e-9)
_STRAY = math.log(0.005 / 200)   # a kana out of place: as rare as a foreign sign in Japanese text
_ASCII = math.log(1 / 64)        # any ASCII character: the same in every reading
_CELL = re.compile(r"[,;\t|\r\n]+")


@dataclass(frozen=True)
class Reading:
    """A code page's reading of the sample: its text and its log-likelihood."""

    codec: str
    text: str
    loglik: float


def _class_ja(ch: str) -> str:
    o = ord(ch)
    if 0x3041 <= o <= 0x30FF:
        return "kana"
    if 0xFF61 <= o <= 0xFF9F:
        return "halfwidth"
    if ch in _TOP_JA:
        return "top"
    try:
        b = ch.encode("euc_jp")
    except UnicodeEncodeError:
        return "rare"                               # Windows-932's own additions (NEC, IBM)
    if len(b) != 2:
        return "rare"
    lead = b[0]
    return ("sign" if lead <= 0xA3 else "kana" if lead <= 0xA5 else "foreign" if lead <= 0xA8 else
            "rare" if lead < 0xB0 else "common" if lead <= 0xCF else "second")


def _class_zh(ch: str) -> str:
    if ch in _TOP_ZH:
        return "top"
    try:
        b = ch.encode("gb2312")
    except UnicodeEncodeError:
        return "rare"                               # GBK and GB 18030 beyond GB 2312
    if len(b) != 2:
        return "rare"
    lead = b[0]
    return ("sign" if lead <= 0xA3 else "foreign" if lead <= 0xA9 else "rare" if lead < 0xB0 else
            "common" if lead <= 0xD7 else "second")


def _class_tw(ch: str) -> str:
    try:
        b = ch.encode("big5")
    except UnicodeEncodeError:
        return "rare"
    if len(b) != 2:
        return "rare"
    code = b[0] << 8 | b[1]
    if 0xA440 <= code <= 0xC67E:
        return "top" if ch in _TOP_ZH else "common"
    return "sign" if 0xA140 <= code <= 0xA3BF else "second" if 0xC940 <= code <= 0xF9D5 else "rare"


def _class_ko(ch: str) -> str:
    if 0xAC00 <= ord(ch) <= 0xD7A3:
        return "hangul"                             # scored by its parts: _hangul
    try:
        b = ch.encode("euc_kr")
    except UnicodeEncodeError:
        return "rare"
    if len(b) != 2:
        return "rare"
    lead = b[0]
    return ("sign" if lead <= 0xA3 else "jamo" if lead == 0xA4 else "foreign" if lead <= 0xAF else
            "rare" if lead < 0xCA else "hanja")


def _hangul(ch: str) -> float:
    """The probability of a hangul syllable in Korean: the product of its parts' shares."""
    k = ord(ch) - 0xAC00
    total = sum(_INITIALS) * sum(_VOWELS) * sum(_FINALS)
    return _INITIALS[k // 588] * _VOWELS[k % 588 // 28] * _FINALS[k % 28] / total


_CLASS_OF = {"Japanese": _class_ja, "Simplified Chinese": _class_zh, "Traditional Chinese": _class_tw,
             "Korean": _class_ko}


@lru_cache(maxsize=65536)
def _char_loglik(language: str, ch: str) -> float:
    if unicodedata.category(ch) in ("Co", "Cn", "Cc"):      # private use, unassigned, control: no text holds them
        return _NEVER
    kind = _CLASS_OF[language](ch)
    share, size = _CLASSES[language][kind]
    return math.log(share * _hangul(ch) if kind == "hangul" else share / size)


def likelihood(text: str, codec: str) -> float:
    """The log-likelihood of ``text`` as text of ``codec``'s language (module doc), over
    its distinct cells: a value repeated down a column is one piece of evidence, not
    one per row (else a slight lead on one short word would grow without bound). Every
    character counts, ASCII too: a reading that takes an ASCII byte into a character
    of its own (a Big5 or Shift-JIS second byte) is charged for the byte it explains.
    In Japanese a kana out of place (:func:`_stray_kana`) counts as a foreign sign."""
    language = LANGUAGE[codec]
    total = 0.0
    for cell in set(_CELL.split(text)):
        for i, ch in enumerate(cell):
            if ch.isascii():
                total += _ASCII
            elif language == "Japanese" and _stray_kana(cell, i):
                total += _STRAY
            else:
                total += _char_loglik(language, ch)
    return total


def _kind(ch: str) -> str:
    o = ord(ch)
    return ("hiragana" if 0x3041 <= o <= 0x309F else "katakana" if 0x30A0 <= o <= 0x30FF or 0xFF66 <= o <= 0xFF9F
            else "kanji" if 0x4E00 <= o <= 0x9FFF or ch in "々〆ヶヵ" else "other")


def _stray_kana(cell: str, i: int) -> bool:
    """A kana where Japanese puts none: a katakana alone among other characters (katakana
    spell words, two or more in a row: ``カテゴリ``, ``ガス代``), or a hiragana alone
    before a kanji at the start of a word but for the honorific ``お``/``ご`` (hiragana
    follow a kanji, ``見る``, or run, ``はい``). Big5 and GBK bytes read as EUC-JP give
    such strays: their most common characters' bytes are EUC-JP's kana."""
    kind = _kind(cell[i])
    before = _kind(cell[i - 1]) if i > 0 else "other"
    after = _kind(cell[i + 1]) if i + 1 < len(cell) else "other"
    if kind == "katakana":
        return before != "katakana" and after != "katakana" and len(cell.strip()) > 1
    if kind == "hiragana":
        return before not in ("hiragana", "kanji") and after == "kanji" and cell[i] not in "おご"
    return False


def rank(sample: bytes, codecs: list[str]) -> list[Reading]:
    """The readings of ``sample`` in those of ``codecs`` that decode it, most likely first."""
    out = []
    for codec in codecs:
        try:
            text = sample.decode(codec)
        except UnicodeDecodeError:
            continue
        out.append(Reading(codec, text, likelihood(text, codec)))
    return sorted(out, key=lambda r: -r.loglik)


def close(readings: list[Reading]) -> list[Reading]:
    """The readings (ranked by :func:`rank`) that come within :data:`DECISIVE` of the
    first, each of a different text: one when the first is decisive."""
    out: list[Reading] = []
    for r in readings:
        if (not out or readings[0].loglik - r.loglik < DECISIVE) and all(r.text != c.text for c in out):
            out.append(r)
    return out


def decisive(readings: list[Reading]) -> bool:
    """Whether the first of ``readings`` (ranked) leads every other text decisively."""
    return bool(readings) and len(close(readings)) == 1
