"""The limits a table is read within: a local instance's, or a public deployment's.

One source for the library and the app: :func:`core.intake.io.load_table` reads
within :func:`table_limits` unless its caller names a limit, and the dashboard's
deployment settings (``dashboard.deploy``) take theirs from here too, so a
script run on a public server (``ATLAS_PUBLIC=1``) is held to what its upload
page is.

The environment says which: ``ATLAS_PUBLIC`` (``1``, ``true``, ``yes``, ``on``)
turns the public limits on (:data:`PUBLIC_LIMITS`: 50 MB files, 200,000 rows,
512 MB of memory once decoded), else the local ones hold (:data:`LOCAL_LIMITS`:
200 MB, no row cap, 2 GB). ``ATLAS_MAX_UPLOAD_MB``, ``ATLAS_MAX_ROWS`` and
``ATLAS_MAX_TABLE_MB`` set each limit in either mode. The app also reads the
same keys from its settings file (``public``, ``max_upload_mb``, ``max_rows``,
``max_table_mb`` under ``[atlas]``); the environment wins over the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import DataError

__all__ = ["TableLimits", "table_limits", "truthy", "PUBLIC_LIMITS", "LOCAL_LIMITS"]

PUBLIC_LIMITS: Mapping[str, int | None] = {"max_upload_mb": 50, "max_rows": 200_000, "max_table_mb": 512}
LOCAL_LIMITS: Mapping[str, int | None] = {"max_upload_mb": 200, "max_rows": None, "max_table_mb": 2048}
_ENV = {"max_upload_mb": "ATLAS_MAX_UPLOAD_MB", "max_rows": "ATLAS_MAX_ROWS", "max_table_mb": "ATLAS_MAX_TABLE_MB"}


@dataclass(frozen=True)
class TableLimits:
    """What a table may be: its file's size, its rows, its memory once decoded."""

    public: bool
    max_upload_mb: int
    max_rows: int | None              # None: no cap
    max_table_mb: int

    @property
    def max_bytes(self) -> int:
        return self.max_upload_mb * 2**20

    @property
    def max_decoded_bytes(self) -> int:
        return self.max_table_mb * 2**20


def truthy(v: object) -> bool | None:
    """A switch's setting: None when unset or blank, else whether it says on."""
    if v is None or (isinstance(v, str) and v.strip() == ""):
        return None
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def table_limits(env: Mapping[str, str] | None = None, file: Mapping[str, Any] | None = None) -> TableLimits:
    """The limits in force: ``env`` (default: this process's environment) over ``file``
    (the app's ``[atlas]`` settings), over the defaults of the mode (module doc).
    A setting that is not a positive whole number raises :class:`DataError` naming it."""
    env = os.environ if env is None else env
    file = file or {}
    public = truthy(env.get("ATLAS_PUBLIC"))
    if public is None:
        public = bool(truthy(file.get("public")))
    defaults = PUBLIC_LIMITS if public else LOCAL_LIMITS
    values = {key: _number(env.get(var), var) or _number(file.get(key), key) or defaults[key]
              for key, var in _ENV.items()}
    return TableLimits(public=public, max_upload_mb=int(values["max_upload_mb"] or 0),
                       max_rows=values["max_rows"], max_table_mb=int(values["max_table_mb"] or 0))


def _number(v: object, name: str) -> int | None:
    if v is None or (isinstance(v, str) and v.strip() == ""):
        return None
    try:
        n = int(str(v).strip().replace("_", "").replace(",", ""))
    except ValueError:
        n = 0
    if n <= 0:
        raise DataError(f"The setting {name}={v!r} is not a positive whole number. Set it to one (e.g. "
                        f"{name}=100) or unset it to take the default.")
    return n
