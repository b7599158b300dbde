-- cairn schema 28: the version of each workflow a worker executes (a JSON object, name ->
-- version, of its workflows that declare one; NULL for a worker that does not say). In a
-- rolling deploy a worker that cannot replay a run of another version hands it back only
-- while a live worker of that version may take it; otherwise the run fails.
ALTER TABLE workers ADD COLUMN versions TEXT;
