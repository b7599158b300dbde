"""What the API answers: JSON bodies, and every failure as `{"error", "message"}` with its status.

A cairn error keeps its class name; a failure that is not the caller's fault is logged
here with its traceback and answered with a generic message, so nothing internal leaks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from cairn import errors
from cairn.blobs import BlobStoreUnavailable, BlobUnwritable
from cairn.representation import json_form

log = logging.getLogger("cairn.dashboard")

# The status of a cairn error: the first class of its MRO listed here, else 500.
STATUS: dict[type[BaseException], int] = {
    errors.RunNotFound: 404,
    errors.TaskNotFound: 404,
    errors.ScheduleNotFound: 404,
    errors.HookNotFound: 404,
    errors.RunFinished: 409,
    errors.DuplicateRun: 409,
    errors.DuplicateSchedule: 409,
    errors.InvalidSubmission: 422,
    errors.InvalidName: 422,
    errors.SerializationError: 422,
    errors.UnknownWorkflow: 422,
    errors.InvalidArguments: 422,
    errors.InvalidValue: 422,
    errors.TransientWorkflow: 422,
    errors.StoreUnavailable: 503,
    BlobUnwritable: 503,  # not the value's fault: the blob store did not take it, for now
}

# Messages of the failures whose own text may describe the server (hosts, SQL, paths).
_UNAVAILABLE = "the database is unavailable for now; try again shortly"
# ... when it was lost as a change was committed, and could not be asked whether it was.
_UNKNOWN = (
    "the database was lost as the change was committed, and cannot be asked whether it "
    "was; try again shortly: the change may have been made (look before making it again)"
)
_INTERNAL = "the dashboard failed to answer; the reason is in its log"


class BadRequest(Exception):
    """A request the API cannot read: bad JSON, a missing or unknown field, a bad parameter."""


class UnansweredError(errors.StoreUnavailable):
    """The database did not answer a request's work within its deadline (see target.py)."""

    def __init__(self, deadline: float, *, unchanged: bool = False) -> None:
        # `unchanged`: the work was withdrawn with nothing written (see target.within).
        tail = (
            "nothing was changed"
            if unchanged
            else "a change asked for may still be made once it answers"
        )
        super().__init__(
            f"the database did not answer within {deadline:g}s (it is locked by another "
            f"process, or unreachable); try again shortly: {tail}",
            unknown=not unchanged,
        )
        self.deadline = deadline


class Reply:
    """A JSON answer with its status code."""

    __slots__ = ("body", "status")

    def __init__(self, body: Any, status: int = 200) -> None:
        self.body = body
        self.status = status


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """`body` as JSON (datetimes as ISO 8601 in UTC, see `representation.json_form.jsonable`)."""
    text = json_form.dumps(body, indent=None)
    return Response(text, status, headers=headers, media_type="application/json")


def error_response(
    status: int, error: str, message: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> Response:
    """The one error shape: `{"error": NAME, "message": TEXT, ...extra}`."""
    return json_response({"error": error, "message": message, **extra}, status, headers)


def status_of(exc: BaseException) -> int:
    """The HTTP status a cairn error stands for."""
    return _listed(type(exc))


def status_for(kind: type[Exception]) -> int:
    """The status `describe` answers a failure of class `kind` with (a verb's `raises`)."""
    if issubclass(kind, BadRequest):
        return 400
    if issubclass(kind, errors.CairnError):
        return _listed(kind)
    return 422 if issubclass(kind, ValueError) else 500


def _listed(kind: type[BaseException]) -> int:
    for klass in kind.__mro__:
        if klass in STATUS:
            return STATUS[klass]
    return 500


def failure(exc: Exception, *, where: str) -> Response:
    """The answer to an exception raised while serving `where` (METHOD path)."""
    status, name, message = describe(exc, where=where)
    if isinstance(exc, errors.InvalidSubmission) and status == 422:
        return error_response(status, name, message, fields=exc.fields)
    return error_response(status, name, message)


def describe(exc: Exception, *, where: str) -> tuple[int, str, str]:
    """(status, error name, message) of an exception; server-side failures are logged."""
    if isinstance(exc, BadRequest):
        return 400, "BadRequest", str(exc)
    if isinstance(exc, errors.CairnError):
        status = status_of(exc)
        name = type(exc).__name__
        if status == 503:
            log.warning("%s: %s: %s", where, name, exc)
            if isinstance(exc, UnansweredError):  # its text names no host: shown
                return 503, "StoreUnavailable", exc.message
            if isinstance(exc, BlobStoreUnavailable | BlobUnwritable):  # not the database
                return 503, "StoreUnavailable", exc.public
            unknown = isinstance(exc, errors.StoreUnavailable) and exc.unknown
            return 503, name, _UNKNOWN if unknown else _UNAVAILABLE
        if status >= 500:
            log.error("%s failed", where, exc_info=exc)
            return 500, name, _INTERNAL
        return status, name, exc.message or name
    if isinstance(exc, ValueError):
        # cairn's own check of a value the caller sent (a duration, a limit, a step seq).
        return 422, "InvalidValue", str(exc) or type(exc).__name__
    log.error("%s failed", where, exc_info=exc)
    return 500, "InternalError", _INTERNAL


def stream_failure(exc: errors.StoreError, *, where: str) -> str:
    """The last lines of a server-sent event stream whose database failed (logged here).

    The stream ends with a comment instead of an exception out of the app: the client
    (a browser's EventSource) reconnects by itself once the `retry:` time has passed.
    """
    _, name, message = describe(exc, where=where)
    return f": the database did not answer ({name}: {message}); reconnect shortly\n\n"
