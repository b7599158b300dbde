"""cairn.steps.http against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.steps import HttpResponse, HttpStatusError, HttpUnavailable, http
from engine.kit import WAIT, Kit

from .conftest import Answer, HttpServer, closed_port

JSON = {"Content-Type": "application/json"}


async def until_status(engine: cairn.Engine, run_id: str, status: str) -> None:
    async with asyncio.timeout(WAIT):
        while (await engine.control.record(run_id)).status != status:
            await asyncio.sleep(0.005)


async def test_http__503_with_retry_after_then_200__one_idempotency_key(
    kit: Kit, http_server: HttpServer
) -> None:
    url = http_server.script(
        "/orders/7",
        Answer(503, {"Retry-After": "30"}, b"busy"),
        Answer(200, JSON, b'{"id": 7, "state": "paid"}'),
    )
    clock = VirtualClock()

    @kit.workflow("http.flaky")
    async def flow() -> HttpResponse:
        response: HttpResponse = await http.request("GET", url, timeout_ms=5000)
        return response

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        # The server asked for 30 s: the run waits them parked, holding no worker.
        await until_status(engine, run.run_id, "SLEEPING")
        summary = await run.describe()
        assert summary.waiting_for is not None and "http.GET" in summary.waiting_for
        clock.advance(30)
        response = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
        attempts = await engine.control.attempts(run.run_id)
    assert isinstance(response, HttpResponse)
    assert (response.status, response.body, response.cut) == (200, {"id": 7, "state": "paid"}, 0)
    assert response.ok and response.headers["content-type"] == "application/json"
    keys = http_server.keys("/orders/7")
    assert len(keys) == 2 and keys[0] is not None and keys[0] == keys[1]
    assert [(h.key, h.status, h.attempts) for h in history] == [("http.GET#1", "completed", 2)]
    assert history[0].input == {"args": ["GET", url], "kwargs": {}}
    [failed] = attempts
    assert failed["error_type"] == "cairn.steps.errors.HttpUnavailable"
    assert "503" in failed["message"] and "retry after 30s" in failed["message"]
    assert (failed["retry_at"] - failed["failed_at"]).total_seconds() == pytest.approx(30)


async def test_http__retry_after_as_an_http_date(sqlite_kit: Kit, http_server: HttpServer) -> None:
    said = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    url = http_server.script(
        "/dated",
        Answer(
            503,
            {
                "Date": format_datetime(said, usegmt=True),
                "Retry-After": format_datetime(said + timedelta(seconds=120), usegmt=True),
            },
        ),
        Answer(200, {"Content-Type": "text/plain"}, b"done"),
    )
    clock = VirtualClock()

    @sqlite_kit.workflow("http.dated")
    async def flow() -> str:
        response = await http.get(url)
        return str(response.body)

    async with sqlite_kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        await until_status(engine, run.run_id, "SLEEPING")
        [failed] = await engine.control.attempts(run.run_id)
        # Counted from the answer's own Date, so the server's clock is what matters.
        assert (failed["retry_at"] - failed["failed_at"]).total_seconds() == pytest.approx(120)
        clock.advance(120)
        assert await run.result(timeout=WAIT) == "done"


async def test_http__a_long_retry_after_is_capped(sqlite_kit: Kit, http_server: HttpServer) -> None:
    url = http_server.script("/slow", Answer(429, {"Retry-After": "86400"}), Answer(204))
    clock = VirtualClock()

    @sqlite_kit.workflow("http.capped")
    async def flow() -> int:
        response = await http.post(url, json_body={"n": 1}, max_retry_after="5m")
        return int(response.status)

    async with sqlite_kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        await until_status(engine, run.run_id, "SLEEPING")
        [failed] = await engine.control.attempts(run.run_id)
        assert (failed["retry_at"] - failed["failed_at"]).total_seconds() == pytest.approx(300)
        assert "429" in failed["message"] and "retry after 300s" in failed["message"]
        clock.advance(300)
        assert await run.result(timeout=WAIT) == 204


async def test_http__404_fails_at_once_with_status_and_body_start(
    kit: Kit, http_server: HttpServer
) -> None:
    body = b"no such order: 42\n" + b"x" * 1000
    url = http_server.script("/orders/42", Answer(404, {"Content-Type": "text/plain"}, body))

    @kit.workflow("http.missing")
    async def flow() -> str:
        try:
            await http.get(url)
        except HttpStatusError as exc:  # the step's own class reaches the workflow
            assert isinstance(exc, cairn.StepFailed) and exc.fatal and exc.attempts == 1
            return exc.error_message
        return "found"

    async with kit.engine() as engine:
        run = await engine.start(flow)
        message = await run.result(timeout=WAIT)
    assert message.startswith(f"GET {url} answered 404 Not Found: no such order: 42 xxx")
    assert message.endswith("...") and len(message) < 300 and "\n" not in message
    assert len(http_server.keys("/orders/42")) == 1


async def test_http__connection_refused_is_retried_then_fails(sqlite_kit: Kit) -> None:
    url = f"http://127.0.0.1:{closed_port()}/down"

    @sqlite_kit.workflow("http.down")
    async def flow() -> str:
        await http.get(url, retries=cairn.Retry(max_attempts=3, delay=0))
        return "reached"

    async with sqlite_kit.engine() as engine:
        run = await engine.start(flow)
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        [entry] = await engine.history(run.run_id)
        attempts = await engine.control.attempts(run.run_id)
    assert (entry.key, entry.status, entry.attempts) == ("http.GET#1", "failed", 3)
    assert entry.error is not None
    assert entry.error["error_type"] == "cairn.steps.errors.HttpUnavailable"
    assert f"GET {url}: no answer (ConnectError" in entry.error["message"]
    assert len(attempts) == 3


async def test_http__429_retries_spent(sqlite_kit: Kit, http_server: HttpServer) -> None:
    url = http_server.script("/busy", Answer(429))

    @sqlite_kit.workflow("http.busy")
    async def flow() -> str:
        try:
            await http.get(url, retries=cairn.Retry(max_attempts=2, delay=0))
        except HttpUnavailable as exc:
            return f"{exc.attempts}: {exc.error_message}"
        return "served"

    async with sqlite_kit.engine() as engine:
        result = await (await engine.start(flow)).result(timeout=WAIT)
    assert result == f"2: GET {url} answered 429 Too Many Requests"
    assert len(http_server.keys("/busy")) == 2


async def test_http__each_step_has_its_own_key_and_a_given_key_wins(
    sqlite_kit: Kit, http_server: HttpServer
) -> None:
    url = http_server.script("/pay", Answer(201, JSON, b'{"ok": true}'))

    @sqlite_kit.workflow("http.keys")
    async def flow() -> list[int]:
        first = await http.post(url, json_body={"amount": "9.99"})
        second = await http.request("POST", url, data={"amount": "1"}, name="pay again")
        third = await http.put(url, data="raw", headers={"Idempotency-Key": "mine"})
        return [first.status, second.status, third.status]

    async with sqlite_kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == [201, 201, 201]
        history = await engine.history(run.run_id)
    first, second, third = http_server.keys("/pay")
    assert first and second and first != second and third == "mine"
    assert [h.name for h in history] == ["http.POST", "pay again", "http.PUT"]
    sent = [r for r in http_server.requests if r.path == "/pay"]
    assert json.loads(sent[0].body) == {"amount": "9.99"}
    assert sent[1].body == b"amount=1" and sent[2].body == b"raw"


async def test_http__a_body_over_the_cap_is_cut_and_says_so(
    sqlite_kit: Kit, http_server: HttpServer
) -> None:
    big = b"x" * (300 * 1024)
    text_url = http_server.script("/big", Answer(200, {"Content-Type": "text/plain"}, big))
    json_url = http_server.script("/list", Answer(200, JSON, json.dumps(list(range(50))).encode()))

    @sqlite_kit.workflow("http.big")
    async def flow() -> list[HttpResponse]:
        return [await http.get(text_url), await http.get(json_url, max_body=10)]

    async with sqlite_kit.engine() as engine:
        run = await engine.start(flow)
        text, listed = await run.result(timeout=WAIT)
    assert (text.size, len(text.body), text.cut) == (len(big), 256 * 1024, len(big) - 256 * 1024)
    # A cut JSON body is kept as text: the start of it cannot be parsed.
    assert listed.body == "[0, 1, 2, " and listed.cut == listed.size - 10


async def test_http__bodies_by_content_type(http_server: HttpServer) -> None:
    binary = http_server.script(
        "/bin", Answer(200, {"Content-Type": "application/octet-stream"}, b"\x00\xff")
    )
    untyped = http_server.script("/plain", Answer(200, {}, "caf\u00e9".encode()))
    bad_json = http_server.script("/bad", Answer(200, JSON, b"{not json"))
    assert (await http.get(binary)).body == b"\x00\xff"
    assert (await http.get(untyped)).body == "caf\u00e9"
    assert (await http.get(bad_json)).body == "{not json"
    head = await http.head(untyped)
    assert (head.status, head.body) == (200, None)


async def test_http__outside_a_run_a_plain_call(http_server: HttpServer) -> None:
    url = http_server.script("/once", Answer(503, {"Retry-After": "7"}), Answer(200, JSON, b"1"))
    with pytest.raises(HttpUnavailable) as raised:
        await http.get(url)
    assert raised.value.status == 503 and raised.value.retry_after == timedelta(seconds=7)
    # Where no event loop runs (a script, a sync step's thread), the call returns the value.
    response = await asyncio.to_thread(http.get, url)
    assert response.body == 1
    assert http_server.keys("/once") == [None, None]  # no step, no key


async def test_http__in_a_fluent_stage_the_stage_retries(
    sqlite_kit: Kit, http_server: HttpServer
) -> None:
    url = http_server.script("/stage", Answer(503, {"Retry-After": "0"}), Answer(200, JSON, b"5"))

    def fetch(previous: int) -> int:
        # A sync stage: a step of its own, where http.get is a plain call.
        return int(http.get(url).body) + previous

    chain = cairn.Workflow("http.fluent", registry=sqlite_kit.registry)
    chain.then(cairn.Step("start", lambda: 1)).then(cairn.Step("fetch", fetch, retries=3))

    async with sqlite_kit.engine() as engine:
        run = await engine.start(chain)
        assert await run.result(timeout=WAIT) == 6
        history = await engine.history(run.run_id)
    first, second = http_server.keys("/stage")
    assert first is not None and first == second  # the stage's own key, on both attempts
    assert [(h.name, h.attempts) for h in history] == [("start", 1), ("fetch", 2)]


async def test_http__sync_workflow_and_entrypoint(sqlite_kit: Kit, http_server: HttpServer) -> None:
    url = http_server.script("/n", Answer(200, JSON, b"3"))

    @sqlite_kit.workflow("http.sync")
    def plain_flow() -> int:
        return int(http.get(url).body) * 2

    class Entry(cairn.WorkflowEntrypoint, registry=sqlite_kit.registry):
        async def run(self, event: cairn.WorkflowEvent, step: cairn.WorkflowStep) -> int:
            response = await http.get(url, name="fetch n")
            return int(response.body) + 1

    async with sqlite_kit.engine() as engine:
        assert await (await engine.start(plain_flow)).result(timeout=WAIT) == 6
        run = await engine.start(Entry)
        assert await run.result(timeout=WAIT) == 4
        assert [h.name for h in await engine.history(run.run_id)] == ["fetch n"]


async def test_http__a_replay_returns_the_recorded_response(
    sqlite_kit: Kit, http_server: HttpServer
) -> None:
    url = http_server.script("/once-only", Answer(200, JSON, b'{"n": 1}'))
    clock = VirtualClock()

    @sqlite_kit.workflow("http.replayed")
    async def flow() -> list[object]:
        response = await http.get(url)
        await cairn.sleep("1h")
        return [type(response).__name__, response.body]

    async with sqlite_kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        await until_status(engine, run.run_id, "SLEEPING")
    async with sqlite_kit.engine(clock=clock) as engine:  # another process, say
        clock.advance(3600)
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [
            "HttpResponse",
            {"n": 1},
        ]
    assert len(http_server.keys("/once-only")) == 1


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: http.request("FETCH ME", "http://x"), "method must be a word"),
        (lambda: http.request("GET", "ftp://x/y"), "url must start with http:// or https://"),
        (lambda: http.request("GET", b"http://x"), "url must be a string"),
        (lambda: http.post("http://x", data="a", json_body={}), "data or json_body, not both"),
        (lambda: http.get("http://x", timeout_ms=0), "timeout_ms must be a positive number"),
        (lambda: http.get("http://x", max_body=-1), "max_body must be a number of bytes"),
        (lambda: http.get("http://x", max_retry_after="soon"), "max_retry_after"),
        (lambda: http.get("http://x", headers=[("a", "b")]), "headers must be a dict"),
        (lambda: http.get("http://x", retries="3"), "invalid retries"),
    ],
)
def test_http__bad_arguments_fail_at_the_call(call: object, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        call()  # type: ignore[operator]


def test_http__retry_after_parsing() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert http.retry_after_seconds("120", now) == 120
    assert http.retry_after_seconds(" 1.5 ", now) == 1.5
    assert http.retry_after_seconds("Tue, 01 Jan 2030 00:02:00 GMT", now) == 120
    assert http.retry_after_seconds("Mon, 31 Dec 2029 23:00:00 GMT", now) == 0  # past
    assert http.retry_after_seconds("-5", now) is None
    assert http.retry_after_seconds("soon", now) is None
    assert http.retry_after_seconds(None, now) is None
