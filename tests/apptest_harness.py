"""Three costs of Streamlit's AppTest that are the harness's, not the app's, taken once per
test process instead of once per script run (imported by conftest.py in every worker).

Measured with a sampling profiler over tests/pages, tests/app and tests/anymodel, of all their
CPU: AppTest waited on each run by polling every millisecond whether the list of the run's
events (thousands of them) holds a shutdown (4.9%); every AppTest scanned the metadata of every
installed package for Streamlit components (5.3%); and every AppTest compiled each page's
script again (6.2%). Here:

* the wait is a ``join`` of the script's thread (which ends once the run has shut down), then
  the library's own check; a run not over in time is stopped and refused with the library's
  message and its own limit;
* the packages are scanned once: none is installed or removed while the tests run;
* a page's compiled code is kept by its path *and its text* (and whether magic is on), so an
  edited script is compiled again, as the library does for a new runtime.

What a test sees of a run (its elements, its exceptions, its timeout) is unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from typing import Any


def _patch_wait() -> None:
    from streamlit.testing.v1 import local_script_runner as lsr

    library_wait = lsr.require_widgets_deltas

    def require_widgets_deltas(runner: Any, timeout: float = 3) -> None:
        thread = getattr(runner, "_script_thread", None)
        if not isinstance(thread, threading.Thread):      # another version: the library's own wait
            return library_wait(runner, timeout)
        t0 = time.time()
        thread.join(timeout)
        while not runner.script_stopped() and time.time() - t0 < timeout:
            time.sleep(0.01)            # (the thread ended without its shutdown event: as the library, wait it out)
        if not runner.script_stopped():                     # as the library: stop the run, then say so
            runner.request_stop()
            runner.join()
            raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")
        return None

    lsr.require_widgets_deltas = require_widgets_deltas


def _patch_component_scan() -> None:
    from streamlit.components.v2 import manifest_scanner

    manifest_scanner.scan_component_manifests = functools.lru_cache(maxsize=None)(
        manifest_scanner.scan_component_manifests)


def _patch_page_compile() -> None:
    from streamlit import config
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    compiled: dict[tuple[str, str, bool], Any] = {}
    library_get = ScriptCache.get_bytecode
    lock = threading.Lock()

    def get_bytecode(self: ScriptCache, script_path: str) -> Any:
        path = os.path.abspath(script_path)
        try:
            with open(path, "rb") as f:
                text = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return library_get(self, script_path)           # the library's own error
        key = (path, text, bool(config.get_option("runner.magicEnabled")))
        with lock:
            code = compiled.get(key)
        if code is None:
            code = library_get(self, script_path)
            with lock:
                compiled[key] = code
        return code

    ScriptCache.get_bytecode = get_bytecode


def install() -> None:
    """Apply the three, where Streamlit is installed."""
    try:
        import streamlit  # noqa: F401
    except ImportError:  # pragma: no cover - the 3.12 run has no app
        return
    _patch_wait()
    _patch_component_scan()
    _patch_page_compile()
