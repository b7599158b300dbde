"""cairn.steps.tags and wait.until_tag_equals against a real OPC UA server (asyncua)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import cairn
from cairn.steps import (
    OpcUaProvider,
    TagError,
    TagProvider,
    TagUnavailable,
    WaitTimeout,
    tags,
    wait,
)
from engine.kit import WAIT, Kit

from .conftest import VARIABLES, OpcUaServer, closed_port


@pytest.fixture
def plc(opcua_server: OpcUaServer) -> Iterator[OpcUaServer]:
    """The session's OPC UA server, its variables back at their first values."""
    for name, (initial, _) in VARIABLES.items():
        opcua_server.set(name, initial)
    yield opcua_server


def node(plc: OpcUaServer, name: str) -> str:
    return f"ns={plc.namespace};s=Line1.{name}"


def machine(plc: OpcUaServer, command: str, then: tuple[str, Any]) -> Future[None]:
    """A machine on the server: once `command` reads its value, it sets `then` (soon after)."""
    watched, (target, value) = plc.nodes[command], then
    wanted = "start"

    async def run() -> None:
        while await watched.read_value() != wanted:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        await plc.nodes[target].write_value(value, plc.kinds[target])

    return asyncio.run_coroutine_threadsafe(run(), plc.loop)


async def test_tags__a_value_written_is_read_back(kit: Kit, plc: OpcUaServer) -> None:
    speed = node(plc, "Speed")

    @kit.workflow("tags.roundtrip")
    async def flow() -> list[Any]:
        await tags.write(speed, 40)  # a Python int, written as the node's Int32
        by_path = await tags.read(f"{plc.namespace}:Line1/{plc.namespace}:Speed")
        return [await tags.read(speed), by_path]

    async with kit.engine(tags=plc.url.replace("opc.tcp://", "opcua://")) as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == [40, 40]
        history = await engine.history(run.run_id)
    assert plc.get("Speed") == 40
    assert [(h.name, h.input["args"][0]) for h in history] == [
        ("tags.write", speed),
        ("tags.read", f"{plc.namespace}:Line1/{plc.namespace}:Speed"),
        ("tags.read", speed),
    ]


async def test_tags__write_confirm_reads_the_value_back(sqlite_kit: Kit, plc: OpcUaServer) -> None:
    setpoint = node(plc, "Setpoint")

    @sqlite_kit.workflow("tags.confirm")
    async def flow() -> Any:
        # A 32-bit float reads back 12.300000190734863: confirmed all the same.
        return await tags.write_confirm(setpoint, 12.3, timeout_ms=2000, poll_ms=50)

    async with sqlite_kit.engine(tags=plc.url) as engine:
        confirmed = await (await engine.start(flow)).result(timeout=WAIT)
    assert confirmed == pytest.approx(12.3) and plc.get("Setpoint") == pytest.approx(12.3)


async def test_tags__write_confirm_on_another_tag(sqlite_kit: Kit, plc: OpcUaServer) -> None:
    command, ack = node(plc, "Command"), node(plc, "Ack")
    running = machine(plc, "Command", ("Ack", "start"))

    @sqlite_kit.workflow("tags.handshake")
    async def flow() -> Any:
        return await tags.write_confirm(command, "start", ack, timeout_ms=5000, poll_ms=50)

    async with sqlite_kit.engine(tags=plc.url) as engine:
        assert await (await engine.start(flow)).result(timeout=WAIT) == "start"
    running.result(timeout=WAIT)


async def test_tags__write_confirm_times_out_with_a_clear_error(
    sqlite_kit: Kit, plc: OpcUaServer
) -> None:
    command, ack = node(plc, "Command"), node(plc, "Ack")

    @sqlite_kit.workflow("tags.unconfirmed")
    async def flow() -> str:
        try:
            await tags.write_confirm(command, "stop", confirm_path=ack, timeout_ms=300, poll_ms=50)
        except WaitTimeout as exc:  # not retried: writing again is the operator's call
            assert exc.fatal and exc.attempts == 1
            return exc.error_message
        return "confirmed"

    async with sqlite_kit.engine(tags=plc.url) as engine:
        message = await (await engine.start(flow)).result(timeout=WAIT)
    assert message == (
        f"tag {ack!r} did not read 'stop' within 300 ms after writing {command!r} (last read: '')"
    )
    assert plc.get("Command") == "stop"


