"""A process without the keys must not store a run's inputs in the clear, on both stores.

The docs hand people a dashboard (or the CLI) without keys: they see statuses and names,
not values. What such a process sends into a run whose values are encrypted (an event,
a human task's answer, a hook's payload) would be written as plain text beside the
run's ciphertext. It is refused in one line naming the key instead, and nothing is
stored; a process with the key sends it as usual.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.errors import KeyUnavailable

from .kit import WAIT, Kit
from .seeds import until
from .test_encryption import codec, stored_bytes
from .test_large_values import engine

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


def declare_big(kit: Kit, tokens: list[str]) -> Any:
    @kit.step("keyless.big_hand_out")
    async def hand_out(token: str) -> None:
        tokens.append(token)

    @kit.workflow("keyless.big_inputs")
    async def big_inputs(text: str) -> list[Any]:
        got: list[Any] = [len(text), await cairn.wait_for_event("go")]
        hook = await cairn.create_hook("cb")
        await hand_out(hook.token)
        got.append(await hook)
        got.append(await cairn.human_task("ok", title="approve", data={"n": 1}))
        return got

    return big_inputs


async def send_all(
    sender: cairn.Engine, keyed: cairn.Engine, run_id: str, tokens: list[str], refused: bool
) -> None:
    """Each kind of input from `sender` (refused, then sent by `keyed`; or taken)."""
    match = "keeps its values encrypted \\(key 'k1'\\) and this process has no keys"
    if refused:
        with pytest.raises(KeyUnavailable, match=match):
            await sender.send_event(run_id, "go", f"{SECRET}-event")
    await (keyed if refused else sender).send_event(run_id, "go", "event")
    async with asyncio.timeout(WAIT):
        while not tokens:
            await asyncio.sleep(0.01)
    if refused:
        with pytest.raises(KeyUnavailable, match=match):
            await sender.resume_hook(tokens[0], f"{SECRET}-hook")
    await (keyed if refused else sender).resume_hook(tokens[0], "hook")
    async with asyncio.timeout(WAIT):
        while not (tasks := await sender.tasks.list()):
            await asyncio.sleep(0.01)
    if refused:
        with pytest.raises(KeyUnavailable, match=match):
            await sender.tasks.submit(tasks[0].task_id, {"ok": f"{SECRET}-answer"})
    await (keyed if refused else sender).tasks.submit(tasks[0].task_id, {"ok": "yes"})


async def test_keyless_senders__a_run_whose_arguments_are_offloaded_is_told_by_its_blob(
    kit: Kit, tmp_path: Path
) -> None:
    # Offloaded arguments are encrypted before they are offloaded: the stored text is a
    # reference, and only the blob's first bytes say the run is encrypted.
    tokens: list[str] = []
    big_inputs = declare_big(kit, tokens)
    keyed = engine(kit, tmp_path, codec=codec(), inline_limit="1KiB")
    keyless = engine(kit, tmp_path, workers=0, inline_limit="1KiB")
    async with keyed, keyless:
        run = await keyed.start(big_inputs, "a" * 5000)
        assert (await keyed.control.record(run.run_id)).args.startswith('{"__cairn__":"blob"')
        await until(keyed, run.run_id, "WAITING")
        await send_all(keyless, keyed, run.run_id, tokens, refused=True)
        assert await run.result(timeout=WAIT) == [5000, "event", "hook", {"ok": "yes"}]
    assert SECRET.encode() not in stored_bytes(kit.url)


async def test_keyless_senders__offloaded_arguments_without_encryption_are_taken(
    kit: Kit, tmp_path: Path
) -> None:
    tokens: list[str] = []
    big_inputs = declare_big(kit, tokens)
    async with engine(kit, tmp_path, inline_limit="1KiB") as plain:
        run = await plain.start(big_inputs, "a" * 5000)
        await until(plain, run.run_id, "WAITING")
        await send_all(plain, plain, run.run_id, tokens, refused=False)
        assert await run.result(timeout=WAIT) == [5000, "event", "hook", {"ok": "yes"}]


async def test_keyless_senders__an_offloaded_argument_it_cannot_read_is_refused_too(
    kit: Kit, tmp_path: Path
) -> None:
    # A blob this process cannot read leaves it unknown whether the run is encrypted:
    # refused (a plain value beside ciphertext cannot be taken back), saying what to give.
    tokens: list[str] = []
    big_inputs = declare_big(kit, tokens)
    keyed = engine(kit, tmp_path, codec=codec(), inline_limit="1KiB")
    elsewhere = (tmp_path / "elsewhere").as_uri()
    async with keyed, kit.engine(workers=0, blobs=elsewhere) as keyless:
        run = await keyed.start(big_inputs, "a" * 5000)
        await until(keyed, run.run_id, "WAITING")
        with pytest.raises(cairn.SerializationError) as caught:
            await keyless.send_event(run.run_id, "go", f"{SECRET}-event")
        await keyed.cancel(run.run_id)
    message = str(caught.value)
    head = f"cannot store the payload of event 'go': run {run.run_id!r} keeps its arguments"
    assert message.startswith(f"{head} in blob ")
    assert f"(not in {elsewhere}), so this process, which has no keys, cannot tell" in message
    assert message.endswith(
        "give it the blob store (CAIRN_BLOBS) or the keys (CAIRN_KEYS or CAIRN_KEYS_FILE)"
    )
    assert SECRET.encode() not in stored_bytes(kit.url)
