"""Hooks: unguessable single-use tokens, expiry, payload schemas, and refusals that change
nothing (HookNotFound, InvalidSubmission).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pydantic
import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.models import HistoryEntry
from cairn.store.records import RunRecord
from cairn.testing import replay

from .kit import WAIT, Kit

PAYMENT = {
    "type": "object",
    "properties": {"paid": {"type": "integer", "minimum": 0}, "ref": {"type": "string"}},
    "required": ["paid"],
}


class Payment(pydantic.BaseModel):
    """A hook payload as a pydantic model (importable: the engine checks with the model)."""

    paid: int = pydantic.Field(ge=0)
    ref: str = ""


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def hook_token(engine: cairn.Engine, run_id: str, index: int = 0) -> str:
    """The token of the run's hook number `index` (published as a column by the workflow)."""
    async with asyncio.timeout(WAIT):
        while True:
            columns = (await engine.control.record(run_id)).columns or "{}"
            tokens = json.loads(columns).get("tokens", [])
            if len(tokens) > index:
                return str(tokens[index])
            await asyncio.sleep(0.005)


def _declare(kit: Kit, name: str, *, hooks: int = 1, timeout: Any = None) -> Any:
    @kit.workflow(name)
    async def hooked() -> list[Any]:
        payloads = []
        tokens: list[str] = []
        for i in range(hooks):
            hook = await cairn.create_hook(f"callback{i}", timeout=timeout)
            tokens.append(hook.token)
            cairn.set_columns(tokens=tokens)
            try:
                payloads.append(await hook)
            except cairn.EventTimeout as exc:
                payloads.append(f"expired: {exc}")
        return [*payloads, await cairn.wait_for_event("finish")]

    return hooked


def _bits(token: str) -> int:
    return len(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) * 8


async def test_hook__token_is_unguessable_and_unique(kit: Kit) -> None:
    hooked = _declare(kit, "hooks.tokens", hooks=2)

    async with kit.engine() as engine:
        runs = [await engine.start(hooked) for _ in range(2)]
        tokens = []
        for run in runs:
            tokens.append(await hook_token(engine, run.run_id))
            assert await engine.resume_hook(tokens[-1], "one") == run.run_id
            tokens.append(await hook_token(engine, run.run_id, 1))
    assert len(set(tokens)) == 4
    assert all(_bits(token) >= 128 for token in tokens)


async def test_resume_hook__delivers_the_payload_once(kit: Kit) -> None:
    hooked = _declare(kit, "hooks.once")

    async with kit.engine() as engine:
        run = await engine.start(hooked)
        token = await hook_token(engine, run.run_id)
        parked = await until(engine, run.run_id, "WAITING")
        assert parked.waiting_for is not None and "callback0" in parked.waiting_for
        assert await engine.resume_hook(token, {"paid": 10}) == run.run_id
        async with asyncio.timeout(WAIT):  # the hook is consumed; the run waits for "finish"
            while len(history := await engine.history(run.run_id)) < 2:
                await asyncio.sleep(0.005)
        await until(engine, run.run_id, "WAITING")
        before = await _snapshot(engine, run.run_id)

        with pytest.raises(cairn.HookNotFound):
            await engine.resume_hook(token, {"paid": 99})  # a replayed callback
        assert await _snapshot(engine, run.run_id) == before

        await run.send_event("finish", "end")
        assert await run.result(timeout=WAIT) == [{"paid": 10}, "end"]
    assert (history[0].kind, history[0].name, history[0].status, history[0].result) == (
        "hook",
        "callback0",
        "completed",
        {"paid": 10},
    )


async def _snapshot(engine: cairn.Engine, run_id: str) -> tuple[Any, ...]:
    run = await engine.control.record(run_id)
    history: list[HistoryEntry] = await engine.history(run_id)
    return (run.status, run.wake_at, [(h.key, h.status, h.result) for h in history])


async def test_resume_hook__unknown_token(kit: Kit) -> None:
    async with kit.engine() as engine:
        with pytest.raises(cairn.HookNotFound):
            await engine.resume_hook("no-such-token", 1)

    def from_a_script() -> None:
        with cairn.Client(kit.url) as client, pytest.raises(cairn.HookNotFound):
            client.resume_hook("no-such-token", 1)

    await asyncio.to_thread(from_a_script)


