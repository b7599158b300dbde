"""Checks before any route: a Host this dashboard serves, and no change sent by another site.

A dashboard without a token on 127.0.0.1 is within reach of every page the operator's
browser opens. Three checks keep those pages out, before the token guard (`auth.py`,
unchanged) and before any route:

1. The Host header (and a proxy's X-Forwarded-Host) must name this server: a loopback
   name, an IP address, or a name allowed with `allowed_hosts` (`--allowed-host`). A
   DNS-rebound name (evil.example resolving to 127.0.0.1) gets 421 and nothing else.
2. A change (POST, PUT, PATCH, DELETE) that a browser sends from another origin is
   refused (403): the browser says where a request comes from in `Sec-Fetch-Site`, or
   else in `Origin`. Another port of 127.0.0.1 is another origin (though the same
   site), so it is refused too.
3. A change to the API must be `application/json` (415 otherwise): the types a page of
   another origin may send without asking first (text/plain, forms) are never read.

Clients that are not browsers (curl, scripts, the systems calling hooks) send neither
Sec-Fetch-Site nor Origin, and pass as before.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.dashboard.api.replies import error_response

ANY_HOST = "*"
LOOPBACK_NAMES = frozenset({"localhost"})  # and every IP address, see `AllowedHosts.allows`
CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Sec-Fetch-Site values of a request the user made on this dashboard's own pages, or
# typed: "same-site" is another origin (another port of 127.0.0.1), so it is not here.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})

_LABELS = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_PORT = re.compile(r"[0-9]{1,5}")


def app_path(scope: Scope) -> str:
    """The request's path within the dashboard (without the prefix it is mounted under)."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


