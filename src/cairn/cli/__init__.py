"""The `cairn` command line: init, run, send, check, runs, tasks, queues, schedules, worker, db.

Internal: the supported interface is the command itself (docs/reference/cli.md).
"""

from __future__ import annotations
