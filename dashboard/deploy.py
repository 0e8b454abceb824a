"""Deployment settings: a local analyst's instance (``make run``) or a public one.

One setting turns a public deployment on: the environment variable
``ATLAS_PUBLIC=1`` (the Procfile sets it), or ``public = true`` under
``[atlas]`` in ``.streamlit/atlas.toml``. The environment wins over the file.

Public mode
    * no "I trust this file" switch: pickle and joblib model files are refused
      (unpickling runs code from the file);
    * no free-text Dask scheduler address: a cluster address comes only from
      the server's configuration (``ATLAS_DASK_SCHEDULER`` / ``dask_scheduler``),
      and a session may only switch that one on or off;
    * uploads are capped (``ATLAS_MAX_UPLOAD_MB`` / ``max_upload_mb``, default
      50) and so are table rows (``ATLAS_MAX_ROWS`` / ``max_rows``, default
      200,000) and a table's memory once decoded (``ATLAS_MAX_TABLE_MB`` /
      ``max_table_mb``, default 512; local 2048), both checked before a row is
      decoded;
    * the app says what is disabled.

Audit history
    every finished audit is stored in ``ATLAS_HISTORY_URL`` / ``history_url``
    (any SQLAlchemy URL; default a SQLite file in the user's home, see
    :mod:`core.audit.history`); on a public instance each visitor sees only the
    audits of their own private key.

Local mode keeps every feature; its caps are the library's own (200 MB tables).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core.intake.limits import PUBLIC_LIMITS, table_limits

CONFIG = Path(__file__).resolve().parents[1] / ".streamlit" / "atlas.toml"
PUBLIC_DEFAULTS = PUBLIC_LIMITS       # the limits' one source is core.intake.limits (load_table reads them too)


@dataclass(frozen=True)
class Deployment:
    public: bool
    max_upload_mb: int
    max_rows: int | None
    scheduler: str | None        # the server's Dask scheduler, if configured
    history_url: str | None = None  # SQLAlchemy URL of the audit history (None: core.audit.history.default_url)
    max_table_mb: int = 2048     # memory a table may take once decoded (checked before decoding)

    @property
    def allows_pickle(self) -> bool:
        return not self.public

    @property
    def allows_custom_cluster(self) -> bool:
        return not self.public

    def notice(self) -> str:
        """What this instance disables, in one paragraph (empty when local)."""
        if not self.public:
            return ""
        cluster = ("the server's own Dask cluster can be switched on for long runs" if self.scheduler
                   else "runs use this server only")
        return (f"Public instance: pickle/joblib model files and custom cluster addresses are disabled "
                f"(save models as XGBoost .json/.ubj, LightGBM .txt, CatBoost .json or scikit-learn .skops); "
                f"uploads up to {self.max_upload_mb} MB and {self.max_rows:,} rows; {cluster}.")


def _file_settings(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return dict(tomllib.load(fh).get("atlas", {}))
    except FileNotFoundError:
        return {}
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise RuntimeError(f"{path} is not a valid TOML settings file: {exc}") from None


@lru_cache(maxsize=1)
def settings() -> Deployment:
    """The deployment settings of this server process (read once)."""
    return load(os.environ, CONFIG)


def load(env: dict | os._Environ, path: Path) -> Deployment:
    f = _file_settings(path)
    lim = table_limits(env, f)            # public or local, and the size and row caps
    scheduler = (env.get("ATLAS_DASK_SCHEDULER") or f.get("dask_scheduler") or "").strip() or None
    history = (env.get("ATLAS_HISTORY_URL") or f.get("history_url") or "").strip() or None
    return Deployment(public=lim.public, max_upload_mb=lim.max_upload_mb, max_rows=lim.max_rows,
                      scheduler=scheduler, history_url=history, max_table_mb=lim.max_table_mb)
