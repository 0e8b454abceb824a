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


def _opened(link_token: str, user: dict, provider: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    at.secrets, at.user = _auth(provider), user
    at.query_params["ws"] = link_token
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_kept_view_is_private_to_its_author_until_shared(provider, fresh_history):
    at = _app(_auth(provider), ALICE, page="data_model.py")
    ws = at.session_state["workspace"]
    at.session_state["demo_key"] = None                                  # as after an upload
    at.run()
    at.button(key="share_view").click().run()                             # "Keep this view"
    token = at.session_state["share_token"][1]
    assert at.toggle(key="share_team").value is False
    assert any("Only you can open" in c.value for c in at.sidebar.caption)

    bob = _opened(token, BOB, provider)
    assert any("private to the colleague who kept them: nothing of them is shown" in e.value for e in bob.error)
    assert "share_token" not in bob.session_state and bob.session_state["demo_key"]   # the demo instead
    mine = _opened(token, ALICE, provider)
    assert mine.session_state["share_token"][1] == token and not mine.session_state["demo_key"]
    assert mine.session_state["workspace"].fingerprint == ws.fingerprint

    at.toggle(key="share_team").set_value(True).run()                     # "Shared with the team"
    assert any("Every signed-in colleague can open" in c.value for c in at.sidebar.caption)
    bob = _opened(token, BOB, provider)
    assert bob.session_state["share_token"][1] == token and not bob.session_state["demo_key"] and not bob.error
    assert bob.session_state["workspace"].fingerprint == ws.fingerprint
    assert not any(t.key == "share_team" for t in bob.toggle)             # only its author may close it again


def _table(at, column: str):
    """The page's table that has ``column`` (the trail: git_commit; kept settings: constraints)."""
    return next((d.value for d in at.dataframe if column in d.value.columns), None)


def test_the_trail_filters_by_author_and_exports_every_record(provider, small_audit, fresh_history, downloads):
    import io

    from core.model.guarantee import guarantee_line
    from dashboard.history import store

    db = store()
    bob = Author(ISSUER, "bob-0002", "Bob Stone")
    for who in (Author(ISSUER, "alice-0001", "Alice Martin"), bob):
        db.share(db.save(small_audit, owner=who, title=f"{who.name}'s audit"), owner=who)
    at = _app(_auth(provider), BOB, page="history.py")
    assert sorted(_table(at, "git_commit")["author"]) == ["Alice Martin", "Bob Stone"]
    at.multiselect(key="hi_tr_author").set_value(["Alice Martin"]).run()
    assert _table(at, "git_commit")["author"].tolist() == ["Alice Martin"]
    csv = pd.read_csv(io.StringIO(downloads["hi_dl_trail"]))
    assert csv["author_subject"].tolist() == ["alice-0001"] and csv["author_issuer"].tolist() == [ISSUER]
    assert csv["guarantee"].tolist() == ["estimated"]
    assert csv["guarantee_text"].tolist() == [guarantee_line(small_audit.guarantee).split(": ", 1)[1]]
    assert {"settings", "package_version", "git_commit", "data_sha256", "model_sha256"} <= set(csv.columns)


def test_feature_settings_are_kept_private_then_shared(provider, fresh_history):
    alice = _app(_auth(provider), ALICE, page="history.py")
    alice.text_input(key="hi_set_name").set_value("credit, as agreed").run()
    alice.button(key="hi_set_keep").click().run()
    assert _table(alice, "constraints")["name"].tolist() == ["credit, as agreed"]
    bob = _app(_auth(provider), BOB, page="history.py")
    assert _table(bob, "constraints") is None
    alice.button(key="hi_set_share").click().run()                         # "Share with the team"
    bob.run()
    kept = _table(bob, "constraints")
    assert kept[["name", "author", "shared"]].values.tolist() == [["credit, as agreed", "Alice Martin", True]]
    bob.button(key="hi_set_apply").click().run()
    assert any("Feature settings applied" in s.value for s in bob.success)
    assert not any(b.key == "hi_set_del" for b in bob.button)                # only its author deletes it


def test_a_secrets_file_that_cannot_be_read_stops_the_app(tmp_path, monkeypatch):
    """Sign-in may be meant: a secrets file with a TOML error is named, never taken for no sign-in."""
    bad = tmp_path / "secrets.toml"
    bad.write_text('[auth]\nredirect_uri = "https://atlas.example.org/oauth2callback\n')     # an unclosed string
    monkeypatch.setattr(auth, "_secrets_files", lambda: [tmp_path / "absent.toml", bad])
    monkeypatch.setattr(auth.st.secrets, "load_if_toml_exists", lambda: False)           # as Streamlit reads it
    cfg = auth.config()
    assert cfg is not None and not cfg.providers
    assert len(cfg.problems) == 1 and str(bad) in cfg.problems[0] and "cannot be read" in cfg.problems[0]
