-- cairn schema 31: each stream item a writer appends carries its number among that
-- writer's items (n, from 1): a step attempt's in one claim, or 1 for each write of
-- workflow code (whose identity is its occurrence, `attempt`). An append sent again
-- after its reply was lost sees its own last item at the stream's end and stores
-- nothing twice. Resets, and items stored before this schema, have none (NULL).
ALTER TABLE stream_chunks ADD COLUMN n INTEGER;
