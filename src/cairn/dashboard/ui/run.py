"""A run's page (`/runs/{id}`): facts, chain, step timeline with attempts, actions and events.

It shows what `cairn runs show` shows (read by the same `fetch`), and its buttons call
the API's own action functions, so a verb the run can no longer take is refused the same
way (RunFinished). Steering posts go through a confirmation, in the browser or as a page.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.core import scheduled_starts
from cairn.dashboard.api import actions, inputs
from cairn.dashboard.api import streams as api_streams
from cairn.dashboard.api.replies import BadRequest
from cairn.dashboard.api.replies import describe as describe_failure
from cairn.dashboard.target import Target
from cairn.dashboard.ui import bars, csrf, live, render, timeline
from cairn.models import EventDelivery, Execution, HistoryEntry, RunStatus
from cairn.representation import runs as run_forms
from cairn.representation import words
from cairn.runtime import blocking
from cairn.runtime.control import RunControl
from cairn.store.programs import streams as stream_ops

QUESTIONS = {
    "cancel": (
        "Cancel run {id}? It ends CANCELLED at its current or next durable point, "
        "unless it finishes first."
    ),
    "pause": "Pause run {id} at its next durable point?",
    "resume": "Resume run {id}?",
    "retry": "Retry run {id} from its failed step?",
    "restart": "Start a new run with the same input as {id}?",
    "fork": "Start a new run reusing the steps of {id} before entry {step}?",
}
# Entries a run's page shows unless asked for all (`?timeline=all`): the last ones, where
# the run is now. A long run's whole timeline is a page of megabytes.
TIMELINE_SHOWN = 200
# History entries the page reads at most: the latest ones (the API pages through all).
WINDOW = 2000
# Who the history says asked for a retry, restart or fork made on these pages.
BY = "dashboard"
VERBS: dict[str, actions.Act] = {
    "cancel": actions.cancel_run,
    "pause": actions.pause_run,
    "resume": actions.resume_run,
    "retry": partial(actions.retry_run, by=BY),
}


def available(shown: run_forms.Shown) -> list[str]:
    """The actions the run can take now, in the order the page shows them."""
    status = RunStatus(shown.run.status)
    verbs = []
    # A cancel asked for already: the page says so instead of offering it again, nor a
    # pause (the store's pause of a parked run drops the cancel request).
    if not status.finished and shown.run.control != "cancel":
        verbs.append("cancel")
        if status is not RunStatus.PAUSED and shown.run.control != "pause":
            verbs.append("pause")
    if status is RunStatus.PAUSED or shown.run.control == "pause":
        verbs.append("resume")
    if status is RunStatus.FAILED:
        verbs.append("retry")
    verbs.append("restart")
    return verbs


def acted(verb: str, run_id: str, done: dict[str, Any]) -> str:
    """The notice after a verb: what was done, in words that stay true.

    Never the status the run had when the action returned: the page then follows the run
    live, and a notice saying SLEEPING beside a CANCELLED badge was a contradiction.
    """
    ended = RunStatus(done["status"])
    if verb == "cancel":
        if ended is RunStatus.CANCELLED:
            return f"cancel: run {run_id} is cancelled"
        return (
            f"cancel: run {run_id} stops at its current or next durable point, "
            "unless it finishes first"
        )
    if verb in ("pause", "resume") and done.get("requested") == "cancel":
        return f"{verb}: run {run_id} is not changed: a cancel is requested and stands"
    if verb == "pause":
        if ended is RunStatus.PAUSED:
            return f"pause: run {run_id} is paused"
        return f"pause: run {run_id} pauses at its next durable point"
    if verb == "resume":
        return f"resume: run {run_id} goes on"
    return f"retry: run {run_id} goes on from its failed step"


def children(entries: list[HistoryEntry]) -> list[dict[str, Any]]:
    """The child runs the history names (start_child, schedule_workflow), in order."""
    found = []
    for entry in entries:
        if not isinstance(entry.result, dict):
            continue
        if entry.kind == scheduled_starts.KIND:
            run_id = entry.result.get("run_id")
            if isinstance(run_id, str) and run_id:
                found.append({"run_id": run_id, "workflow": entry.name, "status": "scheduled"})
            continue
        if entry.kind != "child":
            continue
        child_id = entry.result.get("child_id") or entry.result.get("run_id")
        if isinstance(child_id, str) and child_id:
            found.append({"run_id": child_id, "workflow": entry.name, "status": entry.status})
    return found


def facts(shown: run_forms.Shown) -> dict[str, Any]:
    """The run's facts for the page: the API's run dict plus the texts people read."""
    run = shown.run
    found = run_forms.run_dict(shown)
    # Times as the record holds them (epoch seconds), for the page's time filters.
    for name in ("created_at", "updated_at", "started_at", "finished_at", "scheduled_at"):
        found[name] = getattr(run, name)
    found["executing"] = shown.executing  # with datetimes, for the page's times
    started = run.started_at
    end = run.finished_at if run.finished_at else (shown.now if started else None)
    found["duration"] = words.seconds(None if started is None or end is None else end - started)
    found["waiting_text"] = (
        words.waiting_text(shown.waiting, now=shown.now, run_id=run.run_id)
        if shown.waiting is not None
        else ""
    )
    found["progress_text"] = words.progress_text(found["progress"], run.status)
    found["percent"] = words.progress_percent(found["progress"], run.status)
    found["error_line"] = words.error_line(shown.error)
    unrecorded = run_forms.unrecorded_recoveries(shown)
    found["unrecorded_note"] = words.unrecorded_note(unrecorded) if unrecorded else ""
    found["finished"] = RunStatus(run.status).finished
    first = shown.executions[0] if shown.executions else None
    found["origin"] = _origin(first) if run.restarted_from or run.forked_from else ""
    latest = shown.executions[-1] if shown.executions else None
    found["execution_text"] = (
        words.execution_label(latest, named=False) if latest and latest.number > 1 else ""
    )
    pending = run.control if run.control and not found["finished"] else None
    found["control_text"] = words.control_text(pending, run.updated_at) if pending else ""
    # The event form appears only where a wait can take what it sends: not on a run
    # that is to end CANCELLED at its next durable point.
    found["awaited_events"] = [] if pending == "cancel" else blocking.awaited_events(run)
    return found


def _origin(first: Execution | None) -> str:
    """`by ada at 2026-...`: who made a copied run, and when."""
    if first is None:
        return ""
    by = f"by {first.by} " if first.by else ""
    return f"{by}at {words.when(first.started_at)}"


def execution_labels(shown: run_forms.Shown) -> dict[int, str]:
    """A heading for each execution's entries; none when the run has had only one."""
    if len(shown.executions) <= 1:
        return {}
    return {e.number: words.execution_label(e).capitalize() for e in shown.executions}


