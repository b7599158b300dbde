"""The queues page (`/queues`): limits edited live, and how many runs each queue holds.

Limits change through `engine.queues.update` (workers apply them at their next claim).
The counts are one grouped COUNT of the unfinished runs (the store's `counts`, which
the metrics gauges read too), so they are exact however long the backlog.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.dashboard.api.replies import describe as describe_failure
from cairn.dashboard.target import Target
from cairn.dashboard.ui import csrf, render
from cairn.models import RunStatus
from cairn.representation import queues as queue_forms
from cairn.runtime.control import RunControl
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Counts

DEFAULT = "(no queue)"
LIMITS = tuple(queue_forms.LIMITS)


def per_queue(counts: Counts, status: str) -> dict[str, int]:
    """Unfinished runs in `status`, by queue name (DEFAULT for runs without one)."""
    found: dict[str, int] = {}
    for (queue, stored), n in counts.runs.items():
        if stored == status:
            name = queue or DEFAULT
            found[name] = found.get(name, 0) + n
    return found


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
        async def read(control: RunControl) -> tuple[Any, Counts]:
            return await control.queues.list(), await control.store.read(worker_ops.counts())

        infos, counts = await target(read)
        running, pending = (
            per_queue(counts, RunStatus.RUNNING.value),
            per_queue(counts, RunStatus.PENDING.value),
        )
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
            "limits": queue_forms.LIMITS,
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
