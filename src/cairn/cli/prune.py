"""`cairn runs prune`: delete finished runs older than an age, by hand (see runtime/retention)."""

from __future__ import annotations

import argparse
from typing import Any

from cairn import blobs, durations
from cairn.cli import options, output
from cairn.models import RunStatus
from cairn.runtime import retention


def add_parser(actions: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn runs prune`."""
    prune = actions.add_parser(
        "prune",
        parents=[common],
        help="delete finished runs older than an age, with their history",
        description="Delete finished runs (COMPLETED, FAILED, CANCELLED, CONTINUED) that "
        "finished longer ago than --older-than, with their history, attempts, messages, "
        "hooks, tasks and columns, 500 runs per transaction. Runs an unfinished run "
        "depends on (its parent, a child, a later run of its continue_as_new chain) are kept. "
        "A keyed emit's key goes with the last run it started. Then the blobs of offloaded "
        "values no stored value references any more are deleted (those written in the "
        "last hour are kept: their checkpoint may be on its way).",
    )
    prune.add_argument(
        "--older-than",
        metavar="AGE",
        required=True,
        help='runs that finished longer ago than AGE ("30d", "12h", "2w")',
    )
    prune.add_argument(
        "--status",
        metavar="S",
        action="append",
        help="only runs that finished in this status (repeat for several; default: all four)",
    )
    prune.add_argument("--workflow", metavar="W", help="only runs of this workflow name")
    prune.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
    )
    prune.add_argument(
        "--batch",
        metavar="N",
        type=int,
        default=retention.BATCH,
        help=f"runs deleted per transaction at most ({retention.BATCH}; on SQLite as many "
        "as take about 10 ms)",
    )
    prune.set_defaults(handler=prune_runs)


def prune_runs(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs prune`."""
    age = durations.parse(ns.older_than, what="--older-than").total_seconds()
    if age <= 0:
        raise ValueError(f"--older-than must be longer than zero, got {ns.older_than!r}")
    if ns.batch < 1:
        raise ValueError(f"--batch must be a positive integer, got {ns.batch}")
    statuses = [RunStatus.parse(status) for status in ns.status or ()]
    for status in statuses:
        if not status.finished:
            raise ValueError(
                f"--status {status.value} is not a finished status "
                "(one of COMPLETED, FAILED, CANCELLED, CONTINUED)"
            )
    count = options.with_engine(
        glob,
        lambda engine: retention.prune(
            engine.store,
            finished_before=engine.clock.now() - age,
            statuses=[status.value for status in statuses] or None,
            workflow=ns.workflow,
            dry_run=ns.dry_run,
            batch=ns.batch,
            blobs=blobs.store_of(engine.serializer),
        ),
    )
    runs = "run" if count == 1 else "runs"
    verb = "would delete" if ns.dry_run else "deleted"
    output.say(f"{verb} {count} finished {runs}")
    return 0
