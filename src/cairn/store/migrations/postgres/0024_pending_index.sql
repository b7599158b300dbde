-- cairn schema 24: claims find PENDING runs through runs_pending, which holds nothing else.
-- runs_by_status (status, priority, created_at) held every run, for claims that read
-- PENDING runs alone: a run started and executed by one engine (inserted RUNNING, then
-- COMPLETED) paid one more B-tree update at its insert and at its finish, about a fifth
-- of each statement on SQLite. Status leads, so that planners take it for
-- `status = 'PENDING'`; status filters and counts use runs_by_status_created.
CREATE INDEX runs_pending ON runs (status, priority, created_at) WHERE status = 'PENDING';
DROP INDEX runs_by_status;
