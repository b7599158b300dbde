"""The dashboard's web pages: server-rendered HTML beside /api/v1, live through server-sent events.

One module per page (runs, run, inbox, schedules, queues, workers), plus the login page,
the event stream, CSRF-checked form reading and rendering. Every page reads and steers
runs through the same RunControl calls (and API helpers) as the JSON API; nothing here
touches SQL. The pages work without JavaScript; `static/cairn.js` only adds confirmation
dialogs and live updates.
"""

from __future__ import annotations

from pathlib import Path

from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from cairn.dashboard.target import Target
from cairn.dashboard.ui import inbox, live, login, queues, run, runs, schedules, workers

STATIC = Path(__file__).parent / "static"


def routes(target: Target, *, token: str | None, streams: live.Streams) -> list[BaseRoute]:
    """Every page route, and the static files under /static."""
    return [
        *login.routes(token),
        *runs.routes(target),
        *run.routes(target),
        *inbox.routes(target),
        *schedules.routes(target),
        *queues.routes(target),
        *workers.routes(target),
        *live.routes(target, streams),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
