"""Every exception the step library raises, in one place.

The tree (beside cairn's own, whose classes these extend)::

    CairnError
    ├── FatalError                  never retried
    │   ├── HttpStatusError         a 4xx answer that asking again will not change
    │   ├── DatabaseError           the database refused the statement, or is not set up
    │   ├── TagError                no tag provider, an unknown tag, a value it refuses
    │   └── WaitTimeout             a wait or a write confirmation ran out of time
    ├── RetryableError              retried by the step's policy
    │   ├── HttpUnavailable         no answer, 429 or 5xx (Retry-After honoured)
    │   ├── DatabaseUnavailable     cannot connect, connection lost, deadlock
    │   ├── TagUnavailable          the tag server cannot be reached
    │   └── NotYet                  a poll of `wait.until` whose check was not yet true
    └── InvalidSQL                  refused before it reaches the database; a ValueError

A workflow gets a step's final failure as the error above (`except WaitTimeout:` works)
that is also a `cairn.StepFailed`: its message, and the attributes set here (`status`,
`database`, ...), as the step raised them, restored on a replay too (see
`cairn.step_failures`; `last` only when cairn can store its value).
"""

from __future__ import annotations

from typing import Any

from cairn.errors import CairnError, FatalError, RetryableError

__all__ = [
    "DatabaseError",
    "DatabaseUnavailable",
    "HttpStatusError",
    "HttpUnavailable",
    "InvalidSQL",
    "NotYet",
    "TagError",
    "TagUnavailable",
    "WaitTimeout",
]


class HttpStatusError(FatalError):
    """The server answered with a 4xx status that asking again will not change."""

    status: int | None = None
    method: str = ""
    url: str = ""
    body: str = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        method: str = "",
        url: str = "",
        body: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.method = method
        self.url = url
        self.body = body


class HttpUnavailable(RetryableError):
    """No answer (connection refused, reset, timed out), or a 429 or 5xx status."""

    status: int | None = None
    method: str = ""
    url: str = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        method: str = "",
        url: str = "",
        retry_after: Any = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status
        self.method = method
        self.url = url


class DatabaseError(FatalError):
    """The database refused the statement, or the named database is not set up."""

    database: str = ""

    def __init__(self, message: str, *, database: str = "") -> None:
        super().__init__(message)
        self.database = database


class DatabaseUnavailable(RetryableError):
    """The database cannot be reached now, lost the connection, or broke a deadlock."""

    database: str = ""

    def __init__(self, message: str, *, database: str = "") -> None:
        super().__init__(message)
        self.database = database


class InvalidSQL(CairnError, ValueError):
    """SQL refused before it reaches the database: values must be bound, not written in."""

    database: str = ""

    def __init__(self, message: str, *, database: str = "") -> None:
        super().__init__(message)
        self.database = database


class TagError(FatalError):
    """No tag provider is set, a tag does not exist, or it refuses the value written."""

    path: str = ""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class TagUnavailable(RetryableError):
    """The tag server cannot be reached, or dropped the connection."""

    path: str = ""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class WaitTimeout(FatalError):
    """A wait, or the confirmation of a tag write, ran out of time."""

    last: Any = None

    def __init__(self, message: str, *, last: Any = None) -> None:
        super().__init__(message)
        self.last = last  # the last value seen (a tag's, a check's)


class NotYet(RetryableError):
    """A poll of `cairn.steps.wait.until` whose check was not yet true (polled again)."""
