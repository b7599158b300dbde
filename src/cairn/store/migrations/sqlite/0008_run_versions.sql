-- cairn schema 8: the code version each run started under (`@cairn.workflow(version=)`),
-- kept for the life of the run and filterable. NULL: no version was declared.
ALTER TABLE runs ADD COLUMN version TEXT;
CREATE INDEX runs_by_version ON runs (version, created_at) WHERE version IS NOT NULL;
