-- cairn schema 16: what started each run, and a dead worker's last heartbeat.
-- runs.origin is one of api (engine.start, Client.start, POST /api/v1/runs, cairn run),
-- schedule, trigger (an emit), parent (a child run), continue (continue_as_new),
-- restart or fork; NULL for a run whose origin was not recorded. Runs from before 16 get
-- what their row tells (a successor, a child, a scheduled run); the others stay NULL.
-- runs_by_origin lists the runs of one origin newest first without reading the rest.
-- workers.last_heartbeat_at keeps the heartbeat of a worker a neighbour declared dead
-- (its heartbeat_at is then 0, which is what takeovers look at).
ALTER TABLE runs ADD COLUMN origin TEXT;
UPDATE runs SET origin = CASE
    WHEN continued_from IS NOT NULL THEN 'continue'
    WHEN parent_id IS NOT NULL THEN 'parent'
    WHEN scheduled_at IS NOT NULL THEN 'schedule'
END;
CREATE INDEX runs_by_origin ON runs (origin, created_at, run_id);
ALTER TABLE workers ADD COLUMN last_heartbeat_at REAL;
