"""Audit history: every finished audit kept in a database, with its trail, re-opened,
shared within a team and compared.

An :class:`AuditStore` keeps each audit (its full JSON, from which the HTML report is
rebuilt, its tables, summary and its *trail*: who ran it and when, the data and model
fingerprints, the settings, constraints included, the package version and git commit
of the code that ran it, and its guarantee) in a SQL database through SQLAlchemy:

* by default an embedded SQLite file (``default_url()``: the ``ATLAS_HISTORY_URL``
  environment variable, else ``~/.counterfactual-atlas/history.sqlite``), opened
  in write-ahead-log mode with a busy timeout, so concurrent writers (several
  sessions, several server processes) wait for each other instead of failing;
* any SQLAlchemy URL by setting; a team's PostgreSQL through psycopg 3
  (``postgresql+psycopg://user:password@host/atlas``, the ``postgres`` extra).

The tables are versioned (:data:`SCHEMA_VERSION`, kept in ``atlas_history_version``):
a database written by an older version is upgraded when it is opened (the columns
added since are filled from each stored audit where it holds them), under a lock
(PostgreSQL's advisory lock; on SQLite each step is re-checked, so two processes
opening one file at once both end on the same tables); a database written by a newer
version is refused with a message, never rewritten.

An audit run on the Fairness audit page keeps its model's arrays (never a
pickle; :meth:`AuditStore.load_model`), so the Compare models page can take
an earlier model version from the history, and so the audit can be run again
from its record (:func:`rerun_arguments`) with the same figures.
Nothing depends on the session: an audit saved is there after the session
ends or the server restarts.

Owners. Each record (an audit, a link's kept data and model, a saved feature
settings file) belongs to an owner:

* on a local instance everyone shares ``"local"``;
* a public deployment gives each visitor a private key (see :func:`new_owner_key`),
  stored only as its hash, so visitors never see each other's audits; a public
  store (``AuditStore(public=True)``) refuses the owner ``local`` and anything not
  shaped as a key, and by default public and local instances use different files;
* on a team's server each user signs in: an :class:`Author`, the OpenID provider's
  issuer and subject (stored as such, beside the name shown). A signed-in user's
  records are private by default; :meth:`AuditStore.share` ("Share with the team")
  makes one visible, read-only, to every signed-in user; only its author may delete
  it or make it private again.

:func:`compare` puts two audits side by side (the same model over time, or two
models on the same data): for every attribute, group and metric both gaps and
whether the gap *closed* (significant before, not after), *opened* (the
reverse), *persists*, or is *new*/*gone* (tested in one audit only).
"""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import math
import os
import re
import secrets
import subprocess
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pandas as pd
import sqlalchemy as sa

from core.audit.result import Audit
from core.errors import HistoryError
from core.intake.workspace import build_workspace
from core.model import Guarantee, TreeEnsemble
from core.model.guarantee import with_guarantee
from core.schema import Schema
from core.shown import outcome_text
from core.typing import ModelLike

if TYPE_CHECKING:
    from core.intake.workspace import Workspace

__all__ = ["AuditStore", "Author", "Owner", "HistoryError", "compare", "default_url", "new_owner_key", "check_owner_key",
           "LOCAL_OWNER", "SCHEMA_VERSION", "code_version", "rerun_arguments", "link_refusal"]

LOCAL_OWNER = "local"
#: the version of the history's tables this code writes: 1 is every database made before
#: versions were kept (audits, their models, links' data); 2 adds authors (an OpenID
#: provider's issuer and subject), sharing, each audit's trail (settings, code version,
#: guarantee) and saved feature settings.
SCHEMA_VERSION = 2
_LOCK_ID = 0x41544C53                     # PostgreSQL advisory lock held while the tables are upgraded

_META = sa.MetaData()


def _authorship() -> list[sa.Column]:
    """Who a record belongs to: ``owner`` (``local``, a visitor key's hash, or a signed-in
    user's :attr:`Author.key`), the provider's issuer and subject and the name shown (signed-in
    users only), and whether its author shared it with the team."""
    return [sa.Column("owner", sa.String(64), nullable=True, index=True),
            sa.Column("author_issuer", sa.String(300), nullable=True),
            sa.Column("author_subject", sa.String(300), nullable=True),
            sa.Column("author_name", sa.String(300), nullable=True),
            sa.Column("shared", sa.Boolean, nullable=True)]


