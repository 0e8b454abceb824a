"""Sign-in for a team's server: Streamlit's own OpenID Connect support (``st.login``,
``st.user``, ``st.logout``, through Authlib), configured in the app's secrets.

An ``[auth]`` section in ``.streamlit/secrets.toml`` (or a file named by Streamlit's
``secrets.files`` option) turns it on::

    [auth]
    redirect_uri = "https://atlas.example.org/oauth2callback"
    cookie_secret = "…a long random text…"
    client_id = "…"
    client_secret = "…"
    server_metadata_url = "https://login.example.org/.well-known/openid-configuration"

(or one ``[auth.<name>]`` section per provider, with its client id, secret and metadata
URL; each gets its own button). Then every page asks the user to sign in first, the
user's name shows in the sidebar with "Sign out", and what they store belongs to them:
the ID token's issuer and subject (:class:`core.audit.history.Author`).

Without ``[auth]`` the app runs as before: a local analyst's tool (every audit is
``local``), or a public demo whose visitors get anonymous keys. An ``[auth]`` section
that is incomplete (a missing cookie secret, a redirect URI that is not the app's
``/oauth2callback``, a provider without its client id) or a secrets file that cannot be
read stops every page with a message saying what to fix: the server never falls back to
no sign-in. A provider that does not answer is said on the sign-in screen (Streamlit's
own answer would be a bare "Authentication error" page); users already signed in keep
working, since their identity is in a cookie signed with the cookie secret.

Signing out ends the session: its model worker (a model run in its own sandboxed
process) is stopped, its process pools ended, its state emptied, then Streamlit clears
the identity cookie and the browser starts a new session at the sign-in screen.
"""

from __future__ import annotations

import json
import threading
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import streamlit as st

from core.audit.history import Author
from core.errors import HistoryError
from dashboard.ui import plain

AUTHOR = "_signed_in_author"     # this run's Author (set by gate(); read by current())
PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")
CHECK_SECONDS = 3.0              # how long the sign-in screen waits for the provider's metadata
_REMEMBER = {True: 60.0, False: 5.0}   # seconds a provider's answer (reachable or not) is trusted
_probes: dict[str, tuple[float, str | None, str | None]] = {}   # url -> (when, problem, issuer)
_probes_lock = threading.Lock()


@dataclass(frozen=True)
class SignIn:
    """The ``[auth]`` configuration as read: each provider's metadata URL (``default`` for
    the flat form), and what is wrong with it (sign-in cannot work until fixed)."""
    providers: dict[str, str]
    problems: tuple[str, ...] = ()


def read_config(section: Mapping[str, Any] | None) -> SignIn | None:
    """The sign-in configuration of an ``[auth]`` section; None without one (no sign-in)."""
    if section is None:
        return None
    problems = _redirect_problems(section)
    named = {k: v for k, v in section.items() if isinstance(v, Mapping)}
    if any(k in section for k in PROVIDER_KEYS):
        named = {"default": section, **named}
    if not named:
        problems.append('no provider is configured: give "client_id", "client_secret" and "server_metadata_url" '
                        "under [auth] (or under [auth.<name>] for each provider).")
    providers = {}
    for name, conf in named.items():
        problem = _provider_problem(name, conf)
        if problem:
            problems.append(problem)
        else:
            providers[name] = str(conf["server_metadata_url"]).strip()
    return SignIn(providers, tuple(problems))


def _redirect_problems(section: Mapping[str, Any]) -> list[str]:
    """What is wrong with the section's redirect address and cookie secret."""
    problems = []
    redirect = str(section.get("redirect_uri") or "").strip()
    if not redirect:
        problems.append('"redirect_uri" is missing: the app\'s own address followed by /oauth2callback, '
                        'e.g. "https://atlas.example.org/oauth2callback", registered with the provider.')
    elif not redirect.rstrip("/").endswith("/oauth2callback"):
        problems.append(f'"redirect_uri" is {redirect!r}; it must end with /oauth2callback (Streamlit answers '
                        "the provider there).")
    if not str(section.get("cookie_secret") or "").strip():
        problems.append('"cookie_secret" is missing: a long random text that signs the identity cookie, e.g. '
                        "the output of `python -c 'import secrets; print(secrets.token_hex(32))'`. Keep it "
                        "secret and the same across restarts, or everyone must sign in again.")
    return problems


def _provider_problem(name: str, conf: Mapping[str, Any]) -> str | None:
    """What is wrong with one provider's settings (None: nothing)."""
    missing = [k for k in PROVIDER_KEYS if not str(conf.get(k) or "").strip()]
    where = "[auth]" if name == "default" else f"[auth.{name}]"
    if "_" in name:
        return f"{where}: a provider's name may not contain '_' (Streamlit refuses it)."
    if missing:
        return f"{where} lacks {', '.join(missing)}."
    return None


def _secrets_files() -> list[Path]:
    from streamlit import config

    return [Path(p) for p in (config.get_option("secrets.files") or [])]


def _auth_section() -> Mapping[str, Any] | None:
    """The secrets' ``[auth]`` section; a secrets file that exists but cannot be read is
    an error (sign-in may be meant: the server must not run without it)."""
    if st.secrets.load_if_toml_exists():
        section = st.secrets.get("auth")
        return dict(section) if isinstance(section, Mapping) else None
    for path in _secrets_files():
        if path.is_file():
            try:
                tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                return {"_unreadable": f"{path} cannot be read ({exc})"}
    return None


