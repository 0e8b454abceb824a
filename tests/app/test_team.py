"""A team's server in the app (AppTest; the browser test drives the real sign-in): with an
``[auth]`` section every page asks to sign in first, a broken configuration or a provider
that is down is said and nothing else is shown, a signed-in user's name is in the sidebar
and the history shows them their own audits and those shared with them, signing out ends
the session and its model worker, and a history database that cannot be reached leaves
the app working with the session's audits kept until it answers."""

from __future__ import annotations

import secrets

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from conftest import ROOT, demo_credit
from oidcprovider import metadata_url, running_provider
from sklearn.neural_network import MLPClassifier
from streamlit.testing.v1 import AppTest

from core.audit import run_audit
from core.audit.history import Author
from core.intake.worker import ModelWorker
from dashboard import auth, deploy

ISSUER = "https://login.example.org"
ALICE = {"is_logged_in": True, "iss": ISSUER, "sub": "alice-0001", "name": "Alice Martin",
         "email": "alice@example.org"}
BOB = {"is_logged_in": True, "iss": ISSUER, "sub": "bob-0002", "name": "Bob Stone"}


def _auth(url: str, **changes) -> dict:
    section = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": secrets.token_hex(32),
               "client_id": "atlas-team", "client_secret": "atlas-team-secret", "server_metadata_url": url}
    section.update(changes)
    return {"auth": {k: v for k, v in section.items() if v is not None}}


def _app(secrets_: dict | None = None, user: dict | None = None, page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    if secrets_ is not None:
        at.secrets = secrets_
    if user is not None:
        at.user = user
    at.run()
    if page is not None and not at.exception:
        at.switch_page(f"../pages/{page}").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def provider():
    with running_provider() as base:
        yield metadata_url(base)


@pytest.fixture(scope="module")
def small_audit():
    _, _, model, ens, X, schema = demo_credit()
    return run_audit(ens, X, schema=schema, target=1, max_rows=30, n_jobs=1, model=model, n_perm=200, n_boot=100,
                     local_rules_per_group=0, tcrex=False)


def test_the_auth_section_is_read_and_what_is_wrong_is_named():
    url = "https://login.example.org/.well-known/openid-configuration"
    assert auth.read_config(None) is None                              # no [auth]: the app as before
    ok = auth.read_config(_auth(url)["auth"])
    assert ok.providers == {"default": url} and not ok.problems
    no_secret = auth.read_config(_auth(url, cookie_secret=None)["auth"])
    assert len(no_secret.problems) == 1 and '"cookie_secret" is missing' in no_secret.problems[0]
    assert "/oauth2callback" in auth.read_config(_auth(url, redirect_uri="https://x.org/")["auth"]).problems[0]
    named = auth.read_config({"redirect_uri": "https://x.org/oauth2callback", "cookie_secret": "s" * 64,
                              "okta": {"client_id": "a", "client_secret": "b", "server_metadata_url": url},
                              "azure": {"client_id": "a", "server_metadata_url": url},
                              "my_idp": {"client_id": "a", "client_secret": "b", "server_metadata_url": url}})
    assert named.providers == {"okta": url}
    assert any("[auth.azure] lacks client_secret" in p for p in named.problems)
    assert any("[auth.my_idp]: a provider's name may not contain '_'" in p for p in named.problems)
    bare = auth.read_config({"redirect_uri": "https://x.org/oauth2callback", "cookie_secret": "s" * 64})
    assert any("no provider is configured" in p for p in bare.problems)


def test_every_page_asks_to_sign_in_first(provider):
    at = _app(_auth(provider))
    assert [t.value for t in at.title] == ["Counterfactual Atlas"]
    assert [b.label for b in at.button] == ["Sign in"]
    assert at.session_state["workspace"] is None                       # nothing was built, nothing shown
    assert not at.sidebar.markdown and not at.dataframe
    at.switch_page("../pages/history.py").run()                        # a page's address: still the sign-in
    assert not at.exception and [b.label for b in at.button] == ["Sign in"] and not at.dataframe


def test_a_provider_that_is_down_and_a_missing_cookie_secret_are_said():
    down = _app(_auth("http://127.0.0.1:9/.well-known/openid-configuration"))    # port 9: nothing listens
    assert any("The sign-in provider does not answer" in e.value and "127.0.0.1:9" in e.value for e in down.error)
    assert [b.label for b in down.button] == ["Try again"]
    broken = _app(_auth("https://login.example.org/.well-known/openid-configuration", cookie_secret=None))
    assert any('"cookie_secret" is missing' in e.value for e in broken.error)
    assert not broken.button and broken.session_state["workspace"] is None


def test_signed_in_users_see_their_audits_and_what_colleagues_shared(provider, small_audit, fresh_history):
    from dashboard.history import store

    db = store()
    alice = Author(ISSUER, "alice-0001", "Alice Martin")
    draft = db.save(small_audit, owner=alice, title="alice's draft")
    shared = db.save(small_audit, owner=alice, title="alice's finished audit")
    db.share(shared, owner=alice)
    at = _app(_auth(provider), BOB, page="history.py")
    assert any(m.value == "Signed in as **Bob Stone**" for m in at.sidebar.markdown)
    table = at.dataframe[0].value
    assert table["id"].tolist() == [shared] and table["author"].tolist() == ["Alice Martin"]
    assert table["shared"].tolist() == [True]
    assert [t.label for t in at.tabs] == ["Re-open", "Audit trail", "Compare two", "Share", "Delete"]
    assert any("only its author can delete an audit" in i.value for i in at.info)
    at.button(key="hi_open").click().run()                                # read-only: re-opened, never changed
    assert at.session_state["fa_result"]["audit"].rows.shape[0] == 30

    linked = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    linked.secrets, linked.user = _auth(provider), BOB
    linked.query_params["audit"] = str(draft)                              # a link to alice's draft
    linked.run()
    linked.switch_page("../pages/history.py").run()
    assert any(f"Audit {draft} is private to its author: nothing of it is shown" in e.value for e in linked.error)
    assert "alice's draft" not in str(linked.dataframe[0].value.to_dict())

    mine = _app(_auth(provider), ALICE, page="history.py")
    assert mine.dataframe[0].value["id"].tolist() == [shared, draft]
    mine.selectbox(key="hi_share_id").set_value(draft).run()
    mine.button(key="hi_share").click().run()
    assert db.list(owner=Author(ISSUER, "bob-0002"))["id"].tolist() == [shared, draft]


def test_signing_out_ends_the_session_and_its_worker(provider):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=80), "b": rng.normal(size=80)})
    mlp = MLPClassifier(hidden_layer_sizes=(4,), max_iter=200, random_state=0).fit(X, (X.a > X.b).astype(int))
    worker = ModelWorker(sio.dumps(mlp), "mlp.skops")
    try:
        model = worker.model(identity="mlp")
        assert worker.alive
        at = _app(_auth(provider), ALICE)
        at.session_state["_worker_model"] = (("mlp", False), model, worker)   # as dashboard.caching keeps it
        at.run()
        at.button(key="auth_logout").click().run()
        assert not worker.alive                                             # its sandboxed process is gone
        assert "workspace" not in at.session_state and "_worker_model" not in at.session_state
    finally:
        worker.stop()


