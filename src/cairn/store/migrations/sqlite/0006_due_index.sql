-- cairn schema 6: parked runs found through (status, wake_at).
-- The partial index runs_due lost to runs_by_status for "status IN ('SLEEPING',
-- 'WAITING') AND wake_at <= ?": SQLite, which keeps no statistics, then read every
-- sleeping run on each claim and on each look for the next timer (100,000 sleepers made
-- every claim a full scan). With status leading, every planner takes this index.
DROP INDEX runs_due;
CREATE INDEX runs_by_status_wake ON runs (status, wake_at);
