"""Hook: a single-use callback token a workflow hands to an outside system."""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import datetime
from typing import Any


class Hook:
    """A callback waiting for one call.

    Give `token` to the outside system; it calls `engine.resume_hook(token, payload)` or
    `POST /api/v1/hooks/{token}`. `payload = await hook` waits for that call (in a sync
    workflow, `hook.wait()` blocks); on expiry it raises EventTimeout.
    """

    __slots__ = ("_wait", "expires_at", "name", "token")

    def __init__(
        self, name: str, token: str, expires_at: datetime | None, wait: Callable[[], Any]
    ) -> None:
        self.name = name
        self.token = token
        self.expires_at = expires_at
        self._wait = wait

    def __repr__(self) -> str:
        return f"Hook({self.name!r}, token={self.token[:6]}..., expires_at={self.expires_at})"

    def wait(self) -> Any:
        """The payload: an awaitable in async workflows, the value itself in sync ones."""
        return self._wait()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._wait().__await__()  # type: ignore[no-any-return]