def config() -> SignIn | None:
    section = _auth_section()
    if section is not None and "_unreadable" in section:
        return SignIn({}, (f"The secrets file {section['_unreadable']}: fix it so that the server knows "
                           "whether and how users sign in.",))
    return read_config(section)


def provider_problem(url: str) -> tuple[str | None, str | None]:
    """(what is wrong with the provider at ``url``, its issuer): its OpenID metadata is
    fetched (within :data:`CHECK_SECONDS`) and must name its issuer and endpoints. The answer
    is kept a minute (a failure: a few seconds, so that a provider back up is soon seen)."""
    now = time.monotonic()
    with _probes_lock:
        held = _probes.get(url)
    if held is not None and now - held[0] < _REMEMBER[held[1] is None]:
        return held[1], held[2]
    problem, issuer = None, None
    try:
        with urllib.request.urlopen(url, timeout=CHECK_SECONDS) as answer:
            meta = json.loads(answer.read(1_000_000))
        if not isinstance(meta, dict) or not meta.get("authorization_endpoint") or not meta.get("issuer"):
            problem = "its metadata names no issuer or authorization endpoint"
        else:
            issuer = str(meta["issuer"])
    except (urllib.error.URLError, OSError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    with _probes_lock:
        _probes[url] = (now, problem, issuer)
    return problem, issuer


def _user() -> Mapping[str, Any]:
    try:
        return st.user.to_dict()
    except Exception:  # noqa: BLE001 - no user information (a bare script run): nobody is signed in
        return {}


def signed_in(cfg: SignIn) -> Author | None:
    """The signed-in user as an :class:`Author`, or None. The issuer is the ID token's
    ``iss``, else the provider's own (its metadata)."""
    user = _user()
    if not user.get("is_logged_in"):
        return None
    issuer = user.get("iss")
    if not issuer:
        url = cfg.providers.get(str(user.get("provider") or "default")) or next(iter(cfg.providers.values()), "")
        issuer = provider_problem(url)[1] if url else None
    name = user.get("name") or user.get("preferred_username") or user.get("email") or user.get("sub")
    return Author(issuer=str(issuer or ""), subject=str(user.get("sub") or ""), name=str(name or ""))


def current() -> Author | None:
    """This session's signed-in user (None: no sign-in on this server)."""
    author = st.session_state.get(AUTHOR)
    return author if isinstance(author, Author) else None


def gate() -> Author | None:
    """First thing of every run. Without sign-in configured: None, and the app runs as
    before. With it: the signed-in user; anyone else gets the sign-in screen (or what
    is wrong with the configuration) and the run stops there."""
    cfg = config()
    if cfg is None:
        st.session_state.pop(AUTHOR, None)
        return None
    if cfg.problems:
        _closed("Sign-in is configured in this server's secrets ([auth]) but cannot work: "
                + " ".join(cfg.problems) + " The administrator fixes the secrets file and restarts the app; "
                "see docs/deploy-team.md.")
    try:
        author = signed_in(cfg)
    except HistoryError as exc:
        _closed(f"The sign-in provider's answer does not say who you are: {exc}")
    if author is None:
        st.session_state.pop(AUTHOR, None)
        _sign_in_screen(cfg)
        st.stop()
    st.session_state[AUTHOR] = author
    return author


def _closed(message: str) -> None:
    st.title("Counterfactual Atlas")
    st.error(plain(message), icon=":material/lock:")
    st.stop()


def _sign_in_screen(cfg: SignIn) -> None:
    st.title("Counterfactual Atlas")
    st.markdown("This server belongs to a team. **Sign in** to run audits and see the ones your colleagues "
                "shared; what you run stays private to you until you share it.")
    for name, url in cfg.providers.items():
        problem, _ = provider_problem(url)
        label = "Sign in" if name == "default" else f"Sign in with {name}"
        if problem is None:
            if st.button(label, key=f"auth_login_{name}", type="primary", icon=":material/login:"):
                st.login(name)
            continue
        st.error(f"The sign-in provider does not answer, so nobody can sign in right now: {plain(url)} "
                 f"({plain(problem)}). Try again in a minute; if it stays so, tell the administrator. "
                 "Users already signed in keep working.", icon=":material/cloud_off:")
        if st.button("Try again", key=f"auth_retry_{name}"):
            with _probes_lock:
                _probes.pop(url, None)
            st.rerun()


def sidebar(author: Author) -> None:
    """The signed-in user's name and "Sign out" (in the sidebar)."""
    st.markdown(f"Signed in as **{plain(author.name)}**")
    if st.button("Sign out", key="auth_logout", icon=":material/logout:"):
        end_session()
        st.logout()
        st.stop()


def end_session() -> None:
    """Free what this session holds before its user leaves: the sandboxed model workers
    it started (killed now), its process pools, and its state (tables, results)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from core.intake.worker import ModelWorker
    from core.optimal.batch import release_pools

    for key in [k for k in st.session_state if str(k).startswith("_worker_")]:
        held = st.session_state.get(key)
        worker = held[-1] if isinstance(held, tuple) and held else None
        if isinstance(worker, ModelWorker):
            worker.stop()
    ctx = get_script_run_ctx()
    release_pools(("session", ctx.session_id if ctx is not None else None))
    st.session_state.clear()
