"""The schedules page (`/schedules`): each schedule's timing and next ticks; pause, resume, trigger.

Ticks are fired by engines with workers; this page only reads and switches schedules,
through the same `engine.schedules` calls as `cairn schedules`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.authoring.schedule_ticks import cron_after, describe_seconds
from cairn.dashboard.api.replies import BadRequest
from cairn.dashboard.api.replies import describe as describe_failure
from cairn.dashboard.target import Target
from cairn.dashboard.ui import csrf, render
from cairn.runtime.control import RunControl
from cairn.runtime.schedules import ScheduleInfo

TICKS = 3  # next ticks shown per schedule
QUESTIONS = {
    "pause": "Pause schedule {id}? No tick fires until it is resumed.",
    "resume": "Resume schedule {id} from its next tick?",
    "trigger": "Start one run of schedule {id} now?",
}


def next_ticks(info: ScheduleInfo, count: int = TICKS) -> list[datetime]:
    """The schedule's next `count` ticks (none while paused)."""
    if info.paused or info.next_tick is None:
        return []
    ticks = [info.next_tick]
    moment = info.next_tick.timestamp()
    for _ in range(count - 1):
        if info.cron is not None:
            moment = cron_after(info.cron, ZoneInfo(info.tz), moment)
        elif info.every is not None:
            moment += info.every.total_seconds()
        else:
            break
        ticks.append(datetime.fromtimestamp(moment, UTC))
    return ticks


def timing(info: ScheduleInfo) -> str:
    """`cron 0 9 * * 1-5 (Europe/Berlin)` or `every 1h`."""
    if info.cron is not None:
        return f"cron {info.cron} ({info.tz})"
    return f"every {describe_seconds(info.every.total_seconds())}" if info.every else ""


def routes(target: Target) -> list[BaseRoute]:
    """The schedules page and its three actions."""

    @render.handled
    async def listing(request: Request) -> Response:
        infos = await target(lambda control: control.schedules.list())
        shown: list[dict[str, Any]] = [
            {"info": info, "timing": timing(info), "ticks": next_ticks(info)} for info in infos
        ]
        context = {
            "title": "Schedules",
            "nav": "schedules",
            "schedules": shown,
            "questions": QUESTIONS,
        }
        return render.page(request, "schedules.html", context)

    @render.handled
    async def act(request: Request) -> Response:
        schedule_id, verb = request.path_params["schedule_id"], request.path_params["verb"]
        form = await csrf.read_form(request)
        if verb not in QUESTIONS:
            raise BadRequest(f"unknown action {verb!r} (pause, resume or trigger)")
        if form.get("confirmed") != "yes":
            return render.page(
                request,
                "confirm.html",
                {
                    "title": f"{verb.capitalize()} schedule",
                    "nav": "schedules",
                    "question": QUESTIONS[verb].format(id=schedule_id),
                    "items": [],
                    "action": f"/schedules/{render.segment(schedule_id)}/{verb}",
                    "fields": [],
                    "button": f"Yes, {verb}",
                    "back": "/schedules",
                },
            )

        async def go(control: RunControl) -> str:
            if verb == "pause":
                await control.schedules.pause(schedule_id)
                return f"schedule {schedule_id} paused"
            if verb == "resume":
                await control.schedules.resume(schedule_id)
                return f"schedule {schedule_id} resumed"
            handle = await control.schedules.trigger(schedule_id)
            return f"schedule {schedule_id} triggered: run {handle.run_id}"

        try:
            notice = await target(go)
        except Exception as exc:
            status, _, message = describe_failure(exc, where=f"POST /schedules/{verb}")
            if status >= 500:
                raise
            return render.redirect(request, "/schedules", notice=message, error=True)
        return render.redirect(request, "/schedules", notice=notice)

    return [
        Route("/schedules", listing, methods=["GET"], name="ui:schedules"),
        Route("/schedules/{schedule_id:path}/{verb}", act, methods=["POST"]),
    ]
