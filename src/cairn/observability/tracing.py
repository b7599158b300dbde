"""OpenTelemetry spans of runs and steps (extra `cairn-workflows[otel]`), on the global provider.

One span per attempt of a run, in the trace the run was started in (`propagation.py`),
and one per attempt of a step inside it; parks are events on the run's span. A replayed
step makes no span: its code does not run. cairn never installs a tracer provider.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cairn.errors import ConfigError
from cairn.models import RunStatus
from cairn.observability import propagation
from cairn.observability.hooks import RunScope, StepScope
from cairn.store.records import RunRecord

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

# Span attributes (also in docs/howto/observability.md).
WORKFLOW = "cairn.workflow"
RUN_ID = "cairn.run_id"
RUN_ATTEMPT = "cairn.run.attempt"
PARENT_RUN_ID = "cairn.parent_run_id"
QUEUE = "cairn.queue"
STEP_KEY = "cairn.step.key"
STEP_NAME = "cairn.step.name"
STEP_ATTEMPT = "cairn.step.attempt"
STEP_QUEUE = "cairn.step.queue"  # on a step executed on a step queue's worker
OUTCOME = "cairn.outcome"
ERROR_TYPE = "error.type"  # OpenTelemetry's semantic convention
WAITING_FOR = "cairn.waiting_for"
# On a run attempt that parked again without progress: such wake-ups in the last minute.
FUTILE_WAKES = "cairn.futile_wakes"
WAKE_AT = "cairn.wake_at"

_EVENTS = {
    RunStatus.SLEEPING.value: "cairn.sleep",
    RunStatus.WAITING.value: "cairn.wait",
    RunStatus.PAUSED.value: "cairn.pause",
}


def _otel() -> Any:
    try:
        from opentelemetry import context, trace
    except ImportError as exc:
        raise ConfigError(
            "tracing needs opentelemetry-api: pip install 'cairn-workflows[otel]'"
        ) from exc
    return context, trace


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


class Tracing:
    """Spans of an engine's runs and steps: `Engine(url, tracing=True)`.

    Spans go to the tracer provider the application installed globally
    (`opentelemetry.trace.set_tracer_provider`); without one they cost little and go
    nowhere. See docs/howto/observability.md for the spans and their attributes.

    Raises:
        ConfigError: opentelemetry-api is not installed.
    """

    def __init__(self) -> None:
        context, trace = _otel()
        self.otel_context = context
        self.otel_trace = trace
        self.tracer: Tracer = trace.get_tracer("cairn")

    def provider_installed(self) -> bool:
        """False while no tracer provider is installed globally: spans then go nowhere."""
        trace = self.otel_trace
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)

    def run(self, run: RunRecord, first: bool) -> RunScope:
        """Hook: open the span of an attempt of `run` and make it current."""
        trace = self.otel_trace
        # The trace the run was started in; a run started outside any is a trace of its own.
        parent = propagation.extract(run.trace_context) or self.otel_context.Context()
        attributes: dict[str, Any] = {
            WORKFLOW: run.workflow,
            RUN_ID: run.run_id,
            RUN_ATTEMPT: max(run.attempt, 1),
        }
        if run.parent_id is not None:
            attributes[PARENT_RUN_ID] = run.parent_id
        if run.queue is not None:
            attributes[QUEUE] = run.queue
        span = self.tracer.start_span(f"run {run.workflow}", parent, attributes=attributes)
        token = self.otel_context.attach(trace.set_span_in_context(span, parent))
        return _RunSpan(self, span, token)

    def queued_step(
        self,
        run: RunRecord,
        key: str,
        name: str,
        attempt: int,
        queue: str,
        *,
        sent_in: str | None = None,
    ) -> StepScope:
        """Hook: open the span of an attempt of a step sent to a step queue, current.

        A child of the span of the run's attempt that sent it (`sent_in`, stored with the
        attempt: that span has ended, as the attempt parked when it sent the step); in
        the trace the run was started in when that attempt was not traced.
        """
        trace = self.otel_trace
        parent = (
            propagation.extract(sent_in)
            or propagation.extract(run.trace_context)
            or self.otel_context.Context()
        )
        attributes: dict[str, Any] = {
            STEP_KEY: key,
            STEP_NAME: name,
            STEP_ATTEMPT: attempt,
            RUN_ID: run.run_id,
            WORKFLOW: run.workflow,
            STEP_QUEUE: queue,
        }
        span = self.tracer.start_span(f"step {name}", parent, attributes=attributes)
        if not span.is_recording():
            return _UNSAMPLED
        token = self.otel_context.attach(trace.set_span_in_context(span, parent))
        return _StepSpan(self, span, token)

    def claimed(self, runs: list[RunRecord], due: dict[str, float], now: float) -> None:
        """Hook: nothing to trace (a claim belongs to no run's trace yet)."""

    def fired(self, workflow: str, lag: float) -> None:
        """Hook: nothing to trace (the run a tick starts makes its own spans)."""

    def poisoned(self, workflow: str) -> None:
        """Hook: nothing to trace (no code of the run executed)."""


class _RunSpan:
    __slots__ = ("span", "token", "tracing")

    def __init__(self, tracing: Tracing, span: Span, token: object) -> None:
        self.tracing = tracing
        self.span = span
        self.token = token

    def step(self, key: str, name: str, attempt: int) -> StepScope:
        if not self.span.is_recording():
            return _UNSAMPLED  # its run is not sampled: neither are its steps
        tracing = self.tracing
        # The run's facts are on the run's span, the parent: each attribute costs a step.
        span = tracing.tracer.start_span(
            f"step {name}", attributes={STEP_KEY: key, STEP_NAME: name, STEP_ATTEMPT: attempt}
        )
        # Current while the step's code runs: spans it makes are children of this one.
        token = tracing.otel_context.attach(tracing.otel_trace.set_span_in_context(span))
        return _StepSpan(tracing, span, token)

    def parked(self, status: str, wake_at: float | None, waiting_for: str | None) -> None:
        attributes: dict[str, Any] = {}
        if wake_at is not None:
            attributes[WAKE_AT] = wake_at
        if waiting_for is not None:
            attributes[WAITING_FOR] = waiting_for
        self.span.add_event(_EVENTS.get(status, "cairn.park"), attributes)

    def futile(self, wakes: int) -> None:
        self.span.set_attribute(FUTILE_WAKES, wakes)

    def ended(self, status: str | None, error: str | None) -> None:
        span = self.span
        span.set_attribute(OUTCOME, status.lower() if status else "handed_back")
        if status == RunStatus.FAILED.value:
            kind, message = _error_of(error)
            if kind:
                span.set_attribute(ERROR_TYPE, kind)
            span.set_status(
                self.tracing.otel_trace.Status(self.tracing.otel_trace.StatusCode.ERROR, message)
            )
        span.end()
        self.tracing.otel_context.detach(self.token)


class _StepSpan:
    __slots__ = ("span", "token", "tracing")

    def __init__(self, tracing: Tracing, span: Span, token: object) -> None:
        self.tracing = tracing
        self.span = span
        self.token = token

    def succeeded(self) -> None:
        self.span.set_attribute(OUTCOME, "ok")
        self._end()

    def failed(self, exc: BaseException, timed_out: bool) -> None:
        span = self.span
        span.set_attribute(OUTCOME, "timeout" if timed_out else "error")
        span.set_attribute(ERROR_TYPE, "cairn.errors.StepTimeout" if timed_out else _type_name(exc))
        span.record_exception(exc)
        trace = self.tracing.otel_trace
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc) or type(exc).__name__))
        self._end()

    def interrupted(self) -> None:
        self.span.set_attribute(OUTCOME, "interrupted")
        self._end()

    def _end(self) -> None:
        self.span.end()
        self.tracing.otel_context.detach(self.token)


class _Unsampled:
    """The scope of a step of an unsampled run: nothing to record."""

    __slots__ = ()

    def succeeded(self) -> None:
        pass

    def failed(self, exc: BaseException, timed_out: bool) -> None:
        pass

    def interrupted(self) -> None:
        pass


_UNSAMPLED = _Unsampled()


def _error_of(error: str | None) -> tuple[str, str]:
    """(type, message) of a run's stored error; a step's failure names its cause's type."""
    try:
        data = json.loads(error or "{}")
    except ValueError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    kind = data.get("cause_type") or data.get("type") or ""
    return str(kind), str(data.get("message", ""))
