"""The bearer-token guard: with a token set, every request but a hook call must carry it.

`POST /api/v1/hooks/{token}` stays open: the hook's own token is its credential, and the
outside systems that call hooks never hold the dashboard's.
"""

from __future__ import annotations

import hmac
import re

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.dashboard.api.replies import error_response

_HOOK_CALL = re.compile(r"/api/v1/hooks/[^/]+/?")


def is_hook_call(method: str, path: str) -> bool:
    """True for `POST /api/v1/hooks/{token}`, the one request that needs no bearer token."""
    return method == "POST" and _HOOK_CALL.fullmatch(path) is not None


class BearerAuth:
    """ASGI middleware that answers 401 unless `Authorization: Bearer <token>` matches."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    def _allowed(self, scope: Scope) -> bool:
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]  # mounted under a prefix: judge the app's own path
        if is_hook_call(scope["method"], path):
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
