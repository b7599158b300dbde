"""Encryption at rest (cairn.codecs.Encrypted) on both stores: nothing stored in the clear.

A run puts a marker in every kind of value cairn stores (its arguments and result, a
step's argument, result and error, an event, a mailbox's messages, a hook's payload, a
human task's data and answer, a child's argument and result, a stream chunk, a failed
run's error); the SQLite file and its WAL, or a pg_dump of the PostgreSQL database, must
hold the marker nowhere. Keys rotate: values written under k1 are read under current k2,
`rekey` rewrites them, and readers without keys show "encrypted (k2)".
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.codecs import Encrypted
from cairn.representation import runs as run_forms
from cairn.runtime import rekeying
from cairn.store.programs.rekey import SEALED_COLUMNS

from .kit import WAIT, Kit
from .seeds import until

SECRET = "TOPSECRET-7f3a"
K1, K2 = b"\x01" * 32, b"\x02" * 32


def codec(current: str = "k1", **keys: bytes) -> Encrypted:
    return Encrypted(keys or {"k1": K1}, current)


def declare(kit: Kit) -> tuple[Any, Any]:
    @kit.step("enc.work")
    async def work(text: str) -> str:
        out = cairn.stream("out")
        await out.write(f"{SECRET}-chunk")
        await out.close()
        return f"{SECRET}-step-result/{text}"

    @kit.step("enc.fail")
    async def fail(text: str) -> None:
        raise cairn.FatalError(f"{SECRET}-step-error/{text}")

    @kit.workflow("enc.child")
    async def child(text: str) -> str:
        return f"{SECRET}-child-result/{text}"

    @kit.workflow("enc.all")
    async def everything(text: str) -> dict[str, Any]:
        got: list[Any] = [await work(f"{SECRET}-step-arg")]
        got.append(await cairn.wait_for_event("go"))
        got.append(await cairn.receive("box", max_messages=2))
        hook = await cairn.create_hook("cb")
        cairn.set_columns(token=hook.token)
        got.append(await hook)
        data = {"d": f"{SECRET}-task-data"}
        got.append(await cairn.human_task("approve", title="Approve", data=data))
        got.append(await child(f"{SECRET}-child-arg"))
        try:
            await fail(f"{SECRET}-fail-arg")
        except cairn.StepFailed as exc:
            got.append(exc.error_message)
        return {"got": got, "text": text, "result": f"{SECRET}-result"}

    @kit.workflow("enc.broken")
    async def broken(text: str) -> None:
        raise RuntimeError(f"{SECRET}-run-error/{text}")

    return everything, broken


async def drive(engine: cairn.Engine, everything: Any, broken: Any) -> tuple[str, str]:
    """Run both workflows to their end, feeding every wait; their run ids."""
    run = await engine.start(everything, f"{SECRET}-arg")
    await engine.send_event(run.run_id, "box", f"{SECRET}-box1")
    await engine.send_event(run.run_id, "box", f"{SECRET}-box2")
    await engine.send_event(run.run_id, "go", f"{SECRET}-event")  # both queued by then
    async with asyncio.timeout(WAIT):
        while not (
            columns := json.loads((await engine.control.record(run.run_id)).columns or "{}")
        ):
            await asyncio.sleep(0.005)
        await engine.resume_hook(columns["token"], {"p": f"{SECRET}-hook"})
        while not (tasks := await engine.tasks.list(run_id=run.run_id)):
            await asyncio.sleep(0.005)
    await engine.tasks.submit(tasks[0].task_id, {"answer": f"{SECRET}-answer"})
    failed = await engine.start(broken, f"{SECRET}-broken-arg")
    await until(engine, run.run_id, "COMPLETED", "FAILED")
    await until(engine, failed.run_id, "FAILED")
    return run.run_id, failed.run_id


def expected() -> dict[str, Any]:
    return {
        "got": [
            f"{SECRET}-step-result/{SECRET}-step-arg",
            f"{SECRET}-event",
            [f"{SECRET}-box1", f"{SECRET}-box2"],
            {"p": f"{SECRET}-hook"},
            {"answer": f"{SECRET}-answer"},
            f"{SECRET}-child-result/{SECRET}-child-arg",
            f"{SECRET}-step-error/{SECRET}-fail-arg",
        ],
        "text": f"{SECRET}-arg",
        "result": f"{SECRET}-result",
    }


def stored_bytes(url: str) -> bytes:
    """Everything the database holds on disk: the SQLite file and its WAL, or a pg_dump."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    dumped = subprocess.run(["pg_dump", "--dbname", url], capture_output=True, check=True)
    return dumped.stdout


async def test_encryption__every_kind_of_value_round_trips_and_none_is_stored_in_the_clear(
    kit: Kit,
) -> None:
    everything, broken = declare(kit)
    async with kit.engine(codec=codec()) as engine:
        run_id, failed_id = await drive(engine, everything, broken)
        assert await engine.control.result(run_id) == expected()
        with pytest.raises(cairn.RunFailed) as caught:
            await engine.control.result(failed_id)
        assert f"{SECRET}-run-error/{SECRET}-broken-arg" in str(caught.value)
        assert [v async for v in engine.read_stream(run_id, "out")] == [f"{SECRET}-chunk"]
        history = await engine.history(run_id)
        failed_step = next(e for e in history if e.name == "enc.fail")
        assert SECRET in (failed_step.error or {}).get("message", "")
        step_input = {"args": [f"{SECRET}-step-arg"], "kwargs": {}}
        assert any(e.input == step_input for e in history)
        attempts = await engine.control.attempts(run_id)
        assert attempts and SECRET in attempts[0]["message"]
        (task,) = await engine.tasks.list(status=None, run_id=run_id)
        assert task.values == {"answer": f"{SECRET}-answer"}
        assert task.data == {"d": f"{SECRET}-task-data"}
        assert SECRET.encode() not in stored_bytes(kit.url)  # the WAL still open
    assert SECRET.encode() not in stored_bytes(kit.url)
    sealed = execute(kit.url, "SELECT args, result FROM runs WHERE run_id = ?", (run_id,))[0]
    assert all(text.startswith("aesgcm:k1:") for text in sealed)


