-- cairn schema 1: runs, their journals and failed attempts, and workers.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    workflow        TEXT NOT NULL,
    status          TEXT NOT NULL,
    args            TEXT NOT NULL,
    result          TEXT,
    error           TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    updated_at      DOUBLE PRECISION NOT NULL,
    started_at      DOUBLE PRECISION,
    finished_at     DOUBLE PRECISION,
    attempt         INTEGER NOT NULL DEFAULT 0,
    recoveries      INTEGER NOT NULL DEFAULT 0,
    max_recoveries  INTEGER NOT NULL DEFAULT 8,
    owner           TEXT,
    wake_at         DOUBLE PRECISION,
    parent_id       TEXT,
    queue           TEXT,
    priority        INTEGER NOT NULL DEFAULT 0,
    dedup_key       TEXT,
    partition_key   TEXT,
    columns         TEXT,
    progress        TEXT,
    waiting_for     TEXT,
    scheduled_at    DOUBLE PRECISION,
    continued_from  TEXT,
    continued_to    TEXT
);
CREATE INDEX runs_by_status ON runs (status, priority, created_at);
CREATE INDEX runs_due ON runs (wake_at) WHERE status IN ('SLEEPING', 'WAITING');
CREATE INDEX runs_by_owner ON runs (owner) WHERE owner IS NOT NULL;
CREATE INDEX runs_by_created ON runs (created_at, run_id);
CREATE INDEX runs_by_workflow ON runs (workflow, created_at);
CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE run_columns (
    run_id  TEXT NOT NULL,
    name    TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX run_columns_by_value ON run_columns (name, value);

CREATE TABLE steps (
    run_id       TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    key          TEXT NOT NULL,
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    started_at   DOUBLE PRECISION,
    finished_at  DOUBLE PRECISION,
    result       TEXT,
    error        TEXT,
    PRIMARY KEY (run_id, key)
);

CREATE TABLE step_attempts (
    run_id      TEXT NOT NULL,
    key         TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    error_type  TEXT NOT NULL,
    message     TEXT NOT NULL,
    traceback   TEXT NOT NULL,
    failed_at   DOUBLE PRECISION NOT NULL,
    retry_at    DOUBLE PRECISION,
    PRIMARY KEY (run_id, key, attempt)
);

CREATE TABLE workers (
    worker_id     TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    DOUBLE PRECISION NOT NULL,
    heartbeat_at  DOUBLE PRECISION NOT NULL,
    concurrency   INTEGER NOT NULL DEFAULT 0,
    queues        TEXT
);
