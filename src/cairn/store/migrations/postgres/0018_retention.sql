-- cairn schema 18: retention deletes finished runs past an age, a few hundred at a time.
-- runs_by_finished walks the finished runs oldest first (and from where the last batch
-- stopped) without reading unfinished ones; messages_by_run and hooks_by_run find a
-- pruned run's rows (messages_unconsumed holds only unconsumed ones, and hooks had no
-- index by run).
CREATE INDEX runs_by_finished ON runs (finished_at, run_id) WHERE finished_at IS NOT NULL;
CREATE INDEX messages_by_run ON messages (run_id);
CREATE INDEX hooks_by_run ON hooks (run_id);
