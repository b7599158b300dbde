"""A password written in an http step's URL stays out of its errors and its history."""

from __future__ import annotations

import cairn
from cairn.steps import http
from engine.kit import WAIT, Kit

from .conftest import Answer, HttpServer


async def test_http_secrets__a_url_password_is_hidden_in_errors_and_history(
    kit: Kit, http_server: HttpServer
) -> None:
    http_server.script("/busy", Answer(503, {}, b"busy"))
    http_server.script("/fine", Answer(200, {}, b"ok"))
    base = http_server.url.replace("http://", "http://ada:s3cret-pw@")

    @kit.workflow("http.secret")
    async def flow() -> str:
        response = await http.get(f"{base}/fine?x=1")
        try:
            await http.get(f"{base}/busy", retries=1)
        except cairn.StepFailed as failed:
            return f"{response.url} | {failed.error_message}"
        return "done"

    async with kit.engine() as engine:
        run = await engine.start(flow)
        said = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
        attempts = await engine.control.attempts(run.run_id)
    shown = http_server.url.replace("http://", "http://ada:***@")
    assert said == (f"{shown}/fine?x=1 | GET {shown}/busy answered 503 Service Unavailable")
    assert "s3cret" not in repr([(h.input, h.result, h.error) for h in history])
    assert "s3cret" not in repr(attempts)
    # The server was sent the credentials all the same (as Basic authorization).
    assert all("Authorization" in r.headers for r in http_server.requests)
