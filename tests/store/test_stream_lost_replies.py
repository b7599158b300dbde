"""PostgreSQL only: a stream append whose reply is lost is stored once.

The connection drops after the server committed the append and before its reply reached
the writer (a flapping network: LosingProxy). The writer's store sends it again; before
schema 31 the resend appended the same items a second time, and readers got them twice.
"""

from __future__ import annotations

import asyncio

import pytest
from tests.chaos.proxy import LosingProxy

from cairn.errors import StoreUnavailable
from cairn.store.postgres.store import PostgresStore
from cairn.store.programs import runs as run_ops
from cairn.store.programs import streams

from .kit import T0, held, run_record
from .test_postgres import admin


def _append(run_id: str, values: list[str], *, base: int) -> object:
    items = [("chunk", value) for value in values]
    return streams.append_stream(
        held("w1"), run_id, "tokens", items, step_key="s#1", attempt=1, claim=1, base=base, now=T0
    )


async def _written(store: PostgresStore, op: object) -> int | None:
    """The append's count, or None if its fate was reported unknown."""
    try:
        return await store.write(op)  # type: ignore[arg-type]
    except StoreUnavailable as exc:
        assert exc.unknown, exc
        return None


@pytest.mark.parametrize("runs", [1, 20], ids=["alone", "at-once"])
async def test_append_stream__a_lost_reply_stores_the_items_once(pg_url: str, runs: int) -> None:
    # One append committed alone (autocommit) loses its reply; or one of 20 appends of
    # 20 runs at once (alone or sharing a group commit, as the lanes are free) does.
    _, database = admin(pg_url)
    proxy = LosingProxy(("127.0.0.1", 5432), rate=1.0, budget=0, kinds=("INSERT",))
    store = PostgresStore(proxy.url(database), retry_for=10.0)
    run_ids = [f"r{i}" for i in range(runs)]
    try:
        await store.open()
        for run_id in run_ids:
            await store.write(run_ops.create_run(run_record(run_id, status="RUNNING", owner="w1")))
            await store.write(_append(run_id, ['"a"'], base=0))
        proxy.budget = 1
        await asyncio.gather(
            *(_written(store, _append(r, ['"b"', '"c"'], base=1)) for r in run_ids)
        )
        await store.write(_append("r0", ['"d"'], base=3))  # the writer's next append goes on
        stored = {
            run_id: [i.value for i in await store.read(streams.read_stream(run_id, "tokens"))]
            for run_id in run_ids
        }
        found = [await store.read(streams.appended(r, "tokens", "s#1", 1, 1, 3)) for r in run_ids]
    finally:
        proxy.close()
        await store.close()
    assert sum(proxy.lost.values()) == 1, proxy.lost
    assert stored.pop("r0") == ['"a"', '"b"', '"c"', '"d"']
    assert set(map(tuple, stored.values())) <= {('"a"', '"b"', '"c"')}
    assert all(found)
