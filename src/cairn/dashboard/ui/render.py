"""Turning data into pages: the jinja2 environment (autoescaped), its filters and responses.

Every value a page shows passes through autoescaping, so text that came from a run
(`<script>` in a workflow name, a column, a payload or an error) is shown, never run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from cairn.dashboard import auth
from cairn.dashboard.api.replies import describe
from cairn.dashboard.ui import csrf
from cairn.representation import json_form, words

NOTICE_COOKIE = "cairn_notice"
FOLD = 400  # characters: longer JSON values are folded into <details>


WIDTH = 80  # characters: JSON that fits is shown on one line


def pretty(value: Any) -> str:
    """JSON of a value for people (datetimes as ISO 8601, see `representation.json_form.jsonable`).

    On one line when it fits in WIDTH, else indented. Most steps' values are small, and
    the one-line form comes from the C encoder, while indenting runs in Python.
    """
    compact = json_form.dumps(value, indent=None)
    return compact if len(compact) <= WIDTH else json_form.dumps(value, indent=2)


def folds(text: str) -> bool:
    """True when `text` is long enough to be shown folded."""
    return len(text) > FOLD or text.count("\n") > 12


def when(moment: datetime | float | None) -> str:
    """A time for people: local time of the dashboard, to the second."""
    return words.when(moment)


def iso(moment: datetime | float | None) -> str:
    """A time as ISO 8601 in UTC, for `<time datetime=...>`."""
    if moment is None:
        return ""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).isoformat()


def status_class(status: Any) -> str:
    """The CSS class of a run or task status."""
    return "st-" + str(getattr(status, "value", status)).lower()


def segment(text: Any) -> str:
    """`text` quoted as one URL path segment (run ids may hold `/` and `#`)."""
    return quote(str(text), safe="")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cairn.dashboard.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pretty=pretty,
        folds=folds,
        when=when,
        iso=iso,
        seconds=words.seconds,
        short=words.short,
        status_class=status_class,
        progress_text=words.progress_text,
        error_line=words.error_line,
        seg=segment,
        compact=lambda value: json_form.dumps(value, indent=None),
    )
    return env


ENV = _environment()


def root(request: Request) -> str:
    """The path the dashboard is mounted at ("" at the top of a server)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def page(
    request: Request, template: str, context: Mapping[str, Any], status: int = 200
) -> Response:
    """A rendered page, with this browser's CSRF token (set as a cookie when new)."""
    token, new = csrf.token(request)
    notice = _notice(request)
    body = ENV.get_template(template).render(
        {
            **context,
            "root": root(request),
            "csrf": token,
            "notice": notice,
            "signed_in": bool(request.scope.get("state", {}).get(auth.SIGNED_IN)),
            "path": request.url.path,
        }
    )
    response = HTMLResponse(body, status)
    if new:
        set_cookie(request, response, csrf.COOKIE, token)
    if notice is not None:
        response.delete_cookie(NOTICE_COOKIE, path=root(request) or "/")
    return response


