"""Live updates: `GET /ui/events?run=ID...`, a server-sent event stream of the runs' changes.

The server reads the watched runs about once a second and sends an event `run` (the row
the runs page shows, plus a `version` that changes with anything the run page shows)
whenever one changed, then `end` once every watched run has finished. A run page shows
one read of its run: on a new version it fetches itself again whole, never patching a
badge from the event beside sections from another read. A stream lasts at
most `LIFETIME` seconds and stops when the server shuts down; the browser reconnects on
its own. Pages work without it: it only spares a reload.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from cairn.dashboard.api.replies import BadRequest, stream_failure
from cairn.dashboard.target import Target
from cairn.dashboard.ui import render, runs
from cairn.errors import RunNotFound, StoreError
from cairn.models import RunStatus
from cairn.runtime.control import RunControl
from cairn.runtime.run_reading import summary
from cairn.store.programs import journal
from cairn.store.records import RunRecord

POLL = 1.0  # seconds between reads of the watched runs
LIFETIME = 30.0  # seconds a stream lasts before the browser reconnects
PING = 15.0  # seconds between comments that keep proxies from closing an idle stream
MAX_WATCHED = 100


class Streams:
    """The open event streams' shared off switch: `close()` ends them all (server shutdown)."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()

    def close(self) -> None:
        """End every open stream at its next poll (at once if it is waiting)."""
        self.closing.set()


def event(name: str, data: Any) -> str:
    """One server-sent event."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def version(
    record: RunRecord,
    entries: int | None = None,
    attempts: int | None = None,
    executing: list[dict[str, Any]] | None = None,
) -> str:
    """A digest of what a page shows of a run: it changes whenever the page would.

    `entries` and `attempts` (the run page's timeline) count its history entries and
    failed attempts, `executing` lists the step attempts in flight. A run page takes its
    version from the very read it shows, so that the stream's first event tells it
    whether anything changed since.
    """
    facts: list[Any] = [
        record.status,
        record.updated_at,
        record.progress,
        record.control,
        record.waiting_for,
        record.wake_at,
    ]
    if entries is not None:
        facts += [entries, attempts]
        facts += [(step["key"], step["attempt"]) for step in executing or ()]
    return hashlib.sha1(repr(facts).encode()).hexdigest()[:16]


async def snapshot(control: RunControl, run_id: str, *, detail: bool) -> dict[str, Any] | None:
    """What a watcher sees of a run now; None once it is gone."""
    try:
        record = await control.record(run_id)
    except RunNotFound:
        return None
    now = control.clock.now()
    shown = runs.row(summary(record, now=now, serializer=control.serializer), now=now)
    del shown["columns"]
    shown["started_at"] = render.iso(shown["started_at"])  # the page's <time datetime=...>
    if detail:  # the run page also shows the timeline, attempts and the steps executing
        entries, _ = await control.store.read(journal.journal_extent(run_id))  # counted, not read
        attempts = len(await control.store.read(journal.load_attempts(run_id)))
        executing = await control.executing(run_id)
        shown["version"] = version(record, entries, attempts, executing)
    else:
        shown["version"] = version(record)
    return shown


def routes(target: Target, streams: Streams) -> list[BaseRoute]:
    """The event stream's route."""

    @render.handled
    async def events(request: Request) -> Response:
        ids = list(dict.fromkeys(request.query_params.getlist("run")))
        if not ids:
            raise BadRequest("name the runs to watch: /ui/events?run=ID&run=ID2")
        if len(ids) > MAX_WATCHED:
            raise BadRequest(f"at most {MAX_WATCHED} runs per stream, got {len(ids)}")
        detail = request.query_params.get("detail") == "1"

        async def read(control: RunControl) -> dict[str, dict[str, Any] | None]:
            return {run_id: await snapshot(control, run_id, detail=detail) for run_id in ids}

        async def stream() -> AsyncIterator[str]:
            sent: dict[str, str] = {}
            started = last = time.monotonic()
            yield f"retry: {int(POLL * 1000)}\n\n"
            while not streams.closing.is_set():
                try:
                    found = await target(read)
                except StoreError as exc:
                    yield stream_failure(exc, where=f"GET {request.url.path}")
                    return
                for run_id, shown in found.items():
                    if shown is not None and sent.get(run_id) != shown["version"]:
                        sent[run_id] = shown["version"]
                        last = time.monotonic()
                        yield event("run", shown)
                if all(s is None or RunStatus(s["status"]).finished for s in found.values()):
                    yield event("end", {"runs": ids})
                    return
                if time.monotonic() - last > PING:
                    last = time.monotonic()
                    yield ": ping\n\n"
                if time.monotonic() - started > LIFETIME:
                    return
                try:
                    await asyncio.wait_for(streams.closing.wait(), POLL)
                except TimeoutError:
                    pass

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    return [Route("/ui/events", events, methods=["GET"])]
