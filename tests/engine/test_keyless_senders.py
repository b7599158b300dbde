"""A process without the keys must not store a run's inputs in the clear, on both stores.

The docs hand people a dashboard (or the CLI) without keys: they see statuses and names,
not values. What such a process sends into a run whose values are encrypted (an event,
a human task's answer, a hook's payload) would be written as plain text beside the
run's ciphertext. It is refused in one line naming the key instead, and nothing is
stored; a process with the key sends it as usual.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.errors import KeyUnavailable

from .kit import WAIT, Kit
from .seeds import until
from .test_encryption import codec, stored_bytes

SECRET = "KEYLESS-SECRET-5e1d"


def declare(kit: Kit, tokens: list[str]) -> Any:
    @kit.step("keyless.hand_out")
    async def hand_out(token: str) -> None:
        tokens.append(token)

    @kit.workflow("keyless.inputs")
    async def inputs() -> list[Any]:
        got: list[Any] = [await cairn.wait_for_event("go")]
        hook = await cairn.create_hook("cb")
        await hand_out(hook.token)
        got.append(await hook)
        got.append(await cairn.human_task("ok", title="approve", data={"n": 1}))
        return got

    return inputs


async def test_keyless_senders__inputs_to_an_encrypted_run_are_refused_not_stored_plain(
    kit: Kit,
) -> None:
    tokens: list[str] = []
    inputs = declare(kit, tokens)
    async with kit.engine(codec=codec()) as keyed, kit.engine(workers=0) as keyless:
        run = await keyed.start(inputs)
        await until(keyed, run.run_id, "WAITING")
        with pytest.raises(KeyUnavailable) as caught:
            await keyless.send_event(run.run_id, "go", f"{SECRET}-event")
        message = str(caught.value)
        assert message == (
            f"cannot store the payload of event 'go': run {run.run_id!r} keeps its values "
            "encrypted (key 'k1') and this process has no keys, so it would be stored in "
            "the clear; give this process the keys (CAIRN_KEYS or CAIRN_KEYS_FILE)"
        )
        assert caught.value.key_id == "k1"
        await keyed.send_event(run.run_id, "go", "event")

        async with asyncio.timeout(WAIT):
            while not tokens:
                await asyncio.sleep(0.01)
        with pytest.raises(KeyUnavailable, match="cannot store the hook payload: run "):
            await keyless.resume_hook(tokens[0], f"{SECRET}-hook")
        await keyed.resume_hook(tokens[0], "hook")  # the hook is still usable

        async with asyncio.timeout(WAIT):
            while not (tasks := await keyless.tasks.list()):
                await asyncio.sleep(0.01)
        with pytest.raises(KeyUnavailable, match="cannot store the answer to human task "):
            await keyless.tasks.submit(tasks[0].task_id, {"ok": f"{SECRET}-answer"})
        await keyed.tasks.submit(tasks[0].task_id, {"ok": "yes"})  # still open
        assert await run.result(timeout=WAIT) == ["event", "hook", {"ok": "yes"}]
    assert SECRET.encode() not in stored_bytes(kit.url)


async def test_keyless_senders__a_run_without_encryption_takes_them_as_before(kit: Kit) -> None:
    tokens: list[str] = []
    inputs = declare(kit, tokens)
    async with kit.engine() as engine:
        run = await engine.start(inputs)
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "go", "event")
        async with asyncio.timeout(WAIT):
            while not tokens:
                await asyncio.sleep(0.01)
        await engine.resume_hook(tokens[0], "hook")
        async with asyncio.timeout(WAIT):
            while not (tasks := await engine.tasks.list()):
                await asyncio.sleep(0.01)
        await engine.tasks.submit(tasks[0].task_id, {"ok": "yes"})
        assert await run.result(timeout=WAIT) == ["event", "hook", {"ok": "yes"}]