def test_an_unreachable_history_keeps_the_session_and_its_audits(page_app, fresh_history, monkeypatch, tmp_path):
    monkeypatch.setenv("ATLAS_HISTORY_URL", "postgresql+psycopg://atlas:s3cret@127.0.0.1:9/atlas")
    deploy.settings.cache_clear()
    at = page_app("fairness_audit.py")
    for key, value in (("fa_rows", 10), ("fa_perm", 200), ("fa_boot", 100), ("fa_local", 0)):
        at.number_input(key=key).set_value(value)
    at.button(key="fa_go").click().run()
    assert not at.exception, at.exception
    assert any("cannot be opened" in w.value and "kept in this session" in w.value for w in at.warning)
    assert not any("s3cret" in w.value for w in at.warning)
    assert len(at.session_state["fa_result"]["audit"].rows) == 10             # the result is on screen
    at.switch_page("../pages/history.py").run()
    assert not at.exception
    assert any("The audit history is unavailable" in e.value for e in at.error)
    assert any("1 audit of this session wait" in i.value for i in at.info)
    at.switch_page("../pages/optimal_cf.py").run()                             # the rest of the app works
    assert not at.exception and not at.error

    monkeypatch.setenv("ATLAS_HISTORY_URL", f"sqlite:///{tmp_path / 'back.sqlite'}")   # the database is back
    deploy.settings.cache_clear()
    at.switch_page("../pages/history.py").run()
    assert any("1 audit of this session that could not be stored before is now in the history" in s.value
               for s in at.success)
    assert at.dataframe[0].value["rows"].tolist() == [10] and at.session_state["history_unsaved"] == []
