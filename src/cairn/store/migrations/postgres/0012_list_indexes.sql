-- cairn schema 12: the runs list (dashboard, `list_runs`, `cairn runs list`) newest first
-- without reading every match. A status filter walks runs_by_status_created in page
-- order (runs_by_status puts priority first, for claims). A column filter walks its
-- value's entries in run_columns, which now carry their run's created_at, in page order;
-- before, a status or a column shared by 80,000 of 100,000 runs was sorted in full, and
-- a rare column value was found by reading runs one by one (100 ms and more on SQLite).
CREATE INDEX runs_by_status_created ON runs (status, created_at, run_id);
ALTER TABLE run_columns ADD COLUMN created_at DOUBLE PRECISION NOT NULL DEFAULT 0;
UPDATE run_columns SET created_at = runs.created_at FROM runs
    WHERE runs.run_id = run_columns.run_id;
DROP INDEX run_columns_by_value;
CREATE INDEX run_columns_by_value ON run_columns (name, value, created_at, run_id);
