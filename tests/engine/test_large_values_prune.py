"""Prune and retention delete the blobs nothing references any more, on both stores."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cairn.blobs import sweep
from cairn.runtime import retention

from .kit import WAIT, Kit
from .test_large_values import blob_dir, blob_files, engine


async def test_large_values_prune__deletes_unreferenced_blobs_and_keeps_the_rest(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "GRACE", 0.0)

    @kit.workflow("prune.old")
    async def old(text: str) -> int:
        return len(text)

    @kit.workflow("prune.kept")
    async def kept(text: str) -> int:
        return len(text)

    shared, alone = "s" * 5000, "a" * 5000
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        for flow, text in ((old, shared), (old, alone), (kept, shared)):
            run = await eng.start(flow, text)
            assert await run.result(timeout=WAIT) == 5000
        before = {p.name for p in blob_files(blob_dir(kit, tmp_path))}
        assert len(before) == 2
        stray = blob_dir(kit, tmp_path) / "ab" / ".ab00.x.tmp"  # a write cut short
        stray.parent.mkdir(exist_ok=True)
        stray.write_bytes(b"half")
        pruned = await retention.prune(
            eng.store,
            finished_before=eng.clock.now() + 1,
            workflow="prune.old",
            blobs=eng.serializer.blobs,  # type: ignore[attr-defined]
        )
        assert pruned == 2
        after = {p.name for p in blob_files(blob_dir(kit, tmp_path))}
        assert len(after) == 1 and after < before  # the shared value's blob is still named
        assert not stray.exists()
        [run] = await eng.list_runs(workflow="prune.kept")
        assert await (await eng.get(run.run_id)).result(timeout=WAIT) == 5000


async def test_large_values_prune__a_fresh_blob_is_kept_whatever_the_database_says(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("prune.fresh")
    async def fresh(text: str) -> int:
        return len(text)

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(fresh, "f" * 5000)
        assert await run.result(timeout=WAIT) == 5000
        blobs: Any = eng.serializer.blobs  # type: ignore[attr-defined]
        await retention.prune(eng.store, finished_before=eng.clock.now() + 1, blobs=blobs)
        # Its run is gone, but the blob was written less than GRACE ago: it may belong to
        # a checkpoint on its way. The next sweep past the grace takes it.
        assert len(blob_files(blob_dir(kit, tmp_path))) == 1
        assert await sweep.sweep(eng.store, blobs, grace=0) == 1
    assert blob_files(blob_dir(kit, tmp_path)) == []


def test_large_values_prune__every_value_column_is_swept(sqlite_url: str) -> None:
    """Each TEXT column of the schema holds a stored value (and is read) or is named here."""
    import asyncio

    import cairn

    asyncio.run(_migrate(cairn.Engine(sqlite_url)))
    not_values = {
        (table, column)
        for table, columns in {
            "runs": "run_id workflow status error owner parent_id queue dedup_key "
            "partition_key columns progress waiting_for continued_from continued_to control "
            "version trace_context waits_on restarted_from forked_from origin",
            "run_columns": "run_id name",
            "steps": "run_id key kind name status error",
            "retried_steps": "run_id key kind name status error",
            "messages": "run_id channel idempotency_key consumed_by",
            "hooks": "token run_id name payload_schema payload_model",
            "tasks": "task_id run_id name title form form_model assignee status submitted_by",
            "schedules": "schedule_id workflow cron tz overlap queue source last_run_id",
            "step_tasks": "task_id run_id key step target queue status worker_id interrupted "
            "trace_context",
            "stream_chunks": "run_id name kind step_key",
            "run_executions": "run_id cause started_by",
            "step_attempts": "run_id key error_type message traceback outcome worker",
        }.items()
        for column in columns.split()
    }
    others = ("workers", "subscriptions", "emit_keys", "queues", "known_workflows")
    path = sqlite_url.removeprefix("sqlite:///")
    text_columns = set()
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            if table in (*others, "cairn_migrations", "sqlite_sequence"):
                continue
            for row in conn.execute(f"PRAGMA table_info({table})"):
                if "TEXT" in str(row[2]).upper():
                    text_columns.add((table, row[1]))
    assert text_columns - not_values - set(sweep.VALUE_COLUMNS) == set()


async def _migrate(eng: Any) -> None:
    async with eng:
        pass


async def test_large_values_prune__retention_sweeps_after_deleting_runs(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "GRACE", 0.0)

    @kit.workflow("prune.kept_by_retention")
    async def echo(text: str) -> int:
        return len(text)

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(echo, "r" * 5000)
        assert await run.result(timeout=WAIT) == 5000
        blobs: Any = eng.serializer.blobs  # type: ignore[attr-defined]
        pruner = retention.Retention(eng.store, eng.clock, keep=3600.0, blobs=blobs)
        assert await pruner.prune_now() == 0  # nothing old enough: the first sweep keeps it
        assert len(blob_files(blob_dir(kit, tmp_path))) == 1
        pruner.keep = -1.0  # every finished run is past retention now
        assert await pruner.prune_now() == 1
        assert blob_files(blob_dir(kit, tmp_path)) == []


async def test_large_values_prune__the_sweep_reads_references_off_the_event_loop(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep reads every stored value: on SQLite, whose reads run on the loop's thread,
    that stalled every run of the engine for its whole length (4.3 s on a database of
    100,000 runs). The loop must go on while the sweep reads. (PostgreSQL's reads are
    awaited I/O: only the few rows naming a blob reach the loop.)"""
    import asyncio
    import threading

    kit = Kit(sqlite_url)

    @kit.workflow("prune.sweep_aside")
    async def echo(text: str) -> int:
        return len(text)

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(echo, "z" * 5000)
        assert await run.result(timeout=WAIT) == 5000
        loop_ran = threading.Event()
        seen: list[bool] = []
        real = sweep.hashes_in

        def slow_hashes_in(text: str) -> set[str]:
            # A scan long enough for the loop to run a callback meanwhile, if it can.
            seen.append(loop_ran.wait(5.0))
            return real(text)

        monkeypatch.setattr(sweep, "hashes_in", slow_hashes_in)
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, loop_ran.set)
        blobs: Any = eng.serializer.blobs  # type: ignore[attr-defined]
        assert await sweep.sweep(eng.store, blobs, grace=-60.0) == 0  # still referenced
        assert seen and all(seen)
