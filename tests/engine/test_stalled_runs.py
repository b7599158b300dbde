"""PostgreSQL only: a run whose database work stops progressing is let go of, whatever the
heartbeat says.

A worker's heartbeat has a connection of its own: it may go on while the connections that
carry a run's work hang (here: a proxy freezes them). Alive is not enough to keep a run:
once a write made for a run has waited a whole lease, the next heartbeat releases the run
for another worker, and the late write, when it lands, is fenced off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import psycopg
import pytest
from tests.chaos.proxy import FreezingProxy

from cairn.store.postgres.side_channel import PostgresSideChannel
from cairn.store.postgres.store import PostgresStore, conninfo

from .kit import WAIT, Kit


class BeatsAround(PostgresStore):
    """A store whose heartbeat connection does not go through the proxy (see the test)."""

    def __init__(self, url: str, heartbeat_url: str, **options: object) -> None:
        super().__init__(url, **options)  # type: ignore[arg-type]
        self._heartbeat_url = heartbeat_url

    def side_channel(self) -> PostgresSideChannel:
        return PostgresSideChannel(conninfo(self._heartbeat_url), where=self.where)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[FreezingProxy]:
    target = psycopg.conninfo.conninfo_to_dict(pg_url)
    freezing = FreezingProxy((str(target["host"]), int(target["port"])))
    try:
        yield freezing
    finally:
        freezing.thaw()
        freezing.close()


async def test_stalled_write__the_run_is_let_go_of_and_its_late_write_fenced_off(
    pg_url: str, proxy: FreezingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    kit = Kit(pg_url)
    executions: list[str] = []
    entered, go = asyncio.Event(), asyncio.Event()

    @kit.step("stall.work")
    async def work() -> str:
        executions.append(f"execution {len(executions) + 1}")
        entered.set()
        await go.wait()
        return executions[-1]

    @kit.workflow("stall.one")
    async def one() -> str:
        return str(await work())

    @kit.step("stall.warm")
    async def warm() -> str:
        return "warm"

    @kit.workflow("stall.warm")
    async def warm_up() -> str:
        return str(await warm())

    # The frozen connections are not dropped as dead within the test (stalled_after):
    # only the run's liveness is at stake. Its heartbeat goes on around the proxy, as a
    # heartbeat whose own connection detected the dead peer and reconnected would.
    database = pg_url.rsplit("/", 1)[1]
    store = BeatsAround(proxy.url(database), pg_url, stalled_after=3600, retry_for=60)
    first = kit.engine(store=store, lease=1)
    await first.open()
    try:
        # The step insert is prepared on the writer's connection: frozen, it holds the
        # insert itself (not just its preparation), which lands when thawed.
        await (await first.start(warm_up)).result(timeout=WAIT)
        run = await first.start(one)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        proxy.freeze()  # the step's result will be sent into a connection that hangs
        said = f"run {run.run_id}: its database work got no reply"
        with caplog.at_level(logging.WARNING, logger="cairn"):
            go.set()
            async with asyncio.timeout(WAIT):
                while not any(said in r.getMessage() for r in caplog.records):
                    await asyncio.sleep(0.05)

        go.clear()
        async with kit.engine(lease=30) as second:  # a healthy worker takes it over
            async with asyncio.timeout(WAIT):
                while len(executions) < 2:
                    await asyncio.sleep(0.01)
            go.set()
            result = await (await second.get(run.run_id)).result(timeout=WAIT)
            # The first worker's write reaches the server only now, too late.
            proxy.thaw()
            await first.close()
            await store.close()
            await _until_delivered(pg_url, proxy)
            history = await second.history(run.run_id)
            stored = await second.control.record(run.run_id)
    finally:
        go.set()
        proxy.thaw()
        await first.close()
        await store.close()
    assert result == "execution 2"
    assert [(entry.key, entry.result) for entry in history] == [("stall.work#1", "execution 2")]
    assert stored.attempt == 2 and stored.recoveries == 0  # let go of, not recovered


async def _until_delivered(pg_url: str, proxy: FreezingProxy) -> None:
    """Until the server has ended every session that came through the proxy."""
    ports = proxy.server_ports()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        async with asyncio.timeout(WAIT):
            while True:
                cursor = await conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s)",
                    (ports,),
                )
                row = await cursor.fetchone()
                if row is not None and row[0] == 0:
                    return
                await asyncio.sleep(0.05)
