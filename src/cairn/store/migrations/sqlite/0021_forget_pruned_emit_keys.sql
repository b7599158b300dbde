-- cairn schema 21: retention before schema 21 deleted the runs a keyed emit started but
-- kept the key, so emitting it again started nothing. Prune now deletes a key with the last
-- of its runs; this forgets, once, the keys whose runs are all gone already.
DELETE FROM emit_keys WHERE NOT EXISTS (
    SELECT 1 FROM json_each(emit_keys.run_ids) AS started
    JOIN runs ON runs.run_id = started.value
);
