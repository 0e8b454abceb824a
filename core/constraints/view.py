"""What the constraints read of a schema, named by protocol.

:class:`core.schema.Schema` imports this package to read its lines when it is made,
so this package imports nothing of :mod:`core.schema`: it names the schema (and its
features) by what it reads of them.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["FeatureView", "SchemaView"]


class FeatureView(Protocol):
    """What the constraints read of a feature (:class:`core.schema.FeatureSpec`)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def group(self) -> str | None: ...
    @property
    def levels(self) -> tuple[str, ...] | None: ...
    @property
    def integral(self) -> bool: ...


class SchemaView(Protocol):
    """What the constraints read of a schema (:class:`core.schema.Schema`)."""

    @property
    def names(self) -> list[str]: ...
    @property
    def features(self) -> tuple[FeatureView, ...]: ...
    def groups(self) -> dict[str, list[int]]: ...
    def group_levels(self) -> dict[str, tuple[str, ...]]: ...
    def categorical(self) -> dict[int, tuple[str, ...]]: ...
