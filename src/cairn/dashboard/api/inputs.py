"""Reading a request: path values, query parameters and the JSON body, each checked.

Anything the API cannot read raises `BadRequest` (400) naming the parameter or field, and
any JSON that cannot be read (`strict_json`) names why.
Query values follow the CLI's rule: JSON when the text parses as JSON, else the text.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request

from cairn.dashboard.api import strict_json
from cairn.dashboard.api.replies import BadRequest

MAX_BODY = 4 * 1024 * 1024  # bytes; a payload that large belongs in a step, not a request


class BodyTooLargeError(Exception):
    """A request body over its limit; the text says how large it is (`5000 bytes`)."""


async def limited_body(request: Request, limit: int) -> bytes:
    """The request's body, read no further than `limit` bytes.

    Raises BodyTooLargeError as soon as the body is known to be larger: at once for a
    Content-Length over the limit, else once the bytes read pass it. The rest is never
    read, so a body sent by someone holding no token (a hook call) cannot fill memory.
    """
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"{int(declared)} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def loads(text: str | bytes, *, what: str) -> Any:
    """Strict JSON (see `strict_json`); BadRequest naming `what` and the reason otherwise."""
    try:
        return strict_json.loads(text)
    except ValueError as exc:
        raise BadRequest(f"{what} is not valid JSON: {exc}") from None


def value(text: str) -> Any:
    """A query value: JSON when it parses (`42`, `true`, `"42"`), else the text itself."""
    try:
        return strict_json.loads(text)
    except ValueError:
        return text


class Call:
    """One request as an operation sees it."""

    __slots__ = ("_raw", "request")

    def __init__(self, request: Request) -> None:
        self.request = request
        self._raw: bytes | None = None

    def path(self, name: str) -> str:
        """A path parameter, decoded (routing leaves `%2F` and `%25` in it: see `paths`)."""
        return unquote(str(self.request.path_params[name]))

    def query(self, allowed: Collection[str], *, prefixes: Collection[str] = ()) -> dict[str, str]:
        """The query parameters; BadRequest for an unknown or repeated one.

        A misspelt filter must not silently widen a listing (or a bulk action) to every run.
        """
        found: dict[str, str] = {}
        for key, text in self.request.query_params.multi_items():
            if key not in allowed and not any(key.startswith(p) for p in prefixes):
                names = ", ".join([*allowed, *(f"{p}NAME" for p in prefixes)])
                raise BadRequest(f"unknown query parameter {key!r} (known: {names})")
            if key in found:
                raise BadRequest(f"query parameter {key!r} is given twice")
            found[key] = text
        return found

    async def body(self, *, default: Any = None) -> Any:
        """The JSON body, or `default` when there is none."""
        if self._raw is None:
            try:
                self._raw = await limited_body(self.request, MAX_BODY)
            except BodyTooLargeError as exc:
                raise BadRequest(f"request body is {exc}; the limit is {MAX_BODY}") from None
        raw = self._raw
        if not raw.strip():
            return default
        return loads(raw, what="request body")

    async def fields(self, allowed: Collection[str], *, required: Collection[str] = ()) -> Any:
        """The body as a JSON object with only `allowed` keys and every `required` one."""
        body = await self.body(default={})
        if not isinstance(body, dict):
            raise BadRequest(f"request body must be a JSON object, got {kind(body)}")
        unknown = sorted(set(body) - set(allowed))
        if unknown:
            raise BadRequest(
                f"unknown field {unknown[0]!r} in request body (known: {', '.join(allowed)})"
            )
        missing = [name for name in required if name not in body]
        if missing:
            raise BadRequest(f"request body needs field {missing[0]!r}")
        return body


def kind(found: Any) -> str:
    """The JSON type name of a decoded value."""
    if found is None:
        return "null"
    if isinstance(found, bool):
        return "boolean"
    if isinstance(found, int | float):
        return "number"
    if isinstance(found, str):
        return "string"
    if isinstance(found, list):
        return "array"
    return "object"


def typed(found: Any, expected: type | tuple[type, ...], what: str, *, null: bool = False) -> Any:
    """`found` if it is of the expected JSON type; BadRequest naming `what` otherwise."""
    if found is None and null:
        return None
    names = {
        str: "a string",
        int: "an integer",
        bool: "true or false",
        list: "an array",
        dict: "an object",
    }
    types = expected if isinstance(expected, tuple) else (expected,)
    if int in types and isinstance(found, float) and found.is_integer():
        return int(found)  # `3.0` is an integer to JSON Schema, so to the API's document
    if isinstance(found, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(found, types)
    if not ok:
        want = " or ".join(names.get(t, t.__name__) for t in types)
        if null:
            want += " or null"
        raise BadRequest(f"{what} must be {want}, got {kind(found)}")
    return found


def integer(text: str | None, what: str, *, default: int, low: int, high: int) -> int:
    """A whole-number query parameter within [low, high]."""
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        raise BadRequest(f"{what} must be an integer, got {text!r}") from None
    if not low <= number <= high:
        raise BadRequest(f"{what} must be between {low} and {high}, got {number}")
    return number
