"""The login page: asks for the dashboard's token once and keeps a session cookie.

The cookie (HttpOnly, SameSite=Strict) holds `auth.session_value(token)`, never the token,
and the guard (`auth.BearerAuth`) accepts it for the pages. Without a token there is
nothing to log in to, and `/login` goes to the runs page.
"""

from __future__ import annotations

import asyncio
import hmac

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.dashboard import auth
from cairn.dashboard.ui import csrf, render
from cairn.dashboard.ui.runs import safe_back

WRONG_DELAY = 0.3  # seconds: a wrong token answers slowly, to slow down guessing


def routes(token: str | None) -> list[BaseRoute]:
    """`GET`/`POST /login` and `POST /logout`."""

    def form(request: Request, wanted: str, error: str = "", status: int = 200) -> Response:
        context = {"title": "Log in", "nav": "", "next": wanted, "error": error}
        return render.page(request, "login.html", context, status)

    @render.handled
    async def show(request: Request) -> Response:
        wanted = safe_back(request.query_params.get("next", "/"))
        if token is None:
            return render.redirect(request, wanted)
        return form(request, wanted)

    @render.handled
    async def log_in(request: Request) -> Response:
        sent = await csrf.read_form(request)
        wanted = safe_back(sent.get("next", "/"))
        if token is None:
            return render.redirect(request, wanted)
        given = sent.get("token").strip().encode("utf-8")
        if not hmac.compare_digest(given, token.encode("utf-8")):
            await asyncio.sleep(WRONG_DELAY)
            return form(request, wanted, "That is not this dashboard's token.", 401)
        response = render.redirect(request, wanted)
        render.set_cookie(request, response, auth.SESSION_COOKIE, auth.session_value(token))
        return response

    @render.handled
    async def log_out(request: Request) -> Response:
        await csrf.read_form(request)
        response = render.redirect(request, auth.LOGIN_PATH)
        response.delete_cookie(auth.SESSION_COOKIE, path=render.root(request) or "/")
        return response

    return [
        Route(auth.LOGIN_PATH, show, methods=["GET"], name="ui:login"),
        Route(auth.LOGIN_PATH, log_in, methods=["POST"]),
        Route("/logout", log_out, methods=["POST"]),
    ]
