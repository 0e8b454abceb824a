"""The browser tests' app server (tests/browser_util.py) starts on any machine: a free port
found for it can be taken by another process before the app binds it."""

from __future__ import annotations

import socket
import urllib.request

import browser_util


def test_the_app_starts_again_on_another_port_when_its_port_was_taken(monkeypatch):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()                                          # another process's server on that port
    taken = held.getsockname()[1]
    ports = iter([taken])
    free = browser_util._free_port
    monkeypatch.setattr(browser_util, "_free_port", lambda: next(ports, None) or free())
    try:
        with browser_util.running_app() as url:
            assert not url.endswith(f":{taken}")
            assert urllib.request.urlopen(url + "/_stcore/health", timeout=10).read() == b"ok"
    finally:
        held.close()
