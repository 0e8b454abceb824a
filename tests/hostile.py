"""Names an outside file may hold that Markdown, HTML, LaTeX or a chart would render,
and the oracle that says whether a text Streamlit shows renders any of them.

``table()`` and ``model_file()`` make an upload whose column names, category values,
class labels and file names are all hostile (a remote image, a link, bold, an emoji
and colour directive, a material icon, LaTeX, HTML, a bare address); the page tests
and the browser test load it and check that every one of them shows as written.

``live(markdown)`` parses a text as Streamlit's Markdown does (CommonMark with GFM
tables, strikethrough and autolinks, ``$`` maths, and Streamlit's own directives,
emoji shortcodes and icons) and returns what it shows: the text a reader sees and,
for each character, whether it is inside something rendered (a link, an image,
emphasis, maths, HTML, a directive or shortcode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

ATTACKER = "attacker.invalid"

# Each name holds a marker ("zq…") so that a test finds every text it reaches.
AGE = f"![pix](http://{ATTACKER}/pixel.png) **age** zqa"
INCOME = f"[click](http://{ATTACKER}/x) _income_ zqb"
SCORE = f":red[score] :material/home: :smile: $x^2$ <img src=http://{ATTACKER}/h.png> zqc"
SEX = "<b>sex</b> &lt;i&gt; zqd"                   # no "=" in a one-hot column's name or values
JOB = f"job http://{ATTACKER}/bare ~~zqe~~ :blue-background[j]"
TARGET = "**outcome** &amp; zqf"
SEXES = ["<b>f</b> zqg", "**m** zqh"]
JOBS = [f"[cook](http://{ATTACKER}/c) zqi", ":red[nurse] zqj", "$y$ clerk zqk", "_pilot_ :streamlit: zql"]
CLASSES = [f"![no](http://{ATTACKER}/no.png) zqm", "**yes** :+1: zqn"]
DATA_FILE = f"**data** [d](www.{ATTACKER}) :red[f] $x$ <img src=x> zqo.csv"
MODEL_FILE = "_model_ :material/home: zqp.skops"
CLASS_NAME = f"[approved](http://{ATTACKER}/a) zqr"     # the analyst's name for a class (kept in links)
AUDIT_FILE = "<i>audit</i> :tada: zqs.json"

COLUMNS = [AGE, INCOME, SCORE, SEX, JOB]
NAMES = [*COLUMNS, TARGET, *SEXES, *JOBS, *CLASSES, DATA_FILE, MODEL_FILE, CLASS_NAME, AUDIT_FILE]
MARKER = re.compile(r"zq[a-z]")
BY_MARKER = {MARKER.search(n).group(): n for n in NAMES}


def table(n: int = 240, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({AGE: rng.integers(18, 80, n).astype(float), INCOME: rng.normal(50, 20, n).round(1),
                       SCORE: rng.normal(0, 1, n).round(2), SEX: rng.choice(SEXES, n), JOB: rng.choice(JOBS, n)})
    yes = (df[AGE] > 45) ^ df[JOB].isin(JOBS[:2]) | (df[INCOME] > 70)
    df[TARGET] = np.where(yes, CLASSES[1], CLASSES[0])
    return df


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def model_file(df: pd.DataFrame) -> bytes:
    """A scikit-learn Pipeline (one-hot categories, a random forest) saved with skops: the
    format that keeps any column name and any class label."""
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), [SEX, JOB])], remainder="passthrough")
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(15, max_depth=4, random_state=0))])
    pipe.fit(df.drop(columns=TARGET), df[TARGET])
    return sio.dumps(pipe)


# ---------------------------------------------------------------- what Streamlit's Markdown shows


@dataclass
class Shown:
    text: str            # what a reader sees
    live: list[bool]     # per character of text: inside something rendered (not shown as written)


def _parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
    md.use(dollarmath_plugin, allow_space=True, allow_digits=True, double_inline=True)
    md.disable("text_join")          # keep escaped characters (text_special) apart from the text around them
    return md


_MD = None
# Emphasis, headings, lists and quotes a name held would lose their marks (the name
# no longer reads as written); a link keeps its text, so it is flagged, as are blocks
# shown as something else than text (a rule, code, HTML, maths).
_LIVE_LEAVES = {"hr", "fence", "code_block", "html_block", "math_block", "math_block_label"}
# Streamlit's own inline syntax, found in what the parser leaves as text: a directive
# (:red[...], :small, :blue-background[...]) starts at an unescaped ":" before a letter;
# emoji shortcodes, :material_x: icons and the :streamlit: logo are read in each text node
# (where escaped characters are merged in), so escaping does not stop them.
_SHORTCODE = re.compile(r":(?:[\w+-]*[A-Za-z][\w+-]*|\+1|-1|100|1234):")   # the names it knows


def live(markdown: str, *, label: bool = False) -> Shown:
    """What Streamlit shows for ``markdown`` (``label``: a widget label, where a line's
    leading list or heading mark is shown as written)."""
    global _MD
    if _MD is None:
        _MD = _parser()
    source = markdown.replace(":material/", ":material_")   # as Streamlit does before parsing
    if label:
        source = re.sub(r"(?m)^(\s*)((?:[+\-*]|#+)(?=\s|$)|>)", r"\1\\\2", source)
        source = re.sub(r"(?m)^(\s*)(\d+)([.)])(?=\s|$)", r"\1\2\\\3", source)
    text: list[str] = []
    flags: list[bool] = []
    runs: list[tuple[int, int]] = []         # text nodes as Streamlit holds them (escapes merged in)
    unescaped: list[tuple[int, int]] = []    # plain text, where a directive can start
    run_start: int | None = None

    def add(s: str, on: bool, kind: str = "") -> None:
        nonlocal run_start
        if kind in ("text", "escape"):
            run_start = len(text) if run_start is None else run_start
            if kind == "text":
                unescaped.append((len(text), len(text) + len(s)))
        elif run_start is not None:
            runs.append((run_start, len(text)))
            run_start = None
        text.extend(s)
        flags.extend([on] * len(s))

    for block in _MD.parse(source):
        if block.type in _LIVE_LEAVES:
            add(block.content, True)
            continue
        if block.children is None:
            continue
        depth = 0
        for tok in block.children:
            if tok.type == "link_open":
                depth += 1
            elif tok.type == "link_close":
                depth -= 1
            elif tok.type.endswith(("_open", "_close")):     # emphasis: its marks vanish from the text
                continue
            elif tok.type in ("image", "html_inline", "math_inline", "math_inline_double"):
                add(tok.content or "?", True)
            elif tok.type in ("softbreak", "hardbreak"):
                add("\n", depth > 0)
            elif tok.type == "code_inline":
                add(tok.content, depth > 0)
            else:                                   # text, or text_special: an escaped character
                add(tok.content, depth > 0, "text" if tok.type == "text" else "escape")
        add("\n", False)
    for a, b in unescaped:                          # directives: an unescaped ":" before a letter
        for m in re.finditer(r":[A-Za-z][\w-]*", "".join(text[a:b])):
            flags[a + m.start():a + m.end()] = [True] * (m.end() - m.start())
    for a, b in runs:                               # shortcodes and icons, in each text node
        for m in _SHORTCODE.finditer("".join(text[a:b])):
            flags[a + m.start():a + m.end()] = [True] * (m.end() - m.start())
    return Shown("".join(text), flags)


def leaks(markdown: str, *, label: bool = False) -> list[str]:
    """The hostile names found in ``markdown`` that Streamlit would not show as written:
    a marker whose whole name is not in the text a reader sees, or is but partly rendered."""
    shown = live(markdown, label=label)
    out = []
    for marker in set(MARKER.findall(shown.text)) | set(MARKER.findall(markdown)):
        name = BY_MARKER[marker]
        spots = [m.start() for m in re.finditer(re.escape(name), shown.text)]
        if not spots:
            out.append(f"{name!r} is not shown as written in {shown.text!r}")
        for s in spots:
            if any(shown.live[s:s + len(name)]):
                out.append(f"{name!r} is rendered in {markdown!r}")
    return out


__all__ = ["NAMES", "COLUMNS", "leaks", "live", "table", "model_file", "csv_bytes"]
