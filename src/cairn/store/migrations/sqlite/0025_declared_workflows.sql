-- cairn schema 25: the queue and max_recoveries each workflow's workers declare. A run
-- started by a name the starting process does not import (a Client, the dashboard,
-- `cairn run NAME --enqueue`) takes them from here, so that its queue's limits hold it
-- and a worker serving only that queue takes it. NULL: no engine with workers declared
-- the workflow since this migration (such a run gets no queue, as before).
ALTER TABLE known_workflows ADD COLUMN queue TEXT;
ALTER TABLE known_workflows ADD COLUMN max_recoveries INTEGER;
