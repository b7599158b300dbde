"""cairn.steps.http against servers that never finish: `timeout_ms` bounds the whole attempt.

Each server is a real socket server on 127.0.0.1 (asyncio streams) that misbehaves in one
way: it trickles its body a byte at a time, sends its headers slowly, or streams a body
that never ends. Times are asserted generously (well under what the old per-read timeout
allowed, which was for ever), never as benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import cairn
from cairn.steps import HttpResponse, HttpUnavailable, http
from engine.kit import WAIT, Kit

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
HEAD_DONE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Headers at once, then a 100-byte body one byte a second (each read is quick)."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(HEAD_DONE + b"Content-Length: 100\r\n\r\n")
    for _ in range(100):
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(1)


async def _slow_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A status line, then a header a second, never an end of the headers."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\n")
    for n in range(100):
        writer.write(f"X-Slow-{n}: y\r\n".encode())
        await writer.drain()
        await asyncio.sleep(1)


async def _endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body that never ends, as fast as the client takes it."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(HEAD_DONE + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 4096
    while True:
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def serving(serve: Serve) -> AsyncIterator[str]:
    """A server on a free port of 127.0.0.1; its URL. Connections are dropped at the end."""
    open_writers: set[asyncio.StreamWriter] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        open_writers.add(writer)
        try:
            await serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up: what the tests want
        finally:
            open_writers.discard(writer)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/slow"
    finally:
        for writer in list(open_writers):
            writer.close()
        server.close()


SLOW = {"trickle": _trickle, "slow_headers": _slow_headers, "endless": _endless}


@pytest.mark.parametrize("kind", list(SLOW))
async def test_http_limits__timeout_bounds_the_whole_attempt_in_a_run(
    sqlite_kit: Kit, kind: str
) -> None:
    @sqlite_kit.workflow(f"http.slow.{kind}")
    async def flow(url: str) -> str:
        try:
            # Longer than the server's pauses: no single read would ever time out.
            await http.get(url, timeout_ms=1500, retries=1, max_body=10**9)
        except cairn.StepFailed as failed:
            return failed.error_message
        return "answered"

    loop = asyncio.get_running_loop()
    async with serving(SLOW[kind]) as url, sqlite_kit.engine() as engine:
        started = loop.time()
        run = await engine.start(flow, url)
        message = await run.result(timeout=WAIT)
        took = loop.time() - started
    assert "no whole answer within 1.5s" in message
    assert took < 4.5  # about the timeout; per read, a trickle never timed out at all


async def test_http_limits__timeout_bounds_a_plain_call_too() -> None:
    loop = asyncio.get_running_loop()
    async with serving(_trickle) as url:
        started = loop.time()
        with pytest.raises(HttpUnavailable, match=r"no whole answer within 1\.5s"):
            await asyncio.wait_for(http.get(url, timeout_ms=1500), WAIT)
        assert loop.time() - started < 4.5


async def test_http_limits__max_body_stops_reading_an_endless_body() -> None:
    async with serving(_endless) as url:
        # The timeout is long: only the cap can end this request in time.
        response: HttpResponse = await asyncio.wait_for(
            http.get(url, timeout_ms=60_000, max_body=10_000), WAIT
        )
    assert (response.status, len(response.body)) == (200, 10_000)
    assert response.cut > 0 and response.size == 10_000 + response.cut


async def test_http_limits__a_cancel_reaches_a_request_waiting_for_bytes(
    sqlite_kit: Kit,
) -> None:
    @sqlite_kit.workflow("http.slow.cancelled")
    async def flow(url: str) -> str:
        await http.get(url, timeout_ms=60_000, retries=1)
        return "answered"

    loop = asyncio.get_running_loop()
    async with serving(_slow_headers) as url, sqlite_kit.engine() as engine:
        run = await engine.start(flow, url)
        async with asyncio.timeout(WAIT):
            while not (await engine.control.record(run.run_id)).status == "RUNNING":
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # the request is out, its answer trickling
        asked = loop.time()
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        took = loop.time() - asked
        attempts = await engine.control.attempts(run.run_id)
    assert took < 3.0  # not the 60 s of its timeout
    # Ended by the cancel (one attempt recorded as cancelled), not failed and retried.
    assert [attempt["outcome"] for attempt in attempts] == ["cancelled"]
