"""Audit history: every finished audit kept in a database, re-opened and compared.

An :class:`AuditStore` keeps each audit (its ``params`` and ``elapsed``, the
result's own fields, the data and model fingerprints, its tables, summary and
full JSON, from which the HTML report is rebuilt) in one table of a SQL database through SQLAlchemy:

* by default an embedded SQLite file (``default_url()``: the ``ATLAS_HISTORY_URL``
  environment variable, else ``~/.counterfactual-atlas/history.sqlite``), opened
  in write-ahead-log mode with a busy timeout, so concurrent writers (several
  sessions, several server processes) wait for each other instead of failing;
* any SQLAlchemy URL by setting (e.g. ``postgresql+psycopg://user@host/atlas``).

An audit run on the Fairness audit page keeps its model's arrays (never a
pickle; :meth:`AuditStore.load_model`), so the Compare models page can take
an earlier model version from the history.
Nothing depends on the session: an audit saved is there after the session
ends or the server restarts. Each record has an ``owner``: on a local instance
everyone shares ``"local"``; a public deployment gives each visitor a private
key (see :func:`new_owner_key`), stored only as its hash, so visitors never see
each other's audits; a public store (``AuditStore(public=True)``) refuses the
owner ``local`` and anything not shaped as a key, and by default public and
local instances use different database files.

:func:`compare` puts two audits side by side (the same model over time, or two
models on the same data): for every attribute, group and metric both gaps and
whether the gap *closed* (significant before, not after), *opened* (the
reverse), *persists*, or is *new*/*gone* (tested in one audit only).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import secrets
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from core.audit.result import Audit
from core.errors import HistoryError
from core.intake.workspace import build_workspace
from core.model import TreeEnsemble
from core.schema import Schema

if TYPE_CHECKING:
    from core.intake.workspace import Workspace

__all__ = ["AuditStore", "HistoryError", "compare", "default_url", "new_owner_key", "check_owner_key",
           "LOCAL_OWNER"]

LOCAL_OWNER = "local"
_META = sa.MetaData()
AUDITS = sa.Table(
    "atlas_audits", _META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("owner", sa.String(64), nullable=False, index=True),
    sa.Column("created", sa.String(32), nullable=False),          # UTC, ISO 8601
    sa.Column("title", sa.String(300), nullable=False),
    sa.Column("data_name", sa.String(300), nullable=False),
    sa.Column("data_sha256", sa.String(64), nullable=False),
    sa.Column("model_sha256", sa.String(64), nullable=False),
    sa.Column("model_source", sa.String(100), nullable=False),
    sa.Column("target", sa.String(200), nullable=False),
    sa.Column("protected", sa.Text, nullable=False),             # JSON list of attribute names
    sa.Column("n_rows", sa.Integer, nullable=False),
    sa.Column("n_significant", sa.Integer, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),               # JSON list of sentences
    sa.Column("audit", sa.LargeBinary, nullable=False),          # zlib-compressed Audit.to_json()
    sa.Column("elapsed", sa.Float, nullable=True),               # the audit's seconds (None: stored before it was kept)
)


MODELS = sa.Table(
    "atlas_audit_models", _META,                              # the audited model, for Compare models
    sa.Column("audit_id", sa.Integer, primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False, index=True),
    sa.Column("meta", sa.Text, nullable=False),                # JSON: the ensemble arrays' meta
    sa.Column("arrays", sa.LargeBinary, nullable=False),       # the ensemble's arrays as .npz (no pickle)
)


WORKSPACES = sa.Table(
    "atlas_workspaces", _META,
    sa.Column("token", sa.String(64), primary_key=True),       # unguessable: the link is the permission
    sa.Column("created", sa.String(32), nullable=False),
    sa.Column("name", sa.String(300), nullable=False),
    sa.Column("meta", sa.Text, nullable=False),                 # JSON: target, schema, hashes, model arrays' meta
    sa.Column("table", sa.LargeBinary, nullable=False),         # the raw table as Parquet
    sa.Column("arrays", sa.LargeBinary, nullable=False),        # the ensemble's arrays as .npz (no pickle)
)


def default_url(public: bool = False) -> str:
    """``ATLAS_HISTORY_URL`` if set, else a SQLite file in the user's home: one
    file for local instances and another for public ones, so that the two never
    share a database by default."""
    url = os.environ.get("ATLAS_HISTORY_URL", "").strip()
    if url:
        return url
    name = "history-public.sqlite" if public else "history.sqlite"
    return f"sqlite:///{Path.home() / '.counterfactual-atlas' / name}"


_KEY = re.compile(r"[A-Za-z0-9_-]{24,128}")


def new_owner_key() -> str:
    """A private key for one visitor of a public instance (shown to them once):
    24 random URL-safe characters (144 bits), stored only as its hash."""
    return secrets.token_urlsafe(18)


def check_owner_key(key: str) -> str:
    """A visitor's key as typed (stripped), or :class:`HistoryError`: only keys
    shaped as :func:`new_owner_key` makes them, never ``local``."""
    key = str(key).strip()
    if not _KEY.fullmatch(key):
        raise HistoryError("That is not a history key. A key is the text of 24 or more letters, digits, '-' "
                           "and '_' shown under 'Your history key' when your first audit was stored; "
                           "paste it as it was shown.")
    return key


def _owner(key: str) -> str:
    """What is stored for an owner: ``local`` as is, a private key only as its hash."""
    return key if key == LOCAL_OWNER else "k:" + hashlib.sha256(key.encode()).hexdigest()[:60]


class AuditStore:
    """Audits kept in a SQL database (see the module docstring)."""

    def __init__(self, url: str | None = None, *, public: bool = False) -> None:
        self.url = url or default_url(public)
        self.public = public
        try:
            if self.url.startswith("sqlite:///") and self.url != "sqlite:///:memory:":
                Path(self.url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self.engine = sa.create_engine(self.url, **_engine_options(self.url))
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            _META.create_all(self.engine)
            _add_missing_columns(self.engine)
        except (sa.exc.SQLAlchemyError, OSError, ValueError) as exc:
            raise HistoryError(f"The audit history database {_safe(self.url)} cannot be opened ({exc}). "
                               "Check the path or URL in ATLAS_HISTORY_URL.") from None

    def _owner(self, key: str) -> str:
        """The stored owner of a key; on a public store only a visitor's private
        key (``local`` and anything not shaped as a key are refused)."""
        return _owner(check_owner_key(key) if self.public else key)

    # -------------------------------------------------------------- writing
    def save(self, audit: Audit, *, owner: str = LOCAL_OWNER, title: str | None = None,
             ensemble: TreeEnsemble | None = None) -> int:
        """Store a finished audit; its id. ``ensemble``: the audited model, kept with it
        (its arrays, never a pickle) so that it can be compared with a later version."""
        m = audit.meta
        params = audit.params                                   # the result's settings (core.model.result)
        data, model = m.get("data", {}), m.get("model", {})
        protected = list(params.get("protected", {}))
        n_sig = int(audit.tests["significant"].sum()) if "significant" in audit.tests else 0
        record = dict(
            owner=self._owner(owner),
            created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            title=(title or f"{data.get('name', 'data')} · {model.get('source', 'model')}")[:300],
            data_name=str(data.get("name", ""))[:300], data_sha256=str(data.get("sha256", ""))[:64],
            model_sha256=str(model.get("sha256", "") or "")[:64], model_source=str(model.get("source", ""))[:100],
            target=str(params.get("target", ""))[:200], protected=json.dumps(protected),
            n_rows=int(len(audit.rows)), n_significant=n_sig, summary=json.dumps(list(audit.summary)),
            audit=zlib.compress(audit.to_json().encode("utf-8"), 6),
            elapsed=float(audit.elapsed) if math.isfinite(audit.elapsed) else None)
        try:
            with self.engine.begin() as con:
                key = con.execute(AUDITS.insert().values(**record)).inserted_primary_key
                if key is None:         # a driver that reports no key for the new row
                    raise HistoryError("The history database gave the stored audit no id; use a database with "
                                       "autoincrement keys (SQLite or PostgreSQL). Download the audit as JSON to keep it.")
                audit_id = int(key[0])
                if ensemble is not None:
                    blob, ens_meta = _pack(ensemble)
                    con.execute(MODELS.insert().values(audit_id=audit_id, owner=record["owner"],
                                                       meta=json.dumps(ens_meta, default=str), arrays=blob))
                return audit_id
        except sa.exc.SQLAlchemyError as exc:
            raise HistoryError(f"The audit could not be stored in the history ({type(exc).__name__}). "
                               "It is still on screen: download it as JSON to keep it.") from None

    def delete(self, audit_id: int, *, owner: str = LOCAL_OWNER) -> bool:
        with self.engine.begin() as con:
            n = con.execute(AUDITS.delete().where(AUDITS.c.id == int(audit_id),
                                                  AUDITS.c.owner == self._owner(owner)))
            con.execute(MODELS.delete().where(MODELS.c.audit_id == int(audit_id),
                                              MODELS.c.owner == self._owner(owner)))
        return bool(n.rowcount)

    def load_model(self, audit_id: int, *, owner: str = LOCAL_OWNER) -> TreeEnsemble:
        """The model audited in audit ``audit_id``, as kept with it."""
        q = sa.select(MODELS.c.meta, MODELS.c.arrays).where(MODELS.c.audit_id == int(audit_id),
                                                           MODELS.c.owner == self._owner(owner))
        with self.engine.connect() as con:
            row = con.execute(q).first()
        if row is None:
            raise HistoryError(f"Audit {audit_id} was stored without its model (or belongs to another key); "
                               "upload the model file instead.")
        try:
            return _unpack(row[1], json.loads(row[0]))
        except (ValueError, OSError, KeyError) as exc:
            raise HistoryError(f"The model kept with audit {audit_id} is damaged ({type(exc).__name__}).") from None

    def with_models(self, *, owner: str = LOCAL_OWNER) -> list[int]:
        """Ids of this owner's audits whose model was kept, newest first."""
        q = sa.select(MODELS.c.audit_id).where(MODELS.c.owner == self._owner(owner)).order_by(
            MODELS.c.audit_id.desc())
        with self.engine.connect() as con:
            return [int(v) for v in con.execute(q).scalars().all()]

    # -------------------------------------------------------------- reading
    def list(self, *, owner: str = LOCAL_OWNER) -> pd.DataFrame:
        """Past audits of this owner, newest first (no tables: see :meth:`load`)."""
        cols = [c for c in AUDITS.c if c.name not in ("audit", "owner")]
        q = sa.select(*cols).where(AUDITS.c.owner == self._owner(owner)).order_by(AUDITS.c.id.desc())
        with self.engine.connect() as con:
            df = pd.DataFrame(con.execute(q).mappings().all(), columns=[c.name for c in cols])
        if len(df):
            df["protected"] = df["protected"].map(lambda s: ", ".join(json.loads(s)))
            df["summary"] = df["summary"].map(lambda s: " ".join(json.loads(s)[:1]))
        return df

    def load(self, audit_id: int, *, owner: str = LOCAL_OWNER) -> Audit:
        q = sa.select(AUDITS.c.audit).where(AUDITS.c.id == int(audit_id), AUDITS.c.owner == self._owner(owner))
        with self.engine.connect() as con:
            blob = con.execute(q).scalar_one_or_none()
        if blob is None:
            raise HistoryError(f"There is no stored audit {audit_id} (it was deleted, or it belongs to "
                               "another key).")
        try:
            return Audit.from_dict(json.loads(zlib.decompress(blob).decode("utf-8")))
        except (zlib.error, UnicodeDecodeError, json.JSONDecodeError):
            raise HistoryError(f"The stored audit {audit_id} is damaged and cannot be re-opened.") from None


    # -------------------------------------------------------------- shared workspaces
    def save_workspace(self, ws: Workspace) -> str:
        """Keep a workspace (raw table, model arrays, settings) for a shareable link; its token."""
        blob, ens_meta = _pack(ws.ensemble)
        table = io.BytesIO()
        raw = ws.raw.copy()
        for c in raw.columns[raw.dtypes == "object"]:
            raw[c] = raw[c].map(lambda v: v if v is None or isinstance(v, str) else str(v))
        raw.to_parquet(table, index=False)
        meta = {"target": ws.target, "schema": ws.schema.to_json(), "ensemble": ens_meta,
                "data_sha256": ws.data_sha256, "model_sha256": ws.model_sha256,
                "drop_missing": len(ws.X) < len(ws.raw), "model_info": {k: str(v) for k, v in ws.model_info.items()},
                "class_names": dict(ws.class_names)}
        token = secrets.token_urlsafe(24)
        try:
            with self.engine.begin() as con:
                con.execute(WORKSPACES.insert().values(
                    token=token, created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                    name=str(ws.name)[:300], meta=json.dumps(meta, default=str), table=table.getvalue(),
                    arrays=blob))
        except sa.exc.SQLAlchemyError as exc:
            raise HistoryError(f"The data and model could not be kept for a link ({type(exc).__name__}).") from None
        return token

    def load_workspace(self, token: str) -> Any:
        """The workspace kept under ``token`` (see :meth:`save_workspace`)."""
        with self.engine.connect() as con:
            row = con.execute(sa.select(WORKSPACES).where(WORKSPACES.c.token == str(token)[:64])).mappings().first()
        if row is None:
            raise HistoryError("This link's data and model are not on this server (the link is incomplete, or "
                               "they were deleted). Load them on the Data & model page.")
        meta = json.loads(row["meta"])
        ens = _unpack(row["arrays"], meta["ensemble"])
        raw = pd.read_parquet(io.BytesIO(row["table"]))
        ws = build_workspace(raw, meta["target"], ens, name=row["name"], data_sha256=meta["data_sha256"],
                             model_sha256=meta["model_sha256"], drop_missing=meta["drop_missing"],
                             model_info=meta["model_info"], schema=Schema.from_json(meta["schema"]))
        return ws.with_class_names(meta["class_names"]) if meta.get("class_names") else ws


