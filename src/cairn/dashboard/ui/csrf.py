"""Reading the pages' form posts, each checked against a CSRF token.

Double submit: every page sets a random `cairn_csrf` cookie (HttpOnly, SameSite=Strict)
and puts the same value in a hidden field of its forms; a post whose field does not match
its cookie is refused. Another site can neither read the cookie nor make the browser send
it. Forms are url-encoded, so no multipart parser is needed.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterator
from urllib.parse import parse_qsl

from starlette.requests import Request

from cairn.dashboard.api import inputs

COOKIE = "cairn_csrf"
FIELD = "csrf"
READ = "cairn.form"  # where a request's state keeps its form once read and checked
MAX_FORM = 1024 * 1024  # bytes; forms carry small JSON payloads at most


class Forbidden(Exception):
    """A post without the right CSRF token (stale page, or sent by another site)."""


class FormTooLargeError(Exception):
    """A posted form over MAX_FORM bytes (answered 413; the rest of it is never read)."""


class Form:
    """The fields of a posted form (a name may repeat, e.g. selected runs)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items

    def get(self, name: str, default: str = "") -> str:
        """The first value of `name`, or `default`."""
        for key, value in self._items:
            if key == name:
                return value
        return default

    def all(self, name: str) -> list[str]:
        """Every value of `name`, in order."""
        return [value for key, value in self._items if key == name]

    def __contains__(self, name: object) -> bool:
        return any(key == name for key, _ in self._items)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._items)


def token(request: Request) -> tuple[str, bool]:
    """This browser's CSRF token, and True when it is new (the cookie must be set)."""
    found = request.cookies.get(COOKIE, "")
    if 20 <= len(found) <= 100 and found.isascii():
        return found, False
    return secrets.token_urlsafe(32), True


async def read_form(request: Request) -> Form:
    """The posted form; Forbidden unless its CSRF field matches the cookie.

    Raises FormTooLargeError for a form over MAX_FORM bytes, before the CSRF check.
    """
    try:
        raw = await inputs.limited_body(request, MAX_FORM)
    except inputs.BodyTooLargeError as exc:
        raise FormTooLargeError(f"the form is {exc}; the limit is {MAX_FORM}") from None
    items = parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
    form = Form(items)
    cookie = request.cookies.get(COOKIE, "")
    sent = form.get(FIELD)
    if not cookie or not hmac.compare_digest(sent.encode(), cookie.encode()):
        raise Forbidden(
            "this form was not sent from a page of this dashboard (or the page is stale): "
            "reload the page and try again"
        )
    request.scope.setdefault("state", {})[READ] = form
    return form


def was_read(request: Request) -> Form | None:
    """The form `read_form` read (and checked) for this request, if it did."""
    found = request.scope.get("state", {}).get(READ)
    return found if isinstance(found, Form) else None
