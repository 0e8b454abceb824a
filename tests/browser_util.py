"""Start the real app on a free port and drive it with Debian's Chromium."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from conftest import ROOT, chromium_path

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Streamlit animates while a script runs (the status widget, spinners, skeletons, fading stale
# elements): Chromium draws those frames for as long as the run lasts, 0.07 CPU-s a second a
# page (measured: 1.86 against 0.78 CPU-s over 15 s of a running script). Every view of the
# tests shows its end states without them, as Playwright's screenshots do with
# ``animations="disabled"``; what is on the page, and when, is unchanged.
_STILL = ("document.addEventListener('DOMContentLoaded', () => { const s = document.createElement('style');"
          " s.textContent = '*, *::before, *::after { animation: none !important;"
          " transition: none !important; }'; document.head.appendChild(s); });")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(timeout: float = 120.0, env: dict[str, str] | None = None, port: int | None = None,
                args: tuple[str, ...] = ()) -> Iterator[str]:
    """The app served on a free port (or ``port``); ``env`` adds environment variables (e.g. public
    mode), ``args`` Streamlit options (e.g. ``--secrets.files``). A free port found here can be
    taken by another process before the app binds it (Streamlit then exits: "Port … is not
    available"): the app is started again on another free port, up to three times."""
    for attempt in range(3):
        try:
            proc, log, url = _start_app(timeout, env, port or _free_port(), args)
            break
        except _PortTaken:
            if port is not None or attempt == 2:
                raise
    try:
        yield url
    finally:
        _stop_app(proc, log)


class _PortTaken(RuntimeError):
    """The app exited at start because its port was taken meanwhile."""


def _start_app(timeout: float, env: dict[str, str] | None, port: int, args: tuple[str, ...]):
    """(the app's process, its log file, its URL) once it answers its health check."""
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"atlas-app-{port}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py"),
         "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", *args],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                taken = f"Port {port} is not available" in Path(log.name).read_text(errors="replace")
                raise (_PortTaken if taken else RuntimeError)(
                    f"the app exited with code {proc.returncode}; see {log.name}")
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                    return proc, log, url
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"the app did not answer within {timeout:.0f} s; see {log.name}")
    except BaseException:
        _stop_app(proc, log)
        raise


def _stop_app(proc: subprocess.Popen, log) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


_SHARED: dict = {}     # the one shared Chromium (shared_chromium), the thread that owns it, its tabs' context


def _chromium_exe() -> str:
    exe = chromium_path()
    if exe is None:
        pytest.fail("Chromium is not installed: `make test` installs Debian's chromium, or set CHROMIUM_PATH")
    return exe


@contextlib.contextmanager
def shared_chromium() -> Iterator:
    """One Chromium for the views opened meanwhile: each ``browser_page`` of this thread
    then opens a new tab in it instead of launching Chromium again (~1-2 s per view)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium_exe(), args=CHROMIUM_ARGS, headless=True)
        _SHARED.update(browser=browser, thread=threading.get_ident())
        try:
            yield browser
        finally:
            _SHARED.clear()
            browser.close()


_KEPT = contextlib.ExitStack()      # the Chromium kept from one browser module to the next


def kept_chromium():
    """The process's shared Chromium, launched on first use and kept for the next browser
    module (a launch costs ~1.1 CPU-s with Playwright's driver); launched again if it has gone."""
    browser = _SHARED.get("browser")
    if browser is not None and browser.is_connected():
        return browser
    close_kept_chromium()
    return _KEPT.enter_context(shared_chromium())


def close_kept_chromium() -> None:
    _KEPT.close()


def _context(browser, width: int = 1400, height: int = 1000):
    """A new browser context of ``browser``, its views drawn without animations (``_STILL``)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_init_script(_STILL)
    return context


def _tabs(browser):
    """The shared Chromium's one browser context for tabs (made on first use)."""
    if _SHARED.get("tabs") is None:
        _SHARED["tabs"] = _context(browser)
    return _SHARED["tabs"]


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1000, own_context: bool = False):
    """A page of its own, closed on leaving, in the shared Chromium when there is one on this
    thread (Playwright objects belong to the thread that made them), else in a Chromium
    launched for it.

    In the shared Chromium the page is a new tab of one browser context, as a user opens the
    app in a new tab: its own Streamlit session (a session is a tab's connection), the cookies
    and HTTP cache of the tabs before it. A view in a new browser context cost 3.5-3.9 machine
    CPU-s against 2.1-2.8 as a new tab (the demo's Data & model page, measured): the context's
    set-up, and the app's scripts fetched and compiled again; test_browser.py's nine views took
    69-75 machine CPU-s as tabs, 75-81 as contexts (three runs each, in turn).
    ``own_context`` opens the page in a new browser context instead: a stranger's browser,
    with no cookie and no cache."""
    shared = _SHARED.get("browser")
    if shared is not None and _SHARED.get("thread") == threading.get_ident():
        if own_context:
            context = _context(shared, width, height)
            try:
                yield context.new_page()
            finally:
                context.close()
            return
        page = _tabs(shared).new_page()
        try:
            page.set_viewport_size({"width": width, "height": height})
            yield page
        finally:
            page.close()
        return
    exe = _chromium_exe()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            yield _context(browser, width, height).new_page()
        finally:
            browser.close()


