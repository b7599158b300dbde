"""db.query/db.update when the network to the database fails, through tests/chaos proxies.

A frozen connection (a hung proxy or failover): the database cannot enforce the step's
`timeout` when its answer never arrives, and the step must still fail its attempt at
about that time, not hang for ever. A reset pooled connection is replaced. A COMMIT
whose answer is lost leaves the update's outcome unknown: it must not be run again.
"""

from __future__ import annotations

import asyncio
import faulthandler

import pytest
import sqlalchemy

import cairn
from cairn.steps import db
from chaos.proxy import FreezingProxy, LosingProxy
from engine.kit import WAIT, Kit


def _proxy(kind: str, app_url: str) -> FreezingProxy:
    parsed = sqlalchemy.make_url(app_url)
    return FreezingProxy((parsed.host or "127.0.0.1", parsed.port or PORTS[kind]))


PORTS = {"postgres": 5432, "mariadb": 3306}


def _via(proxy: FreezingProxy, url: str) -> str:
    parsed = sqlalchemy.make_url(url)
    return parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
async def test_db_frozen__a_frozen_connection_fails_the_attempt_at_its_timeout(
    kit: Kit, kind: str, request: pytest.FixtureRequest
) -> None:
    app_url = str(request.getfixturevalue(f"{kind}_app"))
    proxy = _proxy(kind, app_url)
    try:
        url = _via(proxy, app_url)

        @kit.workflow("db.frozen")
        async def flow() -> str:
            await db.query("app", "SELECT 1 AS n")  # a pooled connection, open
            proxy.freeze()  # it hangs: no answer, no error, no reset
            try:
                await db.query("app", "SELECT 1 AS n", timeout="1s", retries=1, name="frozen")
            except cairn.StepFailed as failed:
                return failed.error_message
            return "done"

        loop = asyncio.get_running_loop()
        async with kit.engine(databases={"app": url}) as engine:
            started = loop.time()
            run = await engine.start(flow)
            message = await run.result(timeout=WAIT * 3)
            took = loop.time() - started
        assert message == (
            "database 'app': no answer within the statement's timeout (1s); "
            "the connection was closed"
        )
        assert took < 1 + 2 + 3  # the limit, the grace, and room on a loaded machine
    finally:
        proxy.close()


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
async def test_db_frozen__a_pooled_connection_reset_meanwhile_is_replaced_within_the_attempt(
    kit: Kit, kind: str, request: pytest.FixtureRequest
) -> None:
    app_url = str(request.getfixturevalue(f"{kind}_app"))
    proxy = _proxy(kind, app_url)
    try:

        @kit.workflow("db.reset")
        async def flow() -> int:
            await db.query("app", "SELECT 1 AS n")
            assert proxy.reset() == 1  # the pooled connection is gone (a restart, a reset)
            rows = await db.query("app", "SELECT 2 AS n", retries=1, name="after")
            return int(rows[0]["n"])

        async with kit.engine(databases={"app": _via(proxy, app_url)}) as engine:
            run = await engine.start(flow)
            assert await run.result(timeout=WAIT) == 2
    finally:
        proxy.close()


class _CommitLoser(LosingProxy):
    """Loses the answer to the first COMMIT only (the server has committed)."""

    def _lose(self, data: bytes) -> str | None:
        if self.lost or b"C\x00\x00\x00\x0bCOMMIT\x00" not in data:
            return None
        self.lost["COMMIT"] += 1
        return "COMMIT"


async def test_db_faults__an_update_whose_commit_answer_is_lost_is_not_run_again(
    kit: Kit, postgres_app: str
) -> None:
    engine_ = sqlalchemy.create_engine(
        postgres_app.replace("postgresql://", "postgresql+psycopg://"),
        poolclass=sqlalchemy.NullPool,
    )
    with engine_.begin() as setup:
        setup.exec_driver_sql("CREATE TABLE t (n INTEGER)")
    proxy = _CommitLoser(
        ("127.0.0.1", sqlalchemy.make_url(postgres_app).port or 5432), rate=1, budget=1
    )
    try:

        @kit.workflow("db.lost_commit")
        async def flow() -> str:
            try:
                await db.update("app", "INSERT INTO t (n) VALUES (?)", [1])
            except cairn.StepFailed as failed:
                return failed.error_message
            return "done"

        url = proxy.url(sqlalchemy.make_url(postgres_app).database or "")
        async with kit.engine(databases={"app": url}) as engine:
            run = await engine.start(flow)
            message = await run.result(timeout=WAIT)
            attempts = await engine.control.attempts(run.run_id)
        assert proxy.lost["COMMIT"] == 1
        with engine_.connect() as check:
            assert check.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
        assert message.startswith(
            "database 'app': the connection was lost while committing, so whether the "
            "update took effect is unknown; it is not run again ("
        ), message
        assert [a["attempt"] for a in attempts] == [1]  # failed for good, not retried
    finally:
        proxy.close()
        engine_.dispose()


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
async def test_db_faults__a_cancel_ends_a_statement_on_a_frozen_connection_soon(
    kit: Kit, kind: str, request: pytest.FixtureRequest
) -> None:
    """A cancel reaches a statement whose connection is frozen (new ones hang too).

    psycopg's `cancel()` held the GIL while it waited for the server's answer, so the
    whole process froze with it; then the statement held the run for its whole timeout.
    The C-level guard ends the test process if it freezes, rather than hang for ever.
    """
    app_url = str(request.getfixturevalue(f"{kind}_app"))
    proxy = _proxy(kind, app_url)
    frozen = asyncio.Event()
    faulthandler.dump_traceback_later(60, exit=True)
    try:

        @kit.workflow("db.frozen_cancel")
        async def flow() -> str:
            await db.query("app", "SELECT 1 AS n")
            proxy.freeze(new=True)  # the cancel's own connection hangs as well
            frozen.set()
            await db.query("app", "SELECT 1 AS n", timeout="60s", name="frozen")
            return "done"

        loop = asyncio.get_running_loop()
        async with kit.engine(databases={"app": _via(proxy, app_url)}) as engine:
            run = await engine.start(flow)
            await asyncio.wait_for(frozen.wait(), WAIT)
            await asyncio.sleep(0.3)
            started = loop.time()
            await run.cancel()
            with pytest.raises(cairn.RunCancelled):
                await run.result(timeout=WAIT * 3)
            took = loop.time() - started
        assert took < 2 + 3  # the grace, and room on a loaded machine
    finally:
        faulthandler.cancel_dump_traceback_later()
        proxy.close()
