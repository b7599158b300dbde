"""The runs page (`/`): a filtered, keyset-paged table of runs, and cancel or retry of a selection.

Filters live in the query string (`status`, `workflow`, `version`, `run_id_prefix`,
`origin`, `since`, `until`, `col.NAME`, or a `where` box of `NAME=VALUE` pairs), read by
the API's own filter code. Above the table, the count of each status under the other
filters (one grouped query); each row says what holds its run in the words of
`RunSummary.waiting_for`, and a finished run's error sits under its status.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.dashboard.api import actions, inputs
from cairn.dashboard.api import runs as api_runs
from cairn.dashboard.api.replies import BadRequest, describe
from cairn.dashboard.target import Target
from cairn.dashboard.ui import csrf, render
from cairn.errors import InvalidName
from cairn.models import ORIGINS, UNKNOWN_ORIGIN, RunPage, RunStatus, RunSummary
from cairn.representation import words
from cairn.runtime.control import RunControl
from cairn.store.programs import workers as worker_ops
from cairn.store.records import WorkerRecord

PAGE = 50
MAX_SELECTED = 500
VERBS = {"cancel": actions.cancel_run, "retry": actions.retry_run}


def where_text(columns: dict[str, Any]) -> str:
    """Column filters as the `where` box shows them: `order=7 label=sum`."""
    parts = []
    for name, value in columns.items():
        text = value if isinstance(value, str) and inputs.value(value) == value else None
        parts.append(f"{name}={text if text is not None else json.dumps(value)}")
    return " ".join(shlex.quote(part) for part in parts)


def parse_where(text: str) -> dict[str, str]:
    """`order=7 'label=my sum'` as `col.NAME` query values; BadRequest for a bad pair."""
    try:
        items = shlex.split(text)
    except ValueError as exc:
        raise BadRequest(f"column filter {text!r}: {exc}") from None
    found: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadRequest(f"column filter {item!r} is not NAME=VALUE (e.g. order=42)")
        found[api_runs.COLUMN + name.strip()] = value
    return found


def read_filters(request: Request) -> tuple[dict[str, Any], dict[str, str]]:
    """(`list_runs` keyword arguments, the canonical query values that give them).

    Times without a zone (what a datetime-local input sends) are the dashboard's local
    time, the time its pages show.
    """
    given: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        value = value.strip()
        if not value:
            continue
        if key == "where":
            given.update(parse_where(value))
        elif key in api_runs.FILTERS or key.startswith(api_runs.COLUMN):
            given[key] = value
    local = datetime.now().astimezone().tzinfo or UTC
    return api_runs.filters(given, naive=local), given


def status_counts(
    counts: api_runs.Counts, given: dict[str, str], chosen: str
) -> list[dict[str, Any]]:
    """The count of each status under the other filters, as links that pick that status.

    A count that is a lower bound (over COUNT_LIMIT runs matched) reads "1,001+", and
    so does the total when any count is one.
    """
    rest = {k: v for k, v in given.items() if k not in ("status", "cursor")}
    more = "" if counts.exact else "+"
    shown = [
        {
            "status": "",
            "label": "all",
            "count": f"{counts.total:,}{more}",
            "none": counts.total == 0,
            "link": render.query(**rest) or "?",
            "current": not chosen,
        }
    ]
    for status in RunStatus:
        n = counts.by_status.get(status.value, 0)
        shown.append(
            {
                "status": status.value,
                "label": status.value,
                "count": f"{n:,}{'+' if status.value in counts.lower_bounds else ''}",
                "none": n == 0,
                "link": render.query(**rest, status=status.value),
                "current": chosen == status.value,
            }
        )
    return shown


PARKED = (RunStatus.WAITING, RunStatus.SLEEPING)
DUE = "a worker to take it (it is due)"


def live_workers(workers: list[WorkerRecord], now: float) -> list[WorkerRecord]:
    """The workers whose heartbeat is younger than their lease."""
    return [w for w in workers if w.heartbeat_at > 0 and now - w.heartbeat_at <= w.lease]


def idle_reason(run: RunSummary, live: list[WorkerRecord]) -> str | None:
    """Why a due PENDING run is not taken: no live worker, or none that runs its workflow."""
    if run.status is not RunStatus.PENDING or run.waiting_for is not None:
        return None
    if not live:
        return "no live worker (start one: cairn worker)"
    if any(w.workflows is None for w in live):
        return None  # a worker that does not say may run anything
    known = {name for w in live for name in json.loads(w.workflows or "[]")}
    return None if run.workflow in known else f"no live worker runs {run.workflow}"


def row(run: RunSummary, *, now: float, live: list[WorkerRecord] | None = None) -> dict[str, Any]:
    """One run as the table (and its live updates) show it."""
    finished = run.status.finished
    end = run.updated_at.timestamp() if finished else now
    started = run.started_at
    waiting = run.waiting_for
    if waiting is None and live is not None:
        waiting = idle_reason(run, live)
    if waiting is None and run.status in PARKED:
        # Woken (a cancel or an event reached it) and due: the cell was blank, as if
        # nothing held the run, while its page said what does.
        waiting = DUE
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "version": run.version,
        "status": run.status.value,
        "finished": finished,
        "columns": run.columns,
        "started_at": started,
        "started": words.when(started),  # for live updates, as text
        "duration": "" if started is None else words.seconds(max(0.0, end - started.timestamp())),
        "progress": words.progress_text(run.progress, run.status.value),
        "percent": words.progress_percent(run.progress, run.status.value),
        "waiting": waiting or "",
        "error": words.error_line(run.error),
        "continued_to": run.continued_to,  # said under CONTINUED, as the refusals say it
        "origin": run.origin or UNKNOWN_ORIGIN,
    }


def column_link(filters: dict[str, str], name: str, value: Any) -> str:
    """The query of the current filters plus `NAME = value`, from the first page."""
    chosen = {k: v for k, v in filters.items() if k != "cursor"}
    text = value if isinstance(value, str) and inputs.value(value) == value else json.dumps(value)
    chosen[api_runs.COLUMN + name] = text
    return render.query(**chosen)


def routes(target: Target) -> list[BaseRoute]:
    """The runs page and its bulk action."""

    @render.handled
    async def runs_page(request: Request) -> Response:
        error = None
        try:
            chosen, given = read_filters(request)
        except (BadRequest, InvalidName) as exc:  # shown above an unfiltered list
            chosen, given, error = {}, {}, str(exc)
        cursor = request.query_params.get("cursor") or None

        async def read(
            control: RunControl,
        ) -> tuple[RunPage, api_runs.Counts, float, list[WorkerRecord]]:
            try:
                found = await control.list_runs(**chosen, limit=PAGE, cursor=cursor)
            except ValueError as exc:  # a cursor this page did not hand out
                raise BadRequest(str(exc)) from None
            counts = await api_runs.count(control, chosen)
            now = control.clock.now()
            return (
                found,
                counts,
                now,
                live_workers(await control.store.read(worker_ops.list_workers()), now),
            )

        found, counts, now, live = await target(read)
        rows = [row(run, now=now, live=live) for run in found]
        for shown in rows:
            shown["links"] = {
                name: column_link(given, name, value) for name, value in shown["columns"].items()
            }
        columns = {
            k[len(api_runs.COLUMN) :]: inputs.value(v)
            for k, v in given.items()
            if k.startswith(api_runs.COLUMN)
        }
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        context = {
            "title": "Runs",
            "nav": "runs",
            "rows": rows,
            "error": error,
            "statuses": [s.value for s in RunStatus],
            "origins": [*ORIGINS, UNKNOWN_ORIGIN],
            "counts": status_counts(counts, given, given.get("status", "").upper()),
            "filters": {
                "status": given.get("status", "").upper(),
                "workflow": given.get("workflow", ""),
                "version": given.get("version", ""),
                "where": where_text(columns),
                "run_id_prefix": given.get("run_id_prefix", ""),
                "origin": given.get("origin", "").lower(),
                "since": given.get("since", ""),
                "until": given.get("until", ""),
            },
            "filtered": bool(given),
            "next": render.query(**given, cursor=found.next_cursor) if found.next_cursor else None,
            "first": (render.query(**given) or "?") if cursor else None,
            "versioned": any(r["version"] for r in rows),
            "back": here[len(render.root(request)) :] or "/",
        }
        return render.page(request, "runs.html", context)

    @render.handled
    async def bulk(request: Request) -> Response:
        form = await csrf.read_form(request)
        verb = form.get("action")
        back = safe_back(form.get("back"))
        if verb not in VERBS:
            raise BadRequest(f"unknown action {verb!r} (cancel or retry)")
        ids = list(dict.fromkeys(form.all("run")))[:MAX_SELECTED]
        if not ids:
            return render.redirect(request, back, notice="select at least one run", error=True)
        if form.get("confirmed") != "yes":
            return render.page(
                request,
                "confirm.html",
                {
                    "title": f"{verb.capitalize()} runs",
                    "nav": "runs",
                    "question": f"{verb.capitalize()} {len(ids)} selected run(s)?",
                    "items": ids,
                    "action": "/runs/bulk",
                    "fields": [("action", verb), ("back", back), *(("run", i) for i in ids)],
                    "button": f"Yes, {verb}",
                    "back": back,
                },
            )
        act = VERBS[verb]

        async def go(control: RunControl) -> tuple[int, list[str]]:
            done, refused = 0, []
            for run_id in ids:
                try:
                    await act(control, run_id)
                    done += 1
                except Exception as exc:
                    status, _, message = describe(exc, where=f"POST /runs/bulk ({verb})")
                    if status >= 500:
                        raise
                    # "continued as new: NEW (WAITING)" names no run of the selection.
                    refused.append(message if run_id in message else f"{run_id}: {message}")
            return done, refused

        done, refused = await target(go)
        text = f"{verb}: {done} of {len(ids)} run(s) done"
        if refused:
            text += "; refused: " + "; ".join(refused[:5]) + (" …" if len(refused) > 5 else "")
        return render.redirect(request, back, notice=text, error=bool(refused))

    async def runs_alias(request: Request) -> Response:
        return render.redirect(
            request, "/" + (f"?{request.url.query}" if request.url.query else "")
        )

    return [
        Route("/", runs_page, methods=["GET"], name="ui:runs"),
        Route("/runs", runs_alias, methods=["GET"]),
        Route("/runs/bulk", bulk, methods=["POST"]),
    ]


def safe_back(text: str) -> str:
    """A path of this dashboard to go back to (never another site's address)."""
    if not text.startswith("/") or text.startswith("//") or "\\" in text:
        return "/"
    return text
