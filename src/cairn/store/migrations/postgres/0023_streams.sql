-- cairn schema 23: durable streams (cairn.stream). One row per item of a run's named
-- stream, in seq order: a chunk (value: JSON text), "close" (the stream is complete) or
-- "reset" (the chunks of one step attempt are void: it failed or its worker died).
-- A step's rows carry its key, its attempt and the run's claim (runs.attempt) it ran in;
-- workflow code's rows carry step_key '~stream', their occurrence as attempt and the
-- journal position they follow as at_seq (a fork keeps those before its point).
CREATE TABLE stream_chunks (
    run_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    step_key    TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    claim       INTEGER NOT NULL,
    at_seq      INTEGER,
    value       TEXT,
    created_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, name, seq)
);