def _add_missing_columns(engine: sa.Engine) -> None:
    """A database made by an earlier version gets the columns added since (nullable:
    its rows read None there)."""
    have = {c["name"] for c in sa.inspect(engine).get_columns(AUDITS.name)}
    with engine.begin() as con:
        for col in AUDITS.c:
            if col.name not in have:
                kind = col.type.compile(dialect=engine.dialect)
                con.execute(sa.text(f'ALTER TABLE {AUDITS.name} ADD COLUMN "{col.name}" {kind}'))


def _pack(ens: TreeEnsemble) -> tuple[bytes, dict[str, Any]]:
    """An ensemble as stored: its arrays as a compressed .npz (never a pickle), and their meta."""
    arrays, meta = ens.to_arrays()
    buf = io.BytesIO()
    np.savez_compressed(buf, allow_pickle=False, **arrays)
    return buf.getvalue(), meta


def _unpack(blob: bytes, meta: dict[str, Any]) -> TreeEnsemble:
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return TreeEnsemble.from_arrays(dict(z), meta)


def _engine_options(url: str) -> dict[str, Any]:
    if not url.startswith("sqlite"):
        return {"pool_pre_ping": True}
    return {"connect_args": {"timeout": 30, "check_same_thread": False}}


def _sqlite_pragmas(dbapi_con: Any, _record: Any) -> None:
    """Write-ahead log (readers never block the writer) and a busy timeout."""
    cur = dbapi_con.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _safe(url: str) -> str:
    """The URL without its password."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown by its scheme only
        return url.split(":", 1)[0] + ":…"


def compare(before: Audit, after: Audit) -> pd.DataFrame:
    """Two audits' gaps side by side, one row per (attribute, group, metric).

    ``change`` is ``closed`` (significant in ``before`` only), ``opened``
    (significant in ``after`` only), ``persists`` (both), ``none`` (neither),
    ``new`` / ``gone`` (tested in one audit only).
    """
    key = ["attribute", "group", "label"]
    cols = key + ["gap", "gap_lo", "gap_hi", "p_holm", "significant"]

    def side(a: Audit) -> pd.DataFrame:
        t = a.tests
        if not len(t):
            return pd.DataFrame(columns=cols)
        return t[cols].astype({"group": str, "attribute": str})

    m = side(before).merge(side(after), on=key, how="outer", suffixes=("_before", "_after"), indicator=True)

    def change(r: pd.Series) -> str:
        if r["_merge"] == "left_only":
            return "gone"
        if r["_merge"] == "right_only":
            return "new"
        b, a = bool(r["significant_before"]), bool(r["significant_after"])
        return {(True, False): "closed", (False, True): "opened", (True, True): "persists"}.get((b, a), "none")

    m["change"] = m.apply(change, axis=1) if len(m) else pd.Series(dtype=str)
    m["gap_change"] = m["gap_after"] - m["gap_before"]
    order = {"opened": 0, "closed": 1, "persists": 2, "new": 3, "gone": 4, "none": 5}
    m = m.drop(columns="_merge").sort_values(by=["change", "attribute", "group"],
                                             key=lambda s: s.map(order) if s.name == "change" else s)
    return m.reset_index(drop=True)
