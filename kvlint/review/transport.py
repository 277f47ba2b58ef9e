"""HTTP for the GitHub client: a total deadline per request, no redirects, the token checked and redacted.

urllib's timeout bounds each socket operation only: a server that sends a byte every few seconds holds a
request for ever. `Deadline` shuts the request's sockets down when its total time is up, from the moment
each socket exists (TLS handshake and proxy tunnel included). Redirects are refused: urllib would resend
the Authorization header to wherever they point.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.request

from kvlint.errors import GitHubError


def checked_token(raw: str) -> str:
    """The token without surrounding whitespace (a file read with a trailing newline); any other space,
    control or non-ASCII character is refused, without echoing the value."""
    token = raw.strip()
    if not token:
        raise GitHubError("no token: set GITHUB_TOKEN to post the review")
    if not all("!" <= char <= "~" for char in token):
        raise GitHubError(
            "GITHUB_TOKEN holds a space, control or non-ASCII character: refused (its value is not shown)"
        )
    return token


def redactor(*secrets: str):
    """A function that replaces each secret (as given and stripped) by *** in a text."""
    variants = sorted({v for s in secrets if s for v in (s, s.strip()) if len(v) >= 4}, key=len, reverse=True)

    def redact(text: str) -> str:
        for secret in variants:
            text = text.replace(secret, "***")
        return text

    return redact


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib would resend the Authorization header to wherever the redirect points


class Deadline:
    """Shuts the sockets of one request down when its total time is up: a per-read timeout alone lets a
    server that sends a byte every few seconds hold a request for ever."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def connection_class(self, base):
        """A factory for `base` connections whose sockets this deadline watches from the moment they exist."""

        def make(*args, **kwargs):
            connection = base(*args, **kwargs)

            def create_connection(*a, **k):
                sock = socket.create_connection(*a, **k)
                self.watch(sock)
                return sock

            connection._create_connection = create_connection
            return connection

        return make


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self._deadline = deadline

    def http_open(self, req):
        return self.do_open(self._deadline.connection_class(http.client.HTTPConnection), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self._deadline = deadline

    def https_open(self, req):
        options = {"context": self._context}
        if getattr(self, "_check_hostname", None) is not None:  # Python < 3.12 keeps it apart from the context
            options["check_hostname"] = self._check_hostname
        return self.do_open(self._deadline.connection_class(http.client.HTTPSConnection), req, **options)


def opener_for(deadline: Deadline) -> urllib.request.OpenerDirector:
    """An opener whose connections `deadline` watches and which follows no redirect (proxies still apply)."""
    return urllib.request.build_opener(_NoRedirect, _HTTPHandler(deadline), _HTTPSHandler(deadline))