async def test_hook__expiry_raises_event_timeout_and_hook_not_found(kit: Kit) -> None:
    clock = VirtualClock()
    hooked = _declare(kit, "hooks.expiry", timeout="10m")

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(hooked)
        token = await hook_token(engine, run.run_id)
        parked = await until(engine, run.run_id, "WAITING")
        assert parked.wake_at == pytest.approx(started + 600)
        clock.advance(600)
        # Expired, whether or not the run has woken to notice yet.
        with pytest.raises(cairn.HookNotFound):
            await engine.resume_hook(token, "too late")
        async with asyncio.timeout(WAIT):
            while len(await engine.history(run.run_id)) < 1 or (
                (await engine.history(run.run_id))[0].status != "timeout"
            ):
                await asyncio.sleep(0.005)
        with pytest.raises(cairn.HookNotFound):
            await engine.resume_hook(token, "still too late")
        await run.send_event("finish", "end")
        result = await run.result(timeout=WAIT)
    assert result[0].startswith("expired:") and "'callback0'" in result[0]
    assert result[1] == "end"


async def test_hook__called_before_the_run_awaits_it(kit: Kit) -> None:
    seen: list[str] = []

    @kit.workflow("hooks.early")
    async def early() -> Any:
        hook = await cairn.create_hook("early")
        seen.append(hook.token)
        cairn.set_columns(tokens=[hook.token])
        await cairn.wait_for_event("now")  # the callback arrives during this wait
        return await hook

    async with kit.engine() as engine:
        run = await engine.start(early)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        await engine.resume_hook(token, "early bird")
        await run.send_event("now")
        assert await run.result(timeout=WAIT) == "early bird"
    assert set(seen) == {token}  # replays find the same hook, never a new token


async def test_hook__sync_workflow_waits_with_wait(kit: Kit) -> None:
    @kit.workflow("hooks.sync")
    def sync_hook() -> Any:
        hook: Any = cairn.create_hook("sync")  # a sync workflow gets the Hook itself
        cairn.set_columns(tokens=[hook.token])
        assert hook.expires_at is None and "sync" in repr(hook)
        return hook.wait()

    async with kit.engine() as engine:
        run = await engine.start(sync_hook)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        assert await engine.resume_hook(token, [1, 2]) == run.run_id
        assert await run.result(timeout=WAIT) == [1, 2]


async def test_hook__of_a_finished_run_is_not_found(kit: Kit) -> None:
    @kit.workflow("hooks.abandoned")
    async def abandoned() -> str:
        hook = await cairn.create_hook("ignored")
        cairn.set_columns(tokens=[hook.token])
        return "left without waiting"

    async with kit.engine() as engine:
        run = await engine.start(abandoned)
        assert await run.result(timeout=WAIT) == "left without waiting"
        token = await hook_token(engine, run.run_id)
        with pytest.raises(cairn.HookNotFound):
            await engine.resume_hook(token, "nobody listens")


def _declare_checked(kit: Kit, name: str, schema: Any, timeout: Any = None) -> Any:
    @kit.workflow(name)
    async def checked() -> Any:
        hook = await cairn.create_hook("payment", timeout=timeout, schema=schema)
        cairn.set_columns(tokens=[hook.token])
        payload = await hook
        shown = payload.model_dump() if isinstance(payload, pydantic.BaseModel) else payload
        return {"type": type(payload).__name__, "payload": shown}

    return checked


