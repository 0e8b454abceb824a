"""Graphviz DOT text: labels escaped so that any feature or class name is drawn as is."""

from __future__ import annotations

import shutil

__all__ = ["label", "available", "render"]


def label(text: object) -> str:
    """``text`` inside a double-quoted DOT label, drawn as written: backslashes and
    quotes escaped (so are Graphviz's ``\\N``, ``\\G``… substitutions), ``&`` written
    ``&amp;`` (Graphviz passes entities such as ``&lt;`` on to the SVG, where the
    browser would read them), line breaks drawn as line breaks (``\\n``)."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    return s.replace("\r\n", "\n").replace("\n", "\\n")


def available() -> bool:
    """Is Graphviz's ``dot`` installed (needed to render SVG/PNG, not to show the figure)?"""
    return shutil.which("dot") is not None


def render(source: str, fmt: str) -> bytes:
    """DOT source rendered as ``svg`` or ``png`` by Graphviz's ``dot``."""
    import graphviz

    if fmt not in ("svg", "png"):
        raise ValueError(f"Unknown figure format {fmt!r}; use 'svg' or 'png'.")
    return graphviz.Source(source).pipe(format=fmt)
