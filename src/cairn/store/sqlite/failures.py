"""What a failed write of the SQLite store raises: the writer's own error, or a StoreError."""

from __future__ import annotations

import sqlite3

from cairn.errors import StoreError
from cairn.store._health import StoreHealth
from cairn.store.sqlite.connections import Sunk, classify, is_read_only, read_only_reason


class WriteFailures:
    """Translates one database's write failures; a read-only file is noted in `health`."""

    def __init__(self, path: str, health: StoreHealth) -> None:
        self.path = path
        self.health = health

    def failure(self, exc: Exception) -> Exception:
        """A driver error as a StoreError; LeaseLost, DuplicateRun...: the writer's alone."""
        if isinstance(exc, sqlite3.Error | UnicodeError | ValueError | OverflowError):
            return self.classify(exc)
        return exc

    def classify(self, exc: BaseException) -> StoreError:
        """The StoreError for a failed write."""
        if is_read_only(exc):
            self.health.cannot_write(read_only_reason(repr(self.path), exc))
        return classify(repr(self.path), exc)

    def sunk(self, sunk: Sunk) -> StoreError:
        """What the other writers of a batch rolled back by `sunk` get."""
        error = self.failure(sunk.error)
        kind = type(error) if isinstance(error, StoreError) else StoreError
        return kind(
            f"database {self.path!r}: a write batch was rolled back: one of its writes failed "
            f"in a way that could not be undone alone ({type(sunk.error).__name__}: {sunk.error})"
        )
