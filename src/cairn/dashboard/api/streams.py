"""`GET /runs/{run_id}/streams/{name}`: a run's durable stream as server-sent events.

Each item is an event whose id is its seq, so a client that reconnects with
`Last-Event-ID` (browsers' EventSource does) resumes after it: `chunk` (data: the value's
JSON), `reset` (data: {"attempt", "step_key"}: that attempt's chunks are void), then `end`
once the stream is closed or the run has finished. A response lasts at most LIFETIME
seconds; the client reconnects and resumes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

from cairn.codecs import coded, sealed
from cairn.dashboard.api import inputs
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation, Param
from cairn.dashboard.api.replies import Reply, stream_failure
from cairn.dashboard.target import Target
from cairn.errors import RunNotFound, SerializationError, StoreError
from cairn.names import check_name
from cairn.runtime import streams
from cairn.runtime.control import RunControl
from cairn.serialization import Serializer
from cairn.store.programs import runs as run_ops
from cairn.store.records import StreamItem

LIFETIME = 30.0
"""Seconds a response lasts before the client reconnects (with Last-Event-ID)."""
WAIT = 1.0
"""Seconds one read waits for new items (then a comment keeps the connection alive)."""
LAST_SEQ = 2**62


def event(item: StreamItem) -> str:
    """One item as a server-sent event, its seq the event id."""
    if item.kind == "reset":
        data = json.dumps({"attempt": item.attempt, "step_key": item.step_key})
        return f"id: {item.seq}\nevent: reset\ndata: {data}\n\n"
    if item.kind == "close":
        return f"id: {item.seq}\nevent: end\ndata: {{}}\n\n"
    lines = "".join(f"data: {line}\n" for line in (item.value or "null").splitlines())
    return f"id: {item.seq}\nevent: chunk\n{lines}\n"


def opened(serializer: Serializer, item: StreamItem) -> StreamItem:
    """`item` with its chunk decrypted; "encrypted (k1)" (a JSON string) without the key."""
    if item.kind != "chunk" or sealed.key_of(item.value) is None:
        return item
    assert item.value is not None
    try:
        text = coded.unseal(serializer, item.value)
    except SerializationError:
        text = json.dumps(sealed.shown(item.value))
    return dataclasses.replace(item, value=text)


async def read_stream(target: Target, call: Call) -> Reply:
    """`GET /runs/{run_id}/streams/{name}`."""
    run_id, name = call.path("run_id"), call.path("name")
    found = call.query(("after",))
    resumed = call.request.headers.get("last-event-id", found.get("after"))
    return Reply(await respond(target, run_id, name, resumed))


async def respond(target: Target, run_id: str, name: str, resumed: str | None) -> StreamingResponse:
    """The server-sent events of stream `name` of the run after seq `resumed` (text or None).

    Raises RunNotFound, or InvalidName / a BadRequest for a bad name or seq, before
    anything is sent. The run page follows a stream through this too (ui/run.py).
    """
    check_name(name, "stream name")
    after = inputs.integer(resumed, "after", default=0, low=0, high=LAST_SEQ)

    async def exists(control: RunControl) -> bool:
        return await control.store.read(run_ops.get_run(run_id)) is not None

    if not await target(exists):
        raise RunNotFound(run_id)

    async def next_items(control: RunControl) -> tuple[list[StreamItem], bool]:
        batch, ended = await streams.next_items(control.store, run_id, name, after=after, wait=WAIT)
        return [opened(control.serializer, item) for item in batch], ended

    async def events() -> AsyncIterator[str]:
        nonlocal after
        started = time.monotonic()
        yield "retry: 1000\n\n"
        while time.monotonic() - started < LIFETIME:
            try:
                batch, ended = await target(next_items)
            except StoreError as exc:
                yield stream_failure(exc, where=f"GET /runs/{run_id}/streams/{name}")
                return
            for item in batch:
                after = item.seq
                yield event(item)
            if ended:
                if not batch or batch[-1].kind != "close":
                    yield "event: end\ndata: {}\n\n"  # the run finished without a close
                return
            if not batch:
                yield ": waiting\n\n"

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


STREAM_EVENT: dict[str, Any] = {
    "description": "One server-sent event (OpenAPI 3.1 describes each event of the stream)",
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["chunk", "reset", "end"]},
        "data": {
            "type": "string",
            "description": 'chunk: the value\'s JSON; reset: {"attempt", "step_key"}; end: {}',
        },
        "id": {"type": "string", "description": "the item's seq (absent on an end not stored)"},
        "retry": {"type": "integer"},
    },
}
STREAM_EVENTS: dict[str, Any] = {"text/event-stream": {"schema": STREAM_EVENT}}

OPERATIONS = (
    Operation(
        "GET",
        "/runs/{run_id:path}/streams/{name}",
        read_stream,
        "A run's durable stream as server-sent events (`chunk`, `reset`, `end`), each "
        "with its seq as id; `Last-Event-ID` (or `after`) resumes after that seq",
        query=(
            Param(
                "after",
                "items after this seq (0); a Last-Event-ID header takes precedence",
                {"type": "integer", "minimum": 0, "maximum": LAST_SEQ},
            ),
        ),
        errors=(404, 422),
        content=STREAM_EVENTS,
    ),
)