AUDITS = sa.Table(
    "atlas_audits", _META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    *_authorship(),
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
    sa.Column("settings", sa.Text, nullable=True),               # JSON: the audit's params and constraints
    sa.Column("package_version", sa.String(40), nullable=True),  # of the code that ran it (None: not recorded)
    sa.Column("git_commit", sa.String(60), nullable=True),       # its commit, "-dirty" if changed ("": unknown)
    sa.Column("guarantee", sa.Text, nullable=True),              # JSON: Guarantee.to_dict()
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
    sa.Column("token", sa.String(64), primary_key=True),       # unguessable: the link (and its owner's say)
    *_authorship(),                                            # owner None: kept before owners, open to the link
    sa.Column("created", sa.String(32), nullable=False),
    sa.Column("name", sa.String(300), nullable=False),
    sa.Column("meta", sa.Text, nullable=False),                 # JSON: target, schema, hashes, model arrays' meta
    sa.Column("table", sa.LargeBinary, nullable=False),         # the raw table as Parquet
    sa.Column("arrays", sa.LargeBinary, nullable=False),        # the ensemble's arrays as .npz (no pickle)
)


SETTINGS = sa.Table(
    "atlas_settings", _META,                                   # feature settings files kept on the server
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    *_authorship(),
    sa.Column("created", sa.String(32), nullable=False),
    sa.Column("name", sa.String(300), nullable=False),
    sa.Column("columns", sa.Text, nullable=False),              # JSON list of the columns it describes
    sa.Column("schema", sa.Text, nullable=False),               # Schema.to_json(), constraints included
)


