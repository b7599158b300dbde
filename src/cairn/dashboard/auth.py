"""The bearer-token guard: with a token set, every request but the open routes must carry it.

The only open route is `POST /api/v1/hooks/{token}` (declared `public` with its
operation): the hook's own token is its credential, and the outside systems that call
hooks never hold the dashboard's.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.dashboard.api.replies import error_response


def path_pattern(path: str) -> re.Pattern[str]:
    """A route path (`/api/v1/hooks/{token}`) as a pattern matching its requests."""
    parts = re.split(r"({\w+})", path)
    text = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts if p)
    return re.compile(text + "/?")


class BearerAuth:
    """ASGI middleware that answers 401 unless `Authorization: Bearer <token>` matches."""

    def __init__(self, app: ASGIApp, token: str, open_routes: Iterable[tuple[str, str]]) -> None:
        self.app = app
        self._token = token.encode("utf-8")
        self._open = [(method, path_pattern(path)) for method, path in open_routes]

    def _allowed(self, scope: Scope) -> bool:
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]  # mounted under a prefix: judge the app's own path
        method = scope["method"]
        if any(method == m and pattern.fullmatch(path) for m, pattern in self._open):
            return True
        scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        # Constant time, so the answer's timing does not reveal how much of a guess matched.
        return hmac.compare_digest(given.strip().encode("utf-8"), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request, or answer 401 without looking any further."""
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        response = error_response(
            401,
            "Unauthorized",
            "this dashboard needs the header Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)
