"""Spans and metrics of a step executed on a step queue, by the worker that claimed it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import cairn
from cairn.observability import Metrics

from .kit import WAIT, Kit
from .spans import Spans, exporter


@pytest.fixture
def spans() -> Iterator[Spans]:
    memory = exporter()
    memory.clear()
    yield Spans(memory)
    memory.clear()


async def test_step_queues__a_queued_step_attempt_is_a_span_in_its_runs_trace_and_counted(
    kit: Kit, spans: Spans
) -> None:
    # Before: no span for the attempt, the spans its code made began a trace of their
    # own, and cairn_step_attempts_total never counted it.
    tries = {"n": 0}

    @kit.step("tq.render", queue="gpu", retries=cairn.Retry(max_attempts=2, delay=0, jitter=0))
    async def render(x: int) -> int:
        with trace.get_tracer("app").start_as_current_span("inside"):
            tries["n"] += 1
            if tries["n"] == 1:
                raise ConnectionError("gpu busy")
        return x + 1

    @kit.workflow("tq.flow")
    async def flow() -> int:
        return await render(1)

    metrics = Metrics()
    async with kit.engine(tracing=True, metrics=metrics, step_queues=["gpu"]) as engine:
        with trace.get_tracer("app").start_as_current_span("POST /render") as starter:
            run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == 2
    trace_id = starter.get_span_context().trace_id
    steps = [s for s in spans.all() if s.name == "step tq.render"]
    assert [dict(s.attributes or {}) for s in steps] == [
        {
            "cairn.step.key": "tq.render#1",
            "cairn.step.name": "tq.render",
            "cairn.step.attempt": attempt,
            "cairn.run_id": run.run_id,
            "cairn.workflow": "tq.flow",
            "cairn.step.queue": "gpu",
            "cairn.outcome": outcome,
            **({"error.type": "builtins.ConnectionError"} if outcome == "error" else {}),
        }
        for attempt, outcome in ((1, "error"), (2, "ok"))
    ]
    assert steps[0].status.status_code is StatusCode.ERROR
    # Each attempt is a child of the run's attempt that sent it (the one whose span shows
    # the wait), in the starter's trace. Before: a child of the starter's span, a sibling
    # of the run's spans.
    senders = sorted(
        (
            s
            for s in spans.all()
            if s.name == "run tq.flow"
            and any(
                dict(e.attributes or {}).get("cairn.waiting_for") == "step:tq.render@gpu"
                for e in s.events
            )
        ),
        key=lambda s: s.start_time or 0,
    )
    assert [s.parent.span_id if s.parent else None for s in senders] == [
        starter.get_span_context().span_id
    ] * 2
    assert [s.parent.span_id if s.parent else None for s in steps] == [
        s.context.span_id if s.context else None for s in senders
    ]
    for step in steps:
        assert step.context is not None and step.context.trace_id == trace_id
    inside = [s for s in spans.all() if s.name == "inside"]
    assert [s.parent.span_id if s.parent else None for s in inside] == [
        s.context.span_id for s in steps if s.context is not None
    ]
    waits = [
        dict(event.attributes or {})
        for s in spans.all()
        if s.name == "run tq.flow"
        for event in s.events
        if event.name == "cairn.wait"
    ]
    assert {"cairn.waiting_for": "step:tq.render@gpu"} in waits
    labels = {"step": "tq.render"}
    assert metrics.registry.get_sample_value("cairn_step_attempts_total", labels) == 2
    assert metrics.registry.get_sample_value("cairn_step_failures_total", labels) == 1
    assert metrics.registry.get_sample_value("cairn_step_duration_seconds_count", labels) == 2


async def test_step_queues__a_sync_workflows_queued_step_is_a_child_of_its_attempt(
    kit: Kit, spans: Spans
) -> None:
    @kit.step("tq.sign", queue="gpu")
    def sign(document: str) -> str:
        return document + "/signed"

    @kit.workflow("tq.sync")
    def signing(document: str) -> str:
        return sign(document)

    async with kit.engine(tracing=True, step_queues=["gpu"]) as engine:
        with trace.get_tracer("app").start_as_current_span("POST /sign"):
            run = await engine.start(signing, "d")
        assert await run.result(timeout=WAIT) == "d/signed"
    [step] = [s for s in spans.all() if s.name == "step tq.sign"]
    [sender] = [
        s
        for s in spans.all()
        if s.name == "run tq.sync" and any(e.name == "cairn.wait" for e in s.events)
    ]
    assert step.parent is not None and sender.context is not None
    assert step.parent.span_id == sender.context.span_id
