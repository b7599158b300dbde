"""Hooks: a row per token with its payload schema, used once, fenced by run ownership."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.store import LeaseLost, Store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import lifecycle, runs, waits
from cairn.store.records import HookRecord, StepRecord

from .kit import T0, held, run_record, step_record

SCHEMA = '{"type": "object"}'


def hook_record(token: str = "t1", **fields: Any) -> HookRecord:
    values: dict[str, Any] = {"run_id": "r1", "name": "callback", "created_at": T0}
    values.update(fields)
    return HookRecord(token=token, **values)


def hook_entry() -> StepRecord:
    """The "waiting" journal entry a hook's creation writes."""
    return step_record("r1", 1, "callback", kind="hook", status="waiting", key="~hook:x#1")


async def test_create_hook__keeps_schema_and_model(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    hook = hook_record(expires_at=T0 + 60, payload_schema=SCHEMA, payload_model="m:Payment")

    await store.write(waits.create_hook(held("w1"), hook_entry(), hook))

    assert await store.read(waits.get_hook("t1")) == hook
    assert await store.read(waits.get_hook("t2")) is None
    assert [s.key for s in await store.read(journal_ops.load_journal("r1"))] == ["~hook:x#1"]


async def test_create_hook__again_keeps_the_first_row(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(
        waits.create_hook(held("w1"), hook_entry(), hook_record(payload_schema=SCHEMA))
    )

    await store.write(waits.create_hook(held("w1"), hook_entry(), hook_record(payload_schema=None)))

    stored = await store.read(waits.get_hook("t1"))
    assert stored is not None and stored.payload_schema == SCHEMA


async def test_create_hook__non_owner_raises_lease_lost_and_writes_nothing(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    with pytest.raises(LeaseLost):
        await store.write(waits.create_hook(held("w2"), hook_entry(), hook_record()))

    assert await store.read(waits.get_hook("t1")) is None


async def test_resume_hook__once_then_none_and_get_hook_shows_it_used(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(waits.create_hook(held("w1"), hook_entry(), hook_record(expires_at=T0 + 60)))

    assert await store.write(waits.resume_hook("t1", '{"paid": 1}', now=T0 + 1)) == "r1"
    assert await store.write(waits.resume_hook("t1", '{"paid": 2}', now=T0 + 2)) is None

    used = await store.read(waits.get_hook("t1"))
    assert used is not None and used.used_at == T0 + 1
    assert not used.usable(T0 + 2)
    assert hook_record(expires_at=T0 + 60).usable(T0 + 59)
    assert not hook_record(expires_at=T0 + 60).usable(T0 + 60)


async def test_list_hooks__only_callable_ones_oldest_first(store: Store) -> None:
    for run_id, status in (("r1", "RUNNING"), ("r2", "RUNNING"), ("r3", "RUNNING")):
        await store.write(runs.create_run(run_record(run_id, status=status, owner="w1")))
    await store.write(
        waits.create_hook(held("w1"), hook_entry(), hook_record("t1", created_at=T0 + 2))
    )
    await store.write(
        waits.create_hook(
            held("w1"), hook_entry(), hook_record("t2", created_at=T0 + 1, expires_at=T0 + 60)
        )
    )
    await store.write(
        waits.create_hook(held("w1"), hook_entry(), hook_record("used", created_at=T0))
    )
    await store.write(
        waits.create_hook(
            held("w1"), hook_entry(), hook_record("gone", created_at=T0, expires_at=T0 + 5)
        )
    )
    other = step_record("r2", 1, "cb", kind="hook", status="waiting", key="~hook:y#1")
    await store.write(
        waits.create_hook(held("w1"), other, hook_record("t3", run_id="r2", created_at=T0 + 3))
    )
    await store.write(waits.resume_hook("used", "null", now=T0 + 1))
    # A hook of a finished run cannot be called any more.
    done = step_record("r3", 1, "cb", kind="hook", status="waiting", key="~hook:z#1")
    await store.write(
        waits.create_hook(held("w1"), done, hook_record("t4", run_id="r3", created_at=T0))
    )
    await store.write(
        runs.finish_run("r3", held("w1"), "COMPLETED", result="null", error=None, now=T0 + 1)
    )

    found = await store.read(waits.list_hooks(now=T0 + 10))

    assert [h.token for h in found] == ["t2", "t1", "t3"]
    assert found[0] == hook_record("t2", created_at=T0 + 1, expires_at=T0 + 60)
    assert [h.token for h in await store.read(waits.list_hooks(now=T0 + 10, run_id="r2"))] == ["t3"]
    assert [h.token for h in await store.read(waits.list_hooks(now=T0 + 10, limit=1))] == ["t2"]
    assert [h.token for h in await store.read(waits.list_hooks(now=T0 + 61))] == ["t1", "t3"]
    assert await store.read(waits.list_hooks(now=T0, run_id="nope")) == []


async def test_schema_version__is_the_newest_migration(store: Store) -> None:
    from cairn.store import migrate

    newest = max(m.version for m in migrate.available(store.dialect))
    assert await store.read(lifecycle.schema_version()) == newest
