-- cairn schema 30: the trace context of the run's attempt that sent a step to its step
-- queue (W3C headers as JSON, like runs.trace_context; NULL when that attempt was not
-- traced). The worker that executes the step opens its span as a child of that attempt.
ALTER TABLE step_tasks ADD COLUMN trace_context TEXT;