def host_name(value: str) -> str | None:
    """The name in a Host header (`Example.com:8080` -> `example.com`), or None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 address: [::1]:8080
        address, _, rest = value[1:].partition("]")
        if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
            return None
        return address if _address(address) else None
    name, colon, port = value.rpartition(":")
    if not colon:
        name = value
    elif not _PORT.fullmatch(port):
        return None
    name = name.removesuffix(".")  # `localhost.` is `localhost`
    return name if _LABELS.fullmatch(name) else None


def check_allowed_host(entry: str) -> str:
    """`entry` as `AllowedHosts` keeps it; ValueError saying what is wrong with it."""
    name = entry.strip().lower() if isinstance(entry, str) else ""
    if not name:
        raise ValueError("must not be empty")
    if name == ANY_HOST:
        return name
    if "://" in name or "/" in name:
        raise ValueError("must be a host name, not a URL (like dash.example.com)")
    if _address(name.strip("[]")):
        return name.strip("[]")  # served anyway, as every address is
    if ":" in name:
        raise ValueError("must be given without a port: every port of a host name is served")
    bare = name.removeprefix("*.").removesuffix(".")
    if not _LABELS.fullmatch(bare):
        raise ValueError("is not a host name")
    return name.removesuffix(".")


def _address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class AllowedHosts:
    """The host names the dashboard answers to: loopback, IP addresses, and those given.

    An IP address cannot be rebound to another server, so every one is served; names are
    served only when listed (`*.corp.example` lists every name under corp.example), and
    `*` serves any name at all (unsafe without a proxy that checks the name itself).
    """

    __slots__ = ("_any", "_names", "_suffixes")

    def __init__(self, entries: Iterable[str] = (), *, where: str = "allowed_hosts entry"):
        self._any = False
        self._names = set(LOOPBACK_NAMES)
        self._suffixes: list[str] = []
        if isinstance(entries, str):
            raise TypeError(f"allowed_hosts must be a list of host names, not the text {entries!r}")
        for entry in entries:
            try:
                name = check_allowed_host(entry)
            except ValueError as exc:
                raise ValueError(f"{where} {entry!r} {exc}") from None
            if name == ANY_HOST:
                self._any = True
            elif name.startswith("*."):
                self._suffixes.append(name[1:])
            else:
                self._names.add(name)

    def allows(self, value: str) -> bool:
        """True if the Host header `value` names this server."""
        if self._any:
            return True
        name = host_name(value)
        if name is None:
            return False
        if name in self._names or _address(name):
            return True
        return any(name.endswith(suffix) for suffix in self._suffixes)


DASHBOARD = (
    "this dashboard",
    "`cairn dashboard --allowed-host NAME`, or `cairn.dashboard.app(..., allowed_hosts=[NAME])`",
)
"""What the refusals call the server, and how to serve another host name."""


class Guard:
    """ASGI middleware: the three checks of this module, then the app."""

    def __init__(
        self,
        app: ASGIApp,
        allowed: AllowedHosts,
        api_prefix: str = "/api/v1",
        *,
        named: tuple[str, str] = DASHBOARD,
    ) -> None:
        self.app = app
        self.allowed = allowed
        self._api = api_prefix
        self._server, self._hint = named  # `cairn mcp` guards its tools with the same checks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request, or refuse it without reading its body."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = app_path(scope)
        api = path == self._api or path.startswith(self._api + "/")
        refusal = self._refusal(scope, Headers(scope=scope), api)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, error, message = refusal
        response: Response
        if api:
            response = error_response(status, error, message)
        else:
            response = PlainTextResponse(message, status)
        await response(scope, receive, send)

    def _refusal(self, scope: Scope, headers: Headers, api: bool) -> tuple[int, str, str] | None:
        """(status, error name, message) of the first check the request fails, or None."""
        for value in (headers.get("host"), _forwarded_host(headers)):
            if value is not None and not self.allowed.allows(value):
                return 421, "MisdirectedRequest", _misdirected(value, self._server, self._hint)
        method = scope["method"]
        if method not in CHANGES:
            return None
        where = f"{method} {scope['path']}"
        origin = headers.get("origin")
        fetch_site = headers.get("sec-fetch-site")
        if fetch_site is not None:
            foreign = fetch_site.strip().lower() not in OWN_FETCH_SITES
        elif origin is not None:
            foreign = not _same_origin(origin, headers)
        else:
            foreign = False  # not a browser (curl, a script, a server calling a hook)
        if foreign:
            return 403, "CrossSiteRequest", _cross_site(where, origin, fetch_site, self._server)
        if api and not _json_or_nothing(headers):
            given = headers.get("content-type")
            return 415, "UnsupportedMediaType", _not_json(where, given)
        return None


def _forwarded_host(headers: Headers) -> str | None:
    """The host a proxy says the browser asked for (the first of X-Forwarded-Host)."""
    value = headers.get("x-forwarded-host")
    return None if value is None else value.split(",")[0].strip()


def _same_origin(origin: str, headers: Headers) -> bool:
    """True if `origin` is this server as the browser sees it (its Host, or a proxy's)."""
    try:
        parts = urlsplit(origin.strip().lower())
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    own = (headers.get("host"), _forwarded_host(headers))
    return _without_default_port(parts.netloc) in {_without_default_port(h) for h in own if h}


def _without_default_port(host: str) -> str:
    host = host.strip().lower()
    for default in (":80", ":443"):
        if host.endswith(default):
            return host[: -len(default)]
    return host


def _json_or_nothing(headers: Headers) -> bool:
    """True for a JSON body, or for no body and no Content-Type (`curl -X POST`)."""
    given = headers.get("content-type")
    if given is None:
        length = headers.get("content-length")
        chunked = "transfer-encoding" in headers
        return not chunked and (length is None or length.strip() == "0")
    media = given.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _misdirected(value: str, server: str, hint: str) -> str:
    return (
        f"{server} does not answer to the host {value!r}: it serves localhost, IP "
        f"addresses and the names it is given ({hint})"
    )


def _cross_site(where: str, origin: str | None, fetch_site: str | None, server: str) -> str:
    source = f"Origin {origin!r}" if origin is not None else f"Sec-Fetch-Site: {fetch_site}"
    return (
        f"refused {where} sent by a page of another site or port ({source}): {server} "
        "takes changes only from its own pages and from clients that are not browsers"
    )


def _not_json(where: str, given: str | None) -> str:
    got = f"got {given!r}" if given is not None else "got a body without one"
    return (
        f"{where} takes Content-Type: application/json, {got} "
        "(with curl: --json DATA, or -H 'Content-Type: application/json')"
    )