def set_cookie(request: Request, response: Response, name: str, value: str) -> None:
    """Set a cookie of the dashboard: HttpOnly, SameSite=Strict, Secure over https."""
    response.set_cookie(
        name,
        value,
        path=root(request) or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _notice(request: Request) -> dict[str, str] | None:
    raw = request.cookies.get(NOTICE_COOKIE)
    if not raw:
        return None
    kind, _, text = unquote(raw).partition(":")
    return {"kind": "error" if kind == "error" else "ok", "text": text}


def redirect(
    request: Request, to: str, *, notice: str | None = None, error: bool = False
) -> Response:
    """303 to `to` (a path of the dashboard), carrying a one-time notice for the next page."""
    response = RedirectResponse(root(request) + to, 303)
    if notice:
        kind = "error" if error else "ok"
        set_cookie(request, response, NOTICE_COOKIE, quote(f"{kind}:{notice[:1500]}", safe=""))
    return response


def query(**params: Any) -> str:
    """`?a=1&b=2` of the params that are not None or empty; "" when none are."""
    kept = [(k, str(v)) for k, v in params.items() if v not in (None, "")]
    return "?" + urlencode(kept) if kept else ""


Endpoint = Callable[[Request], Awaitable[Response]]


def handled(endpoint: Endpoint) -> Endpoint:
    """The endpoint, answering failures with an error page (404, 409, ...) instead of a trace."""

    async def serve(request: Request) -> Response:
        try:
            return await endpoint(request)
        except csrf.Forbidden as exc:
            return failure_page(request, 403, "Forbidden", str(exc))
        except csrf.FormTooLargeError as exc:
            return failure_page(request, 413, "PayloadTooLarge", str(exc))
        except Exception as exc:
            where = f"{request.method} {request.url.path}"
            status, name, message = describe(exc, where=where)
            form = csrf.was_read(request) if status == 503 else None
            if form is not None:
                return resend_page(request, form, message)
            return failure_page(request, status, name, message)

    return serve


# Fields a form carries for the user without showing them (kept as they were sent).
_HIDDEN = frozenset({csrf.FIELD, "confirmed", "action", "back", "run", "from_step", "_fields"})
# The widgets the page a form comes back on draws (see `described` in _macros.html).
_WIDGETS = frozenset({"text", "textarea", "checkbox"})


def resend_page(request: Request, form: csrf.Form, message: str) -> Response:
    """A form the database did not answer, sent back with what was typed in it (503).

    The page it came from cannot be read again while the database does not answer, so
    this one holds the same fields, editable, and sends them to the same place again.
    """
    shown = _described(form)
    fields = [
        {
            "name": name,
            "value": value,
            "label": label,
            "hidden": False,
            "checkbox": widget == "checkbox",
            "long": widget == "textarea" or "\n" in value or len(value) > 60,
        }
        for name, label, widget in shown
        for value in (form.get(name),)
    ]
    fields += [
        {
            "name": name,
            "value": value,
            "label": name.removeprefix("v.").replace("_", " ").capitalize(),
            "hidden": name in _HIDDEN,
            "checkbox": False,
            "long": "\n" in value or len(value) > 60 or name == "payload",
        }
        for name, value in form
        if name != csrf.FIELD and name not in {item[0] for item in shown}
    ]
    context = {
        "title": "The database did not answer",  # the message says if the change was made
        "message": message,
        "action": _sent_to(request),
        "fields": fields,
        "back": _referer(request) or root(request) + "/",
    }
    return page(request, "resend.html", context, 503)


def _described(form: csrf.Form) -> list[tuple[str, str, str]]:
    """(name, label, widget) of the fields the form said it has, in its order.

    A checkbox left unchecked is sent as nothing: it is listed here all the same.
    """
    try:
        told = json.loads(form.get("_fields") or "[]")
    except ValueError:
        return []
    if not isinstance(told, list):
        return []
    return [
        (item[0], item[1], item[2])
        for item in told
        if isinstance(item, list)
        and len(item) == 3
        and all(isinstance(part, str) for part in item)
        and item[0] not in _HIDDEN
        and item[2] in _WIDGETS
    ]


def _sent_to(request: Request) -> str:
    """The path the form was posted to, as sent (a run id's `%2F` and `%23` kept quoted)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return raw.decode("latin-1").partition("?")[0]
    return quote(request.url.path)


def _referer(request: Request) -> str:
    """The page of this dashboard a form was sent from (a path), or "" when not known."""
    sent = urlsplit(request.headers.get("referer", ""))
    if sent.netloc != request.url.netloc or not sent.path.startswith(root(request) or "/"):
        return ""
    return sent.path + (f"?{sent.query}" if sent.query else "")


def failure_page(request: Request, status: int, name: str, message: str) -> Response:
    """The error page: what went wrong, in the API's terms."""
    return page(request, "error.html", {"status": status, "name": name, "message": message}, status)
