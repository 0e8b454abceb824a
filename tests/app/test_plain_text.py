"""dashboard.ui.plain: user text in a Markdown element shows as written."""

from __future__ import annotations

import pytest

from dashboard.ui import plain


@pytest.mark.parametrize("text", ["The model expects columns ['b'] (in this order).", "p0 <= p1, 0 < x",
                                  "held-out accuracy 0.91 on capital_gain", "income: 32.7 → 47.25"])
def test_ordinary_messages_are_unchanged(text):
    assert plain(text) == text


@pytest.mark.parametrize("text, escaped", [
    ("see [click](https://a.invalid)", "see [click]\\(`https://a.invalid)`"),
    ("![x](http://a.invalid/p.png)", "![x]\\(`http://a.invalid/p.png)`"),
    ("**bold** and *it*", "\\*\\*bold\\*\\* and \\*it\\*"),
    ("_em_ but snake_case", "\\_em\\_ but snake_case"),
    (":red[alarm] $x^2$ ~~gone~~ `code`", ":red\\[alarm] \\$x^2\\$ \\~\\~gone\\~\\~ \\`code\\`"),
    ("<img src=x> </b>", "\\<img src=x> \\</b>"),
    ("# title\n> quote\n- item\n1. one\n[r]: x", "\\# title  \n\\> quote  \n\\- item  \n1\\. one  \n\\[r]: x"),
    ("mail me@a.invalid or www.a.invalid", "mail `me@a.invalid` or `www.a.invalid`"),
])
def test_markdown_constructs_are_escaped(text, escaped):
    assert plain(text) == escaped