async def test_tags__until_tag_equals(sqlite_kit: Kit, plc: OpcUaServer) -> None:
    running_node = node(plc, "Running")
    machine(plc, "Command", ("Running", True))

    @sqlite_kit.workflow("tags.wait")
    async def flow() -> list[Any]:
        await tags.write(node(plc, "Command"), "start")
        started = await wait.until_tag_equals(running_node, True, timeout_ms=5000, poll_ms=50)
        try:
            await wait.until_tag_equals(node(plc, "Speed"), 99, timeout_ms=200, poll_ms=50)
        except WaitTimeout as exc:
            return [started, exc.error_message]
        return [started, "reached"]

    async with sqlite_kit.engine(tags=plc.url) as engine:
        result = await (await engine.start(flow)).result(timeout=WAIT)
    assert result == [
        True,
        f"tag {node(plc, 'Speed')!r} did not read 99 within 200 ms (last read: 0)",
    ]


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        ("Speed", "fast", "cannot write 'fast' as Int32"),
        ("Speed", 1.5, "cannot write 1.5 as Int32"),
        (None, 1, "BadNodeIdUnknown"),
        ("ns=x;s=", 1, "not an OPC UA node id"),
    ],
)
async def test_tags__bad_tags_and_values_fail_at_once(
    sqlite_kit: Kit, plc: OpcUaServer, path: str | None, value: Any, error: str
) -> None:
    target = node(plc, path) if path in VARIABLES else (path or f"ns={plc.namespace};s=Nope")

    @sqlite_kit.workflow("tags.bad")
    async def flow() -> str:
        try:
            await tags.write(target, value)
        except TagError as exc:
            assert exc.attempts == 1
            return exc.error_message
        return "written"

    async with sqlite_kit.engine(tags=plc.url) as engine:
        message = await (await engine.start(flow)).result(timeout=WAIT)
    assert message.startswith(f"tag {target!r}: ") and error in message


@pytest.mark.parametrize(
    ("provider", "error"),
    [
        (None, 'no tag provider: set [tool.cairn.tags] provider = "opcua://host:4840"'),
        ("modbus://plc:502", "tag provider 'modbus://plc:502': unknown scheme"),
        ("no_such_module_here:provider", "cannot be imported"),
        ("plainword", "write a URL (opcua://host:4840) or module:attribute"),
        (object(), "has no async read(path) and write(path, value)"),
    ],
)
async def test_tags__provider_errors(sqlite_kit: Kit, provider: Any, error: str) -> None:
    @sqlite_kit.workflow("tags.noprovider")
    async def flow() -> str:
        try:
            await tags.read("ns=2;s=X")
        except TagError as exc:
            assert exc.attempts == 1
            return exc.error_message
        return "read"

    async with sqlite_kit.engine(tags=provider) as engine:
        assert error in await (await engine.start(flow)).result(timeout=WAIT)


async def test_tags__an_unreachable_server_is_retried(sqlite_kit: Kit) -> None:
    @sqlite_kit.workflow("tags.down")
    async def flow() -> str:
        try:
            await tags.read("ns=2;s=X", retries=cairn.Retry(max_attempts=2, delay=0))
        except TagUnavailable as exc:
            return f"{exc.attempts}: {exc.error_message}"
        return "read"

    url = f"opcua://127.0.0.1:{closed_port()}"
    async with sqlite_kit.engine(tags=url) as engine:
        result = await (await engine.start(flow)).result(timeout=WAIT)
    assert result.startswith(f"2: tag server opc.tcp://127.0.0.1:{url.rsplit(':', 1)[1]}: ")


class Memory:
    """A provider of one's own: tags in a dict."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {"line/state": "idle"}

    async def read(self, path: str) -> Any:
        if path not in self.values:
            raise TagError(f"no tag {path!r}", path=path)
        return self.values[path]

    async def write(self, path: str, value: Any) -> None:
        self.values[path] = value


async def test_tags__a_provider_of_ones_own(kit: Kit) -> None:
    memory = Memory()
    assert isinstance(memory, TagProvider)

    @kit.workflow("tags.memory")
    def flow() -> list[Any]:  # a sync workflow: the values themselves
        tags.write("line/state", "busy")
        confirmed = tags.write_confirm("line/speed", 3, timeout_ms=100, poll_ms=10)
        return [tags.read("line/state"), confirmed]

    async with kit.engine(tags=memory) as engine:
        assert await (await engine.start(flow)).result(timeout=WAIT) == ["busy", 3]


async def test_tags__outside_a_run(plc: OpcUaServer) -> None:
    async with OpcUaProvider(plc.url) as provider:
        await provider.write(node(plc, "Command"), "hello")
        assert await provider.read(node(plc, "Command")) == "hello"
    with pytest.raises(TagError, match="no tag provider"):
        await tags.read(node(plc, "Command"))  # outside a run: pyproject.toml's (none here)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: tags.read(""), "tags.read: a tag path must be a non-empty string"),
        (lambda: tags.write(7, 1), "tags.write: a tag path must be a non-empty string"),
        (lambda: tags.write_confirm("a", 1, timeout_ms=-1), "timeout_ms must be a positive"),
        (lambda: tags.write_confirm("a", 1, poll_ms="fast"), "poll_ms must be a positive"),
        (lambda: tags.write_confirm("a", 1, confirm_path=""), "confirm_path: a tag path"),
        (lambda: wait.until_tag_equals("", 1), "a tag path must be a non-empty string"),
        (lambda: wait.until_tag_equals("a", 1, timeout_ms=0), "timeout_ms must be a positive"),
        (lambda: OpcUaProvider("http://plc"), "unknown scheme"),
    ],
)
def test_tags__bad_arguments_fail_at_the_call(call: Any, error: str) -> None:
    with pytest.raises((ValueError, TagError), match=error):
        call()
