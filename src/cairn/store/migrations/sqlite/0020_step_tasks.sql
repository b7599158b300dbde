-- cairn schema 20: step attempts sent to a step queue (`@cairn.step(queue=...)`). The run
-- parks while a worker serving the queue claims the attempt here, holds it under a lease
-- it renews, and reports the outcome as a message on the run (see core/remote_steps.py).
-- An attempt whose worker goes silent past lease_until is claimed again (claims + 1);
-- only the holder of the latest claim may report. One row per attempt of a step.
CREATE TABLE step_tasks (
    task_id      TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL,
    key          TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    step         TEXT NOT NULL,
    target       TEXT,
    queue        TEXT NOT NULL,
    input        TEXT,
    timeout      REAL,
    status       TEXT NOT NULL,
    worker_id    TEXT,
    claims       INTEGER NOT NULL DEFAULT 0,
    lease_until  REAL,
    created_at   REAL NOT NULL,
    started_at   REAL,
    finished_at  REAL
);
CREATE INDEX step_tasks_ready ON step_tasks (queue, status, created_at);
CREATE INDEX step_tasks_run ON step_tasks (run_id);
