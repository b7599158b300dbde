-- cairn schema 2: messages for waiting runs (events, hook calls, task submissions),
-- hooks and human tasks.
CREATE TABLE messages (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id           TEXT NOT NULL,
    channel          TEXT NOT NULL,
    payload          TEXT NOT NULL,
    idempotency_key  TEXT,
    created_at       REAL NOT NULL,
    consumed_by      TEXT
);
CREATE INDEX messages_unconsumed ON messages (run_id, channel, id) WHERE consumed_by IS NULL;
CREATE UNIQUE INDEX messages_idempotency ON messages (run_id, channel, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE hooks (
    token       TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    expires_at  REAL,
    used_at     REAL
);

CREATE TABLE tasks (
    task_id           TEXT PRIMARY KEY,
    run_id            TEXT NOT NULL,
    name              TEXT NOT NULL,
    title             TEXT NOT NULL,
    data              TEXT,
    form              TEXT,
    form_model        TEXT,
    assignee          TEXT,
    status            TEXT NOT NULL,
    created_at        REAL NOT NULL,
    due_at            REAL,
    submitted_at      REAL,
    submitted_by      TEXT,
    submitted_values  TEXT
);
CREATE INDEX tasks_by_status ON tasks (status, assignee, created_at);
CREATE INDEX tasks_by_run ON tasks (run_id);
