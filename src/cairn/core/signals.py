"""Internal control flow that user code must not catch: BaseExceptions, never exported."""

from __future__ import annotations


class Suspend(BaseException):
    """Unwind the workflow: the run is parked (sleeping or waiting) and leaves memory."""

    def __init__(self, status: str, wake_at: float | None, waiting_for: str | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.wake_at = wake_at
        self.waiting_for = waiting_for


class Unwind(BaseException):
    """Abandon the attempt without writing: the run was taken over or the engine stops."""


class HandBack(BaseException):
    """Leave the attempt at a durable point: its worker stops and hands the run back.

    Steps already executing in other branches commit first; nothing else is written.
    """


class KeyMissing(HandBack):
    """Leave the attempt: a value of the run is encrypted under a key this worker lacks.

    Nothing is written; the worker hands the run back for a worker that has the key and
    leaves it alone for a while (runtime/executing.py). Raised by core/run_values.py.
    """

    def __init__(self, key_id: str, message: str) -> None:
        super().__init__(message)
        self.key_id = key_id
        self.message = message


class ContinueAsNew(BaseException):
    """End this run as CONTINUED and start a fresh one with these arguments."""

    def __init__(self, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        super().__init__("continue_as_new")
        self.args_ = args
        self.kwargs = kwargs
