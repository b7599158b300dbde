"""HTTP calls as durable steps: `http.request("GET", url, timeout_ms=...)` on httpx.

Connection errors, 429 and 5xx are retried by the step's policy, waiting what the
server's `Retry-After` asks (seconds or an HTTP date, capped by `max_retry_after`); any
other 4xx fails at once. The step's idempotency key goes out as `Idempotency-Key`, the
same on every attempt, so a server that deduplicates sees one request. The answer is
recorded in the run's history (`HttpResponse`), with its body cut to `max_body` bytes
(not read further). `timeout_ms` bounds the whole attempt: a server that answers slowly,
trickles its body or never ends it fails the attempt (`HttpUnavailable`) at that limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from cairn import durations
from cairn.authoring import usage
from cairn.authoring.retry import Retry, coerce
from cairn.errors import FatalError, InvalidArguments, InvalidValue
from cairn.steps import calling
from cairn.steps.errors import HttpStatusError, HttpUnavailable
from cairn.steps.responses import HttpResponse, hide_password, read_body

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_RETRY",
    "HttpResponse",
    "delete",
    "get",
    "head",
    "patch",
    "post",
    "put",
    "request",
    "retry_after_seconds",
]

DEFAULT_RETRY = Retry(max_attempts=5, delay="1s", max_delay="1m")
"""Five attempts, 1 s apart and doubling, at most a minute (a Retry-After overrides)."""
MAX_BODY = 256 * 1024
"""Bytes of a response body kept in the history by default (256 KiB)."""
MAX_RETRY_AFTER = "10m"
"""The longest `Retry-After` honoured by default; a longer one is shortened to this."""
# Statuses that are worth asking again; every other 4xx is the request's own fault.
_RETRY_STATUSES = frozenset({408, 429})
# Characters of a failing answer's body quoted in its error.
_BODY_START = 200
_SSL: ssl.SSLContext | None = None


@usage.checked("cairn.steps.http.request")
def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    params: Any = None,
    data: Any = None,
    json_body: Any = None,
    timeout_ms: float = 10000,
    retries: Retry | int | None = None,
    name: str | None = None,
    max_body: int = MAX_BODY,
    max_retry_after: Any = MAX_RETRY_AFTER,
) -> Any:
    """Send an HTTP request as a durable step and return its `HttpResponse`.

    Args:
        method: "GET", "POST", ... (any case).
        url: An http:// or https:// URL. With the method, the step's recorded input
            (headers and body are not recorded).
        headers: Request headers. `Idempotency-Key` is added (the step's key) unless
            given here.
        params: Query parameters (a dict or a list of pairs).
        data: A form (a dict) or a raw body (str or bytes).
        json_body: A body sent as JSON; not with `data`.
        timeout_ms: Time limit of each attempt, in milliseconds (default 10 s): from
            sending to the last byte kept, however slowly the server answers.
        retries: The step's policy: a `cairn.Retry` or a number of attempts
            (default `DEFAULT_RETRY`: 5 attempts).
        name: The step's name in the history (default "http.GET" and so on).
        max_body: Bytes of the body kept (default 256 KiB); reading stops there, and
            `HttpResponse.cut` says how many more there were (at least).
        max_retry_after: The longest `Retry-After` waited (default "10m").

    Returns:
        In an async workflow an awaitable of the `HttpResponse`, in a sync one the
        response itself; outside a run (or in a step's own code) the request is sent once.

    Raises:
        HttpStatusError: A 4xx answer other than 408 and 429 (at once, not retried).
        HttpUnavailable: No answer, 408, 429 or 5xx, once the retries are spent.
        ValueError, TypeError: A bad argument, before anything is sent.
    """
    verb = _method(method)
    target = _url(url)
    if data is not None and json_body is not None:
        raise InvalidValue("http.request: give data or json_body, not both")
    if headers is not None and not isinstance(headers, dict):
        raise InvalidArguments(f"http.request: headers must be a dict, got {headers!r}")
    timeout = calling.positive_ms(timeout_ms, "http.request timeout_ms")
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 0:
        raise InvalidValue(
            f"http.request: max_body must be a number of bytes >= 0, got {max_body!r}"
        )
    longest = durations.seconds(max_retry_after, what="http.request max_retry_after")
    options = _Options(headers or {}, params, data, json_body, timeout, max_body, longest)

    # A password in the URL is sent, never recorded nor shown: the step's input and
    # errors carry the URL with it hidden.
    shown = hide_password(target)

    async def send(method: str, url: str) -> HttpResponse:
        return await _send(method, target, options)

    policy = DEFAULT_RETRY if retries is None else coerce(retries)
    return calling.call(name or f"http.{verb}", send, (verb, shown), retries=policy)


@usage.checked("cairn.steps.http.get")
def get(url: str, **options: Any) -> Any:
    """`request("GET", url, ...)`."""
    return request("GET", url, **options)


@usage.checked("cairn.steps.http.post")
def post(url: str, **options: Any) -> Any:
    """`request("POST", url, ...)`."""
    return request("POST", url, **options)


@usage.checked("cairn.steps.http.put")
def put(url: str, **options: Any) -> Any:
    """`request("PUT", url, ...)`."""
    return request("PUT", url, **options)


@usage.checked("cairn.steps.http.patch")
def patch(url: str, **options: Any) -> Any:
    """`request("PATCH", url, ...)`."""
    return request("PATCH", url, **options)


@usage.checked("cairn.steps.http.delete")
def delete(url: str, **options: Any) -> Any:
    """`request("DELETE", url, ...)`."""
    return request("DELETE", url, **options)


@usage.checked("cairn.steps.http.head")
def head(url: str, **options: Any) -> Any:
    """`request("HEAD", url, ...)`."""
    return request("HEAD", url, **options)


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """The wait a `Retry-After` header asks, in seconds; None when absent or unreadable.

    Args:
        value: The header: a number of seconds ("120") or an HTTP date.
        now: The moment a date is counted from (the answer's own `Date` when it has one).
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - now).total_seconds())
    return seconds if seconds >= 0 and seconds != float("inf") else None


class _Options:
    """What one request sends, besides its method and URL (kept out of the history)."""

    __slots__ = ("data", "headers", "json_body", "longest", "max_body", "params", "timeout")

    def __init__(
        self,
        headers: dict[str, str],
        params: Any,
        data: Any,
        json_body: Any,
        timeout: float,
        max_body: int,
        longest: float,
    ) -> None:
        self.headers = headers
        self.params = params
        self.data = data
        self.json_body = json_body
        self.timeout = timeout
        self.max_body = max_body
        self.longest = longest


async def _send(method: str, url: str, options: _Options) -> HttpResponse:
    """One attempt: send, read at most `max_body` bytes, and judge the status."""
    import httpx

    sending, url = url, hide_password(url)

    headers = httpx.Headers(options.headers)
    key = calling.idempotency_key()
    if key is not None and "idempotency-key" not in headers:
        headers["Idempotency-Key"] = key
    content = data = None
    if isinstance(options.data, str | bytes):
        content = options.data
    else:
        data = options.data
    limit = asyncio.timeout(options.timeout)
    task = asyncio.current_task()

    def stop() -> None:
        if task is not None:
            task.cancel()

    try:
        # The whole attempt, not each read: httpx's own timeout restarts with every byte
        # that arrives, so a server trickling its answer would hold the step for ever.
        async with (
            limit,
            _cancel_stops(stop),
            httpx.AsyncClient(
                follow_redirects=True, timeout=options.timeout, verify=_ssl_context()
            ) as client,
            client.stream(
                method,
                sending,
                headers=headers,
                params=options.params,
                content=content,
                data=data,
                json=options.json_body,
            ) as answer,
        ):
            response = await read_body(answer, method, options.max_body)
    except TimeoutError as exc:
        if not limit.expired():
            raise
        raise HttpUnavailable(
            f"{method} {url}: no whole answer within {options.timeout:g}s (timeout_ms)",
            method=method,
            url=url,
        ) from exc
    except httpx.TransportError as exc:
        raise HttpUnavailable(
            f"{method} {url}: no answer ({type(exc).__name__}: {exc or 'no detail'})",
            method=method,
            url=url,
        ) from exc
    except httpx.HTTPError as exc:  # too many redirects, an undecodable body...
        raise FatalError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
    return _judged(method, url, response, answer, options.longest)


@contextlib.asynccontextmanager
async def _cancel_stops(stop: Callable[[], None]) -> AsyncIterator[None]:
    """`calling.cancel_stops` for an `async with`: a cancel of the run ends the request."""
    with calling.cancel_stops(stop):
        yield


def _judged(
    method: str, url: str, response: HttpResponse, answer: httpx.Response, longest: float
) -> HttpResponse:
    """The response, or the error its status calls for."""
    status = response.status
    said = f"{method} {url} answered {status} {answer.reason_phrase}".rstrip()
    if status in _RETRY_STATUSES or status >= 500:
        now = _date(answer.headers.get("date")) or datetime.now(UTC)
        wait = retry_after_seconds(answer.headers.get("retry-after"), now)
        if wait is not None:
            wait = min(wait, longest)
            said += f"; retry after {wait:g}s"
        raise HttpUnavailable(said, status=status, method=method, url=url, retry_after=wait)
    if 400 <= status < 500:
        start = response.text_start(_BODY_START)
        raise HttpStatusError(
            f"{said}: {start}" if start else said,
            status=status,
            method=method,
            url=url,
            body=start,
        )
    return response


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _method(method: Any) -> str:
    if not isinstance(method, str) or not method.strip().isalpha():
        raise InvalidValue(f'http.request: method must be a word like "GET", got {method!r}')
    return method.strip().upper()


def _url(url: Any) -> str:
    if not isinstance(url, str):
        raise InvalidArguments(f"http.request: url must be a string, got {url!r}")
    scheme = url.partition(":")[0].lower()
    if scheme not in ("http", "https") or "://" not in url:
        raise InvalidValue(f"http.request: url must start with http:// or https://, got {url!r}")
    return url


def _ssl_context() -> ssl.SSLContext:
    """One context for every request: building one loads the CA bundle, which is slow."""
    global _SSL
    if _SSL is None:
        import httpx

        _SSL = httpx.create_ssl_context()
    return _SSL
