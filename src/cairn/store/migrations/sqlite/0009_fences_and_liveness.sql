-- cairn schema 9: one executor per run.
-- runs.fence counts the claims of a run (a local start is claim 1); every write made on
-- behalf of an attempt checks it, so a copy of an attempt from before a takeover (a
-- paused worker that came back) writes nothing. workers.lease is the worker's own lease:
-- others judge its heartbeat by it. workers.process says which process it is
-- ("boot id/pid namespace/pid/start ticks") so that a neighbour can tell a dead process
-- from one in another PID namespace. Heartbeats are written with the database's clock.
ALTER TABLE runs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN lease REAL NOT NULL DEFAULT 10;
ALTER TABLE workers ADD COLUMN process TEXT;
