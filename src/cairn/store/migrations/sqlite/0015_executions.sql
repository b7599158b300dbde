-- cairn schema 15: nothing an operator saw vanishes.
-- runs.execution numbers a run's executions: a retry begins the next one. run_executions
-- records who began an execution, when, why ('retry', or 'restart' / 'fork' for a copied
-- run's first) and from which history entry on it records (a run started the ordinary
-- way has no row for its execution 1). retried_steps keeps the failed entry a retry took
-- out of the journal, with the execution that recorded it. step_attempts gains the
-- execution of each attempt (numbered anew in each), its outcome ('failed', or
-- 'interrupted': its worker died or lost the run while it ran) and, for an interrupted
-- one, the worker. runs.restarted_from / forked_from (+ forked_from_seq) say what a
-- copied run was copied from. workers.executing: the steps in flight at the worker's
-- last heartbeat (JSON, see store/in_flight.py).
ALTER TABLE runs ADD COLUMN execution INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN restarted_from TEXT;
ALTER TABLE runs ADD COLUMN forked_from TEXT;
ALTER TABLE runs ADD COLUMN forked_from_seq INTEGER;
CREATE INDEX runs_by_restarted_from ON runs (restarted_from) WHERE restarted_from IS NOT NULL;
CREATE INDEX runs_by_forked_from ON runs (forked_from) WHERE forked_from IS NOT NULL;

CREATE TABLE run_executions (
    run_id      TEXT NOT NULL,
    execution   INTEGER NOT NULL,
    started_at  REAL NOT NULL,
    cause       TEXT NOT NULL,
    started_by  TEXT,
    from_seq    INTEGER NOT NULL,
    PRIMARY KEY (run_id, execution)
) WITHOUT ROWID;

CREATE TABLE retried_steps (
    run_id       TEXT NOT NULL,
    execution    INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    key          TEXT NOT NULL,
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    started_at   REAL,
    finished_at  REAL,
    result       TEXT,
    error        TEXT,
    input        TEXT,
    PRIMARY KEY (run_id, execution, key)
) WITHOUT ROWID;

-- The attempts' primary key gains the execution: SQLite rebuilds the table for that.
CREATE TABLE step_attempts_15 (
    run_id      TEXT NOT NULL,
    execution   INTEGER NOT NULL DEFAULT 1,
    key         TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    error_type  TEXT NOT NULL,
    message     TEXT NOT NULL,
    traceback   TEXT NOT NULL,
    failed_at   REAL NOT NULL,
    retry_at    REAL,
    started_at  REAL,
    outcome     TEXT NOT NULL DEFAULT 'failed',
    worker      TEXT,
    PRIMARY KEY (run_id, execution, key, attempt)
) WITHOUT ROWID;
INSERT INTO step_attempts_15 (run_id, key, attempt, error_type, message, traceback,
    failed_at, retry_at, started_at)
    SELECT run_id, key, attempt, error_type, message, traceback, failed_at, retry_at,
    started_at FROM step_attempts;
DROP TABLE step_attempts;
ALTER TABLE step_attempts_15 RENAME TO step_attempts;

ALTER TABLE workers ADD COLUMN executing TEXT;
