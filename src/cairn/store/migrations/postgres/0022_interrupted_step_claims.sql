-- cairn schema 22: a step queue's attempt keeps the claims its workers died holding. When
-- a worker takes over an attempt whose lease ran out, the claim it takes over is added to
-- `interrupted` (a JSON list of {"worker", "started_at", "lease_until"}), so a run's
-- history shows it as an interrupted attempt, as a local step's is shown.
ALTER TABLE step_tasks ADD COLUMN interrupted TEXT;
