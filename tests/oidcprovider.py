"""A real OpenID Connect provider for the sign-in tests: the oidc-provider-mock package
(Authlib's server side, a Flask app) served on a free port of 127.0.0.1 by a thread of
the test process. Any client id and secret are accepted; its authorisation page offers
the users given (a button each) or any subject typed in. The provider talks plain HTTP
(Authlib's server refuses that unless AUTHLIB_INSECURE_TRANSPORT is set: it is, here)."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator


@contextlib.contextmanager
def running_provider(users: dict[str, dict[str, str]] | None = None) -> Iterator[str]:
    """The provider's base URL (its issuer); ``users``: subject -> claims (name, email)."""
    import oidc_provider_mock
    import werkzeug.serving

    os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")
    app = oidc_provider_mock.app(user_claims=[oidc_provider_mock.User(sub=sub, claims=claims)
                                              for sub, claims in (users or {}).items()])
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def metadata_url(base: str) -> str:
    return f"{base}/.well-known/openid-configuration"
