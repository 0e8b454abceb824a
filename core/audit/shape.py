"""What the audit's report and figures read of an audit, named by its shape.

:class:`core.audit.result.Audit` has it; the audit's class imports the report for its own
HTML, and the report imports the figures, so the shape lives here, below all three.
"""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd

from core.model.guarantee import Guarantee

__all__ = ["AuditLike"]


class AuditLike(Protocol):
    """What a report or a figure reads of an audit (:class:`core.audit.result.Audit` has it)."""

    @property
    def rows(self) -> pd.DataFrame: ...
    @property
    def groups(self) -> pd.DataFrame: ...
    @property
    def tests(self) -> pd.DataFrame: ...
    @property
    def rules(self) -> pd.DataFrame: ...
    @property
    def summary(self) -> list[str]: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def fairness(self) -> pd.DataFrame | None: ...
    @property
    def disparities(self) -> pd.DataFrame | None: ...
    @property
    def subgroups(self) -> pd.DataFrame | None: ...
    @property
    def precluded(self) -> pd.DataFrame: ...
    @property
    def guarantee(self) -> Guarantee: ...
    @property
    def recourse_guarantee(self) -> Guarantee | None: ...
    def to_json(self) -> str: ...
