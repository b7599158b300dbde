"""Transaction bodies shared by every SQL backend, written once as "programs".

One module per concern over a small base (`base`: `Sql`, `Program`, `@operation` and the
flags beside it): `runs` (a run's life), `journal` (steps, attempts), `waits` (messages,
hooks, tasks), `control` (operator verbs), `claims` (claims), `queues` (queue limits),
`workers` (workers and beats), `lifecycle` (the schema version), `schedules` (schedules
and event triggers), `step_tasks` (steps run elsewhere), `streams` (durable streams)
and `prune` (retention). A program declared `@operation` is a store operation: callers
hand a call of it to `store.write` or `store.read`.
"""
