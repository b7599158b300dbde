-- cairn schema 7: the workflows each worker can execute (a JSON list; NULL for a worker
-- that does not say), so a run queued under a name no live worker knows is reported
-- instead of waiting in silence.
ALTER TABLE workers ADD COLUMN workflows TEXT;
