"""Small page helpers: user-facing errors without tracebacks."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import streamlit as st

log = logging.getLogger("atlas")


@contextmanager
def user_errors(title: str) -> Iterator[None]:
    """Show a failure inside the block as a message on the page, never a traceback.

    ``ValueError`` (the library's user-facing errors) is shown as is; any other
    exception is shown with its type and logged with its traceback for the
    operator. The block's partial effects should be assigned to session state
    only at its end, so a failure keeps what the user already had.
    """
    try:
        yield
    except ValueError as exc:
        st.error(f"{title}. {exc}")
    except Exception as exc:  # noqa: BLE001 - the page must not show a traceback
        log.exception("unexpected error: %s", title)
        st.error(f"{title}: unexpected {type(exc).__name__}: {exc}. Nothing you had loaded was changed.")
