-- cairn schema 10: the trace context a run was started in.
-- runs.trace_context holds the W3C trace context headers (traceparent, tracestate) of the
-- span that was active where the run was started, as JSON text, or NULL: the spans of
-- each attempt of the run continue that trace, whichever worker executes it.
ALTER TABLE runs ADD COLUMN trace_context TEXT;
