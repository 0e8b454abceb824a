"""Graphviz DOT text: labels escaped so that any feature or class name is drawn as is."""

from __future__ import annotations

from typing import Any

__all__ = ["label"]


def label(text: Any) -> str:
    """``text`` inside a double-quoted DOT label: backslashes and quotes escaped,
    line breaks drawn as line breaks (``\\n``)."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return s.replace("\r\n", "\n").replace("\n", "\\n")
