"""dashboard.ui.plain: user text in a Markdown element shows as written; the same
names in Plotly text and Graphviz labels are drawn as written (#37)."""

from __future__ import annotations

import hostile as h
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from dashboard.ui import plain, plain_bold


@pytest.mark.parametrize("text", ["The model expects columns ['b'] (in this order).", "p0 <= p1, 0 < x",
                                  "held-out accuracy 0.91 on capital_gain", "income: 32.7 → 47.25",
                                  "departure 10:30:00", "R² 0.93 (5 of 7)"])
def test_ordinary_messages_are_unchanged(text):
    assert plain(text) == text


@pytest.mark.parametrize("text, escaped", [
    ("see [click](https://a.invalid)", "see [click]\\(`https://a.invalid`)"),
    ("![x](http://a.invalid/p.png)", "![x]\\(`http://a.invalid/p.png`)"),
    ("**bold** and *it*", "\\*\\*bold\\*\\* and \\*it\\*"),
    ("_em_ but snake_case", "\\_em\\_ but snake_case"),
    (":red[alarm] $x^2$ ~~gone~~ `code`", "\\:red\\[alarm] \\$x^2\\$ \\~\\~gone\\~\\~ \\`code\\`"),
    ("<img src=x> </b>", "\\<img src=x> \\</b>"),
    ("# title\n> quote\n- item\n1. one\n[r]: x", "\\# title  \n\\> quote  \n\\- item  \n1\\. one  \n\\[r]: x"),
    ("mail me@a.invalid or www.a.invalid.", "mail `me@a.invalid` or `www.a.invalid`."),
    # Streamlit's own syntax: directives, icons, emoji and the logo; entities
    ("ratio:small :blue-background[x]", "ratio\\:small \\:blue-background\\[x]"),
    (":material/home: and :material_home:", "\\:material\\/home: and `:material_home:`"),
    ("yes :smile: :+1::tada: :streamlit:", "yes `:smile:` `:+1::tada:` `:streamlit:`"),
    ("a &lt;b&gt; &#60; &amp; c & d", "a \\&lt;b\\&gt; \\&#60; \\&amp; c & d"),
    ("http://x.invalid/:material/home:", "`http://x.invalid/`\\:material\\/`home`:"),
])
def test_markdown_constructs_are_escaped(text, escaped):
    assert plain(text) == escaped


@pytest.mark.parametrize("name", h.NAMES)
def test_every_hostile_name_reads_as_written(name):
    """As Streamlit's Markdown reads them (see hostile.live), raw they render; escaped, they read as written."""
    assert h.leaks(name) and not h.leaks(plain(name)) and not h.leaks(plain(name), label=True)


_PIECES = hst.sampled_from(list("ab1 *_`~$|[]()!<>&#:;/\\.-+=@%{}\"'^") + [
    "http://x.invalid/p", "www.y.invalid", ":smile:", ":material/home:", ":red[", ":small", "&lt;", "&#60;", "**",
    "__", "~~", "$$", "<img src=x>", "](", "![", "1. ", "# ", "> ", "- ", "a@b.invalid", ":+1:", "\\*", "`` ",
    "snake_case", ":streamlit:", "[x]: y"])


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(hst.lists(_PIECES, max_size=12).map("".join))
def test_any_mix_of_markdown_reads_as_written(text):
    shown = h.live(plain(text))
    assert shown.text.rstrip("\n") == text.strip() and not any(shown.live), (text, plain(text), shown.text)


def test_bold_of_the_story_survives_names_with_stars():
    """The case story bolds the outcomes it names: a class named "**yes**" keeps its stars,
    the story's bold stays bold."""
    story = f"The model decides **{h.CLASSES[1]}** for **{h.SEXES[1]}**, not **x**."
    text = plain_bold(story, [h.CLASSES[1], h.SEXES[1], "plain"])
    shown = h.live(text)
    assert text.count("**") == 6 and shown.text.rstrip() == f"The model decides {h.CLASSES[1]} for {h.SEXES[1]}, not x."
    assert not h.leaks(text) and plain_bold("a **b** c") == "a **b** c" and plain_bold("a **b c") == "a \\*\\*b c"


def test_plotly_and_graphviz_text_is_drawn_as_written():
    import html

    from core import dot
    from core.figures import text

    for name in h.NAMES:
        assert html.unescape(text(name)) == name and "<" not in text(name)
        label = dot.label(name)
        assert "&lt;" not in label.replace("&amp;", "") and html.unescape(label.replace('\\"', '"')) == name
    assert dot.label('a "q" \\N & b\nc') == 'a \\"q\\" \\\\N &amp; b\\nc'
