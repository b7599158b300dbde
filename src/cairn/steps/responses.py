"""HttpResponse: an HTTP answer as the history keeps it, its body read up to a size cap."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpResponse", "read_body"]

# Media types kept as text besides text/*: JSON and XML kinds, forms, scripts.
_TEXT_TYPES = frozenset(
    {
        "application/javascript",
        "application/x-www-form-urlencoded",
        "application/xml",
        "application/yaml",
    }
)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """An HTTP answer recorded by `cairn.steps.http`.

    `body` is the JSON value when the answer says it is JSON (and came whole), text for
    text kinds (and answers without a type that read as UTF-8), bytes otherwise. Bodies
    longer than the step's `max_body` are cut: `body` then holds the first `max_body`
    bytes (as text or bytes, never parsed), and `cut` how many bytes were left out.
    """

    status: int
    """The HTTP status, e.g. 200."""

    headers: dict[str, str] = field(default_factory=dict)
    """Response headers by lower-case name; a repeated header's values joined by ", "."""

    body: Any = None
    """The JSON value, the text, or the bytes of the body (see the class docs)."""

    url: str = ""
    """The URL that answered (after redirects)."""

    size: int = 0
    """Bytes the whole body had (after any content encoding was undone). For a cut body,
    which is not read past the cap, its `Content-Length` (unencoded) or else the bytes
    received when reading stopped: then a lower bound."""

    cut: int = 0
    """Bytes of the body left out of `body` by the size cap; 0 when it is whole."""

    @property
    def ok(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status < 300

    def text_start(self, limit: int) -> str:
        """The start of the body as one line of at most `limit` characters."""
        body = self.body
        if body is None:
            return ""
        if isinstance(body, bytes):
            text = body.decode("utf-8", errors="replace")
        elif isinstance(body, str):
            text = body
        else:
            text = json.dumps(body, ensure_ascii=False)
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."


async def read_body(answer: httpx.Response, method: str, max_body: int) -> HttpResponse:
    """Read `answer`'s body up to `max_body` bytes, and no further.

    A longer body is not read to its end (it may never end): `size` is then its
    `Content-Length` when the server sent one for an unencoded body, else the bytes
    received when reading stopped (a lower bound).
    """
    kept = bytearray()
    size = 0
    async for chunk in answer.aiter_bytes():
        size += len(chunk)
        room = max_body - len(kept)
        kept += chunk[: max(room, 0)]
        if size > max_body:
            break
    cut = size - len(kept)
    if cut:
        size = max(size, _declared_length(answer))
        cut = size - len(kept)
    headers: dict[str, str] = {}
    for name, value in answer.headers.multi_items():
        name = name.lower()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    body: Any = None
    if method != "HEAD" or kept:
        body = _decoded(bytes(kept), answer, whole=cut == 0)
    return HttpResponse(
        status=answer.status_code,
        headers=headers,
        body=body,
        url=hide_password(str(answer.url)),
        size=size,
        cut=cut,
    )


def _declared_length(answer: httpx.Response) -> int:
    """The body's `Content-Length` when it counts the bytes read (no encoding), else 0."""
    if answer.headers.get("content-encoding", "identity").strip().lower() != "identity":
        return 0
    try:
        return max(0, int(answer.headers.get("content-length", "")))
    except ValueError:
        return 0


def _decoded(raw: bytes, answer: httpx.Response, *, whole: bool) -> Any:
    """JSON value, text or bytes, by the answer's content type (see HttpResponse)."""
    media = answer.headers.get("content-type", "").partition(";")[0].strip().lower()
    encoding = answer.charset_encoding or "utf-8"
    is_json = media == "application/json" or media.endswith("+json")
    if is_json or media.startswith("text/") or media in _TEXT_TYPES or media.endswith("+xml"):
        try:
            text = raw.decode(encoding, errors="replace")
        except LookupError:  # a charset Python does not know
            text = raw.decode("utf-8", errors="replace")
        if is_json and whole and text.strip():
            try:
                return json.loads(text)
            except ValueError:
                return text
        return text
    if not media:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    return raw


def hide_password(url: str) -> str:
    """`url` with the password of its user part, if any, written `***`."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))
