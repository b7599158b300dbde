"""A body over the limit is refused once the limit is passed, not after it has all arrived.

`POST /api/v1/hooks/{token}` needs no dashboard token, so whoever reaches the port could
otherwise make the dashboard hold a body of any size in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from cairn.dashboard import app
from cairn.dashboard.api.inputs import MAX_BODY
from cairn.dashboard.ui.csrf import MAX_FORM

from .flows import Flows

CHUNK = 64 * 1024
SENT = 16 * MAX_BODY  # bytes offered; the server must stop reading long before


class Endless:
    """A chunked body of SENT bytes, counting what the server reads of it."""

    def __init__(self) -> None:
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.read < SENT:
            self.read += CHUNK
            yield b" " * CHUNK


async def test_body_limit__a_hook_call_stops_reading_past_the_limit(flows: Flows) -> None:
    async with flows.engine(workers=0) as engine:
        transport = httpx.ASGITransport(app=app(engine, token="s3cret"))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            body = Endless()
            response = await http.post(
                "/api/v1/hooks/no-such-token",
                content=body,
                headers={"Content-Type": "application/json"},
            )
            assert response.status_code == 400, response.text
            assert response.json()["message"] == (
                f"request body is over {MAX_BODY} bytes; the limit is {MAX_BODY}"
            )
            assert body.read <= MAX_BODY + CHUNK
            # A declared length over the limit is refused before any of it is read.
            sized = await http.post(
                "/api/v1/hooks/no-such-token",
                content=b"{}",
                headers={"Content-Type": "application/json", "Content-Length": str(SENT)},
            )
            assert sized.status_code == 400
            assert sized.json()["message"] == (
                f"request body is {SENT} bytes; the limit is {MAX_BODY}"
            )


async def test_body_limit__a_page_form_stops_reading_past_the_limit(flows: Flows) -> None:
    async with flows.engine(workers=0) as engine:
        await engine.start("t.waiter", run_id="r")
        transport = httpx.ASGITransport(app=app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            body = Endless()
            response = await http.post(
                "/runs/r/cancel",
                content=body,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            assert response.status_code == 413, response.text
            assert f"the form is over {MAX_FORM} bytes" in response.text
            assert body.read <= MAX_FORM + CHUNK
