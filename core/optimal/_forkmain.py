"""Imported by the run pools' fork server before its first fork (:data:`core.optimal.batch.PRELOAD`).

multiprocessing prepares a forked worker as it prepares a spawned one: it runs
the parent's main module again (``init_main_from_path`` or
``init_main_from_name``), so that functions defined there can be found. The
app's parent is a Streamlit server, whose ``__main__`` is the page script that
ran last (Streamlit runs each script as ``__main__``): each new worker would run
a page. A run's function is always a module's (``map_rows`` asks for a
module-level function), so the fork server's workers skip that one step, as
loky's workers did; the rest of the preparation (``sys.path``, the working
directory, the authentication key) is done as before.

Only a child being prepared calls ``spawn.prepare``: in any other process that
imports this module the change has no effect.
"""

from __future__ import annotations

from multiprocessing import spawn
from typing import Any, Mapping

MAIN_KEYS = ("init_main_from_path", "init_main_from_name")
_prepare = spawn.prepare


def prepare_without_main(data: Mapping[str, Any]) -> None:
    """``multiprocessing.spawn.prepare`` without running the parent's main module."""
    _prepare({k: v for k, v in data.items() if k not in MAIN_KEYS})


spawn.prepare = prepare_without_main
