"""Column lists of the records' tables, the database's clock, the lease fence, statuses as SQL."""

from __future__ import annotations

from collections.abc import Iterable

from cairn.models import RunStatus
from cairn.store.records import (
    ATTEMPT_FIELDS,
    RUN_FIELDS,
    STEP_FIELDS,
    WORKER_FIELDS,
)

RUN_COLUMNS = ", ".join(RUN_FIELDS)
LISTED_RUN_COLUMNS = ", ".join(f"runs.{name}" for name in RUN_FIELDS)
STEP_COLUMNS = ", ".join(STEP_FIELDS)
ATTEMPT_COLUMNS = ", ".join(ATTEMPT_FIELDS)
WORKER_COLUMNS = ", ".join(WORKER_FIELDS)


# A statement names a single status as a literal ('PENDING'); tests/store/test_sql_statuses.py
# checks each one is a RunStatus. Lists are derived, in RunStatus's order.
def statuses_sql(statuses: Iterable[RunStatus]) -> str:
    """`('A', 'B')`: statuses as an SQL list, in RunStatus's order."""
    wanted = set(statuses)
    return "(" + ", ".join(f"'{s.value}'" for s in RunStatus if s in wanted) + ")"


FINISHED_SQL = statuses_sql(s for s in RunStatus if s.finished)
UNFINISHED_SQL = statuses_sql(s for s in RunStatus if not s.finished)


def placeholders(n: int) -> str:
    return ", ".join("?" * n)


def for_runs(sql: str, count: int) -> str:
    """`sql` about one run (its first `run_id = ?`) made about `count` runs at once."""
    return sql.replace("run_id = ?", f"run_id IN ({placeholders(count)})", 1)


# The database's clock, in epoch seconds: PostgreSQL defines cairn_now() in migration 9,
# SQLite's connections from the machine's clock. Liveness is judged with it, never with
# the clocks of the workers being judged.
DB_NOW = "cairn_now()"

# Fencing: every write on behalf of an attempt is guarded, in the same statement, by its
# lease: the run's owner and its fence (bumped by every claim). An attempt whose run was
# taken over, or claimed again since it began, sees rowcount 0 and writes nothing.
# The owner is compared inside COALESCE so that no plan can find the run through
# `runs_by_owner`: a worker holds up to hundreds of runs, and without statistics (a new
# database, autovacuum not yet run) PostgreSQL's generic plan preferred that small index
# to the primary key, checking each row against every run of the worker. Likewise every
# statement about one run compares its status beside `run_id = ?` as `(status || '')`: a
# claim's generic plan otherwise walked the status index through every PENDING run
# (tests/store/test_pg_plans_by_run_id.py).
FENCE = "run_id = ? AND COALESCE(owner, '') = ? AND fence = ?"
