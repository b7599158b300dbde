"""One public representation of runs, entries, tasks, schedules, queues and workflows.

The JSON forms here are what `cairn ... --json` prints and what the HTTP API answers;
the plain words (times, durations, progress, errors, waits) are what the CLI's tables and
the dashboard's pages show; `actions` is the JSON answer of a verb (what cancel, pause
and resume refuse is runtime/steering.py's). Both surfaces sit on top of this package and
neither imports the other. Nothing here prints or serves, nor refuses a request.
"""
