"""The app's side of the audit history (:mod:`core.audit.history`): one store per
server, and whose audits a session sees.

On a team's server (sign-in configured, :mod:`dashboard.auth`) each record belongs
to the signed-in user: private until they share it with the team. Without sign-in,
on a local instance everyone shares the ``local`` history; on a public instance
each visitor gets a private key the first time an audit is stored; the History page
shows it so that they can come back to their audits (and enter it again in a new
session); no visitor sees another's audits, ``local`` is not a key there, and the
default database is another file.

A database that cannot be reached (or went away) never takes a page down: the page
says so and everything else works; an audit that could not be stored stays in the
session (:func:`unsaved`) and is stored when the database answers again.
"""

from __future__ import annotations

import threading
import time

import streamlit as st

from core.audit.history import (
    LOCAL_OWNER,
    AuditStore,
    HistoryError,
    Owner,
    check_owner_key,
    compare,
    default_url,
    new_owner_key,
)
from core.intake.csvsafe import to_csv
from dashboard import auth
from dashboard.deploy import settings
from dashboard.ui import download, plain

OWNER_KEY = "history_owner"
UNSAVED = "history_unsaved"      # audits of this session not stored yet: (audit, title, ensemble)
RETRY_SECONDS = 10.0             # a database that could not be opened is tried again after this
_failed: dict[tuple[str, bool], tuple[float, str]] = {}
_failed_lock = threading.Lock()


@st.cache_resource(show_spinner=False)
def _store(url: str, public: bool) -> AuditStore:
    return AuditStore(url, public=public)


def store() -> AuditStore:
    """The server's audit store (raises HistoryError with a message if unavailable). A
    database that could not be opened is not tried again for :data:`RETRY_SECONDS`, so
    that every page run does not wait on its connection timeout."""
    dep = settings()
    key = (dep.history_url or default_url(dep.public), dep.public)
    with _failed_lock:
        held = _failed.get(key)
    if held is not None and time.monotonic() - held[0] < RETRY_SECONDS:
        raise HistoryError(held[1])
    try:
        return _store(*key)
    except HistoryError as exc:
        with _failed_lock:
            _failed[key] = (time.monotonic(), str(exc))
        raise


def use_key(entered: str) -> None:
    """Switch this session to a key the visitor kept (HistoryError if it is not one)."""
    st.session_state[OWNER_KEY] = check_owner_key(entered)


def owner() -> Owner:
    """Whose records this session reads and writes: the signed-in user, else ``local``,
    else (public) the visitor's key."""
    author = auth.current()
    if author is not None:
        return author
    if not settings().public:
        return LOCAL_OWNER
    key = st.session_state.get(OWNER_KEY)
    if not key:
        key = st.session_state[OWNER_KEY] = new_owner_key()
    return key


def unsaved() -> list:
    """The audits of this session that could not be stored yet."""
    return list(st.session_state.get(UNSAVED) or [])


def store_unsaved() -> int:
    """Store the session's audits that could not be stored before; how many were (raises
    HistoryError, keeping the rest, if the database still cannot take them)."""
    pending = unsaved()
    db = store()
    done = 0
    try:
        for audit, title, ensemble in pending:
            db.save(audit, owner=owner(), title=title, ensemble=ensemble)
            done += 1
    finally:
        st.session_state[UNSAVED] = pending[done:]
    return done


def remember(audit, title: str | None = None, ensemble=None) -> int | None:
    """Store a finished audit (and the audited model's arrays, for Compare models); its id, or
    None (with a warning shown) if the history is unavailable: the audit is then kept in the
    session and stored once the database answers (:func:`store_unsaved`)."""
    try:
        if unsaved():
            store_unsaved()
        return store().save(audit, owner=owner(), title=title, ensemble=ensemble)
    except HistoryError as exc:
        st.session_state[UNSAVED] = [*unsaved(), (audit, title, ensemble)]
        st.warning(f"{plain(exc)} The audit is kept in this session and will be stored in the history when "
                   "the database answers again (the History page says so).")
        return None


LINKED = "_history_link"         # (the ?audit= the History page was opened with, why it was refused or None)


def follow_link(db: AuditStore, select_key: str) -> str | None:
    """A link to one audit (``?audit=<id>``, read once per link): the audit is preselected in
    the select box ``select_key``, or why it cannot be shown is returned (someone else's
    private audit: that it is private, nothing of it)."""
    text = st.query_params.get("audit")
    held = st.session_state.get(LINKED)
    if text is None or (held is not None and held[0] == text):
        return held[1] if held is not None and text is not None else None
    refused = None
    try:
        if not text.isascii() or not text.isdigit() or len(text) > 9:
            raise HistoryError(f"{text[:20]!r} is not an audit number.")
        db.load(int(text), owner=owner())
        st.session_state[select_key] = int(text)
    except HistoryError as exc:
        refused = f"The linked audit cannot be shown. {exc}"
    st.session_state[LINKED] = (text, refused)
    return refused


def show_gap_comparison(before, after, *, key: str, file_name: str) -> None:
    """Two audits' gaps side by side (:func:`core.audit.history.compare`): how many opened,
    closed, persist or are newly tested, the table, and its CSV."""
    diff = compare(before, after)
    counts = diff["change"].value_counts()
    m = st.columns(5)
    for col, name, what in zip(m, ("opened", "closed", "persists", "new", "gone"),
                               ("Gaps opened", "Gaps closed", "Gaps persisting", "Newly tested", "No longer tested")):
        col.metric(what, int(counts.get(name, 0)))
    a, b = before.references, after.references
    differ = [f"{k} against {a[k]} in the first, {b[k]} in the second" for k in a if k in b and a[k] != b[k]]
    if differ:
        st.caption(plain("The audits measure some gaps against different reference groups (each audit's largest "
                         "among the rows it audited): " + "; ".join(differ) + ". Gaps against different groups "
                         "are not compared: they are listed as newly tested and no longer tested. Compare models' "
                         "\"Audit both models\" measures both models' gaps against the same groups."))
    st.dataframe(diff, hide_index=True, key=key)
    download(st, "Download the comparison (CSV)", to_csv(diff), file_name, "text/csv", key=f"{key}_dl")
