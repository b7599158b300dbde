-- cairn schema 14: a waiting run wakes only for a message one of its waits consumes.
-- runs.waits_on is the JSON array of the channels (event:NAME, hook:DIGEST, task:ID,
-- child:RUN_ID) of the open waits of a run parked WAITING; a message on any other channel
-- is kept without waking the run (before 14 every message woke it, and a run waiting for
-- one event that got another replayed and parked again without end). NULL, as for runs
-- parked before 14, means any message wakes it, once: it records its channels when it
-- parks again. runs.futile_wakes is how many times in the minute before the run last
-- parked it woke and parked again without recording anything (0 after progress), for
-- the runs lists and the cairn_runs_spinning gauge.
ALTER TABLE runs ADD COLUMN waits_on TEXT;
ALTER TABLE runs ADD COLUMN futile_wakes INTEGER NOT NULL DEFAULT 0;