def routes(target: Target) -> list[BaseRoute]:
    """The run page and its actions."""

    @render.handled
    async def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]

        shown = await target(lambda control: run_forms.fetch(control, run_id, window=WINDOW))
        names = await target(lambda control: control.store.read(stream_ops.stream_names(run_id)))
        entries = timeline.timeline(shown.history, shown.attempts, shown.executing)
        whole = request.query_params.get("timeline") == "all"
        hidden = 0 if whole else max(0, len(entries) - TIMELINE_SHOWN)
        timeline.refer(entries[hidden:], shown.error)
        context = {
            "title": f"Run {run_id}",
            "nav": "runs",
            "run": facts(shown),
            "verbs": available(shown),
            "questions": {v: QUESTIONS[v].format(id=run_id, step="{step}") for v in QUESTIONS},
            "children": children(shown.history),
            "bars": bars.chart(shown.run, shown.history, shown.attempts, shown.now),
            "timeline": entries[hidden:],
            "timeline_total": len(entries),
            "timeline_hidden": hidden,
            "history_skipped": shown.skipped,
            "history_note": (
                f"This page reads the last {shown.entries - shown.skipped:,} of "
                f"{shown.entries:,} history entries; the first {shown.skipped:,} are not "
                "shown here."
            ),
            "seqs": [entry.seq for entry in shown.history if not entry.superseded],
            "streams": [name for name, _items, _top in names],
            "executions": execution_labels(shown),
            # Of this very read: the live stream's first event then says if it is stale.
            "version": live.version(
                shown.run,
                shown.entries,  # the journal's length
                len(shown.attempts),
                shown.executing,
            ),
        }
        return render.page(request, "run.html", context)

    @render.handled
    async def stream_events(request: Request) -> Response:
        """The run page's view of a stream: the API's server-sent events, for the session."""
        run_id, name = request.path_params["run_id"], request.path_params["name"]
        resumed = request.headers.get("last-event-id")
        return await api_streams.respond(target, run_id, name, resumed)

    @render.handled
    async def act(request: Request) -> Response:
        run_id, verb = request.path_params["run_id"], request.path_params["verb"]
        form = await csrf.read_form(request)
        here = f"/runs/{render.segment(run_id)}"
        try:
            return await steer(request, run_id, verb, form, here)
        except Exception as exc:
            status, _, message = describe_failure(exc, where=f"POST {here}/{verb}")
            if status >= 500 or status == 404:
                raise
            return render.redirect(request, here, notice=f"{verb}: {message}", error=True)

    async def steer(
        request: Request, run_id: str, verb: str, form: csrf.Form, here: str
    ) -> Response:
        if verb == "event":
            return await send_event(request, run_id, form, here)
        if verb not in QUESTIONS:
            raise BadRequest(f"unknown action {verb!r} (one of {', '.join(QUESTIONS)})")
        step = None
        if verb == "fork":
            text = form.get("from_step").strip()
            if not text.isdigit():
                raise BadRequest(f"fork needs the history entry to start from, got {text!r}")
            step = int(text)
        if form.get("confirmed") != "yes":
            fields = [("from_step", str(step))] if step is not None else []
            return render.page(
                request,
                "confirm.html",
                {
                    "title": f"{verb.capitalize()} run",
                    "nav": "runs",
                    "question": QUESTIONS[verb].format(id=run_id, step=step),
                    "items": [],
                    "action": f"{here}/{verb}",
                    "fields": fields,
                    "button": f"Yes, {verb}",
                    "back": here,
                },
            )
        if verb in VERBS:
            done = await target(lambda control: VERBS[verb](control, run_id))
            return render.redirect(request, here, notice=acted(verb, run_id, done))

        async def copy(control: RunControl) -> str:
            if step is None:
                handle = await control.restart(run_id, by=BY)
            else:
                seqs = [entry.seq for entry in await control.history(run_id)]
                if step not in seqs:
                    raise BadRequest(f"run {run_id!r} has no history entry {step}")
                handle = await control.fork(run_id, step, by=BY)
            return handle.run_id

        new_id = await target(copy)
        notice = f"{verb}: started run {new_id} from {run_id}"
        return render.redirect(request, f"/runs/{render.segment(new_id)}", notice=notice)

    async def send_event(request: Request, run_id: str, form: csrf.Form, here: str) -> Response:
        name = form.get("name").strip()
        if not name:
            return render.redirect(request, here, notice="an event needs a name", error=True)
        text = form.get("payload").strip()
        payload = inputs.loads(text, what="the payload") if text else None
        key = form.get("idempotency_key").strip() or None

        async def go(control: RunControl) -> EventDelivery:
            return await control.send_event(run_id, name, payload, idempotency_key=key)

        sent = await target(go)
        notice = sent.note or f"event {name!r} sent to run {sent.run_id}"
        return render.redirect(request, here, notice=notice, error=sent.note is not None)

    return [
        Route("/runs/{run_id:path}/{verb}", act, methods=["POST"]),
        Route("/runs/{run_id:path}/streams/{name}", stream_events, methods=["GET"]),
        Route("/runs/{run_id:path}", run_page, methods=["GET"], name="ui:run"),
    ]
