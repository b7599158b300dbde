-- cairn schema 3: operator control of runs (cancel, pause) and detached children.
ALTER TABLE runs ADD COLUMN control TEXT;
ALTER TABLE runs ADD COLUMN detached INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_by_control ON runs (owner) WHERE control IS NOT NULL;
