"""A real OpenID Connect provider for the sign-in tests: the oidc-provider-mock package
(Authlib's server side, a Flask app) served on a free port of 127.0.0.1 by a thread of
the test process. Any client id and secret are accepted; its authorisation page offers
the users given (a button each) or any subject typed in. It talks plain HTTP, which
Authlib takes from a loopback address (RFC 8252) as a deployment's provider over HTTPS."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


@contextlib.contextmanager
def running_provider(users: dict[str, dict[str, str]] | None = None) -> Iterator[str]:
    """The provider's base URL (its issuer); ``users``: subject -> claims (name, email)."""
    import oidc_provider_mock
    import werkzeug.serving

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