VERSION = sa.Table(
    "atlas_history_version", _META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("upgraded", sa.String(32), nullable=False),
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


@dataclass(frozen=True)
class Author:
    """A user signed in through an OpenID Connect provider: who they are is the
    provider's ``issuer`` and ``subject`` (the ID token's ``iss`` and ``sub``, both kept
    as they are); ``name`` is only what pages show (the subject if the provider gives
    none). Two providers' users never mix, even with equal subjects."""

    issuer: str
    subject: str
    name: str = ""

    def __post_init__(self) -> None:
        for field_name in ("issuer", "subject"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value.strip() or len(value) > 300:
                raise HistoryError(f"A signed-in user's {field_name} must be a text of 1 to 300 characters, as the "
                                   f"sign-in provider's ID token gives it; got {str(value)[:60]!r}. Check the "
                                   "provider's configuration.")
        object.__setattr__(self, "name", str(self.name or self.subject).strip()[:300] or self.subject[:300])

    @property
    def key(self) -> str:
        """What the ``owner`` column holds for this user (fits its 64 characters)."""
        return "u:" + hashlib.sha256(f"{self.issuer}\n{self.subject}".encode()).hexdigest()[:60]


Owner = str | Author


def _owner(key: Owner) -> str:
    """What is stored for an owner: ``local`` as is, a private key only as its hash,
    a signed-in user by :attr:`Author.key`."""
    if isinstance(key, Author):
        return key.key
    return key if key == LOCAL_OWNER else "k:" + hashlib.sha256(key.encode()).hexdigest()[:60]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# ------------------------------------------------------------------ the code that ran an audit
_ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def code_version() -> tuple[str, str]:
    """(package version, git commit) of the code running, for every audit's trail.

    The commit is ``ATLAS_GIT_COMMIT`` where the deployment sets it (a server built
    without its ``.git``), else the checkout's ``HEAD``, with ``-dirty`` when tracked
    files differ from it (the figures then came from code no commit holds); "" where
    neither is known. Read once per process."""
    try:
        version = metadata.version("counterfactual-atlas")
    except metadata.PackageNotFoundError:
        version = "unknown"
    commit = os.environ.get("ATLAS_GIT_COMMIT", "").strip()[:60]
    if not commit and (_ROOT / ".git").exists():
        commit = _git_commit(_ROOT)
    return version, commit


def _git_commit(root: Path) -> str:
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-c", f"safe.directory={root}", "-C", str(root), *args],
                              capture_output=True, text=True, timeout=10)
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return ""
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head.stdout.strip() + ("-dirty" if dirty else "")


def link_refusal(ws: Workspace) -> str | None:
    """Why ``ws`` cannot be kept for a link, or None. A link keeps the model as a tree
    ensemble's arrays (:meth:`AuditStore.save_workspace`): a linear model or any other model
    would come back as its tree-ensemble surrogate, and every page would then answer, and
    claim proven optimal, for the surrogate in the model's place."""
    if ws.model_kind == "tree_ensemble":
        return None
    return (f"A link cannot keep this model ({ws.kind_text}): the server keeps a model as a tree ensemble's "
            "arrays, and this one would open as its surrogate. Share the data and the model file instead.")


def model_fingerprint(ens: TreeEnsemble) -> str:
    """A model's fingerprint where no file gave one (a built-in demo, a model trained in the
    session): ``arrays:`` and the SHA-256 of the arrays and meta it is kept as, cut to the
    column's 64 characters (as a table's ``array:`` fingerprint is); the hash is the model's
    own :meth:`~core.model.TreeEnsemble.content_hash`."""
    return ("arrays:" + ens.content_hash())[:64]


def _recorded_settings(audit: Audit) -> dict[str, Any]:
    """The settings an audit ran with, as its trail keeps them: its params and the
    schema's constraints (the actionability they add is part of what was asked)."""
    schema = audit.meta.get("schema") or {}
    return {**audit.params, "constraints": list(schema.get("constraints") or [])}


def _recorded_target(target: Any, model: ModelLike) -> Any:
    """The recorded favourable outcome for ``model``: a regressor's interval, or the model's
    own class whose text was recorded (a HistoryError when the model has no such class)."""
    if isinstance(target, list):
        return (float(target[0]), float(target[1]))
    known = getattr(model, "classes", None)
    classes = {outcome_text(c): c for c in ([] if known is None else list(known))}
    if target not in classes:
        raise HistoryError(f"The audit's favourable outcome {target!r} is not a class of this model "
                           f"({', '.join(classes) or 'it predicts numbers'}): run it again on the model "
                           "it was stored with.")
    return classes[target]


def rerun_arguments(audit: Audit, model: ModelLike) -> dict[str, Any]:
    """The keyword arguments of :func:`core.audit.run_audit` that ran ``audit``, read
    from its record: with the same data and ``model`` (e.g. :meth:`AuditStore.load_model`),
    ``run_audit(model, X, **rerun_arguments(audit, model))`` gives the same figures
    (every sample and resample is seeded by the recorded ``random_state``).

    ``model`` resolves the recorded favourable class (kept as its text) to the model's
    own label. A record that lacks a setting raises :class:`HistoryError`."""
    p, meta = audit.params, audit.meta
    needed = ("target", "protected", "max_rows", "norm", "time_limit", "n_boot", "n_perm", "alpha", "tcrex",
              "tcrex_rho", "tcrex_tau", "local_rules_per_group", "random_state")
    missing = [k for k in needed if k not in p] + ([] if meta.get("schema") else ["schema"])
    if missing:
        raise HistoryError(f"This audit's record lacks {', '.join(missing)}: it was stored by a version that did "
                           "not keep them, and cannot be run again from its record.")
    target = _recorded_target(p["target"], model)
    out = {k: p[k] for k in needed if k not in ("target", "protected")}
    out.update(schema=Schema.from_dict(meta["schema"]), target=target, protected=list(p["protected"]),
               scan=p.get("scan", True), min_subgroup=p.get("min_subgroup", 20), budget=p.get("budget"),
               reference=p.get("reference"))
    if isinstance(out["norm"], dict):
        out["norm"] = dict(out["norm"])
    return out


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
            self.upgraded_from = _open_tables(self.engine)
        except HistoryError as exc:
            raise HistoryError(f"The audit history database {_safe(self.url)} {exc}") from None
        except (sa.exc.SQLAlchemyError, OSError, ValueError, ImportError) as exc:
            raise HistoryError(f"The audit history database {_safe(self.url)} cannot be opened "
                               f"({_reason(exc)}). Check the path or URL in ATLAS_HISTORY_URL, and that the "
                               "database server is running and reachable.") from None

    def _owner(self, key: Owner) -> str:
        """The stored owner of a key; on a public store only a visitor's private
        key (``local`` and anything not shaped as a key are refused) or a signed-in user."""
        if isinstance(key, Author):
            return key.key
        return _owner(check_owner_key(key) if self.public else key)

    def _visible(self, table: sa.Table, owner: Owner) -> sa.ColumnElement[bool]:
        """The rows ``owner`` may read: their own, and (a signed-in user) what others shared."""
        mine = table.c.owner == self._owner(owner)
        return sa.or_(mine, table.c.shared.is_(True)) if isinstance(owner, Author) else mine

    @contextmanager
    def _db(self, what: str) -> Iterator[None]:
        """A database error while ``what`` (the server went away, a lost connection) as a
        :class:`HistoryError` that says so."""
        try:
            yield
        except sa.exc.SQLAlchemyError as exc:
            raise HistoryError(f"The audit history database {_safe(self.url)} could not {what} "
                               f"({_reason(exc)}). Check that it is running and reachable; nothing "
                               "shown on the page is lost.") from None

    # -------------------------------------------------------------- writing
    def save(self, audit: Audit, *, owner: Owner = LOCAL_OWNER, title: str | None = None,
             ensemble: TreeEnsemble | None = None) -> int:
        """Store a finished audit with its trail; its id. ``ensemble``: the audited model, kept
        with it (its arrays, never a pickle) so that it can be compared with a later version
        and the audit run again. A signed-in author's audit is private until shared."""
        kind = str(audit.meta.get("model", {}).get("kind", "tree_ensemble"))
        if ensemble is not None and kind != "tree_ensemble":      # e.g. a surrogate, which is not the model audited
            raise HistoryError(f"This audit's model is not a tree ensemble (its kind: {kind}), so the ensemble "
                               "given (its surrogate?) is not the audited model: store the audit without it.")
        record = dict(owner=self._owner(owner), **_author_fields(owner), shared=False, created=_now(),
                      **_audit_fields(audit, title))
        if not record["model_sha256"] and ensemble is not None:     # a built-in demo's model has no file
            record["model_sha256"] = model_fingerprint(ensemble)
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
            raise HistoryError(f"The audit could not be stored in the history ({_reason(exc)}). "
                               "It is still on screen: download it as JSON to keep it.") from None

    def delete(self, audit_id: int, *, owner: Owner = LOCAL_OWNER) -> bool:
        """Delete an audit (and its model); only its author can. Whether it was deleted."""
        with self._db("delete the audit"), self.engine.begin() as con:
            n = con.execute(AUDITS.delete().where(AUDITS.c.id == int(audit_id),
                                                  AUDITS.c.owner == self._owner(owner)))
            if n.rowcount:
                con.execute(MODELS.delete().where(MODELS.c.audit_id == int(audit_id)))
        return bool(n.rowcount)

    def share(self, audit_id: int, *, owner: Owner, shared: bool = True) -> bool:
        """"Share with the team" (``shared``), or make private again: only its signed-in
        author can. Whether the audit was theirs (and so changed)."""
        return self._set_shared(AUDITS, AUDITS.c.id, int(audit_id), owner, shared)

    def _set_shared(self, table: sa.Table, key_col: sa.Column, key: Any, owner: Owner, shared: bool) -> bool:
        if not isinstance(owner, Author):
            raise HistoryError("Sharing with the team needs a signed-in user: this server has no sign-in "
                               "(see docs/deploy-team.md).")
        with self._db("change what is shared"), self.engine.begin() as con:
            n = con.execute(table.update().where(key_col == key, table.c.owner == owner.key)
                            .values(shared=bool(shared)))
        return bool(n.rowcount)

    def _refused(self, table: sa.Table, key_col: sa.Column, key: Any, owner: Owner, what: str) -> HistoryError:
        """Why ``owner`` cannot read ``what``: it is someone else's private record, or there
        is none; a private record is named as such and nothing more of it is said."""
        with self._db("read the history"), self.engine.connect() as con:
            exists = con.execute(sa.select(sa.func.count()).select_from(table).where(key_col == key)).scalar()
        if exists and isinstance(owner, Author):
            return HistoryError(f"{what} is private to its author: nothing of it is shown. Ask them to share it "
                                "with the team.")
        return HistoryError(f"There is no {what.lower()} (it was deleted, or it belongs to another key).")

    # -------------------------------------------------------------- reading
    def list(self, *, owner: Owner = LOCAL_OWNER) -> pd.DataFrame:
        """The audits ``owner`` may see (their own; a signed-in user also those shared with the
        team), newest first, without their tables (see :meth:`load`): ``author`` is who ran
        it, ``mine`` whether it is ``owner``'s, ``shared`` whether it is shared."""
        skip = {"audit", "owner", "author_issuer", "author_subject", "settings", "guarantee"}
        cols = [c for c in AUDITS.c if c.name not in skip]
        q = (sa.select(*cols, (AUDITS.c.owner == self._owner(owner)).label("mine"))
             .where(self._visible(AUDITS, owner)).order_by(AUDITS.c.id.desc()))
        with self._db("list the audits"), self.engine.connect() as con:
            df = pd.DataFrame(con.execute(q).mappings().all(), columns=[c.name for c in cols] + ["mine"])
        df["protected"] = df["protected"].map(lambda s: ", ".join(json.loads(s)))
        df["summary"] = df["summary"].map(lambda s: " ".join(json.loads(s)[:1]))
        df["shared"] = df["shared"].fillna(False).astype(bool)
        df["mine"] = df["mine"].fillna(False).astype(bool)
        df.insert(1, "author", [_author_label(n, owner if m else None) for n, m in zip(df["author_name"], df["mine"])])
        return df.drop(columns="author_name")

    def load(self, audit_id: int, *, owner: Owner = LOCAL_OWNER) -> Audit:
        q = sa.select(AUDITS.c.audit).where(AUDITS.c.id == int(audit_id), self._visible(AUDITS, owner))
        with self._db("read the audit"), self.engine.connect() as con:
            blob = con.execute(q).scalar_one_or_none()
        if blob is None:
            raise self._refused(AUDITS, AUDITS.c.id, int(audit_id), owner, f"Audit {audit_id}")
        try:
            return Audit.from_dict(json.loads(zlib.decompress(blob).decode("utf-8")))
        except (zlib.error, UnicodeDecodeError, json.JSONDecodeError):
            raise HistoryError(f"The stored audit {audit_id} is damaged and cannot be re-opened.") from None

    def load_model(self, audit_id: int, *, owner: Owner = LOCAL_OWNER) -> TreeEnsemble:
        """The model audited in audit ``audit_id``, as kept with it."""
        visible = sa.select(AUDITS.c.id).where(AUDITS.c.id == int(audit_id), self._visible(AUDITS, owner))
        q = sa.select(MODELS.c.meta, MODELS.c.arrays).where(MODELS.c.audit_id.in_(visible))
        with self._db("read the model"), self.engine.connect() as con:
            row = con.execute(q).first()
        if row is None:
            raise HistoryError(f"Audit {audit_id} was stored without its model (or it is not yours to read); "
                               "upload the model file instead.")
        try:
            return _unpack(row[1], json.loads(row[0]))
        except (ValueError, OSError, KeyError) as exc:
            raise HistoryError(f"The model kept with audit {audit_id} is damaged ({type(exc).__name__}).") from None

    def with_models(self, *, owner: Owner = LOCAL_OWNER) -> builtins.list[int]:   # list: the method above
        """Ids of the audits ``owner`` may see whose model was kept, newest first."""
        visible = sa.select(AUDITS.c.id).where(self._visible(AUDITS, owner))
        q = sa.select(MODELS.c.audit_id).where(MODELS.c.audit_id.in_(visible)).order_by(MODELS.c.audit_id.desc())
        with self._db("list the kept models"), self.engine.connect() as con:
            return [int(v) for v in con.execute(q).scalars().all()]

    def trail(self, *, owner: Owner = LOCAL_OWNER, authors: Sequence[str] = (), models: Sequence[str] = (),
              data: Sequence[str] = ()) -> pd.DataFrame:
        """The audit trail of the audits ``owner`` may see, newest first: who ran each and
        when, the data and model (name and fingerprint), the settings (JSON, constraints
        included), the package version and git commit, and the guarantee (its kind and words,
        :func:`core.model.guarantee.with_guarantee`). ``authors``, ``models``, ``data``: keep
        only the rows whose ``author``, ``model`` or ``data`` label is one of them."""
        cols = [AUDITS.c[n] for n in ("id", "created", "author_name", "author_issuer", "author_subject", "shared",
                                      "title", "data_name", "data_sha256", "model_source", "model_sha256", "target",
                                      "protected", "n_rows", "n_significant", "elapsed", "settings",
                                      "package_version", "git_commit", "guarantee")]
        q = (sa.select(*cols, (AUDITS.c.owner == self._owner(owner)).label("mine"))
             .where(self._visible(AUDITS, owner)).order_by(AUDITS.c.id.desc()))
        with self._db("read the audit trail"), self.engine.connect() as con:
            df = pd.DataFrame(con.execute(q).mappings().all(), columns=[c.name for c in cols] + ["mine"])
        return _trail_table(df, owner, authors, models, data)

    # -------------------------------------------------------------- shared workspaces (a link's data and model)
    def save_workspace(self, ws: Workspace, *, owner: Owner = LOCAL_OWNER, shared: bool | None = None) -> str:
        """Keep a workspace (raw table, model arrays, settings) for a link; its token.
        ``shared``: whether others may open the link (default: a signed-in author's link is
        private to them until shared with the team; any other is open to whoever has it)."""
        refused = link_refusal(ws)
        if refused is not None:
            raise HistoryError(refused)
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
        is_shared = not isinstance(owner, Author) if shared is None else bool(shared)
        try:
            with self.engine.begin() as con:
                con.execute(WORKSPACES.insert().values(
                    token=token, owner=self._owner(owner), **_author_fields(owner), shared=is_shared, created=_now(),
                    name=str(ws.name)[:300], meta=json.dumps(meta, default=str), table=table.getvalue(),
                    arrays=blob))
        except sa.exc.SQLAlchemyError as exc:
            raise HistoryError(f"The data and model could not be kept for a link ({_reason(exc)}).") from None
        return token

    def share_workspace(self, token: str, *, owner: Owner, shared: bool = True) -> bool:
        """Open a link's data to the team, or close it again: only its signed-in author can."""
        return self._set_shared(WORKSPACES, WORKSPACES.c.token, str(token)[:64], owner, shared)

    def workspace_owner(self, token: str, *, owner: Owner) -> tuple[bool, bool]:
        """(whether the link's data is ``owner``'s, whether it is shared)."""
        q = sa.select(WORKSPACES.c.owner, WORKSPACES.c.shared).where(WORKSPACES.c.token == str(token)[:64])
        with self._db("read the link"), self.engine.connect() as con:
            row = con.execute(q).first()
        return (row is not None and row[0] == self._owner(owner)), bool(row is not None and row[1])

    def load_workspace(self, token: str, *, owner: Owner = LOCAL_OWNER) -> Any:
        """The workspace kept under ``token`` (see :meth:`save_workspace`), if ``owner`` may
        open it: theirs, shared, or kept before links had owners."""
        token = str(token)[:64]
        with self._db("read the link's data"), self.engine.connect() as con:
            row = con.execute(sa.select(WORKSPACES).where(WORKSPACES.c.token == token)).mappings().first()
        if row is None:
            raise HistoryError("This link's data and model are not on this server (the link is incomplete, or "
                               "they were deleted). Load them on the Data & model page.")
        if not (row["owner"] is None or row["shared"] or row["owner"] == self._owner(owner)):
            raise HistoryError("This link's data and model are private to the colleague who kept them: nothing "
                               "of them is shown. Ask them to share the view with the team.")
        meta = json.loads(row["meta"])
        ens = _unpack(row["arrays"], meta["ensemble"])
        raw = pd.read_parquet(io.BytesIO(row["table"]))
        ws = build_workspace(raw, meta["target"], ens, name=row["name"], data_sha256=meta["data_sha256"],
                             model_sha256=meta["model_sha256"], drop_missing=meta["drop_missing"],
                             model_info=meta["model_info"], schema=Schema.from_json(meta["schema"]))
        return ws.with_class_names(meta["class_names"]) if meta.get("class_names") else ws

    # -------------------------------------------------------------- saved feature settings
    def save_settings(self, schema: Schema, *, name: str, owner: Owner = LOCAL_OWNER) -> int:
        """Keep a feature settings file (kinds, ranges, actionability, weights, protected
        columns, constraints) under ``name``; its id. Private to a signed-in author until shared."""
        name = str(name).strip()[:300]
        if not name:
            raise HistoryError("Give the settings a name (e.g. the data they describe and what changed).")
        try:
            with self.engine.begin() as con:
                key = con.execute(SETTINGS.insert().values(
                    owner=self._owner(owner), **_author_fields(owner), shared=False, created=_now(), name=name,
                    columns=json.dumps(list(schema.names)), schema=schema.to_json())).inserted_primary_key
        except sa.exc.SQLAlchemyError as exc:
            raise HistoryError(f"The settings could not be kept ({_reason(exc)}); download them as JSON "
                               "instead.") from None
        return int(key[0]) if key is not None else -1

    def list_settings(self, *, owner: Owner = LOCAL_OWNER) -> pd.DataFrame:
        """The settings files ``owner`` may see, newest first (``columns``: how many columns
        each describes, ``constraints``: how many constraint lines it carries)."""
        q = (sa.select(SETTINGS.c.id, SETTINGS.c.created, SETTINGS.c.name, SETTINGS.c.author_name,
                       SETTINGS.c.shared, SETTINGS.c.columns, SETTINGS.c.schema,
                       (SETTINGS.c.owner == self._owner(owner)).label("mine"))
             .where(self._visible(SETTINGS, owner)).order_by(SETTINGS.c.id.desc()))
        with self._db("list the saved settings"), self.engine.connect() as con:
            rows = con.execute(q).mappings().all()
        out = pd.DataFrame([{"id": r["id"], "created": r["created"], "name": r["name"],
                             "author": _author_label(r["author_name"], owner if r["mine"] else None),
                             "shared": bool(r["shared"]), "mine": bool(r["mine"]),
                             "columns": len(json.loads(r["columns"])),
                             "constraints": len(json.loads(r["schema"]).get("constraints") or [])} for r in rows],
                           columns=["id", "created", "name", "author", "shared", "mine", "columns", "constraints"])
        return out

    def load_settings(self, settings_id: int, *, owner: Owner = LOCAL_OWNER) -> Schema:
        q = sa.select(SETTINGS.c.schema).where(SETTINGS.c.id == int(settings_id), self._visible(SETTINGS, owner))
        with self._db("read the settings"), self.engine.connect() as con:
            text = con.execute(q).scalar_one_or_none()
        if text is None:
            raise self._refused(SETTINGS, SETTINGS.c.id, int(settings_id), owner, f"Settings file {settings_id}")
        return Schema.from_json(text)

    def share_settings(self, settings_id: int, *, owner: Owner, shared: bool = True) -> bool:
        return self._set_shared(SETTINGS, SETTINGS.c.id, int(settings_id), owner, shared)

    def delete_settings(self, settings_id: int, *, owner: Owner = LOCAL_OWNER) -> bool:
        with self._db("delete the settings"), self.engine.begin() as con:
            n = con.execute(SETTINGS.delete().where(SETTINGS.c.id == int(settings_id),
                                                    SETTINGS.c.owner == self._owner(owner)))
        return bool(n.rowcount)


def _author_fields(owner: Owner) -> dict[str, Any]:
    if isinstance(owner, Author):
        return {"author_issuer": owner.issuer, "author_subject": owner.subject, "author_name": owner.name}
    return {"author_issuer": None, "author_subject": None, "author_name": None}


def _author_label(name: str | None, mine: Owner | None) -> str:
    """Who ran an audit, as pages show it: the signed-in author's name; else the local
    instance's ``local`` or a visitor's own key (``you``)."""
    if name:
        return str(name)
    return "you" if mine is not None and mine != LOCAL_OWNER else LOCAL_OWNER


def _audit_fields(audit: Audit, title: str | None) -> dict[str, Any]:
    """An audit's columns: what lists and filters read, its trail and its whole JSON."""
    m, params = audit.meta, audit.params
    data, model = m.get("data", {}), m.get("model", {})
    n_sig = int(audit.tests["significant"].sum()) if "significant" in audit.tests else 0
    version, commit = code_version()
    return dict(
        title=(title or f"{data.get('name', 'data')} · {model.get('source', 'model')}")[:300],
        data_name=str(data.get("name", ""))[:300], data_sha256=str(data.get("sha256", ""))[:64],
        model_sha256=str(model.get("sha256", "") or "")[:64], model_source=str(model.get("source", ""))[:100],
        target=str(params.get("target", ""))[:200], protected=json.dumps(list(params.get("protected", {}))),
        n_rows=int(len(audit.rows)), n_significant=n_sig, summary=json.dumps(list(audit.summary)),
        audit=zlib.compress(audit.to_json().encode("utf-8"), 6),
        elapsed=float(audit.elapsed) if math.isfinite(audit.elapsed) else None,
        settings=json.dumps(_recorded_settings(audit), default=str, sort_keys=True),
        package_version=version[:40], git_commit=commit[:60], guarantee=json.dumps(audit.guarantee.to_dict()))


def _label(name: Any, sha: Any) -> str:
    return f"{name or '?'} · {str(sha or '')[:12] or 'no fingerprint'}"


def _filtered(df: pd.DataFrame, filters: Sequence[tuple[str, Sequence[str]]]) -> pd.DataFrame:
    """The rows whose label in each filtered column is one of those wanted (no filter: every row)."""
    keep = pd.Series(True, index=df.index)
    for column, wanted in filters:
        if wanted:
            keep &= df[column].isin(list(wanted))
    return df[keep]


def _trail_table(df: pd.DataFrame, owner: Owner, authors: Sequence[str], models: Sequence[str],
                 data: Sequence[str]) -> pd.DataFrame:
    """The trail as pages show and export it: labels to filter by, the guarantee in words."""
    df.insert(1, "author", [_author_label(n, owner if m else None) for n, m in zip(df["author_name"], df["mine"])])
    df.insert(2, "model", [_label(n, s) for n, s in zip(df["model_source"], df["model_sha256"])])
    df.insert(3, "data", [_label(n, s) for n, s in zip(df["data_name"], df["data_sha256"])])
    df["shared"] = df["shared"].fillna(False).astype(bool)
    df["protected"] = df["protected"].map(lambda s: ", ".join(json.loads(s)))
    df["git_commit"] = df["git_commit"].fillna("not recorded").replace("", "unknown")
    df["package_version"] = df["package_version"].fillna("not recorded")
    df = _filtered(df, (("author", authors), ("model", models), ("data", data))).drop(columns=["author_name", "mine"])
    parts = [with_guarantee(part.drop(columns="guarantee"), _guarantee(text))
             for text, part in df.groupby(df["guarantee"].fillna(""), sort=False)]
    cols = [c for c in df.columns if c != "guarantee"] + ["guarantee", "guarantee_text"]
    out = pd.concat(parts) if parts else df.drop(columns="guarantee").assign(guarantee="", guarantee_text="")
    return out.sort_values("id", ascending=False)[cols].reset_index(drop=True)


def _guarantee(text: str) -> Guarantee | None:
    try:
        return Guarantee.from_dict(json.loads(text)) if text else None
    except (ValueError, TypeError):
        return None


# ------------------------------------------------------------------ the tables' versions
def _open_tables(engine: sa.Engine) -> int | None:
    """Create or upgrade the history's tables to :data:`SCHEMA_VERSION`; the version the
    database had if it was upgraded (0: it was empty), else None. Two processes opening
    one database at once: PostgreSQL serialises them with an advisory lock; elsewhere a
    step another process finished first is seen on the second try."""
    for attempt in range(5):
        try:
            with engine.begin() as con:
                if con.dialect.name == "postgresql":
                    con.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_ID})
                return _upgrade(con)
        except (sa.exc.OperationalError, sa.exc.IntegrityError, sa.exc.ProgrammingError):
            if attempt == 4 or not _is_race(engine):
                raise
            time.sleep(0.1 * (attempt + 1))
    return None


