"""Transaction bodies shared by every SQL backend, written once as "programs".

One module per concern over a small base (`base`: `Sql`, `Program`, `@single_write`):
`runs` (a run's life), `journal` (steps, attempts, messages, hooks, tasks), `control`
(operator verbs), `claims` (workers, claims, queue limits), `schedules` (schedules and
event triggers), `step_tasks` (steps run elsewhere) and `prune` (retention).
"""
