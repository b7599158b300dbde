"""Names, ids and values follow one rule on both stores; hook tokens are stored as digests."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from tests.engine.intercept import intercept
from tests.store.kit import execute

import cairn
from cairn.core import hook_tokens
from cairn.store.programs import runs

from .kit import WAIT, Kit

BAD_NAMES = [
    pytest.param("", id="empty"),
    pytest.param("x" * 256, id="too-long"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\ud800b", id="lone-surrogate"),
]


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_names__bad_run_id_and_event_name_are_refused_before_anything_is_stored(
    kit: Kit, bad: str
) -> None:
    @kit.workflow("names.noop")
    async def noop() -> str:
        return "ok"

    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.InvalidName, match=r"^run_id "):
            await engine.start(noop, run_id=bad)
        assert (await engine.list_runs()).runs == []
        run = await engine.start(noop, run_id="names-1")
        with pytest.raises(cairn.InvalidName, match=r"^event name "):
            await engine.send_event(run.run_id, bad, {"x": 1})
        with pytest.raises(ValueError):  # InvalidName is a ValueError too
            await engine.send_event(run.run_id, bad, {"x": 1})


@pytest.mark.parametrize("bad", BAD_NAMES[1:])  # an empty name means the default one
def test_names__bad_workflow_and_step_names_fail_at_declaration(kit: Kit, bad: str) -> None:
    with pytest.raises(cairn.InvalidName, match=r"^workflow name "):
        kit.workflow(bad)(lambda: None)
    with pytest.raises(cairn.InvalidName, match=r"^step name "):
        kit.step(bad)(lambda: None)


async def test_names__a_bad_event_name_inside_a_run_fails_the_run_naming_it(kit: Kit) -> None:
    @kit.workflow("names.waits")
    async def waits() -> Any:
        return await cairn.wait_for_event("approve\x00")

    async with kit.engine() as engine:
        run = await engine.start(waits)
        with pytest.raises(cairn.RunFailed, match="event name 'approve\\\\x00' contains a NUL"):
            await run.result(timeout=WAIT)


async def test_names__the_longest_names_are_stored_alike_on_both_stores(kit: Kit) -> None:
    long_step = "é" * 255  # 510 bytes of UTF-8

    @kit.step(long_step)
    async def step() -> str:
        return "done"

    @kit.workflow("names.long")
    async def long() -> Any:
        await step()
        return await cairn.wait_for_event("e" * 255)

    async with kit.engine() as engine:
        run = await engine.start(long, run_id="r" * 255)
        await engine.send_event(run.run_id, "e" * 255, "payload")
        assert await run.result(timeout=WAIT) == "payload"
        history = await engine.history(run.run_id)
    assert history[0].name == long_step


async def test_columns__a_long_value_is_refused_alike_on_both_stores(kit: Kit) -> None:
    @kit.workflow("columns.long")
    async def long(size: int) -> str:
        cairn.set_columns(note="a" * size)
        return "ok"

    async with kit.engine() as engine:
        fits = await engine.start(long, 998)  # 1,000 characters of JSON with its quotes
        assert await fits.result(timeout=WAIT) == "ok"
        found = await engine.list_runs(columns={"note": "a" * 998})
        assert [r.run_id for r in found] == [fits.run_id]
        too_long = await engine.start(long, 999)
        with pytest.raises(cairn.RunFailed, match="column 'note' is 1001 characters of JSON"):
            await too_long.result(timeout=WAIT)


async def test_progress__a_burst_of_updates_makes_few_writes_and_keeps_the_last(kit: Kit) -> None:
    @kit.step("progress.work")
    async def work() -> int:
        return 1

    @kit.workflow("progress.burst")
    async def burst() -> int:
        for i in range(500):
            cairn.progress(f"item {i}", current=i + 1, total=500)
            cairn.set_columns(last=i)
        return await work()

    async with kit.engine() as engine:
        writes = 0

        async def counting(*args: Any, **kwargs: Any) -> None:
            nonlocal writes
            writes += 1
            await update(*args, **kwargs)

        update, _ = intercept(engine.store, runs.update_run_meta, counting)
        run = await engine.start(burst)
        assert await run.result(timeout=WAIT) == 1
        info = await run.describe()
    assert writes <= 2  # one in flight, then everything merged into one more
    assert info.progress is not None and info.progress["message"] == "item 499"
    assert info.columns == {"last": 499}


async def test_hooks__tokens_are_stored_as_digests_and_left_out_of_history(kit: Kit) -> None:
    tokens: list[str] = []

    @kit.step("hooks.send")
    async def send(token: str) -> str:
        tokens.append(token)
        return "sent"

    @kit.workflow("hooks.digest")
    async def digest() -> Any:
        hook = await cairn.create_hook("approve")
        await send(hook.token)
        return await hook

    async with kit.engine() as engine:
        run = await engine.start(digest)
        async with engine_until_waiting(engine, run.run_id):
            pass
        stored = [row[0] for row in execute(kit.url, "SELECT token FROM hooks")]
        assert stored == [hashlib.sha256(tokens[0].encode()).hexdigest()]
        history = await engine.history(run.run_id)
        waiting = [h for h in history if h.kind == "hook"]
        assert waiting and "token" not in (waiting[0].result or {})
        assert tokens[0] not in repr(history)
        with pytest.raises(cairn.HookNotFound):  # the stored digest is not a token
            await engine.resume_hook(stored[0], "forged")
        assert await engine.resume_hook(tokens[0], "yes") == run.run_id
        assert await run.result(timeout=WAIT) == "yes"


async def test_hooks__a_hook_stored_before_digests_still_resumes(kit: Kit) -> None:
    @kit.workflow("hooks.legacy")
    async def legacy() -> Any:
        hook = await cairn.create_hook("approve")
        return await hook

    async with kit.engine() as engine:
        run = await engine.start(legacy)
        async with engine_until_waiting(engine, run.run_id):
            pass
    # Rewrite the run as an older cairn stored it: the token itself in the row and channel.
    old = hook_tokens.new_token()
    execute(kit.url, "UPDATE hooks SET token = ?", (old,))
    facts = execute(kit.url, "SELECT key, result FROM steps WHERE kind = 'hook'")
    key, text = facts[0]
    stored = {**json.loads(text), "token": old, "channel": f"hook:{old}"}
    execute(kit.url, "UPDATE steps SET result = ? WHERE key = ?", (json.dumps(stored), key))
    execute(kit.url, "UPDATE runs SET waits_on = NULL")  # parked before channels were kept
    async with kit.engine() as engine:
        assert await engine.resume_hook(old, "late") == run.run_id
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == "late"


class engine_until_waiting:
    """`async with`: returns once the run is WAITING (polled; fails after WAIT)."""

    def __init__(self, engine: cairn.Engine, run_id: str) -> None:
        self.engine, self.run_id = engine, run_id

    async def __aenter__(self) -> None:
        import asyncio

        async with asyncio.timeout(WAIT):
            while (await self.engine.control.record(self.run_id)).status != "WAITING":
                await asyncio.sleep(0.005)

    async def __aexit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("option", ["queue", "dedup_key", "partition"])
@pytest.mark.parametrize("bad", [*BAD_NAMES, pytest.param("q" * 300, id="300-chars")])
async def test_names__a_bad_queue_dedup_key_or_partition_is_refused_before_anything_is_stored(
    kit: Kit, option: str, bad: str
) -> None:
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.InvalidName, match=rf"^{option} "):
            await engine.start("names.elsewhere", allow_unknown=True, **{option: bad})
        assert (await engine.list_runs()).runs == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue": 5}, r"^queue must be a non-empty string, got 5$"),
        ({"dedup_key": 3}, r"^dedup_key must be a non-empty string, got 3$"),
        ({"partition": 3}, r"^partition must be a non-empty string, got 3$"),
        ({"run_id": 7}, r"^run_id must be a non-empty string, got 7$"),
    ],
)
async def test_names__a_start_option_that_is_not_a_string_is_refused_before_sql(
    kit: Kit, options: dict[str, Any], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.InvalidName, match=message):
            await engine.start("names.elsewhere", allow_unknown=True, **options)
        with pytest.raises(TypeError, match=r"^priority must be an integer, got 'x'$"):
            await engine.start("names.elsewhere", allow_unknown=True, priority="x")
        with pytest.raises(TypeError, match=r"^expected a @cairn.workflow or a workflow name"):
            await engine.start(5)
        assert (await engine.list_runs()).runs == []
    assert "operator does not exist" not in caplog.text


async def test_names__filters_and_lookups_follow_the_name_rule(kit: Kit) -> None:
    async with kit.engine(workers=0) as engine:
        for filters, what in [
            ({"workflow": 5}, "workflow"),
            ({"workflow": "a\x00b"}, "workflow"),
            ({"version": 5}, "version"),
            ({"version": "v" * 300}, "version"),
            ({"columns": {5: 1}}, "column name"),
            ({"columns": {"a\x00": 1}}, "column name"),
        ]:
            with pytest.raises(cairn.InvalidName, match=rf"^{what} "):
                await engine.list_runs(**filters)
            with pytest.raises(cairn.InvalidName, match=rf"^{what} "):
                await engine.control.count_runs(**filters)
        # A column's value is data: a NUL in it is JSON-escaped and simply matches nothing.
        assert (await engine.list_runs(columns={"note": "a\x00b"})).runs == []
        with pytest.raises(ValueError, match="invalid cursor"):
            await engine.list_runs(cursor="1.5|a\x00b")
        with pytest.raises(cairn.InvalidName, match=r"^assignee "):
            await engine.tasks.list(assignee=5)  # type: ignore[arg-type]
        with pytest.raises(cairn.InvalidName, match=r"^run_id "):
            await engine.tasks.list(run_id="a\x00b")
        with pytest.raises(cairn.InvalidName, match=r"^task id must be a non-empty string"):
            await engine.tasks.get(5)  # type: ignore[arg-type]
        with pytest.raises(cairn.TaskNotFound):
            await engine.tasks.get("a\x00b")
        with pytest.raises(cairn.InvalidName, match=r"^run id must be a non-empty string"):
            await engine.get(5)  # type: ignore[arg-type]
        with pytest.raises(cairn.RunNotFound):
            await engine.get("a\x00b")
        with pytest.raises(cairn.ScheduleNotFound):
            await engine.schedules.get("a\x00b")
        run = await engine.start("names.elsewhere", allow_unknown=True)
        with pytest.raises(cairn.InvalidName, match=r"^idempotency_key "):
            await engine.send_event(run.run_id, "go", idempotency_key="a\x00b")


@pytest.mark.parametrize("bad", [*BAD_NAMES, pytest.param(5, id="int")])
async def test_names__queue_names_follow_the_rule_in_code_and_live(kit: Kit, bad: Any) -> None:
    with pytest.raises(cairn.InvalidName, match=r"^queue name "):
        cairn.Queue(bad)
    with pytest.raises(cairn.InvalidName, match=r"^queue of workflow 'names.q' "):
        kit.workflow("names.q", queue=bad)(lambda: None)
    with pytest.raises(cairn.InvalidName, match=r"^queue "):
        kit.engine(queues=["mail", bad])
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.InvalidName, match=r"^queue name "):
            await engine.queues.update(bad, concurrency=1)
        assert await engine.queues.list() == []