def _is_race(engine: sa.Engine) -> bool:
    """Could the failed upgrade have met another process's (is the database reachable)?"""
    try:
        with engine.connect() as con:
            con.execute(sa.text("SELECT 1"))
        return True
    except sa.exc.SQLAlchemyError:
        return False


def _upgrade(con: sa.Connection) -> int | None:
    names = set(sa.inspect(con).get_table_names())
    if VERSION.name in names:
        found = con.execute(sa.select(VERSION.c.version).where(VERSION.c.id == 1)).scalar_one_or_none() or 1
    else:
        found = 1 if AUDITS.name in names or WORKSPACES.name in names else 0
    if found > SCHEMA_VERSION:
        raise HistoryError(f"was written by a newer version of Counterfactual Atlas (history tables version "
                           f"{found}; this version reads up to {SCHEMA_VERSION}). Upgrade the app, or set "
                           "ATLAS_HISTORY_URL to another database; nothing in it was changed.")
    if found == SCHEMA_VERSION:
        return None
    _META.create_all(con)                     # the tables added since (checkfirst: existing ones are kept)
    for table in (AUDITS, MODELS, WORKSPACES, SETTINGS):
        _add_missing_columns(con, table)
    if found:
        _fill_trail(con)
    stamp = {"version": SCHEMA_VERSION, "upgraded": _now()}
    if con.execute(sa.update(VERSION).where(VERSION.c.id == 1).values(**stamp)).rowcount == 0:
        con.execute(sa.insert(VERSION).values(id=1, **stamp))
    return found