@contextlib.contextmanager
def app_view(app_url: str, path: str, heading: str, shot: Path, height: int = 1400) -> Iterator:
    """A page of the app opened at ``path`` once its heading shows; on leaving,
    the page must show no exception, and a full-page screenshot goes to ``shot``."""
    with browser_page(height=height) as page:
        page.goto(app_url + path)
        page.get_by_role("heading", name=heading).wait_for(timeout=90_000)
        yield page
        _no_exception_then_shot(page, shot)


@contextlib.contextmanager
def sidebar_view(page, heading: str, shot: Path, height: int = 1400) -> Iterator:
    """The app's page ``heading`` in the session open in ``page``, reached from the sidebar as
    a user goes from page to page (unless it shows already): no new load of the app, no new
    session. On leaving, as ``app_view``: no exception shown, a full-page screenshot."""
    page.set_viewport_size({"width": 1400, "height": height})
    if not page.get_by_role("heading", name=heading, exact=True).count():
        wait_idle(page)                              # a click during a script run can be swallowed
        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=heading, exact=True).click()
    page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=90_000)
    yield page
    _no_exception_then_shot(page, shot)


def _no_exception_then_shot(page, shot: Path) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shot), full_page=True)


def shots_dir(tmp_path: Path) -> Path:
    """Where screenshots go: $ATLAS_SHOTS to keep them for a look, else the test's tmp dir."""
    d = Path(os.environ.get("ATLAS_SHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def upload(page, label: str, path: str, timeout: float = 60_000) -> None:
    """Put a file into the file uploader whose label starts with ``label``, once it is on the page
    (a page that has just been switched still shows its previous uploaders for a moment)."""
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    box.first.wait_for(timeout=timeout)
    box.first.locator('input[type="file"]').set_input_files(path)


def wait_idle(page, timeout: float = 120_000, quiet: float = 300) -> None:
    """Until the app's script run is over: the app says its script is not running (stApp's
    ``data-test-script-state``, which Streamlit keeps for its own end-to-end tests) and no
    element is marked stale, for ``quiet`` ms in a row (a rerun a click asks for takes a
    moment to start). Waits for the condition, not a fixed time: on a busy machine it takes
    what it takes. The page itself checks every 50 ms (a check from here, through Playwright's
    driver, cost 0.12 CPU-s a second of waiting)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.evaluate("() => { window.__atlasCalmSince = undefined; }")
    try:
        page.wait_for_function(_CALM, arg=[_BUSY, quiet], polling=50, timeout=timeout)
    except PlaywrightTimeout:
        raise AssertionError(f"the app was still running after {timeout / 1000:.0f} s") from None


def click_until(page, button, done, timeout: float = 120_000, *, wait: float = 15_000, until_gone: bool = False) -> None:
    """Click ``button`` until ``done`` shows (``until_gone``: until it is gone): a click that lands
    while Streamlit swaps the page's elements (a rerun) can be swallowed, and a button being
    redrawn is not clickable for a moment. ``done`` is a locator, or a pattern an element of the
    current script run reads (looked for every 25 ms, :func:`soon`); each try waits ``wait`` ms
    for it. The waits are ``wait_for``'s, not ``expect``'s: an ``expect`` that times out builds
    an accessibility snapshot of the whole page for its message (about 0.3 CPU-s of Chromium on
    a long page), once per try."""
    from playwright.sync_api import Error as PlaywrightError

    def shown(ms: float | None) -> bool:
        if isinstance(done, str):
            if ms is None:
                return shows(page, done)
            soon(page, done, ms)
        elif ms is None:
            return done.first.is_visible() != until_gone
        else:
            done.first.wait_for(state="detached" if until_gone else "visible", timeout=ms)
        return True

    deadline = time.monotonic() + timeout / 1000
    while not shown(None):
        try:
            button.first.click(timeout=10_000)
        except PlaywrightError:      # its TimeoutError: gone or redrawn; look again
            pass
        try:
            shown(wait)
        except PlaywrightError:
            if time.monotonic() > deadline:
                raise


def open_expander(page, label: str, timeout: float = 60_000) -> None:
    """Open the expander titled ``label`` and return once it shows open. A click that lands while
    a script run redraws the page can be undone by that redraw (the expander's content was then
    hidden when the test read the page: one run in about ten under load), so the expander is
    clicked again, once the run is over, until it holds open."""
    details = page.locator('[data-testid="stExpander"] details').filter(
        has=page.locator("summary").filter(has_text=label)).first
    details.wait_for(state="attached", timeout=timeout)
    deadline = time.monotonic() + timeout / 1000
    while True:
        wait_idle(page, timeout=timeout)
        if details.evaluate("d => d.open"):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the expander {label!r} did not stay open")
        details.locator("summary").first.click()


def choose(page, box, count: int, name: str | None = None, tries: int = 6) -> list[str]:
    """Open the selectbox ``box``, read its ``count`` options and pick ``name`` (the first option
    when None); return the options as read. A rerun of a busy app can close the list between any
    two steps (the list was open, then gone when its first option was read: one CI run), so the
    whole step, from the click that opens the list, is tried again."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect

    options = page.get_by_role("option")
    for attempt in range(tries):
        try:
            box.click()
            expect(options).to_have_count(count, timeout=10_000)
            names = [n.strip() for n in options.all_inner_texts()]     # one read: no gap for a rerun
            assert len(names) == count, names                          # the list closed while it was read
            picked = names[0] if name is None else name
            page.get_by_role("option", name=picked, exact=True).click(timeout=5_000)
            expect(box.locator("input")).to_have_value(picked, timeout=10_000)
            return names
        except (AssertionError, PlaywrightError):
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
    raise AssertionError("unreachable")


_BUSY = ('[data-testid="stApp"]:not([data-test-script-state="notRunning"]), [data-stale="true"], '
         '[data-testid="stStatusWidgetRunningIcon"]')
_CALM = """([busy, quiet]) => {
    const now = performance.now();
    if (document.querySelector(busy)) { window.__atlasCalmSince = undefined; return false; }
    if (window.__atlasCalmSince === undefined) { window.__atlasCalmSince = now; return false; }
    return now - window.__atlasCalmSince >= quiet;
}"""


# A test that races a run of the app (a Cancel, a new submit or another session's check while it
# goes) must see the run's moments as they come and act on them at once: Playwright's own waits
# look less and less often (every 0.5-1 s after their first moments), long enough for a fast
# machine to start and end a whole run in between, and a click from the test is one more round
# trip. These look in the page itself every 25 ms, and press there.

#: the elements the current script run has drawn: Streamlit keeps the previous run's on the page,
#: marked stale, until the run draws them again or ends
FRESH = '[data-testid="stElementContainer"]:not([data-stale="true"])'

_SHOWS = """([fresh, pattern]) => [...document.querySelectorAll(fresh)].some(
    e => new RegExp(pattern).test(e.innerText.trim()))"""
_PRESS_WHEN = """([fresh, pattern, label, running]) => {
    const drawn = [...document.querySelectorAll(fresh)];
    const button = name => drawn.map(e => e.querySelector('button')).find(b => b && b.innerText.trim() === name);
    if (!button(running)) return 'ended';
    if (!drawn.some(e => new RegExp(pattern).test(e.innerText.trim()))) return '';
    button(label).click();
    return 'pressed';
}"""
_OUTCOME = """([fresh, nothing, result]) => {
    const texts = [...document.querySelectorAll(fresh)].map(e => e.innerText.trim());
    if (texts.some(t => new RegExp(nothing).test(t))) return 'nothing';
    const found = texts.map(t => t.match(new RegExp(result))).find(Boolean);
    return found ? found[1] : '';
}"""


def shows(page, pattern: str) -> bool:
    """Whether an element of the current script run reads ``pattern`` now."""
    return bool(page.evaluate(_SHOWS, [FRESH, pattern]))


def soon(page, pattern: str, timeout: float = 120_000) -> None:
    """Until an element of the current script run reads ``pattern`` (a regular expression on its
    text), looked for every 25 ms."""
    page.wait_for_function(_SHOWS, arg=[FRESH, pattern], polling=25, timeout=timeout)


def press_when(page, pattern: str, label: str, running: str = "Cancel", timeout: float = 120_000) -> bool:
    """Press the button ``label`` the moment an element of the current script run reads ``pattern``
    (e.g. a run's first progress), in the page itself, while the run's button ``running`` shows:
    a DOM click, one event, which a redraw cannot split as it can a mouse's press and release.
    False, pressing nothing, when that button has gone first: the run ended before."""
    pressed = page.wait_for_function(_PRESS_WHEN, arg=[FRESH, pattern, label, running], polling=25,
                                     timeout=timeout).json_value()
    return pressed == "pressed"


def outcome(page, nothing: str, result: str, timeout: float = 120_000) -> str | None:
    """How a page's run ended, once its script run draws it: None when an element reads ``nothing``
    (the page's text when it holds no result), else what the first group of ``result`` catches in
    the result shown (e.g. its number of rows)."""
    found = page.wait_for_function(_OUTCOME, arg=[FRESH, nothing, result], polling=25, timeout=timeout).json_value()
    return None if found == "nothing" else found
