-- cairn schema 5: queue limits, live-changeable, and per-queue dedup keys.
CREATE TABLE queues (
    name                   TEXT PRIMARY KEY,
    concurrency            INTEGER,
    per_worker             INTEGER,
    rate_count             INTEGER,
    rate_period            DOUBLE PRECISION,
    partition_concurrency  INTEGER,
    declared               TEXT,
    updated_at             DOUBLE PRECISION NOT NULL
);
CREATE INDEX runs_by_queue ON runs (queue, status) WHERE queue IS NOT NULL;
CREATE INDEX runs_queue_starts ON runs (queue, started_at) WHERE queue IS NOT NULL;
CREATE UNIQUE INDEX runs_dedup ON runs (COALESCE(queue, ''), dedup_key)
    WHERE dedup_key IS NOT NULL
    AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'CONTINUED');
