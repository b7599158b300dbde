"""`cairn.shield()`: a scope that operator requests (cancel, pause) do not interrupt."""

from __future__ import annotations

import contextvars

# Shielding is per task, so one branch of a gather cleaning up does not shield the others.
_shielded: contextvars.ContextVar[int] = contextvars.ContextVar("cairn_shielded", default=0)


def active() -> bool:
    """True inside `cairn.shield()`."""
    return _shielded.get() > 0


class Shield:
    """`async with cairn.shield():` code inside runs even after a cancel or pause request."""

    __slots__ = ("_token",)

    def __init__(self) -> None:
        self._token: contextvars.Token[int] | None = None

    def __enter__(self) -> Shield:
        self._token = _shielded.set(_shielded.get() + 1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _shielded.reset(self._token)

    async def __aenter__(self) -> Shield:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()
