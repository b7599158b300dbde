"""The queues page (`/queues`): limits edited live, and how many runs each queue holds.

Limits change through `engine.queues.update` (workers apply them at their next claim).
The counts come from listing RUNNING and PENDING runs, up to `COUNTED` of each, so a
backlog larger than that shows as "1000+".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.cli import queues as cli_queues
from cairn.dashboard.api.replies import describe as describe_failure
from cairn.dashboard.target import Target
from cairn.dashboard.ui import csrf, render
from cairn.models import RunStatus
from cairn.runtime.control import RunControl

COUNTED = 1000
DEFAULT = "(no queue)"
LIMITS = tuple(cli_queues.LIMITS)


async def count(control: RunControl, status: RunStatus) -> tuple[Counter[str], bool]:
    """Runs in `status` per queue, and True when there were more than COUNTED."""
    counts: Counter[str] = Counter()
    cursor, seen = None, 0
    while seen < COUNTED:
        page = await control.list_runs(status=status, limit=min(500, COUNTED - seen), cursor=cursor)
        seen += len(page)
        counts.update(run.queue or DEFAULT for run in page)
        cursor = page.next_cursor
        if cursor is None:
            return counts, False
    return counts, True


def limits(form: csrf.Form) -> dict[str, Any]:
    """The limits a queue form sets: a blank box is no limit; ValueError for a bad number."""
    found: dict[str, Any] = {}
    for key in LIMITS:
        text = form.get(key).strip()
        if not text:
            found[key] = None
        elif key == "rate":
            found[key] = text
        else:
            try:
                found[key] = int(text)
            except ValueError:
                raise ValueError(f"{key} must be a whole number or blank, got {text!r}") from None
    return found


def routes(target: Target) -> list[BaseRoute]:
    """The queues page and its limit form."""

    @render.handled
    async def listing(request: Request) -> Response:
        async def read(control: RunControl) -> tuple[Any, Any, Any]:
            infos = await control.queues.list()
            return (
                infos,
                await count(control, RunStatus.RUNNING),
                await count(control, RunStatus.PENDING),
            )

        infos, (running, more_running), (pending, more_pending) = await target(read)
        stored = {info.name: info for info in infos}
        names = sorted({*stored, *running, *pending} - {DEFAULT})
        if DEFAULT in running or DEFAULT in pending:
            names.append(DEFAULT)
        rows = [
            {
                "name": name,
                "info": stored.get(name),
                "running": running.get(name, 0),
                "pending": pending.get(name, 0),
                "editable": name != DEFAULT,
            }
            for name in names
        ]
        context = {
            "title": "Queues",
            "nav": "queues",
            "rows": rows,
            "limits": cli_queues.LIMITS,
            "more_running": more_running,
            "more_pending": more_pending,
            "counted": COUNTED,
        }
        return render.page(request, "queues.html", context)

    @render.handled
    async def update(request: Request) -> Response:
        form = await csrf.read_form(request)
        name = request.path_params.get("name") or form.get("name").strip()
        try:
            chosen = limits(form)
            await target(lambda control: control.queues.update(name, **chosen))
        except Exception as exc:
            status, _, message = describe_failure(exc, where="POST /queues")
            if status >= 500:
                raise
            return render.redirect(request, "/queues", notice=message, error=True)
        shown = ", ".join(f"{k} {v if v is not None else 'none'}" for k, v in chosen.items())
        return render.redirect(request, "/queues", notice=f"queue {name}: {shown}")

    return [
        Route("/queues", listing, methods=["GET"], name="ui:queues"),
        Route("/queues", update, methods=["POST"]),
        Route("/queues/{name:path}", update, methods=["POST"]),
    ]
