-- cairn schema 26: when a run last started in a way its queue's rate counts: new, retried
-- or handed back (not woken, not recovered). started_at keeps the first start (a
-- workflow's timeout runs from it), so a retried run did not count toward the rate and
-- a burst of retries started at once. A run no claim has started since (inserted
-- running, or started before this migration) counts at its started_at.
ALTER TABLE runs ADD COLUMN counted_start_at DOUBLE PRECISION;
DROP INDEX runs_queue_starts;
CREATE INDEX runs_queue_starts ON runs (queue, (COALESCE(counted_start_at, started_at)))
WHERE queue IS NOT NULL;
