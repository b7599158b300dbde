-- cairn schema 13: what a run's timeline shows of each step beside its outcome.
-- steps.input holds the step's arguments in the run's serializer, written with the
-- outcome (no extra write): the array of positional ones, `{"args": [...], "kwargs":
-- {...}}` when some are named, or a short `{"omitted": ...}` marker when they were too
-- large or could not be serialized (core/step_input.py); NULL for other kinds of entry
-- and for steps recorded before 13. step_attempts.started_at is when each failed
-- attempt began (NULL for attempts recorded before 13).
ALTER TABLE steps ADD COLUMN input TEXT;
ALTER TABLE step_attempts ADD COLUMN started_at REAL;