async def test_hook_schema__payload_that_does_not_fit_changes_nothing(kit: Kit) -> None:
    checked = _declare_checked(kit, "hooks.schema", PAYMENT)

    async with kit.engine() as engine:
        run = await engine.start(checked)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        before = await _snapshot(engine, run.run_id)

        with pytest.raises(cairn.InvalidSubmission) as wrong:
            await engine.resume_hook(token, {"paid": -1, "ref": 7})
        assert set(wrong.value.fields) == {"paid", "ref"}
        assert "less than the minimum of 0" in wrong.value.fields["paid"]
        with pytest.raises(cairn.InvalidSubmission) as missing:
            await engine.resume_hook(token, {})
        assert missing.value.fields == {"paid": "required"}
        with pytest.raises(cairn.InvalidSubmission) as whole:
            await engine.resume_hook(token, [1])
        assert list(whole.value.fields) == ["(payload)"]
        assert await _snapshot(engine, run.run_id) == before

        assert await engine.resume_hook(token, {"paid": 5}) == run.run_id  # still usable
        assert await run.result(timeout=WAIT) == {"type": "dict", "payload": {"paid": 5}}
        with pytest.raises(cairn.HookNotFound):  # used: not found comes before the schema
            await engine.resume_hook(token, {"paid": -1})


async def test_hook_schema__pydantic_model_returns_an_instance(kit: Kit) -> None:
    seen: list[Any] = []

    @kit.workflow("hooks.model")
    async def modelled() -> Any:
        hook = await cairn.create_hook("payment", schema=Payment)
        cairn.set_columns(tokens=[hook.token])
        payment = await hook
        seen.append(payment)
        return payment.paid

    async with kit.engine() as engine:
        run = await engine.start(modelled)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        with pytest.raises(cairn.InvalidSubmission) as wrong:
            await engine.resume_hook(token, {"paid": "lots"})
        assert list(wrong.value.fields) == ["paid"]
        with pytest.raises(cairn.InvalidSubmission) as whole:
            await engine.resume_hook(token, "paid")
        assert list(whole.value.fields) == ["(payload)"]

        await engine.resume_hook(token, Payment(paid=3, ref="r-1"))
        assert await run.result(timeout=WAIT) == 3
        history = await engine.history(run.run_id)
    assert seen[-1] == Payment(paid=3, ref="r-1")
    assert history[0].result == {"paid": 3, "ref": "r-1"}  # stored as plain JSON
    seen.clear()
    replay(history, modelled)  # the replay helper hands back an instance too
    assert seen == [Payment(paid=3, ref="r-1")]


async def test_hook_schema__model_that_cannot_be_imported_checks_its_json_schema(
    kit: Kit,
) -> None:
    class Local(pydantic.BaseModel):  # `<locals>` in its path: only its schema is usable
        paid: int

    checked = _declare_checked(kit, "hooks.local_model", Local)

    async with kit.engine() as engine:
        run = await engine.start(checked)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        with pytest.raises(cairn.InvalidSubmission) as wrong:
            await engine.resume_hook(token, {"paid": "lots"})
        assert list(wrong.value.fields) == ["paid"]
        await engine.resume_hook(token, {"paid": 4})
        result = await run.result(timeout=WAIT)
    assert result == {"type": "Local", "payload": {"paid": 4}}


async def test_hook_schema__expired_hook_is_not_found_whatever_the_payload(kit: Kit) -> None:
    clock = VirtualClock()
    checked = _declare_checked(kit, "hooks.schema_expiry", PAYMENT, timeout="1m")

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(checked)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        clock.advance(60)
        for payload in ({"paid": 1}, {"paid": "no"}):
            with pytest.raises(cairn.HookNotFound):
                await engine.resume_hook(token, payload)


async def test_hook_schema__not_a_schema_fails_the_run_at_create_hook(kit: Kit) -> None:
    checked = _declare_checked(kit, "hooks.bad_schema", "not a schema")

    async with kit.engine() as engine:
        run = await engine.start(checked)
        with pytest.raises(cairn.RunFailed, match="schema of hook 'payment' must be a JSON"):
            await run.result(timeout=WAIT)


async def test_hook_schema__from_a_script(kit: Kit) -> None:
    checked = _declare_checked(kit, "hooks.schema_client", PAYMENT)

    async with kit.engine() as engine:
        run = await engine.start(checked)
        token = await hook_token(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")

        def from_a_script() -> None:
            with cairn.Client(kit.url) as client:
                with pytest.raises(cairn.InvalidSubmission):
                    client.resume_hook(token, {"paid": "no"})
                client.resume_hook(token, {"paid": 1})

        await asyncio.to_thread(from_a_script)
        assert await run.result(timeout=WAIT) == {"type": "dict", "payload": {"paid": 1}}
