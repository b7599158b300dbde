-- cairn schema 4: schedules, event-trigger subscriptions and remembered emit keys.
CREATE TABLE schedules (
    schedule_id     TEXT PRIMARY KEY,
    workflow        TEXT NOT NULL,
    cron            TEXT,
    every           DOUBLE PRECISION,
    tz              TEXT NOT NULL,
    overlap         TEXT NOT NULL,
    catchup         DOUBLE PRECISION NOT NULL,
    args            TEXT NOT NULL,
    queue           TEXT,
    max_recoveries  INTEGER NOT NULL DEFAULT 8,
    source          TEXT NOT NULL,
    paused          INTEGER NOT NULL DEFAULT 0,
    next_tick       DOUBLE PRECISION,
    buffered_tick   DOUBLE PRECISION,
    last_run_id     TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    updated_at      DOUBLE PRECISION NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_tick) WHERE paused = 0;

CREATE TABLE subscriptions (
    event_type      TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    queue           TEXT,
    max_recoveries  INTEGER NOT NULL DEFAULT 8,
    updated_at      DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (event_type, workflow)
);

CREATE TABLE emit_keys (
    event_type  TEXT NOT NULL,
    key         TEXT NOT NULL,
    run_ids     TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (event_type, key)
);