async def test_encryption__without_a_codec_the_marker_is_found(kit: Kit) -> None:
    # The check above can see plaintext: without a codec every kind of value is there.
    everything, broken = declare(kit)
    async with kit.engine() as engine:
        run_id, _ = await drive(engine, everything, broken)
        assert await engine.control.result(run_id) == expected()
    stored = stored_bytes(kit.url)
    for marker in ("-arg", "-step-error", "-run-error", "-answer", "-hook", "-chunk", "-box1"):
        assert f"{SECRET}{marker}".encode() in stored, marker


async def test_encryption__keys_rotate_rekey_rewrites_and_readers_without_keys_see_the_key_id(
    kit: Kit,
) -> None:
    everything, broken = declare(kit)
    async with kit.engine(codec=codec()) as engine:
        run_id, failed_id = await drive(engine, everything, broken)
    both = codec("k2", k1=K1, k2=K2)
    async with kit.engine(codec=both) as engine:
        assert await engine.control.result(run_id) == expected()  # k1's values, under k2
        await drive(engine, everything, broken)  # new values under k2
        heads = {t[:10] for (t,) in execute(kit.url, "SELECT args FROM runs")}
        assert heads == {"aesgcm:k1:", "aesgcm:k2:"}
        done = await rekeying.rekey(engine.store, both, batch=3)
        assert done["runs.args"] == 3 and done["steps.error"] >= 1
        assert await rekeying.rekey(engine.store, both) == {}  # nothing left: safe to rerun
        # Nothing under k1 anywhere, nested ones included (a child's result in its
        # parent's history, inside the wait's record).
        for table, _, columns in SEALED_COLUMNS:
            for column in columns:
                query = f"SELECT COUNT(*) FROM {table} WHERE {column} LIKE ?"
                assert execute(kit.url, query, ("%aesgcm:k1:%",)) == [(0,)], (table, column)
    async with kit.engine(codec=codec("k2", k2=K2)) as engine:  # k1 retired
        assert await engine.control.result(run_id) == expected()
        with pytest.raises(cairn.RunFailed, match="run-error"):
            await engine.control.result(failed_id)
    async with kit.engine() as engine:  # an operator without keys
        shown = run_forms.run_dict(await run_forms.fetch(engine.control, failed_id))
        assert shown["args"] == "encrypted (k2)" and shown["error"]["message"] == "encrypted (k2)"
        shown = run_forms.run_dict(await run_forms.fetch(engine.control, run_id))
        assert shown["result"] == "encrypted (k2)"
        (listed,) = (await engine.list_runs(workflow="enc.broken")).runs[:1]
        assert listed.error == {
            "type": "",
            "message": "encrypted (k2)",
            "traceback": "",
            "encrypted": "k2",
        }
        history = await engine.history(run_id)
        assert any(e.result == "encrypted (k2)" for e in history)
        (task,) = await engine.tasks.list(status=None, run_id=run_id)
        assert task.values == "encrypted (k2)" and task.data == "encrypted (k2)"
        attempts = await engine.control.attempts(run_id)
        assert attempts[0]["message"] == "encrypted (k2)"
        with pytest.raises(cairn.CairnError, match="'k2'"):
            await engine.control.result(run_id)


async def test_encryption__a_key_dropped_too_soon_fails_naming_it(kit: Kit) -> None:
    everything, broken = declare(kit)
    async with kit.engine(codec=codec()) as engine:
        run_id, _ = await drive(engine, everything, broken)
    async with kit.engine(codec=codec("k2", k2=K2)) as engine:
        with pytest.raises(cairn.CairnError, match=r"key 'k1', which is not among .*\(k2\)"):
            await engine.control.result(run_id)
        with pytest.raises(cairn.CairnError, match="'k1'"):
            await rekeying.rekey(engine.store, codec("k2", k2=K2))
    async with kit.engine(codec=codec("k1", k1=K2)) as engine:  # a wrong key under k1's id
        with pytest.raises(cairn.CairnError, match="key 'k1': the key is not the one"):
            await engine.control.result(run_id)


async def test_encryption__a_client_encrypts_what_it_stores_and_reads_it_back(kit: Kit) -> None:
    _, broken = declare(kit)
    async with kit.engine(codec=codec()) as engine:
        client = await asyncio.to_thread(
            cairn.Client, kit.url, registry=kit.registry, codec=codec()
        )
        try:
            handle = await asyncio.to_thread(client.start, broken, f"{SECRET}-client-arg")
            await until(engine, handle.run_id, "FAILED")
            with pytest.raises(cairn.RunFailed, match=f"{SECRET}-run-error/{SECRET}-client-arg"):
                await asyncio.to_thread(handle.result, WAIT)
        finally:
            await asyncio.to_thread(client.close)
    (args,) = execute(kit.url, "SELECT args FROM runs WHERE run_id = ?", (handle.run_id,))[0]
    assert args.startswith("aesgcm:k1:")
    assert SECRET.encode() not in stored_bytes(kit.url)
