"""GET /runs/{id}/streams/{name}: a run's durable stream as server-sent events."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from .flows import Flows, start, status

pytestmark = pytest.mark.process


def parse(text: str) -> list[tuple[str | None, str, Any]]:
    """(id, event, data) of each event in an SSE body (comments and retry skipped)."""
    found = []
    for block in text.split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields.setdefault(key, []).append(value.removeprefix(" "))
        if "event" in fields:
            data = json.loads("\n".join(fields.get("data", ["null"])))
            found.append(((fields.get("id") or [None])[0], fields["event"][0], data))
    return found


async def read_until(api: httpx.AsyncClient, path: str, count: int, **headers: str) -> list[Any]:
    """The first `count` events of a stream that may go on."""
    events: list[Any] = []
    async with api.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        text = ""
        async for piece in response.aiter_text():
            text += piece
            events = parse(text)
            if len(events) >= count:
                break
    return events[:count]


async def test_stream__events_live_then_resumed_from_last_event_id(
    api: httpx.AsyncClient, workers: Any, flows: Flows
) -> None:
    await start(api, "t.speaker", 2, run_id="sp-1")
    first = await read_until(api, "/runs/sp-1/streams/tokens", 2)
    assert first == [("1", "chunk", "tok0"), ("2", "chunk", "tok1")]

    flows.release.set()
    await status(api, "sp-1", "COMPLETED")
    rest = await read_until(api, "/runs/sp-1/streams/tokens", 2, **{"Last-Event-ID": "2"})
    assert rest == [("3", "chunk", {"done": True}), ("4", "end", {})]

    whole = await api.get("/runs/sp-1/streams/tokens")  # a closed stream's answer ends
    assert [event for _, event, _ in parse(whole.text)] == ["chunk", "chunk", "chunk", "end"]


async def test_stream__unknown_run_is_a_404_and_a_finished_runs_empty_stream_ends(
    api: httpx.AsyncClient, workers: Any
) -> None:
    missing = await api.get("/runs/nope/streams/tokens")
    assert missing.status_code == 404
    assert missing.json()["error"] == "RunNotFound"

    await start(api, "t.total", 1, 2, run_id="sp-2")
    await status(api, "sp-2", "COMPLETED")
    ended = await api.get("/runs/sp-2/streams/tokens")
    assert parse(ended.text) == [(None, "end", {})]


async def test_run_page__lists_the_run_streams_and_follows_them_for_the_session(
    api: httpx.AsyncClient, server: Any, workers: Any, flows: Flows
) -> None:
    await start(api, "t.speaker", 1, run_id="sp-3")
    await read_until(api, "/runs/sp-3/streams/tokens", 1)  # the first chunk is stored
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as pages:
        page = await pages.get("/runs/sp-3")
        assert 'data-stream="tokens"' in page.text
        assert 'data-stream-url="/runs/sp-3/streams/tokens"' in page.text
        flows.release.set()
        await status(api, "sp-3", "COMPLETED")
        followed = await pages.get("/runs/sp-3/streams/tokens")
    assert followed.headers["content-type"].startswith("text/event-stream")
    assert [event for _, event, _ in parse(followed.text)] == ["chunk", "chunk", "end"]
