"""The app's side of the audit history (:mod:`core.audit.history`): one store per
server, and whose audits a session sees.

On a local instance everyone shares the ``local`` history. On a public
instance each visitor gets a private key the first time an audit is stored;
the History page shows it so that they can come back to their audits (and
enter it again in a new session); no visitor sees another's audits, ``local``
is not a key there, and the default database is another file.
"""

from __future__ import annotations

import streamlit as st

from core.audit.history import (
    LOCAL_OWNER,
    AuditStore,
    HistoryError,
    check_owner_key,
    compare,
    default_url,
    new_owner_key,
)
from core.intake.csvsafe import to_csv
from dashboard.deploy import settings
from dashboard.ui import download, plain

OWNER_KEY = "history_owner"


@st.cache_resource(show_spinner=False)
def _store(url: str, public: bool) -> AuditStore:
    return AuditStore(url, public=public)


def store() -> AuditStore:
    """The server's audit store (raises HistoryError with a message if unavailable)."""
    dep = settings()
    return _store(dep.history_url or default_url(dep.public), dep.public)


def use_key(entered: str) -> None:
    """Switch this session to a key the visitor kept (HistoryError if it is not one)."""
    st.session_state[OWNER_KEY] = check_owner_key(entered)


def owner() -> str:
    if not settings().public:
        return LOCAL_OWNER
    key = st.session_state.get(OWNER_KEY)
    if not key:
        key = st.session_state[OWNER_KEY] = new_owner_key()
    return key


def remember(audit, title: str | None = None, ensemble=None) -> int | None:
    """Store a finished audit (and the audited model's arrays, for Compare models); its id, or
    None (with a warning shown) if the history is unavailable."""
    try:
        return store().save(audit, owner=owner(), title=title, ensemble=ensemble)
    except HistoryError as exc:
        st.warning(plain(exc))
        return None


def show_gap_comparison(before, after, *, key: str, file_name: str) -> None:
    """Two audits' gaps side by side (:func:`core.audit.history.compare`): how many opened,
    closed, persist or are newly tested, the table, and its CSV."""
    diff = compare(before, after)
    counts = diff["change"].value_counts()
    m = st.columns(4)
    for col, name, what in zip(m, ("opened", "closed", "persists", "new"),
                               ("Gaps opened", "Gaps closed", "Gaps persisting", "Newly tested")):
        col.metric(what, int(counts.get(name, 0)))
    st.dataframe(diff, hide_index=True, key=key)
    download(st, "Download the comparison (CSV)", to_csv(diff), file_name, "text/csv", key=f"{key}_dl")
