"""The token guard: with a token set, every request but the open routes must prove it knows it.

The JSON API takes only `Authorization: Bearer <token>`. Its open routes are declared
`public` with their operations: `POST /api/v1/hooks/{token}` (the hook's own token is its
credential, and the outside systems that call hooks never hold the dashboard's) and
`GET /api/v1/health` (load balancers hold no token; it says only whether the database
answers). The web pages also take the session cookie the login page sets, whose value is
derived from the token (so the cookie never holds the token itself, and changing the
token ends every session); the login page and the static files are open.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.dashboard.api.replies import error_response
from cairn.dashboard.guard import app_path

SESSION_COOKIE = "cairn_session"
SIGNED_IN = "cairn_signed_in"  # request state: the request came with a valid session cookie
LOGIN_PATH = "/login"
# Pages anyone may load: the login form and what it needs to look right.
OPEN_UI = (re.compile(re.escape(LOGIN_PATH) + "/?"), re.compile(r"/static/.*"))


def session_value(token: str) -> str:
    """The session cookie's value for `token`: a keyed hash, not the token."""
    mac = hmac.new(token.encode("utf-8"), b"cairn dashboard session", hashlib.sha256)
    return mac.hexdigest()


def path_pattern(path: str) -> re.Pattern[str]:
    """A route path (`/api/v1/hooks/{token}`) as a pattern matching its requests."""
    parts = re.split(r"({\w+})", path)
    text = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts if p)
    return re.compile(text + "/?")


class BearerAuth:
    """ASGI middleware: 401 for the API and a login redirect for pages, unless the token matches."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        open_routes: Iterable[tuple[str, str]],
        api_prefix: str = "/api/v1",
        *,
        server: str = "this dashboard",
    ) -> None:
        self.app = app
        self._server = server  # what a refusal calls it (`cairn mcp` uses this guard too)
        self._token = token.encode("utf-8")
        self._session = session_value(token).encode("ascii")
        self._open = [(method, path_pattern(path)) for method, path in open_routes]
        self._api = api_prefix

    def _api_call(self, path: str) -> bool:
        return path == self._api or path.startswith(self._api + "/")

    def _bearer(self, headers: Headers) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        # Constant time, so the answer's timing does not reveal how much of a guess matched.
        return hmac.compare_digest(given.strip().encode("utf-8"), self._token)

    def _cookie(self, headers: Headers) -> bool:
        found = cookie_parser(headers.get("cookie", "")).get(SESSION_COOKIE, "")
        return hmac.compare_digest(found.encode("utf-8", "replace"), self._session)

    def _allowed(self, scope: Scope, path: str) -> bool:
        method = scope["method"]
        headers = Headers(scope=scope)
        if self._api_call(path):
            if any(method == m and pattern.fullmatch(path) for m, pattern in self._open):
                return True
            return self._bearer(headers)
        if any(pattern.fullmatch(path) for pattern in OPEN_UI):
            return True
        if self._cookie(headers):
            # A page offers "Log out" only to a browser with a session to end.
            scope.setdefault("state", {})[SIGNED_IN] = True
            return True
        return self._bearer(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request, or refuse it without looking any further."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = app_path(scope)  # mounted under a prefix: judge the app's own path
        if self._allowed(scope, path):
            await self.app(scope, receive, send)
            return
        response: Response
        if self._api_call(path):
            response = error_response(
                401,
                "Unauthorized",
                f"{self._server} needs the header Authorization: Bearer <token>",
                headers={"WWW-Authenticate": "Bearer"},
            )
        elif scope["method"] in ("GET", "HEAD"):
            query = scope.get("query_string", b"").decode("latin-1")
            wanted = path + ("?" + query if query else "")
            root = scope.get("root_path", "")
            response = RedirectResponse(f"{root}{LOGIN_PATH}?next={quote(wanted, safe='')}", 303)
        else:
            response = PlainTextResponse("log in first: this dashboard needs its token", 401)
        await response(scope, receive, send)