def _add_missing_columns(con: sa.Connection, table: sa.Table) -> None:
    """A table made by an earlier version gets the columns added since (nullable:
    its rows read None there)."""
    have = {c["name"] for c in sa.inspect(con).get_columns(table.name)}
    for col in table.c:
        if col.name not in have:
            kind = col.type.compile(dialect=con.dialect)
            con.execute(sa.text(f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" {kind}'))


def _fill_trail(con: sa.Connection) -> None:
    """Audits stored before the trail was kept: their settings and guarantee, read from
    the audit each row holds (the code version that ran them was not recorded, and stays so)."""
    rows = con.execute(sa.select(AUDITS.c.id, AUDITS.c.audit).where(AUDITS.c.settings.is_(None))).all()
    for audit_id, blob in rows:
        try:
            audit = Audit.from_dict(json.loads(zlib.decompress(blob).decode("utf-8")))
        except (zlib.error, UnicodeDecodeError, ValueError):
            continue                           # a damaged record says so when it is opened
        con.execute(AUDITS.update().where(AUDITS.c.id == audit_id).values(
            settings=json.dumps(_recorded_settings(audit), default=str, sort_keys=True),
            guarantee=json.dumps(audit.guarantee.to_dict())))


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
    """SQLite: wait for other writers; a server: check a pooled connection before use (the
    server may have restarted), and give up connecting after 5 s (PostgreSQL), so that a
    database that does not answer costs a page a few seconds, not a hang."""
    if url.startswith("postgresql"):
        return {"pool_pre_ping": True, "connect_args": {"connect_timeout": 5}}
    if not url.startswith("sqlite"):
        return {"pool_pre_ping": True}
    return {"connect_args": {"timeout": 30, "check_same_thread": False}}


def _reason(exc: BaseException) -> str:
    """A database error in a few words: the driver's first line (never the SQL, never a password)."""
    inner = getattr(exc, "orig", None) or exc
    first = (str(inner).strip().splitlines() or [""])[0].strip()
    return f"{type(inner).__name__}: {first[:200]}" if first else type(inner).__name__


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
    """Two audits' gaps side by side, one row per (attribute, group, reference, metric).

    ``change`` is ``closed`` (significant in ``before`` only), ``opened``
    (significant in ``after`` only), ``persists`` (both), ``none`` (neither),
    ``new`` / ``gone`` (tested in one audit only). A gap is the same test in both audits
    only between the same two groups: when ``after`` measured it the other way round (its
    reference group was ``before``'s group, as when each audit's largest group differs), it is
    turned to ``before``'s direction (gap and interval negated); a gap against another
    reference is another test (``new`` / ``gone``), never set beside it.
    """
    key = ["attribute", "group", "reference", "label"]
    cols = key + ["gap", "gap_lo", "gap_hi", "p_holm", "significant"]

    def side(a: Audit) -> pd.DataFrame:
        t = a.tests
        if not len(t):
            return pd.DataFrame(columns=cols)
        return t.reindex(columns=cols).astype({"group": str, "attribute": str, "reference": str})

    old, new = side(before), _oriented(side(after), side(before), key)
    m = old.merge(new, on=key, how="outer", suffixes=("_before", "_after"), indicator=True)

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
    m = m.drop(columns="_merge").sort_values(by=["change", "attribute", "group", "reference"],
                                             key=lambda s: s.map(order) if s.name == "change" else s)
    return m.reset_index(drop=True)


def _oriented(after: pd.DataFrame, before: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """``after``'s tests, each measured the other way round from one of ``before``'s (group and
    reference swapped) turned to ``before``'s direction: the gap and its interval negated (the
    permutation test is two-sided, its p-value unchanged)."""
    if not len(after) or not len(before):
        return after
    known = set(map(tuple, before[key].to_numpy()))
    swapped = [(a, r, g, lab) for a, g, r, lab in after[key].to_numpy()]
    turn = np.array([tuple(k) not in known and s in known for k, s in zip(after[key].to_numpy(), swapped)])
    if not turn.any():
        return after
    out = after.copy()
    out.loc[turn, ["group", "reference"]] = after.loc[turn, ["reference", "group"]].to_numpy()
    out.loc[turn, "gap"] = -after.loc[turn, "gap"]
    out.loc[turn, ["gap_lo", "gap_hi"]] = -after.loc[turn, ["gap_hi", "gap_lo"]].to_numpy()
    return out
