-- cairn schema 17: each workflow workers said they execute, and when a worker that knew
-- it was last seen. A worker writes its workflows when it registers, stops or is found
-- dead, so they are remembered after its row in workers is gone: a run started by a name
-- that no worker knew lately is refused (a misspelt name), while one whose workers are
-- only away (a deploy) is accepted.
CREATE TABLE known_workflows (
    workflow  TEXT PRIMARY KEY,
    seen_at   REAL NOT NULL
);
