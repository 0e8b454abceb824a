"""Settings objects with keyword overrides, one way for every analysis.

An analysis with many settings groups them in a frozen dataclass
(:class:`core.audit.AuditSettings`, :class:`core.compression.FCCASettings`) and also
takes any of their fields as a keyword, which overrides the object's value.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

__all__ = ["with_overrides"]


def with_overrides(overrides: dict[str, Any], error: type[Exception], what: str, *bases: Any) -> list[Any]:
    """Each of ``bases`` (frozen dataclass instances) with the keywords naming its
    fields replaced; a keyword naming no field raises ``error``."""
    out, known = [], set()
    for base in bases:
        names = {f.name for f in fields(base)}
        out.append(replace(base, **{k: v for k, v in overrides.items() if k in names}))
        known |= names
    unknown = set(overrides) - known
    if unknown:
        raise error(f"Unknown {what} setting(s) {sorted(unknown)}; the settings are {sorted(known)}.")
    return out
