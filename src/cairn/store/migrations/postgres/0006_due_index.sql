-- cairn schema 6: parked runs found through (status, wake_at).
-- The partial index runs_due (wake_at) lost to runs_by_status for "status IN
-- ('SLEEPING', 'WAITING') AND wake_at <= ?": SQLite, which keeps no statistics, then read
-- every sleeping run on each claim and on each look for the next timer (100,000 sleepers
-- made every claim a full scan). With status leading, every planner takes this one. Only
-- runs with a wake time are in it, so starting and finishing a run never touch it.
DROP INDEX runs_due;
CREATE INDEX runs_parked ON runs (status, wake_at) WHERE wake_at IS NOT NULL;
