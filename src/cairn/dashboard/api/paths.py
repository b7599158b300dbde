"""Ids that hold `/`: the API routes on the raw path, where an encoded `/` stays encoded.

A run id may hold `/` (a child run is `parent/name#1`, and users pick their own ids).
ASGI servers decode `%2F` to `/` before routing, so `GET /runs/a%2Fhistory` would read
as the history of run `a`. Routing on the raw path with `%2F` and `%25` left encoded
keeps an encoded id one path segment; `Call.path` decodes it. Run routes also take a
bare `/` (`{run_id:path}`), for clients that do not encode it. Control characters stay
encoded too: a name may hold a line break, where a route pattern's `.` would stop.
It runs before the dashboard routes to the API's mount (`create_app`), for API paths only.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

# The escapes routing keeps: `/` must not split a segment, `%` must not be decoded twice,
# and a control character (a line break) must not stop a pattern's `.`.
_KEPT = re.compile(r"(%2[Ff]|%25|%[01][0-9A-Fa-f]|%7[Ff])")


def routing_path(raw: str) -> str:
    """`raw` with every escape decoded but `%2F`, `%25` and control characters (kept)."""
    # split() with a group alternates text and separators: text at even places.
    parts = _KEPT.split(raw)
    return "".join(part.upper() if i % 2 else unquote(part) for i, part in enumerate(parts))


class RawPaths:
    """ASGI middleware: route on the raw path (see the module docstring).

    When the raw path is missing or does not decode to the server's path (a proxy that
    rewrote it), it routes on the server's path with each `%` escaped, so `Call.path`
    decodes every parameter the same way either way.
    """

    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix  # only paths under it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request with its routing path in place of the server's."""
        if scope["type"] == "http" and scope["path"].startswith(self.prefix + "/"):
            scope = dict(scope, path=self._path(scope))
        await self.app(scope, receive, send)

    @staticmethod
    def _path(scope: Scope) -> str:
        path: str = scope["path"]
        raw = scope.get("raw_path")
        if isinstance(raw, bytes):
            try:
                found = routing_path(raw.decode("ascii"))
            except UnicodeDecodeError:
                found = ""
            if unquote(found) == path:
                return found
        return path.replace("%", "%25")
