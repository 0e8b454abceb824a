"""A team's day on one server (issue #63): a real OpenID Connect provider (oidc-provider-mock,
tests/oidcprovider.py) and a real PostgreSQL (tests/pgcluster.py). Alice signs in, runs two
audits and shares one; Bob signs in, sees the shared audit read-only and nothing of Alice's
private one, even through its link; the server restarts, and everyone is still signed in
with everything still there; signing out ends the session. Screenshots of each page go to
$ATLAS_SHOTS when set (browser_util.shots_dir)."""

from __future__ import annotations

import re
import secrets
import socket

import pgcluster
import pytest
from browser_util import browser_page, running_app, shots_dir, wait_idle
from oidcprovider import metadata_url, running_provider
from pgcluster import new_database

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pg_cluster = pgcluster.pg_cluster      # the fixture: the session's PostgreSQL, stopped at its end

USERS = {"alice": {"name": "Alice Martin", "email": "alice@example.org"},
         "bob": {"name": "Bob Stone", "email": "bob@example.org"}}
SHARED = re.compile(r"^#2 · .* · Alice Martin$")     # Alice's shared audit, as the History page names it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def team(tmp_path_factory, pg_cluster):
    """(serve, shots): ``serve()`` starts the team's server (always on the same port, with the
    same secrets and database, as a restart would); the provider runs for the whole module."""
    folder = tmp_path_factory.mktemp("team")
    port = _free_port()
    with running_provider(USERS) as issuer:
        secrets_file = folder / "secrets.toml"
        secrets_file.write_text(
            "[auth]\n"
            f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
            f'cookie_secret = "{secrets.token_hex(32)}"\n'
            'client_id = "atlas-team"\n'
            'client_secret = "atlas-team-secret"\n'
            f'server_metadata_url = "{metadata_url(issuer)}"\n')
        env = {"ATLAS_HISTORY_URL": new_database("team_day")}

        def serve():
            return running_app(env=env, port=port, args=("--secrets.files", str(secrets_file)))

        yield serve


def _sign_in(page, url: str, user: str, shots, name: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    button = page.get_by_role("button", name="Sign in")
    button.wait_for(timeout=90_000)
    page.screenshot(path=str(shots / f"team_{name}_sign_in.png"), full_page=True)
    assert page.locator('[data-testid="stSidebarNav"]').count() == 0        # no page before signing in
    button.click()
    page.get_by_role("button", name=user, exact=True).click(timeout=60_000)   # the provider's page
    expect(_sidebar_user(page)).to_have_text(f"Signed in as {USERS[user]['name']}", timeout=90_000)


def _audit(page, rows: int) -> None:
    """An audit of ``rows`` rows, over once the page shows its own count of rows audited: the
    previous audit's result (and its Report button) stays on the page while this one runs, and
    on a loaded machine the run could start after a short quiet spell (the second audit was then
    left unfinished by the next navigation, and the first one shared in its place)."""
    from playwright.sync_api import expect

    box = page.get_by_role("spinbutton", name="At most this many rows")
    box.wait_for(timeout=120_000)
    box.fill(str(rows))
    box.press("Tab")
    wait_idle(page)
    page.get_by_role("button", name=f"Audit {rows} rows").click()
    audited = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').filter(has_text=re.compile(r"^Rows audited$")))
    expect(audited.locator('[data-testid="stMetricValue"]')).to_have_text(f"{rows:,}", timeout=240_000)
    expect(page.get_by_role("button", name="Report (HTML)")).to_be_visible(timeout=60_000)
    wait_idle(page)


def _history(page, url: str):
    page.goto(url + "/history")
    page.get_by_role("heading", name="Audit history").wait_for(timeout=90_000)
    wait_idle(page)
    return page


def _sidebar_user(page):
    """Who the sidebar says is signed in."""
    return page.get_by_test_id("stSidebarUserContent").get_by_text(re.compile(r"^Signed in as "))


def _choice(page):
    """The Re-open tab's select box (its value: the audit it offers first)."""
    return page.get_by_role("combobox", name="Audit").first


def _no_exception_then_shot(page, path) -> None:
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(path), full_page=True)


def test_a_team_day(team, tmp_path):
    from playwright.sync_api import expect

    shots = shots_dir(tmp_path)
    with browser_page(own_context=True) as alice, browser_page(own_context=True) as bob:
        with team() as url:
            _sign_in(alice, url, "alice", shots, "alice")
            alice.goto(url + "/fairness_audit")
            _audit(alice, 12)                                    # her draft, private: #1
            _audit(alice, 10)                                    # the audit she shares: #2, her newest
            _history(alice, url)
            expect(alice.locator('[data-testid="stDataFrame"]').first).to_be_visible()
            alice.get_by_role("tab", name="Share").click()
            alice.get_by_role("button", name="Share with the team").click()
            expect(alice.get_by_text("Shared with the team: every signed-in colleague sees it")).to_be_visible(
                timeout=60_000)
            _no_exception_then_shot(alice, shots / "team_alice_history.png")

            _sign_in(bob, url, "bob", shots, "bob")
            _history(bob, url)
            expect(_choice(bob)).to_have_value(SHARED, timeout=60_000)   # Re-open offers Alice's shared audit
            assert bob.get_by_text(re.compile(r"^#1 · ")).count() == 0
            bob.get_by_role("tab", name="Delete").click()
            expect(bob.get_by_text("only its author can delete an audit")).to_be_visible()
            _no_exception_then_shot(bob, shots / "team_bob_history.png")
            bob.goto(url + "/history?audit=1")                   # a link to Alice's private draft
            expect(bob.get_by_text("private to its author: nothing of it is shown")).to_be_visible(timeout=90_000)
            assert bob.get_by_text("#1 ·").count() == 0 and bob.get_by_text("12 rows").count() == 0
            _no_exception_then_shot(bob, shots / "team_bob_private_link.png")

        with team() as url:                                      # the server restarts
            _history(bob, url)
            expect(_sidebar_user(bob)).to_have_text("Signed in as Bob Stone", timeout=60_000)
            expect(_choice(bob)).to_have_value(SHARED, timeout=60_000)
            _no_exception_then_shot(bob, shots / "team_bob_after_restart.png")
            _history(alice, url)
            expect(_sidebar_user(alice)).to_have_text("Signed in as Alice Martin", timeout=60_000)
            alice.get_by_role("tab", name="Audit trail").click()
            expect(alice.get_by_role("button", name="Download the audit trail (CSV)")).to_be_visible()
            _no_exception_then_shot(alice, shots / "team_alice_after_restart.png")
            alice.get_by_role("button", name="Sign out").click()
            alice.get_by_role("button", name="End session").click(timeout=60_000)   # the provider's own page
            expect(alice.get_by_role("button", name="Sign in")).to_be_visible(timeout=90_000)
            _no_exception_then_shot(alice, shots / "team_alice_signed_out.png")
