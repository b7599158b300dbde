"""OpenTelemetry spans of runs and steps: the tree, replays, and the starter's trace."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import cairn

from .kit import WAIT, Gate, Kit
from .spans import Spans, exporter


@pytest.fixture
def spans() -> Iterator[Spans]:
    memory = exporter()
    memory.clear()
    yield Spans(memory)
    memory.clear()


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def until_status(engine: cairn.Engine, run_id: str, status: str) -> None:
    async with asyncio.timeout(WAIT):
        while (await engine.control.record(run_id)).status != status:
            await asyncio.sleep(0.005)


async def test_tracing__span_tree_of_a_run_with_retries_a_child_and_a_sleep(
    kit: Kit, spans: Spans
) -> None:
    tracer = trace.get_tracer("tests")
    tries = {"n": 0}
    child_may_finish = asyncio.Event()

    @kit.step("flaky", retries=cairn.Retry(max_attempts=3, delay=0, max_delay=0, jitter=0))
    async def flaky() -> str:
        tries["n"] += 1
        with tracer.start_as_current_span("inside flaky"):
            if tries["n"] == 1:
                raise ConnectionError("gateway down")
        return "ok"

    @kit.step("child_work")
    async def child_work() -> int:
        await child_may_finish.wait()
        return 7

    @kit.step("last")
    def last(n: int) -> int:  # a sync step, in its own thread
        return n + 1

    @kit.workflow("trace.child")
    async def child() -> int:
        return await child_work()

    @kit.workflow("trace.parent")
    async def parent() -> int:
        await flaky()
        n = await child()
        await cairn.sleep(1)  # long enough to park even on a slow machine
        return await last(n)

    async with kit.engine(tracing=True) as engine:
        with tracer.start_as_current_span("request"):
            run = await engine.start(parent)
        await until_status(engine, run.run_id, "WAITING")  # parked on its child
        child_may_finish.set()
        assert await run.result(timeout=WAIT) == 8

    request_span = spans.one("request")
    runs = sorted(spans.named("run trace.parent"), key=lambda s: s.start_time or 0)
    # Three attempts: until the child is awaited, until the sleep, to the end.
    assert [attrs(s)["cairn.outcome"] for s in runs] == ["waiting", "sleeping", "completed"]
    assert {s.context.trace_id for s in spans.all() if s.context} == {
        request_span.context.trace_id  # type: ignore[union-attr]
    }
    assert {parent_id(s) for s in runs} == {span_id(request_span)}
    assert [attrs(s)["cairn.run_id"] for s in runs] == [run.run_id] * 3
    assert attrs(runs[0])["cairn.workflow"] == "trace.parent"
    assert [e.name for e in runs[0].events] == ["cairn.wait"]
    assert [e.name for e in runs[1].events] == ["cairn.sleep"]
    assert "cairn.wake_at" in (runs[1].events[0].attributes or {})

    # Step attempts: two of flaky (a retry in the first run attempt), none replayed.
    flaky_spans = spans.named("step flaky")
    assert [
        (attrs(s)["cairn.step.attempt"], attrs(s)["cairn.outcome"], attrs(s).get("error.type"))
        for s in flaky_spans
    ] == [(1, "error", "builtins.ConnectionError"), (2, "ok", None)]
    assert {parent_id(s) for s in flaky_spans} == {span_id(runs[0])}
    assert flaky_spans[0].status.status_code is StatusCode.ERROR
    assert [e.name for e in flaky_spans[0].events] == ["exception"]
    assert attrs(flaky_spans[0])["cairn.step.key"] == "flaky#1"
    # A span made inside a step's code is a child of the step's span.
    inner = spans.named("inside flaky")
    assert [parent_id(s) for s in inner] == [span_id(s) for s in flaky_spans]
    assert parent_id(spans.one("step last")) == span_id(runs[2])

    # The child run: under the parent's attempt that started it.
    child_run = spans.one("run trace.child")
    assert parent_id(child_run) == span_id(runs[0])
    assert attrs(child_run)["cairn.parent_run_id"] == run.run_id
    assert parent_id(spans.one("step child_work")) == span_id(child_run)


async def test_tracing__a_recovered_run_traces_only_what_runs_again(
    kit: Kit, gate: Gate, spans: Spans
) -> None:
    @kit.step("before")
    async def before() -> str:
        return "done once"

    @kit.step("held")
    async def held() -> str:
        return await gate()

    @kit.workflow("trace.recovered")
    async def recovered() -> str:
        await before()
        return await held()

    first = kit.engine(tracing=True, lease="1s")
    await first.open()
    run = await first.start(recovered)
    await gate.hold(first)  # closed mid-step: the run is handed back
    async with kit.engine(tracing=True) as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == "through"

    assert len(spans.named("step before")) == 1  # replayed by the second engine: no span
    assert [attrs(s)["cairn.outcome"] for s in spans.named("step held")] == ["interrupted", "ok"]
    outcomes = [attrs(s)["cairn.outcome"] for s in spans.named("run trace.recovered")]
    assert outcomes == ["handed_back", "completed"]


async def test_tracing__a_span_before_start_is_the_parent_when_another_engine_runs_it(
    kit: Kit, spans: Spans
) -> None:
    @kit.step("work")
    async def work() -> int:
        return 1

    @kit.workflow("trace.remote")
    async def remote() -> int:
        return await work()

    tracer = trace.get_tracer("tests")
    async with kit.engine(workers=0) as starter:  # starts runs, never executes them
        with tracer.start_as_current_span("web request") as request:
            run = await starter.start("trace.remote")
        stored = await starter.control.record(run.run_id)
        assert "traceparent" in json.loads(stored.trace_context or "{}")
        async with kit.engine(tracing=True) as worker:
            assert await (await worker.get(run.run_id)).result(timeout=WAIT) == 1

    run_span = spans.one("run trace.remote")
    assert run_span.context.trace_id == request.get_span_context().trace_id  # type: ignore[union-attr]
    assert parent_id(run_span) == request.get_span_context().span_id
    assert parent_id(spans.one("step work")) == span_id(run_span)


async def test_tracing__a_failed_run_says_why_and_a_run_outside_a_trace_is_a_root(
    kit: Kit, spans: Spans
) -> None:
    @kit.step("doomed", retries=1)
    async def doomed() -> None:
        raise ValueError("no")

    @kit.workflow("trace.failing")
    async def failing() -> None:
        await doomed()

    async with kit.engine(tracing=True) as engine:
        run = await engine.start(failing)
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        assert (await engine.control.record(run.run_id)).trace_context is None

    run_span = spans.one("run trace.failing")
    assert run_span.parent is None
    assert run_span.status.status_code is StatusCode.ERROR
    assert attrs(run_span)["cairn.outcome"] == "failed"
    assert attrs(run_span)["error.type"] == "builtins.ValueError"


async def test_tracing__off_makes_no_spans_but_still_stores_the_trace_context(
    kit: Kit, spans: Spans
) -> None:
    @kit.workflow("trace.quiet")
    async def quiet() -> str:
        return "shh"

    tracer = trace.get_tracer("tests")
    async with kit.engine() as engine:
        with tracer.start_as_current_span("request"):
            run = await engine.start(quiet)
        assert await run.result(timeout=WAIT) == "shh"
        stored = await engine.control.record(run.run_id)

    assert [s.name for s in spans.all()] == ["request"]
    assert stored.trace_context is not None


async def test_tracing__steps_of_a_sync_workflow_are_children_of_its_run(
    kit: Kit, spans: Spans
) -> None:
    @kit.step("one")
    def one() -> int:
        return 1

    @kit.workflow("trace.sync")
    def sync_flow() -> int:
        return one() + one()

    async with kit.engine(tracing=True) as engine:
        assert await (await engine.start(sync_flow)).result(timeout=WAIT) == 2

    run_span = spans.one("run trace.sync")
    steps = spans.named("step one")
    assert [attrs(s)["cairn.step.key"] for s in steps] == ["one#1", "one#2"]
    assert {parent_id(s) for s in steps} == {span_id(run_span)}


async def test_tracing__a_run_started_in_an_unsampled_trace_records_no_spans(
    kit: Kit, spans: Spans
) -> None:
    @kit.step("quiet_step")
    async def quiet_step() -> int:
        return 1

    @kit.workflow("trace.unsampled")
    async def unsampled() -> int:
        return await quiet_step()

    dropped = trace.NonRecordingSpan(
        trace.SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
    async with kit.engine(workers=0) as starter:
        with trace.use_span(dropped):
            run = await starter.start("trace.unsampled")
        async with kit.engine(tracing=True) as worker:
            assert await (await worker.get(run.run_id)).result(timeout=WAIT) == 1

    assert spans.all() == ()


async def test_tracing__runs_an_emit_starts_go_on_in_the_emitters_trace(
    kit: Kit, spans: Spans
) -> None:
    @kit.workflow("trace.listener", on="trace.ping")
    async def listener(payload: object) -> object:
        return payload

    @kit.workflow("trace.pinger")
    async def pinger() -> str:
        [run_id] = await cairn.emit("trace.ping", "from a run")
        return run_id

    tracer = trace.get_tracer("tests")
    async with kit.engine(tracing=True) as engine:
        with tracer.start_as_current_span("webhook") as request:
            [outside] = await engine.emit("trace.ping", "from outside")
        assert await outside.result(timeout=WAIT) == "from outside"
        inside_id = await (await engine.start(pinger)).result(timeout=WAIT)
        assert await (await engine.get(inside_id)).result(timeout=WAIT) == "from a run"

    pinger_span = spans.one("run trace.pinger")
    by_parent = {parent_id(s): s for s in spans.named("run trace.listener")}
    assert set(by_parent) == {request.get_span_context().span_id, span_id(pinger_span)}
    assert by_parent[span_id(pinger_span)].context.trace_id == pinger_span.context.trace_id  # type: ignore[union-attr]
